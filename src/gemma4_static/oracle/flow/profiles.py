"""Which profiles a verification runs: float32 against HF float32; bfloat16, float16 and the
integer schemes against HF in float64, gated (:mod:`..numerics.gates`)."""

from __future__ import annotations

from typing import Any

import torch

from ...executorch.backends import backend_named
from ...executorch.xnnpack_quant import XnnpackQuantization
from ...ports.base import PortLimits
from ...ports.registry import DEFAULT_PORT, declared_limits, port_factory
from ...quant import Scheme, parse_scheme
from ..numerics.gates import GATES, quant_gate

PROFILES = (torch.float32, *GATES)  # float32 is checked against HF float32, the others against float64


def checked_profile(model: Any, dtype: torch.dtype, quant: str | None, backend: str, port: str) -> Scheme | None:
    """The integer scheme ``quant`` names (``None`` without); a ``ValueError`` for a profile that is not
    gated for ``model`` or that ``port`` on ``backend`` does not run."""
    if dtype not in PROFILES:
        raise ValueError(f"dtype must be one of {list(PROFILES)}, got {dtype}")
    limits = declared_limits(port_factory(port))  # else checked on the port built (open_session)
    scheme = None if quant is None else integer_scheme(quant, dtype, backend, port, limits)
    if (dtype != torch.float32 or scheme is not None) and model.config.get_text_config().enable_moe_block:
        raise ValueError(
            f"the {quant or str(dtype).removeprefix('torch.')} profile of a mixture-of-experts model is not gated "
            "yet: in bf16 HF's own top-k differs from float64's on about half the tokens (51% on the 26B-A4B geometry, "
            "from layer 0), which gates on stage errors cannot judge; use float32"
        )
    if limits is not None and dtype not in limits.dtypes:
        raise ValueError(f"port {port!r} runs {[str(d).removeprefix('torch.') for d in limits.dtypes]}, not {dtype}")
    return scheme


def integer_scheme(quant: str, dtype: torch.dtype, backend: str, port: str, limits: PortLimits | None) -> Scheme:
    """The gated scheme ``quant`` names, over float32: for this runtime fake-quantized PyTorch stages,
    or XNNPACK's quantized programs on an ExecuTorch backend; for another port a scheme of its
    ``limits.schemes`` (``None``: checked on the port built), in its own recipe (a static one calibrated
    on the suite's prompts). A ``ValueError`` otherwise."""
    scheme = parse_scheme(quant)
    if dtype != torch.float32:
        raise ValueError(f"quant runs over float32, not {str(dtype).removeprefix('torch.')}")
    if port == DEFAULT_PORT and not backend_named(backend).eager:
        XnnpackQuantization(scheme)  # a ValueError naming what XNNPACK cannot run
    if limits is not None and port != DEFAULT_PORT:
        refused_scheme(port, limits, quant)
    quant_gate(scheme.name, backend)  # a ValueError for a scheme without gates there
    return scheme


def refused_scheme(port: str, limits: PortLimits, quant: str) -> None:
    """A ``ValueError`` when ``port`` (with ``limits``) does not declare integer scheme ``quant``."""
    if quant not in limits.schemes:
        raise ValueError(f"port {port!r} runs the integer schemes {list(limits.schemes)}, not {quant!r}")
