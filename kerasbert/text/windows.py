"""Long documents as overlapping windows: how a document is split, and how its windows' predictions are merged.

Without a stride, a text longer than ``maxlen`` word pieces is cut (`kerasbert.text.pipeline.report_truncation`
counts the cuts). With ``--stride N`` its pieces are split instead into windows of at most ``maxlen - 2`` pieces,
each a row ``[CLS] pieces [SEP]``, consecutive windows sharing exactly ``N`` pieces (Hugging Face's ``stride``); the
last window holds what is left, so it may be shorter. A text that fits is one window: the row it is without a
stride. The predictions of a document's windows are merged into one:

- a label (cls): the mean of the windows' probabilities (`mean_by_document`);
- a value per piece (ner tags; a CRF head's Viterbi path, decided per window): each piece's from the window where
  the piece is furthest from an edge, the earlier window on a tie (`merge_pieces`). Entities are then read over the
  whole document, so one that crosses a window edge is read once, whole;
- spans (a span head): each from the window where its start..end is furthest from an edge (`merge_spans`).

Rows of a document are numbered as the document's own row would be without a cut: 0 is ``[CLS]``, piece ``p`` is
``p + 1``. Nothing here imports TensorFlow: prediction, training's dev score and the ONNX / OpenVINO exports use it;
the SavedModel does the same in graph ops (`kerasbert.serving.graph_windows`).

Example:
>>> split([5, 2], maxlen=5, stride=1)
[Window(document=0, start=0, end=3), Window(document=0, start=2, end=5), Window(document=1, start=0, end=2)]
>>> cut([2, 10, 11, 12, 13, 14, 3], Window(0, 2, 5))
[2, 12, 13, 14, 3]
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from kerasbert.errors import ConfigError, fail
from kerasbert.log import logger
from kerasbert.text.pipeline import Features

__all__ = ["ONE_WINDOW_VECTORS", "Window", "best_windows", "check_stride", "cut", "edge_distance", "encode_split",
           "mean_by_document", "merge_pieces", "merge_spans", "piece_ranges", "split", "windowed"]

# why a model that answers sentence vectors (--task sim, a checkpoint, a sentence-transformers folder) is not windowed
ONE_WINDOW_VECTORS = ("a sentence vector is of one window, as sentence-transformers truncates at max_seq_length: "
                      "leave --stride out, and a text is cut at --maxlen")


class Window(NamedTuple):
    """One row of a split document: the document's pieces ``start:end`` (piece 0 is the first after [CLS])."""

    document: int
    start: int
    end: int


def check_stride(stride: int, maxlen: int | None = None, what: str = "--stride") -> None:
    """A ConfigError naming ``what`` unless ``0 <= stride < maxlen - 2`` (a window's pieces; any int >= 0 while
    ``maxlen`` is not known yet).

    Example:
    >>> check_stride(126, 128)
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --stride: expected less than maxlen - 2 = 126 (the word pieces of a window), found \
126. Each window must add a piece the one before did not hold: lower --stride or raise --maxlen
    """
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
        raise fail(ConfigError, what, "an int >= 0: the word pieces consecutive windows share", repr(stride))
    if maxlen is not None and stride >= maxlen - 2:
        raise fail(ConfigError, what, f"less than maxlen - 2 = {maxlen - 2} (the word pieces of a window)", str(stride),
                   "Each window must add a piece the one before did not hold: lower --stride or raise --maxlen")


