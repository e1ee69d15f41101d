"""``gemma4-static new-port NAME``: the adapter skeleton runs through the suite and its verdict says
nothing was compared; one stage filled in shows in the coverage; the test file it writes runs the
check groups (all skipped, each with the skeleton's reason); bad names and existing files are refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemma4_static.commands import cli

FILLED = """
from skeleton_npu import SkeletonNpuPort


class OneStage(SkeletonNpuPort):
    name = "skeleton-npu, its token embedding filled in"

    def __init__(self, model, setup):
        super().__init__(model, setup)
        self.embed = model.get_input_embeddings()  # HF's scaled embedding: the weights it would convert

    def token_embedding(self, input_ids):
        return self.embed(input_ids)
"""


@pytest.mark.usefixtures("reuse_session_models", "hf_answers_kept")  # the session's model, HF asked once
def test_the_skeleton_compares_nothing_until_a_stage_is_filled_in(tmp_path, monkeypatch, capsys):
    assert cli.main(["new-port", "skeleton-npu", "--folder", str(tmp_path)]) == 0
    assert "verify --port skeleton_npu:SkeletonNpuPort" in capsys.readouterr().out
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli.main(["verify", "--port", "skeleton_npu:SkeletonNpuPort", "--no-export"]) == 5
    out = capsys.readouterr().out
    assert "coverage: nothing compared; verdict: nothing failed, but anything not compared (exit 5)" in out
    assert "skeleton-npu does not expose its prefill yet" in out
    (tmp_path / "one_stage.py").write_text(FILLED)
    assert cli.main(["verify", "--port", "one_stage:OneStage", "--no-export"]) == 5
    out = capsys.readouterr().out
    assert "PASS  token embedding   vs get_input_embeddings" in out
    assert "coverage: (0 of 10 layers): token embedding; 1 of 15 check groups" in out
    assert "verdict: nothing failed, but prefill logits and decode steps not compared (exit 5)" in out


@pytest.mark.ports  # the skeleton's test file through the plugin, ~9 s: the ports lane
def test_the_written_test_file_runs_every_check_group(tmp_path):
    assert cli.main(["new-port", "file-npu", "--folder", str(tmp_path)]) == 0
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_file_npu.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "17 skipped" in result.stdout.strip().splitlines()[-1]


def test_bad_names_and_existing_files_are_refused(tmp_path, capsys):
    assert cli.main(["new-port", "My NPU", "--folder", str(tmp_path)]) == 2
    assert "name must be lowercase letters, digits, '-' or '_', starting with a letter; got 'My NPU'" in (
        capsys.readouterr().err
    )
    assert cli.main(["new-port", "twice", "--folder", str(tmp_path)]) == 0
    assert cli.main(["new-port", "twice", "--folder", str(tmp_path)]) == 2
    assert "new-port writes no file over another" in capsys.readouterr().err
