"""``benchmarks/kill_resume.py --kills 3 --quick``: a run killed while writing its state, at a random moment and
while writing its best model resumes to the uninterrupted run's weights, with a complete run folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # trains seven times

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_three_kills_resume_to_the_uninterrupted_run(tmp_path):
    results = tmp_path / "RESULTS.md"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "kill_resume.py"), "--kills", "3",
                           "--quick", "--results", str(results)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [row[1].strip() for row in rows] == ["state-write", "random", "model-write"]
    assert all(row[-1].strip() == "yes" for row in rows), rows
    assert "3 of 3 runs resumed ok" in results.read_text() and "<!-- kill-resume -->" in results.read_text()
