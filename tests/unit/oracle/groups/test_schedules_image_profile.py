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
    """The tiny model's window of 6 makes every schedule but one call and chunks of 70 end a chunk inside
    the image's 67 tokens: those are refused; chunks of 70 (the image whole in the first) run, on ports
    built for that schedule, and pass as the policy's one call does."""
    run = verify(tiny_model, VerifyOptions(port=f"{__name__}:ProfiledChunksUpTo70", groups=("schedules",)))
    ran = [cell for cell in run.figures["grid"] if cell["outcome"] != "refused"]
    explicit = [cell for cell in ran if cell["schedule"] == "chunks of C"]
    assert {cell["schedule"] for cell in ran} == {"policy", "chunks of C"} and len(explicit) >= 5, ran
    assert all(cell["chunks"].startswith("[70, ") and cell["outcome"] == "pass" for cell in explicit), explicit
    *cases, count = run.rows
    refused = len(run.figures["grid"]) - len(ran)
    assert count.check == f"cases run: {len(ran)} ({refused} refused by the port's limits, 0 over the budget)"
    assert len(cases) == len({cell["length"] for cell in ran}) and all(row.compared and not row.failed for row in cases)
