"""The fuzzer in a port's integer scheme: each position judged against HF in float64 under the
scheme's gate (SQNR), a generated token against HF's greedy choice with the gate's margin, a static
scheme's port calibrated on the suite's prompts before its first call; and the command's ``--quant``."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from gemma4_static.commands import cli
from gemma4_static.oracle.episodes.judgement import Observed, greedy_divergence, judge_in_profile
from gemma4_static.oracle.faults.static_faults import StaticSchemePort
from gemma4_static.oracle.fuzz import FuzzTarget, fuzz
from gemma4_static.oracle.numerics.gates import quant_gate
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results.verdict import ExitCode
from gemma4_static.ports import Contracts

GATE_DB = 20.0


def references_and_observed(noise_at: tuple[int, int] | None, noise: float) -> tuple[dict, Observed]:
    """Two rows of reference logits over 6 positions; the port's equal to them but for ``noise``
    (relative) added at ``(row, position)``."""
    generator = torch.Generator().manual_seed(0)
    references = {row: torch.randn(6, 50, generator=generator, dtype=torch.float64) for row in (0, 1)}
    observed = Observed()
    for row, logits in references.items():
        for position in (2, 3, 5):
            ours = logits[position].float().clone()
            if (row, position) == noise_at:
                ours += noise * ours.norm() / math.sqrt(ours.numel()) * torch.randn(50, generator=generator)
            observed.add(row, position, ours, "decode step" if position == 5 else "prompt's last token")
    return references, observed


def test_a_profile_judgement_counts_every_position_and_passes_within_the_gate():
    judgement = judge_in_profile(*references_and_observed((1, 3), noise=0.05), gate_db=GATE_DB)
    assert judgement.compared == 6 and not judgement.diverged
    assert GATE_DB < -judgement.error < 30  # the worst is the noisy position: about 26 dB at 5% noise
    assert judgement.tolerance == -GATE_DB


def test_a_profile_judgement_names_the_first_position_below_the_gate():
    judgement = judge_in_profile(*references_and_observed((1, 5), noise=0.5), gate_db=GATE_DB)
    assert judgement.diverged and judgement.first.startswith("row 1 position 5 (decode step): ")
    assert "dB against float64 < gate 20 dB" in judgement.first


def test_a_profile_judgement_fails_nan_and_a_wrong_shape():
    references, observed = references_and_observed(None, noise=0.0)
    observed.add(0, 2, torch.full((50,), float("nan")), "a NaN")  # beside the right logits at position 2
    observed.add(1, 3, torch.zeros(49), "a wrong shape")
    judgement = judge_in_profile(references, observed, gate_db=GATE_DB)
    assert judgement.first.startswith("row 0 position 2 (a NaN)") and judgement.error == math.inf
    assert judgement.compared == 8


def test_greedy_divergence_excuses_only_a_token_within_the_bound():
    logits = torch.tensor([[0.0, 3.0, 2.5], [1.0, 0.0, 0.0]], dtype=torch.float64)
    assert greedy_divergence([1, 0], logits, 0.1) is None  # HF's own choices
    assert greedy_divergence([2, 0], logits, 0.6) is None  # trails HF's by 0.5: a tie at this margin
    assert greedy_divergence([2, 0], logits, 0.4) == "step 0: 2 where HF's argmax 1 leads it by 0.5 (> 0.4)"
    assert greedy_divergence([1, 2], logits, torch.tensor([0.0, 0.9])) == (
        "step 1: 2 where HF's argmax 0 leads it by 1 (> 0.9)"
    )
    assert "leads it by inf" in greedy_divergence([1, 7], logits, 100.0)  # outside the vocabulary


@pytest.mark.numerics  # the fuzzer in an integer profile, ~2 s: the numerics lane
def test_the_runtime_in_a_static_scheme_is_fuzzed_against_float64(tiny_model, tmp_path):
    """``a16w8`` on this runtime: every port built calibrated, judged under the scheme's gate (its
    positions compared, none below it), HF's side in float64."""
    target = FuzzTarget.of(tiny_model, VerifyOptions(quant="a16w8"))
    assert target.gate is quant_gate("a16w8", "torch") and target.model.dtype == torch.float64
    result = fuzz(target, max_examples=3, seed=0, database=tmp_path, shrink=False)
    assert result.failure is None and result.examples == 3
    assert target.coverage["positions compared"] >= 3, target.coverage  # every example compared some


def test_the_fuzz_command_takes_a_scheme(capsys, tmp_path):
    argv = ["fuzz", "--max-examples", "1", "--database", str(tmp_path / "db"), "--reproduction", str(tmp_path)]
    assert cli.main([*argv, "--quant", "a16w8"]) == ExitCode.PASSED
    assert "(torch, a16w8 against float64, max_seq" in capsys.readouterr().out
    assert cli.main([*argv, "--quant", "8da4w"]) == ExitCode.USAGE
    assert "quant scheme '8da4w' is dynamic" in capsys.readouterr().err


class DecodesItsLastToken(StaticSchemePort):
    """This runtime in a static scheme with a greedy loop that decodes its last token too
    (``generate_leaves="all"``, as TICO's ``generate_greedy``)."""

    limits = dataclasses.replace(StaticSchemePort.limits, contracts=Contracts(generate_leaves="all"))

    def generate(self, prompt, *, max_new_tokens, eos_token_id=None):
        logits, taken = self.prefill(prompt).logits, []
        for _ in range(max_new_tokens):
            taken.append(logits.argmax(-1, keepdim=True))
            logits = self.decode(taken[-1])
        return torch.cat(taken, dim=1)


@pytest.mark.numerics  # a port's contract fuzzed in a8w8, ~3 s: the numerics lane
def test_the_greedy_rule_reads_one_step_per_token_whatever_the_cache_keeps(tiny_model, tmp_path):
    """A port that leaves every generated token in its cache, in a scheme (a margin per step): each
    token is judged against HF's choice at its own step (HF's history then holds one token more than
    the tokens judged)."""
    target = FuzzTarget.of(tiny_model, VerifyOptions(port=f"{__name__}:DecodesItsLastToken", quant="a8w8"))
    result = fuzz(target, max_examples=6, seed=3, database=tmp_path, shrink=False)
    assert result.failure is None, result.failure
    assert target.coverage["generate"] > 0, target.coverage
