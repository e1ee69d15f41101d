"""The cache-in-program step in eager PyTorch (no ExecuTorch needed) against the runtime, the
CPU-side step inputs of the bundle's calling convention, and the bundle export's bad arguments.
(The lowered program and a runner that knows only the manifest: tests/parity/test_bundle.py.)

Tolerance: ``tolerances.RELATIVE`` (fp32): the same ops, attention over keys in another order than
the runtime's (``[ring | step]`` in a chunk, the buffer in place with its bin's column masked in decode).
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.bundle import export_bundle
from gemma4_static.commands import cli
from gemma4_static.cpu.layout import StaticLayout
from gemma4_static.cpu.schedule import expand_schedule
from gemma4_static.executorch.cache_program import cached_stack
from gemma4_static.executorch.step_inputs import PREFILL_TOKENS, prefill_logits, prefill_method_tokens, step_inputs
from gemma4_static.oracle.references.samples import image_prompt, text_prompt
from gemma4_static.oracle.results import tolerances
from gemma4_static.runtime import StaticGemma4Runtime

MAX_SEQ, CHUNK = 32, 8


@pytest.mark.parametrize("lengths", [[13, 5], [13]], ids=["two-rows", "one-row"])
@pytest.mark.parametrize("chunk", [CHUNK, MAX_SEQ], ids=["chunks-of-8", "one-call"])
def test_cached_stack_equals_the_runtime(tiny_model, chunk, lengths):
    """Prefill (in chunks longer than the ring of 6, or all 32 positions in one call) and 12 decode
    steps across ring wraps: logits equal the runtime's at every row's last token and every step.
    Two rows of different lengths, and one row alone (the batch an edge deployment runs)."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=len(lengths))
    twin = StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=len(lengths))
    program = cached_stack(twin.modules, twin.stack)
    prompt = text_prompt(tiny_model.config, lengths, seed=2)
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    lengths = inputs.valid_length
    expected = runtime.prefill(prompt.input_ids, prompt.attention_mask)
    with torch.no_grad():
        chunks = expand_schedule((chunk,), int(inputs.valid_length.max()))
        ours = prefill_logits(runtime.stack, program, inputs=inputs, chunks=chunks, tokens=chunk)
        torch.testing.assert_close(ours, expected, rtol=0, atol=tolerances.relative(torch.float32, expected))
        for step in range(12):
            token = expected.argmax(dim=-1)[:, None]
            expected = runtime.decode_one(token)
            positions = (lengths + step)[:, None]
            ours = program(*step_inputs(runtime.stack, token, positions, torch.ones_like(positions, dtype=torch.bool)))
            torch.testing.assert_close(ours, expected, rtol=0, atol=tolerances.relative(torch.float32, expected))


