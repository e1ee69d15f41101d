"""This project's fake quantization (``gemma4_static.quant``: PyTorch's observers and fake-quantize
ops) against a second implementation, torchao's affine primitives
(``oracle/numerics/reference_quant.py``): bit for bit, over shapes, bit widths, group layouts and
ranges not centred on zero; and the faults of the fake quantization that the check must see."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.flow.verify import selected
from gemma4_static.oracle.groups.quantization import quantization_rows, weight_row
from gemma4_static.oracle.numerics.quantized import _hf_sites
from gemma4_static.oracle.numerics.reference_quant import ReferenceActivation, integer_range, reference_weight
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.session.calibration import SchemeSides
from gemma4_static.quant import QuantProfile, fake_quant, parse_scheme
from gemma4_static.quant.fake_quant import ActivationQuantizer
from gemma4_static.runtime import StaticGemma4Runtime


def _values(shape: tuple[int, ...], seed: int, centre: float, spread: float) -> torch.Tensor:
    """Values around ``centre`` (often far from zero: one-sided ranges) with ``spread``."""
    return centre + spread * torch.randn(shape, generator=torch.Generator().manual_seed(seed))


weights = st.fixed_dictionaries(
    {
        "rows": st.integers(1, 6),
        "columns": st.one_of(st.sampled_from([16, 32, 64, 96]), st.integers(1, 100)),  # multiples of a group, and not
        "bits": st.sampled_from([4, 8]),
        "group_size": st.sampled_from([None, 16, 32]),
        "seed": st.integers(0, 2**16),
        "centre": st.floats(-5, 5),
        "spread": st.floats(1e-3, 1e2),
    }
)


@given(weights)
def test_weights_equal_torchaos_bit_for_bit(case):
    weight = _values((case["rows"], case["columns"]), case["seed"], case["centre"], case["spread"])
    ours = fake_quant.quantized_weight(weight, case["bits"], case["group_size"])
    theirs = reference_weight(weight, case["bits"], case["group_size"])
    assert torch.equal(ours, theirs), (ours - theirs).abs().max()


activations = st.fixed_dictionaries(
    {
        "bits": st.sampled_from([8, 16]),
        "seed": st.integers(0, 2**16),
        "centre": st.floats(-20, 20),  # ranges all above or all below zero among them
        "spread": st.floats(1e-3, 10),
        "calls": st.integers(1, 3),
        "beyond": st.floats(1, 3),  # the checked tensor reaches past the calibrated range
    }
)


@given(activations)
def test_activation_ranges_and_values_equal_torchaos_bit_for_bit(case):
    ours, theirs = ActivationQuantizer(case["bits"]), ReferenceActivation(case["bits"])
    for call in range(case["calls"]):
        seen = _values((2, 3, 8), case["seed"] + call, case["centre"], case["spread"])
        ours.observe(seen)
        theirs.observe(seen)
    ours.freeze()
    scale, zero_point = theirs.qparams()
    assert torch.equal(ours.scale.reshape(1), scale.reshape(1).float())
    assert torch.equal(ours.zero_point.reshape(1), zero_point.reshape(1).int())
    checked = _values((4, 8), case["seed"] + 99, case["centre"], case["spread"] * case["beyond"])
    assert torch.equal(ours(checked), theirs(checked))


ONE_SIDED = _values((2, 16), 0, 3.0, 0.5)  # every value above zero: the zero point carries the range
WIDE = _values((4, 64), 1, 0.0, 0.1)


def test_a_dropped_zero_point_fails_the_reference_check():
    (fault,) = faults_named(["quant-zero-point-dropped"])
    with fault.injected():
        ours = ActivationQuantizer(8)
        ours.observe(ONE_SIDED)
        ours.freeze()
    theirs = ReferenceActivation(8)
    with pytest.raises(ValueError, match=r"^the reference activation quantizer saw no calibration data$"):
        theirs.qparams()
    theirs.observe(ONE_SIDED)
    assert int(ours.zero_point) != int(theirs.qparams()[1])
    assert not torch.equal(ours(ONE_SIDED), theirs(ONE_SIDED))


def test_blocks_down_a_column_fail_the_reference_check():
    (fault,) = faults_named(["quant-groups-down-columns"])
    with fault.injected():
        ours = fake_quant.quantized_weight(WIDE, 4, 32)
        square = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
        down = fake_quant.quantized_weight(square, 4, 32)
    assert not torch.equal(ours, reference_weight(WIDE, 4, 32))
    assert torch.equal(down, reference_weight(square.t().contiguous(), 4, 32).t())  # blocks of 32 down each column
    assert not torch.equal(down, reference_weight(square.t().contiguous(), 4, None).t())  # not one per column


def test_the_check_compares_something_or_fails():
    """No site compared is a NaN row (never a pass); XNNPACK's quantizer and a port's own recipe are
    one SKIP row each with the reason; a float profile does not run the group."""
    empty = weight_row([], {})
    assert empty.failed and math.isnan(empty.value)
    assert (empty.stage, empty.check, empty.metric) == (
        "quantization",
        "0 quantized weights vs torchao",
        "max |ours - torchao|",
    )
    a8w8, recipe = parse_scheme("a8w8"), parse_scheme("8da4w")
    (skipped,) = quantization_rows(SimpleNamespace(scheme=a8w8, sides=SchemeSides(None, adopted=object())))
    assert skipped.skipped.startswith("XNNPACK's PT2E quantizer")
    assert (skipped.stage, skipped.check) == ("quantization", "sites vs torchao and HF's ranges")
    port = SimpleNamespace(name="a port")
    (skipped,) = quantization_rows(SimpleNamespace(scheme=recipe, sides=SchemeSides(None), port=port))
    assert skipped.skipped.startswith("a port quantizes itself in its own recipe (8da4w)")
    assert (skipped.stage, skipped.check) == ("quantization", "sites vs torchao and HF's ranges")
    assert "quantization" not in selected(VerifyOptions()) and "quantization" in selected(VerifyOptions(quant="a8w8"))


def test_a_site_without_an_hf_counterpart_is_said_and_nothing_passes_for_it():
    profile = QuantProfile(parse_scheme("a16w8"), [SimpleNamespace(name="layer 0 q_proj", activation=None)])
    session = SimpleNamespace(scheme=profile.scheme, sides=SchemeSides(None, adopted=profile))
    unmatched, weights, *ranges = quantization_rows(session)
    assert unmatched.check == "sites HF's forward never reached: layer 0 q_proj" and unmatched.status == "INFO"
    assert (unmatched.stage, unmatched.metric, unmatched.value) == ("quantization", "sites not compared", 1)
    assert weights.failed and all(row.failed for row in ranges)


@pytest.mark.parametrize("bits", [1, 17, 8.0, "8"])
def test_a_bit_width_outside_the_reference_is_refused(bits):
    with pytest.raises(ValueError, match=r"bits must be an int in \[2, 16\], got"):
        integer_range(bits)


def test_the_reference_takes_every_width_from_2_to_16_bits():
    assert [integer_range(bits) for bits in (2, 4, 16)] == [(-2, 1), (-8, 7), (-32768, 32767)]


def test_hfs_sites_are_the_runtimes_in_the_schemes_bits(tiny_model):
    """HF quantized where the runtime quantizes: every site of the runtime's a16w4+e8+h8 profile has
    its HF counterpart by name (the vision encoder's and the LM head's among them), in the scheme's
    bits (4 for the projections, 8 for the tables and the head, as ``+e8+h8`` says); HF's extra sites
    are the K/V projections it holds but never calls (layers that reuse K/V)."""
    scheme = parse_scheme("a16w4+e8+h8")
    runtime = StaticGemma4Runtime(tiny_model, max_seq=8, quant=scheme.name)
    ours = {site.name for site in runtime.quantization.sites}
    theirs = {site.name: site for site in _hf_sites(copy.deepcopy(tiny_model), scheme)}
    assert ours <= set(theirs)
    assert {name.rsplit(" ", 1)[1] for name in set(theirs) - ours} <= {"k_proj", "v_proj"}
    assert any(name.startswith("vision layer 0 ") for name in ours)
    assert theirs["LM head"].weight_bits == 8 and theirs["LM head"].group_size is None
    assert theirs["token embedding table"].weight_bits == 8
    assert theirs["layer 0 q_proj"].weight_bits == scheme.weight_bits == 4 and theirs["layer 0 q_proj"].activation


def test_a_per_tensor_recipes_sites_are_each_per_tensor(tiny_model):
    """A port's static recipe (``a8w8t``: one weight scale a tensor, symmetric activations) on HF: every
    site in it, the tables, the per-layer inputs' projection and the head included."""
    scheme = parse_scheme("a8w8t")
    sites = list(_hf_sites(copy.deepcopy(tiny_model), scheme))
    assert {"PLE projection", "LM head", "token embedding table"} <= {site.name for site in sites}
    assert all(site.per_tensor is True for site in sites), [site.name for site in sites if site.per_tensor is not True]
    assert all(site.activation.symmetric for site in sites if site.activation is not None)


