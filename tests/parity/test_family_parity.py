"""The rest of the Gemma 4 family against HF: HF's own tester configurations (a MoE block and PLE in
every layer, KV sharing, no final softcap) at the tester's input shapes; the mixture-of-experts
stage fed HF's own inputs (routing identical to HF's on every token, exact ties broken as HF breaks
them); the routing tie rule; the family's stages exported; and, in the family lane, the 31B and
26B-A4B geometries through every check group of the verify flow.

Tolerances are the fp32 stage tolerances of ``tolerances.RELATIVE`` (``2e-5 * max(1, max|HF|)``):
the MoE stage repeats HF's op sequence, only the expert sum's order differs (every expert on every
token, weighted, against HF's loop over the hit experts), a few fp32 ulps.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gemma4_static.commands.pytest_items import check_group
from gemma4_static.oracle.checks import parity, parity_masks
from gemma4_static.oracle.checks.routing import MARGIN_BOUND, RoutingLedger, is_structural_tie, prefix_keys
from gemma4_static.oracle.groups import names
from gemma4_static.oracle.references.family import GEOMETRY_NAMES, TESTER_PATCHES
from gemma4_static.oracle.references.hf import hf_decode_logits, hf_prefill
from gemma4_static.oracle.references.samples import Prompt, text_prompt
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime
from gemma4_static.spec import text_module

FP32 = torch.float32
TESTER_LENGTHS = [1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7, 7, 7]  # CausalLMModelTester: batch 13, seq 7, tril mask


def _check(rows, report, label: str) -> None:
    worst = merge(rows, rows[0].stage, label)
    report(f"{label}: {worst.metric} {worst.value:.3g} (tolerance {worst.tolerance:.3g})")
    assert_rows_pass(rows)


def test_hf_text_tester_matches_hf_at_the_testers_shapes(tester_model, report):
    """Masks, every layer, K/V, prefill logits, decode logits and greedy tokens at the tester's
    ragged batch (13 rows of 1 to 7 tokens)."""
    prompt = text_prompt(tester_model.config, TESTER_LENGTHS)
    runtime = StaticGemma4Runtime(tester_model, max_seq=7 + 9, batch_size=len(TESTER_LENGTHS))
    port = StaticRuntimePort.around(runtime, tester_model.config)
    valid = prompt.attention_mask.bool()
    for implementation in ("eager", "sdpa"):
        _check(
            parity_masks.prefill_mask_rows(tester_model.config, valid, implementation, port.prefill_masks),
            report,
            f"prefill masks ({implementation})",
        )
    outputs = runtime.prefill_outputs(
        runtime.build_inputs(prompt.input_ids, prompt.attention_mask), keep_intermediates=True
    )
    hf = hf_prefill(tester_model, prompt)
    _check(parity.hidden_state_rows(outputs.hidden_states, hf, valid, FP32), report, "hidden states")
    _check(
        parity.kv_rows(StaticRuntimePort.around(runtime, tester_model.config), tester_model, prompt, FP32),
        report,
        "K/V",
    )
    theirs = hf.logits[torch.arange(len(TESTER_LENGTHS)), prompt.last_index]
    _check(parity.logits_rows(outputs.logits, theirs, FP32), report, "prefill logits")
    tokens = torch.randint(3, 99, (len(TESTER_LENGTHS), 4), generator=torch.Generator().manual_seed(1))
    _check(parity.decode_rows(tester_model, port, prompt, tokens, FP32), report, "decode logits")
    _check(parity.generation_rows(tester_model, port, prompt, max_new_tokens=8), report, "greedy tokens")


def _hf_moe_io(model, prompt) -> list[dict[str, torch.Tensor]]:
    """Per MoE layer, what HF's block saw and made on ``prompt``: the residual it routes on, the
    dense MLP's output, HF's choice and the combined output (before the post-feedforward norm)."""
    seen: list[dict[str, torch.Tensor]] = []
    handles = []
    for layer in text_module(model).layers:
        record: dict[str, torch.Tensor] = {}
        seen.append(record)
        handles += [
            layer.pre_feedforward_layernorm.register_forward_hook(
                lambda m, args, out, r=record: r.setdefault("residual", args[0])
            ),
            layer.mlp.register_forward_hook(lambda m, args, out, r=record: r.setdefault("dense", out)),
            layer.router.register_forward_hook(
                lambda m, args, out, r=record: (
                    r.update(probabilities=out[0], index=out[2]) if "index" not in r else None
                )
            ),
            layer.post_feedforward_layernorm.register_forward_hook(
                lambda m, args, out, r=record: r.setdefault("combined", args[0])
            ),
        ]
    try:
        hf_prefill(model, prompt)
    finally:
        for handle in handles:
            handle.remove()
    return seen


@pytest.mark.parametrize("name", ["hf-tester", "26b-a4b-geometry"])
def test_moe_stage_on_hfs_own_inputs_routes_and_combines_as_hf(name, tester_model, moe_geometry_model, report):
    """Fed HF's own block inputs, every layer's router picks HF's experts on every valid token
    (exactly), and the block's output matches HF's."""
    model = tester_model if name == "hf-tester" else moe_geometry_model
    prompt = text_prompt(model.config, [40, 23])
    runtime = StaticGemma4Runtime(model, max_seq=40, batch_size=2)
    valid = prompt.attention_mask.bool()
    rows, choices = [], 0
    for index, (layer, seen) in enumerate(zip(runtime.modules.layers, _hf_moe_io(model, prompt), strict=True)):
        _, ours = layer.experts.router(seen["residual"])
        theirs = seen["index"].view(*valid.shape, -1)
        differing = (ours[valid].sort(-1).values != theirs[valid].sort(-1).values).any(-1)
        choices += int(valid.sum())
        rows.append(parity.count_row("routing", f"layer {index} top-k vs HF", "differing tokens", int(differing.sum())))
        combined = layer.experts(seen["dense"], seen["residual"])
        rows.append(
            parity.stage_row("MoE block", f"layer {index} output", combined[valid], seen["combined"][valid], FP32)
        )
    report(f"{name}: {choices} token choices over {len(runtime.modules.layers)} layers identical to HF's")
    _check(rows, report, f"{name} MoE block")


def test_exact_router_ties_are_broken_as_hf_breaks_them(tester_model):
    """Two experts with identical router rows score identically on every token: HF's ``torch.topk``
    breaks the tie its way, and so does this runtime (the same op on the same values)."""
    layer = text_module(tester_model).layers[0]
    proj = layer.router.proj.weight
    saved = proj.detach().clone()
    try:
        proj.data[5] = proj.data[2]  # experts 2 and 5 tie everywhere
        prompt = text_prompt(tester_model.config, [7, 5])
        runtime = StaticGemma4Runtime(tester_model, max_seq=7, batch_size=2)
        seen = _hf_moe_io(tester_model, prompt)[0]
        scores = torch.nn.functional.linear(seen["residual"], proj)
        assert torch.equal(scores[..., 2], scores[..., 5])
        _, ours = runtime.modules.layers[0].experts.router(seen["residual"])
        assert torch.equal(ours.view(-1, ours.shape[-1]), seen["index"].view(-1, ours.shape[-1]))
    finally:
        proj.data.copy_(saved)


def test_routing_ties_are_pinned_and_decided_disagreements_fail(tester_model):
    """The tie rule: where this runtime chose other experts than HF, a token whose HF margin is
    within the bound is pinned to this runtime's choice (and counted), one beyond it fails."""
    prompt = text_prompt(tester_model.config, [6])
    keys = prefix_keys(prompt.input_ids[0].tolist())
    seen = _hf_moe_io(tester_model, prompt)[0]
    top = seen["probabilities"].topk(3).values.log()
    position = int((top[:, 1] - top[:, 2]).argmax())  # HF's most decided choice
    assert float(top[position, 1] - top[position, 2]) > MARGIN_BOUND
    ledger = RoutingLedger()
    first, _, third = seen["probabilities"][position].topk(3).indices.tolist()
    ledger.ours[(0, keys[position])] = tuple(sorted([first, third]))  # HF picks its second, decidedly
    with ledger.active(tester_model):
        hf_prefill(tester_model, prompt)
    assert ledger.matched == 1 and len(ledger.decided) == 1 and not ledger.ties
    assert f"layer 0 token {position}" in ledger.decided[0]
    rows = ledger.rows()
    assert rows[0].failed and not rows[1].failed

    tied = RoutingLedger()
    tied.ours[(0, keys[position])] = ledger.ours[(0, keys[position])]
    with pytest.MonkeyPatch.context() as patch:  # every margin counts as a tie
        patch.setattr("gemma4_static.oracle.checks.routing.MARGIN_BOUND", float("inf"))
        with tied.active(tester_model):
            router, routed = text_module(tester_model).layers[0].router, []
            seen_after_the_pin = router.register_forward_hook(lambda module, args, output: routed.append(output))
            try:
                pinned = hf_prefill(tester_model, prompt)
            finally:
                seen_after_the_pin.remove()
    assert len(tied.ties) == 1 and not tied.decided and float("inf") > MARGIN_BOUND
    (probabilities, weights, index), chosen = routed[0], torch.tensor(sorted([first, third]))
    assert index[position].tolist() == chosen.tolist()  # HF's router weighs the pinned experts as its own:
    expected = probabilities[position, chosen] / probabilities[position, chosen].sum() * router.per_expert_scale[chosen]
    # exact (rtol=atol=0): the same float32 operations on the same tensors in HF's order, no summation to reorder
    torch.testing.assert_close(weights[position], expected, rtol=0, atol=0)  # their probabilities renormalized, scaled
    unpinned = hf_prefill(tester_model, prompt)
    assert not torch.allclose(pinned.hidden_states[1][0, position], unpinned.hidden_states[1][0, position])
    # earlier tokens keep their experts (HF's per-expert batches change size, so only rounding moves)
    torch.testing.assert_close(pinned.hidden_states[1][0, :position], unpinned.hidden_states[1][0, :position])


