"""The patches of the faults only the self-test lane runs (another geometry, an integer profile, the
fuzzer or the whole grid), each on stand-ins in the default suite: it changes exactly what its bug
says, where its bug says, and leaves everything else to the code it wraps. (The lane shows that
``verify`` catches each; these pin that each is still the bug the lane was shown to catch.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers import Gemma4TextConfig

from gemma4_static.oracle.faults import static_faults
from gemma4_static.oracle.faults.catalogue_family import (
    _key_as_value,
    _kv_heads_tiled_in_decode,
    _sliding_kv_heads_everywhere,
    _softmax_in_bf16,
    _ties_to_the_higher_index,
)
from gemma4_static.oracle.faults.catalogue_quant import _down_proj_takes_up_proj_range
from gemma4_static.oracle.faults.catalogue_vision import _flip_xy
from gemma4_static.oracle.faults.fault_patches import (
    QueryNormAfterRope,
    chunk_as_decode,
    neox_partial_rope,
    never_restoring,
    reusing_layers_over_the_cache,
    ring_slot_plus_one,
)
from gemma4_static.oracle.faults.host_faults import PaddingWithEos
from gemma4_static.oracle.faults.port_faults import (
    ChunkMaskOffset,
    DecodeAfterPartialChunk,
    RingSlotsLongChunk,
    WrappedRuntimePort,
)
from gemma4_static.oracle.faults.static_faults import (
    CalibratedOnPadding,
    RangeBeforeTheNorm,
    ScalesAlongTheInputs,
    ZeroPointDropped,
)
from gemma4_static.ports import PortSetup
from gemma4_static.ports.prompt import Prompt
from gemma4_static.quant.fake_quant import ActivationQuantizer, signed_range
from gemma4_static.spec import FULL_ATTENTION, SLIDING_ATTENTION, LayerTypeSpec


def test_k_cache_as_v_reads_the_keys_as_values_on_k_eq_v_layers_only():
    calls = []

    def project_kv(layer, normed, cos, sin):
        calls.append((layer, normed, cos, sin))
        return "key", "value"

    patched = _key_as_value(project_kv)
    k_eq_v, separate = SimpleNamespace(v_proj=None), SimpleNamespace(v_proj=object())
    assert patched(k_eq_v, 1, 2, 3) == ("key", "key")
    assert patched(separate, 4, 5, 6) == ("key", "value")
    assert calls == [(k_eq_v, 1, 2, 3), (separate, 4, 5, 6)]


def test_decode_kv_heads_tiled_gives_head_h_the_kv_head_h_mod_kv_heads_in_decode_only():
    generator = torch.Generator().manual_seed(0)
    query, key, value = (
        torch.randn(shape, generator=generator) for shape in ((2, 2, 4, 8), (2, 2, 7, 8), (2, 2, 7, 8))
    )
    mask = torch.zeros(2, 1, 1, 7)
    patched = _kv_heads_tiled_in_decode(F).scaled_dot_product_attention
    heads, tiled = query.reshape(2, 8, 1, 8), torch.arange(8) % 2  # head h = j * 4 + i reads K/V head h % 2
    expected = F.scaled_dot_product_attention(heads, key[:, tiled], value[:, tiled], attn_mask=mask, scale=1.0)
    assert torch.equal(patched(query, key, value, attn_mask=mask, scale=1.0), expected.reshape(2, 2, 4, 8))
    right = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=1.0)
    assert not torch.allclose(expected.reshape(2, 2, 4, 8), right)
    prefill = torch.randn(2, 4, 3, 8, generator=generator)  # with enable_gqa (not decode), one K/V head, one row
    for args, options in (((prefill, key, value), {"enable_gqa": True}), ((query, key[:, :1], value[:, :1]), {})):
        assert torch.equal(
            patched(*args, scale=1.0, **options), F.scaled_dot_product_attention(*args, scale=1.0, **options)
        )
    single = query[:, :, :1]
    assert torch.equal(
        patched(single, key, value, scale=1.0), F.scaled_dot_product_attention(single, key, value, scale=1.0)
    )


def test_global_kv_heads_of_sliding_sizes_full_layers_only_with_the_sliding_count():
    specs = {
        SLIDING_ATTENTION: LayerTypeSpec(256, 8, "sliding rope"),
        FULL_ATTENTION: LayerTypeSpec(512, 2, "full rope"),
    }
    asked = []

    def read(config, layer_type):
        asked.append((config, layer_type))
        return specs[layer_type]

    patched = _sliding_kv_heads_everywhere(read)
    assert patched("config", FULL_ATTENTION) == LayerTypeSpec(512, 8, "full rope")
    assert patched("config", SLIDING_ATTENTION) is specs[SLIDING_ATTENTION]
    assert asked == [("config", FULL_ATTENTION), ("config", SLIDING_ATTENTION), ("config", SLIDING_ATTENTION)]


def test_q_norm_after_rope_multiplies_the_weight_into_the_forwards_first_rotation_only():
    """The query's rotation (the forward's first) comes back times the q norm's weight, which the
    forward hides from the layer meanwhile; the key's rotation and any outside a forward are untouched."""
    fault, weight = QueryNormAfterRope(), torch.tensor([1.0, 2.0, 3.0, 4.0])
    x, cos, sin = torch.tensor([[0.5, -1.0, 2.0, 4.0]]), torch.tensor([[2.0, 2.0, 0.5, 0.5]]), torch.ones(1, 4)
    rope = fault.rope(lambda x, cos, sin: x * cos + sin)  # a stand-in rotation
    norms_seen = []

    def attention_inputs(layer, hidden):
        norms_seen.append(layer.q_norm)
        return rope(hidden, cos, sin), rope(hidden, cos, sin)  # the query's, then the key's

    layer = SimpleNamespace(q_norm=weight)
    query, key = fault.forward(attention_inputs)(layer, x)
    assert norms_seen == [None] and layer.q_norm is weight
    assert torch.equal(query, torch.tensor([[2.0, -2.0, 6.0, 12.0]])) and torch.equal(key, x * cos + sin)
    assert torch.equal(rope(x, cos, sin), x * cos + sin)  # outside a forward: no weight pending

    def raising(layer, hidden):
        raise RuntimeError("inside the forward")

    with pytest.raises(RuntimeError, match="inside the forward"):
        fault.forward(raising)(layer, x)
    assert layer.q_norm is weight and torch.equal(rope(x, cos, sin), x * cos + sin)


