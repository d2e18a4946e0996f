"""`kerasbert.serving.runtime.PortableExport` runs rows in power-of-two chunks, each padded to its own longest row:
a tagger's per-piece scores of chunks of different lengths come back row by row, in order."""

from __future__ import annotations

import threading
import types

import numpy as np

from kerasbert.serving.runtime import LENGTH_STEP, PortableExport


def test_chunks_padded_to_different_lengths_come_back_row_by_row():
    served = object.__new__(PortableExport)  # the model alone: a tagger scoring piece i of row r as r * 100 + i
    served._lock, shapes = threading.Lock(), []
    served.tokenizer = types.SimpleNamespace(pad_id=0)  # BERT's [PAD]

    def run_model(ids: np.ndarray, segments: np.ndarray) -> np.ndarray:
        shapes.append(ids.shape)
        return (ids[:, :1] * 100 + np.arange(ids.shape[1])[None]).astype(np.float32)[..., None].repeat(3, -1)

    served.run_model = run_model
    lengths = [3] * 16 + [12] * 8  # 24 rows: a chunk of 16 padded to 8 pieces, one of 8 padded to 16
    rows = [[r] * n for r, n in enumerate(lengths, start=1)]
    out = served._run(rows, [[0] * n for n in lengths])
    assert shapes == [(16, LENGTH_STEP), (8, 2 * LENGTH_STEP)]
    assert len(out) == len(rows)
    for r, (row, n) in enumerate(zip(out, lengths, strict=True), start=1):
        np.testing.assert_array_equal(row[:n, 0], r * 100 + np.arange(n))
