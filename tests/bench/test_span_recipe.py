"""The span benchmark: its quick mode runs every recipe and writes its section."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import span_recipe  # noqa: E402


@pytest.mark.slow
def test_quick_benchmark_runs_every_recipe_and_writes_its_section(tmp_path):
    results = str(tmp_path / "RESULTS.md")
    process = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "span_recipe.py"), "--quick",
                              "--results", results], capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert process.returncode == 0, process.stderr[-3000:]
    text = open(results, encoding="utf-8").read()
    assert "<!-- span-recipe -->" in text and "train / dev / test 200 / 50 / 50" in text
    for recipe in span_recipe.RECIPES:
        row = re.search(rf"^\| {recipe} \| (\d\.\d+) \| [^|]+ \| [^|]+ \| (\d\.\d+) / (\d\.\d+) \|", text, re.M)
        assert row and all(0.0 <= float(value) <= 1.0 for value in row.groups()), recipe
    assert not re.search(r"^\| kerasbert-(constant|no-warmup) \|", text, re.M)  # ablations only in the full run
