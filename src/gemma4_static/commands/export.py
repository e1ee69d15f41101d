"""``gemma4-static export``: an embedded model's NPU stages (``.pt2`` or ``.pte`` per stage) or its
cache-in-program bundle (one ``.pte``), written to a folder with a manifest."""

from __future__ import annotations

import argparse
import sys

from ..bundle import export_bundle
from ..export import export_stages
from ..oracle.references.models import build_default_model
from ..runtime import StaticGemma4Runtime


def run_export(args: argparse.Namespace) -> int:
    """``gemma4-static export``: the stages or the bundle of an embedded model; the exit code."""
    if args.folder.exists() and not args.folder.is_dir():
        print(f"gemma4-static export: {str(args.folder)!r} is not a folder", file=sys.stderr)
        return 2
    layout = args.layout or ("bundle" if args.format == "pte" else "stages")
    if layout == "bundle" and args.format != "pte":
        print("gemma4-static export: --layout bundle is an ExecuTorch program: use --format pte", file=sys.stderr)
        return 2
    runtime = StaticGemma4Runtime(build_default_model(args.config), max_seq=args.max_seq)
    if layout == "bundle":
        manifest = export_bundle(runtime, args.folder)
        print(f"gemma4-static export: {args.config} as one .pte bundle (KV cache inside), manifest {manifest}")
        return 0
    manifest = export_stages(runtime, args.folder, format=args.format)
    print(f"gemma4-static export: {args.config} stages as .{args.format} programs, manifest {manifest}")
    return 0
