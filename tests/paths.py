"""Where things are, for the tests that read the project itself (its package, docs, configuration)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout
PACKAGE = ROOT / "src" / "gemma4_static"
