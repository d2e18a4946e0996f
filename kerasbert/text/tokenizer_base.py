"""What kerasbert's tokenizers share: ids to tokens and back, ``encode`` and ``encode_batch`` over a tokenizer's own
pieces and row layout, and rows of ids padded with the tokenizer's padding id.

`kerasbert.text.tokenizer.Tokenizer` (BERT's ``vocab.txt``) and `kerasbert.text.hf_tokenizer.HfTokenizer` (a
Hugging Face ``tokenizer.json``) subclass `BaseTokenizer`: each gives the pieces of a text (``_full_ids``,
``_batch_ids``), the row a text or a pair makes of them, cut to ``maxlen`` (``_assemble``), and the token of an id
(``_token_of``). Code that takes "a tokenizer" (the tasks, `kerasbert.text.pipeline`, the server) reads the ids
of its special tokens from the same attributes on both: ``_token_pad_id``, ``_token_unk_id``, ``_token_start_id``,
``_token_end_id``, ``_token_mask_id``. `pad_id_of` is the id a row of a tokenizer's ids is padded with: [PAD]'s
0 in BERT's vocabularies, ``<pad>``'s 1 in RoBERTa's and XLM-R's, ``[PAD]``'s 50283 in ModernBERT's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kerasbert.errors import ConfigError, fail
from kerasbert.text.token_ids import refuse_bools

__all__ = ["BaseTokenizer", "pad_id_of", "pad_ids"]

PADDINGS = (False, True, "longest", "max_length")  # encode_batch's padding modes


def pad_ids(rows: Sequence[Sequence[int]], length: int | None = None, multiple: int = 1,
            pad_id: int = 0) -> np.ndarray:
    """Rows of ids as one int32 array, right-padded with ``pad_id`` (0: BERT's [PAD]; `pad_id_of` a tokenizer's)
    to ``length`` (default: the longest row), rounded up to ``multiple``.

    Example:
    >>> pad_ids([[2, 5, 3], [2, 3]], multiple=4).tolist()
    [[2, 5, 3, 0], [2, 3, 0, 0]]
    >>> pad_ids([[0, 5, 2], [0, 2]], pad_id=1).tolist()
    [[0, 5, 2], [0, 2, 1]]
    """
    length = max(map(len, rows), default=0) if length is None else length
    array = np.full((len(rows), -(-length // multiple) * multiple), pad_id, np.int32)
    for i, row in enumerate(rows):
        array[i, :len(row)] = row
    return array


def pad_id_of(tokenizer) -> int:
    """The id that pads a row of ``tokenizer``'s ids: its padding token's (``_token_pad_id``), 0 where it has none
    (a vocabulary without [PAD]) or ``tokenizer`` is None.

    Example:
    >>> from kerasbert.text.tokenizer import Tokenizer
    >>> pad_id_of(Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])})), pad_id_of(None)
    (0, 0)
    """
    index = getattr(tokenizer, "_token_pad_id", None)
    return 0 if index is None else int(index)


def check_padding(padding: bool | str, maxlen: int | None) -> None:
    """A ConfigError for an ``encode_batch`` padding mode that is none of `PADDINGS`, or ``"max_length"`` without
    ``maxlen``."""
    if padding not in PADDINGS or (padding == "max_length" and maxlen is None):
        raise fail(ConfigError, "encode_batch: padding", 'False, True, "longest" or "max_length" with maxlen',
                   repr(padding) + (" without maxlen" if padding == "max_length" else ""))


class BaseTokenizer:
    """The interface kerasbert's tasks use of a tokenizer, over a subclass's pieces and rows (see the module)."""

    _token_pad_id: int | None = None
    _token_unk_id: int | None = None
    _token_start_id: int | None = None
    _token_end_id: int | None = None
    _token_mask_id: int | None = None

    @property
    def vocab_size(self) -> int:
        """The number of tokens in the vocabulary."""
        raise NotImplementedError

    @property
    def pad_id(self) -> int:
        """The id a row of this tokenizer's ids is padded with (`pad_id_of`)."""
        return pad_id_of(self)

    def token_to_id(self, token: str) -> int:
        """The id of ``token`` (a subclass's vocabulary)."""
        raise NotImplementedError

    def _token_of(self, index: int) -> str:
        """The token of id ``index``; ``KeyError`` outside the vocabulary."""
        raise NotImplementedError

    def id_to_token(self, index: int) -> str:
        """The token of id ``index`` (``KeyError`` outside the vocabulary)."""
        return self.ids_to_tokens([index])[0]

    def tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        """``token_to_id`` of each token."""
        return [self.token_to_id(token) for token in tokens]

    def ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """``id_to_token`` of each id; a DataError for a bool, which Python would read as the id 0 or 1."""
        refuse_bools(ids, "ids")
        return [self._token_of(index) for index in ids]

    def encode(self, first: str | Sequence[str], second: str | Sequence[str] | None = None,
               maxlen: int | None = None) -> tuple[list[int], list[int]]:
        """Token ids and segment ids of one text or a pair, as bert4keras's ``Tokenizer.encode``.

        Args:
            first: str or list of str. a text, or tokens already with the start and end tokens ([CLS], [SEP]).
            second: str or list of str. the second text of a pair, or None.
            maxlen: int. the most ids; the longer sequence loses tokens from its end, before the end token.

        Returns:
            ``(token_ids, segment_ids)``, two lists of int.
        """
        most = None if maxlen is None else maxlen + 1  # enough pieces to cut a row or a pair as whole texts cut
        ids = self._full_ids(first, most)
        return self._assemble(ids, None if second is None else self._full_ids(second, most), maxlen)

    def encode_batch(self, firsts: Sequence[str], seconds: Sequence[str] | None = None, maxlen: int | None = None,
                     padding: bool | str = False, most_pieces: int | None = None,
                     ) -> tuple[list[list[int]], list[list[int]]] | tuple[np.ndarray, ...]:
        """``encode`` of many texts (or pairs) at once with the Rust batch encoder: the fast path.

        Args:
            firsts: list of str. the texts.
            seconds: list of str or None. the second texts of pairs.
            maxlen: int or None. the most ids of a row, cut as ``encode`` cuts.
            padding: bool or str. False: one unpadded list per row. True or ``"longest"``: two int32 arrays
                ``[rows, longest row]``, the token ids padded with the tokenizer's padding id (`pad_id_of`: 0, [PAD],
                in BERT vocabularies; the id the model masks) and the segment ids with 0, ready for
                ``model.predict`` (Hugging Face's ``padding=True``, bert4keras's ``sequence_padding``).
                ``"max_length"``: arrays ``[rows, maxlen]``.
            most_pieces: int or None. the most pieces of a text read (a long text's rest is not tokenized).

        Returns:
            ``(token_ids, segment_ids)``: two lists with one list of int per row, or two arrays.

        Example:
        >>> from kerasbert.text.tokenizer import Tokenizer
        >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
        >>> tokenizer.encode_batch(["a b", "b"], ["a", "a a a"], maxlen=5)
        ([[2, 4, 3, 4, 3], [2, 5, 3, 4, 3]], [[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]])
        >>> token_ids, segment_ids = tokenizer.encode_batch(["a b", "b"], padding=True)
        >>> token_ids.tolist(), token_ids.dtype.name
        ([[2, 4, 5, 3], [2, 5, 3, 0]], 'int32')
        """
        check_padding(padding, maxlen)
        texts = list(firsts) + list(seconds or [])
        if seconds is not None and len(seconds) != len(firsts):
            raise fail(ConfigError, "encode_batch: seconds", f"{len(firsts)} texts, as many as firsts",
                       f"{len(seconds)} texts")
        most = most_pieces if most_pieces is not None or maxlen is None else maxlen + 1
        pieces = self._batch_ids(texts, most)
        n = len(firsts)
        pairs = zip(pieces[:n], pieces[n:] if seconds is not None else [None] * n, strict=True)
        rows = [self._assemble(first, second, maxlen) for first, second in pairs]
        token_ids, segment_ids = [row[0] for row in rows], [row[1] for row in rows]
        if not padding:
            return token_ids, segment_ids
        length = maxlen if padding == "max_length" else None
        return pad_ids(token_ids, length, pad_id=self.pad_id), pad_ids(segment_ids, length)

    def pair_row(self, first: Sequence[int], second: Sequence[int]) -> tuple[list[int], list[int], int]:
        """The row of a pair of texts' pieces (no special tokens), uncut: ``(token_ids, segment_ids, start)``,
        ``start`` the position of the second text's first piece.

        Example:
        >>> from kerasbert.text.tokenizer import Tokenizer
        >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
        >>> tokenizer.pair_row([4], [5, 5])
        ([2, 4, 3, 5, 5, 3], [0, 0, 0, 1, 1, 1], 3)
        """
        token_ids, segment_ids = self._join(list(first), list(second))
        start = self._join(list(first), [-1])[0].index(-1)  # where a one-piece second text stands
        return token_ids, segment_ids, start

    def _join(self, first: list[int], second: list[int] | None) -> tuple[list[int], list[int]]:
        """The uncut row of pieces: ``_assemble`` without ``maxlen``."""
        return self._assemble(self._wrap(first), None if second is None else self._wrap(second), None)

    def _wrap(self, pieces: list[int]) -> list[int]:
        """What ``_full_ids`` gives for a text of ``pieces``."""
        return pieces

    def _full_ids(self, text: str | Sequence[str], most: int | None = None) -> list[int]:
        raise NotImplementedError

    def _batch_ids(self, texts: list[str], most: int | None) -> list[list[int]]:
        raise NotImplementedError

    def _assemble(self, first: list[int], second: list[int] | None, maxlen: int | None) -> tuple[list[int], list[int]]:
        raise NotImplementedError
