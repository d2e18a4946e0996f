"""The long-inputs benchmark in --quick mode (a 4-layer ModernBERT past its query block): both forms of the attention
run, give the same outputs, and the report is written. It checks that the benchmark works; its figures live in
benchmarks/RESULTS.md and HISTORY.md."""

from __future__ import annotations

import re

import pytest

import helpers

pytestmark = pytest.mark.slow  # spawns workers and runs a benchmark


def test_quick_run_writes_its_section(tmp_path):
    text = helpers.run_quick_benchmark("long_inputs.py", tmp_path)
    assert "<!-- long-inputs-cpu" in text and "## Long inputs: ModernBERT's forward pass" in text
    rows = re.findall(r"^\| (kerasbert|whole) \| ([\d,]+) \|", text, re.M)
    assert rows == [("kerasbert", "1,200"), ("whole", "1,200"), ("kerasbert", "1,500")]
    difference = float(re.search(r"outputs at 1,200 tokens: ([\d.e+-]+)\.", text).group(1))
    assert difference < 1e-5
