"""Loading a real Gemma 4 checkpoint from a local folder: never from the network, never writing to
the folder, and every fault a clear ``ValueError`` naming the file and the problem.

:func:`open_checkpoint` reads what a checkpoint is without loading it (its config, and from the
safetensors headers its tensors' count, bytes and stored dtype: what a memory estimate needs);
:func:`load_checkpoint` loads it: by default in its stored dtype, its weights memory-mapped from the
files, nothing copied (what ``verify`` loads; every Gemma 4 checkpoint is stored in bfloat16, and a
profile in another dtype converts what it computes with: :func:`.streamed.converted`); in another
``dtype``, HF's model made in it, each tensor converted as it is read."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from transformers import AutoConfig, Gemma4ForCausalLM, Gemma4ForConditionalGeneration, PreTrainedModel

GEMMA4_MODEL_TYPES = ("gemma4", "gemma4_text")
SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
}


@dataclass(frozen=True)
class CheckpointFiles:
    """A checkpoint folder as its files describe it: ``config``, the ``weights`` files, its floating
    ``parameters`` (saved buffers included), their ``size_bytes``
    and ``stored_dtype`` (the dtype most of their bytes are in)."""

    folder: Path
    config: Any
    weights: tuple[Path, ...]
    parameters: int
    size_bytes: int
    stored_dtype: torch.dtype

    def describe(self) -> dict[str, Any]:
        """What a report records of it: path, stored dtype, parameters, bytes."""
        return {
            "path": str(self.folder),
            "stored_dtype": str(self.stored_dtype).removeprefix("torch."),
            "parameters": self.parameters,
            "size_bytes": self.size_bytes,
        }


def open_checkpoint(path: str | Path) -> CheckpointFiles:
    """The checkpoint in ``path`` (``config.json`` and ``*.safetensors``), its headers read, no weight."""
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
    weights = tuple(sorted(folder.glob("*.safetensors")))
    if not weights:
        raise ValueError(f"checkpoint {str(folder)!r} has no *.safetensors weights")
    elements: Counter[torch.dtype] = Counter()
    for file in weights:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (a safe_open handle is not iterable)
                    tensor = handle.get_slice(name)
                    dtype = SAFETENSORS_DTYPES.get(tensor.get_dtype())
                    if dtype is not None:
                        elements[dtype] += math.prod(tensor.get_shape())
        except Exception as error:  # safetensors raises its own error type for a damaged file
            raise ValueError(f"checkpoint weights {str(file)!r} cannot be read: {error}") from None
    if not elements:
        raise ValueError(f"checkpoint {str(folder)!r} holds no floating-point tensor")
    size = {dtype: count * dtype.itemsize for dtype, count in elements.items()}
    stored = max(size, key=size.get)
    return CheckpointFiles(folder, config, weights, sum(elements.values()), sum(size.values()), stored)


def model_class(config: Any) -> type[PreTrainedModel]:
    """HF's class of a Gemma 4 ``config``: the multimodal model for ``gemma4``, the text one else."""
    return Gemma4ForConditionalGeneration if config.model_type == "gemma4" else Gemma4ForCausalLM


def load_checkpoint(path: str | Path, dtype: torch.dtype | None = None) -> PreTrainedModel:
    """The Gemma 4 model saved in ``path``, in eval mode, in ``dtype`` (default: the dtype it was
    stored in, its weights memory-mapped from the files)."""
    files = open_checkpoint(path)
    folder = files.folder
    try:
        model, info = model_class(files.config).from_pretrained(
            folder, local_files_only=True, output_loading_info=True, dtype=dtype or files.stored_dtype
        )
    except (RuntimeError, ValueError, OSError) as error:
        raise ValueError(f"checkpoint {str(folder)!r}: its weights do not match its config: {error}") from None
    problems = {kind: info.get(kind) for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    problems = {kind: sorted(map(str, keys))[:5] for kind, keys in problems.items() if keys}
    if problems:
        raise ValueError(f"checkpoint {str(folder)!r}: its weights do not match its config: {problems}")
    return model.eval()
