"""The SavedModel of a cls or ner run: the tokenizer, the head and its labels or entities in one graph.

``serving_default`` takes ``text`` (and ``text_b`` for a run trained on pairs), a batch of strings. A classifier
returns ``label`` (string), ``label_id`` and ``probabilities``; a tagger returns its entities padded per row
(`padded_entities`): ``entity_text``, ``entity_label`` (``""`` as padding), ``entity_start``, ``entity_end``
(character offsets into the input, ``end`` exclusive; -1 as padding) and ``entity_count``, read from each word's
first piece as ``kerasbert predict`` reads them (a CRF head is Viterbi-decoded in the graph). ``ids`` takes
``token_ids`` and ``segment_ids`` and returns the head's output (``probabilities``, or ``tag_ids`` per piece). With a
stride, ``serving_default`` splits a text longer than ``maxlen`` into windows and merges their answers
(`kerasbert.serving.graph_windows`).
"""

from __future__ import annotations

import tensorflow as tf

from kerasbert.modeling.heads import crf_decoder
from kerasbert.serving import graph_windows

__all__ = ["padded_entities", "served_labels"]


def _entities(text, tag_ids, token_ids, starts, ends, lengths, vocab, labels) -> dict:
    """Entities of a batch, padded per row, from piece tags read on each word's first piece (BIO)."""
    position = tf.range(tf.shape(token_ids)[1])[None]
    real = (position >= 1) & (position < lengths[:, None] - 1)  # not [CLS], [SEP] or padding
    first = real & ~tf.strings.regex_full_match(tf.gather(vocab, token_ids), "##.+")
    word_tags = tf.ragged.boolean_mask(tag_ids, first)
    rows, names = word_tags.value_rowids(), tf.gather(labels, word_tags.flat_values)
    word_start = tf.ragged.boolean_mask(starts, first).flat_values
    words_before = tf.cumsum(word_tags.row_lengths(), exclusive=True)
    word_of_piece = tf.cumsum(tf.cast(first, tf.int64), axis=1) - 1 + words_before[:, None]
    word_end = tf.math.unsorted_segment_max(tf.boolean_mask(ends, real), tf.boolean_mask(word_of_piece, real),
                                            tf.shape(names, tf.int64)[0])
    kind = tf.strings.regex_replace(names, "^[BI]-", "")
    outside = ~tf.strings.regex_full_match(names, "[BI]-.+")
    same_row = tf.concat([[False], rows[1:] == rows[:-1]], 0)
    continues = (same_row & ~tf.concat([[True], outside[:-1]], 0) & (tf.concat([[""], kind[:-1]], 0) == kind)
                 & tf.strings.regex_full_match(names, "I-.+"))
    begins = ~outside & ~continues
    entity = tf.boolean_mask(tf.cumsum(tf.cast(begins, tf.int64)) - 1, ~outside)
    count = tf.reduce_sum(tf.cast(begins, tf.int64))
    start = tf.math.unsorted_segment_min(tf.boolean_mask(word_start, ~outside), entity, count)
    end = tf.math.unsorted_segment_max(tf.boolean_mask(word_end, ~outside), entity, count)
    return padded_entities(text, tf.boolean_mask(rows, begins), tf.boolean_mask(kind, begins), start, end)


def padded_entities(text, row, label, start, end) -> dict:
    """The ``serving_default`` outputs of a batch's entities, given flat in row order (``row`` of each): padded per
    row (``""`` and -1), with each entity's text cut from its input and ``entity_count``."""
    values = {"entity_text": tf.strings.substr(tf.gather(text, row), start, end - start, unit="UTF8_CHAR"),
              "entity_label": label, "entity_start": start, "entity_end": end}
    nrows = tf.shape(text, tf.int64)[0]
    out = {name: tf.RaggedTensor.from_value_rowids(value, row, nrows).to_tensor("" if value.dtype == tf.string
                                                                                else -1)
           for name, value in values.items()}
    out["entity_count"] = tf.math.bincount(row, minlength=nrows, maxlength=nrows, dtype=tf.int64)
    return out


def served_labels(model, tokenizer, labels: list[str], vocab: list[str], task: str, crf: bool, pairs: bool,
                  stride: int | None = None):
    """The tf.Module to save for a cls or ner run's ``model`` and the graph ``tokenizer``
    (`kerasbert.serving.graph_text.GraphTokenizer`, of ``vocab``), and its two signatures; with ``stride``,
    ``serving_default`` splits long texts into windows and merges their answers (`kerasbert.serving.graph_windows`)."""
    module = tf.Module()
    module.model, module.tokenizer = (crf_decoder(model) if crf else model), tokenizer
    label_names, pieces = tf.constant(labels), tf.constant(vocab)

    def labelled(probabilities) -> dict:
        label_id = tf.argmax(probabilities, -1, output_type=tf.int32)
        return {"probabilities": probabilities, "label_id": label_id, "label": tf.gather(label_names, label_id)}

    def head(token_ids, segment_ids) -> dict:
        output = module.model([token_ids, segment_ids], training=False)
        if task == "cls":
            return labelled(output)
        tag_ids = output if crf else tf.argmax(output, -1, output_type=tf.int32)
        return {"tag_ids": tf.cast(tag_ids, tf.int32)}

    def on_windows(text) -> dict:
        windows = graph_windows.split(module.tokenizer.pieces(text), tokenizer.maxlen, stride, vocab.index("[CLS]"),
                                      vocab.index("[SEP]"))
        out = head(windows["token_ids"], windows["segment_ids"])
        if task == "cls":
            return labelled(graph_windows.mean_by_document(out["probabilities"], windows))
        return _entities(text, graph_windows.merge_pieces(out["tag_ids"], windows), windows["text_token_ids"],
                         windows["text_starts"], windows["text_ends"], windows["text_lengths"], pieces, label_names)

    def on_text(text, text_b=None) -> dict:
        if stride is not None:
            return on_windows(text)
        pieces_of = module.tokenizer.tokenize(text, text_b) if pairs else module.tokenizer.tokenize(text)
        out = head(pieces_of["token_ids"], pieces_of["segment_ids"])
        if task == "cls":
            return out
        return _entities(text, out["tag_ids"], pieces_of["token_ids"], pieces_of["starts"], pieces_of["ends"],
                         pieces_of["lengths"], pieces, label_names)

    text = [tf.TensorSpec([None], tf.string, name="text")] + ([tf.TensorSpec([None], tf.string, name="text_b")]
                                                              if pairs else [])
    ids = [tf.TensorSpec([None, None], tf.int32, name="token_ids"), tf.TensorSpec([None, None], tf.int32,
                                                                                  name="segment_ids")]
    module.serve_text = tf.function(on_text, input_signature=text)
    module.serve_ids = tf.function(head, input_signature=ids)
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
