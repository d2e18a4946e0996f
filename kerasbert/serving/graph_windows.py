"""`kerasbert.text.windows` as TensorFlow ops, so that a SavedModel splits long texts into windows and merges their
answers inside its graph, as ``kerasbert predict --stride`` does.

`split` cuts every text's word pieces (`kerasbert.serving.graph_text.GraphTokenizer.pieces`, uncut) into windows
of at most ``maxlen - 2`` pieces sharing ``stride``, each ``[CLS] pieces [SEP]``; the model runs on all the windows
of a batch at once; `mean_by_document` averages a classifier's probabilities per text (summed in float64, as the
NumPy merge sums them) and `merge_pieces` takes each piece's tag from the window where the piece is furthest from an
edge, the earlier window on a tie; `merge_spans` keeps a span found in a window where the window is the one holding
the span furthest from an edge. The windows are those of `kerasbert.text.windows.split`, and a text that fits is one
window: the row it is without a stride.

Example:
>>> pieces = {"token_ids": tf.constant([5, 6, 7, 8, 9, 4]), "count": tf.constant([5, 1])}
>>> windows = split(pieces, maxlen=5, stride=1, cls=2, sep=3)
>>> windows["token_ids"].numpy().tolist(), windows["document"].numpy().tolist()
([[2, 5, 6, 7, 3], [2, 7, 8, 9, 3], [2, 4, 3, 0, 0]], [0, 0, 1])
>>> merge_pieces(tf.constant([[0, 1, 1, 1, 0], [0, 2, 2, 2, 0], [0, 3, 0, 0, 0]]), windows).numpy().tolist()
[[0, 1, 1, 1, 2, 2, 0], [0, 3, 0, 0, 0, 0, 0]]
"""

from __future__ import annotations

import tensorflow as tf

from kerasbert.serving.graph_text import NO_OFFSET

__all__ = ["mean_by_document", "merge_pieces", "merge_spans", "split"]


def _rows(values: tf.Tensor, first: tf.Tensor, length: tf.Tensor, head, tail) -> tf.RaggedTensor:
    """Rows ``[head, values[first:first + length], tail]``, one per entry of ``first`` and ``length`` (int64)."""
    items = tf.ragged.range(length + 2)
    row, position = items.value_rowids(), items.flat_values
    inner = (position > 0) & (position <= tf.gather(length, row))
    at = tf.where(inner, tf.gather(first, row) + position - 1, tf.size(values, tf.int64))  # else: the tail
    value = tf.gather(tf.concat([values, tf.constant([tail], values.dtype)], 0), at)
    value = tf.where(tf.equal(position, 0), tf.constant(head, values.dtype), value)
    return tf.RaggedTensor.from_value_rowids(value, row, tf.size(length, tf.int64), validate=False)


def split(pieces: dict[str, tf.Tensor], maxlen: int, stride: int, cls: int, sep: int) -> dict[str, tf.Tensor]:
    """The windows of a batch of texts, and each text's uncut row.

    Args:
        pieces: dict of tensors. `GraphTokenizer.pieces`: ``token_ids`` (and ``starts``, ``ends``) flat in text order,
            ``count`` the pieces of each text.
        maxlen: int. the most ids of a window, [CLS] and [SEP] included.
        stride: int. the pieces consecutive windows share, ``0 <= stride < maxlen - 2``.
        cls: int. the id of [CLS].
        sep: int. the id of [SEP].

    Returns:
        dict of tensors: ``token_ids`` and ``segment_ids`` ``[windows, longest]`` (padded with 0), the model's input;
        ``document``, ``start`` and ``end`` ``[windows]`` (int64): each window's text and its pieces ``start:end``;
        ``windows`` ``[texts]``, how many each text has; and the texts' rows ``[CLS] pieces [SEP]``, uncut:
        ``text_token_ids`` (and ``text_starts``, ``text_ends``, -1 on [CLS], [SEP] and padding, when ``pieces`` has
        ``starts`` and ``ends``) ``[texts, longest]``, ``text_lengths`` ``[texts]``; ``size`` and ``step``, the
        pieces of a full window and between window starts (int64 scalars).
    """
    size, step = maxlen - 2, maxlen - 2 - stride
    count = tf.cast(pieces["count"], tf.int64)
    windows = 1 + (tf.maximum(count - size, 0) + step - 1) // step  # as `kerasbert.text.windows.piece_ranges`
    index = tf.ragged.range(windows)
    document = index.value_rowids()
    start = index.flat_values * step
    end = tf.minimum(start + size, tf.gather(count, document))
    text_first = tf.cumsum(count, exclusive=True)
    token_ids = _rows(pieces["token_ids"], tf.gather(text_first, document) + start, end - start, cls, sep).to_tensor(0)
    out = {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "document": document, "start": start,
           "end": end, "windows": windows, "text_first": text_first, "count": count,
           "size": tf.constant(size, tf.int64), "step": tf.constant(step, tf.int64),
           "text_lengths": tf.cast(count + 2, tf.int32),
           "text_token_ids": _rows(pieces["token_ids"], text_first, count, cls, sep).to_tensor(0)}
    for name in ("starts", "ends"):
        if name in pieces:
            out[f"text_{name}"] = _rows(pieces[name], text_first, count, NO_OFFSET, NO_OFFSET).to_tensor(NO_OFFSET)
    return out


