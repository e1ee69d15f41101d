"""Recorded references without HF: how a question is keyed, what an answer may hold, replay, the
reference folder's refusals (other weights, profile, plan, transformers version, a corrupted or
missing answers file), its manifest against the shipped schema, and shards' arithmetic."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
import torch

from gemma4_static.oracle.groups import EVERY_SHARD, SPLIT_GROUP, names
from gemma4_static.oracle.references import reference_folder
from gemma4_static.oracle.references.recording import (
    NotRecorded,
    Recording,
    answered_or_none,
    digest_of,
    pack,
    recorded,
    unpack,
)
from gemma4_static.oracle.results import tolerances
from gemma4_static.oracle.shards import Shard
from gemma4_static.ports import PortSetup
from gemma4_static.ports.prompt import Prompt

CALLS: list[tuple] = []


@recorded
def question(model: torch.nn.Module, ids: torch.Tensor, *, scale: float = 1.0) -> dict:
    """A stand-in for a question to HF: counts its calls."""
    CALLS.append((ids.tolist(), scale))
    return {"logits": model(ids.float()) * scale, "pair": (ids.sum(), None), "nan": math.nan}


@dataclass(frozen=True)
class Foreign:
    value: torch.Tensor


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 2)


def test_a_question_is_keyed_by_every_argument_by_content():
    model, ids = _model(), torch.tensor([1, 2, 3])
    key = digest_of(((model, ids), {"scale": 1.0}))
    assert key == digest_of(((model, ids.clone()), {"scale": 1.0}))  # content, not identity
    assert key != digest_of(((model, torch.tensor([1, 2, 4])), {"scale": 1.0}))
    assert key != digest_of(((model, ids), {"scale": 2.0}))
    assert key != digest_of(((_model(seed=1), ids), {"scale": 1.0}))  # other weights
    assert key != digest_of(((model, ids.to(torch.int32)), {"scale": 1.0}))  # another dtype
    with pytest.raises(TypeError, match="cannot be keyed on a function"):
        digest_of(lambda: None)


def test_answers_round_trip_through_the_packed_form():
    prompt = Prompt(torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.long))
    value = {"a": (torch.arange(3.0), [1, 2.5, None]), 7: prompt, "dtype": torch.bfloat16, "nan": math.nan}
    tensors: dict[str, torch.Tensor] = {}
    back = unpack(json.loads(json.dumps(pack(value, tensors, "k"), allow_nan=False)), tensors)
    assert torch.equal(back["a"][0], value["a"][0]) and back["a"][1] == [1, 2.5, None]
    assert isinstance(back["a"], tuple) and back["dtype"] is torch.bfloat16 and math.isnan(back["nan"])
    assert torch.equal(back[7].input_ids, prompt.input_ids) and isinstance(back[7], Prompt)
    with pytest.raises(TypeError, match="Foreign"):
        pack(Foreign(torch.zeros(1)), {}, "k")
    with pytest.raises(ValueError, match="not one of gemma4_static's dataclasses"):
        unpack({"dataclass": "os:PathLike", "fields": {}}, {})


def test_record_then_replay_answers_without_computing():
    model, ids = _model(), torch.tensor([1, 2, 3])
    recording = Recording("record")
    CALLS.clear()
    with recording.active():
        first = question(model, ids)
        again = question(model, ids)  # asked twice, computed once
    assert len(CALLS) == 1 and torch.equal(first["logits"], again["logits"])
    replay = Recording("replay", recording.calls, recording.tensors)
    with replay.active():
        answer = question(model, ids)
        answer["logits"].zero_()  # a caller writing into its answer does not change the recording
        assert torch.equal(question(model, ids)["logits"], first["logits"])
        with pytest.raises(NotRecorded, match="question"):
            question(model, ids, scale=2.0)
        assert answered_or_none(question, model, torch.tensor([9])) is None
    assert len(CALLS) == 1 and replay.asked == 4
    assert question(model, ids)["pair"][1] is None and len(CALLS) == 2  # no recording active: computed


def test_a_live_recording_counts_its_questions_and_passes_them_to_its_outer():
    model, ids = _model(), torch.tensor([1, 2, 3])
    outer, CALLS[:] = Recording("record"), []
    with outer.active():
        question(model, ids)
        live = Recording("live", outer=outer)
        with live.active():
            question(model, ids)  # answered by the outer recording: not computed again
            question(model, ids, scale=2.0)  # computed once, and kept by the outer recording
        question(model, ids, scale=2.0)
    assert len(CALLS) == 2 and live.asked == 2 and outer.asked == 4 and len(outer.calls) == 2
    alone = Recording("live")
    with alone.active():
        question(model, ids)
    assert len(CALLS) == 3 and alone.asked == 1 and not alone.calls  # computed, counted, kept nowhere


def _folder(tmp_path: Path, model: torch.nn.Module) -> Path:
    reference = reference_folder.new_reference(tmp_path / "ref", model, "linear")
    reference.label = ("gemma4-static", False)
    prompt = Prompt(torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.long))
    reference.note_plan("float32", prompt, 3, PortSetup(6, 1))
    with reference.recording.active():
        question(model, torch.tensor([1, 2, 3]))
    reference_folder.save_reference(reference, {"sample prompt": 0})
    return reference.folder


def test_a_reference_folder_is_refused_for_other_weights_profile_or_plan(tmp_path):
    model = _model()
    folder = _folder(tmp_path, model)
    text = (folder / "manifest.json").read_text()
    manifest = json.loads(text)
    jsonschema.validate(manifest, reference_folder.schema(), format_checker=jsonschema.FormatChecker())
    assert len(text.splitlines()) > 20  # indented, one entry a line: two references diff line by line
    recorded_under = manifest["tolerances"]  # the tolerances of the suite that recorded it, by name
    assert recorded_under["export_relative"] == tolerances.EXPORT_RELATIVE
    assert recorded_under["relative"]["float32"] == tolerances.RELATIVE[torch.float32]
    assert recorded_under["rope"]["float32"] == tolerances.ROPE[torch.float32]
    reference = reference_folder.open_reference(folder)
    reference.admit_model(model, "float32")
    with pytest.raises(ValueError, match="recorded for model 'linear' with fingerprint") as refused:
        reference.admit_model(_model(seed=1), "float32")
    assert str(refused.value).endswith("(another model, config or weights): record it again for them")
    recorded, given = re.search(
        r"fingerprint ([0-9a-f]+)\.\.\.; the weights given have ([0-9a-f]+)\.\.\. ", str(refused.value)
    ).groups()
    assert recorded == manifest["model"]["fingerprint"][:16] and len(given) == 16 and given != recorded
    with pytest.raises(ValueError, match=r"not 'bfloat16': record it with --dtype bfloat16"):
        reference.admit_model(model, "bfloat16")
    prompt = Prompt(torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.long))
    reference.admit_plan("gemma4-static", prompt, 3, PortSetup(6, 1))
    with pytest.raises(ValueError, match="record it with --port executorch-gemma4"):
        reference.admit_plan("executorch-gemma4", prompt, 4, PortSetup(6, 1))
    assert "linear, 1 answers" in reference.describe()


def test_a_saved_reference_answers_from_its_folder_and_saves_again_into_it(tmp_path):
    """Read back, the answer is the recorded one, tensors and all, without computing it; saved again
    into its own folder (recorded anew), it is written over."""
    model = _model()
    folder = _folder(tmp_path, model)
    expected = question(model, torch.tensor([1, 2, 3]))
    reference, asked = reference_folder.open_reference(folder), len(CALLS)
    with reference.recording.active():
        answer = question(model, torch.tensor([1, 2, 3]))
    assert len(CALLS) == asked and torch.equal(answer["logits"], expected["logits"])
    assert int(answer["pair"][0]) == 6 and math.isnan(answer["nan"])
    reference_folder.save_reference(reference, {"sample prompt": 1})
    assert reference_folder.open_reference(folder).manifest["seeds"] == {"sample prompt": 1}


def test_a_corrupted_missing_or_foreign_reference_is_never_judged(tmp_path):
    folder = _folder(tmp_path, _model())
    answers = folder / "answers.safetensors"
    data = bytearray(answers.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in a tensor
    answers.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="does not match the sha256 its manifest names"):
        reference_folder.open_reference(folder)
    answers.unlink()
    with pytest.raises(ValueError, match="is missing"):
        reference_folder.open_reference(folder)
    with pytest.raises(ValueError, match="reference must be a folder written by gemma4-static record"):
        reference_folder.open_reference(tmp_path / "nowhere")
    other = _folder(tmp_path / "other", _model())
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["versions"]["transformers"] = "4.0.0"
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"recorded with transformers 4\.0\.0"):
        reference_folder.open_reference(other)
    manifest["reference_version"] = 99
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="manifest version 99"):
        reference_folder.open_reference(other)
    (other / "manifest.json").write_text(json.dumps([manifest]))  # JSON, but no manifest: no version in it
    with pytest.raises(ValueError, match=r"manifest version None, this release reads"):
        reference_folder.open_reference(other)


@pytest.mark.parametrize("count", [1, 2, 4, 5])
def test_shards_run_every_group_once_and_split_the_grid(count):
    groups = list(names())
    shards = [Shard(index, count) for index in range(1, count + 1)]
    runs = [name for shard in shards for name in shard.groups(groups, EVERY_SHARD)]
    for name in groups:
        assert runs.count(name) == (count if name in EVERY_SHARD else 1), name
    costs = {length: 3 * length + 7 for length in range(1, 24)}  # a grid's port calls per prompt length
    shares = [shard.share(costs) for shard in shards]
    assert sorted(length for share in shares for length in share) == sorted(costs)  # each exactly once
    loads = [sum(costs[length] for length in share) for share in shares]
    assert max(loads) - min(loads) <= max(costs.values())  # balanced: the costliest first, to the least loaded
    assert SPLIT_GROUP in EVERY_SHARD


@pytest.mark.parametrize("text", ["0/4", "5/4", "2", "a/b", "2/0", "-1/3"])
def test_a_bad_shard_is_refused_by_name(text):
    with pytest.raises(ValueError, match=r"shard must be I/N"):
        Shard.parse(text)


def test_record_and_verify_refuse_bad_arguments_by_name(tmp_path, capsys, reuse_session_models):
    from gemma4_static.commands import cli

    assert cli.main(["record", "--out", str(tmp_path / "ref"), "--port", "no-such-port"]) == 2
    assert "port must be a built-in name" in capsys.readouterr().err  # the port, the value, what is expected
    assert cli.main(["verify", "--self-test", "--reference", str(tmp_path)]) == 2
    assert "--self-test injects faults into live runs" in capsys.readouterr().err
    assert cli.main(["verify", "--shard", "5/4"]) == 2
    assert "shard must be I/N with 1 <= I <= N, got 5/4" in capsys.readouterr().err


def test_record_checks_its_folder_before_any_work(tmp_path, capsys, no_model):
    """A file, a place that cannot be written, a reference already there (without ``--force``) or a
    folder of other files: each refused by name, exit 2, before a model is built."""
    from gemma4_static.commands import cli

    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / reference_folder.MANIFEST).write_text("{}")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    for out, message in (
        (blocked, f"--out {blocked} is a file, not a folder for a reference"),
        (blocked / "below", f"--out {blocked / 'below'} cannot be written"),
        (existing, f"--out {existing} holds a reference already: --force replaces it"),
        (other, f"--out {other} is a folder of other files, not a reference: --force writes beside them"),
    ):
        assert cli.main(["record", "--out", str(out), "--quiet"]) == 2, out
        assert message in capsys.readouterr().err


def test_a_checked_folder_is_left_as_it_was_found(tmp_path):
    """The check creates what it must to try a write, and removes it again; ``force`` admits a
    reference to replace and a folder of other files."""
    deep = tmp_path / "a" / "b" / "reference"
    reference_folder.checked_output(deep)
    assert not (tmp_path / "a").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / reference_folder.MANIFEST).write_text("{}")
    reference_folder.checked_output(existing, force=True)
    assert sorted(path.name for path in existing.iterdir()) == [reference_folder.MANIFEST]
