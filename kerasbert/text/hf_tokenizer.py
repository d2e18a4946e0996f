"""A Hugging Face ``tokenizer.json`` with the interface kerasbert's tasks use of a tokenizer: `HfTokenizer`.

RoBERTa's byte-level BPE, XLM-R's and DeBERTa-v3's Unigram and ModernBERT's BPE come as a ``tokenizer.json``
that the Rust ``tokenizers`` library reads whole (`Tokenizer.from_file`): its normalizer, pre-tokenizer, model and
post-processor. `HfTokenizer` takes a text's pieces and their character offsets from it, and lays a row out as
its post-processor does (RoBERTa's and XLM-R's ``<s> A </s></s> B </s>``, DeBERTa-v3's and ModernBERT's
``[CLS] A [SEP] B [SEP]``, segment ids its type ids), reading the layout once from the post-processor itself; a
row too long is cut as `kerasbert.text.tokenizer.Tokenizer` cuts one (the longer text loses pieces from its end,
the special tokens stay). BERT's names of the special tokens stand for this tokenizer's own where its vocabulary
lacks them (``token_to_id("[CLS]")`` is RoBERTa's ``<s>``), so code written for BERT's rows finds them.

No TensorFlow here: the portable exports and the server use it as they are.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer as _RustTokenizer

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.text.tokenizer import BATCH_CHUNK, _pair_lengths
from kerasbert.text.tokenizer_base import BaseTokenizer

__all__ = ["TOKENIZER_FILE", "HfTokenizer", "Template", "read_template", "tokenizer_file"]

TOKENIZER_FILE = "tokenizer.json"
ROLES = ("pad", "unk", "mask")  # the special tokens read from the folder besides the post-processor's
GUESSES = {"pad": ("<pad>", "[PAD]"), "mask": ("<mask>", "[MASK]"), "unk": ("<unk>", "[UNK]")}
PROBES = ("a", "0", "x", "e", ".", "▁")  # texts one of which any vocabulary gives a piece


def tokenizer_file(path: str | os.PathLike) -> str:
    """``path`` itself, or the ``tokenizer.json`` in the folder ``path``.

    Example:
    >>> tokenizer_file("/models/xlm-roberta-base")
    '/models/xlm-roberta-base/tokenizer.json'
    """
    path = os.fspath(path)
    return path if path.endswith(".json") and not os.path.isdir(path) else os.path.join(path, TOKENIZER_FILE)


@dataclass(frozen=True)
class Template:
    """A post-processor's row layout: the special ids ``(id, type id)`` before the first text, between the texts and
    after the last, and each text's type id; a single text's row is ``before, first, after``.

    Example:
    >>> roberta = Template(((0, 0),), 0, ((2, 0), (2, 0)), 0, ((2, 0),))
    >>> roberta.row([5, 6], [7])
    ([0, 5, 6, 2, 2, 7, 2], [0, 0, 0, 0, 0, 0, 0])
    """

    before: tuple[tuple[int, int], ...]
    first_type: int
    between: tuple[tuple[int, int], ...]
    second_type: int
    after: tuple[tuple[int, int], ...]

    @property
    def specials(self) -> int:
        """The special tokens of a row."""
        return len(self.before) + len(self.between) + len(self.after)

    def row(self, first: list[int], second: list[int] | None = None) -> tuple[list[int], list[int]]:
        """``(token_ids, segment_ids)`` of the pieces of one text or two."""
        parts = [self.before, [(i, self.first_type) for i in first]]
        if second is not None:
            parts += [self.between, [(i, self.second_type) for i in second]]
        items = [item for part in (*parts, self.after) for item in part]
        return [i for i, _ in items], [t for _, t in items]


def _layout(encoding, where: str, pair: bool) -> Template:
    """The `Template` of an encoding with special tokens (its ``sequence_ids``: None on them)."""
    groups: list[list] = [[]]  # specials before, between and after the texts' pieces
    types, last = [], None
    for index, sequence, type_id in zip(encoding.ids, encoding.sequence_ids, encoding.type_ids, strict=True):
        if sequence is None:
            groups[-1].append((index, type_id))
        elif sequence != last:
            types.append(type_id)
            groups.append([])
        last = sequence
    if len(types) != 1 + pair:
        raise fail(ConfigError, f"{where}: post_processor", "a layout with each text once",
                   f"{len(types)} texts in a row of {1 + pair}")
    if not pair:
        return Template(tuple(groups[0]), types[0], (), types[0], tuple(groups[1]))
    return Template(tuple(groups[0]), types[0], tuple(groups[1]), types[1], tuple(groups[2]))


def read_template(rust: _RustTokenizer, where: str) -> tuple[Template, Template]:
    """The single and the pair `Template` of a tokenizer's post-processor (none: rows of the pieces alone), read
    from the rows it makes of a short text."""
    probe = next((text for text in PROBES if rust.encode(text, add_special_tokens=False).ids), None)
    if probe is None:
        raise fail(ConfigError, where, "a tokenizer that gives a piece of " + " or ".join(map(repr, PROBES)),
                   "none")
    return _layout(rust.encode(probe), where, False), _layout(rust.encode(probe, probe), where, True)


def _read_json(path: str) -> dict:
    """A JSON object; a ConfigError naming the file where it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise fail(ConfigError, path, "a JSON file", f"invalid JSON ({error})") from None
    if not isinstance(value, dict):
        raise fail(ConfigError, path, "a JSON object", type(value).__name__)
    return value


