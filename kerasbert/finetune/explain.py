"""Integrated gradients: how much each word piece weighs in a classifier's prediction (`explain`).

bert4keras's task_sentiment_integrated_gradients.py, as a function. The token embedding's rows ``e`` of a text go
from 0 to their own values in ``steps`` equal steps (``α = i/(steps-1)``, the reference being zero vectors); at each,
the gradient of the target class's probability by the rows, times the rows ``α·e``; the mean over the steps is a
``[S, E]`` matrix, each piece's row reduced to one number (its norm, or the largest absolute value: ``reduce``) and
the numbers scaled to [0, 1] over the row (min to max). The segment and position embeddings stay as they are, as
there, where the token embedding's matrix alone is scaled; here the model is not touched: the rest of its graph runs
from the scaled rows (`kerasbert.finetune.adversarial.EmbeddingSplit`).

Example:
>>> import numpy as np
>>> from kerasbert import build_transformer_model, heads
>>> model = heads.cls(build_transformer_model("tiny", verbose=False), 2)
>>> found = integrated_gradients(model, [2, 7, 9, 3], steps=4)
>>> found.gradients.shape, 0 <= found.target < 2
((4, 32), True)
>>> float(scores(found.gradients).min()), float(scores(found.gradients).max())
(0.0, 1.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import keras
import numpy as np

from kerasbert import layer_names as names
from kerasbert.errors import ConfigError, DataError, ModelError, fail
from kerasbert.finetune.adversarial import EmbeddingSplit

__all__ = ["REDUCTIONS", "Attribution", "explain", "integrated_gradients", "scores", "with_attributions"]

REDUCTIONS = ("norm", "max")  # a piece's row of the mean gradient to one number: its norm, or its largest |value|
STEPS = 20  # bert4keras's n


@dataclasses.dataclass
class Attribution:
    """What `integrated_gradients` finds for one text.

    Args:
        gradients: np.ndarray. ``[S, E]``, the mean over the steps of the gradient times the scaled rows.
        target: int. the class explained.
        probabilities: np.ndarray. ``[C]``, the model's outputs for the text.
    """

    gradients: np.ndarray
    target: int
    probabilities: np.ndarray


def integrated_gradients(model: keras.Model, token_ids: Sequence[int], segment_ids: Sequence[int] | None = None,
                         target: int | None = None, steps: int = STEPS) -> Attribution:
    """The integrated gradients of one text's word pieces for class ``target`` of a classifier.

    Args:
        model: keras.Model. a classifier (``[B, C]`` outputs) with an ``Embedding-Token`` layer.
        token_ids: list of int. the text's ids, ``[CLS]`` and ``[SEP]`` included.
        segment_ids: list of int or None. its segment ids (None: zeros).
        target: int or None. the class explained (None: the predicted one, bert4keras's ``argmax``).
        steps: int. the points from 0 to the rows (at least 2).

    Returns:
        Attribution. the mean gradient times the rows, the target and the probabilities.
    """
    import tensorflow as tf

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 2:
        raise fail(ConfigError, "steps", "an int >= 2", repr(steps))
    if len(model.outputs) != 1 or len(model.outputs[0].shape) != 2:
        raise fail(ModelError, f"model {model.name!r}", "a classifier, one output of shape [batch, classes]",
                   f"outputs of shapes {[tuple(output.shape) for output in model.outputs]}")
    split = EmbeddingSplit(model)
    ids = np.asarray([token_ids], "int32")
    segments = np.zeros_like(ids) if segment_ids is None else np.asarray([segment_ids], "int32")
    x = {names.TOKEN_INPUT: ids, names.SEGMENT_INPUT: segments}
    probabilities = keras.ops.convert_to_numpy(model(split.inputs(x), training=False))[0]
    target = int(np.argmax(probabilities)) if target is None else _class(target, len(probabilities))
    rows = split.embed(x)  # [1, S, E]
    alphas = tf.reshape(tf.linspace(0.0, 1.0, steps), (steps, 1, 1))
    scaled = tf.cast(alphas, rows.dtype) * tf.repeat(rows, steps, axis=0)  # [steps, S, E]
    repeated = {name: np.repeat(value, steps, axis=0) for name, value in x.items()}
    with tf.GradientTape() as tape:
        tape.watch(scaled)
        chosen = tf.reduce_sum(split.run(repeated, scaled)[:, target])  # each row's own probability
    gradients = tf.reduce_mean(tape.gradient(chosen, scaled) * scaled, axis=0)
    return Attribution(keras.ops.convert_to_numpy(gradients).astype("float32"), target, probabilities)


def _class(target, count: int) -> int:
    if not isinstance(target, (int, np.integer)) or isinstance(target, bool) or not 0 <= target < count:
        raise fail(ConfigError, "target", f"a class id from 0 to {count - 1} (or a label of the run)", repr(target))
    return int(target)


def scores(gradients: np.ndarray, reduce: str = "norm") -> np.ndarray:
    """Each piece's score in [0, 1]: its row of ``gradients`` reduced (``"norm"`` or ``"max"``), then min-max scaled,
    as bert4keras's example prints them (without its rounding to 4 places).

    Example:
    >>> scores(np.array([[3.0, 4.0], [0.0, 1.0], [0.0, 3.0]])).tolist()
    [1.0, 0.0, 0.5]
    """
    if reduce not in REDUCTIONS:
        raise fail(ConfigError, "reduce", " or ".join(map(repr, REDUCTIONS)), repr(reduce))
    value = np.sqrt((gradients ** 2).sum(axis=1)) if reduce == "norm" else np.abs(gradients).max(axis=1)
    spread = value.max() - value.min()
    return (value - value.min()) / spread if spread > 0 else np.zeros_like(value)


def explain(source, text: str | dict, tokenizer=None, target: int | str | None = None, steps: int = STEPS,
            reduce: str = "norm") -> dict:
    """Which word pieces of ``text`` the classifier's prediction rests on (integrated gradients).

    Args:
        source: str or keras.Model. a ``cls`` run folder of ``kerasbert train``, or a classifier model (then
            ``tokenizer`` is needed).
        text: str or dict. the text, or ``{"text", "text_b"}`` for a pair.
        tokenizer: Tokenizer or None. the model's tokenizer (a run's own when None).
        target: int or str or None. the class explained: its id, a run's label, or None for the predicted one.
        steps: int. the points from the zero reference to the text's embedding rows.
        reduce: str. ``"norm"`` or ``"max"``: how a piece's row becomes its score.

    Returns:
        dict. ``{"text", "label", "target", "tokens", "scores"}``: the predicted label (a run's name, else its id),
        the class explained, and each word piece between ``[CLS]`` and ``[SEP]`` with its score in [0, 1] (scaled
        over the whole row, as bert4keras's example).

    Example:
    >>> from kerasbert import build_transformer_model, heads
    >>> from kerasbert.text.tokenizer import Tokenizer
    >>> model = heads.cls(build_transformer_model("tiny", verbose=False), 2)
    >>> tokenizer = Tokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "好": 4, "书": 5})
    >>> explain(model, "好书", tokenizer, steps=3)["tokens"]
    ['好', '书']
    """
    model, tokenizer, labels, maxlen = _opened(source, tokenizer)
    return _explained(model, tokenizer, labels, maxlen, text, target, steps, reduce)


def with_attributions(loaded, rows: Sequence[dict], steps: int = STEPS, reduce: str = "norm") -> list[dict]:
    """``kerasbert predict --explain``: each prediction row of a loaded ``cls`` run with its word pieces' ``tokens``
    and ``scores`` for the predicted label (`explain`'s)."""
    if loaded.args.task != "cls":
        raise fail(ConfigError, "--explain", "a run of --task cls (a classifier)", f"--task {loaded.args.task}",
                   "integrated gradients explain one class's probability of a whole text")
    found = [_explained(loaded.model, loaded.tokenizer, loaded.labels, loaded.args.maxlen, row, None, steps, reduce)
             for row in rows]
    return [{**row, "tokens": one["tokens"], "scores": one["scores"]} for row, one in zip(rows, found, strict=True)]


def _explained(model, tokenizer, labels, maxlen, text, target, steps: int, reduce: str) -> dict:
    """`explain` of one text with the model, tokenizer, labels (or None) and ``maxlen`` (or None) given."""
    row = text if isinstance(text, dict) else {"text": text}
    if not isinstance(row.get("text"), str):
        raise fail(DataError, "text", "a str or {\"text\": ..., \"text_b\": ...}", repr(text)[:80])
    token_ids, segment_ids = tokenizer.encode(row["text"], row.get("text_b"), maxlen=maxlen)
    if isinstance(target, str):
        if labels is None or target not in labels.labels:
            raise fail(ConfigError, "target", f"one of the labels {labels.labels if labels else '(a run has them)'}",
                       repr(target))
        target = labels.index(target)
    found = integrated_gradients(model, token_ids, segment_ids, target, steps)
    predicted = int(np.argmax(found.probabilities))
    named = (lambda index: labels.labels[index]) if labels is not None else (lambda index: index)
    return {**row, "label": named(predicted), "target": named(found.target),
            "tokens": tokenizer.ids_to_tokens(token_ids)[1:-1],
            "scores": [round(float(score), 6) for score in scores(found.gradients, reduce)[1:-1]]}


def _opened(source, tokenizer):
    """``(model, tokenizer, labels or None, maxlen or None)`` of a run folder or a model."""
    if isinstance(source, keras.Model):
        if tokenizer is None:
            raise fail(ConfigError, "tokenizer", "the model's Tokenizer", "None", "pass tokenizer=...")
        return source, tokenizer, None, None
    from kerasbert.finetune.runs import finished_run, open_run

    args = finished_run(source)
    if args.task != "cls":
        raise fail(ConfigError, f"explain {source}", "a run of --task cls (a classifier)", f"--task {args.task}",
                   "integrated gradients explain one class's probability of a whole text")
    loaded = open_run(source)
    return loaded.model, tokenizer or loaded.tokenizer, loaded.labels, loaded.args.maxlen