def test_shared_kv_reads_the_ring_splits_only_an_own_prefill_that_reaches_the_reusing_layers():
    """``shared-kv-reads-the-ring``: an own-mode run past the first reusing layer (3) runs the layers
    before it as asked, then the rest in ``cache`` mode over the cache's masks at the rows' lengths;
    any other run (a decode step, an own run that stops before 3) is handed over whole."""
    calls = []

    def run(stack, hidden, per_layer_inputs, positions, keep, masks, layers, *, mode, states=None):
        calls.append((hidden, per_layer_inputs, positions, keep, masks, layers, mode, states))
        return hidden + 1

    stack = SimpleNamespace(first_reusing_layer=3, cache_masks=lambda positions, lengths: (positions, lengths.tolist()))
    patched, keep = reusing_layers_over_the_cache(run), torch.tensor([[True, True, True, False], [True] * 4])
    assert patched(stack, 10, "ple", "positions", keep, "masks", range(0, 5), mode="decode", states="states") == 11
    assert patched(stack, 20, "ple", "positions", keep, "masks", range(0, 3), mode="own", states="states") == 21
    assert patched(stack, 30, "ple", "positions", keep, "masks", range(1, 5), mode="own", states="states") == 32
    assert calls == [
        (10, "ple", "positions", keep, "masks", range(0, 5), "decode", "states"),
        (20, "ple", "positions", keep, "masks", range(0, 3), "own", "states"),
        (30, "ple", "positions", keep, "masks", range(1, 3), "own", "states"),
        (31, "ple", "positions", keep, ("positions", [3, 4]), range(3, 5), "cache", "states"),
    ]


def test_never_restoring_drops_only_the_restoring_rewrite():
    calls = []

    def rewrite(buffers, buffer, rule, spans, runs, *, restore):
        calls.append((buffers, buffer, rule, spans, runs, restore))
        return "rewritten"

    patched = never_restoring(rewrite)
    assert patched(1, 2, 3, 4, 5, restore=True) is None and calls == []
    assert patched(1, 2, 3, 4, 5, restore=False) == "rewritten"
    assert calls == [(1, 2, 3, 4, 5, False)]


class _Range:
    def __init__(self, name: str) -> None:
        self.name, self.copied = name, None

    def copy_range(self, other: _Range) -> None:
        self.copied = other.name


