"""An HF Gemma 4 model written as a released checkpoint folder: the weights of the text decoder
under ``model.language_model.`` (as ``Gemma4ForConditionalGeneration`` checkpoints hold them, the
layout other ports' converters read), whatever class the model is, as safetensors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from safetensors.torch import save_file

RELEASED_PREFIX = "model.language_model."


def released_state_dict(model: Any) -> dict[str, Any]:
    """``model``'s weights keyed as in a released checkpoint (a text-only ``Gemma4ForCausalLM``'s
    ``model.`` keys move under ``model.language_model.``; the tied LM head is left out)."""
    multimodal = hasattr(model.model, "language_model")
    state = {}
    for key, tensor in model.state_dict().items():
        if key == "lm_head.weight":
            continue
        if not multimodal and key.startswith("model."):
            key = RELEASED_PREFIX + key.removeprefix("model.")
        state[key] = tensor.detach().contiguous().clone()
    return state


def save_released_layout(model: Any, folder: Path) -> Path:
    """Write ``model.safetensors`` (:func:`released_state_dict`) and ``config.json`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.safetensors"
    save_file(released_state_dict(model), str(path))
    model.config.to_json_file(str(folder / "config.json"))
    return path
