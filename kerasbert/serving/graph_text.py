"""BERT's tokenizer as TensorFlow ops: raw text to kerasbert's token ids and character offsets in the graph.

A SavedModel that takes raw text must tokenize without kerasbert (TF Serving loads TensorFlow and
tensorflow-text ops only), so :class:`GraphTokenizer` redoes :class:`kerasbert.text.tokenizer.Tokenizer` in
graph ops and gives the same ids. Its normalization is data, not code: at construction it asks the reference
(`kerasbert.text.tokenizer.normalize`, Python's Unicode tables) what each of the 1,112,064 Unicode scalar values
becomes, then stores the answers as sorted code point ranges that ``tf.searchsorted`` reads. The graph thus
agrees with the reference for every character, whatever Unicode version the graph's own ops know; a space in
the normalized text ends a word. ``tf_text.FastWordpieceTokenizer`` then splits each word into pieces.

Offsets count code points of the input itself; ``Tokenizer.rematch`` counts in ``text.lower()``, which is one
longer for each 'İ'. Known differences in ids, both outside real text: the reference's NFD reorders runs of
combining characters that it does not strip (spacing marks with a combining class, in lower-case mode) by
combining class, where the graph keeps their order; and invalid UTF-8, which Python strings cannot hold, is read
as one U+FFFD (dropped) per bad sequence.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.errors import ConfigError, fail
from kerasbert.text.tokenizer import SPECIAL_TOKENS, WORD_MAXLEN, load_vocab, normalize_character

KEEP, DROP, PAD, SPELL = 0, 1, 2, 3  # a character normalizes to itself, nothing, " c ", or a spelled-out string
PLAIN, IGNORABLE, CASED = 0, 1, 2  # Python's Final_Sigma context: case-ignorable and cased characters
CAPITAL_SIGMA = 0x3A3
NO_OFFSET = -1  # the start and end of [CLS], [SEP] and padding
SCALARS = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF])


def _ranges(values: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sorted starts of the runs of equal rows in ``(values, *columns)`` over all code points, and each run's row."""
    full = np.zeros((1 + len(columns), 0x110000), np.int32)
    full[:, SCALARS] = np.stack([values, *columns])
    change = np.concatenate([[True], (full[:, 1:] != full[:, :-1]).any(axis=0)])
    starts = np.flatnonzero(change).astype(np.int32)
    return (starts, *full[:, starts])


@functools.lru_cache(maxsize=2)
def _normalization(lowercase: bool) -> dict[str, np.ndarray]:
    """What `normalize_character` makes of each character, as ranges of kinds (``starts``, ``kinds``,
    ``deltas``) and the spelled-out strings (``spelled``, ``spelled_splits``); the first two are a capital
    sigma's, not final and final (Python's ``str.lower`` decides by the context, `_sigma_context`)."""
    chars = [chr(c) for c in SCALARS]
    outs = [normalize_character(ch, lowercase) for ch in chars]
    spelled = [normalize_character("\u03c3", lowercase), normalize_character("\u03c2", lowercase)]
    kind, entry = np.full(len(chars), KEEP, np.int32), SCALARS.astype(np.int32)  # entry - code point: 0
    for i in [i for i, (ch, out) in enumerate(zip(chars, outs, strict=True)) if out != ch]:
        kind[i] = DROP if not outs[i] else PAD if outs[i] == f" {chars[i]} " else SPELL
        if kind[i] == SPELL:
            entry[i] = len(spelled)
            spelled.append(outs[i])
    starts, kinds, deltas = _ranges(kind, entry - SCALARS)  # consecutive spellings share a run
    codes = [[ord(ch) for ch in out] for out in spelled]
    return {"starts": starts, "kinds": kinds, "deltas": deltas,
            "spelled": np.array([c for code in codes for c in code], np.int32),
            "spelled_splits": np.cumsum([0] + [len(code) for code in codes]).astype(np.int32)}


