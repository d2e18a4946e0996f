"""Token ids to text as TensorFlow ops: ``Tokenizer.decode`` inside a SavedModel that generates text.

:class:`GraphDetokenizer` looks up, per token, what `kerasbert.text.decoding.piece_table` says
`kerasbert.text.decoding.decode_tokens` appends; the one choice that depends on the text so far (a space before a
word unless the last character written is CJK) is read from the last token before it that writes something. The
rows are then joined and `kerasbert.text.decoding.decode_rules_re2` tidies them with ``tf.strings.regex_replace``.
Only core TensorFlow ops: the SavedModel loads where neither kerasbert nor tensorflow-text is installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import tensorflow as tf

from kerasbert.serving.graph_text import _vocab_list
from kerasbert.text.decoding import decode_rules_re2, piece_table


class GraphDetokenizer(tf.Module):
    """kerasbert's ``Tokenizer.decode`` in TensorFlow ops: a batch of id rows to one string each.

    Runs eagerly, in ``tf.function`` and in a SavedModel loaded without kerasbert. Its tables are constants built
    here, so a module holding it saves with ``tf.saved_model.save``.

    Args:
        vocab: list of str, dict or str. the tokens in id order, ``{token: id}``, or a BERT ``vocab.txt`` (or a
            folder holding one). It must hold [PAD], [UNK], [CLS] and [SEP].

    Example:
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "中", "国", "，", "hello", "##s", "3", "."]
    >>> detokenizer = GraphDetokenizer(tokens)
    >>> ids = tf.constant([[2, 4, 5, 6, 7, 8, 3], [9, 10, 9, 0, 0, 0, 0]])
    >>> [text.decode() for text in detokenizer.detokenize(ids, tf.constant([7, 3])).numpy()]
    ['中国，hellos', '3.3']
    """

    def __init__(self, vocab: Sequence[str] | Mapping[str, int] | str | os.PathLike) -> None:
        super().__init__(name="graph_detokenizer")
        tokens = _vocab_list(vocab)
        table = piece_table(tokens)
        self.vocab_size = len(tokens)
        self._text = tf.constant(table["text"].tolist(), tf.string)
        self._spaced_text = tf.constant([" " + text for text in table["text"]], tf.string)
        self._spaced = tf.constant(table["spaced"])
        self._writes = tf.constant([bool(text) for text in table["text"]])  # an empty text keeps the last character
        self._ends_cjk = tf.constant(table["ends_cjk"])
        self._rules = decode_rules_re2()

    @tf.autograph.experimental.do_not_convert  # no Python control flow on tensors: tracing skips AutoGraph
    def detokenize(self, token_ids: tf.Tensor, lengths: tf.Tensor | None = None) -> tf.Tensor:
        """The text of each row of ids, as ``Tokenizer(vocab).decode(row[:length])`` gives it.

        Args:
            token_ids: tf.Tensor. int32 or int64 ids, shape ``[batch, T]``, each in the vocabulary up to its length
                (ids after it are not read).
            lengths: tf.Tensor. int ``[batch]``, the ids to read in each row (clipped to 0..T), or None: all T.

        Returns:
            tf.Tensor of strings, shape ``[batch]``, UTF-8.
        """
        token_ids = tf.convert_to_tensor(token_ids)
        width = tf.shape(token_ids, out_type=tf.int64)[1]
        if lengths is None:
            lengths = tf.fill(tf.shape(token_ids, out_type=tf.int64)[:1], width)
        lengths = tf.clip_by_value(tf.cast(lengths, tf.int64), 0, width)
        rows = tf.RaggedTensor.from_tensor(token_ids, lengths=lengths)
        ids, row_of = tf.cast(rows.flat_values, tf.int32), rows.value_rowids()
        writes = tf.gather(self._writes, ids)
        written = tf.cumsum(tf.cast(writes, tf.int64), exclusive=True)  # writing tokens before each, in the batch
        total = tf.reduce_sum(tf.cast(writes, tf.int64), keepdims=True)
        at_row_start = tf.gather(tf.concat([written, total], 0), rows.row_starts())  # valid for empty rows too
        in_row = written - tf.gather(at_row_start, row_of)
        ends = tf.concat([[False], tf.boolean_mask(tf.gather(self._ends_cjk, ids), writes)], 0)
        after_cjk = (in_row > 0) & tf.gather(ends, written)  # the last writing token before, in the row, ends CJK
        spaced = tf.gather(self._spaced, ids) & ~after_cjk
        pieces = tf.where(spaced, tf.gather(self._spaced_text, ids), tf.gather(self._text, ids))
        text = tf.strings.reduce_join(rows.with_flat_values(pieces), axis=1)
        for pattern, rewrite in self._rules:
            text = tf.strings.regex_replace(text, pattern, rewrite)
        return text