class _Counted(torch.overrides.TorchFunctionMode):
    """Counts the torch functions and tensor methods called while active, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        self.calls[name] = self.calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("tokens", [1, CHUNK], ids=["decode", "chunk"])
def test_a_step_computes_the_cache_rows_once_per_layer_type(tiny_model, tokens):
    """Each producing layer writes its K and V at rows computed once per layer type in a step: in a
    lowered program each computation is a chain of operators on the portable kernels (286 of them on
    the E2B geometry's decode step when every write computed its own, 105 since)."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ)
    program = cached_stack(runtime.modules, runtime.stack)
    positions = torch.arange(tokens)[None]
    ids = torch.full((1, tokens), runtime.spec.pad_token_id)
    inputs = step_inputs(runtime.stack, ids, positions, torch.ones_like(positions, dtype=torch.bool))
    counted = _Counted()
    with torch.no_grad(), counted:
        program(*inputs)
    producers = sum(source == index for index, source in enumerate(program.sources))
    assert counted.calls["index_put_"] == 2 * producers
    ring_masks = tokens == 1 and any(program.is_ring(name) for name in program.type_order)  # its written column
    assert counted.calls["arange"] == 2 * len(program.type_order) + ring_masks


def test_cached_stack_takes_images_as_embeddings(tiny_model):
    """Two image slots, row 0 filling both and row 1 the second: the soft tokens enter the step as
    embeddings (``embedded`` on the image tokens only) under the image blocks' masks; prefill in one
    call and 4 decode steps equal the runtime's logits."""
    second = ((2, (40, 72), 140),)
    prompt = image_prompt(
        tiny_model.config, text_after=[3, 1], seed=5, then=second, with_image=[(True, True), (False, True)]
    )
    max_seq = prompt.input_ids.shape[1] + 4
    runtime = StaticGemma4Runtime(tiny_model, max_seq=max_seq, batch_size=2, image_slots=prompt.image_slots)
    program = cached_stack(runtime.modules, runtime.stack)
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    outputs = runtime.prefill_outputs(inputs, prompt.pixel_values, prompt.image_position_ids, keep_intermediates=True)
    fused, blocks = outputs.hidden_states[0], runtime.stack.mask_table.vision_blocks(inputs.mm_token_type_ids)
    expected = outputs.logits
    with torch.no_grad():
        chunks = [int(inputs.valid_length.max())]
        ours = prefill_logits(
            runtime.stack, program, inputs=inputs, chunks=chunks, tokens=max_seq, fused=fused, blocks=blocks
        )
        torch.testing.assert_close(ours, expected, rtol=0, atol=tolerances.relative(torch.float32, expected))
        for step in range(4):
            token = expected.argmax(dim=-1)[:, None]
            expected = runtime.decode_one(token)
            positions = (inputs.valid_length + step)[:, None]
            ours = program(*step_inputs(runtime.stack, token, positions, torch.ones_like(positions, dtype=torch.bool)))
            torch.testing.assert_close(ours, expected, rtol=0, atol=tolerances.relative(torch.float32, expected))


def test_step_slots_send_what_is_not_kept_to_the_bin(tiny_model):
    """Padding goes to the bin slot (capacity); on the ring only a row's last ``R`` kept tokens of the
    call are written (earlier ones would be overwritten by the same call)."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=2)
    positions = torch.arange(16, 24).expand(2, -1)
    keep = torch.arange(8)[None, :] < torch.tensor([[8], [3]])
    args = step_inputs(runtime.stack, torch.zeros(2, 8, dtype=torch.long), positions, keep)
    ring, full = args[-2], args[-1]  # slots, in the order of the layer types (sliding first in tiny)
    assert full.tolist() == [list(range(16, 24)), [16, 17, 18, 32, 32, 32, 32, 32]]
    assert ring.tolist() == [[6, 6, 0, 1, 2, 3, 4, 5], [4, 5, 0, 6, 6, 6, 6, 6]]
    assert args[4].tolist() == [7, 2]  # last_index
    assert [mask.shape for mask in args[5:7]] == [(2, 1, 8, 6 + 8), (2, 1, 8, MAX_SEQ)]


def test_bundle_export_refuses_what_it_cannot_hold(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=2)
    with pytest.raises(ValueError, match=r"prefill_tokens must be a positive divisor of max_seq=32, got 5"):
        export_bundle(runtime, "unused", prefill_tokens=5)
    prompt = image_prompt(tiny_model.config, text_after=[1])
    with_image = StaticGemma4Runtime(tiny_model, max_seq=80, image_slots=prompt.image_slots)
    with pytest.raises(ValueError, match=r"a bundle is text-only"):
        export_bundle(with_image, "unused", prefill_tokens=8)


def test_the_prefill_method_length_tiles_the_layout():
    """256 tokens where they tile max_seq without splitting an image slot, else one call of max_seq;
    a prefill_chunk is taken as it is."""
    assert prefill_method_tokens(StaticLayout(1024, 1)) == PREFILL_TOKENS == 256
    assert prefill_method_tokens(StaticLayout(1000, 1)) == 1000
    assert prefill_method_tokens(StaticLayout(1024, 1, image_slots=((200, 64),), vision_profiles=(70,))) == 1024
    assert prefill_method_tokens(StaticLayout(1024, 1, image_slots=((300, 64),), vision_profiles=(70,))) == 256
    assert prefill_method_tokens(StaticLayout(1024, 1, prefill_chunk=128)) == 128


def test_cli_bundle_layout_needs_pte(tmp_path, capsys):
    assert cli.main(["export", str(tmp_path / "out"), "--format", "pt2", "--layout", "bundle"]) == 2
    assert "--layout bundle is an ExecuTorch program: use --format pte" in capsys.readouterr().err
