"""What every command shares: the library's progress on stderr while it runs, and its errors as exit
codes (:class:`~gemma4_static.oracle.results.verdict.ExitCode`), each with one message."""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def progress(quiet: bool) -> Iterator[None]:
    """The library's progress messages (building a port, prefills, lowering programs) on stderr while
    a command runs, when stderr is a terminal and ``quiet`` is off."""
    if quiet or not sys.stderr.isatty():
        yield
        return
    logger = logging.getLogger("gemma4_static")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  .. %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def exit_code_of(command: str, body: Callable[[], int]) -> int:
    """``body()``'s exit code; its errors as exit codes, each with one message on stderr: a
    ``ValueError`` is a usage error (2), the port's error names the port with its traceback (3), any
    other is an internal error of the suite with its traceback (4)."""
    from ..oracle.results.verdict import ExitCode
    from ..oracle.session.port_calls import PortRaised

    try:
        return body()
    except ValueError as error:
        print(f"gemma4-static {command}: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except PortRaised as error:
        print(f"gemma4-static {command}: {error}\n{error.traceback}", file=sys.stderr, end="")
        return ExitCode.PORT_RAISED
    except Exception:
        print(
            f"gemma4-static {command}: internal error of the suite\n{traceback.format_exc()}", file=sys.stderr, end=""
        )
        return ExitCode.INTERNAL
