"""The SavedModel of a relation run: the tokenizer, GPLinker's three pointers and their triples in one graph.

``serving_default`` takes ``text`` (a batch of strings) and answers with its triples padded per row: ``subject``,
``predicate`` and ``object`` (strings, ``""`` as padding), ``subject_start``, ``subject_end``, ``object_start`` and
``object_end`` (character offsets into the input, ends exclusive; -1 as padding) and ``triple_count``. A triple is
found as `kerasbert.text.relation_data.found_triples` finds it (subject and object spans scored > 0 over the text's
word pieces, a predicate where both the head and the tail pointers score > 0 for the pair), sorted by subject,
predicate and object offsets, each once: the rows of ``kerasbert predict``. ``ids`` takes ``token_ids`` and
``segment_ids`` and answers with ``relation_logits`` ``[batch, 2 + 2P, S, S]``, the entity, head and tail pointers
stacked, as an OpenVINO or ONNX export's model answers (`portable_model`).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from kerasbert.text.relation_data import ENTITY_HEADS

__all__ = ["graph_triples", "portable_model", "served_relations"]

NAMES = ("subject", "subject_start", "subject_end", "predicate", "object", "object_start", "object_end")


def portable_model(loaded):
    """The model an OpenVINO or ONNX export converts: the run's three pointers stacked into one output
    (`kerasbert.finetune.relation.stacked_logits`)."""
    from kerasbert.finetune.relation import stacked_logits

    return stacked_logits(loaded.model)


def _spans(logits: tf.Tensor, real: tf.Tensor) -> tf.Tensor:
    """``(row, start, end)`` (int32) of each span of ``[B, S, S]`` scored > 0 on real pieces, ``start <= end``."""
    position = tf.range(tf.shape(logits)[-1])
    keep = (logits > 0) & real[:, :, None] & real[:, None, :] & (position[:, None] <= position[None])[None]
    return tf.cast(tf.where(keep), tf.int32)


def _pairs(subjects: tf.Tensor, objects: tf.Tensor, rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Each (subject, object) of the same row, as indices into ``subjects`` and ``objects`` (both sorted by row)."""
    per_row = tf.math.bincount(objects[:, 0], minlength=rows, maxlength=rows, dtype=tf.int32)
    counts = tf.gather(per_row, subjects[:, 0])  # the pairs of each subject
    subject = tf.repeat(tf.range(tf.shape(subjects)[0]), counts)
    within = tf.range(tf.reduce_sum(counts)) - tf.repeat(tf.cumsum(counts, exclusive=True), counts)
    return subject, tf.gather(tf.cumsum(per_row, exclusive=True), tf.gather(subjects[:, 0], subject)) + within


def _sorted_once(keys: Sequence[tf.Tensor]) -> tf.Tensor:
    """The indices that sort rows by ``keys`` (the first the most significant), the first of equal rows alone."""
    order = tf.range(tf.shape(keys[0])[0])
    for key in reversed(keys):
        order = tf.gather(order, tf.argsort(tf.gather(key, order), stable=True))
    ordered = tf.stack([tf.gather(key, order) for key in keys], 1)
    repeated = tf.reduce_all(ordered[1:] == ordered[:-1], 1)
    return tf.boolean_mask(order, tf.concat([tf.ones_like(order[:1], tf.bool), ~repeated], 0))


def graph_triples(text: tf.Tensor, logits: tf.Tensor, pieces: dict, predicates: tf.Tensor) -> dict:
    """The triples of a batch's stacked pointer logits ``[B, 2 + 2P, S, S]``, padded per row (the module's
    docstring names the outputs).

    Args:
        text: tf.Tensor. the batch's strings ``[B]``.
        logits: tf.Tensor. the entity, head and tail pointers' logits, stacked.
        pieces: dict. `kerasbert.serving.graph_text.GraphTokenizer.tokenize`'s output for ``text``: ``lengths``,
            and each piece's character span, ``starts`` and ``ends``.
        predicates: tf.Tensor. the predicates, by head.
    """
    count = (int(logits.shape[1]) - ENTITY_HEADS) // 2
    position = tf.range(tf.shape(logits)[-1])
    real = (position[None] >= 1) & (position[None] < pieces["lengths"][:, None] - 1)
    subjects, objects = _spans(logits[:, 0], real), _spans(logits[:, 1], real)
    subject, object_ = _pairs(subjects, objects, tf.shape(logits)[0])
    s, o = tf.gather(subjects, subject), tf.gather(objects, object_)
    pointers = tf.transpose(logits[:, ENTITY_HEADS:], [0, 2, 3, 1])  # [B, S, S, 2P]: head, then tail
    heads = tf.gather_nd(pointers[..., :count], tf.stack([s[:, 0], s[:, 1], o[:, 1]], 1)) > 0  # [pairs, P]
    tails = tf.gather_nd(pointers[..., count:], tf.stack([s[:, 0], s[:, 2], o[:, 2]], 1)) > 0
    found = tf.cast(tf.where(heads & tails), tf.int32)  # (pair, predicate)
    s, o, predicate = tf.gather(s, found[:, 0]), tf.gather(o, found[:, 0]), found[:, 1]
    row = s[:, 0]

    def offsets(name: str, at: tf.Tensor) -> tf.Tensor:
        return tf.gather_nd(pieces[name], tf.stack([row, at], 1))

    values = [row, offsets("starts", s[:, 1]), offsets("ends", s[:, 2]), predicate, offsets("starts", o[:, 1]),
              offsets("ends", o[:, 2])]
    row, ss, se, predicate, os_, oe = (tf.gather(value, _sorted_once(values)) for value in values)
    texts = tf.gather(text, row)
    out = {"subject": tf.strings.substr(texts, ss, se - ss, unit="UTF8_CHAR"), "subject_start": ss,
           "subject_end": se, "predicate": tf.gather(predicates, predicate),
           "object": tf.strings.substr(texts, os_, oe - os_, unit="UTF8_CHAR"), "object_start": os_, "object_end": oe}
    rows = tf.shape(text, tf.int64)[0]
    padded = {name: tf.RaggedTensor.from_value_rowids(out[name], tf.cast(row, tf.int64), rows).to_tensor(
        "" if out[name].dtype == tf.string else -1) for name in NAMES}
    return {**padded, "triple_count": tf.math.bincount(row, minlength=tf.cast(rows, tf.int32),
                                                       maxlength=tf.cast(rows, tf.int32), dtype=tf.int32)}


def served_relations(loaded, vocab: Sequence[str], maxlen: int, info: dict):
    """The tf.Module to save for a relation run (`kerasbert.finetune.runs.LoadedRun`) and its two signatures."""
    from kerasbert.serving.graph_text import GraphTokenizer

    module = tf.Module()
    module.model = portable_model(loaded)
    module.tokenizer = GraphTokenizer(list(vocab), lowercase=bool(loaded.args.lowercase), maxlen=maxlen)
    names = tf.constant(loaded.labels.labels)

    def relation_logits(token_ids, segment_ids) -> dict:
        return {"relation_logits": tf.cast(module.model([token_ids, segment_ids], training=False), tf.float32)}

    def on_text(text) -> dict:
        pieces = module.tokenizer.tokenize(text)
        return graph_triples(text, relation_logits(pieces["token_ids"], pieces["segment_ids"])["relation_logits"],
                             pieces, names)

    ids = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ("token_ids", "segment_ids")]
    module.serve_text = tf.function(on_text, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    module.serve_ids = tf.function(relation_logits, input_signature=ids)
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
