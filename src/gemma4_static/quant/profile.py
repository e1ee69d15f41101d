"""A quantization profile of one runtime's stages: every :class:`~.sites.Site` the scheme
quantizes, named and grouped, calibrated once in float and then switched group by group.

Groups: ``embedding`` (the token table), ``PLE`` (the per-layer-embedding path: its table and
projection, and every layer's per-layer-input gate and projection), ``vision`` (the encoder layers'
projections), ``layer i`` (all of its projections), each projection kind across layers (``q_proj``,
..., ``ple_projection``) and ``LM head``. A mixture-of-experts block's experts stay in float."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from ..npu.embedding import PerLayerInputs
from ..npu.stages import Stages
from .schemes import SCHEMES, Scheme
from .sites import Site, linear_site

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PER_LAYER_INPUT = ("ple_gate", "ple_projection")


class QuantProfile:
    """The sites of ``scheme`` on one runtime's stages (built by :func:`quantize`, all in float)."""

    def __init__(self, scheme: Scheme, sites: list[Site]) -> None:
        self.scheme, self.sites = scheme, sites
        self.calibration_seconds = 0.0

    @property
    def groups(self) -> list[str]:
        """Every group name, in data-flow order, then the projection kinds."""
        seen: dict[str, None] = {}
        for site in self.sites:
            seen.update(dict.fromkeys(group for group in site.groups if group not in (*PROJECTIONS, *PER_LAYER_INPUT)))
        kinds = [kind for kind in (*PROJECTIONS, *PER_LAYER_INPUT) if any(kind in s.groups for s in self.sites)]
        return [*seen, *kinds]

    def select(self, quantized: Callable[[Site], bool]) -> None:
        """Quantize the sites ``quantized(site)`` picks; the others run in float."""
        for site in self.sites:
            site.set("quantized" if quantized(site) else "float")

    def every(self) -> None:
        """Quantize every site (the profile as calibrated)."""
        self.select(lambda site: True)

    def only(self, group: str) -> None:
        self._known(group)
        self.select(lambda site: group in site.groups)

    def all_but(self, group: str) -> None:
        self._known(group)
        self.select(lambda site: group not in site.groups)

    def calibrate(self, run: Callable[[], Any], *, unreached: str = "error") -> None:
        """Record every activation's range while ``run()`` runs the stages in float (min/max
        observers), fix them, and quantize every site. A site ``run()`` never reached is a
        ``ValueError`` (``unreached="error"``), or is dropped and stays float (``"float"``: modules a
        model holds but never calls)."""
        if unreached not in ("error", "float"):
            raise ValueError(f"unreached must be 'error' or 'float', got {unreached!r}")
        started = time.perf_counter()
        for site in self.sites:
            site.set("observe")
        run()
        reached = [site for site in self.sites if site.activation is None or site.activation.observed]
        if unreached == "float":
            for site in set(self.sites) - set(reached):
                site.set("float")
            self.sites = reached
        for site in self.sites:
            if site.activation is not None:
                site.activation.freeze()
        self.select(lambda site: True)
        self.calibration_seconds = time.perf_counter() - started

    def adopt(self, calibrated: QuantProfile) -> None:
        """Take the activation ranges of ``calibrated`` (the same scheme on another runtime of the same
        weights, site by site) and quantize every site; a site it dropped (never reached) stays float here too."""
        ranges = {site.name: site.activation for site in calibrated.sites}
        for site in self.sites:
            if site.name not in ranges:
                site.set("float")
        self.sites = [site for site in self.sites if site.name in ranges]
        for site in self.sites:
            if site.activation is not None:
                site.activation.copy_range(ranges[site.name])
        self.select(lambda site: True)

    def _known(self, group: str) -> None:
        if group not in self.groups:
            raise ValueError(f"group must be one of {self.groups}, got {group!r}")


def quantize(stages: Stages, scheme: Scheme) -> QuantProfile:
    """The profile of ``scheme`` on ``stages`` (the runtime's own modules, changed in place: shared
    ``nn.Linear`` weights are wrapped, never modified); every site starts quantized, uncalibrated
    (:meth:`QuantProfile.calibrate` before the first call). A dynamic scheme is a ``ValueError``: a
    port's recipe, not this runtime's."""
    if scheme.dynamic:
        raise ValueError(
            f"quant scheme {scheme.name!r} is dynamic (activations ranged per token at run time: a port's recipe, "
            f"verify --port executorch-gemma4 --quant {scheme.name}); this runtime runs the static {list(SCHEMES)}"
        )
    if scheme.per_tensor:
        raise ValueError(
            f"quant scheme {scheme.name!r} is a port's static recipe (every activation and weight per tensor: verify "
            f"--port tico-gemma4 --quant {scheme.name}); this runtime runs {list(SCHEMES)}"
        )
    return QuantProfile(scheme, list(_sites(stages, scheme)))


def _sites(stages: Stages, scheme: Scheme) -> Iterator[Site]:
    act, bits, group_size = scheme.activation_bits, scheme.weight_bits, scheme.group_size
    if scheme.table_bits is not None:
        yield Site("token embedding table", ("embedding",), stages.embedding, "weight", weight_bits=scheme.table_bits)
    ple = stages.per_layer_inputs
    if isinstance(ple, PerLayerInputs):
        if scheme.table_bits is not None:
            yield Site("PLE table", ("PLE",), ple.table, "weight", weight_bits=scheme.table_bits)
        yield Site(
            "PLE projection",
            ("PLE",),
            ple,
            "projection",
            weight_bits=bits,
            group_size=group_size,
            activation_bits=act,
            argument=1,  # forward(input_ids, embeds): the projection reads the embeddings
        )
    if stages.vision is not None:
        for index, layer in enumerate(stages.vision.layers):
            for kind in PROJECTIONS:
                name = f"vision layer {index} {kind}"
                yield linear_site(name, ("vision",), getattr(layer, kind), "linear", bits, group_size, act)
    for index, layer in enumerate(stages.layers):
        for kind in (*PROJECTIONS, *PER_LAYER_INPUT):
            if getattr(layer, kind) is None:
                continue
            groups = (f"layer {index}", kind, *(("PLE",) if kind in PER_LAYER_INPUT else ()))
            yield linear_site(f"layer {index} {kind}", groups, layer, kind, bits, group_size, act)
    if scheme.head_bits is not None:
        head, bits = stages.lm_head, scheme.head_bits
        yield Site("LM head", ("LM head",), head, "weight", weight_bits=bits, activation_bits=act, reads=head.matmul)
