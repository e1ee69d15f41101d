"""A damaged or foreign checkpoint folder is a clear ``ValueError`` naming the file and the problem,
and loading never writes to the folder. The checkpoint is the tiny model saved with
``save_pretrained`` (``config.json`` + ``model.safetensors``), damaged one way per test. A sound
one is described from its headers (stored dtype, parameters, bytes) and loads in the dtype asked
for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from gemma4_static.oracle.references.checkpoints import load_checkpoint, open_checkpoint


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {path.name: (path.stat().st_size, path.stat().st_mtime_ns) for path in sorted(folder.iterdir())}


def _edit_config(folder: Path, edit) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


def _truncate_weights(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _drop_a_tensor(folder: Path) -> None:
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    tensors.pop(next(name for name in tensors if name.endswith("layers.0.input_layernorm.weight")))
    save_file(tensors, weights, metadata={"format": "pt"})


FAULTS = {
    "a tensor missing": (
        _drop_a_tensor,
        r"checkpoint '[^']*checkpoint': its weights do not match its config: \{'missing_keys': "
        r"\['model\.language_model\.layers\.0\.input_layernorm",
    ),
    "truncated weights": (_truncate_weights, r"weights '.*model\.safetensors' cannot be read"),
    "another model type": (
        lambda folder: _edit_config(folder, lambda c: c.update(model_type="llama")),
        r"config\.json' has model_type='llama'; expected a Gemma 4",
    ),
    "missing model_type": (
        lambda folder: _edit_config(folder, lambda c: c.pop("model_type")),
        r"config\.json' has model_type=None; expected a Gemma 4",
    ),
    "not JSON": (
        lambda folder: (folder / "config.json").write_text("{not json"),
        r"config\.json' is not a JSON object",
    ),
    "weights of another size": (
        lambda folder: _edit_config(folder, lambda c: c["text_config"].update(hidden_size=96)),
        r"checkpoint '[^']*checkpoint': its weights do not match its config",
    ),
    "no weights": (
        lambda folder: (folder / "model.safetensors").unlink(),
        r"checkpoint '[^']*checkpoint' has no \*\.safetensors weights",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_damaged_checkpoints_are_clear_errors(saved, tmp_path, fault):
    folder = tmp_path / "checkpoint"
    shutil.copytree(saved, folder)
    damage, message = FAULTS[fault]
    damage(folder)
    before = _snapshot(folder)
    with pytest.raises(ValueError, match=message):
        load_checkpoint(folder)
    assert _snapshot(folder) == before  # nothing written


def test_the_saved_checkpoint_loads_as_saved(saved, tiny_model):
    before = _snapshot(saved)
    model = load_checkpoint(saved)
    assert _snapshot(saved) == before
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), tiny_model.state_dict().items(), strict=True):
        assert mine.equal(theirs), name


def test_a_checkpoint_is_described_from_its_headers(saved):
    files = open_checkpoint(saved)
    tensors = load_file(str(saved / "model.safetensors"))  # every stored tensor: parameters and saved buffers
    parameters = sum(tensor.numel() for tensor in tensors.values() if tensor.is_floating_point())
    assert (files.parameters, files.stored_dtype) == (parameters, torch.float32)
    assert files.size_bytes == 4 * parameters
    assert files.describe() == {
        "path": str(saved),
        "stored_dtype": "float32",
        "parameters": parameters,
        "size_bytes": 4 * parameters,
    }


def test_a_checkpoint_of_two_dtypes_is_stored_in_the_one_holding_most_bytes(saved_bfloat16, tmp_path):
    """A float32 tensor beside the bfloat16 weights (as a checkpoint keeping a few tensors wide)."""
    folder = tmp_path / "mixed"
    shutil.copytree(saved_bfloat16, folder)
    save_file({"wide": torch.zeros(10, 10)}, str(folder / "wide.safetensors"))
    alone, mixed = open_checkpoint(saved_bfloat16), open_checkpoint(folder)
    assert (mixed.stored_dtype, mixed.parameters) == (torch.bfloat16, alone.parameters + 100)
    assert mixed.size_bytes == alone.size_bytes + 400


def test_a_checkpoint_loads_in_the_dtype_asked_for(saved_bfloat16, tiny_model):
    assert open_checkpoint(saved_bfloat16).stored_dtype == torch.bfloat16
    stored = load_checkpoint(saved_bfloat16)
    assert {parameter.dtype for parameter in stored.parameters()} == {torch.bfloat16}
    widened = load_checkpoint(saved_bfloat16, torch.float32)
    assert {parameter.dtype for parameter in widened.parameters()} == {torch.float32}
    for (name, mine), (_, theirs) in zip(widened.state_dict().items(), stored.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs.float()), name  # bfloat16 is exact in float32


def test_a_checkpoint_of_no_floating_tensor_is_a_clear_error(saved, tmp_path):
    folder = tmp_path / "checkpoint"
    shutil.copytree(saved, folder)
    save_file({"counts": torch.arange(4)}, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match=r"checkpoint '.*checkpoint' holds no floating-point tensor"):
        open_checkpoint(folder)


def test_a_checkpoint_is_read_from_its_folder_alone(saved, monkeypatch):
    """transformers is told to read the folder only, the config as the weights (no hub lookup, whatever
    the environment says)."""
    from gemma4_static.oracle.references import checkpoints

    asked = []
    real = checkpoints.model_class

    class Spy:
        @staticmethod
        def from_pretrained(folder, **options):
            asked.append(options)
            return real(open_checkpoint(folder).config).from_pretrained(folder, **options)

    import transformers

    configs = []
    read_config = transformers.AutoConfig.from_pretrained

    def config_spy(folder, **options):
        configs.append(options)
        return read_config(folder, **options)

    monkeypatch.setattr(checkpoints, "model_class", lambda config: Spy)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", config_spy)
    load_checkpoint(saved)
    assert [options["local_files_only"] for options in asked] == [True]
    assert configs and all(options["local_files_only"] for options in configs)
