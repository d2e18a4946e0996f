"""BERT's WordPiece tokenizer with bert4keras's interface and ids, its word pieces found by the Rust ``tokenizers``.

:class:`Tokenizer` gives the ids bert4keras 0.11.5's ``Tokenizer`` gives (``tests/text/test_tokenizer.py`` checks
this against bert4keras itself): Chinese characters one per token, accents stripped when lower-casing, control
characters dropped, unknown words ``[UNK]``, and a pair truncated from the end of the longer sequence.
`kerasbert.text.normalization.normalize` (re-exported here, with `normalize_character`) prepares the text with
Python's own Unicode tables, as bert4keras does; the Rust ``WordPiece`` model splits the words. ``encode_batch``
runs its batch encoder, the fast path.

``load_vocab`` reads a BERT ``vocab.txt`` and can shrink it the way bert4keras does: drop the multi-character
pieces that hold a CJK character or a punctuation mark (the BERT tokenizer splits those characters apart, so such
pieces can never be produced), and return ``keep_tokens`` to pass to ``build_transformer_model``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from tokenizers import Encoding
from tokenizers import Tokenizer as _RustTokenizer
from tokenizers.models import WordPiece
from tokenizers.pre_tokenizers import WhitespaceSplit

from kerasbert.errors import ConfigError, fail
from kerasbert.text import cuts
from kerasbert.text.decoding import decode_tokens, is_cjk, is_punctuation, is_special
from kerasbert.text.normalization import normalize, normalize_character, rematch_character
from kerasbert.text.pre_tokenize import PreTokenized
from kerasbert.text.tokenizer_base import BaseTokenizer, pad_ids  # noqa: F401 (pad_ids: imported from here)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
BATCH_CHUNK = 1024  # texts per Rust call in encode_batch
WORD_MAXLEN = 200  # bert4keras's word_maxlen: a longer word is one [UNK]


def is_redundant(token: str) -> bool:
    """A piece the tokenizer can never produce: longer than one character and holding CJK or punctuation."""
    stem = token[2:] if token.startswith("##") else token
    return len(token) > 1 and any(is_cjk(ch) or is_punctuation(ch) for ch in stem)


def load_vocab(
    path: str | os.PathLike, simplified: bool = False, startswith: Sequence[str] | None = None, encoding: str = "utf-8"
) -> dict[str, int] | tuple[dict[str, int], list[int]]:
    """Read ``vocab.txt`` (one token per line) into ``{token: id}``, optionally shrunk.

    Args:
        path: str. the vocabulary file.
        simplified: bool. drop redundant pieces and also return ``keep_tokens``.
        startswith: list of str. tokens put first in the shrunk vocabulary (e.g. [PAD], [UNK], [CLS], [SEP]).
        encoding: str. the file's text encoding (a UTF-8 byte-order mark is skipped).

    Returns:
        ``token_dict``, or ``(token_dict, keep_tokens)`` when ``simplified``, as bert4keras returns them.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "中", "国", "中国", "##国", "hello"]
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write(chr(10).join(tokens))
    >>> token_dict, keep_tokens = load_vocab(path, simplified=True, startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    >>> list(token_dict), keep_tokens
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '中', '国', 'hello'], [0, 1, 2, 3, 4, 5, 8])

    Then ``build_transformer_model(config, checkpoint, keep_tokens=keep_tokens)`` keeps those rows.
    """
    path = os.fspath(path)
    if os.path.isdir(path):  # a checkpoint folder (Google or Hugging Face) holds its vocab.txt
        path = os.path.join(path, "vocab.txt")
    token_dict = _read_vocab(path, encoding)
    if not simplified:
        return token_dict
    new_dict: dict[str, int] = {}
    keep_tokens: list[int] = []
    for token in startswith or []:
        if token not in token_dict:
            raise fail(ConfigError, f"{path}: startswith", "tokens of the vocabulary", repr(token))
        new_dict[token] = len(new_dict)
        keep_tokens.append(token_dict[token])
    for token, index in sorted(token_dict.items(), key=lambda item: item[1]):
        if token not in new_dict and not is_redundant(token):
            new_dict[token] = len(new_dict)
            keep_tokens.append(index)
    return new_dict, keep_tokens


def _read_vocab(path: str, encoding: str = "utf-8") -> dict[str, int]:
    """``{token: line index}`` of a vocab.txt; a ConfigError for a missing, empty, undecodable or duplicated one."""
    if not os.path.isfile(path):
        raise fail(ConfigError, path, "a vocab.txt file", "no such file")
    token_dict: dict[str, int] = {}
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 and encoding.lower() in ("utf-8", "utf8") else encoding)
            except UnicodeDecodeError:
                raise fail(ConfigError, f"{path}:{number}", f"{encoding} text", f"the bytes {raw.strip()[:16]!r}",
                           "convert the file to UTF-8, or pass its encoding") from None
            token = line.split()[0] if line.split() else line.strip()
            if token in token_dict:
                raise fail(ConfigError, path, "each token once (a token's id is its line)",
                           f"{token!r} on line {token_dict[token] + 1} and line {number}")
            token_dict[token] = len(token_dict)
    if not token_dict:
        raise fail(ConfigError, path, "one token a line", "an empty file", "pass the vocab.txt of the checkpoint")
    return token_dict


def _pair_lengths(first: int, second: int, budget: int) -> tuple[int, int]:
    """Lengths after cutting one token at a time from the longer sequence (the first on a tie)."""
    excess = first + second - budget
    if excess <= 0:
        return first, second
    if first >= second:
        cut = min(excess, first - second)
        first -= cut
    else:
        cut = min(excess, second - first)
        second -= cut
    rest = excess - cut  # both equal now: cuts alternate, the first sequence first
    return first - (rest + 1) // 2, second - rest // 2


def _cut(ids: list, length: int, kept: int = 1) -> list:
    """Keep ``length`` ids, cutting before the last ``kept`` (the end token [SEP]; none without one) as bert4keras
    pops index -2 (-1)."""
    return ids if len(ids) <= length else ids[:max(length - kept, 0)] + ids[len(ids) - kept:]


def folder_lower_case(path: str | os.PathLike) -> bool:
    """``do_lower_case`` from the ``tokenizer_config.json`` in a folder or beside a vocabulary (Hugging Face
    folders have one); True when there is none.

    Example:
    >>> folder_lower_case("/no/such/folder/vocab.txt")
    True
    """
    path = os.fspath(path)
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    config = os.path.join(folder, "tokenizer_config.json")
    if not os.path.isfile(config):
        return True
    try:
        with open(config, encoding="utf-8") as f:
            value = json.load(f).get("do_lower_case", True)
    except (ValueError, AttributeError):
        raise fail(ConfigError, config, "a JSON object", "something else") from None
    if not isinstance(value, bool):
        raise fail(ConfigError, f"{config}: do_lower_case", "true or false", repr(value))
    return value


class Tokenizer(BaseTokenizer):
    """BERT's WordPiece tokenizer with bert4keras's interface and ids, running on Rust ``tokenizers``.

    Args:
        vocab_path_or_token_dict: str or dict. a BERT ``vocab.txt``, a checkpoint folder holding one (Google or
            Hugging Face), or ``{token: id}`` (e.g. from ``load_vocab(..., simplified=True)``). It must hold
            [PAD], [UNK], [CLS] and [SEP].
        do_lower_case: bool or None. lower-case and strip accents (uncased and Chinese BERT models). None: the
            ``do_lower_case`` of the folder's ``tokenizer_config.json`` when it has one, else True.
        pre_tokenize: callable or None. ``text -> words``, first, as bert4keras's (`kerasbert.text.pre_tokenize`).
        token_start: str or None. the token before each text (``[CLS]``); None: none, as GPT's tokenizers.
        token_end: str or None. the token after each text (``[SEP]``); None: none.

    Example:
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "中", "国", "hello", "##s", ","]
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(tokens)})
    >>> tokenizer.tokenize("Héllos, 中国!")
    ['[CLS]', 'hello', '##s', ',', '中', '国', '!', '[SEP]']
    >>> tokenizer.encode("中国", "hellos", maxlen=5)
    ([2, 4, 3, 6, 3], [0, 0, 0, 1, 1])
    >>> tokenizer.rematch("Héllos, 中国!", tokenizer.tokenize("Héllos, 中国!"))
    [[], [0, 1, 2, 3, 4], [5], [6], [8], [9], [10], []]
    >>> tokenizer.decode([2, 6, 7, 8, 4, 5, 3])
    'hellos, 中国'
    """

    def __init__(self, vocab_path_or_token_dict: str | os.PathLike | Mapping[str, int],
                 do_lower_case: bool | None = None, pre_tokenize: Callable[[str], Iterable[str]] | None = None,
                 token_start: str | None = "[CLS]", token_end: str | None = "[SEP]") -> None:
        if isinstance(vocab_path_or_token_dict, Mapping):
            where, token_dict = "token_dict", dict(vocab_path_or_token_dict)
        else:
            where, token_dict = os.fspath(vocab_path_or_token_dict), load_vocab(vocab_path_or_token_dict)
        if do_lower_case is None:
            do_lower_case = folder_lower_case(where)
        self._do_lower_case, self._token_dict = do_lower_case, token_dict
        self._normalized = functools.partial(normalize, lowercase=do_lower_case) if pre_tokenize is None else (
            PreTokenized(pre_tokenize, token_dict, do_lower_case, normalize))  # text -> words between spaces
        self._token_dict_inv = {index: token for token, index in token_dict.items()}
        self._token_start, self._token_end = token_start, token_end
        self._keep_special_ids(where, token_dict)
        self._rust_unk_id = token_dict.get(SPECIAL_TOKENS[1])  # the id the word pieces give an unknown word
        self._rust = _RustTokenizer(WordPiece(token_dict, unk_token="[UNK]", max_input_chars_per_word=WORD_MAXLEN))
        self._rust.pre_tokenizer = WhitespaceSplit()  # the input is `normalize`d: words are between spaces
        self._parted = pre_tokenize is None  # a text cut as `kerasbert.text.cuts` cuts keeps its pieces

    def _keep_special_ids(self, where: str, token_dict: dict[str, int]) -> None:
        """The ids of [PAD], [UNK], the start and end tokens and [MASK]; a ConfigError naming ``where`` when
        ``token_dict`` lacks one of the first four (a vocab.txt that is not a BERT checkpoint's)."""
        missing = [token for token in (*SPECIAL_TOKENS[:2], self._token_start, self._token_end)
                   if token is not None and token not in token_dict]
        if missing:
            raise fail(ConfigError, where, "a vocabulary with " + ", ".join(
                [*SPECIAL_TOKENS[:2], *(t for t in (self._token_start, self._token_end) if t is not None)]),
                       "no " + ", ".join(missing), "add the missing tokens, or pass the vocab.txt of the checkpoint")
        self._token_pad_id, self._token_unk_id = token_dict[SPECIAL_TOKENS[0]], token_dict[SPECIAL_TOKENS[1]]
        self._token_start_id, self._token_end_id = (None if t is None else token_dict[t] for t in (
            self._token_start, self._token_end))
        self._token_mask_id = token_dict.get("[MASK]")

    @property
    def vocab_size(self) -> int:
        """The number of tokens in the vocabulary."""
        return len(self._token_dict)

    def token_to_id(self, token: str) -> int:
        """The id of ``token``; the id of [UNK] for a token outside the vocabulary."""
        return self._token_dict.get(token, self._token_unk_id)

    def _token_of(self, index: int) -> str:
        return self._token_dict_inv[index]

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """Word pieces of ``text`` between [CLS] and [SEP], cut to ``maxlen`` before [SEP].

        An unknown word stays whole (normalized), as bert4keras keeps it, so that ``rematch`` finds it;
        ``token_to_id`` maps it to [UNK]. With ``maxlen`` only as much of a long text is read as the cut keeps.
        """
        tokens = []
        for normalized, encoding in self._encodings(text, maxlen):
            tokens += [normalized[start:end] if index == self._rust_unk_id else token for token, index, (start, end)
                       in zip(encoding.tokens, encoding.ids, encoding.offsets, strict=True)]
        tokens = self._wrapped(tokens, self._token_start, self._token_end)
        return tokens if maxlen is None else _cut(tokens, maxlen, self._token_end is not None)

    def truncate(self, token_ids: Sequence[int], segment_ids: Sequence[int],
                 maxlen: int) -> tuple[list[int], list[int]]:
        """Cut an untruncated ``encode`` result to ``maxlen`` exactly as ``encode(..., maxlen)`` cuts it.

        Lets a pipeline encode once without ``maxlen``, count the rows that are too long, then cut them.

        Example:
        >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
        >>> tokenizer.truncate(*tokenizer.encode("a a a", "b b"), maxlen=5)
        ([2, 4, 3, 5, 3], [0, 0, 0, 1, 1])
        """
        first = [index for index, segment in zip(token_ids, segment_ids, strict=True) if segment == 0]
        second = [index for index, segment in zip(token_ids, segment_ids, strict=True) if segment != 0]
        start = [] if self._token_start_id is None else [self._token_start_id]
        return self._assemble(list(first), [*start, *second] if second else None, maxlen)

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
        """Word-piece ids of each word of already split sentences (CoNLL tokens), batched in Rust.

        A word that normalizes to nothing (a control or zero-width character) gets ``[UNK]``, so
        every word keeps a piece to carry its label.

        Example:
        >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "ab", "##c"])})
        >>> tokenizer.encode_words([["abc", "\u200b", "ab"]])
        [[[4, 5], [1], [4]]]
        """
        sentences = [[normalize(word, self._do_lower_case) for word in words] for words in sentences]
        result = []
        for i in range(0, len(sentences), BATCH_CHUNK):
            chunk = sentences[i:i + BATCH_CHUNK]
            encodings = self._rust.encode_batch(chunk, is_pretokenized=True, add_special_tokens=False)
            for words, encoding in zip(chunk, encodings, strict=True):
                pieces: list[list[int]] = [[] for _ in words]
                for index, word in zip(encoding.ids, encoding.word_ids, strict=True):
                    pieces[word].append(index)
                result.append([word or [self._token_unk_id] for word in pieces])
        return result

    def split_words(self, text: str) -> list[tuple[int, int]]:
        """Character offsets ``(start, end)`` of the words BERT sees in raw ``text``.

        A word is what gets its own word pieces: each CJK character, each punctuation mark, each
        run of other characters between spaces. Used to tag raw text (NER prediction).

        Example:
        >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])})
        >>> text = "Héllo, 北京!"
        >>> [text[a:b] for a, b in tokenizer.split_words(text)]
        ['Héllo', ',', '北', '京', '!']
        """
        pieces = [normalize(ch, self._do_lower_case) for ch in text]
        source = [i for i, piece in enumerate(pieces) for _ in piece]  # the character each output one came from
        return [(source[word.start()], source[word.end() - 1] + 1) for word in re.finditer(r"\S+", "".join(pieces))]

    def decode(self, ids: Sequence[int], tokens: Sequence[str] | None = None) -> str:
        """Readable text of ``ids`` (special tokens dropped, ## pieces joined), as bert4keras decodes."""
        return decode_tokens(tokens or self.ids_to_tokens(ids))

    def rematch(self, text: str, tokens: Sequence[str]) -> list[list[int]]:
        """The character positions in ``text`` of each token ([] for [CLS], [SEP] and other specials).

        Example:
        >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "ab", "##c"])})
        >>> tokenizer.rematch("ABc", ["[CLS]", "ab", "##c", "[SEP]"])
        [[], [0, 1], [2], []]
        """
        if self._do_lower_case:
            text = text.lower()
        normalized, positions = [], []
        for i, ch in enumerate(text):
            ch = rematch_character(ch, self._do_lower_case)
            normalized.append(ch)
            positions.extend([i] * len(ch))
        normalized_text, mapping, offset = "".join(normalized), [], 0
        for token in tokens:
            if is_special(token):
                mapping.append([])
                continue
            stem = token[2:] if token[:2] == "##" else token
            start = normalized_text.index(stem, offset)
            offset = start + len(stem)
            mapping.append(positions[start:offset])
        return mapping

    def _full_ids(self, text: str | Sequence[str], most: int | None = None) -> list[int]:
        """Ids of a text between [CLS] and [SEP] (its first ``most`` pieces and more, or all); of tokens as they are."""
        if not isinstance(text, str):
            return self.tokens_to_ids(text)
        ids = [index for _, encoding in self._encodings(text, most) for index in encoding.ids]
        return self._wrapped(ids, self._token_start_id, self._token_end_id)

    def _encodings(self, text: str, most: int | None = None) -> Iterator[tuple[str, Encoding]]:
        """Each part of ``text`` (`kerasbert.text.cuts.parts`) normalized, with its encoding, until the parts hold
        more than ``most`` word pieces: the Rust tokenizer reads a long text one part at a time."""
        found = 0
        for part in cuts.parts(text, normalize_character, self._do_lower_case) if self._parted else [text]:
            normalized = self._normalized(part)
            encoding = self._rust.encode(normalized, add_special_tokens=False)
            yield normalized, encoding
            found += len(encoding.ids)
            if most is not None and found > most:
                return

    def _batch_ids(self, texts: list[str], most: int | None) -> list[list[int]]:
        """`_full_ids` of each text: the short ones batched in Rust, in bounded chunks (faster than one huge call)."""
        rows: list = [None] * len(texts)
        short = [i for i, text in enumerate(texts) if not self._parted or len(text) <= cuts.PART_CHARS]
        for begin in range(0, len(short), BATCH_CHUNK):
            chunk = short[begin:begin + BATCH_CHUNK]
            encodings = self._rust.encode_batch_fast([self._normalized(texts[i]) for i in chunk],
                                                     add_special_tokens=False)
            for i, encoding in zip(chunk, encodings, strict=True):
                rows[i] = self._wrapped(encoding.ids, self._token_start_id, self._token_end_id)
        return [self._full_ids(text, most) if row is None else row for row, text in zip(rows, texts, strict=True)]

    def _wrap(self, pieces: list[int]) -> list[int]:
        return self._wrapped(pieces, self._token_start_id, self._token_end_id)

    @staticmethod
    def _wrapped(items: Sequence, start, end) -> list:
        """``items`` between the start and end tokens (or ids), each left out where None."""
        return [*([] if start is None else [start]), *items, *([] if end is None else [end])]

    def _assemble(self, first: list[int], second: list[int] | None, maxlen: int | None) -> tuple[list[int], list[int]]:
        """Truncate as bert4keras does and join a pair; the second sequence loses its [CLS]."""
        if maxlen is not None and maxlen < 1:
            raise fail(ConfigError, "maxlen", "an int >= 1", str(maxlen))
        kept = self._token_end_id is not None
        if second is None:
            token_ids = first if maxlen is None else _cut(first, maxlen, kept)
            return token_ids, [0] * len(token_ids)
        if maxlen is not None:
            first_length, second_length = _pair_lengths(len(first), len(second), maxlen + 1)
            first, second = _cut(first, first_length, kept), _cut(second, second_length, kept)
        second = second[self._token_start_id is not None:]
        return first + second, [0] * len(first) + [1] * len(second)
