"""SentencePiece's tokenizer with bert4keras's interface and ids: `SpTokenizer`, for T5, mT5 and the other models
whose vocabulary is a SentencePiece ``.model`` file.

:class:`SpTokenizer` gives the tokens, ids, truncation and decoded text of bert4keras 0.11.5's ``SpTokenizer`` on
the same ``.model`` (``tests/text/test_sentencepiece.py`` checks this against bert4keras itself): the pieces are
SentencePiece's own (its normalization is stored in the model), each piece's id its id in the model, a piece the
model lacks its unknown id, and the start and end tokens added around them as bert4keras adds them. T5's scripts
build it as ``SpTokenizer(spm_path, token_start=None, token_end="</s>")``.

`load_model` reads the file once and names it in a `kerasbert.errors.ConfigError` where it is missing or is not a
SentencePiece model; `kerasbert.serving.graph_sentencepiece` runs the same model inside a TensorFlow graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence

import sentencepiece as spm

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.text.token_ids import refuse_bools
from kerasbert.text.tokenizer import _pair_lengths

MODEL_HINT = "pass the .model file SentencePiece wrote (the checkpoint's spiece.model), not the .vocab beside it"


def load_model(path: str | os.PathLike) -> spm.SentencePieceProcessor:
    """The SentencePiece model in ``path``; a ConfigError naming the file where it is missing or is not one.

    Example:
    >>> load_model("/no/such/spiece.model")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/such/spiece.model: expected a SentencePiece .model file, found no such file. \
