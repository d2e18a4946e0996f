"""The windows in graph ops (`kerasbert.serving.graph_windows`) against the NumPy ones (`kerasbert.text.windows`):
the same windows, the same merged pieces, the same means, the same spans kept, eagerly and in a ``tf.function``."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.serving import graph_windows
from kerasbert.text.windows import cut, mean_by_document, merge_pieces, merge_spans, split

CLS, SEP = 2, 3


@st.composite
def batches(draw):
    """``(lengths, maxlen, stride)``: a batch of texts of 0..60 pieces and a stride a window can hold."""
    maxlen = draw(st.integers(3, 20))
    return draw(st.lists(st.integers(0, 60), min_size=1, max_size=5)), maxlen, draw(st.integers(0, maxlen - 3))


def _pieces(lengths: list[int]) -> dict[str, tf.Tensor]:
    """Flat pieces of texts of ``lengths``: text t's piece p has id 1000 * (t + 1) + p; spans p..p+1."""
    ids = [1000 * (t + 1) + p for t, n in enumerate(lengths) for p in range(n)]
    starts = [p for n in lengths for p in range(n)]
    return {"token_ids": tf.constant(ids, tf.int32, [len(ids)]), "starts": tf.constant(starts, tf.int32, [len(ids)]),
            "ends": tf.constant(starts, tf.int32, [len(ids)]) + 1, "count": tf.constant(lengths, tf.int64)}


def _unpadded(rows: np.ndarray, lengths: list[int]) -> list[list[int]]:
    return [row[:n].tolist() for row, n in zip(rows, lengths, strict=True)]


@settings(max_examples=40, deadline=None)
@given(batch=batches(), seed=st.integers(0, 2 ** 16))
def test_the_graph_splits_and_merges_as_numpy_does(batch, seed):
    lengths, maxlen, stride = batch
    windows = split(lengths, maxlen, stride)
    full = [[CLS, *(1000 * (t + 1) + p for p in range(n)), SEP] for t, n in enumerate(lengths)]
    out = graph_windows.split(_pieces(lengths), maxlen, stride, CLS, SEP)
    expected = [cut(full[w.document], w) for w in windows]
    assert _unpadded(out["token_ids"].numpy(), [len(row) for row in expected]) == expected
    assert out["token_ids"].shape[1] == max(map(len, expected)) and not out["segment_ids"].numpy().any()
    assert list(zip(out["document"].numpy().tolist(), out["start"].numpy().tolist(), out["end"].numpy().tolist(),
                    strict=True)) == [tuple(w) for w in windows]
    assert _unpadded(out["text_token_ids"].numpy(), [n + 2 for n in lengths]) == full
    assert out["text_starts"].numpy()[:, 0].tolist() == [-1] * len(lengths)
    assert out["text_lengths"].numpy().tolist() == [n + 2 for n in lengths]

    rng = np.random.default_rng(seed)
    tags = rng.integers(0, 50, out["token_ids"].shape).astype(np.int32)
    merged = graph_windows.merge_pieces(tf.constant(tags), out).numpy()
    reference = merge_pieces(windows, list(tags))
    for t, n in enumerate(lengths):
        assert merged[t, 1:n + 1].tolist() == reference[t][1:n + 1].tolist()  # [CLS], [SEP] are not read
    probabilities = rng.dirichlet(np.ones(4), len(windows)).astype(np.float32)
    mean = graph_windows.mean_by_document(tf.constant(probabilities), out).numpy()
    assert mean.dtype == np.float32
    np.testing.assert_array_equal(mean, mean_by_document(windows, probabilities))


def test_in_a_tf_function_and_on_an_empty_batch():
    call = tf.function(lambda pieces: graph_windows.split(pieces, 6, 1, CLS, SEP)["token_ids"],
                       input_signature=[{"token_ids": tf.TensorSpec([None], tf.int32),
                                         "count": tf.TensorSpec([None], tf.int64)}])
    pieces = _pieces([9, 0])
    got = call({"token_ids": pieces["token_ids"], "count": pieces["count"]}).numpy().tolist()
    assert got == [[CLS, 1000, 1001, 1002, 1003, SEP], [CLS, 1003, 1004, 1005, 1006, SEP],
                   [CLS, 1006, 1007, 1008, SEP, 0], [CLS, SEP, 0, 0, 0, 0]]
    empty = graph_windows.split(_pieces([]), 6, 1, CLS, SEP)
    assert empty["token_ids"].shape[0] == 0 and empty["text_token_ids"].shape[0] == 0


@settings(max_examples=40, deadline=None)
@given(batch=batches(), data=st.data())
def test_the_graph_keeps_the_spans_numpy_keeps(batch, data):
    lengths, maxlen, stride = batch
    windows = split(lengths, maxlen, stride)
    found = []  # each window finds some spans of its pieces (row positions 1.., end inclusive) of types 0..2
    for w in windows:
        size = w.end - w.start
        spans = data.draw(st.lists(st.tuples(st.integers(1, max(size, 1)), st.integers(0, 4), st.integers(0, 2)),
                                   max_size=6))
        found.append(sorted({(a, min(a + extra, size), kind) for a, extra, kind in spans if size}))
    flat = np.array([(i, a, b, kind) for i, spans in enumerate(found) for a, b, kind in spans], np.int64)
    flat = flat.reshape(-1, 4)
    out = graph_windows.split(_pieces(lengths), maxlen, stride, CLS, SEP)
    merged = {name: value.numpy() for name, value in graph_windows.merge_spans(
        tf.constant(flat[:, 0]), tf.constant(flat[:, 1]), tf.constant(flat[:, 2]), out).items()}
    kept = sorted((d, a, b, kind) for d, a, b, kind, keep in zip(merged["document"], merged["start"], merged["end"],
                                                                flat[:, 3], merged["keep"], strict=True) if keep)
    expected = [(d, *span) for d, spans in enumerate(merge_spans(windows, found)) for span in spans]
    assert kept == expected
