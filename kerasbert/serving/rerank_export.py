"""The SavedModel of a rerank run: the pair's tokenizer, the cross-encoder and its score in one graph.

``serving_default`` takes ``query`` and ``passage``, two batches of strings, one pair a row, and answers with
``score`` ``[batch]`` (float32), the sigmoid of the model's logit: the pair is encoded ``[CLS] query [SEP] passage
[SEP]`` by `kerasbert.serving.graph_text.GraphTokenizer` and cut at ``maxlen`` as ``kerasbert predict`` cuts it.
``ids`` takes ``token_ids`` and ``segment_ids`` and answers with ``score`` and ``logit``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tensorflow as tf

if TYPE_CHECKING:
    from kerasbert.finetune.runs import LoadedRun

__all__ = ["served_rerank"]


def served_rerank(loaded: LoadedRun, vocab: list[str], maxlen: int, info: dict):
    """The tf.Module to save for a rerank run and its two signatures (`kerasbert.serving.task_exports`'s
    ``saved_model``); ``info`` is left as it is."""
    from kerasbert.serving.graph_text import GraphTokenizer

    module = tf.Module()
    module.model = loaded.model
    module.tokenizer = GraphTokenizer(vocab, lowercase=bool(loaded.args.lowercase), maxlen=maxlen)

    def scored(token_ids, segment_ids) -> dict:
        logit = tf.cast(module.model([token_ids, segment_ids], training=False), tf.float32)[:, 0]
        return {"score": tf.sigmoid(logit), "logit": logit}

    def on_pairs(query, passage) -> dict:
        pieces = module.tokenizer.tokenize(query, passage)
        return {"score": scored(pieces["token_ids"], pieces["segment_ids"])["score"]}

    texts = [tf.TensorSpec([None], tf.string, name=name) for name in ("query", "passage")]
    ids = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ("token_ids", "segment_ids")]
    module.serve_pairs = tf.function(on_pairs, input_signature=texts)
    module.serve_ids = tf.function(scored, input_signature=ids)
    return module, {"serving_default": module.serve_pairs.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