def test_a_decode_tokens_choices_are_keyed_by_its_whole_history(tester_model):
    """HF's decode step through its cache: the pinner keys the new token by the prompt before it and
    itself (the history follows the cache across calls), so this runtime's choice recorded for that
    history is compared in every MoE layer; a key of the token alone would compare none."""
    prompt = text_prompt(tester_model.config, [6])
    token = torch.tensor([[9]])
    key = prefix_keys([*prompt.input_ids[0].tolist(), 9])[-1]
    moe_layers = [index for index, layer in enumerate(text_module(tester_model).layers) if layer.enable_moe_block]
    k = tester_model.config.get_text_config().top_k_experts
    ledger = RoutingLedger()
    ledger.ours.update({(layer, key): tuple(range(k)) for layer in moe_layers})
    with ledger.active(tester_model):
        hf_decode_logits(tester_model, prompt, token)
    assert moe_layers and ledger.matched == len(moe_layers), (ledger.matched, moe_layers)


def test_a_padded_rows_tokens_are_keyed_by_its_valid_tokens_alone(tester_model):
    """A left-padded batch (HF's batched layout): each valid token is keyed by the valid tokens up to
    it, padding left out (a padded slot has no key), so a choice this runtime recorded for that history
    is compared; keyed with the padding, none of the padded row's would be."""
    prompt = text_prompt(tester_model.config, [6, 4]).padded("left")
    moe_layers = [index for index, layer in enumerate(text_module(tester_model).layers) if layer.enable_moe_block]
    k = tester_model.config.get_text_config().top_k_experts
    ledger = RoutingLedger()
    for ids, valid in zip(prompt.input_ids, prompt.attention_mask.bool(), strict=True):
        for key in prefix_keys(ids[valid].tolist()):
            ledger.ours.update({(layer, key): tuple(range(k)) for layer in moe_layers})
    with ledger.active(tester_model):
        hf_prefill(tester_model, prompt)
    assert moe_layers and ledger.matched == (6 + 4) * len(moe_layers), (ledger.matched, moe_layers)


