"""Command-line fuzzing: random argument vectors with at least one bad part (unknown flags,
negative, huge or non-numeric numbers, unknown choices, bad checkpoint paths, unwritable report
targets) end in exit code 2 with a one-line message on stderr, never a traceback."""

from __future__ import annotations

import contextlib
import io
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static.commands import cli
from gemma4_static.oracle.flow import verify

NUMBERS = st.one_of(
    st.integers(-(10**9), 0), st.integers(10**5, 10**12), st.sampled_from(["x", "1.5", "", "1e3", "--"])
)


@st.composite
def bad_parts(draw, tmp: str) -> list[str]:
    kinds = ["flag", "steps", "max-seq", "config", "dtype", "checkpoint", "json", "kernel-set", "command"]
    kind = draw(st.sampled_from(kinds))
    if kind == "flag":
        return [draw(st.sampled_from(["--nope", "-x", "--steps=", "--json", "--max-seq"]))]
    if kind in ("steps", "max-seq"):
        return [f"--{kind}", str(draw(NUMBERS))]
    if kind == "config":
        return ["--config", draw(st.sampled_from(["e4b", "", "TINY", "tiny ", "gemma"]))]
    if kind == "dtype":
        return ["--dtype", draw(st.sampled_from(["float16x", "fp32", "int8", ""]))]
    if kind == "checkpoint":
        return ["--checkpoint", draw(st.sampled_from([f"{tmp}/missing", tmp, f"{tmp}/file.txt", "\x00"]))]
    if kind == "kernel-set":
        return ["--kernel-set", draw(st.sampled_from(["avx3", "", "AVX2", "native ", "default"]))]
    if kind == "json":
        return ["--json", draw(st.sampled_from([tmp, f"{tmp}/no/such/dir/r.json", "/proc/version"]))]
    return [draw(st.sampled_from(["verify2", "export", "--versions", ""]))]


GOOD_PARTS = st.lists(
    st.sampled_from([["--no-export"], ["--dtype", "float32"], ["--config", "tiny"], ["--steps", "2"]]), max_size=2
)


@given(data=st.data())
def test_bad_command_lines_exit_2_with_one_line(tmp, data):
    bad = data.draw(bad_parts(tmp))
    good = [part for parts in data.draw(GOOD_PARTS) for part in parts]
    argv = bad if bad[0] in ("verify2", "export", "--versions", "") else ["verify", *good, *bad]
    stderr = io.StringIO()
    never_verify = mock.patch.object(verify, "run_verification", side_effect=AssertionError(f"{argv} was valid"))
    with never_verify, contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as exit_info:
            code = exit_info.code
    err = stderr.getvalue()
    assert code == 2, (argv, err)
    assert err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_help_documents_every_flag(capsys):
    with pytest.raises(SystemExit):
        cli.main(["verify", "--help"])
    text = capsys.readouterr().out
    for flag in ("--config", "--checkpoint", "--max-seq", "--dtype", "--steps", "--json", "--no-export"):
        assert flag in text
