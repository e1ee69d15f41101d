"""Loading a real Gemma 4 checkpoint from a local folder: never from the network, never writing to
the folder, and every fault a clear ``ValueError`` naming the file and the problem."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from transformers import AutoConfig, Gemma4ForCausalLM, Gemma4ForConditionalGeneration, PreTrainedModel

GEMMA4_MODEL_TYPES = ("gemma4", "gemma4_text")


def load_checkpoint(path: str | Path) -> PreTrainedModel:
    """The Gemma 4 model saved in ``path`` (``config.json`` and ``*.safetensors``), in eval mode."""
    folder = Path(path)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ValueError(f"checkpoint path {str(folder)!r} is not a folder with a config.json")
    try:
        model_type = json.loads(config_file.read_text()).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as error:
        raise ValueError(f"checkpoint {str(config_file)!r} is not a JSON object: {error}") from None
    if model_type not in GEMMA4_MODEL_TYPES:
        raise ValueError(f"checkpoint {str(config_file)!r} has model_type={model_type!r}; expected a Gemma 4")
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    except (ValueError, TypeError, KeyError, OSError) as error:
        raise ValueError(f"checkpoint {str(config_file)!r} is not a valid Gemma 4 config: {error}") from None
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise ValueError(f"checkpoint {str(folder)!r} has no *.safetensors weights")
    for file in weights:
        try:
            with safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except Exception as error:  # safetensors raises its own error type for a damaged file
            raise ValueError(f"checkpoint weights {str(file)!r} cannot be read: {error}") from None
    model_class = Gemma4ForConditionalGeneration if config.model_type == "gemma4" else Gemma4ForCausalLM
    try:
        model, info = model_class.from_pretrained(folder, local_files_only=True, output_loading_info=True)
    except (RuntimeError, ValueError, OSError) as error:
        raise ValueError(f"checkpoint {str(folder)!r}: its weights do not match its config: {error}") from None
    problems = {kind: info.get(kind) for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    problems = {kind: sorted(map(str, keys))[:5] for kind, keys in problems.items() if keys}
    if problems:
        raise ValueError(f"checkpoint {str(folder)!r}: its weights do not match its config: {problems}")
    return model.eval()