def _named_token(folder: str, role: str) -> str | None:
    """The ``<role>_token`` of the folder's ``special_tokens_map.json`` or ``tokenizer_config.json``, if any."""
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = os.path.join(folder, name)
        value = _read_json(path).get(f"{role}_token") if os.path.isfile(path) else None
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            return value
    return None


class HfTokenizer(BaseTokenizer):
    """A Hugging Face ``tokenizer.json`` (RoBERTa's, XLM-R's, DeBERTa-v3's, ModernBERT's) with the interface
    kerasbert's tasks use of `kerasbert.text.tokenizer.Tokenizer` (see the module).

    Args:
        path: str. a ``tokenizer.json``, or a folder holding one (its ``special_tokens_map.json`` or
            ``tokenizer_config.json`` beside it name the padding and mask tokens where the file's own padding
            does not).

    Attributes:
        model_type: str. the file's ``model.type`` lower-cased: ``"bpe"``, ``"unigram"``, ``"wordpiece"``, ...

    Example:
    >>> import os, tempfile
    >>> from tokenizers import Tokenizer, models, pre_tokenizers, processors
    >>> vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>", "hi", "there", "!"])}
    >>> rust = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    >>> rust.pre_tokenizer = pre_tokenizers.Whitespace()
    >>> rust.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> rust.save(path)
    >>> tokenizer = HfTokenizer(path)
    >>> tokenizer.encode("hi there", "hi!")
    ([0, 5, 6, 2, 2, 5, 7, 2], [0, 0, 0, 0, 0, 0, 0, 0])
    >>> tokenizer.encode("hi there there", "hi!", maxlen=7)  # the longer text loses pieces first
    ([0, 5, 2, 2, 5, 7, 2], [0, 0, 0, 0, 0, 0, 0])
    >>> tokenizer._token_pad_id, tokenizer.token_to_id("[CLS]"), tokenizer.decode([0, 5, 6, 2])
    (1, 0, 'hi there')
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = tokenizer_file(path)
        if not os.path.isfile(self.path):
            raise fail(ConfigError, self.path, "a Hugging Face tokenizer.json", "no such file")
        data = _read_json(self.path)
        try:
            self._rust = _RustTokenizer.from_str(json.dumps(data))
        except Exception as error:  # tokenizers raises a bare Exception for a file it cannot read
            raise fail(ConfigError, self.path, "a tokenizer.json the tokenizers library reads",
                       str(error).splitlines()[0]) from None
        model = data.get("model") or {}
        self.model_type = str(model.get("type", "")).lower()
        self._rust.no_padding()
        self._rust.no_truncation()
        self._vocab = self._rust.get_vocab(with_added_tokens=True)
        self._single, self._pair = read_template(self._rust, self.path)
        self._special_ids(data, model)

    def _special_ids(self, data: dict, model: dict) -> None:
        """The start and end ids (the single row's specials), and the padding, unknown and mask ids."""
        self._token_start_id = self._single.before[-1][0] if self._single.before else None
        self._token_end_id = self._single.after[0][0] if self._single.after else None
        folder = os.path.dirname(self.path)
        found = {"pad": (data.get("padding") or {}).get("pad_token"), "unk": model.get("unk_token")}
        if isinstance(model.get("unk_id"), int):  # Unigram names its unknown piece by id
            found["unk"] = self._rust.id_to_token(model["unk_id"])
        for role in ROLES:
            names = (found.get(role), _named_token(folder, role), *GUESSES[role])
            token = next((name for name in names if name is not None and name in self._vocab), None)
            setattr(self, f"_token_{role}_id", None if token is None else self._vocab[token])
        layout = (*self._pair.before, *self._pair.between, *self._pair.after, *self._single.before,
                  *self._single.after)
        self._specials = {i for i, _ in layout} | {self._token_pad_id}  # what decode leaves out
        self._aliases = {"[CLS]": self._token_start_id, "[SEP]": self._token_end_id, "[PAD]": self._token_pad_id,
                         "[UNK]": self._token_unk_id, "[MASK]": self._token_mask_id}

    @property
    def special_ids(self) -> list[int]:
        """The ids of the file's special tokens (its added tokens marked special) and of the padding, unknown and
        mask tokens, sorted."""
        added = [index for index, token in self._rust.get_added_tokens_decoder().items() if token.special]
        own = (self._token_pad_id, self._token_unk_id, self._token_mask_id)
        return sorted({*added, *self._specials, *(index for index in own if index is not None)})

    @property
    def vocab_size(self) -> int:
        """The number of tokens, added tokens included."""
        return self._rust.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int:
        """The id of ``token``; BERT's name of a special token this vocabulary lacks gives its own special's id
        (``[CLS]``: the start token, ``[SEP]``: the end token, ``[PAD]``, ``[UNK]``, ``[MASK]``); the unknown id
        for another token outside the vocabulary (a DataError where there is none)."""
        index = self._vocab.get(token)
        if index is None:
            index = self._aliases.get(token)
        if index is None:
            index = self._token_unk_id
        if index is None:
            raise fail(DataError, f"{self.path}: token_to_id", "a token of the vocabulary", repr(token),
                       "this vocabulary has no unknown token")
        return index

    def _token_of(self, index: int) -> str:
        token = self._rust.id_to_token(int(index))
        if token is None:
            raise KeyError(index)
        return token

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """The tokens of ``text``'s row (its pieces between the special tokens), cut to ``maxlen``."""
        return self.ids_to_tokens(self.encode(text, maxlen=maxlen)[0])

    def truncate(self, token_ids: Sequence[int], segment_ids: Sequence[int],
                 maxlen: int) -> tuple[list[int], list[int]]:
        """Cut an untruncated ``encode`` result to ``maxlen`` exactly as ``encode(..., maxlen)`` cuts it: a pair's
        texts are found by the specials between them (by the type ids where there are none between)."""
        ids = list(token_ids)[len(self._single.before):len(token_ids) - len(self._single.after)]
        between = [i for i, _ in self._pair.between]
        types = list(segment_ids)[len(self._single.before):len(segment_ids) - len(self._single.after)]
        if between:
            split = next((k for k in range(len(ids) - len(between) + 1) if ids[k:k + len(between)] == between), None)
            first, second = (ids, None) if split is None else (ids[:split], ids[split + len(between):])
            if second is not None:
                second = second[:len(second) - len(self._pair.after) + len(self._single.after)]
        elif self._pair.second_type != self._pair.first_type and self._pair.second_type in types:
            split = types.index(self._pair.second_type)
            first, second = ids[:split], ids[split:len(ids) - len(self._pair.after) + len(self._single.after)]
        else:
            first, second = ids, None
        return self._assemble(first, second, maxlen)

    def decode(self, ids: Sequence[int], tokens: Sequence[str] | None = None) -> str:
        """The text of ``ids`` as the tokenizer's decoder gives it, the special tokens (the rows' and padding)
        left out."""
        ids = self.tokens_to_ids(tokens) if tokens is not None else [int(i) for i in ids]
        return self._rust.decode([i for i in ids if i not in self._specials], skip_special_tokens=True)

    def offsets(self, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """Each text's piece ids (no special tokens) and each piece's character span ``(start, end)`` in the text as
        the tokenizers library gives it (a Metaspace piece ``▁word`` spans the space before it; byte-level pieces of
        one character share its span)."""
        out = []
        for begin in range(0, len(texts), BATCH_CHUNK):
            for encoding in self._rust.encode_batch(list(texts[begin:begin + BATCH_CHUNK]), add_special_tokens=False):
                out.append((list(encoding.ids), [tuple(span) for span in encoding.offsets]))
        return out

    def piece_offsets(self, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """`offsets` without the whitespace at either end of a piece's span (a piece of whitespace alone: the
        empty span at its end), so that a word's pieces start and end on the word, as the span, relation and qa
        tasks read them."""
        out = []
        for text, (ids, spans) in zip(texts, self.offsets(texts), strict=True):
            trimmed = []
            for start, end in spans:
                piece = text[start:end]
                left, right = start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())
                trimmed.append((left, right) if left < right else (end, end))
            out.append((ids, trimmed))
        return out

    def split_words(self, text: str) -> list[tuple[int, int]]:
        """Character offsets ``(start, end)`` of the words the pre-tokenizer finds in ``text``, without the
        whitespace around them (a run of whitespace alone is no word)."""
        encoding = self._rust.encode(text, add_special_tokens=False)
        words: dict[int, list[int]] = {}
        for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
            if word is not None and end > start:
                span = words.setdefault(word, [start, end])
                span[0], span[1] = min(span[0], start), max(span[1], end)
        spans = []
        for start, end in sorted(words.values()):
            piece = text[start:end]
            start, end = start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())
            if end > start and (not spans or start >= spans[-1][1]):
                spans.append((start, end))
        return spans

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
        """Piece ids of each word of already split sentences (CoNLL tokens): the pieces of the words joined by
        spaces, as the model sees running text, each given to the word its characters lie in. A word without
        pieces gets the unknown id (the padding id without one), so every word keeps a piece to carry its label."""
        fallback = self._token_unk_id if self._token_unk_id is not None else self.pad_id
        joined = [" ".join(words) for words in sentences]
        result = []
        for (ids, offsets), words in zip(self.piece_offsets(joined), sentences, strict=True):
            ends, position = [], -1
            for word in words:
                position += 1 + len(word)
                ends.append(position)  # each word's end in the joined text
            pieces: list[list[int]] = [[] for _ in words]
            for index, (start, end) in zip(ids, offsets, strict=True):
                at = bisect.bisect_right(ends, max(start, end - 1))  # the word holding it, or the next after a gap
                pieces[min(at, len(words) - 1)].append(index)
            result.append([word or [fallback] for word in pieces])
        return result

    def rematch(self, text: str, tokens: Sequence[str]) -> list[list[int]]:
        """The character positions in ``text`` of each of its tokens (``tokenize(text)``; [] for special tokens).

        Raises:
            ValueError: ``tokens`` are not ``text``'s pieces, with or without the special tokens around them.
        """
        (ids, offsets), = self.piece_offsets([text])
        pieces = self.ids_to_tokens(ids)
        spans = [list(range(start, end)) for start, end in offsets]
        if list(tokens) == pieces:
            return spans
        row = self.ids_to_tokens(self._single.row(ids)[0])
        if list(tokens) != row:
            raise ValueError(f"the tokens are not the pieces of {text[:40]!r}")
        return [[] for _ in self._single.before] + spans + [[] for _ in self._single.after]

    def _full_ids(self, text: str | Sequence[str], most: int | None = None) -> list[int]:
        """The pieces of a text, or of its tokens with the row's special tokens around them left out."""
        if isinstance(text, str):
            return list(self._rust.encode(text, add_special_tokens=False).ids)
        ids = self.tokens_to_ids(text)
        before, after = [i for i, _ in self._single.before], [i for i, _ in self._single.after]
        if ids[:len(before)] == before and len(ids) >= len(before) + len(after) and (
                not after or ids[len(ids) - len(after):] == after):
            ids = ids[len(before):len(ids) - len(after)]
        return ids

    def _batch_ids(self, texts: list[str], most: int | None) -> list[list[int]]:
        rows = []
        for begin in range(0, len(texts), BATCH_CHUNK):
            encodings = self._rust.encode_batch_fast(texts[begin:begin + BATCH_CHUNK], add_special_tokens=False)
            rows += [list(encoding.ids) for encoding in encodings]
        return rows

    def _assemble(self, first: list[int], second: list[int] | None, maxlen: int | None) -> tuple[list[int], list[int]]:
        """The post-processor's row of one text's pieces or a pair's, cut to ``maxlen`` as `Tokenizer` cuts."""
        template = self._single if second is None else self._pair
        if maxlen is not None:
            if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < max(template.specials, 1):
                raise fail(ConfigError, "maxlen", f"an int >= {max(template.specials, 1)}, the special tokens of a "
                           "row", repr(maxlen))
            room = maxlen - template.specials
            if second is None:
                first = first[:room]
            else:
                first_length, second_length = _pair_lengths(len(first), len(second), room)
                first, second = first[:first_length], second[:second_length]
        return template.row(first, second)