def test_a_tie_by_construction_is_decided_and_a_tie_by_rounding_pinned(tester_model):
    """Margin 0 at the top-k boundary: where the two experts share one router row, ``torch.topk``'s
    order decides on both sides, so another choice fails; where the rows differ (scores equal only by
    rounding, as seen under one kernel set) it is a tie like any other, pinned."""
    prompt = text_prompt(tester_model.config, [6])
    keys = prefix_keys(prompt.input_ids[0].tolist())
    proj = text_module(tester_model).layers[0].router.proj.weight
    k = tester_model.config.get_text_config().top_k_experts
    ranked = _hf_moe_io(tester_model, prompt)[0]["probabilities"][0].topk(k + 1).indices.tolist()
    saved = proj.detach().clone()
    try:
        proj.data[ranked[k]] = proj.data[ranked[k - 1]]  # the k-th and (k+1)-th experts of token 0 tie
        hf_choice = _hf_moe_io(tester_model, prompt)[0]["index"].view(-1, k)[0].tolist()
        other = sorted(set(hf_choice) ^ {ranked[k - 1], ranked[k]})  # the tie settled the other way
        assert len(other) == k and sorted(hf_choice) != other
        outcomes = {}
        for rule in ("construction", "rounding"):
            ledger = RoutingLedger()
            ledger.ours[(0, keys[0])] = tuple(other)
            with pytest.MonkeyPatch.context() as patch:
                if rule == "rounding":  # the same bitwise tie, told apart from identical router rows
                    patch.setattr("gemma4_static.oracle.checks.routing.is_structural_tie", lambda *_: False)
                with ledger.active(tester_model):
                    hf_prefill(tester_model, prompt)
            outcomes[rule] = (len(ledger.decided), len(ledger.ties))
        assert outcomes == {"construction": (1, 0), "rounding": (0, 1)}
        nudged = proj.detach().clone()
        nudged[ranked[k]] = torch.nextafter(nudged[ranked[k]], torch.full_like(nudged[ranked[k]], 1e9))
        router = SimpleNamespace(proj=SimpleNamespace(weight=nudged))
        assert not is_structural_tie(router, ranked[k - 1], ranked[k])
        assert is_structural_tie(SimpleNamespace(proj=SimpleNamespace(weight=proj)), ranked[k - 1], ranked[k])
    finally:
        proj.data.copy_(saved)


