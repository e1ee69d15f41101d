"""The cache-in-program bundle (one ExecuTorch program, ``prefill`` and ``decode`` methods sharing
the KV cache inside it): the program's logits equal HF's step by step, and a runner that knows only
the manifest (``bundle_runner.py``, run in a process that imports no project module) gets HF's
greedy tokens for a ragged batch across the sliding window and many ring wraps.

Tolerances: logits against HF within ``tolerances.RELATIVE`` (fp32: ``2e-5 * max(1, max|HF|)``;
XNNPACK's kernels reduce in other orders, a few ulps per layer); greedy tokens by the token rule
against HF ``generate``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch", reason="the executorch extra is not installed (pip install '.[executorch]')")

from gemma4_static.cpu.schedule import expand_schedule
from gemma4_static.executorch.cache_program import cached_stack
from gemma4_static.executorch.lowering import export_for_lowering
from gemma4_static.executorch.step_inputs import prefill_logits, step_inputs
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.numerics.parity_numerics import greedy_rows
from gemma4_static.oracle.references.hf import hf_decode_logits, hf_greedy, hf_prefill
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.results import tolerances
from gemma4_static.oracle.results.report import assert_rows_pass
from tests.parity.edge_layout import EDGE_GROUP

# the worker that lowers test_executorch.py's programs builds the bundle (one lowering of the text
# program, then read from the cache); session scope: xdist interleaves modules, a module fixture is rebuilt
pytestmark = [pytest.mark.executorch, pytest.mark.xdist_group(EDGE_GROUP)]
CHUNK, NEW = 8, 14
RUNNER = Path(__file__).with_name("bundle_runner.py")
aten = torch.ops.aten
BUFFER_ALIASES = {aten.view.default, aten.reshape.default, aten.index_put.default}


def test_manifest_states_the_layout_and_calling_convention(bundle):
    folder, tokens, _ = bundle
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["layout"] == "cache-in-program" and (folder / manifest["file"]).is_file()
    assert manifest["methods"] == {"prefill": {"tokens": tokens}, "decode": {"tokens": 1}}
    rings = {entry["name"]: entry["ring"] for entry in manifest["layer_types"]}
    assert rings == {"sliding_attention": True, "full_attention": False}
    assert any("bin slot" in line for line in manifest["convention"])


def test_decode_reads_each_cache_buffer_in_place(bundle, tiny_model):
    """The decode method's graph (as exported for lowering) reads a cache buffer only through views
    into the attention products: no slice and no concatenation of a cache, which XNNPACK would copy
    in every step (its products read the buffer itself). Each of the layers reads its keys (through
    the transpose of the scores' product) and its values."""
    _, _, runtime = bundle
    module = cached_stack(runtime.modules, runtime.stack)
    positions = (torch.arange(1) + runtime.layout.max_seq // 2).expand(runtime.layout.batch_size, -1)
    keep = torch.ones_like(positions, dtype=torch.bool)
    exported = export_for_lowering(module, step_inputs(runtime.stack, torch.zeros_like(positions), positions, keep))
    buffers = exported.graph_signature.inputs_to_buffers
    aliases = {node for node in exported.graph.nodes if "cache" in buffers.get(node.name, "")}
    for node in exported.graph.nodes:  # a view of a buffer, or the buffer after a write, is the buffer
        if node.op == "call_function" and node.target in BUFFER_ALIASES and node.args[0] in aliases:
            aliases.add(node)
    readers = Counter(
        str(node.target)
        for node in exported.graph.nodes
        if node not in aliases and node.op == "call_function" and aliases.intersection(node.all_input_nodes)
    )
    layers = tiny_model.config.get_text_config().num_hidden_layers
    assert readers == {"aten.transpose.int": layers, "aten.bmm.default": layers}, readers


def test_program_matches_hf_step_by_step(bundle, tiny_model, report):
    """Prefill in chunks of 8 (each call of the prefill method padded to its length) then decode
    through the program's two methods (the cache never leaves the program) against HF: the prefill's
    last-token logits, and every decode step's logits against HF's own ``DynamicCache`` step (each
    row alone), fed the same random tokens."""
    folder, method_tokens, runtime = bundle
    from executorch.runtime import Runtime  # here: its import costs seconds of every worker's collection

    program = Runtime.get().load_program((folder / "model.pte").read_bytes())
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    prompt = text_prompt(tiny_model.config, [19, 6], seed=4)
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    tokens = torch.randint(3, 400, (2, NEW), generator=torch.Generator().manual_seed(6))
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(2), prompt.last_index]
    chunks = expand_schedule((CHUNK,), int(inputs.valid_length.max()))
    step = lambda *args: prefill.execute(list(args))[0]  # noqa: E731
    ours = prefill_logits(runtime.stack, step, inputs=inputs, chunks=chunks, tokens=method_tokens)
    rows = parity.logits_rows(ours, theirs, torch.float32)
    hf_steps = hf_decode_logits(tiny_model, prompt, tokens)  # (B, NEW, vocab)
    for step in range(NEW):
        positions = (inputs.valid_length + step)[:, None]
        keep = torch.ones_like(positions, dtype=torch.bool)
        ours = decode.execute(list(step_inputs(runtime.stack, tokens[:, step : step + 1], positions, keep)))[0]
        rows.append(parity.stage_row("decode steps", f"step {step} logits", ours, hf_steps[:, step], torch.float32))
    worst = max(row.value for row in rows if row.metric == rows[0].metric)  # the max |logit diff| rows
    report(f"bundle vs HF: prefill + {NEW} decode steps (across ring wraps), max |logit diff| {worst:.3g}")
    assert_rows_pass(rows)


def test_a_runner_with_only_the_manifest_gets_hfs_greedy_tokens(bundle, tiny_model, tmp_path, report):
    folder, _, _ = bundle
    prompt = text_prompt(tiny_model.config, [21, 7], seed=9)  # rows cross the window and wrap the ring
    request = {
        "input_ids": prompt.input_ids.tolist(),
        "lengths": prompt.attention_mask.sum(dim=1).tolist(),
        "max_new_tokens": NEW,
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    result = subprocess.run(
        [sys.executable, str(RUNNER), str(folder), str(tmp_path / "request.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["project_imported"] is False
    theirs, logits = hf_greedy(tiny_model, prompt, max_new_tokens=NEW, eos_token_id=None)
    ours = torch.tensor(answer["tokens"])
    check = f"2 rows x {NEW} tokens, runner without the project vs HF generate"
    assert_rows_pass(greedy_rows("bundle", check, ours, theirs, logits, tolerances.token_bound(logits)))
    report(f"bundle runner (ExecuTorch + manifest only): {int((ours == theirs).sum())} of {ours.numel()} tokens = HF")
