"""The relation benchmark: its quick mode runs kerasbert's and bert4keras's recipes and writes its section."""

from __future__ import annotations

import os
import re
import sys

import pytest

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import relation_recipe  # noqa: E402


@pytest.mark.slow
def test_quick_benchmark_runs_both_recipes_and_writes_its_section(tmp_path):
    text = helpers.run_quick_benchmark("relation_recipe.py", tmp_path)
    assert "<!-- relation-recipe -->" in text and "train / dev / test 32 / 8 / 8" in text
    for recipe in relation_recipe.RECIPES:
        row = re.search(rf"^\| {recipe} \| (\d\.\d+) \| [^|]+ \| [^|]+ \| (\d\.\d+) / (\d\.\d+) \|", text, re.M)
        assert row and all(0.0 <= float(value) <= 1.0 for value in row.groups()), recipe
    assert not re.search(rf"^\| ({'|'.join(relation_recipe.ABLATIONS)}) \|", text, re.M)  # only in the full run