def piece_ranges(length: int, size: int, stride: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` piece ranges of the windows of a text of ``length`` pieces: at most ``size`` pieces each,
    consecutive ones sharing ``stride``; one range when the text fits.

    Example:
    >>> piece_ranges(10, 4, 1), piece_ranges(3, 4, 1), piece_ranges(0, 4, 0)
    ([(0, 4), (3, 7), (6, 10)], [(0, 3)], [(0, 0)])
    """
    if length <= size:
        return [(0, length)]
    step = size - stride
    count = 1 + -(-(length - size) // step)  # the first window, then one per step until the end is held
    return [(k * step, min(k * step + size, length)) for k in range(count)]


def split(lengths: Sequence[int], maxlen: int, stride: int) -> list[Window]:
    """The windows of documents of ``lengths`` pieces each ([CLS] and [SEP] not counted), in document order.

    Example:
    >>> [tuple(w) for w in split([4, 1], maxlen=4, stride=0)]
    [(0, 0, 2), (0, 2, 4), (1, 0, 1)]
    """
    check_stride(stride, maxlen)
    return [Window(d, start, end) for d, length in enumerate(lengths)
            for start, end in piece_ranges(length, maxlen - 2, stride)]


def cut(row: Sequence, window: Window) -> list:
    """A window's row of a document's full row (``[CLS] pieces [SEP]``, or anything per position: labels,
    weights): its first item, the window's pieces, its last item."""
    return [*row[:1], *row[1 + window.start:1 + window.end], *row[-1:]]


def windowed(features: Features, maxlen: int, stride: int, what: str = "data") -> Features:
    """Split uncut `Features` (one row per document, encoded with ``maxlen=None``) into windows.

    Token, segment, per-piece label and weight rows are `cut`; a document's label (cls) goes to each of its windows;
    ``first_pieces`` stays one row per document, numbered in the document's own row. ``Features.windows`` names
    each row's window.

    Raises:
        ConfigError: ``stride`` is out of range, or the rows are text pairs (a second text is not windowed).

    Example:
    >>> features = windowed(Features([[2, 5, 6, 7, 3]], [[0] * 5], [1]), maxlen=4, stride=1)
    >>> features.token_ids, features.labels, features.windows
    ([[2, 5, 6, 3], [2, 6, 7, 3]], [1, 1], [Window(document=0, start=0, end=2), Window(document=0, start=1, end=3)])
    """
    check_stride(stride, maxlen)
    if any(any(row) for row in features.segment_ids):
        raise _pairs_refused()
    windows = split([len(row) - 2 for row in features.token_ids], maxlen, stride)

    def rows(values: list) -> list:
        return [cut(values[w.document], w) for w in windows]

    labels = features.labels
    if labels is not None:
        labels = rows(labels) if labels and isinstance(labels[0], list) else [labels[w.document] for w in windows]
    out = Features(rows(features.token_ids), rows(features.segment_ids), labels,
                   None if features.weights is None else rows(features.weights), features.first_pieces,
                   windows=windows, pad_id=features.pad_id)
    if len(windows) > len(features):
        longer = sum(len(row) > maxlen for row in features.token_ids)
        logger.info("%s: %d of %d texts are longer than maxlen=%d word pieces: split into %d windows sharing %d",
                    what, longer, len(features), maxlen, len(windows) - len(features) + longer, stride)
    return out


def _pairs_refused() -> ConfigError:
    return fail(ConfigError, "--stride", "single texts", "text pairs (--text-b-field)",
                "a pair's second text is not windowed: leave --stride out to cut pairs at --maxlen")


def encode_split(encode: Callable[[int | None], Features], maxlen: int, stride: int | None,
                 what: str = "data", examples: Sequence = ()) -> Features:
    """``encode(maxlen)`` (rows cut at ``maxlen``) without a stride; ``encode(None)`` split into windows with one.
    With a stride, a ConfigError where one of ``examples`` has a second text (``text_b``): tokenizers whose segment
    ids are all 0 (RoBERTa's, XLM-R's) leave no other sign of the pair in the rows.

    Example:
    >>> from kerasbert.text.pipeline import encode_classification
    >>> from kerasbert.text.readers import ClassificationExample
    >>> from kerasbert.text.tokenizer import Tokenizer
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
    >>> rows = [ClassificationExample("a b a b", "")]
    >>> encode_split(lambda cut: encode_classification(tokenizer, rows, maxlen=cut), 5, 1).token_ids
    [[2, 4, 5, 4, 3], [2, 4, 5, 3]]
    """
    if stride is not None and any(getattr(example, "text_b", None) is not None for example in examples):
        raise _pairs_refused()
    return encode(maxlen) if stride is None else windowed(encode(None), maxlen, stride, what)


def _documents(windows: Sequence[Window]) -> list[list[int]]:
    """The row indices of each document's windows, in order (a document's windows are consecutive)."""
    return [list(rows) for _, rows in itertools.groupby(range(len(windows)), key=lambda i: windows[i].document)]


def edge_distance(window: Window, start: int, end: int) -> int:
    """How far the pieces ``start..end`` (inclusive) of a document stand from ``window``'s nearer edge, in pieces.

    Example:
    >>> edge_distance(Window(0, 4, 12), 6, 8), edge_distance(Window(0, 4, 12), 10, 11)
    (2, 0)
    """
    return min(start - window.start, window.end - 1 - end)


def best_windows(windows: Sequence[Window]) -> np.ndarray:
    """For each piece of one document split into ``windows``, the index (in ``windows``) of the window where it is
    furthest from an edge; the earlier window on a tie.

    Example:
    >>> best_windows(split([7], maxlen=7, stride=2)).tolist()  # pieces 0..4 and 3..6
    [0, 0, 0, 0, 1, 1, 1]
    """
    length = max((window.end for window in windows), default=0)
    best, score = np.zeros(length, np.int64), np.full(length, -1, np.int64)
    for k, window in enumerate(windows):
        pieces = np.arange(window.start, window.end)
        distance = np.minimum(pieces - window.start, window.end - 1 - pieces)
        better = distance > score[pieces]  # strictly: a tie keeps the earlier window
        best[pieces[better]], score[pieces[better]] = k, distance[better]
    return best


def merge_pieces(windows: Sequence[Window] | None, rows: Sequence) -> list[np.ndarray]:
    """One row per document from one row per window (a value per position: tag ids, scores): each piece's value
    from its `best_windows` window, [CLS]'s from the first window and [SEP]'s from the last. ``windows`` None: the
    rows are the documents' already.

    Example:
    >>> windows = split([7], maxlen=7, stride=2)  # pieces 0..4 and 3..6
    >>> rows = [[0, 10, 11, 12, 13, 14, 0], [0, 23, 24, 25, 26, 0]]
    >>> [row.tolist() for row in merge_pieces(windows, rows)]
    [[0, 10, 11, 12, 13, 24, 25, 26, 0]]
    """
    if windows is None:
        return [np.asarray(row) for row in rows]
    merged = []
    for indices in _documents(windows):
        group = [windows[i] for i in indices]
        chosen, first, last = best_windows(group), np.asarray(rows[indices[0]]), group[-1]
        out = np.empty((last.end + 2, *first.shape[1:]), first.dtype)
        out[0], out[-1] = first[0], np.asarray(rows[indices[-1]])[last.end - last.start + 1]
        for k, (i, window) in enumerate(zip(indices, group, strict=True)):
            pieces = np.flatnonzero(chosen == k)
            out[1 + pieces] = np.asarray(rows[i])[1 + pieces - window.start]
        merged.append(out)
    return merged


def mean_by_document(windows: Sequence[Window] | None, rows: np.ndarray) -> np.ndarray:
    """The mean over each document's windows of ``rows`` (one per window: a classifier's probabilities), summed in
    float64 and returned in ``rows``' dtype; a document of one window keeps its row exactly. ``windows`` None: the
    rows are the documents' already.

    Example:
    >>> mean_by_document(split([7, 2], maxlen=7, stride=2), np.array([[0.25, 0.75], [0.75, 0.25], [1.0, 0.0]]))
    array([[0.5, 0.5],
           [1. , 0. ]])
    """
    rows = np.asarray(rows)
    if windows is None:
        return rows
    documents = np.array([window.document for window in windows], np.int64)
    count = int(documents.max()) + 1 if len(documents) else 0
    sums = np.zeros((count, *rows.shape[1:]), np.float64)
    np.add.at(sums, documents, rows)
    return (sums / np.bincount(documents, minlength=count).reshape(-1, *[1] * (rows.ndim - 1))).astype(rows.dtype)


def merge_spans(windows: Sequence[Window], spans: Sequence[Sequence[tuple]]) -> list[list[tuple]]:
    """One list of spans per document from each window's: a span is kept from the window where its start..end is
    furthest from an edge among the windows that hold it whole (the earlier on a tie), so a span two windows both
    find is kept once, and one a window finds at its edge gives way to the window that sees it centred.

    Args:
        windows: sequence of Window. each row's window (`split`).
        spans: sequence of sequences of tuples. per window, ``(start, end, ...)``: row positions in the window's row
            (1 is its first piece, ``end`` inclusive), then anything (a label, a score). Spans on [CLS] or [SEP] are
            dropped.

    Returns:
        list of lists of tuples. per document, ``(start, end, ...)`` in the document's row positions, sorted.

    Example:
    >>> windows = split([7], maxlen=7, stride=2)  # pieces 0..4 and 3..6
    >>> merge_spans(windows, [[(4, 5, "LOC"), (1, 1, "PER")], [(1, 2, "LOC"), (3, 4, "ORG")]])
    [[(1, 1, 'PER'), (4, 5, 'LOC'), (6, 7, 'ORG')]]
    """
    merged = []
    for indices in _documents(windows):
        group, kept = [windows[i] for i in indices], []
        starts, ends = [window.start for window in group], [window.end for window in group]  # both ascending
        for k, i in enumerate(indices):
            for start, end, *rest in spans[i]:
                if not 1 <= start <= end <= group[k].end - group[k].start:
                    continue
                a, b = group[k].start + start - 1, group[k].start + end - 1  # the document's pieces
                holding = range(bisect.bisect_right(ends, b), bisect.bisect_right(starts, a))  # windows holding it
                if max(holding, key=lambda j: (edge_distance(group[j], a, b), -j)) == k:
                    kept.append((a + 1, b + 1, *rest))
        merged.append(sorted(kept))
    return merged
