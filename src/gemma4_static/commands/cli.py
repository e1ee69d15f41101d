"""Command line: ``gemma4-static verify``, ``record``, ``merge``, ``compare``, ``export``, ``fuzz``,
``new-port`` and ``kernels`` (also ``python -m gemma4_static``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from ..backends import BACKENDS
from ..oracle.group_folder import group_names
from . import compare as compare_command
from . import fuzz as fuzz_command
from . import merge as merge_command
from . import new_port
from . import record as record_command
from .output import exit_code_of, progress

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # verification never reaches the network

# The embedded models (oracle.references.models.MODEL_NAMES, kept equal by a test; not imported here,
# so the CLI starts without loading transformers).
CONFIGS = ("tiny", "e2b-vision", "e2b-geometry", "e2b-multimodal", "31b-geometry", "26b-a4b-geometry")
MAX_SEQ_LIMIT = 8192  # verify prefills in one shot: its masks are max_seq x max_seq
STEPS_LIMIT = 4096


def _bounded(low: int, high: int):
    """An argparse type: an integer in ``[low, high]``, else a usage error (exit code 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    """An argparse type: a finite number above 0, else a usage error (exit code 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value


def _writable_file(text: str) -> Path:
    """An argparse type: a file that can be opened for writing (tried now, left as it was)."""
    path = Path(text)
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except (OSError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"cannot write a report to {text!r}: {error}") from None
    if not existed:
        path.unlink()
    return path


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (``prog: error: ...; see --help``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (the documentation's CLI reference is generated from it)."""
    parser = _Parser(prog="gemma4-static", description="Static-shape Gemma 4 runtime tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="check every runtime stage against HF transformers")
    verify.add_argument(
        "--config",
        choices=CONFIGS,
        help="embedded default model to verify (default: the port's own, tiny for most; e2b-multimodal for a port "
        "that needs an image in a fixed profile); ignored with --checkpoint",
    )
    verify.add_argument(
        "--checkpoint",
        type=Path,
        metavar="PATH",
        help="a local Gemma 4 checkpoint folder, loaded in the profile's dtype (memory-mapped where it was stored in "
        "it); the check groups too long at a real size are left out (--all-groups runs them)",
    )
    verify.add_argument(
        "--memory",
        type=_positive_float,
        metavar="GB",
        help="with --checkpoint: the memory the run may use (default: what the machine has available); a run whose "
        "estimate exceeds it is refused before loading",
    )
    verify.add_argument(
        "--all-groups",
        action="store_true",
        help="with --checkpoint: every check group, those left out at a real size too",
    )
    verify.add_argument(
        "--max-seq",
        type=_bounded(1, MAX_SEQ_LIMIT),
        metavar="N",
        help=f"static length, at most {MAX_SEQ_LIMIT} (default: the sample prompt + steps + 1)",
    )
    verify.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default="float32",
        help="the profile: float32 is checked against HF float32; bfloat16/float16 against HF float64, gated",
    )
    verify.add_argument(
        "--quant",
        metavar="SCHEME",
        help="an integer profile against HF float64, gated: a16w8, a8w8, a16w4, each optionally +e8+h8 (int8 "
        "embedding tables and LM head), on the PyTorch stages (fake-quantized; HF in the same scheme beside); "
        "a8w8 also as XNNPACK programs (--backend executorch or executorch-stages); another port: a scheme it "
        "declares (dynamic 8da4w, 8da8w; static a16w16t, a8w8t, calibrated on the suite's prompts)",
    )
    verify.add_argument(
        "--sensitivity",
        action="store_true",
        help="with --quant: also quantize one group at a time (and all but one), rank the groups by the logits' KL "
        "divergence, print the table, add it to --json and draw it as a PNG bar chart beside the JSON (another "
        "port: through its own per-group switches)",
    )
    verify.add_argument(
        "--mask-value",
        type=float,
        metavar="V",
        help="additive value of forbidden keys (default per dtype: finfo.min, -30000 for float16)",
    )
    verify.add_argument(
        "--steps",
        type=_bounded(1, STEPS_LIMIT),
        metavar="N",
        help=f"decode and generation steps, 1 to {STEPS_LIMIT} (default: 2 * window + 3, at most 24)",
    )
    verify.add_argument("--json", type=_writable_file, metavar="FILE", help="also write the report as JSON to FILE")
    verify.add_argument(
        "--html",
        type=_writable_file,
        metavar="FILE",
        help="also write the report as one self-contained web page to FILE (written at the end, and when interrupted)",
    )
    verify.add_argument("--no-export", action="store_true", help="skip the torch.export round-trip")
    verify.add_argument(
        "--backend",
        choices=tuple(BACKENDS),
        default="torch",
        help="run the NPU stages as PyTorch modules, on ExecuTorch (the executorch extra) or as Circle graphs in "
        "onert (the circle extra): executorch = the text model as one program with the KV cache inside it, "
        "executorch-stages = one program per stage, circle-stages = one Circle graph per stage (TICO, onert)",
    )
    verify.add_argument(
        "--without",
        action="append",
        default=[],
        choices=group_names(),
        metavar="GROUP",
        help=f"leave out a check group (repeatable), one of: {', '.join(group_names())}",
    )
    verify.add_argument(
        "--port",
        default="gemma4-static",
        metavar="NAME",
        help="the Gemma 4 implementation to check: gemma4-static (this runtime), executorch-gemma4, qnn-gemma4, "
        "tico-gemma4, or package.module:factory (see the porting guide, docs/porting-guide.md)",
    )
    verify.add_argument(
        "--kernel-set",
        metavar="NAME",
        help="run in a new process under a kernel set (native, avx2, avx512, baseline; see gemma4-static kernels)",
    )
    verify.add_argument(
        "--self-test",
        action="store_true",
        help="inject every catalogued porting bug in turn and report which checks catch it (fails if one is missed)",
    )
    verify.add_argument(
        "--fault", action="append", metavar="NAME", help="with --self-test: only this catalogued fault (repeatable)"
    )
    verify.add_argument(
        "--quiet", action="store_true", help="no progress on stderr (also off when stderr is not a terminal)"
    )
    verify.add_argument(
        "--schedules-budget",
        type=_bounded(1, 10**7),
        metavar="N",
        help="port calls (prefill chunks + decode steps) the schedules grid may spend (default 3000)",
    )
    verify.add_argument(
        "--reference",
        type=Path,
        metavar="DIR",
        help="judge against HF's answers recorded there (gemma4-static record) instead of running HF",
    )
    verify.add_argument(
        "--shard", metavar="I/N", help="run part I of N of the checks and grid (join: gemma4-static merge)"
    )
    kernels = commands.add_parser("kernels", help="the CPU kernel sets verify and the tests run under")
    kernels.add_argument("--env", metavar="NAME", help="print NAME's variables as KEY=VALUE lines (exit 1 if not here)")
    export = commands.add_parser("export", help="export every NPU stage of an embedded model at static shapes")
    export.add_argument("folder", type=Path, help="where the programs and manifest.json go")
    export.add_argument("--config", choices=CONFIGS, default="tiny")
    export.add_argument("--max-seq", type=_bounded(1, MAX_SEQ_LIMIT), default=128, metavar="N", help="static length")
    export.add_argument("--format", choices=("pt2", "pte"), default="pt2", help="torch.export or ExecuTorch programs")
    export.add_argument(
        "--layout",
        choices=("bundle", "stages"),
        help="pte: one program with the KV cache inside (bundle, the default) or a program per stage taking "
        "the cache as inputs (stages, for NPUs that hold the cache outside); pt2: stages only",
    )
    fuzz_command.add_parser(commands, _bounded, CONFIGS)
    record_command.add_parser(commands, _bounded, CONFIGS)
    new_port.add_parser(commands)
    compare_command.add_parser(commands, _writable_file)
    merge_command.add_parser(commands, _writable_file)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "export":
        from .export import run_export

        return run_export(args)
    if args.command == "new-port":
        return new_port.run_new_port(args)
    if args.command == "compare":
        return exit_code_of("compare", lambda: compare_command.run_compare(args))
    if args.command == "merge":
        return exit_code_of("merge", lambda: merge_command.run_merge(args))
    if args.command == "record":
        with progress(args.quiet):
            return exit_code_of("record", lambda: record_command.run_record(args))
    if args.command == "fuzz":
        with progress(args.quiet):
            return exit_code_of("fuzz", lambda: fuzz_command.run_fuzz(args))
    if args.command == "kernels" or args.kernel_set is not None:
        from ..oracle.numerics.kernel_sets import describe, rerun_under

        try:
            if args.command == "kernels":
                code, lines = describe(args.env)
                print("\n".join(lines), file=sys.stdout if code == 0 else sys.stderr)
                return code
            code = rerun_under(args.kernel_set, sys.argv[1:] if argv is None else argv)
        except ValueError as error:
            print(f"gemma4-static {args.command}: {error}", file=sys.stderr)
            return 2
        if code is not None:
            return code
    try:
        from .verify import run_verify
    except ModuleNotFoundError as error:
        print(
            f"gemma4-static verify: {error.name} is missing; "
            "install the verify extra: pip install 'gemma4-static[verify]'",
            file=sys.stderr,
        )
        return 2
    with progress(args.quiet):
        return exit_code_of("verify", lambda: run_verify(args))
