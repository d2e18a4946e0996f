"""Model outputs to prediction rows, in NumPy: the one place that says what a prediction looks like.

A classifier's row is ``{"label", "probabilities"}`` (each probability rounded to 6 places, by label); a
tagger's is ``{"entities": [{"start", "end", "label", "text"}]}``, character offsets into the text (``end``
exclusive), read on each word's first piece (`kerasbert.text.pipeline.decode_ner`). A CRF head is decoded here
by `viterbi`. ``kerasbert predict`` (`kerasbert.finetune.tasks`), the portable exports
(`kerasbert.serving.runtime`), the SavedModel export's reader (`kerasbert.serving.exported`) and bert4keras's
`kerasbert.modeling.crf.ViterbiDecoder` all use these functions, so their rows are the same. Nothing here imports
TensorFlow.

Example:
>>> label_row(np.array([0.25, 0.75]), ["neg", "pos"])
{'label': 'pos', 'probabilities': {'neg': 0.25, 'pos': 0.75}}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kerasbert.text.pipeline import decode_ner, entity_rows
from kerasbert.text.readers import LabelSet

__all__ = ["DECIMALS", "entities_row", "label_row", "piece_tags", "spans_row", "viterbi"]

DECIMALS = 6  # the places a prediction row rounds each probability to


def viterbi(emissions: np.ndarray, trans: np.ndarray, starts: Sequence[int] | None = None,
            ends: Sequence[int] | None = None) -> np.ndarray:
    """The best label path of one unpadded row, ``[S, K] -> [S]``, as the CRF layer decodes it.

    Args:
        emissions: array ``[S, K]``. the CRF layer's scores of one row, padding removed (not modified).
        trans: array ``[K, K]``. the transition scores (from, to).
        starts: sequence of int or None. labels a path may start with (all when None).
        ends: sequence of int or None. labels a path may end with (all when None).

    Returns:
        np.ndarray. ``[S]`` int64 label ids; scores are summed in float64 when either input is float64.

    Example:
    >>> viterbi(np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([[0.0, -5.0], [0.0, 0.0]])).tolist()
    [0, 0]
    >>> viterbi(np.array([[2.0, 0.0], [0.0, 1.0]]), np.zeros((2, 2)), starts=[1]).tolist()
    [1, 1]
    """
    trans = np.asarray(trans)
    nodes = np.array(emissions, dtype=np.result_type(emissions, trans, np.float32))
    if starts is not None:
        nodes[0, [i for i in range(len(trans)) if i not in starts]] = -np.inf
    if ends is not None:
        nodes[-1, [i for i in range(len(trans)) if i not in ends]] = -np.inf
    delta, backs = nodes[0], []
    for emission in nodes[1:]:
        scores = delta[:, None] + trans  # (from, to)
        backs.append(scores.argmax(0))
        delta = scores.max(0) + emission
    path = [int(delta.argmax())]
    for back in reversed(backs):
        path.append(int(back[path[-1]]))
    return np.array(path[::-1], np.int64)


def piece_tags(scores: np.ndarray, trans: np.ndarray | None = None) -> np.ndarray:
    """The tag id of each word piece of one unpadded row: the Viterbi path with CRF transitions ``trans``, else
    the argmax of ``scores`` ``[S, K]``.

    Example:
    >>> piece_tags(np.array([[0.1, 0.9], [0.8, 0.2]])).tolist()
    [1, 0]
    """
    return viterbi(scores, trans) if trans is not None else np.argmax(scores, axis=-1)


def label_row(probabilities: Sequence[float], labels: Sequence[str]) -> dict:
    """A classifier's prediction row: the most probable label and every label's probability.

    Args:
        probabilities: sequence of float. one per label, in the order of ``labels``.
        labels: sequence of str. the label names.

    Example:
    >>> label_row([0.9, 0.1], ["neg", "pos"])["label"]
    'neg'
    """
    return {"label": labels[int(np.argmax(probabilities))],
            "probabilities": {label: round(float(p), DECIMALS) for label, p in zip(labels, probabilities, strict=True)}}


def entities_row(text: str, tags: Sequence[int], first_pieces: Sequence[int], offsets: Sequence[tuple[int, int]],
                 labels: LabelSet) -> dict:
    """A tagger's prediction row from the tag id of each word piece (`piece_tags`).

    Args:
        text: str. the text the entities are in.
        tags: sequence of int. a tag id per word piece.
        first_pieces: sequence of int. each word's first piece (``Features.first_pieces``; -1: cut by maxlen).
        offsets: sequence of ``(start, end)``. each word's character offsets (``NerExample.offsets``).
        labels: LabelSet. the tag names.

    Example:
    >>> entities_row("去北京", [0, 0, 1, 2, 0], [1, 2, 3], [(0, 1), (1, 2), (2, 3)], LabelSet(["O", "B-LOC", "I-LOC"]))
    {'entities': [{'start': 1, 'end': 3, 'label': 'LOC', 'text': '北京'}]}
    """
    return spans_row(text, decode_ner(tags, first_pieces, offsets, labels))


def spans_row(text: str, spans: Sequence[tuple[int, int, str]]) -> dict:
    """A tagger's prediction row from ``(start, end, label)`` character spans of ``text``.

    Example:
    >>> spans_row("张伟去北京", [(3, 5, "LOC")])
    {'entities': [{'start': 3, 'end': 5, 'label': 'LOC', 'text': '北京'}]}
    """
    return {"entities": entity_rows(text, spans)}
