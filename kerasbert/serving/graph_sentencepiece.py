"""SentencePiece's tokenizer as TensorFlow ops: raw text to `SpTokenizer`'s ids inside a graph, and ids back to text.

A SavedModel of a T5 or mT5 model that takes raw text tokenizes in its graph, where TF Serving runs TensorFlow and
tensorflow-text ops only. :class:`GraphSpTokenizer` runs ``tf_text.SentencepieceTokenizer`` on the bytes of the
same ``.model`` that `kerasbert.text.sentencepiece.SpTokenizer` reads, so the normalization and the pieces are the
model's own, then adds the start and end tokens and cuts long rows as ``SpTokenizer.encode(..., maxlen)`` does
(its default ``truncate_from="right"``). ``SpTokenizer``'s ids are those of the pieces it reads back; they differ
from SentencePiece's ids only where a run of characters the model lacks spells one of its control pieces.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.errors import ConfigError, fail
from kerasbert.serving.graph_text import _pair_lengths
from kerasbert.text.sentencepiece import SpTokenizer


def _kept(rows: tf.RaggedTensor, keep: tf.Tensor, tail: int) -> tf.RaggedTensor:
    """Each row of ``rows`` cut to ``keep`` items: its first ``keep - tail`` and its last ``tail``."""
    position = tf.ragged.range(keep)  # [batch, (keep)]
    row, at = position.value_rowids(), position.flat_values
    kept, full = tf.gather(keep, row), tf.gather(rows.row_lengths(), row)
    source = tf.where(at < kept - tail, at, full - kept + at)  # the index of each kept item in its row
    return position.with_flat_values(tf.gather(rows.flat_values, tf.gather(rows.row_starts(), row) + source))


class GraphSpTokenizer(tf.Module):
    """``SpTokenizer.encode`` in TensorFlow ops, from the tokenizer's own SentencePiece model.

    Runs eagerly, in ``tf.function`` and in a SavedModel loaded where kerasbert is not installed (it needs
    ``import tensorflow_text`` there, for the SentencePiece op).

    Args:
        tokenizer: SpTokenizer. its model, start and end tokens; without ``pre_tokenize`` or ``token_translate``,
            which run in Python.
        maxlen: int. the most ids per row, start and end tokens included; longer texts are cut as
            ``tokenizer.encode(..., maxlen=maxlen)`` cuts them.

    Example:
    >>> import os, tempfile
    >>> import sentencepiece as spm
    >>> corpus = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> with open(corpus, "w", encoding="utf-8") as f:  # a BPE model with T5's special ids, for the example
    ...     _ = f.write(chr(10).join(f"新闻标题 {'生成摘要'[i % 4:]} the news title {i % 9}" for i in range(300)))
    >>> spm.SentencePieceTrainer.train(input=corpus, model_prefix=corpus[:-4], model_type="bpe", vocab_size=30,
    ...                                pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2)
    >>> tokenizer = SpTokenizer(corpus[:-4] + ".model", token_start=None, token_end="</s>")
    >>> graph = GraphSpTokenizer(tokenizer, maxlen=6)
    >>> texts = ["news", "新闻标题 the news 7"]
    >>> out = graph.tokenize(tf.constant(texts))
    >>> out["lengths"].numpy().tolist()
    [6, 6]
    >>> out["token_ids"].numpy().tolist() == [ids + [0] * (6 - len(ids)) for ids, _ in
    ...                                        (tokenizer.encode(text, maxlen=6) for text in texts)]
    True
    >>> [text.decode() for text in graph.detokenize(out["token_ids"], out["lengths"]).numpy()] == [
    ...     tokenizer.decode(tokenizer.encode(text, maxlen=6)[0]) for text in texts]
    True
    """

    def __init__(self, tokenizer: SpTokenizer, maxlen: int) -> None:
        super().__init__(name="graph_sp_tokenizer")
        if not isinstance(maxlen, int) or isinstance(maxlen, bool) or maxlen < 1:
            raise fail(ConfigError, "maxlen", "an int >= 1", repr(maxlen))
        for name in ("_pre_tokenize", "_token_translate"):
            if getattr(tokenizer, name):
                raise fail(ConfigError, f"SpTokenizer's {name[1:]}", "None (the graph runs SentencePiece alone)",
                           repr(getattr(tokenizer, name)), "tokenize in Python with SpTokenizer.encode")
        self.maxlen, self.vocab_size = maxlen, tokenizer.vocab_size
        self._start, self._end, self._pad = tokenizer._token_start_id, tokenizer._token_end_id, tokenizer._token_pad_id
        self._second_drops = int(bool(tokenizer._token_start))  # a pair's second text loses its start token
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=tokenizer.sp_model.serialized_model_proto(),
                                                            out_type=tf.int32)

    @tf.autograph.experimental.do_not_convert  # no Python control flow on tensors: tracing skips AutoGraph
    def tokenize(self, texts: tf.Tensor, texts_b: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        """``token_ids``, ``segment_ids`` (int32 ``[batch, seq]``, padded with the model's padding id and 0) and
        ``lengths`` (int32 ``[batch]``) of the UTF-8 strings ``texts`` ``[batch]``, and of the pairs they make with
        ``texts_b`` (segment 1) where given, as `kerasbert.serving.graph_text.GraphTokenizer.tokenize` gives them
        without the character offsets."""
        rows = [self._full(tf.convert_to_tensor(text, tf.string)) for text in (texts, texts_b) if text is not None]
        lengths = [row.row_lengths() for row in rows]
        keep = [tf.minimum(lengths[0], self.maxlen)] if len(rows) == 1 else _pair_lengths(*lengths, self.maxlen + 1)
        tail = int(self._end is not None)  # the end token stays; the tokens before it go
        rows = [_kept(row, n, tail) for row, n in zip(rows, keep, strict=True)]
        if len(rows) == 2:
            rows[1] = rows[1][:, self._second_drops:]
        segments = [tf.ones_like(row) * i for i, row in enumerate(rows)]
        token_ids, segment_ids = tf.concat(rows, axis=1), tf.concat(segments, axis=1)
        return {"token_ids": token_ids.to_tensor(self._pad), "segment_ids": segment_ids.to_tensor(0),
                "lengths": tf.cast(token_ids.row_lengths(), tf.int32)}

    @tf.autograph.experimental.do_not_convert
    def detokenize(self, token_ids: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
        """The text of each row of ids, as ``SpTokenizer.decode(row[:length])`` gives it: SentencePiece's decoding
        (control pieces such as ``</s>`` write nothing), an id past the model's pieces dropped.

        Args:
            token_ids: tf.Tensor. int ids ``[batch, T]``.
            lengths: tf.Tensor. int ``[batch]``, the ids to read in each row (clipped to 0..T).

        Returns:
            tf.Tensor of strings, shape ``[batch]``, UTF-8.
        """
        token_ids = tf.cast(token_ids, tf.int32)
        width = tf.shape(token_ids, out_type=tf.int64)[1]
        rows = tf.RaggedTensor.from_tensor(token_ids, lengths=tf.clip_by_value(tf.cast(lengths, tf.int64), 0, width))
        known = tf.ragged.boolean_mask(rows, rows < self.vocab_size)  # SpTokenizer reads such an id as ""
        return self.sentencepiece.detokenize(known)

    def _full(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Each text's pieces between the start and end tokens, uncut: ``[batch, (ids)]``, int64 row lengths."""
        pieces = self.sentencepiece.tokenize(texts)
        batch = tf.shape(texts, out_type=tf.int64)[:1]
        ends = [tf.RaggedTensor.from_tensor(tf.fill(tf.concat([batch, [1]], 0), token))
                for token in (self._start, self._end) if token is not None]
        parts = ([ends.pop(0)] if self._start is not None else []) + [pieces] + ends
        return tf.concat([part.with_row_splits_dtype(tf.int64) for part in parts], axis=1)
