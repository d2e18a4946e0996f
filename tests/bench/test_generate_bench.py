"""The generation benchmark in --quick mode (tiny configs of the UniLM, GPT-2 and T5): both workers decode each
model, their ids agree and the report is written. It checks that the benchmark works, not speed (speed figures
live in benchmarks/RESULTS.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # trains, spawns workers or runs a benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from generate_bench import sources, targets  # noqa: E402


def test_sources_are_ragged_and_framed_by_cls_and_sep():
    drawn = sources(16, 64, 21128)
    assert len(drawn[0]) == 64 and all(48 <= len(s) <= 80 for s in drawn) and len({len(s) for s in drawn}) > 4
    assert all(s[0] == 101 and s[-1] == 102 and min(s[1:-1]) >= 200 for s in drawn)
    assert drawn == sources(16, 64, 21128)


def test_targets_say_met_missed_and_when_the_target_is_inside_the_interval():
    lines = targets({("unilm", 1, "kerasbert"): (3.5, (3.2, 3.9)), ("t5", 16, "kerasbert"): (2.9, (2.5, 3.4)),
                     ("gpt2", 4, "kerasbert-bf16"): (12.0, None)})
    assert lines[0].endswith("3.50 × bert4keras's tokens/s (target ≥ 3.0 ×) — **met**")
    assert lines[1].startswith("- t5, batch 16,") and lines[1].endswith("— **missed** (the target is inside the "
                                                                         "interval)")
    assert lines[2].startswith("- gpt2, batch 4, beam 3: kerasbert-bf16 12.00 ×") and lines[2].endswith("**met**")


def test_quick_generation_benchmark_runs_both_libraries_and_writes_its_section(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# results\n\n<!-- other -->\nkept\n<!-- /other -->\n")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "generate_bench.py"), "--quick",
                           "--results", str(results)], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other -->\nkept\n<!-- /other -->" in text and "<!-- generate-quick -->" in text
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (kerasbert|bert4keras) \| ([\d.]+) \| ([\d.]+) \| .*? \| (.*?) \|$",
                      text, re.M)
    assert sorted((model, batch, name) for model, batch, name, *_ in rows) == [
        (model, batch, name) for model in ("gpt2", "t5", "unilm") for batch in ("1", "2")
        for name in ("bert4keras", "kerasbert")]
    assert all(float(seconds) > 0 and float(per_s) > 0 for *_, seconds, per_s, _ in rows)
    # the same ids, batch by batch, for each model
    assert {(model, same) for model, _, name, *_, same in rows if name == "kerasbert"} == {
        (model, same) for model in ("gpt2", "t5", "unilm") for same in ("1 of 1", "2 of 2")}
    assert len(re.findall(r"^- \w+, batch \d+, beam 3: kerasbert [\d.]+ × bert4keras's tokens/s", text, re.M)) == 6