def test_down_proj_range_is_taken_from_its_layers_up_proj_after_calibration():
    sites = [
        SimpleNamespace(name=name, activation=None if name == "layer 1 down_proj" else _Range(name))
        for name in (
            "layer 0 up_proj",
            "layer 0 down_proj",
            "layer 1 up_proj",
            "layer 1 down_proj",
            "layer 2 down_proj",
        )
    ]
    profile = SimpleNamespace(sites=sites)
    calibrated = []
    patched = _down_proj_takes_up_proj_range(lambda self, run, *, unreached: calibrated.append((self, run, unreached)))
    patched(profile, "run", unreached="skip")
    patched(profile, "again")  # the profile's own default: an unreached site is an error
    assert calibrated == [(profile, "run", "skip"), (profile, "again", "error")]
    copied = {site.name: site.activation.copied for site in sites if site.activation is not None}
    assert copied == {
        "layer 0 up_proj": None,
        "layer 0 down_proj": "layer 0 up_proj",
        "layer 1 up_proj": None,
        "layer 2 down_proj": None,  # no up_proj of its layer
    }


def _installed(fault: type, **runtime: object) -> WrappedRuntimePort:
    """``fault``'s port (no model built) with its patch installed on a stand-in runtime."""
    port = object.__new__(fault)
    port.first_chunk = None
    port.install(SimpleNamespace(**runtime))
    return port


def test_chunk_mask_offset_shifts_only_a_chunk_longer_than_the_first():
    seen = []

    def cache_masks(positions, written, blocks=None, *, before=None):
        seen.append((positions, written, blocks, before))

    stack = SimpleNamespace(cache_masks=cache_masks)
    port = _installed(ChunkMaskOffset, stack=stack)
    masks = stack.cache_masks
    first, longer, same = torch.arange(4)[None], torch.arange(4, 9)[None], torch.arange(9, 13)[None]
    masks(longer, "written")  # no ``before``: a one-call prefill's masks
    port.chunk_of(first)
    masks(first, "written", "blocks", before="kept")
    masks(longer, "written", "blocks", before="kept")
    masks(same, "written", before="kept")
    assert [(positions.tolist(), *rest) for positions, *rest in seen] == [
        (longer.tolist(), "written", None, None),
        (first.tolist(), "written", "blocks", "kept"),
        ((longer - 1).tolist(), "written", "blocks", "kept"),
        (same.tolist(), "written", None, "kept"),
    ]
    port.first_chunk = None  # no first chunk noted: a chunk is compared with itself
    masks(longer, "written", before="kept")
    assert torch.equal(seen[-1][0], longer)


def test_ring_slots_long_chunk_counts_from_the_chunks_start_only_past_the_ring_plus_one():
    cache = SimpleNamespace(is_ring=lambda layer_type: layer_type == "ring", capacity={"ring": 4, "full": 32})
    cache.slots = lambda layer_type, positions: ("original", layer_type, positions.tolist())
    _installed(RingSlotsLongChunk, cache=cache)
    long_later = torch.arange(3, 9)[None]  # 6 positions after the first chunk: past the ring of 4 plus one
    assert cache.slots("ring", long_later).tolist() == [[0, 1, 2, 3, 0, 1]]
    assert cache.slots("ring", torch.arange(1, 7)[None]).tolist() == [[0, 1, 2, 3, 0, 1]]  # from position 1 on
    unfaulted = {
        "the first chunk": ("ring", torch.arange(0, 6)[None]),
        "the ring plus one": ("ring", torch.arange(3, 8)[None]),
        "not a ring": ("full", long_later),
        "one position per row": ("ring", torch.arange(3, 9)),
    }
    for why, (layer_type, positions) in unfaulted.items():
        assert cache.slots(layer_type, positions) == ("original", layer_type, positions.tolist()), why


def test_the_wrapped_port_hands_both_mask_arguments_to_this_runtime():
    port = object.__new__(WrappedRuntimePort)
    port.inner = SimpleNamespace(prefill_masks=lambda attention_mask, types: {"masks": (attention_mask, types)})
    assert port.prefill_masks("attention", "types") == {"masks": ("attention", "types")}


