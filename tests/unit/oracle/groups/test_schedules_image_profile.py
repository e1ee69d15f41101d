"""The schedules grid of a port that needs an image in every prompt, in a fixed profile: each prompt
starts with the profile's image, a schedule whose chunk would end inside the image is refused, and
a port built for an explicit schedule holds the image's slot as the policy's port does."""

from __future__ import annotations

import dataclasses

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import ImageLimits
from gemma4_static.ports.images import ImageProfile
from tests.unit.ports.port_adapters import WrappedWithImages

PROFILE = ImageProfile("tiny 48x48", (48, 48), budget=70, soft_tokens=64, slots=(2,), bos=True)  # 67 tokens first


class ProfiledChunksUpTo70(WrappedWithImages):
    """This runtime behind a port that needs the profile's image first and takes chunks of at most 70."""

    name = "profiled, chunks up to 70"
    limits = dataclasses.replace(
        WrappedWithImages.limits,
        images=ImageLimits(accepted=True, required=True, profiles=(PROFILE,)),
        chunks=dataclasses.replace(WrappedWithImages.limits.chunks, max_length=70),
    )


def test_an_explicit_schedule_runs_on_a_port_built_with_the_profiles_image_slot(tiny_model):
    options = VerifyOptions(port=f"{__name__}:ProfiledChunksUpTo70", groups=("schedules",))
    run = verify(tiny_model, options)
    ran = [
        (cell["length"], cell["schedule"], cell["outcome"])
        for cell in run.figures["grid"]
        if cell["outcome"] != "refused"
    ]
    # the policy's one call where it fits, else chunks of 70 (the image whole in the first): every other
    # schedule of the tiny model's window of 6 ends a chunk inside the 67 tokens of the image
    assert ran == [(68, "policy", "pass")] + [
        (length, "chunks of C", "pass") for length in (72, 73, 74, 79, 80, 87, 94)
    ]
    *cases, count = run.rows
    assert count.check == "cases run: 8 (70 refused by the port's limits, 0 over the budget)"
    assert len(cases) == 8 and all(row.compared and not row.failed for row in cases), cases
