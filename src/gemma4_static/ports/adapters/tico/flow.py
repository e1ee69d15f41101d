"""TICO's own verification flow (its ``verify_step_*`` functions), run as its
``run_static_gemma4_runtime`` runs them: its own idea of parity, shown beside the suite's verdict."""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

from ...capabilities.own_checks import OwnCheck

# the flow's steps in run_static_gemma4_runtime's order, with the suite's stages that judge the same
OWN_STEPS = (
    ("build_static_inputs", ("static inputs",)),
    ("token_embedding", ("token embedding",)),
    ("vision_prefill", ("vision prefill",)),
    ("mm_fusion", ("decoder layers",)),
    ("masks_and_rope", ("masks prefill", "RoPE")),
    ("prefill", ("prefill logits",)),
    ("decode", ("decode steps",)),
    ("generation", ("generation",)),
)
OWN_DECODE_STEPS, OWN_GENERATED = 4, 16  # StaticGemma4RuntimeConfig's verify_steps and gen_steps


def own_flow(runtime: Any, key: str, room: int) -> list[OwnCheck]:
    """TICO's ``verify_step_*`` functions on ``runtime`` and the prompt its processor knows as
    ``key``, in the order and with the settings of ``run_static_gemma4_runtime`` (4 decode steps, 16
    generated tokens, fewer where its layout holds only ``room`` more tokens; no image object: the
    processor stand-in holds the prompt): per step what it printed, or what it raised. Where its own
    flow would stop at a step that raises, the later steps still run, but those needing its output."""
    from tico.quantization.recipes.debug import static_gemma4_runtime as flow

    results: dict[str, Any] = {}
    steps = {
        "build_static_inputs": lambda: flow.verify_step_build_static_inputs(runtime, key, None),
        "token_embedding": lambda: flow.verify_step_token_embedding(runtime, results["build_static_inputs"]),
        "vision_prefill": lambda: flow.verify_step_vision_prefill(runtime, results["build_static_inputs"]),
        "mm_fusion": lambda: flow.verify_step_mm_fusion(
            runtime, results["token_embedding"], results["vision_prefill"], key, None
        ),
        "masks_and_rope": lambda: flow.verify_step_masks_and_rope(runtime, results["build_static_inputs"]),
        "prefill": lambda: flow.verify_step_prefill(runtime, results["build_static_inputs"], key, None),
        "decode": lambda: flow.verify_step_decode(
            runtime, results["build_static_inputs"], key, None, results["prefill"], min(OWN_DECODE_STEPS, room)
        ),
        "generation": lambda: flow.verify_step_generation(
            runtime, results["build_static_inputs"], key, None, min(OWN_GENERATED, room)
        ),
    }
    checks = []
    for step, stages in OWN_STEPS:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # HF's deprecation notices for the calls it makes
                results[step] = steps[step]()
        except KeyError as missing:  # an input from an earlier step that raised
            checks.append(OwnCheck(step, "", stages, f"not run: it needs the output of {missing}, which raised"))
        except Exception as error:  # its own verdict: a step that raises says so
            checks.append(OwnCheck(step, out.getvalue().strip(), stages, f"{type(error).__name__}: {error}"))
        else:
            checks.append(OwnCheck(step, out.getvalue().strip(), stages))
    return checks
