"""The examples run as a user runs them (a subprocess, offline)."""

from __future__ import annotations

import os
import subprocess
import sys

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
