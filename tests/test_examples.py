"""The examples run as a user runs them (a subprocess, offline)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # trains, spawns workers or runs a benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "reloaded model reproduces the original: True" in proc.stdout
    assert "pooled output (2, 32), MLM probabilities (2, 7, 128), rows sum to 1.0000" in proc.stdout
    assert "  name = bert/embeddings/word_embeddings, shape = (128, 32), *INIT_FROM_CKPT*" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                            "bert_model.ckpt.index", "checkpoint"]


def _run_example(name: str, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    """Run examples/<name> with --out tmp_path/run, its demo data under tmp_path/tmp; one epoch."""
    run, scratch = tmp_path / "run", tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), "--out", str(run), "--epochs", "1",
                           *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert os.path.isfile(run / "model.keras")
    assert os.listdir(scratch) == []  # its demo data removed
    return proc, str(run)


def test_finetune_classification(tmp_path):
    proc, run = _run_example("finetune_classification.py", tmp_path)
    assert "dev, best epoch 1: accuracy " in proc.stdout
    assert "test: accuracy " in proc.stdout and "macro-F1" in proc.stdout
    assert proc.stdout.count('"label": "') == 2  # the two predicted sentences
    assert os.path.isfile(os.path.join(run, "confusion.png")) and os.path.isfile(os.path.join(run, "eval-test.json"))


def test_finetune_ner(tmp_path):
    proc, run = _run_example("finetune_ner.py", tmp_path, "--crf")
    assert "dev, best epoch 1: micro-F1 " in proc.stdout
    assert "test: micro-F1 " in proc.stdout
    assert "type   precision  recall      f1  support" in proc.stdout
    assert proc.stdout.count('"entities": [') == 2  # the two tagged sentences
    assert os.path.isfile(os.path.join(run, "per_type.txt"))
