"""``bert4keras.tokenizers`` -> ``kerasbert.compat.tokenizers``: every public name of bert4keras 0.11.5's module.

`Tokenizer` is `kerasbert.text.tokenizer.Tokenizer` (its Rust word pieces) with bert4keras's constructor and
``encode`` arguments; `SpTokenizer` is `kerasbert.text.sentencepiece.SpTokenizer`; `TokenizerBase` is bert4keras's
template for a tokenizer of one's own; `load_vocab` and `save_vocab` take bert4keras's argument names.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence

from tokenizers.models import WordPiece

from kerasbert.errors import ConfigError, fail
from kerasbert.text import tokenizer as _tokenizer
from kerasbert.text.sentencepiece import SpTokenizer, truncated

__all__ = ["SpTokenizer", "Tokenizer", "TokenizerBase", "load_vocab", "save_vocab"]


def load_vocab(dict_path: str | os.PathLike, encoding: str = "utf-8", simplified: bool = False,
               startswith: Sequence[str] | None = None):
    """`kerasbert.text.tokenizer.load_vocab` with bert4keras's arguments in its order, so that
    ``load_vocab(dict_path=dict_path, simplified=True, startswith=[...])`` ports unchanged.

    Args:
        dict_path: str. the vocab.txt (or a checkpoint folder holding one).
        encoding: str. the file's text encoding.
        simplified: bool. drop the pieces the tokenizer never produces and also return ``keep_tokens``.
        startswith: list of str. tokens put first in the shrunk vocabulary.

    Example:
    >>> import os, tempfile
    >>> dict_path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> with open(dict_path, "w", encoding="utf-8") as f:
    ...     _ = f.write(chr(10).join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "中", "中国"]))
    >>> load_vocab(dict_path=dict_path, simplified=True, startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    ({'[PAD]': 0, '[UNK]': 1, '[CLS]': 2, '[SEP]': 3, '中': 4}, [0, 1, 2, 3, 5])
    """
    return _tokenizer.load_vocab(dict_path, simplified=simplified, startswith=startswith, encoding=encoding)


def save_vocab(dict_path: str | os.PathLike, token_dict: Mapping[str, int], encoding: str = "utf-8") -> None:
    """Write ``token_dict`` (a shrunk one from ``load_vocab(..., simplified=True)``, say) as a vocab.txt: its
    tokens in the order of their ids, one a line.

    Example:
    >>> import os, tempfile
    >>> dict_path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> save_vocab(dict_path, {"[PAD]": 0, "中": 2, "[UNK]": 1})
    >>> open(dict_path, encoding="utf-8").read().split()
    ['[PAD]', '[UNK]', '中']
    """
    with open(dict_path, "w", encoding=encoding) as f:
        f.writelines(token + "\n" for token, _ in sorted(token_dict.items(), key=lambda item: item[1]))


class TokenizerBase:
    """bert4keras's tokenizer template: subclass it and write ``_tokenize(text)``, ``token_to_id``,
    ``id_to_token`` and ``decode``; ``tokenize``, ``tokens_to_ids``, ``ids_to_tokens`` and ``encode`` (a pair,
    ``maxlen``, ``pattern``, ``truncate_from``) then work as bert4keras's do.

    Args:
        token_start: str or None. the token put first ([CLS]); None: none.
        token_end: str or None. the token put last ([SEP]); None: none.
        pre_tokenize: callable or None. ``text -> words``, for ``_tokenize`` to use.
        token_translate: dict or None. ``{token: replacement}`` applied to ``_tokenize``'s tokens.

    Example:
    >>> class Characters(TokenizerBase):
    ...     def _tokenize(self, text):
    ...         return list(text)
    ...     def token_to_id(self, token):
    ...         return ord(token) if len(token) == 1 else {"[CLS]": 1, "[SEP]": 2}[token]
    >>> Characters().encode("ab", "cd", maxlen=5)
    ([1, 97, 2, 99, 2], [0, 0, 0, 1, 1])
    """

    encode = SpTokenizer.encode  # the same bert4keras rules for pairs, maxlen, pattern and truncate_from
    _index = SpTokenizer._index
    _maxlen = staticmethod(SpTokenizer._maxlen)

    def __init__(self, token_start: str | None = "[CLS]", token_end: str | None = "[SEP]",
                 pre_tokenize: Callable[[str], Iterable[str]] | None = None,
                 token_translate: Mapping[str, str] | None = None) -> None:
        self._token_pad, self._token_unk, self._token_mask = "[PAD]", "[UNK]", "[MASK]"
        self._token_start, self._token_end, self._pre_tokenize = token_start, token_end, pre_tokenize
        self._token_translate = dict(token_translate or {})
        self._token_translate_inv = {token: piece for piece, token in self._token_translate.items()}

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """``_tokenize``'s tokens (translated) between the start and end tokens, cut to ``maxlen`` before the end."""
        tokens = [self._token_translate.get(token) or token for token in self._tokenize(text)]
        tokens = [self._token_start] * (self._token_start is not None) + tokens + [self._token_end] * (
            self._token_end is not None)
        if maxlen is None:
            return tokens
        return truncated(tokens, None, self._maxlen(maxlen), -int(self._token_end is not None) - 1)[0]

    def tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.token_to_id(token) for token in tokens]

    def ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.id_to_token(i) for i in ids]

    def token_to_id(self, token: str) -> int:
        raise NotImplementedError(f"{type(self).__name__}.token_to_id: a TokenizerBase subclass defines it")

    def id_to_token(self, i: int) -> str:
        raise NotImplementedError(f"{type(self).__name__}.id_to_token: a TokenizerBase subclass defines it")

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError(f"{type(self).__name__}.decode: a TokenizerBase subclass defines it")

    def _tokenize(self, text: str) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__}._tokenize: a TokenizerBase subclass defines it")


