"""The SavedModel of a span run: the tokenizer, the GlobalPointer's span logits and their entities in one graph.

``serving_default`` takes ``text`` (a batch of strings) and answers with the outputs of a ner export
(`kerasbert.serving.label_export`): ``entity_text``, ``entity_label``, ``entity_start``, ``entity_end`` (character
offsets into the input, ``end`` exclusive) padded per row with ``""`` and -1, and ``entity_count``. The entities
are every (type, start piece, end piece) whose logit is > 0 over the text's word pieces, nested ones included,
with the offsets and in the order `kerasbert.text.span_data.decode_spans` gives them (sorted by start, end and
label, each once), so the rows are `kerasbert.predict`'s. ``ids`` takes ``token_ids`` and ``segment_ids`` and
answers with ``span_logits`` ``[batch, K, S, S]``. With a stride, ``serving_default`` splits a text longer than
``maxlen`` into windows and keeps each span from the window where its pieces are furthest from an edge
(`window_entities`), as ``kerasbert predict --stride`` does; ``ids`` takes the windows' rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from kerasbert.serving import graph_windows
from kerasbert.serving.label_export import padded_entities

__all__ = ["served_spans", "span_entities", "window_entities"]


def _sorted_once(row, start, end, kind, kinds: int) -> tf.Tensor:
    """The indices that sort entities by row, start, end and type, the first of equal ones alone."""
    base = tf.reduce_max(tf.concat([[0], end], 0)) + 1
    key = ((row * base + start) * base + end) * kinds + kind
    order = tf.argsort(key, stable=True)
    key = tf.gather(key, order)
    return tf.boolean_mask(order, tf.concat([tf.ones_like(key[:1], tf.bool), key[1:] != key[:-1]], 0))


def _found(logits: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """``(row, type, start, end)`` (int64) of each span scored > 0 over a row's word pieces (not [CLS], [SEP] or
    padding; ``lengths`` counts a row's tokens), ``start <= end``."""
    position = tf.range(tf.shape(logits)[-1])
    real = (position[None] >= 1) & (position[None] < tf.cast(lengths, tf.int32)[:, None] - 1)
    keep = (logits > 0) & real[:, None, :, None] & real[:, None, None, :] & (position[:, None] <= position[None])
    return tf.where(keep)


def _entities(text, row, kind, start, end, labels: tf.Tensor, kinds: int) -> dict:
    """The padded entities (`padded_entities`) of spans given by row, type and character offsets (int64), sorted by
    start, end and type, each once."""
    picked = _sorted_once(row, start, end, kind, kinds)
    row, kind = tf.gather(row, picked), tf.gather(kind, picked)
    start, end = (tf.cast(tf.gather(offsets, picked), tf.int32) for offsets in (start, end))
    return padded_entities(text, row, tf.gather(labels, kind), start, end)


def span_entities(text: tf.Tensor, logits: tf.Tensor, pieces: dict, labels: tf.Tensor) -> dict:
    """The entities of a batch's span logits ``[B, K, S, S]``, padded per row (`padded_entities`).

    Args:
        text: tf.Tensor. the batch's strings ``[B]``.
        logits: tf.Tensor. the span logits.
        pieces: dict. `kerasbert.serving.graph_text.GraphTokenizer.tokenize`'s output for ``text``: ``lengths``,
            and each piece's character span, ``starts`` and ``ends``.
        labels: tf.Tensor. the entity types, by head.
    """
    found = _found(logits, pieces["lengths"])  # (row, type, start piece, end piece) of each span
    start = tf.cast(tf.gather_nd(pieces["starts"], tf.gather(found, [0, 2], axis=1)), tf.int64)
    end = tf.cast(tf.gather_nd(pieces["ends"], tf.gather(found, [0, 3], axis=1)), tf.int64)
    return _entities(text, found[:, 0], found[:, 1], start, end, labels, int(logits.shape[1]))


def window_entities(text: tf.Tensor, logits: tf.Tensor, windows: dict, labels: tf.Tensor) -> dict:
    """The entities of a batch of texts from the span logits ``[windows, K, S, S]`` of their windows
    (`kerasbert.serving.graph_windows.split`'s, with ``text_starts`` and ``text_ends``): each span kept from the
    window where its pieces are furthest from an edge (`kerasbert.serving.graph_windows.merge_spans`), in the
    text's character offsets, padded per text."""
    found = _found(logits, windows["end"] - windows["start"] + 2)
    spans = graph_windows.merge_spans(found[:, 0], found[:, 2], found[:, 3], windows)
    kept = tf.where(spans["keep"])[:, 0]
    row, kind = tf.gather(spans["document"], kept), tf.gather(found[:, 1], kept)
    start, end = (tf.cast(tf.gather_nd(windows[name], tf.stack([row, tf.gather(spans[at], kept)], 1)), tf.int64)
                  for name, at in (("text_starts", "start"), ("text_ends", "end")))
    return _entities(text, row, kind, start, end, labels, int(logits.shape[1]))


def served_spans(model, tokenizer, labels: Sequence[str], vocab: Sequence[str], stride: int | None = None):
    """The tf.Module to save for a span run's ``model`` and the graph ``tokenizer``
    (`kerasbert.serving.graph_text.GraphTokenizer`, of ``vocab``), and its two signatures; with ``stride``,
    ``serving_default`` splits long texts into windows and merges their spans (`window_entities`)."""
    module = tf.Module()
    module.model, module.tokenizer = model, tokenizer
    names = tf.constant(list(labels))

    def span_logits(token_ids, segment_ids) -> dict:
        return {"span_logits": tf.cast(module.model([token_ids, segment_ids], training=False), tf.float32)}

    def on_text(text) -> dict:
        if stride is not None:
            windows = graph_windows.split(module.tokenizer.pieces(text), tokenizer.maxlen, stride,
                                          list(vocab).index("[CLS]"), list(vocab).index("[SEP]"))
            return window_entities(text, span_logits(windows["token_ids"], windows["segment_ids"])["span_logits"],
                                   windows, names)
        pieces = module.tokenizer.tokenize(text)
        logits = span_logits(pieces["token_ids"], pieces["segment_ids"])["span_logits"]
        return span_entities(text, logits, pieces, names)

    ids = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ("token_ids", "segment_ids")]
    module.serve_text = tf.function(on_text, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    module.serve_ids = tf.function(span_logits, input_signature=ids)
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