def test_the_wrapped_port_returns_this_runtimes_logits_and_chunk_logits_and_marks_its_prefill():
    """Its prefill hands back the last tokens' and the chunk ends' logits (what the chunked-prefill
    group compares), asks for the intermediates as told, and is marked as prefilling only meanwhile."""
    port, seen = object.__new__(WrappedRuntimePort), []

    def prefill(prompt, *, keep_intermediates):
        seen.append((prompt, keep_intermediates, port.prefilling))
        return SimpleNamespace(logits=last, chunk_logits=chunk_ends, hidden_states=(last,))

    last, chunk_ends = torch.ones(1, 4), (torch.zeros(1, 4), torch.ones(1, 4))
    port.inner, port.prefilling = SimpleNamespace(prefill=prefill), False
    result = port.prefill("the prompt", keep_intermediates=True)
    assert result.logits is last and result.chunk_logits is chunk_ends and seen == [("the prompt", True, True)]
    assert result.hidden_states is None  # nothing inside exposed, as a port from outside
    assert port.prefilling is False and port.first_chunk is None


def test_padding_with_eos_writes_gemmas_eos_id_where_the_static_inputs_are_not_valid():
    """Gemma 4's text config: pad 0, EOS 1, BOS 2; the fault's padding is the EOS id, the rest kept."""
    assert (Gemma4TextConfig().pad_token_id, Gemma4TextConfig().eos_token_id) == (0, 1)
    port = object.__new__(PaddingWithEos)
    ids, valid = torch.tensor([[7, 8, 0, 0], [0, 9, 10, 11]]), torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1]]).bool()
    port.inner = SimpleNamespace(static_inputs=lambda prompt: (ids, valid))
    padded, kept = port.static_inputs("the prompt")
    assert torch.equal(padded, torch.tensor([[7, 8, 1, 1], [1, 9, 10, 11]])) and kept is valid


def test_calibrated_on_padding_observes_the_whole_static_buffer(monkeypatch):
    observed = []
    monkeypatch.setattr(static_faults.StaticSchemePort, "calibrate", lambda self, prompts: observed.extend(prompts))
    port = object.__new__(CalibratedOnPadding)
    port.inner, port.pad_token_id = SimpleNamespace(setup=SimpleNamespace(max_seq=8)), 2
    ids = torch.tensor([[5, 6, 7], [8, 9, 3]], dtype=torch.int32)  # kept: not promoted to int64 by the padding
    port.calibrate([Prompt(ids, torch.tensor([[1, 1, 1], [1, 1, 0]]))])
    (padded,) = observed
    assert padded.input_ids.dtype == torch.int32
    assert padded.input_ids.tolist() == [[5, 6, 7, 2, 2, 2, 2], [8, 9, 2, 2, 2, 2, 2]]  # max_seq - 1 positions
    assert padded.attention_mask.tolist() == [[1] * 7, [1] * 7]  # the padding counted as tokens


def test_scales_along_the_inputs_reads_each_rows_scale_by_column():
    # a row's scale below 1 too; columns 1 and 3 read row 1's small scale: past the grid on both sides
    weight = torch.tensor([[1.0, 2.0, 0.5, -2.0], [0.5, 0.25, -0.125, 0.1]])
    site = SimpleNamespace(original=weight, quantized=torch.nn.Parameter(torch.zeros(2, 4)))
    port = object.__new__(ScalesAlongTheInputs)
    port.inner = SimpleNamespace(runtime=SimpleNamespace(quantization=SimpleNamespace(sites=[site])))
    port.after_calibration([])
    low, high = signed_range(8)
    rows = torch.tensor([2.0, 0.5]) / high  # one scale per output row
    along = rows[torch.tensor([0, 1, 0, 1])]  # column j reads row j's scale (modulo the rows)
    steps = (weight / along).round()
    assert steps.max() > high and steps.min() < low
    expected = steps.clamp(low, high) * along
    assert torch.equal(site.quantized.data, expected)
    assert not torch.equal(expected, (weight / rows[:, None]).round().clamp(low, high) * rows[:, None])