class Tokenizer(_tokenizer.Tokenizer, TokenizerBase):
    """bert4keras's ``Tokenizer``: `kerasbert.text.tokenizer.Tokenizer` with bert4keras's arguments and defaults.

    Args:
        token_dict: str or dict. a vocab.txt, or ``{token: id}``. As in bert4keras it need not hold [UNK], [CLS]
            or [SEP] (kerasbert's own `kerasbert.text.tokenizer.Tokenizer` asks for a checkpoint's vocabulary):
            a token it lacks takes ``tokenizer._token_unk_id``, which a script then sets.
        do_lower_case: bool. lower-case and strip accents (default False, as bert4keras).
        word_maxlen: int. a word longer than this many characters is one unknown token.
        token_start, token_end: str or None. the tokens around each text ([CLS], [SEP]); None: none.
        pre_tokenize: callable or None. ``text -> words``; a word of the vocabulary is then one token.
        token_translate: dict or None. ``{token: replacement}`` applied to the word pieces (``tokenize`` and
            ``encode``).

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])},
    ...                       token_translate={"b": "a"})
    >>> tokenizer.tokenize("A b"), tokenizer.encode("a b", "b", maxlen=4, truncate_from="left")
    (['[CLS]', 'A', 'a', '[SEP]'], ([2, 3, 4, 3], [0, 0, 1, 1]))
    >>> moves = Tokenizer({"[PAD]": 0, "h": 1, "2": 2})  # no [UNK], [CLS] or [SEP], as the chess example's
    >>> moves._token_unk_id = 0
    >>> moves.encode("h 2 x")
    ([0, 1, 2, 0, 0], [0, 0, 0, 0, 0])
    """

    def __init__(self, token_dict: str | os.PathLike | Mapping[str, int], do_lower_case: bool = False,
                 word_maxlen: int = _tokenizer.WORD_MAXLEN, token_start: str | None = "[CLS]",
                 token_end: str | None = "[SEP]", pre_tokenize: Callable[[str], Iterable[str]] | None = None,
                 token_translate: Mapping[str, str] | None = None) -> None:
        if isinstance(word_maxlen, bool) or not isinstance(word_maxlen, int) or word_maxlen < 1:
            raise fail(ConfigError, "Tokenizer: word_maxlen", "an int >= 1", repr(word_maxlen))
        self._word_maxlen = word_maxlen
        super().__init__(token_dict, do_lower_case, pre_tokenize, token_start, token_end)
        self._pre_tokenize, self._token_mask = pre_tokenize, "[MASK]"
        self._token_pad, self._token_unk = _tokenizer.SPECIAL_TOKENS[:2]
        self._token_translate = dict(token_translate or {})
        self._token_translate_inv = {token: piece for piece, token in self._token_translate.items()}
        self._vocab_size = len(self._token_dict)
        self._word_pieces()

    def _keep_special_ids(self, where: str, token_dict: dict[str, int]) -> None:
        """The ids of the special tokens ``token_dict`` holds, None for the others: bert4keras needs none of them
        (a vocabulary of its own, as the chess example's, may lack [UNK], [CLS] and [SEP])."""
        self._token_pad_id, self._token_mask_id = token_dict.get("[PAD]"), token_dict.get("[MASK]")
        self._unk_id = token_dict.get("[UNK]")

    @property
    def _token_unk_id(self) -> int | None:
        """The id of a token outside the vocabulary: [UNK]'s, or what a script sets (bert4keras's examples set
        ``tokenizer._token_unk_id`` where the vocabulary has no [UNK])."""
        return self._unk_id

    @_token_unk_id.setter
    def _token_unk_id(self, index: int | None) -> None:
        self._unk_id = index
        self._word_pieces()

    @property
    def _token_start_id(self) -> int | None:
        """``token_to_id(token_start)`` (the unknown id where the vocabulary lacks it); None without a start token."""
        return None if self._token_start is None else self.token_to_id(self._token_start)

    @property
    def _token_end_id(self) -> int | None:
        """``token_to_id(token_end)``, as `_token_start_id`."""
        return None if self._token_end is None else self.token_to_id(self._token_end)

    def _word_pieces(self) -> None:
        """The Rust word pieces over the vocabulary: a word longer than ``word_maxlen`` characters is unknown, and an
        unknown word gets `_token_unk_id` (while that is None, an id outside the vocabulary, which ``tokenize`` shows
        as the word itself and ``token_to_id`` refuses, as bert4keras's does)."""
        unk = self._unk_id if self._unk_id is not None else max(self._token_dict.values(), default=-1) + 1
        if unk == self._rust_unk_id and self._word_maxlen == _tokenizer.WORD_MAXLEN:
            return  # the word pieces kerasbert's Tokenizer built
        self._rust.model = WordPiece({**self._token_dict, "[UNK]": unk}, unk_token="[UNK]",
                                     max_input_chars_per_word=self._word_maxlen)
        self._rust_unk_id = unk

    def token_to_id(self, token: str) -> int:
        """The id of ``token``; `_token_unk_id` for a token outside the vocabulary (a ConfigError while None)."""
        index = self._token_dict.get(token, self._unk_id)
        if index is None:
            raise fail(ConfigError, "Tokenizer: _token_unk_id", f"the id of tokens outside token_dict, such as "
                       f"{token!r}", "None (token_dict has no [UNK])", "set tokenizer._token_unk_id, as "
                       "bert4keras's examples do")
        return index

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """The word pieces of ``text`` (translated) between [CLS] and [SEP], cut to ``maxlen`` before [SEP]."""
        tokens = super().tokenize(text, maxlen)
        if not self._token_translate:
            return tokens
        inner = slice(int(self._token_start is not None), len(tokens) - int(self._token_end is not None))
        tokens[inner] = [self._token_translate.get(token) or token for token in tokens[inner]]
        return tokens

    def encode(self, first_text: str | Sequence[str], second_text: str | Sequence[str] | None = None,
               maxlen: int | None = None, pattern: str = "S*E*E",
               truncate_from: str | int = "right") -> tuple[list[int], list[int]]:
        """Token ids and segment ids of a text or a pair, as bert4keras's ``encode``; the arguments as
        `kerasbert.text.sentencepiece.SpTokenizer.encode` takes them (the Rust path where they are the defaults)."""
        if pattern == "S*E*E" and truncate_from == "right" and not self._token_translate and (
                self._unk_id is not None):
            return super().encode(first_text, second_text, maxlen)  # the Rust path
        return TokenizerBase.encode(self, first_text, second_text, maxlen, pattern, truncate_from)

    @staticmethod
    def stem(token: str) -> str:
        """``token`` without its leading ``##``."""
        return token[2:] if token[:2] == "##" else token
