"""What every page shares: one self-contained HTML document (its CSS inline, its pictures inline SVG,
no script and no address outside the file), status badges that say their status in words, numbers
as the terminal prints them, and the run's provenance."""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import Any


def page(title: str, body: str) -> str:
    """A complete HTML5 document: ``title`` (escaped here) and ``body`` (already HTML)."""
    style = resources.files(__package__).joinpath("page.css").read_text()
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>\n{style}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def table(columns: list[str], body: str) -> str:
    """A table with a header of ``columns`` (a name ending in ``~`` is hidden on a narrow screen) and
    ``body`` rows (HTML), scrolled sideways inside its own box when it is wider than the screen."""
    head = "".join(
        f'<th scope="col" class="hide-narrow">{escape(name[:-1])}</th>'
        if name.endswith("~")
        else f'<th scope="col">{escape(name)}</th>'
        for name in columns
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def badge(text: str, css: str | None = None) -> str:
    """A status in words inside a coloured box (the colour only repeats the word)."""
    return f'<span class="badge {escape(css or text)}">{escape(text)}</span>'


def number(value: float | None) -> str:
    """``value`` as the terminal prints it (4 significant digits); ``n/a`` for a null (not a number)."""
    return "n/a" if value is None else f"{value:.4g}"


def gate_text(row: dict[str, Any]) -> str:
    """A row's gate as the terminal prints it: ``<= 0.0005``, ``>= 43`` (dB), ``not gated``."""
    tolerance = row.get("tolerance")
    if row.get("status") == "SKIP":
        return ""
    if tolerance is None or row.get("status") == "INFO":
        return "not gated"
    return f"{'>=' if row.get('higher_is_better') else '<='} {number(tolerance)}"


def provenance(metadata: dict[str, Any]) -> str:
    """The run's port, model, profile, backend, kernel set, CPU, library versions, seeds and date;
    a checkpoint's run also its stored dtype and size, and the memory estimated and measured."""
    port, cpu = metadata.get("port", {}), metadata.get("cpu", {})
    versions = metadata.get("versions", {})
    libraries = ", ".join(f"{name} {version or 'not installed'}" for name, version in versions.items())
    facts = [
        ("port", f"{port.get('name', '?')} {port.get('version', '')}".strip()),
        ("model", metadata.get("model", "?")),
        ("profile", metadata.get("profile", "?")),
        ("backend", metadata.get("backend", "?")),
        ("kernel set", metadata.get("kernel_set", "?")),
        ("CPU", f"{cpu.get('name', '?')} (ATen {cpu.get('aten_capability', '?')})"),
        ("versions", libraries),
        ("seeds", ", ".join(f"{name} {seed}" for name, seed in metadata.get("seeds", {}).items())),
        ("date", metadata.get("date", "?")),
    ]
    memory = metadata.get("memory")
    if memory is not None:
        checkpoint, gb = memory["checkpoint"], 1e9
        facts.append(
            (
                "checkpoint",
                f"{checkpoint['parameters'] / gb:.2f} billion parameters stored in "
                f"{checkpoint['stored_dtype']} ({checkpoint['size_bytes'] / gb:.1f} GB)",
            )
        )
        peak = memory["peak_resident_bytes"]
        facts.append(
            (
                "memory",
                f"peak resident {peak / gb:.1f} GB ({peak / checkpoint['size_bytes']:.2f}x the checkpoint; "
                f"estimated {memory['estimate_bytes'] / gb:.1f} GB)",
            )
        )
    items = "".join(f"<dt>{escape(name)}</dt><dd>{escape(str(value))}</dd>" for name, value in facts)
    return f'<dl class="provenance">{items}</dl>'