def test_decode_after_partial_chunk_moves_each_rows_length_to_its_full_chunks_end_after_a_short_last_chunk():
    def prefilled(schedule: list[int], lengths: list[int], max_seq: int = 16) -> list[int]:
        port = object.__new__(DecodeAfterPartialChunk)
        cache = SimpleNamespace(lengths=torch.tensor(lengths), max_seq=max_seq)
        port.inner = SimpleNamespace(
            prefill=lambda prompt, keep_intermediates: SimpleNamespace(logits="logits", chunk_logits=None),
            setup=SimpleNamespace(chunks=lambda longest: schedule if longest == max(lengths) else None),
            prefill_schedule=lambda longest: [],
            runtime=SimpleNamespace(cache=cache),
        )
        mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
        assert port.prefill(SimpleNamespace(attention_mask=mask)).logits == "logits"
        return cache.lengths.tolist()

    assert prefilled([4, 4, 2], [10, 7]) == [12, 8]  # each row on to its own chunk's end
    assert prefilled([4, 4, 2], [10, 7], max_seq=11) == [11, 8]  # never past the cache
    assert prefilled([5, 5], [10, 7]) == [10, 7]  # a last chunk as long as the first: no fault
    assert prefilled([10], [10, 7]) == [10, 7]  # one chunk: no fault


def test_router_softmax_in_bf16_rounds_the_scores_to_bfloat16_and_keeps_the_rest_of_functional():
    patched = _softmax_in_bf16(F)
    scores = torch.tensor([[1.0, 1.001, -2.0003]])
    expected = F.softmax(scores.to(torch.bfloat16), dim=-1)
    assert torch.equal(patched.softmax(scores, dim=-1), expected.float())
    assert torch.equal(patched.softmax(scores, dim=-1, dtype=torch.float64), expected.double())
    assert patched.linear is F.linear and patched.gelu is F.gelu


def test_ties_to_the_higher_index_reverses_only_which_of_equal_experts_wins():
    patched = _ties_to_the_higher_index(torch)
    values = torch.tensor([[0.5, 0.2, 0.5, 0.1], [0.1, 0.7, 0.2, 0.0]])
    top, index = patched.topk(values, k=2, dim=-1)
    assert index.tolist() == [[2, 0], [1, 2]] and torch.equal(top, torch.topk(values, k=2, dim=-1).values)
    assert patched.softmax is torch.softmax and patched.tensor is torch.tensor


def test_ring_slot_plus_one_moves_the_ring_layers_slots_only():
    cache = SimpleNamespace(is_ring=lambda layer_type: layer_type == SLIDING_ATTENTION)
    patched = ring_slot_plus_one(lambda kv_cache, layer_type, positions: (kv_cache, layer_type, positions.tolist()))
    positions = torch.tensor([[3, 4]])
    assert patched(cache, SLIDING_ATTENTION, positions) == (cache, SLIDING_ATTENTION, [[4, 5]])
    assert patched(cache, FULL_ATTENTION, positions) == (cache, FULL_ATTENTION, [[3, 4]])


def test_flip_xy_swaps_each_patchs_two_coordinates_and_keeps_the_patches_order():
    positions = torch.tensor([[[0, 1], [2, 3], [4, 5]]])
    assert _flip_xy(positions).tolist() == [[[1, 0], [3, 2], [5, 4]]]


def test_zero_point_dropped_zeroes_the_most_one_sided_observed_range_only():
    def site(zero_point: float, observed: bool = True) -> SimpleNamespace:
        return SimpleNamespace(activation=SimpleNamespace(observed=observed, zero_point=torch.tensor(zero_point)))

    lopsided, other, unobserved = site(-9.0), site(4.0), site(100.0, observed=False)
    weights_only = SimpleNamespace(activation=None)
    port = object.__new__(ZeroPointDropped)
    port.inner = SimpleNamespace(
        runtime=SimpleNamespace(quantization=SimpleNamespace(sites=[weights_only, other, unobserved, lopsided]))
    )
    port.after_calibration([])
    zero_points = [float(s.activation.zero_point) for s in (lopsided, other, unobserved)]
    assert zero_points == [0.0, 4.0, 100.0]