def mean_by_document(values: tf.Tensor, windows: dict[str, tf.Tensor]) -> tf.Tensor:
    """The mean of ``values`` (``[windows, K]``: probabilities) over each text's windows, ``[texts, K]``, summed in
    float64 and returned in ``values``' dtype."""
    total = tf.math.unsorted_segment_sum(tf.cast(values, tf.float64), windows["document"],
                                         tf.size(windows["windows"]))
    return tf.cast(total / tf.cast(windows["windows"], tf.float64)[:, None], values.dtype)


def merge_pieces(values: tf.Tensor, windows: dict[str, tf.Tensor]) -> tf.Tensor:
    """Each text's row ``[texts, longest]`` (0 on [CLS], [SEP] and padding) of per-position ``values``
    ``[windows, length]`` (tag ids): each piece's from the window where it is furthest from an edge, the earlier
    window on a tie."""
    length = windows["end"] - windows["start"]
    items = tf.ragged.range(length)  # the pieces of each window
    row, j = items.value_rowids(), items.flat_values
    distance = tf.minimum(j, tf.gather(length, row) - 1 - j)
    count = tf.size(length, tf.int64)
    key = distance * (count + 1) + (count - row)  # the furthest from an edge first, then the earliest window
    piece = tf.gather(tf.gather(windows["text_first"], windows["document"]) + windows["start"], row) + j
    total = tf.reduce_sum(windows["count"])
    chosen = tf.equal(key, tf.gather(tf.math.unsorted_segment_max(key, piece, total), piece))
    value = tf.gather_nd(values, tf.stack([row, j + 1], axis=1))
    merged = tf.math.unsorted_segment_sum(tf.where(chosen, value, tf.zeros_like(value)), piece, total)
    return _rows(merged, windows["text_first"], windows["count"], 0, 0).to_tensor(0)


def merge_spans(window: tf.Tensor, start: tf.Tensor, end: tf.Tensor, windows: dict[str, tf.Tensor]) -> dict:
    """Spans found in windows, in their texts, and which to keep: a span is kept from the window where its pieces are
    furthest from an edge among the windows that hold it whole, the earlier on a tie (`kerasbert.text.windows
    .merge_spans`); that window is a function of the span's pieces alone, so a span is kept iff it is its own.

    Args:
        window: tf.Tensor. ``[spans]`` (int64) the window row each span was found in.
        start: tf.Tensor. ``[spans]`` (int64) its first piece, a position in the window's row (1 is its first piece).
        end: tf.Tensor. ``[spans]`` (int64) its last piece, likewise, ``start <= end``.
        windows: dict of tensors. `split`'s.

    Returns:
        dict of tensors ``[spans]``: ``document`` (the text), ``start`` and ``end`` (positions in the text's row, 1 its
        first piece) and ``keep`` (bool).
    """
    document = tf.gather(windows["document"], window)
    first = tf.cumsum(windows["windows"], exclusive=True)  # each text's first window
    a = tf.gather(windows["start"], window) + start - 1  # the text's pieces
    b = tf.gather(windows["start"], window) + end - 1
    # window k of a text holds pieces k·step .. k·step + size - 1 (fewer in the last): those holding a..b whole
    low = tf.maximum(tf.math.floordiv(b - windows["size"], windows["step"]) + 1, 0)
    high = tf.minimum(tf.math.floordiv(a, windows["step"]), tf.gather(windows["windows"], document) - 1)
    candidates = tf.ragged.range(low, high + 1)
    span, k = candidates.value_rowids(), candidates.flat_values
    which = tf.gather(tf.gather(first, document), span) + k
    count = tf.size(windows["document"], tf.int64)

    def key(at: tf.Tensor, a: tf.Tensor, b: tf.Tensor, k: tf.Tensor) -> tf.Tensor:
        """The furthest from an edge first, then the earliest window."""
        distance = tf.minimum(a - tf.gather(windows["start"], at), tf.gather(windows["end"], at) - 1 - b)
        return distance * (count + 1) + (count - k)

    best = tf.math.unsorted_segment_max(key(which, tf.gather(a, span), tf.gather(b, span), k), span, tf.size(a))
    own = key(window, a, b, window - tf.gather(first, document))
    return {"document": document, "start": a + 1, "end": b + 1, "keep": tf.equal(own, best)}
