"""The SavedModel of a multilabel run: the tokenizer, the sigmoid head and its labels over the threshold in one graph.

``serving_default`` takes ``text`` (and ``text_b`` for a run trained on pairs), a batch of strings, and answers with
``scores`` ``[batch, L]`` (each label's sigmoid score, labels in ``kerasbert-export.json``'s order), ``labels``
(the labels scored over the run's threshold, highest first, padded per row with ``""``) and ``label_count``: what
``kerasbert predict`` gives (`kerasbert.text.multilabel_data.score_row`). ``ids`` takes ``token_ids`` and
``segment_ids`` and answers with ``scores``. With a stride, ``serving_default`` splits a text longer than ``maxlen``
into windows and averages their scores (`kerasbert.serving.graph_windows.mean_by_document`), as
``kerasbert predict --stride`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from kerasbert.serving import graph_windows

__all__ = ["labels_over", "served_multilabel"]


def labels_over(scores: tf.Tensor, labels: tf.Tensor, threshold: float) -> dict:
    """The labels of each row scored over ``threshold``, highest first, padded with ``""``, and their count.

    Example:
    >>> out = labels_over(tf.constant([[0.25, 0.75, 0.5], [0.0, 0.0, 0.0]]), tf.constant(["a", "b", "c"]), 0.3)
    >>> out["labels"].numpy().tolist(), out["label_count"].numpy().tolist()
    ([[b'b', b'c'], [b'', b'']], [2, 0])
    """
    order = tf.argsort(scores, axis=-1, direction="DESCENDING", stable=True)
    over = tf.gather(scores, order, batch_dims=1) > threshold
    picked = tf.ragged.boolean_mask(tf.gather(labels, order), over)
    return {"labels": picked.to_tensor(""), "label_count": tf.cast(picked.row_lengths(), tf.int32)}


def served_multilabel(loaded, vocab: Sequence[str], maxlen: int, info: dict):
    """The tf.Module to save for a multilabel run (`kerasbert.finetune.runs.LoadedRun`) and its two signatures; the
    threshold is ``info``'s (`kerasbert.text.multilabel_data.export_info`)."""
    from kerasbert.serving.graph_text import GraphTokenizer

    args = loaded.args
    pairs, stride, threshold = args.text_b is not None, args.stride, float(info["threshold"])
    module = tf.Module()
    module.model = loaded.model
    module.tokenizer = GraphTokenizer(list(vocab), lowercase=bool(args.lowercase), maxlen=maxlen)
    names = tf.constant(loaded.labels.labels)

    def scores_of(token_ids, segment_ids) -> dict:
        return {"scores": tf.cast(module.model([token_ids, segment_ids], training=False), tf.float32)}

    def on_text(text, text_b=None) -> dict:
        if stride is not None:
            windows = graph_windows.split(module.tokenizer.pieces(text), maxlen, stride, list(vocab).index("[CLS]"),
                                          list(vocab).index("[SEP]"))
            scores = graph_windows.mean_by_document(scores_of(windows["token_ids"], windows["segment_ids"])["scores"],
                                                    windows)
        else:
            pieces = module.tokenizer.tokenize(text, text_b) if pairs else module.tokenizer.tokenize(text)
            scores = scores_of(pieces["token_ids"], pieces["segment_ids"])["scores"]
        return {"scores": scores, **labels_over(scores, names, threshold)}

    text = [tf.TensorSpec([None], tf.string, name="text")] + ([tf.TensorSpec([None], tf.string, name="text_b")]
                                                              if pairs else [])
    ids = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ("token_ids", "segment_ids")]
    module.serve_text = tf.function(on_text, input_signature=text)
    module.serve_ids = tf.function(scores_of, input_signature=ids)
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