@functools.lru_cache(maxsize=1)
def _sigma_context() -> tuple[np.ndarray, np.ndarray]:
    """Each character's part in Python's Final_Sigma rule (CASED, IGNORABLE or PLAIN), as ranges.

    ``"!"`` is neither cased nor case-ignorable: after ``"!" + x`` a sigma is final only when x is cased and not
    ignorable; after ``"!A" + x`` when x is cased or ignorable.
    """
    chars = [chr(c) if c != ord("!") else "?" for c in SCALARS]  # "!" separates the probes; it is PLAIN as "?" is
    alone = "".join(f"!{ch}\u03a3" for ch in chars).lower().split("!")[1:]
    after_a = "".join(f"!A{ch}\u03a3" for ch in chars).lower().split("!")[1:]
    cased = np.array([out.endswith("\u03c2") for out in alone])
    either = np.array([out.endswith("\u03c2") for out in after_a])
    return _ranges(np.where(cased, CASED, np.where(either, IGNORABLE, PLAIN)))


def _lookup(starts: tf.Tensor, column: tf.Tensor, chars: tf.Tensor) -> tf.Tensor:
    """The row of the range table (``starts``, ``column``) holding each code point of ``chars``."""
    return tf.gather(column, tf.searchsorted(starts, chars, side="right") - 1)


def _vocab_list(vocab: Sequence[str] | Mapping[str, int] | str | os.PathLike) -> list[str]:
    """Tokens in id order from a list, a ``{token: id}`` mapping or a vocab.txt (or a folder holding one)."""
    if isinstance(vocab, str | os.PathLike):
        vocab = load_vocab(vocab)
    if isinstance(vocab, Mapping):
        tokens = sorted(vocab, key=vocab.__getitem__)
        if [vocab[token] for token in tokens] != list(range(len(tokens))):
            raise fail(ConfigError, "vocab", "ids 0, 1, ... n-1", "gaps or repeats", "pass the tokens as a list")
        vocab = tokens
    if len(set(vocab)) != len(vocab):
        repeated = sorted({token for token in vocab if vocab.count(token) > 1})[:3]
        raise fail(ConfigError, "vocab", "each token once", "repeated tokens: " + ", ".join(map(repr, repeated)))
    missing = [token for token in SPECIAL_TOKENS if token not in vocab]
    if missing:
        raise fail(ConfigError, "vocab", "a vocabulary with " + ", ".join(SPECIAL_TOKENS), "no " + ", ".join(missing))
    return list(vocab)