pass the .model file SentencePiece wrote (the checkpoint's spiece.model), not the .vocab beside it
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        found = "a folder" if os.path.isdir(path) else "no such file"
        raise fail(ConfigError, path, "a SentencePiece .model file", found, MODEL_HINT)
    with open(path, "rb") as f:
        data = f.read()
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(data)
    except RuntimeError:  # bytes that are no ModelProto, or one without the pieces a model needs
        raise fail(ConfigError, path, "a SentencePiece model (a serialized ModelProto)",
                   f"{len(data)} bytes starting {data[:24]!r}, which sentencepiece cannot load", MODEL_HINT) from None
    if processor.pad_id() < 0:  # bert4keras reads the padding piece of the model; T5's and mT5's have one at id 0
        raise fail(ConfigError, path, "a SentencePiece model with a padding piece (pad_id >= 0, as T5's and mT5's)",
                   "pad_id = -1", "train the model with pad_id=0 (SentencePieceTrainer's --pad_id)")
    return processor


def truncated(first: list, second: list | None, maxlen: int, index: int) -> tuple[list, list | None]:
    """``first`` and ``second`` cut to ``maxlen`` items together as bert4keras's ``truncate_sequences`` cuts them:
    one item at a time from the longer (the first on a tie), the item at ``index`` each time.

    Example:
    >>> truncated(["S", "a", "b", "c", "E"], ["S", "x", "E"], 5, -2)
    (['S', 'E'], ['S', 'x', 'E'])
    >>> truncated(["S", "a", "b", "E"], None, 3, 1)
    (['S', 'b', 'E'], None)
    """
    if second is None:
        return _cut(first, min(len(first), maxlen), index), None
    first_length, second_length = _pair_lengths(len(first), len(second), maxlen)
    return _cut(first, first_length, index), _cut(second, second_length, index)


def _cut(items: list, length: int, index: int) -> list:
    """``items`` cut to ``length`` by removing the item at ``index`` (from the end where negative) again and again."""
    if len(items) <= length:
        return list(items)
    if index < 0:
        tail = -index - 1  # the items after the removed one, which stay
        return items[:max(length - tail, 0)] + items[len(items) - tail:]
    return items[:index] + items[len(items) - max(length - index, 0):]


class SpTokenizer:
    """bert4keras's ``SpTokenizer``: a SentencePiece model's pieces and ids, between a start and an end token.

    Args:
        sp_model_path: str. the SentencePiece ``.model`` file (T5's and mT5's ``spiece.model``).
        token_start: str or None. the token put first (bert4keras's default ``"[CLS]"``; T5: None). A token the
            model lacks has the unknown id.
        token_end: str or None. the token put last (T5: ``"</s>"``).
        pre_tokenize: callable or None. ``text -> words``, joined by spaces before SentencePiece reads them.
        token_translate: dict or None. ``{piece: token}`` put in place of pieces after tokenizing, undone by
            ``decode``.

    ``_token_start_id`` and ``_token_end_id`` are None where the token is None (bert4keras leaves them unset).

    Example:
    >>> import os, random, tempfile
    >>> import sentencepiece as spm
    >>> rng, prefix = random.Random(0), os.path.join(tempfile.mkdtemp(), "spiece")
    >>> lines = [" ".join(rng.choice(["the", "news", "title", "新闻", "标题", "生成"]) for _ in range(8))
    ...          for _ in range(200)]
    >>> spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=24,
    ...                                pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2)
    >>> tokenizer = SpTokenizer(prefix + ".model", token_start=None, token_end="</s>")
    >>> tokenizer.tokenize("news title")
    ['▁news', '▁title', '</s>']
    >>> token_ids, segment_ids = tokenizer.encode("news title 新闻", maxlen=3)
    >>> tokenizer.ids_to_tokens(token_ids), tokenizer.decode(token_ids)
    (['▁news', '▁title', '</s>'], 'news title')
    >>> tokenizer._token_pad_id, tokenizer._token_end_id, tokenizer._token_start_id
    (0, 1, None)
    """

    def __init__(self, sp_model_path: str | os.PathLike, token_start: str | None = "[CLS]",
                 token_end: str | None = "[SEP]", pre_tokenize: Callable[[str], Iterable[str]] | None = None,
                 token_translate: Mapping[str, str] | None = None) -> None:
        if pre_tokenize is not None and not callable(pre_tokenize):
            raise fail(ConfigError, "pre_tokenize", "a function from a text to its words (jieba_words)",
                       repr(pre_tokenize))
        self.sp_model = load_model(sp_model_path)
        self._token_start, self._token_end, self._token_mask = token_start, token_end, "[MASK]"
        self._pre_tokenize = pre_tokenize
        self._token_translate = dict(token_translate or {})
        self._token_translate_inv = {token: piece for piece, token in self._token_translate.items()}
        self._token_pad = self.sp_model.id_to_piece(self.sp_model.pad_id())
        self._token_unk = self.sp_model.id_to_piece(self.sp_model.unk_id())
        self._vocab_size = self.sp_model.get_piece_size()
        self._token_pad_id, self._token_unk_id, self._token_mask_id, self._token_start_id, self._token_end_id = (
            None if token is None else self.sp_model.piece_to_id(token) for token in
            (self._token_pad, self._token_unk, self._token_mask, token_start, token_end))

    @property
    def vocab_size(self) -> int:
        """The number of pieces in the model."""
        return self._vocab_size

    def token_to_id(self, token: str) -> int:
        """The id of ``token``; the unknown id for a piece the model lacks."""
        return self.sp_model.piece_to_id(token)

    def id_to_token(self, i: int) -> str:
        """The piece of id ``i``; ``""`` for an id past the model's pieces, as bert4keras gives."""
        if i < 0:
            raise fail(DataError, "ids", f"ids from 0 to {self._vocab_size - 1}", str(i))
        return self.sp_model.id_to_piece(i) if i < self._vocab_size else ""

    def tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        """``token_to_id`` of each token."""
        return [self.token_to_id(token) for token in tokens]

    def ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """``id_to_token`` of each id; a DataError for a bool, which Python would read as the id 0 or 1."""
        refuse_bools(ids, "ids")
        return [self.id_to_token(int(i)) for i in ids]

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """SentencePiece's pieces of ``text`` between the start and end tokens, cut to ``maxlen`` before the end."""
        tokens = [self._token_translate.get(piece) or piece for piece in self._pieces(text)]
        tokens = ([self._token_start] if self._token_start is not None else []) + tokens + (
            [self._token_end] if self._token_end is not None else [])
        if maxlen is None:
            return tokens
        return truncated(tokens, None, self._maxlen(maxlen), -int(self._token_end is not None) - 1)[0]

    def encode(self, first_text: str | Sequence[str], second_text: str | Sequence[str] | None = None,
               maxlen: int | None = None, pattern: str = "S*E*E",
               truncate_from: str | int = "right") -> tuple[list[int], list[int]]:
        """Token ids and segment ids of one text or a pair, as bert4keras's ``SpTokenizer.encode``.

        Args:
            first_text: str or list of str. a text, or its tokens (start and end tokens included).
            second_text: str or list of str. the second text of a pair (segment 1), or None.
            maxlen: int. the most ids; the longer sequence loses tokens one at a time.
            pattern: str. ``"S*E*E"``: the second text loses its start token (and the pair its budget counts it).
            truncate_from: str or int. ``"right"`` (before the end token), ``"left"`` (after the start token) or
                the index of the token removed each time.

        Returns:
            ``(token_ids, segment_ids)``, two lists of int.
        """
        first = self.tokenize(first_text) if isinstance(first_text, str) else list(first_text)
        second = None if second_text is None else (
            self.tokenize(second_text) if isinstance(second_text, str) else list(second_text))
        paired = second is not None and pattern == "S*E*E"
        if maxlen is not None:
            first, second = truncated(first, second, self._maxlen(maxlen) + paired, self._index(truncate_from))
        token_ids = self.tokens_to_ids(first)
        segment_ids = [0] * len(token_ids)
        if second is not None:
            second_ids = self.tokens_to_ids(second[int(bool(self._token_start)):] if paired else second)
            token_ids, segment_ids = token_ids + second_ids, segment_ids + [1] * len(second_ids)
        return token_ids, segment_ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` as SentencePiece decodes their pieces (control pieces such as ``</s>`` drop out)."""
        tokens = [self._token_translate_inv.get(token) or token for token in self.ids_to_tokens(ids)]
        return self.sp_model.decode_pieces(tokens)

    def _pieces(self, text: str) -> list[str]:
        """SentencePiece's pieces of ``text``, its ``pre_tokenize`` words joined by spaces first."""
        if self._pre_tokenize is not None:
            text = " ".join(self._pre_tokenize(text))
        return self.sp_model.encode_as_pieces(text)

    def _index(self, truncate_from: str | int) -> int:
        """The index of the token ``encode`` removes each time, as bert4keras reads ``truncate_from``."""
        if truncate_from == "right":
            return -int(self._token_end is not None) - 1
        if truncate_from == "left":
            return int(self._token_start is not None)
        if isinstance(truncate_from, int) and not isinstance(truncate_from, bool):
            return truncate_from
        raise fail(ConfigError, "truncate_from", '"right", "left" or an int index', repr(truncate_from))

    @staticmethod
    def _maxlen(maxlen: int) -> int:
        if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1:
            raise fail(ConfigError, "maxlen", "an int >= 1", repr(maxlen))
        return maxlen
