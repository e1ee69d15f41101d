"""What each input form costs per prefill call, side by side in one run (e2b-vision model, batch 2).

Pairs, each timed alternately on one runtime: a left-padded batch against the same batch
right-padded (the rows are laid out first); images processed at 70 soft tokens in a runtime whose
vision stage is static at 140 (patches padded on the CPU side) against the same images already
padded (so only the padding step differs); a batch whose second row holds text in the image slot
against the same batch with an image in both rows; a two-slot runtime (64 soft tokens at profile
70 after BOS, 120 at 140 mid-prompt) on two images a row against HF's forward on the same batch,
and on a text-only batch against a runtime without slots. Prints the median of each and the ratio.

    python benchmarks/bench_inputs.py [--repeats 15]
"""

from __future__ import annotations

import argparse

import torch
from timing import interleaved_medians

from gemma4_static import StaticGemma4Runtime
from gemma4_static.cpu.vision import fit_patches
from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.oracle.references.samples import image_prompt, text_prompt


def _row(label: str, first: float, second: float) -> None:
    print(f"{label:<52} {first * 1e3:>9.2f} {second * 1e3:>9.2f} {first / second:>7.3f}")


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    model = build_default_model("e2b-vision")
    print(f"e2b-vision, batch 2, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'prefill of':<52} {'new ms':>9} {'base ms':>9} {'ratio':>7}")

    text = text_prompt(model.config, [48, 20])
    runtime = StaticGemma4Runtime(model, max_seq=64, batch_size=2)
    left_ids, left_mask = text.left_padded()
    _row(
        "left-padded text vs right-padded",
        *interleaved_medians(
            lambda: runtime.prefill(left_ids, left_mask),
            lambda: runtime.prefill(text.input_ids, text.attention_mask),
            args.repeats,
        ),
    )

    prompt = image_prompt(model.config, text_after=[5, 2])
    runtime = StaticGemma4Runtime(
        model, max_seq=prompt.input_ids.shape[1] + 4, batch_size=2, vision_profile=140, image_slots=prompt.image_slots
    )
    padded = fit_patches(prompt.pixel_values, prompt.image_position_ids, runtime.spec.vision, profile=140)
    ids, mask = prompt.input_ids, prompt.attention_mask
    _row(
        f"{prompt.pixel_values.shape[1]} patches at profile 140 vs already padded",
        *interleaved_medians(
            lambda: runtime.prefill(ids, mask, prompt.pixel_values, prompt.image_position_ids),
            lambda: runtime.prefill(ids, mask, *padded),
            args.repeats,
        ),
    )

    mixed = image_prompt(model.config, text_after=[5, 2], with_image=[True, False])
    mixed_images = (mixed.pixel_values, mixed.image_position_ids)
    runtime = StaticGemma4Runtime(
        model, max_seq=prompt.input_ids.shape[1] + 4, batch_size=2, image_slots=prompt.image_slots
    )
    _row(
        "image + text in the slot vs two images",
        *interleaved_medians(
            lambda: runtime.prefill(mixed.input_ids, mixed.attention_mask, *mixed_images),
            lambda: runtime.prefill(ids, mask, prompt.pixel_values, prompt.image_position_ids),
            args.repeats,
        ),
    )
    _two_slots(model, args.repeats)


def _two_slots(model, repeats: int) -> None:
    two = image_prompt(model.config, text_after=[5, 2], text_before=1, then=((5, (40, 72), 140),))
    max_seq = two.input_ids.shape[1] + 4
    runtime = StaticGemma4Runtime(model, max_seq=max_seq, batch_size=2, image_slots=two.image_slots)
    images = (two.pixel_values, two.image_position_ids)
    _row(
        "two image slots, two images a row vs HF forward",
        *interleaved_medians(
            lambda: runtime.prefill(two.input_ids, two.attention_mask, *images),
            lambda: model(**two.hf_kwargs()),
            repeats,
        ),
    )
    text = image_prompt(
        model.config, text_after=[5, 2], text_before=1, then=((5, (40, 72), 140),), with_image=[False, False]
    )
    plain = StaticGemma4Runtime(model, max_seq=max_seq, batch_size=2)
    _row(
        "two image slots holding text vs no slots",
        *interleaved_medians(
            lambda: runtime.prefill(text.input_ids, text.attention_mask),
            lambda: plain.prefill(text.input_ids, text.attention_mask),
            repeats,
        ),
    )


if __name__ == "__main__":
    main()
