"""Judging from a recorded reference (ports lane): ``gemma4-static record`` on the tiny model for this
runtime and ExecuTorch's port (on a stand-in: this runtime under its limits), then each port judged
from the recording while HF cannot run (every module of the HF model, its mask functions and rotary
module refuse), giving the live run's rows exactly; four shards of the recorded run merged give the
whole run's rows and verdict; a run the recording does not answer is refused with the reason."""

from __future__ import annotations

import contextlib
import json
from unittest import mock

import pytest
from transformers import masking_utils
from transformers.models.gemma4 import modeling_gemma4

from gemma4_static.commands import cli, pytest_items
from gemma4_static.oracle.flow import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.reference_folder import open_reference

pytestmark = [pytest.mark.ports, pytest.mark.xdist_group("recorded-reference")]
pytest.importorskip("executorch", reason="the ports lane needs the ports extra: pip install -e '.[ports]'")


def _key(row: dict) -> tuple:
    return tuple(row[field] for field in ("group", "stage", "check", "metric", "status", "value", "tolerance", "hf"))


@contextlib.contextmanager
def hf_cannot_run(model):
    """Every module of ``model`` of a transformers class (not the plain torch layers holding weights a
    port may run as its own) and HF's mask and RoPE functions raise while the block runs."""

    def refuse(module, args):
        raise AssertionError(f"HF's {type(module).__name__} ran while judging from a recording")

    modules = [module for module in model.modules() if type(module).__module__.startswith("transformers.")]
    handles = [module.register_forward_pre_hook(refuse) for module in modules]
    refusing = mock.Mock(side_effect=AssertionError("HF's masks ran while judging from a recording"))
    try:
        with (
            mock.patch.object(masking_utils, "create_masks_for_generate", refusing),  # where the oracle asks it
            mock.patch.object(modeling_gemma4.Gemma4TextRotaryEmbedding, "forward", refusing),
        ):
            yield
    finally:
        for handle in handles:
            handle.remove()


def test_a_recorded_run_gives_the_live_rows_without_running_hf(recorded_port, recorded, live_rows, tiny_model, report):
    port = recorded_port
    reference = open_reference(recorded)
    with hf_cannot_run(tiny_model):
        replayed = verify.verify(tiny_model, VerifyOptions(port=port, reference=reference))
    assert [_key(row.as_dict()) for row in replayed.rows] == [_key(row) for row in live_rows[port]]
    assert replayed.verdict.passed and reference.recording.asked > 0
    manifest = json.loads((recorded / "manifest.json").read_text())
    assert [plan["stand_in"] for plan in manifest["plans"]] == [False, True]
    report(f"{port}: {len(replayed.rows)} rows equal, {reference.recording.asked} answers read back")


def test_four_shards_of_a_recorded_run_merge_into_the_whole_run(recorded, live_rows, tmp_path, capsys):
    shards = []
    for index in range(1, 5):
        shards.append(tmp_path / f"shard{index}.json")
        arguments = ["--reference", str(recorded), "--shard", f"{index}/4", "--json", str(shards[-1]), "--quiet"]
        assert cli.main(["verify", "--config", "tiny", *arguments]) == 0
    merged = tmp_path / "merged.json"
    assert cli.main(["merge", *map(str, shards), "--json", str(merged)]) == 0
    document = json.loads(merged.read_text())
    assert [_key(row) for row in document["rows"]] == [_key(row) for row in live_rows["gemma4-static"]]
    assert "verdict: passed (exit 0)" in capsys.readouterr().out
    whole = verify.verdict_over([], 0)  # the merged coverage is the whole run's: every layer, every group
    assert document["coverage"].startswith("10 of 10 layers") and whole.exit_code == 5


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--config", "e2b-vision"], "recorded for model 'tiny' with fingerprint"),
        (["--config", "tiny", "--max-seq", "200"], "asks for 2 x"),
        (["--config", "tiny", "--dtype", "bfloat16"], "record it with --dtype bfloat16"),
        (["--config", "tiny", "--quant", "a8w8"], "an integer profile is judged live"),
    ],
)
def test_a_run_the_recording_does_not_answer_is_refused(recorded, arguments, message, capsys, reuse_session_models):
    assert cli.main(["verify", *arguments, "--reference", str(recorded), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1


def test_the_plugin_judges_the_check_groups_from_the_recording(recorded, pytester):
    arguments = ["-p", "gemma4_static.pytest_plugin", "--gemma4-port", "gemma4-static", "--gemma4-model", "tiny"]
    result = pytester.runpytest_inprocess(*arguments, "--gemma4-reference", str(recorded), "-k", "layers or decode")
    result.assert_outcomes(passed=3)  # layers, decode-masks, decode
    refused = pytester.runpytest_inprocess(*arguments, "--gemma4-reference", str(recorded / "nowhere"))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*reference must be a folder written by gemma4-static record*"])
    assert pytest_items.OPTIONS.get("--gemma4-reference") is None  # the inner sessions leave this one as it was
