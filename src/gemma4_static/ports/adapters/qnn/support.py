"""Qualcomm's static Gemma 4 helpers: its package imported without its ``__init__`` chain (which pulls
Qualcomm backend modules and ``torchtune``), and the minimal reproduction of its mask update's defect
(docs/findings.md), which the port's ``explain`` ties its expected failures to."""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any


def stub_package(name: str) -> None:
    """Make ``name`` importable as a package without running its ``__init__`` (its submodules
    still load from the same folder)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError(f"no package {name}")
    package = types.ModuleType(name)
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = name
    sys.modules[name] = package


def mask_update_defect(masking: Any) -> str | None:
    """What ``smart_mask_update`` of Qualcomm's ``masking_utils`` gets wrong on the smallest case
    (three tokens cached in a context of 8, sliding window 2), or ``None`` once it is right. It
    indexes the head axis of the 4-D masks it builds (``[B, 1, ar_len, context]``) as if they were
    ``[B, ar_len, context]``: a decode program's causal update opens every slot (unwritten ones
    too), its sliding update closes every slot (its own too), a program of ``ar_len > 1`` raises."""
    causal = masking.CausalAttentionMask(1, 1, 8)
    causal.smart_mask_update(0, 3, None)
    sliding = masking.SlidingWindowAttentionMask(1, 1, 8, sliding_window=2)
    sliding.smart_mask_update(0, 3, None)
    open_causal, open_sliding = (int((m.mask[0, 0, 0] == 0).sum()) for m in (causal, sliding))
    try:
        masking.SlidingWindowAttentionMask(1, 4, 8, sliding_window=2).smart_mask_update(0, 4, None)
        raises = ""
    except IndexError as error:
        raises = f"; ar_len 4 raises IndexError ({error})"
    if (open_causal, open_sliding, raises) == (4, 2, ""):
        return None
    return (
        "masking_utils smart_mask_update indexes the mask's head axis: after 3 cached tokens a decode "
        f"step sees {open_causal} of 8 keys under the causal mask (expected 4) and {open_sliding} under "
        f"the sliding one (expected 2){raises}"
    )
