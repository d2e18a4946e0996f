"""The span benchmark: its quick mode runs every recipe and writes its section."""

from __future__ import annotations

import os
import re
import sys

import pytest

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import recipes  # noqa: E402
import span_recipe  # noqa: E402


@pytest.mark.slow
def test_quick_benchmark_runs_every_recipe_and_writes_its_section(tmp_path):
    text = helpers.run_quick_benchmark("span_recipe.py", tmp_path)
    sizes = " / ".join(str(n) for n in recipes.NER_SIZES[True])
    assert "<!-- span-recipe -->" in text and f"train / dev / test {sizes}" in text
    for recipe in span_recipe.RECIPES:
        row = re.search(rf"^\| {recipe} \| (\d\.\d+) \| [^|]+ \| [^|]+ \| (\d\.\d+) / (\d\.\d+) \|", text, re.M)
        assert row and all(0.0 <= float(value) <= 1.0 for value in row.groups()), recipe
    assert not re.search(r"^\| kerasbert-(constant|no-warmup) \|", text, re.M)  # ablations only in the full run