def _range_site(name: str, minimum: float, maximum: float) -> tuple[SimpleNamespace, SimpleNamespace]:
    """Our site quantizing over [-12.8, 12.7] (scale 0.1, 8 bits, zero point 0) and HF's counterpart
    that saw ``[minimum, maximum]``, with the same 8-bit weight."""
    weight = torch.linspace(-1, 1, 16).view(4, 4)
    activation = SimpleNamespace(scale=torch.tensor(0.1), zero_point=torch.tensor(0.0), low=-128, high=127)
    ours = SimpleNamespace(
        name=name, activation=activation, original=weight, quantized=reference_weight(weight, 8, None)
    )
    observed = SimpleNamespace(minimum=minimum, maximum=maximum)
    return ours, SimpleNamespace(activation=observed, weight_bits=8, group_size=None)


def test_each_activation_range_is_judged_against_hfs_by_what_it_leaves_out_and_its_width():
    """HF's values outside the site's range, in steps of its grid (the first site past half a step
    named), and its width against HF's range, which always holds zero (an all-positive range counts
    from 0)."""
    pairs = [_range_site("a", -10.0, 10.0), _range_site("b", -20.0, 5.0), _range_site("c", 1.0, 5.0)]
    profile = QuantProfile(parse_scheme("a16w8"), [ours for ours, _ in pairs])
    hf_sites = {ours.name: theirs for ours, theirs in pairs}
    session = SimpleNamespace(scheme=profile.scheme, sides=SchemeSides(None, adopted=profile, hf_sites=hf_sites))
    weights, outside, wider = quantization_rows(session)
    assert weights.check == "3 quantized weights vs torchao" and weights.value == 0 and not weights.failed
    assert (outside.metric, outside.check, outside.tolerance) == (
        "HF's values outside (steps)",
        "3 activation ranges vs HF's [first: b]",
        0.5,
    )
    assert outside.value == pytest.approx((20 - 12.8 - 2e-5 * 20) / 0.1) and outside.failed
    assert (wider.metric, wider.check, wider.tolerance) == (
        "width / HF's",
        "3 activation ranges vs HF's [first: a]",
        1.1,
    )
    assert wider.value == pytest.approx(25.5 / 5) and wider.failed  # c: 0 to 5, not 1 to 5


