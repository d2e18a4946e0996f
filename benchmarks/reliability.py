"""The reliability report: the bad-input catalogue, the property tests' budgets, the failing writes, a run of
those tests, and ``kill -9`` + ``--resume`` (``kill_resume.py``), in one section of RESULTS.md.

Usage:
    python benchmarks/reliability.py                # 20 kills: RESULTS.md, section reliability
    python benchmarks/reliability.py --quick        # 3 quick kills: checks that it works
    python benchmarks/reliability.py --kills 40 --results /tmp/results.md

Exits non-zero if a test failed or a killed run did not resume to the uninterrupted run's result.
"""

from __future__ import annotations

import argparse
import ast
import collections
import inspect
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests")
for path in (ROOT, TESTS):
    if path not in sys.path:
        sys.path.insert(0, path)

from benchmarks.results import write_section  # noqa: E402

TEST_FILES = ("tests/test_bad_inputs.py", "tests/test_properties.py", "tests/test_failing_writes.py")
# the area of a bad-input case, from its id's first word
AREAS = {"config": "configs", "preset": "configs", "summary": "configs", "google": "checkpoints",
         "hf": "checkpoints", "pickle": "checkpoints", "safetensors": "checkpoints", "index": "checkpoints",
         "convert": "checkpoints", "vocab": "vocab", "tokenizer": "vocab", "data": "data", "conll": "data",
         "spans": "data", "train": "CLI", "run": "runs/exports", "resume": "runs/exports",
         "overwrite": "runs/exports", "evaluate": "runs/exports", "export": "runs/exports", "predict": "serving",
         "serve": "serving", "application": "generation", "generate": "generation", "decoder": "generation",
         "seq2seq": "generation", "sim": "data", "embed": "vectors", "sentence": "vectors",
         "pretrain": "pretraining", "qa": "data", "multilabel": "data", "relation": "data", "rerank": "data",
         "fill": "serving"}
PROFILES = ("kerasbert", "slow")  # test_properties.py's default profile and HYPOTHESIS_PROFILE=slow
OUTCOMES = ("passed", "xfailed", "xpassed", "skipped", "failed", "error")


# ---------------------------------------------------------------------------- the catalogue and the budgets
def area(case_id: str) -> str:
    return AREAS.get(case_id.split("-")[0], "other")


def catalogue(cases: list) -> dict[str, tuple[int, int]]:
    """Cases and cases the CLI runs too, per area, in ``AREAS``' order (and "other" last, if any)."""
    counts: dict[str, list[int]] = {name: [0, 0] for name in dict.fromkeys([*AREAS.values(), "other"])}
    for case in cases:
        counts[area(case.id)][0] += 1
        counts[area(case.id)][1] += case.cli is not None
    return {name: (n, cli) for name, (n, cli) in counts.items() if n}


def _fraction(function: ast.FunctionDef) -> float | None:
    """The ``budget(fraction)`` a test (or a function inside it) is decorated with; None: the whole profile."""
    for node in ast.walk(function):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "budget":
                    return float(ast.literal_eval(decorator.args[0]))
    return None


def _uses_given(function: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "given"
               for node in ast.walk(function) if isinstance(node, ast.FunctionDef) for d in node.decorator_list)


def _cases(function: object) -> int:
    """How many parametrized cases pytest makes of a test function."""
    marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
    return math.prod(len(m.args[1]) for m in marks)


def budgets(module: ModuleType) -> list[tuple[str, int, dict[str, int]]]:
    """Each hypothesis test: its name, its parametrized cases and its examples a case in each profile."""
    from hypothesis import settings

    tree = ast.parse(inspect.getsource(module))
    saved, rows = module.EXAMPLES, []
    try:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and _uses_given(node):
                fraction, per = _fraction(node), {}
                for profile in PROFILES:
                    module.EXAMPLES = settings.get_profile(profile).max_examples
                    per[profile] = module.EXAMPLES if fraction is None else module.budget(fraction).max_examples
                rows.append((node.name, _cases(getattr(module, node.name)), per))
    finally:
        module.EXAMPLES = saved
    return rows


def writers(collected: str) -> list[str]:
    """The writer of each collected test id (``test_export[openvino]``: export: openvino)."""
    names = []
    for line in collected.splitlines():
        match = re.match(r"\S*::test_(\w+)(?:\[(.*)\])?$", line.strip())
        if match:
            names.append(match[1] + (f": {match[2]}" if match[2] else ""))
    return names


# ---------------------------------------------------------------------------- the runs
def _run(arguments: list[str]) -> tuple[int, str, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, *arguments], cwd=ROOT, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def outcomes(output: str) -> dict[str, int]:
    """pytest's summary line as counts (``3 passed, 1 xfailed in 2.0s``), every outcome in ``OUTCOMES``."""
    counts = dict.fromkeys(OUTCOMES, 0)
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    for number, word in re.findall(r"(\d+) (\w+)", lines[-1] if lines else ""):
        word = "error" if word.startswith("error") else word
        if word in counts:
            counts[word] = int(number)
    return counts