def _spread(counts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """For ``counts[i]`` items of each owner i, in order: each item's owner and its index among its owner's."""
    owner = tf.repeat(tf.range(tf.size(counts, counts.dtype)), counts)
    return owner, tf.range(tf.size(owner, counts.dtype)) - tf.gather(tf.cumsum(counts, exclusive=True), owner)


def _pair_lengths(first: tf.Tensor, second: tf.Tensor, budget: int) -> tuple[tf.Tensor, tf.Tensor]:
    """``kerasbert.text.tokenizer._pair_lengths`` on a batch: cut the longer sequence, then both in turn."""
    excess = tf.maximum(first + second - budget, 0)
    cut_first = tf.where(first >= second, tf.minimum(excess, first - second), 0)
    cut_second = tf.where(first >= second, tf.zeros_like(excess), tf.minimum(excess, second - first))
    rest = excess - cut_first - cut_second
    return first - cut_first - (rest + 1) // 2, second - cut_second - rest // 2


class GraphTokenizer(tf.Module):
    """kerasbert's ``Tokenizer.encode`` in TensorFlow ops, with each piece's character span in the input.

    Runs eagerly, in ``tf.function`` and in a SavedModel loaded where kerasbert is not installed (it needs
    ``import tensorflow_text`` there, for the word-piece op). Building one takes a few seconds, the first time
    in a process for each ``lowercase``: it probes the reference normalizer on every Unicode character.

    Args:
        vocab: list of str, dict or str. the tokens in id order, ``{token: id}``, or a BERT ``vocab.txt`` (or a
            folder holding one). It must hold [PAD], [UNK], [CLS] and [SEP].
        lowercase: bool. lower-case and strip accents, as ``Tokenizer(..., do_lower_case=True)``.
        maxlen: int. the most pieces per row, [CLS] and [SEP] included; longer texts are cut as
            ``Tokenizer.encode(..., maxlen=maxlen)`` cuts them.

    Example:
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##s", ",", "中", "国", "!"]
    >>> tokenizer = GraphTokenizer(tokens, lowercase=True, maxlen=16)
    >>> out = tokenizer.tokenize(tf.constant(["Héllos, 中国!", "HELLO"]))
    >>> out["token_ids"].numpy().tolist()
    [[2, 4, 5, 6, 7, 8, 9, 3], [2, 4, 3, 0, 0, 0, 0, 0]]
    >>> out["starts"][0].numpy().tolist(), out["ends"][0].numpy().tolist()
    ([-1, 0, 5, 6, 8, 9, 10, -1], [-1, 5, 6, 7, 9, 10, 11, -1])
    >>> tokenizer.tokenize(tf.constant(["中国"]), tf.constant(["hellos"]))["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1, 1]]
    """

    def __init__(self, vocab: Sequence[str] | Mapping[str, int] | str | os.PathLike, lowercase: bool,
                 maxlen: int) -> None:
        super().__init__(name="graph_tokenizer")
        if not isinstance(maxlen, int) or maxlen < 1:
            raise fail(ConfigError, "maxlen", "an int >= 1", repr(maxlen))
        tokens = _vocab_list(vocab)
        self.lowercase, self.maxlen, self.vocab_size = bool(lowercase), maxlen, len(tokens)
        self._unk, self._cls, self._sep = (tokens.index(token) for token in SPECIAL_TOKENS[1:])
        self._tables = dict(_normalization(self.lowercase))
        if self.lowercase:
            self._tables.update(zip(("context_starts", "contexts"), _sigma_context(), strict=True))
        # A word of more than WORD_MAXLEN characters is [UNK]; the op's byte limit must not cut shorter words.
        self.wordpiece = tf_text.FastWordpieceTokenizer(vocab=tokens, token_out_type=tf.int32, unknown_token="[UNK]",
                                                        no_pretokenization=True, max_bytes_per_word=4 * WORD_MAXLEN)

    @tf.autograph.experimental.do_not_convert  # no Python control flow on tensors: tracing skips AutoGraph
    def tokenize(self, texts: tf.Tensor, texts_b: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        """Ids of a batch of texts (or of text pairs), padded to the batch's longest row.

        Args:
            texts: tf.Tensor. strings, shape ``[batch]``, UTF-8.
            texts_b: tf.Tensor. the second texts of pairs (segment 1), shape ``[batch]``, or None.

        Returns:
            dict of int32 tensors: ``token_ids`` and ``segment_ids`` ``[batch, seq]`` (padded with 0),
            ``lengths`` ``[batch]`` (ids before the padding), ``starts`` and ``ends`` ``[batch, seq]``: each
            piece's span in its own text, in characters (code points), ``end`` exclusive; -1 for [CLS], [SEP]
            and padding. A piece cut from the middle of a character (a decomposed Hangul syllable) spans it.
        """
        parts = [self._pieces(tf.convert_to_tensor(text, tf.string)) for text in (texts, texts_b) if text is not None]
        full = [part["count"] + 2 for part in parts]  # [CLS] pieces [SEP]
        keep = [tf.minimum(full[0], self.maxlen)] if len(parts) == 1 else _pair_lengths(*full, self.maxlen + 1)
        taken = [keep[0], *(n - 1 for n in keep[1:])]  # the second text loses its [CLS]
        row, position = _spread(tf.add_n(taken))
        first = tf.gather(taken[0], row)
        segment = tf.cast(position >= first, tf.int32)
        index = (position, position - first + 1)[:len(parts)]  # in each text's [CLS] pieces [SEP]
        items = [self._items(part, row, i, tf.gather(n, row), tf.gather(m, row))
                 for part, i, n, m in zip(parts, index, keep, full, strict=True)]
        out = {name: tf.where(segment > 0, items[-1][name], items[0][name]) for name in items[0]}
        out["segment_ids"] = segment
        dense = {name: tf.RaggedTensor.from_value_rowids(value, row, tf.size(texts, tf.int64), validate=False)
                 .to_tensor(NO_OFFSET if name in ("starts", "ends") else 0) for name, value in out.items()}
        return {**dense, "lengths": tf.cast(tf.add_n(taken), tf.int32)}

    @tf.autograph.experimental.do_not_convert
    def pieces(self, texts: tf.Tensor) -> dict[str, tf.Tensor]:
        """Every word piece of a batch of texts, uncut (``maxlen`` does not apply), for texts split into windows
        (`kerasbert.serving.graph_windows`): ``token_ids``, ``starts`` and ``ends`` (as `tokenize` gives them) flat
        in text order, and ``count`` ``[batch]`` (int64), the pieces of each text.

        Example:
        >>> tokenizer = GraphTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "中", "国"], lowercase=True, maxlen=3)
        >>> out = tokenizer.pieces(tf.constant(["中国中", "国"]))
        >>> out["token_ids"].numpy().tolist(), out["count"].numpy().tolist()
        ([4, 5, 4, 5], [3, 1])
        """
        return self._pieces(tf.convert_to_tensor(texts, tf.string))

    def _items(self, part: dict[str, tf.Tensor], row: tf.Tensor, index: tf.Tensor, keep: tf.Tensor,
               full: tf.Tensor) -> dict[str, tf.Tensor]:
        """Item ``index`` of each row of a text cut to ``keep`` of its ``full`` items ([CLS] pieces [SEP]): the
        first ``keep - 1`` and the last, as ``Tokenizer`` cuts them."""
        index = tf.where(index < keep - 1, index, full - 1)
        inner = (index > 0) & (index < full - 1)
        at = tf.gather(tf.cumsum(part["count"], exclusive=True), row) + index - 1

        def pick(values: tf.Tensor, otherwise: int) -> tf.Tensor:
            padded = tf.concat([values, [otherwise]], 0)
            return tf.gather(padded, tf.where(inner, at, tf.size(values, tf.int64)))

        return {"token_ids": tf.where(tf.equal(index, 0), self._cls, pick(part["token_ids"], self._sep)),
                "starts": pick(part["starts"], NO_OFFSET), "ends": pick(part["ends"], NO_OFFSET)}

    def _normalized(self, texts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The normalized code points of a batch, the input position (flat) of each and the input's code points."""
        t = {name: tf.constant(value) for name, value in self._tables.items()}
        codes = tf.strings.unicode_decode(texts, "UTF-8", errors="replace")
        chars, rows = codes.flat_values, codes.value_rowids()
        kind = _lookup(t["starts"], t["kinds"], chars)
        entry = chars + _lookup(t["starts"], t["deltas"], chars)
        if self.lowercase:  # a capital sigma: final or not by its context, as Python's lower() decides
            is_sigma = tf.equal(chars, CAPITAL_SIGMA)
            kind = tf.where(is_sigma, SPELL, kind)
            entry = tf.where(is_sigma, tf.cast(self._final_sigma(chars, rows, t), tf.int32), entry)
        entry = tf.where(tf.equal(kind, SPELL), entry, 0)
        splits = t["spelled_splits"]
        count = tf.where(tf.equal(kind, SPELL), tf.gather(splits[1:] - splits[:-1], entry),
                         tf.gather(tf.constant([1, 0, 3, 0]), kind))
        source, k = _spread(count)  # the input character of each output one
        char, kind, entry = tf.gather(chars, source), tf.gather(kind, source), tf.gather(entry, source)
        spelled = tf.gather(t["spelled"], tf.where(tf.equal(kind, SPELL), tf.gather(splits, entry) + k, 0))
        padded = tf.where(tf.equal(kind, PAD) & tf.not_equal(k, 1), ord(" "), char)
        return tf.where(tf.equal(kind, SPELL), spelled, padded), source, codes

    @staticmethod
    def _final_sigma(chars: tf.Tensor, rows: tf.Tensor, t: dict[str, tf.Tensor]) -> tf.Tensor:
        """Whether each character stands where Python's ``str.lower`` writes a final sigma: after a cased
        character and not before one, skipping case-ignorable characters."""
        context = _lookup(t["context_starts"], t["contexts"], chars)
        solid = tf.not_equal(context, IGNORABLE)
        at = tf.cast(tf.where(solid)[:, 0], tf.int32)
        seen = tf.cumsum(tf.cast(solid, tf.int32))  # solid characters up to here (inclusive)
        before, after = seen - tf.cast(solid, tf.int32) - 1, seen  # the nearest solid one each side, in `at`

        def cased(i: tf.Tensor) -> tf.Tensor:
            j = tf.gather(at, tf.clip_by_value(i, 0, tf.maximum(tf.size(at) - 1, 0)))
            inside = (i >= 0) & (i < tf.size(at))
            return inside & tf.equal(tf.gather(rows, j), rows) & tf.equal(tf.gather(context, j), CASED)

        return cased(before) & ~cased(after)

    def _pieces(self, texts: tf.Tensor) -> dict[str, tf.Tensor]:
        """Word-piece ids and character spans of a batch, flat in row order, and ``count``, pieces per row."""
        value, source, codes = self._normalized(texts)
        rows = tf.gather(codes.value_rowids(), source)
        position = source - tf.cast(tf.gather(codes.row_starts(), rows), tf.int32)  # in the text, in characters
        keep = tf.not_equal(value, ord(" "))  # normalized, only a space ends a word
        joins = tf.concat([[False], keep[:-1] & tf.equal(rows[:-1], rows[1:])], 0)
        begins = keep & ~joins  # the first character of a word
        word = tf.boolean_mask(tf.cumsum(tf.cast(begins, tf.int64)) - 1, keep)
        value, position = tf.boolean_mask(value, keep), tf.boolean_mask(position, keep)
        words = tf.RaggedTensor.from_value_rowids(value, word, tf.reduce_sum(tf.cast(begins, tf.int64)),
                                                  validate=False)
        too_long = words.row_lengths() > WORD_MAXLEN
        ids, byte_starts, byte_ends = self.wordpiece.tokenize_with_offsets(
            tf.where(too_long, "", tf.strings.unicode_encode(words, "UTF-8")))
        byte_starts, byte_ends = (tf.cast(offsets.flat_values, tf.int32) for offsets in (byte_starts, byte_ends))
        piece_word, k = _spread(tf.where(too_long, tf.ones_like(too_long, tf.int64), ids.row_lengths()))
        flat = tf.gather(ids.row_starts(), piece_word) + k
        long_piece = tf.gather(too_long, piece_word)  # a long word is one [UNK]

        def pick(values: tf.Tensor, otherwise: tf.Tensor) -> tf.Tensor:
            padded = tf.concat([values, [0]], 0)  # a valid index when every word is too long
            return tf.where(long_piece, otherwise, tf.gather(padded, tf.where(long_piece, tf.zeros_like(flat), flat)))

        # byte offsets within a word -> the characters of the word -> their positions in the text
        utf8 = 1 + sum(tf.cast(value >= bound, tf.int32) for bound in (0x80, 0x800, 0x10000))
        char_byte = tf.cumsum(utf8, exclusive=True)
        base = tf.gather(tf.gather(char_byte, words.row_starts()), piece_word)
        word_bytes = tf.gather(tf.math.segment_sum(utf8, word), piece_word)
        first = tf.searchsorted(char_byte, base + pick(byte_starts, tf.zeros_like(base)), side="right") - 1
        last = tf.searchsorted(char_byte, base + pick(byte_ends, word_bytes), side="left") - 1
        piece_row = tf.gather(tf.boolean_mask(rows, begins), piece_word)
        return {"token_ids": pick(ids.flat_values, tf.fill(tf.shape(base), self._unk)),
                "starts": tf.gather(position, first), "ends": tf.gather(position, last) + 1,
                "count": tf.math.unsorted_segment_sum(tf.ones_like(piece_row), piece_row, codes.nrows())}
