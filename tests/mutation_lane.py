"""The mutation lane: mutmut's mutants of the judge (``src/gemma4_static/oracle/``) and of the ports'
explanations, each run against the default suite's tests that reach the mutated function (mutmut
records, in one run of the suite, which tests call which function, then forks one process per
mutant: ``[tool.mutmut]`` in ``pyproject.toml``). A mutant the default suite does not kill is a
survivor: killed by a new test, or written into :data:`EQUIVALENT` with the reason it cannot change
a verdict.

    python -m tests.mutation_lane --shard 2/4 [--minutes 80]   # CI's nightly job: a quarter of the modules
    python -m tests.mutation_lane --changed origin/main        # a pull request: the functions its diff touches
    python -m tests.mutation_lane --sample 300 [--seed 0]      # the kill rate over all of them, estimated

A sample draws its mutants uniformly at random (seeded) from every mutant of the mutated files (mutmut
generates them all first) and reports the kill rate with its 95% interval (Wilson's): an estimate of
the whole lane's rate in the time a shard takes.

Each writes ``mutation-report.json`` (what ran, the counts by status, the kill rate, the survivors)
and prints its summary. With ``--changed`` a survivor not written down as equivalent fails the run
(exit 1); a shard reports and exits 0 (its modules change every night; the report is the artifact);
a run that judged no mutant exits 2 (mutmut failed, e.g. a test failing on the unmutated code).
Results are kept in ``mutants/`` (cached between nightly runs: mutmut reruns only the mutants of
functions that changed, so a shard not finished in one night goes on the next); before each run the
lane clears the kept survivors it runs and the recorded reach of every test changed since its last
run, so both are judged against today's tests."""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import signal
import subprocess
import sys
import tomllib
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
MUTANTS = ROOT / "mutants"  # mutmut's folder: its mutants, their results, its recorded test map
MUTMUT = [sys.executable, "-m", "mutmut"]
EXPLAINERS = "src/gemma4_static/ports/adapters/*/port.py"  # of these files, only the explain methods
# survivors that cannot change a verdict, each with the reason (a mutant's name: module.x_function__mutmut_N)
EQUIVALENT: dict[str, str] = {
    "gemma4_static.oracle.checks.parity.x_rope_pairs_rows__mutmut_29": (
        "float('INF') for float('inf'): float() reads infinity's name in any case"
    ),
    "gemma4_static.oracle.faults.port_faults.xǁWrappedRuntimePortǁ__init____mutmut_9": (
        "prefilling = None for False: it is only read as a condition, where None and False are both false"
    ),
    "gemma4_static.oracle.numerics.reference_quant.xǁReferenceActivationǁ__init____mutmut_11": (
        "_qparams = '' for None before any tensor: qparams() refuses an activation that observed nothing, and"
        " observe() sets _qparams to None, so the initial value is never read"
    ),
    "gemma4_static.oracle.numerics.sensitivity_report.x_write_chart__mutmut_3": (
        "matplotlib.use('agg') for 'Agg': matplotlib reads a backend's name in any case"
    ),
    "gemma4_static.oracle.pages.svg.x_error_plot__mutmut_121": (
        "'{:.1F}' for '{:.1f}': they differ only for inf and nan, and a line's coordinates are finite (it"
        " joins only the points with a relative, a finite one; an infinite one would stop the plot before)"
    ),
    "gemma4_static.oracle.groups._shared.x_after_a_decode_step__mutmut_11": (
        "argmax over dim +1 for -1: a prefill's logits are (B, V), whose dim 1 is its last"
    ),
    **dict.fromkeys(
        (
            "gemma4_static.oracle.session.memory.x_estimate__mutmut_32",
            "gemma4_static.oracle.session.memory.x_estimate__mutmut_34",
            "gemma4_static.oracle.session.memory.x_estimate__mutmut_36",
        ),
        "the largest layer's size when the model has no layer (max's default 0 for None, 1 or none): a Gemma 4"
        " config has at least one layer, so the default is never taken",
    ),
    "gemma4_static.oracle.pages.verify_page.x__slug__mutmut_12": (
        "strip('XX-XX') for strip('-'): the text is lower-cased and every character outside a-z0-9 replaced"
        " by '-' before it is stripped, so it holds no 'X' and both strip the same dashes"
    ),
    "gemma4_static.oracle.pages.compare.x__change__mutmut_76": (
        "loss >= 0 for > 0: the branch is reached only with abs(loss) >= 0.5, where the two agree"
    ),
    "gemma4_static.oracle.episodes.scores.x_scored_in_profile__mutmut_44": (
        "the default of the search for the first position below the gate (None for (None, mine)): the case's"
        " SQNR is the ratio of its summed signal to its summed noise, never below its lowest position's; so"
        " when it is below the gate a position is too, and the default is never taken"
    ),
    "gemma4_static.oracle.faults.port_faults.xǁWrappedRuntimePortǁprefill__mutmut_1": (
        "the wrapped runtime keeping its intermediates unasked (keep_intermediates=True by default): the same"
        " outputs, and the intermediates it returns are the runtime's own, which pass wherever they are judged"
    ),
    "gemma4_static.oracle.numerics.parity_numerics.x_sample_gap_row__mutmut_21": (
        "zip's strict=False for True over the gaps and the units: both are one value per row of the same"
        " reference, never of different lengths"
    ),
    "gemma4_static.oracle.groups.layers.x_hidden_state_rows_vs_float64__mutmut_34": (
        "zip's strict=None for True over our states and HF's layer outputs: paired_hidden_states has already"
        " zipped ours with the float64 reference's strictly, and HF's outputs in the profile are as many"
    ),
    "gemma4_static.oracle.faults.port_faults.xǁRingWrapCounterǁinstall__mutmut_16": (
        "held > 0 for >= 0 in the fault's wrap: position 0 modulo anything is 0, so the fault is the same"
    ),
    "gemma4_static.oracle.faults.fault_patches.x_wrong_theta_for_sliding__mutmut_9": (
        "the fault's wrong theta 1000001 for 1e6: still one theta for every layer type, caught by the same rows"
    ),
    "gemma4_static.oracle.faults.fault_patches.x_positions_from_one__mutmut_12": (
        "the shifted RoPE fault clamped one row earlier (max_seq - 2 for - 1): only the table's last row"
        " differs, the fault shifts every other position the same and is caught where it was"
    ),
    "gemma4_static.oracle.results.figures.x_position_points__mutmut_29": (
        "zip's strict=None for True over the places and their errors: the one caller computes the errors"
        " from the same places, one each"
    ),
    "gemma4_static.oracle.faults.fault_patches.x_reusing_layers_over_the_cache__mutmut_66": (
        "the reusing layers run in mode None for 'cache': both read the producer's cache; 'cache' only"
        " attends over it in place (a reusing layer writes nothing), the same keys, values and masks"
    ),
    "gemma4_static.oracle.references.reference_folder.x__sha256__mutmut_10": (
        "the file read whole for 1 MiB blocks (read(None)): the same digest; only the memory a hash of a"
        " large file holds differs"
    ),
    "gemma4_static.oracle.numerics.reference_quant.xǁReferenceActivationǁ_chosen__mutmut_24": (
        "the block size [2] for [1]: torchao's choose_qparams_affine_with_min_max computes the scale and"
        " zero point from the minimum and maximum given ([1], [2] and [7] give the same, torchao 0.18)"
    ),
    "gemma4_static.oracle.references.trained.x__calibrate_clip_bounds__mutmut_4": (
        "getattr's default None for False in a truth test: a module without the attribute is left out either way"
    ),
    "gemma4_static.oracle.numerics.reference_quant.xǁReferenceActivationǁ_chosen__mutmut_19": (
        "zero_point_dtype left to torchao: its default follows the target dtype, torch.int32 as given (torchao"
        " 0.18; 4, 8 and 16 bits, symmetric or not: the same scale, zero point and dequantized values)"
    ),
    "gemma4_static.oracle.numerics.reference_quant.xǁReferenceActivationǁ_chosen__mutmut_10": (
        "zero_point_dtype=None is torchao's default: the same as mutant 19, which leaves it out"
    ),
    "gemma4_static.oracle.numerics.metrics.x_kl_divergence__mutmut_13": (
        "log_softmax over dim +1 for -1: the logits are (N, vocab), as the function takes them, so dim 1 is the last"
    ),
    "gemma4_static.oracle.numerics.metrics.x_measure__mutmut_12": (
        "float('NAN') for float('nan'): float() reads NaN's name in any case"
    ),
    "gemma4_static.oracle.numerics.gates.x__integer_gate__mutmut_8": (
        "zip's strict None for True over the gate table's literal rows, each as long as GATED_STAGES (the"
        " module imports with strict=True, so no row is shorter or longer)"
    ),
    "gemma4_static.oracle.numerics.sensitivity_report.x_write_chart__mutmut_55": (
        "the line's colour '#C44E52' for '#c44e52': matplotlib reads hex colours in either case, the same RGBA"
    ),
    "gemma4_static.oracle.faults.port_faults.xǁDecodeAfterPartialChunkǁprefill__mutmut_16": (
        "len(chunks) >= 1 for > 1: with one chunk, chunks[-1] < chunks[0] compares it with itself (false);"
        " with none, the condition is false before any index either way"
    ),
    "gemma4_static.oracle.fuzz.target.xǁFuzzTargetǁsecond__mutmut_6": (
        "the cache key's tag 'TOKEN BY TOKEN' for 'token by token': only this method writes and reads keys"
        " that start with a string (the one-pass references are keyed by ids alone), so it answers the same"
    ),
    "gemma4_static.oracle.groups._shared.x_kv_rows_vs_float64__mutmut_30": (
        "zip's strict None for True: both lists are paired_kv over the same port's cache (HF in float64 and"
        " in the profile: one config), of the same layers in the same order, so strict never has to raise"
    ),
    "gemma4_static.oracle.checks.routing.xǁ_HFPinnerǁ_pin__mutmut_23": (
        "a token without a key looked up as (layer, None) instead of skipped: the ledger records our routing"
        " only under a token's key (router_forward skips None), so the lookup finds nothing either way"
    ),
    "gemma4_static.oracle.faults.host_faults.xǁExportMutatesItsInputǁexport_cases__mutmut_11": (
        "the in-place graph's example input of shape (4,) for (1, 4): the same bug (the graph adds 1 to its"
        " input, so eager and exported part by exactly 1), the same row and figure"
    ),
    "gemma4_static.oracle.numerics.parity_numerics.x_mask_value_check__mutmut_10": (
        "exponent <= 700 for < 700 before math.exp: they differ at exactly 700, where exp(700) is 1.0e304,"
        " so the masked weight (that times the keys) fails its bound as the infinity does; the cut only"
        " keeps math.exp below its overflow at 709.78"
    ),
    "gemma4_static.oracle.references.hf.x_expand_hf_mask__mutmut_11": (
        "torch.ones(kv_len) for torch.ones(1, kv_len) in the one-query pattern: expanded to (B, 1, 1, K)"
        " either way, the same True at every key"
    ),
    "gemma4_static.oracle.references.hf.x_expand_hf_mask__mutmut_12": (
        "torch.ones(1) for torch.ones(1, kv_len) in the one-query pattern: expanded to (B, 1, 1, K) either"
        " way, the same True at every key"
    ),
}
KILLED = ("killed", "caught by type check")
SURVIVED = 0  # the exit code mutmut 3.8 keeps for a mutant whose tests all passed (None: not checked)
NO_MUTANT = "no.mutant.has.this.name"
LANE_COMMIT = "lane-commit.txt"  # in mutmut's folder: the commit its recorded test map was brought up to


