"""``kill -9`` at random points of ``kerasbert train``, then ``--resume``: does every run end as an uninterrupted one?

The script trains the tiny config on the demo's classification data once without a break (the reference), then
starts the same run again and again, each time killing it with SIGKILL at one moment, and resumes it with
``kerasbert train --out RUN --resume`` until it finishes. Half of the kills come at a moment drawn uniformly
over the reference's duration (start-up and imports included); the others are aimed: when a run folder first
appears (before the first step), while the resume state is being written (its ``.tmp-*-state`` staging folder is
there), while the best model is being written (``.tmp-*-model.keras``) and during the final writes (the
confusion plot and ``metrics.json``). A run killed before it saved any state has nothing to resume; it is started
over with ``--overwrite``, as the error tells a user to. Each run must end with the reference's weights
(``atol=1e-5``, as the resume test), the same ``metrics.json`` figures, a model that loads, and no ``.tmp-*`` left.

Usage:
    python benchmarks/kill_resume.py                # 20 kills: RESULTS.md, section kill-resume
    python benchmarks/kill_resume.py --quick        # a smaller run (64 rows, 2 epochs): checks that it works
    python benchmarks/kill_resume.py --kills 3 --quick --seed 1 --results /tmp/results.md
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.results import write_section  # noqa: E402

CYCLE = ("state-write", "random", "model-write", "random", "final-writes", "random", "startup", "random")
TEMPORARY = ".tmp-"
ATOL = 1e-5
MAX_RESUMES = 5
SPAN = 0.85  # random kills come within this share of the reference's duration (runs differ in speed)


@dataclass
class Trial:
    """One kill: where it was aimed, when it came, what the folder held, and how the run ended."""

    index: int
    kind: str
    moment: float | None = None  # seconds after the start; None: the run finished first
    at: str = ""
    recovery: str = ""
    resumes: int = 0
    ok: bool = False
    problem: str = ""


def _train_args(data: dict, out: str, quick: bool) -> list[str]:
    return ["train", "--task", "cls", "--train", data["cls_train"], "--dev", data["cls_dev"], "--vocab", data["vocab"],
            "--config", "tiny", "--out", out, "--epochs", "2" if quick else "3", "--batch-size", "16", "--lr", "2e-3",
            "--maxlen", "32", "--dropout", "0.1", "--save-every", "1" if quick else "2", "--quiet"]


def _start(arguments: list[str], log: str) -> subprocess.Popen:
    with open(log, "a") as stream:
        return subprocess.Popen([sys.executable, "-m", "kerasbert", *arguments], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=stream)


def _temporaries(folder: str) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith(TEMPORARY)] if os.path.isdir(folder) else []


def _aimed(kind: str, out: str, seen: set) -> bool:
    """Whether the moment ``kind`` aims at has come: the folder appeared, or a temporary of that writer is there.

    ``seen`` collects the temporaries met so far; a state write is hit at its first to fourth appearance."""
    if kind == "startup":
        return os.path.isdir(out)
    endings = {"state-write": ("-state",), "model-write": ("-model.keras",),
               "final-writes": ("-confusion.png", "-metrics.json")}[kind]
    found = {name for name in _temporaries(out) if name.endswith(endings)}
    seen.update(found)
    return bool(found) and len(seen) >= _goal(kind, out)


def _goal(kind: str, out: str) -> int:
    """How many distinct state writes to let pass before the kill (1 to 4, fixed per run folder)."""
    return random.Random(out).randint(1, 4) if kind == "state-write" else 1


def _kill_when(process: subprocess.Popen, kind: str, out: str, delay: float) -> float | None:
    """SIGKILL ``process`` after ``delay`` seconds (kind ``random``) or once `_aimed`; the moment, or None."""
    start, seen = time.monotonic(), set()
    while process.poll() is None:
        elapsed = time.monotonic() - start
        if (elapsed >= delay) if kind == "random" else _aimed(kind, out, seen):
            process.send_signal(signal.SIGKILL)
            process.wait()
            return elapsed
        time.sleep(0.01 if kind == "random" else 0.002)
    return None


def _state_at(out: str) -> str:
    """The saved state a kill left, as ``epoch E step S`` (``none`` before the first save)."""
    for name in ("state", "state.old"):
        try:
            with open(os.path.join(out, name, "state.json")) as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            continue
        return f"epoch {state['epoch'] + 1} step {state['step']}" + (" (state.old)" if name != "state" else "")
    return "no state"


def _recover(trial: Trial, first: list[str], out: str, log: str) -> int:
    """Resume until the run finishes (start it over with ``--overwrite`` when it saved no state); exit status."""
    code = 1
    for _ in range(MAX_RESUMES):
        resumable = os.path.exists(os.path.join(out, "args.json")) and _state_at(out) != "no state"
        trial.recovery = trial.recovery or ("resume" if resumable else "start over")
        arguments = ["train", "--out", out, "--resume", "--quiet"] if resumable else [*first, "--overwrite"]
        trial.resumes += 1
        code = _start(arguments, log).wait()
        if code == 0:
            break
    return code


def _weights(folder: str) -> list:
    from kerasbert.finetune.runs import Run

    return Run(folder).load_model().get_weights()


def _check(out: str, reference: str) -> str:
    """What is wrong with the finished run ``out`` compared with ``reference`` (``""``: nothing)."""
    import numpy as np

    left = [os.path.join(root, name) for root, dirs, files in os.walk(out) for name in dirs + files
            if name.startswith(TEMPORARY) or name == "state.old"]
    if left:
        return f"left behind: {left}"
    metrics, expected = (json.load(open(os.path.join(run, "metrics.json"))) for run in (out, reference))
    for key in ("dev", "best_epoch", "steps"):
        if metrics.get(key) != expected.get(key):
            return f"metrics.json {key}: {metrics.get(key)} != {expected.get(key)}"
    for x, y in zip(_weights(out), _weights(reference), strict=True):
        if not np.allclose(x, y, atol=ATOL, rtol=0):
            return f"weights differ by {float(np.max(np.abs(x - y))):.2e} > {ATOL}"
    return ""


def run_trial(trial: Trial, data: dict, folder: str, quick: bool, reference: concurrent.futures.Future,
              seed: int) -> Trial:
    """Start the run, kill it as ``trial.kind`` says, resume it to the end and check it against the reference."""
    out, log = os.path.join(folder, f"kill-{trial.index:02d}"), os.path.join(folder, f"kill-{trial.index:02d}.log")
    first = _train_args(data, out, quick)
    delay = 0.0
    if trial.kind == "random":
        delay = random.Random(seed * 1000 + trial.index).uniform(0.0, SPAN * reference.result()[1])
    trial.moment = _kill_when(_start(first, log), trial.kind, out, delay)
    trial.at = _state_at(out) if trial.moment is not None else "finished first"
    code = _recover(trial, first, out, log)
    if code != 0:
        trial.problem = f"exit {code}: " + open(log).read()[-300:].replace("\n", " ")
    else:
        trial.problem = _check(out, reference.result()[0])
    trial.ok = not trial.problem
    return trial


def _reference(data: dict, folder: str, quick: bool) -> tuple[str, float]:
    """The uninterrupted run: its folder and how long it took."""
    out = os.path.join(folder, "reference")
    start = time.monotonic()
    code = _start(_train_args(data, out, quick), os.path.join(folder, "reference.log")).wait()
    if code != 0:
        raise RuntimeError(f"the reference run failed:\n{open(os.path.join(folder, 'reference.log')).read()[-2000:]}")
    return out, time.monotonic() - start


def table(trials: list[Trial]) -> str:
    rows = ["| # | kill point | moment (s) | saved state at the kill | recovery | runs to finish | resumed ok |",
            "|---:|---|---:|---|---|---:|---|"]
    for t in trials:
        moment = "-" if t.moment is None else f"{t.moment:.2f}"
        ok = "yes" if t.ok else f"**no**: {t.problem[:200]}"
        rows.append(f"| {t.index} | {t.kind} | {moment} | {t.at} | {t.recovery} | {t.resumes} | {ok} |")
    return "\n".join(rows)


def run_all(kills: int, seed: int, quick: bool, jobs: int, folder: str) -> tuple[list[Trial], float]:
    """The reference and every trial, ``jobs`` runs at a time; the trials and the reference's duration."""
    from kerasbert.finetune.demo_data import write_demo_data

    sizes = {"n_train": 64, "n_dev": 16, "n_test": 4} if quick else {"n_train": 200, "n_dev": 48, "n_test": 4}
    data = write_demo_data(os.path.join(folder, "data"), **sizes)
    trials = [Trial(i + 1, CYCLE[i % len(CYCLE)]) for i in range(kills)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        reference = pool.submit(_reference, data, folder, quick)
        done = [pool.submit(run_trial, trial, data, folder, quick, reference, seed) for trial in trials]
        trials = [future.result() for future in done]
    return trials, reference.result()[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="how many runs to kill (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random kill moments")
    parser.add_argument("--quick", action="store_true", help="64 rows, 2 epochs, state saved every step")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--results", default=None, help="markdown file to write (default benchmarks/RESULTS.md)")
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="kerasbert-kill-")
    start = time.monotonic()
    trials, duration = run_all(args.kills, args.seed, args.quick, args.jobs, folder)
    survived = sum(t.ok for t in trials)
    command = ("python benchmarks/kill_resume.py" + f" --kills {args.kills}" * (args.kills != 20)
               + " --quick" * args.quick)
    text = (f"## kill -9 and --resume\n\n`{command}` (seed {args.seed}) — `kerasbert train` (cls, tiny config, "
            f"demo data) killed with SIGKILL at {args.kills} moments, then resumed until it finished. The "
            f"uninterrupted run took {duration:.1f} s; random moments are drawn over the first {SPAN:.0%} of that "
            f"time, aimed ones wait for a writer's `.tmp-*` file. Resumed ok: the same final weights (atol {ATOL}), "
            f"the same metrics.json, the model loads and nothing temporary is left.\n\n{table(trials)}\n\n"
            f"{survived} of {len(trials)} runs resumed ok ({time.monotonic() - start:.0f} s in all, {args.jobs} runs "
            f"at a time).\n")
    print(text + f"\nthe runs and their logs: {folder}")
    write_section("kill-resume", text, args.results or os.path.join(HERE, "RESULTS.md"))
    return 0 if survived == len(trials) else 1


if __name__ == "__main__":
    sys.exit(main())
