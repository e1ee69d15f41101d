"""The ExecuTorch lane's one layout: batch 2, two image slots (64 soft tokens at profile 70, 120 at
140; row 0 fills both, row 1 the second) and six positions to decode past the prompt. The text
runtimes, the image runtime and the bundle all take its ``max_seq``, so they share one lowered
text program (lowering it is most of the lane's time)."""

from __future__ import annotations

from typing import Any

import pytest

from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.ports.prompt import Prompt

BATCH = 2
BACKENDS = ("executorch", "executorch-stages")  # the lane's two ExecuTorch backends
# as test parameters: the one program (the default) on every run; every stage its own program (each
# layer's prefill and decode programs on top, about 150 s of one worker's lowering) in the nightly lane
BACKEND_PARAMS = (pytest.param("executorch"), pytest.param("executorch-stages", marks=pytest.mark.nightly))
EDGE_GROUP = "executorch-tiny"  # the xdist group of the tests that lower these programs: one worker lowers them


def edge_image_case(config: Any) -> tuple[Prompt, int]:
    """The image prompt and the lane's ``max_seq``."""
    second = ((2, (40, 72), 140),)
    prompt = image_prompt(config, text_after=[3, 1], seed=5, then=second, with_image=[(True, True), (False, True)])
    return prompt, prompt.input_ids.shape[1] + 6