def mutated_files() -> list[Path]:
    """The files ``[tool.mutmut] only_mutate`` names, sorted."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    files = (path.relative_to(ROOT) for path in (SOURCE / "gemma4_static").rglob("*.py"))
    return sorted(path for path in files if any(fnmatch(str(path), pattern) for pattern in patterns))


def module_of(path: Path) -> str:
    """``src/gemma4_static/oracle/flow/merge.py`` -> ``gemma4_static.oracle.flow.merge``."""
    return ".".join(path.relative_to("src").with_suffix("").parts)


def file_patterns(path: Path) -> list[str]:
    """The mutant names of one file: all of them, or only its explain methods (an adapter's port)."""
    return [f"{module_of(path)}.*explain__mutmut_*"] if fnmatch(str(path), EXPLAINERS) else [f"{module_of(path)}.*"]


def shard_patterns(shard: int, of: int) -> list[str]:
    """The mutant-name patterns of shard ``shard`` (1-based) of ``of``: every ``of``-th file."""
    if not 1 <= shard <= of:
        raise ValueError(f"shard must be within 1..{of}, got {shard}")
    return [pattern for path in mutated_files()[shard - 1 :: of] for pattern in file_patterns(path)]


def touched_lines(base: str) -> dict[Path, set[int]]:
    """The lines of the mutated files a diff against ``base`` adds or changes, per file."""
    diff = subprocess.run(
        ["git", "diff", "-U0", base, "--", *map(str, mutated_files())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines: dict[Path, set[int]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = None if line.endswith("/dev/null") else Path(line.removeprefix("+++ b/"))
        elif line.startswith("@@") and current is not None:
            start, _, count = re.match(r"@@ -\S+ \+(\d+)(,(\d+))? @@", line).groups()
            lines.setdefault(current, set()).update(range(int(start), int(start) + int(count or 1)))
    return lines


def function_patterns(path: Path, lines: set[int]) -> list[str]:
    """The mutant-name patterns of the functions of ``path`` holding any of ``lines`` (mutmut names a
    method ``module.xǁClassǁmethod`` and a function ``module.x_function``)."""
    tree, explain_only = ast.parse((ROOT / path).read_text()), fnmatch(str(path), EXPLAINERS)
    functions = [("x_", node) for node in tree.body]
    functions += [
        (f"xǁ{node.name}ǁ", child) for node in tree.body if isinstance(node, ast.ClassDef) for child in node.body
    ]
    return [
        f"{module_of(path)}.{owner}{node.name}__mutmut_*"
        for owner, node in functions
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and lines & set(range(node.lineno, node.end_lineno + 1))
        and not (explain_only and node.name != "explain")
    ]


def every_mutant() -> list[str]:
    """The names of every mutant of the mutated files, sorted. mutmut has no command that only
    generates them: a run for a name no mutant has generates them all, records which tests reach each
    function, then stops on its "nothing matches" assertion before judging any (its output is shown
    only when it stopped for another reason)."""
    generated = subprocess.run([*MUTMUT, "run", NO_MUTANT], cwd=ROOT, capture_output=True, text=True)
    if "nothing matches" not in generated.stderr:
        print(generated.stdout[-4000:], generated.stderr[-4000:], sep="\n")
        raise RuntimeError(f"mutmut did not generate the mutants (exit {generated.returncode})")
    return sorted(results([pattern for path in mutated_files() for pattern in file_patterns(path)]))


def sample_of(names: list[str], size: int, seed: int) -> list[str]:
    """``size`` of ``names`` drawn uniformly without replacement by ``seed``, sorted; all where fewer."""
    if size < 1:
        raise ValueError(f"sample must be a positive number of mutants, got {size}")
    return sorted(random.Random(seed).sample(names, min(size, len(names))))


def wilson_interval(killed: int, judged: int) -> tuple[float, float]:
    """The 95% interval of a kill rate measured as ``killed`` of ``judged`` drawn mutants: Wilson's
    score interval (honest near 0 and 1, where the normal one is not), as scipy computes it."""
    from scipy.stats import binomtest

    if judged == 0:
        raise ValueError("an interval needs at least one judged mutant, got 0")
    interval = binomtest(killed, judged).proportion_ci(confidence_level=0.95, method="wilson")
    return float(interval.low), float(interval.high)


def forget_survivors(patterns: list[str], folder: Path) -> int:
    """Clear the kept result of each survivor of ``patterns`` in mutmut's ``folder``, so it is judged
    again: mutmut keeps a mutant's result while its function's source is unchanged, whatever the tests
    became, so a survivor a new test kills would otherwise be reported every night. How many were cleared."""
    cleared = 0
    for meta in folder.rglob("*.meta"):
        kept = json.loads(meta.read_text())
        codes = kept["exit_code_by_key"]
        again = [key for key, code in codes.items() if code == SURVIVED and any(fnmatch(key, p) for p in patterns)]
        if again:
            codes.update(dict.fromkeys(again, None))
            meta.write_text(json.dumps(kept))
            cleared += len(again)
    return cleared


def tests_changed_since(commit: str) -> set[str] | None:
    """The test files (and ``conftest.py`` files) a diff of the working tree against ``commit``
    changes; ``None`` where ``commit`` is not in this clone's history (a shallow checkout)."""
    diff = subprocess.run(
        ["git", "diff", "--name-only", commit, "--", "tests", "conftest.py"], cwd=ROOT, capture_output=True, text=True
    )
    return set(diff.stdout.split()) if diff.returncode == 0 else None


def forget_changed_tests(folder: Path) -> int:
    """Drop from mutmut's recorded map of which tests reach which function every test whose file
    changed since the map was recorded, so mutmut records them again as new tests: it records a test
    once, by name, and a test that changed (another port, another group) would keep reaching the
    functions it reached before, and only those (a mutant it now kills reported as a survivor). A
    changed ``conftest.py`` forgets every test below it; a commit this clone does not hold forgets
    the whole map. The map's commit is the one the lane ran at last (``LANE_COMMIT``), else mutmut's
    own. How many tests were forgotten."""
    stats_file = folder / "mutmut-stats.json"
    if not stats_file.exists():
        return 0
    stats = json.loads(stats_file.read_text())
    lane_commit = folder / LANE_COMMIT
    commit = lane_commit.read_text().strip() if lane_commit.exists() else stats.get("git_commit")
    changed = tests_changed_since(commit) if commit else None
    recorded = set(stats["duration_by_test"])
    if changed is None:
        stats_file.unlink()
        return len(recorded)
    fixtures = [Path(name).parent for name in changed if Path(name).name == "conftest.py"]

    def changed_under(test: str) -> bool:
        path = Path(test.split("::")[0])
        return str(path) in changed or any(fixture_folder in path.parents for fixture_folder in fixtures)

    forgotten = {test for test in recorded if changed_under(test)}
    for test in forgotten:
        del stats["duration_by_test"][test]
    reached = stats["tests_by_mangled_function_name"]
    stats["tests_by_mangled_function_name"] = {name: sorted(set(tests) - forgotten) for name, tests in reached.items()}
    stats_file.write_text(json.dumps(stats))
    return len(forgotten)


def remember_commit(folder: Path) -> None:
    """Write the commit the lane ran at beside mutmut's results (:func:`forget_changed_tests` reads it)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0 and folder.is_dir():
        (folder / LANE_COMMIT).write_text(head.stdout.strip() + "\n")


def run_mutmut(patterns: list[str], minutes: float) -> bool:
    """``mutmut run`` over ``patterns`` for at most ``minutes`` (then stopped: what finished is kept);
    whether it ran (a failing test of the unmutated suite, for one, stops it before any mutant)."""
    process = subprocess.Popen([*MUTMUT, "run", *patterns], cwd=ROOT, start_new_session=True)
    try:
        return process.wait(timeout=minutes * 60) == 0
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()
        print(f"stopped after {minutes:g} minutes: the mutants not run are 'not checked'")
        return True


def results(patterns: list[str]) -> dict[str, str]:
    """Each mutant of ``patterns`` and its status, as ``mutmut results --all`` prints them."""
    printed = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True).stdout
    found = (line.strip().rsplit(": ", 1) for line in printed.splitlines() if ": " in line)
    return {name: status for name, status in found if any(fnmatch(name, pattern) for pattern in patterns)}


def report(statuses: dict[str, str], patterns: list[str]) -> dict:
    """What ran: the counts by status, the kill rate over the mutants run, the survivors (equivalent ones apart)."""
    counts = Counter(statuses.values())
    run = sum(count for status, count in counts.items() if status != "not checked")
    killed = sum(counts[status] for status in KILLED)
    survivors = sorted(name for name, status in statuses.items() if status == "survived" and name not in EQUIVALENT)
    return {
        "patterns": patterns,
        "counts": dict(sorted(counts.items())),
        "kill_rate": killed / run if run else None,
        "survivors": survivors,
        "equivalent": {name: EQUIVALENT[name] for name in sorted(statuses) if name in EQUIVALENT},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--shard", help="K/N: shard K of N of the mutated files")
    which.add_argument("--changed", metavar="BASE", help="the functions a diff against BASE touches")
    which.add_argument("--sample", type=int, metavar="N", help="N mutants drawn from all of them")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--minutes", type=float, default=80.0, help="stop mutmut after this long (default 80)")
    parser.add_argument("--json", type=Path, default=ROOT / "mutation-report.json")
    args = parser.parse_args(argv)
    drawn_from = None
    if args.shard:
        shard, of = (int(part) for part in args.shard.split("/"))
        patterns = shard_patterns(shard, of)
    elif args.sample is not None:
        names = every_mutant()
        patterns, drawn_from = sample_of(names, args.sample, args.seed), len(names)
    else:
        patterns = [p for path, lines in touched_lines(args.changed).items() for p in function_patterns(path, lines)]
    if not patterns:
        print("no mutated function touched: nothing to run")
        return 0
    forgotten = forget_changed_tests(MUTANTS)
    if forgotten:
        print(f"{forgotten} tests changed since mutmut recorded which functions they reach: recorded again")
    cleared = forget_survivors(patterns, MUTANTS)
    if cleared:
        print(f"{cleared} survivors of earlier runs judged again against today's tests")
    ran = run_mutmut(patterns, args.minutes)
    if ran:
        remember_commit(MUTANTS)
    summary = report(results(patterns), patterns)
    rate = "none run" if summary["kill_rate"] is None else f"{summary['kill_rate']:.1%}"
    if drawn_from is not None and summary["kill_rate"] is not None:
        counts = summary["counts"]
        judged = sum(count for status, count in counts.items() if status != "not checked")
        low, high = wilson_interval(sum(counts.get(status, 0) for status in KILLED), judged)
        summary["sample"] = {"drawn": len(patterns), "of": drawn_from, "seed": args.seed, "interval": [low, high]}
        rate += f" (95% interval {low:.1%} to {high:.1%}; {judged} judged of {len(patterns)} drawn from {drawn_from})"
    args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"mutants by status: {summary['counts']}; kill rate {rate}")
    for name in summary["survivors"]:
        print(f"survived: {name}")
    if not ran or summary["kill_rate"] is None:  # nothing compared is never a pass
        print(f"mutmut {'failed' if not ran else 'ran no mutant'}: no mutant was judged")
        return 2
    return 1 if args.changed and summary["survivors"] else 0


if __name__ == "__main__":
    sys.exit(main())