# the long context at 4100 tokens on the 31B and 26B-A4B geometries: about 6 and 2 minutes of a
# worker, the nightly lane's; the tiny model's and the E2B geometry's run on every run
NIGHTLY_GROUPS = ("long-positions",)


@pytest.mark.family
@pytest.mark.parametrize(
    ("model", "group"),
    [
        pytest.param(
            model,
            group,
            marks=[pytest.mark.xdist_group(f"family-{model}")]
            + ([pytest.mark.nightly] if group in NIGHTLY_GROUPS else []),
        )
        for model in GEOMETRY_NAMES
        for group in names("float32")
    ],
)
def test_family_geometry_through_each_check_group(model, group, report):
    # the grid's 9 most telling of its 44 cases (24 at a budget of 200: about 35 s more on the two geometries)
    rows = check_group("gemma4-static", model, "float32", group, schedules_budget=40)
    errors = [f"{row.stage} {row.value:.2g}" for row in rows if row.metric == "max abs diff" and not row.skipped]
    report(f"{model}, {group}: {len(rows)} rows pass; max abs diff: {', '.join(errors) or 'none'}")


def _tester_image_prompt(config, text_after: list[int], *, positions: torch.Tensor, soft: int) -> Prompt:
    """The vision tester's inputs: per row one image of 20 patches of 5 x 5 x 3 (``floats_tensor``-like
    values in ``[0, 1)``) at ``positions (20, 2)``, its ``soft`` tokens after BOS, one text token and BOI."""
    generator = torch.Generator().manual_seed(0)
    rows = []
    for after in text_after:
        text = torch.randint(10, 99, (1 + after,), generator=generator)
        image = [config.boi_token_id] + [config.image_token_id] * soft + [config.eoi_token_id]
        rows.append(torch.cat((torch.tensor([1, int(text[0])]), torch.tensor(image), text[1:])))
    longest = max(len(row) for row in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for index, row in enumerate(rows):
        ids[index, : len(row)], mask[index, : len(row)] = row, 1
    batch = len(text_after)
    return Prompt(
        input_ids=ids,
        attention_mask=mask,
        pixel_values=torch.rand(batch, TESTER_PATCHES, 75, generator=generator),
        image_position_ids=positions.expand(batch, -1, -1).clone(),
        image_slots=((3, soft),),
    )


def _grid_with_padding() -> torch.Tensor:
    """20 patch slots: a 4 x 4 grid (16 valid patches, 4 soft tokens after 2 x 2 pooling), then 4
    padding slots at (-1, -1): the layout HF's processor gives an image smaller than its budget."""
    y, x = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    grid = torch.stack((x.flatten(), y.flatten()), dim=-1)
    return torch.cat((grid, torch.full((4, 2), -1)))


def test_hf_vision_tester_images_of_20_patches_match_hf(vision_tester_model, report):
    """HF's vision tester configuration with images of 20 patch slots (processed for 5 soft tokens;
    the runtime's vision stage is static at 280 patches and pads them on the CPU side): masks with
    their image blocks, prefill logits and greedy tokens equal HF's, ragged batch of 3."""
    model = vision_tester_model
    prompt = _tester_image_prompt(model.config, [9, 4, 1], positions=_grid_with_padding(), soft=4)
    runtime = StaticGemma4Runtime(
        model, max_seq=prompt.input_ids.shape[1] + 8, batch_size=3, image_slots=prompt.image_slots
    )
    port = StaticRuntimePort.around(runtime, model.config)
    valid, types = prompt.attention_mask.bool(), prompt.mm_token_type_ids
    for implementation in ("eager", "sdpa"):  # image blocks bidirectional on sliding layers
        rows = parity_masks.prefill_mask_rows(
            model.config, valid, implementation, port.prefill_masks, mm_token_type_ids=types
        )
        _check(rows, report, f"vision tester: prefill masks ({implementation})")
    theirs = hf_prefill(model, prompt).logits[torch.arange(3), prompt.last_index]
    ours = runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    _check(parity.logits_rows(ours, theirs, FP32), report, "vision tester: prefill logits")
    _check(parity.generation_rows(model, port, prompt, max_new_tokens=6), report, "vision tester: greedy tokens")


def test_hf_vision_testers_own_positions_are_refused_as_hf_refuses_them(vision_tester_model):
    """The tester's literal inputs (20 patches all at position (1, 1), one image token per row) pool
    into one soft token per image, while the soft-token count of 20 valid patches is 5 (HF's
    processor and ``get_image_features`` count ``valid patches // k^2``). HF 5.24's own forward
    cannot take them (``split_with_sizes`` fails); the runtime refuses them with the two counts."""
    model = vision_tester_model
    same_position = torch.ones(TESTER_PATCHES, 2, dtype=torch.long)
    prompt = _tester_image_prompt(model.config, [5, 3, 1], positions=same_position, soft=1)  # as the tester
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 3"):
        model(**prompt.hf_kwargs())
    runtime = StaticGemma4Runtime(
        model, max_seq=prompt.input_ids.shape[1], batch_size=3, image_slots=prompt.image_slots
    )
    with pytest.raises(
        ValueError, match=r"the images of image slot 0 give \[5, 5, 5\] soft tokens, but the slot holds 1"
    ):
        runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
