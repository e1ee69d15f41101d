"""The low-precision profiles' metrics on the default models, as the README's tables.

Runs ``verify``'s dtype-dependent checks for each model and profile (ours and HF in the same dtype,
both against HF in float64) and prints, per stage kind, the worst SQNR and cosine and, for logits,
the token rule's figures (margin shift in ulps, decided top-1 rows and disagreements); the greedy
tokens' decided and tied divergences and matched prefix; then the fp16 headroom of every stage and
layer (``65504 / max |activation|`` over prefill, decode and generation).

    python benchmarks/numerics_table.py [--models tiny e2b-geometry] [--quant a16w8 a8w8 ...] [--port NAME]

With ``--quant`` the integer schemes instead (margin shift in logits; no headroom table: the stages
compute in float32); with ``--port`` another port (``--port executorch-gemma4 --quant 8da4w``: its
own recipe). The last column: how far the stage falls below HF's own SQNR in the same profile.
"""

from __future__ import annotations

import argparse

import torch

from gemma4_static.oracle.flow.verify import run_verification
from gemma4_static.oracle.numerics.gates import GATED_STAGES, GATES
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.ports.registry import DEFAULT_PORT

CHECKS = ("inputs", "mask-value", "layers", "chunked-prefill", "decode", "overflow")
KINDS = GATED_STAGES


def _worst(rows, stage: str, metric: str) -> str:
    chosen = [row for row in rows if row.stage == stage and row.metric == metric]
    if not chosen:
        return "-"
    row = (
        max(chosen, key=lambda row: row.value) if metric in WORST_IS_LARGEST else min(chosen, key=lambda row: row.value)
    )
    return f"{row.value:.4g} \\| {row.hf:.4g}" if row.hf is not None else f"{row.value:.4g}"


def _decided(rows, stage: str) -> str:
    """``disagreements | HF's (decided of all)`` of the top-1 row."""
    chosen = [row for row in rows if row.stage == stage and row.metric == "top-1 disagreements"]
    if not chosen:
        return "-"
    row = chosen[-1]
    return f"{row.value:g} \\| {row.hf:g} ({row.check.rsplit(', ', 1)[1]})"


WORST_IS_LARGEST = (
    "margin shift (ulps)",
    "margin shift (logits)",
    "decided divergences",
    "tied divergences",
    "SQNR below HF's (dB)",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "e2b-geometry"])
    parser.add_argument("--quant", nargs="+", metavar="SCHEME", help="integer schemes instead of bf16 and fp16")
    parser.add_argument("--port", default=DEFAULT_PORT, help="the port measured (default: this runtime)")
    args = parser.parse_args()
    headroom: dict[str, dict[str, float]] = {}
    unit = "logits" if args.quant else "ulps"
    print(
        f"| model | profile | stage | SQNR dB | cosine | margin shift ({unit}) | top-1 disagreements (decided) "
        "| below HF's SQNR (dB) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    profiles = [(torch.float32, scheme) for scheme in args.quant] if args.quant else [(dtype, None) for dtype in GATES]
    for name in args.models:
        model = build_default_model(name)
        for dtype, scheme in profiles:
            rows = run_verification(model, VerifyOptions(dtype=dtype, groups=CHECKS, quant=scheme, port=args.port))
            label = scheme or str(dtype).removeprefix("torch.")
            for stage in KINDS:
                if not any(row.stage == stage for row in rows):
                    continue
                cells = [_worst(rows, stage, metric) for metric in ("SQNR dB", "cosine", f"margin shift ({unit})")]
                deficit = _worst(rows, stage, "SQNR below HF's (dB)")
                print(
                    f"| {name} | {label} | {stage} | " + " | ".join(cells) + f" | {_decided(rows, stage)} | {deficit} |"
                )
            greedy = ", ".join(
                f"{metric} {_worst(rows, 'generation', metric)}"
                for metric in ("decided divergences", "tied divergences", "matched prefix")
            )
            print(f"| {name} | {label} | greedy tokens: {greedy} | | | | | |")
            if dtype == torch.float16 and scheme is None:
                headroom[name] = {
                    row.check.split(",")[0]: row.tolerance / row.value for row in rows if row.stage == "overflow"
                }
    print("\n| model | stage or layer (largest sub-stage) | headroom |")
    print("| --- | --- | --- |")
    for name, groups in headroom.items():
        for group, factor in groups.items():
            print(f"| {name} | {group} | {factor:.3g}x |")


if __name__ == "__main__":
    main()