def test_range_before_the_norm_gives_each_layers_q_k_v_the_range_of_its_residual_stream(monkeypatch):
    """Layer ``l``'s q/k/v sites get the range of the stream entering layer ``l`` over the valid
    positions of every prompt (one row at a time, as calibrated); no other site is touched."""
    prompts = [
        Prompt(torch.tensor([[5, 6, 7]]), torch.tensor([[1, 1, 0]])),
        Prompt(torch.tensor([[8, 9, 3]]), torch.tensor([[1, 1, 1]])),
    ]
    streams = {  # each prompt's hidden states (the stream into layer 0, into layer 1, the output): (1, 3, 2)
        id(prompts[0]): [
            torch.tensor([[[1.0, 2.0], [-1.0, 0.0], [99.0, -99.0]]]),
            torch.tensor([[[3.0, 4.0], [3.0, 4.0], [99.0, -99.0]]]),
            torch.zeros(1, 3, 2),
        ],
        id(prompts[1]): [torch.tensor([[[0.5, 0.5]] * 3]), torch.tensor([[[-5.0, 1.0]] * 3]), torch.zeros(1, 3, 2)],
    }
    built = []

    class Floating:
        def __init__(self, model, setup):
            built.append((model, setup))

        def prefill(self, prompt, *, keep_intermediates):
            return SimpleNamespace(hidden_states=streams[id(prompt)] if keep_intermediates is True else None)

    ranges = []
    monkeypatch.setattr(static_faults, "StaticRuntimePort", Floating)
    monkeypatch.setattr(static_faults, "set_range", lambda site, low, high: ranges.append((site.name, low, high)))
    names = [f"layer {layer} {site}" for layer in (0, 1) for site in ("q_proj", "k_proj", "v_proj", "o_proj")]
    port = object.__new__(RangeBeforeTheNorm)
    quantization = SimpleNamespace(sites=[SimpleNamespace(name=name) for name in names])
    port.inner = SimpleNamespace(
        model="model", setup=PortSetup(8, 2), runtime=SimpleNamespace(quantization=quantization)
    )
    port.after_calibration(prompts)
    assert built == [("model", PortSetup(8, 1))]
    layer_0, layer_1 = (-1.0, 2.0), (-5.0, 4.0)  # the padded position's 99 and -99 left out
    expected = [(f"layer 0 {site}", *layer_0) for site in ("q_proj", "k_proj", "v_proj")]
    assert ranges == expected + [(f"layer 1 {site}", *layer_1) for site in ("q_proj", "k_proj", "v_proj")]


def test_neox_partial_rope_spreads_the_exponents_over_the_rotated_dims_of_proportional_rope_only():
    """``partial-rope-neox-exponents``: a proportional layer's frequencies ``theta ** (-2i / rotary)``
    over its rotated half (``rotary = 0.5 x 8 = 4``: i = 0, 1), zeros past it, divided by the factor;
    a default-RoPE layer's are the original's."""
    original = neox_partial_rope(lambda spec: "original")
    proportional = SimpleNamespace(
        rope_type="proportional", partial_rotary_factor=0.5, head_dim=8, theta=100.0, factor=2.0
    )
    expected = torch.tensor([1.0, 0.1, 0.0, 0.0]) / 2.0  # 100 ** -(0 / 4), 100 ** -(2 / 4)
    # float32: 100 ** -0.5 and the division by 2 each round within half an ulp (6e-8 relative); 1e-6 is
    # ten ulps, and the faulty exponents this pins (off by a power of 100 ** 0.25) are 3x away
    torch.testing.assert_close(original(proportional), expected, rtol=1e-6, atol=0)
    assert original(SimpleNamespace(rope_type="default")) == "original"


def test_chunk_as_decode_runs_only_a_chunk_in_the_decode_steps_cache_mode():
    """``chunk-as-decode``: a chunk's layers run as a decode step runs them (``cache``: the chunk
    written into the slots before it attends); the other modes, and the arguments, handed over."""
    calls = []
    patched = chunk_as_decode(lambda stack, *args, mode, states=None: calls.append((stack, args, mode, states)))
    for mode in ("chunk", "own", "cache"):  # the layer stack's three modes
        patched("stack", "hidden", "positions", mode=mode, states="states")
    assert [mode for *_, mode, _ in calls] == ["cache", "own", "cache"]
    assert all(call[:2] == ("stack", ("hidden", "positions")) and call[3] == "states" for call in calls)


def test_set_range_fixes_a_sites_range_at_exactly_the_range_given():
    """What the observer saw before is forgotten; the range given is the one frozen (8 bits, asymmetric:
    [-1, 2] is 3 / 255 a step, -128 at -1)."""
    activation = ActivationQuantizer(8)
    activation.observe(torch.tensor([-50.0, 50.0]))
    static_faults.set_range(SimpleNamespace(activation=activation), -1.0, 2.0)
    assert (float(activation.observer.min_val), float(activation.observer.max_val)) == (-1.0, 2.0)
    assert float(activation.scale) == pytest.approx(3.0 / 255) and int(activation.zero_point) == -128 + 85
