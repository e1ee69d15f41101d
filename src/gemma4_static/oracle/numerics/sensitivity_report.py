"""A sensitivity sweep (:mod:`..flow.sensitivity`) as a ranked table, a JSON section and a bar chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TOP = 5  # the groups the summary names per mode


def table_lines(sweep: Any) -> list[str]:
    """The ranked table: per mode, every group with its output's and the logits' metrics."""
    base = sweep.baseline
    lines = [
        f"sensitivity {sweep.scheme}: every group quantized: logits SQNR {base.logits.sqnr_db:.1f} dB, "
        f"top-1 {base.top1_agreement:.1%}, KL {base.kl_mean:.3g} nats (max {base.kl_max:.3g}); "
        f"calibration {sweep.calibration_seconds:.1f} s, sweep {sweep.sweep_seconds:.1f} s",
    ]
    header = (
        f"{'rank':>4}  {'group':<16} {'output':<32} {'SQNR':>6} {'cosine':>8} {'PEIR':>8}"
        f" | logits {'SQNR':>6} {'cosine':>8} {'PEIR':>8} {'top-1':>6} {'KL mean':>9} {'KL max':>9}"
    )
    for mode in ("only", "all but"):
        title = "one group quantized, the rest float" if mode == "only" else "every group quantized but one"
        lines += [f"{mode}: {title} (ranked by KL)", header]
        for rank, result in enumerate(sweep.ranked(mode), start=1):
            out, logits = result.at_output, result.logits
            lines.append(
                f"{rank:>4}  {result.group:<16} {result.output:<32} {out.sqnr_db:>6.1f} {out.cosine:>8.5f} "
                f"{out.peir:>8.2e} | logits {logits.sqnr_db:>6.1f} {logits.cosine:>8.5f} {logits.peir:>8.2e} "
                f"{result.top1_agreement:>6.1%} {result.kl_mean:>9.3g} {result.kl_max:>9.3g}"
            )
    return lines


def as_json(sweep: Any) -> dict[str, Any]:
    return {
        "scheme": sweep.scheme,
        "calibration_seconds": sweep.calibration_seconds,
        "sweep_seconds": sweep.sweep_seconds,
        "baseline": sweep.baseline.as_dict(),
        "ranked": {mode: [result.as_dict() for result in sweep.ranked(mode)] for mode in ("only", "all but")},
    }


def write_chart(sweep: Any, path: Path, *, title: str) -> None:
    """Two bar charts side by side, a bar per group (most sensitive on top): the logits' mean KL with
    only that group quantized, and with every group but that one (the full profile's KL dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    groups = len(sweep.ranked("only"))
    figure, axes = pyplot.subplots(1, 2, figsize=(13, 2.0 + 0.28 * groups), constrained_layout=True)
    for axis, mode in zip(axes, ("only", "all but"), strict=True):
        ranked = sweep.ranked(mode)[::-1]  # barh draws the first bar at the bottom
        axis.barh([result.group for result in ranked], [result.kl_mean for result in ranked], color="#4c72b0")
        axis.axvline(sweep.baseline.kl_mean, color="#c44e52", linestyle="--", label="every group quantized")
        axis.set_title("only this group quantized" if mode == "only" else "every group but this one quantized")
        axis.set_xlabel("KL(float64 || ours) of the next-token distribution, mean over positions (nats)")
        axis.legend(loc="lower right")
    figure.suptitle(title)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