def kills(section: str) -> dict[str, tuple[int, int]]:
    """kill_resume.py's table as kill point: (tried, survived)."""
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].isdigit():
            counts[cells[1]][0] += 1
            counts[cells[1]][1] += cells[6] == "yes"
    return {kind: (tried, ok) for kind, (tried, ok) in counts.items()}


def run_kills(n: int, quick: bool) -> tuple[int, dict[str, tuple[int, int]], str]:
    """kill_resume.py into a temporary results file: its exit status, its table by kill point, its last line."""
    with tempfile.TemporaryDirectory(prefix="kerasbert-reliability-") as folder:
        results = os.path.join(folder, "RESULTS.md")
        code, output, _ = _run(["benchmarks/kill_resume.py", "--kills", str(n), *["--quick"] * quick,
                                "--results", results])
        text = open(results, encoding="utf-8").read() if os.path.exists(results) else ""
    summary = [line for line in text.splitlines() if "resumed ok (" in line]
    if code and not summary:
        print(output[-3000:], file=sys.stderr)
    return code, kills(text), summary[-1] if summary else "kill_resume.py wrote no table"


# ---------------------------------------------------------------------------- the report
def catalogue_text(cases: list) -> str:
    rows = ["| area | cases | also through the CLI |", "|---|---:|---:|"]
    rows += [f"| {name} | {n} | {cli} |" for name, (n, cli) in catalogue(cases).items()]
    total, cli = len(cases), sum(case.cli is not None for case in cases)
    return (f"### Bad inputs (`tests/test_bad_inputs.py`)\n\n{total} cases, {cli} of them through the CLI too (exit "
            f"status 2, one line on stderr, the folder unchanged):\n\n" + "\n".join(rows))


def budgets_text(module: ModuleType) -> str:
    rows = ["| test | cases | examples a case (default) | (`HYPOTHESIS_PROFILE=slow`) |", "|---|---:|---:|---:|"]
    default, slow = PROFILES
    rows += [f"| `{name}` | {cases} | {per[default]} | {per[slow]} |" for name, cases, per in budgets(module)]
    oracle = ", ".join(f"{len(v)} {k}" for k, v in getattr(module, "ORACLE_CASES", {}).items())
    return ("### Property tests (`tests/test_properties.py`)\n\n" + "\n".join(rows)
            + (f"\n\nAgainst bert4keras: seeded random texts ({oracle}), cased and uncased, in both profiles."
               if oracle else ""))


def tests_text(names: list[str], counts: dict[str, int], seconds: float) -> str:
    shown = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    return (f"### Failing writes (`tests/test_failing_writes.py`)\n\n{len(names)} writers, each failing halfway: "
            + ", ".join(f"`{name}`" for name in names) + ".\n\n### The test run\n\n`pytest -q -n 0 -p "
            f"no:cacheprovider {' '.join(TEST_FILES)}`: {shown} in {seconds:.0f} s.")


def kills_text(command: str, table: dict[str, tuple[int, int]], summary: str) -> str:
    rows = ["| kill point | tried | survived |", "|---|---:|---:|"]
    rows += [f"| {kind} | {tried} | {ok} |" for kind, (tried, ok) in table.items()]
    return f"### kill -9 and --resume\n\n`{command}`:\n\n" + "\n".join(rows) + f"\n\n{summary}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="runs kill_resume.py kills (default 20)")
    parser.add_argument("--quick", action="store_true", help="kill_resume.py --quick with 3 kills")
    parser.add_argument("--results", default=None, help="markdown file to write (default benchmarks/RESULTS.md)")
    args = parser.parse_args(argv)
    n = 3 if args.quick else args.kills
    import test_bad_inputs
    import test_properties

    _, collected, _ = _run(["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", TEST_FILES[2]])
    code, output, seconds = _run(["-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *TEST_FILES])
    counts = outcomes(output)
    if code or counts["failed"] or counts["error"]:
        print(output[-5000:], file=sys.stderr)
    kill_code, table, summary = run_kills(n, args.quick)
    command = f"python benchmarks/kill_resume.py --kills {n}" + " --quick" * args.quick
    text = "\n\n".join([
        "## Reliability\n\n`python benchmarks/reliability.py" + " --quick" * args.quick
        + f" --kills {n}" * (not args.quick and n != 20) + "`: what the reliability tests cover, and a run of them.",
        catalogue_text(test_bad_inputs.CASES), budgets_text(test_properties),
        tests_text(writers(collected), counts, seconds), kills_text(command, table, summary)]) + "\n"
    print(text)
    write_section("reliability", text, args.results or os.path.join(HERE, "RESULTS.md"))
    survived = all(tried == ok for tried, ok in table.values()) and sum(t for t, _ in table.values()) == n
    return 0 if code == 0 and not counts["failed"] and not counts["error"] and kill_code == 0 and survived else 1


if __name__ == "__main__":
    sys.exit(main())