def test_the_weight_row_names_the_first_site_off_torchaos_weight():
    """A site whose quantized weight differs from torchao's fails the row and is named first."""
    (same, same_ref), (off, off_ref), (later, later_ref) = (_range_site(name, -1.0, 1.0) for name in "abc")
    off.quantized = off.quantized + 1e-3
    later.quantized = later.quantized - 2e-3
    row = weight_row([same, off, later], {"a": same_ref, "b": off_ref, "c": later_ref})
    assert row.check == "3 quantized weights vs torchao [first: b]" and row.failed
    assert row.value == pytest.approx(2e-3, rel=1e-5)  # float32 weights


def test_a_ports_range_is_judged_in_steps_of_its_own_grid():
    """A port's 8-bit range over [0, 25.5] has steps of 0.1 (255 of them): HF's values reaching -1.0
    are 10 steps outside, less the float32 slack at HF's largest magnitude (25.5)."""
    from gemma4_static.oracle.groups.quantization import port_range_rows

    scheme = parse_scheme("a8w8")
    port = SimpleNamespace(
        observed_ranges=lambda: {"layer 0 q_proj": (0.0, 25.5)},
        limits=SimpleNamespace(schemes=SimpleNamespace(recipe=lambda name: None)),
    )
    seen = SimpleNamespace(minimum=-1.0, maximum=25.5, observed=True)
    hf_sites = {"layer 0 q_proj": SimpleNamespace(activation=seen)}
    session = SimpleNamespace(port=port, scheme=scheme, sides=SchemeSides(None, hf_sites=hf_sites))
    outside, wider = port_range_rows(session)
    assert outside.check == "1 of its 1 calibrated ranges vs HF's [worst: layer 0 q_proj]"
    assert outside.value == pytest.approx((1.0 - 2e-5 * 25.5) / 0.1, rel=1e-9) and outside.failed
    assert wider.value == pytest.approx(25.5 / 26.5) and not wider.failed
