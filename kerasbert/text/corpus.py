"""Raw-text corpora for masked-LM pre-training: documents read from text files, packed into training rows.

`iter_documents` reads plain text in Google BERT's ``create_pretraining_data`` format (one sentence a line, a
blank line between documents) or JSONL (one document a line), streaming each file line by line. `pack` turns
the documents into rows ``[CLS] pieces [SEP]`` of at most ``maxlen`` word pieces: whole sentences of one
document packed greedily, never crossing documents (Google's DOC-SENTENCES), with the word ids whole-word
masking needs.

Example:
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> _ = open(os.path.join(folder, "a.txt"), "w").write("a b\\nc\\n\\nd e f\\n")
>>> documents = list(iter_documents(os.path.join(folder, "*.txt")))
>>> [(document.sentences, os.path.basename(document.source)) for document in documents]
[(['a b', 'c'], 'a.txt:1'), (['d e f'], 'a.txt:4')]
>>> encode = lambda text: ([ord(ch) for ch in text.split()], list(range(len(text.split()))))
>>> [row.token_ids for row in pack(documents, encode, 8, cls_id=2, sep_id=3)]
[[2, 97, 98, 99, 3], [2, 100, 101, 102, 3]]
"""

from __future__ import annotations

import bisect
import glob
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.files import json_value
from kerasbert.text.limits import check_text
from kerasbert.text.lines import raw_lines
from kerasbert.text.readers import get_field

__all__ = ["MIN_MAXLEN", "Document", "PackedRow", "Packing", "iter_documents", "pack", "split_sentences"]

MIN_MAXLEN = 8  # [CLS], [SEP] and at least six word pieces a row
Encode = Callable[[str], tuple[list[int], list[int]]]


# ---------------------------------------------------------------------------- reading


@dataclass
class Document:
    """One document of a corpus: its sentences, in order.

    Args:
        sentences: list of str. the sentences, stripped, none blank.
        source: str. ``file:line`` of its first line, for messages and logs.
    """

    sentences: list[str]
    source: str


def iter_documents(pattern: str | Sequence[str], text_field: str = "text") -> Iterator[Document]:
    """The documents of a corpus, read file by file and line by line, never a whole file at once.

    A ``.jsonl`` or ``.json`` file holds one document a line, ``{"text": "..."}``, split into sentences by
    `split_sentences`. Any other file is plain text: one sentence a line, one or more blank lines (only
    whitespace) between documents, each line stripped. A file ends its last document. Files are UTF-8; a
    byte-order mark at the start of a file is dropped.

    Args:
        pattern: str or list of str. a file, a glob such as ``corpus/*.txt`` (its files sorted), or a list of
            files and globs, read in that order.
        text_field: str. the key of a JSONL line's text.

    Returns:
        an iterator of Document. The files are listed now; each is opened when the documents before it are used.

    Raises:
        DataError: a file or glob matches no file (now); a file is not UTF-8, a JSONL line is not an object with
            a string ``text_field``, a line or document holds more than `kerasbert.text.limits.MAX_TEXT_CHARS`
            characters or a line more than `kerasbert.text.lines.MAX_LINE_BYTES` bytes, or the whole corpus holds
            no text (while iterating).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "wiki.jsonl")
    >>> _ = open(path, "w").write('{"text": "第一句。第二句！\\\\nA line. Another"}\\n')
    >>> [document.sentences for document in iter_documents(path)]
    [['第一句。', '第二句！', 'A line.', 'Another']]
    """
    files = _expand(pattern)
    return _documents(files, text_field, _shown(pattern))


def _documents(files: list[str], text_field: str, shown: str) -> Iterator[Document]:
    count = 0
    for path in files:
        jsonl = os.path.splitext(path)[1].lower() in (".jsonl", ".json")
        for document in _jsonl_documents(path, text_field) if jsonl else _plain_documents(path):
            count += 1
            yield document
    if not count:
        noun = "file" if len(files) == 1 else "files"
        raise fail(DataError, shown, "text to pre-train on", f"no text in its {len(files)} {noun}",
                   "a corpus has one sentence a line and a blank line between documents, or JSONL lines "
                   f'{{"{text_field}": "..."}}')


def _expand(pattern: str | Sequence[str]) -> list[str]:
    """The files ``pattern`` names, each glob's sorted."""
    patterns = [pattern] if isinstance(pattern, str | os.PathLike) else list(pattern)
    if not patterns:
        raise fail(DataError, "corpus", "a file or a glob", "an empty list")
    files = []
    for one in map(os.fspath, patterns):
        if glob.has_magic(one):
            matches = sorted(path for path in glob.glob(one) if os.path.isfile(path))
            if not matches:
                raise fail(DataError, one, "a file or a glob matching files", "no match")
            files += matches
        elif os.path.isdir(one):
            raise fail(DataError, one, "a file or a glob matching files", "a folder",
                       f"name its files with a glob, e.g. {os.path.join(one, '*.txt')}")
        elif not os.path.isfile(one):
            found = "a device or pipe, not a regular file" if os.path.exists(one) else "nothing at that path"
            raise fail(DataError, one, "an existing file", found)
        else:
            files.append(one)
    return files


def _shown(pattern: str | Sequence[str]) -> str:
    if isinstance(pattern, str | os.PathLike):
        return os.fspath(pattern)
    names = [os.fspath(one) for one in pattern]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _plain_documents(path: str) -> Iterator[Document]:
    sentences: list[str] = []
    first = 0
    for number, line in _lines(path):
        line = check_text(line.strip(), f"{path}:{number}")
        if line:
            first = first if sentences else number
            sentences.append(line)
        elif sentences:
            yield Document(sentences, f"{path}:{first}")
            sentences = []
    if sentences:
        yield Document(sentences, f"{path}:{first}")


def _jsonl_documents(path: str, text_field: str) -> Iterator[Document]:
    for number, line in _lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        row = json_value(line, where, "one JSON object", hint=f'a JSONL corpus has one document a line: '
                         f'{{"{text_field}": "..."}}')
        sentences = split_sentences(get_field(row, text_field, where))
        if sentences:
            yield Document(sentences, where)


# A sentence ends after 。！？!? (and any closing quotes or brackets), or after a full stop before a space.
_SENTENCE_END = re.compile(r"(?:[。！？!?]+|\.(?=[\"'”’)\]]*\s))[\"'”’」』）)\]]*")


def split_sentences(text: str) -> list[str]:
    """A JSONL document's sentences: ``text`` cut at line breaks, after 。！？!? and after ``.`` before a space.

    Closing quotes and brackets stay with the sentence they end. The rule is simple on purpose: a cut in the
    wrong place (``e.g. this``) only lets a row end there, since `pack` joins sentences until a row is full.

    Args:
        text: str. a document's text.

    Returns:
        list of str. its sentences, stripped, none blank.

    Example:
    >>> split_sentences("他说：“好！”然后走了。\\n\\nPi is 3.14. Right?  Yes")
    ['他说：“好！”', '然后走了。', 'Pi is 3.14.', 'Right?', 'Yes']
    """
    sentences = []
    for line in text.splitlines():
        start = 0
        for match in _SENTENCE_END.finditer(line):
            sentences.append(line[start:match.end()])
            start = match.end()
        sentences.append(line[start:])
    return [sentence.strip() for sentence in sentences if sentence.strip()]


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of a UTF-8 file, read one line at a time (`kerasbert.text.lines.raw_lines`)."""
    for number, offset, raw in raw_lines(path):
        yield number, _decode(raw, path, number, offset)


def _decode(raw: bytes, path: str, number: int, offset: int) -> str:
    """A line of UTF-8 (a BOM dropped at the file's start), or the DataError that guesses its encoding."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _not_utf8(raw, error.start, path, number, offset) from None
    if "\x00" in text:  # valid UTF-8, but no text file holds NUL bytes: UTF-16 of ASCII characters does
        raise _not_utf8(raw, raw.index(b"\x00"), path, number, offset)
    return text[1:] if offset == 0 and text.startswith("\ufeff") else text


def _not_utf8(raw: bytes, at: int, path: str, number: int, offset: int) -> DataError:
    """The DataError of a byte that is not UTF-8 text, with a guess of the file's encoding and how to convert it.

    The guess: a UTF-16 byte-order mark or a NUL byte is UTF-16; two bytes above 0x80 in a row are GBK (each
    Chinese character); one alone is Latin-1 (an accented letter).
    """
    if (offset == 0 and raw[:2] in (b"\xff\xfe", b"\xfe\xff")) or raw[at] == 0:
        encoding = "UTF-16"
    elif raw[at] > 0x80 and raw[at + 1:at + 2] > b"\x80":
        encoding = "GBK"
    else:
        encoding = "LATIN1"
    stem, ext = os.path.splitext(os.path.basename(path))
    found = f"byte {raw[at]:#04x} at byte offset {offset + at} ({encoding}?)"
    return fail(DataError, f"{path}:{number}", "UTF-8 text", found,
                f"re-save the file as UTF-8, e.g. iconv -f {encoding} -t UTF-8 {path} > {stem}.utf8{ext}")


# ---------------------------------------------------------------------------- packing


@dataclass
class PackedRow:
    """One pre-training row: ``[CLS] pieces [SEP]`` and the word each piece belongs to.

    Args:
        token_ids: list of int. the ids, [CLS] first and [SEP] last.
        word_ids: list of int. per id the index of its whole word in the row, from 0; -1 at [CLS] and [SEP].
        source: str. ``file:line`` of the document the row comes from.
        segment_ids: list of int or None. a sentence pair's (`kerasbert.text.pairs`): 0 for ``[CLS] A [SEP]``,
            1 for ``B [SEP]``; None for a row of one segment.
        random_next: bool or None. a sentence pair's: whether B comes from another document than A.
    """

    token_ids: list[int]
    word_ids: list[int]
    source: str
    segment_ids: list[int] | None = None
    random_next: bool | None = None


@dataclass
class RowPieces:
    """The pieces of a row being filled, its words numbered from 0 in order."""

    ids: list[int] = field(default_factory=list)
    words: list[int] = field(default_factory=list)

    def add(self, ids: list[int], words: list[int]) -> None:
        number, previous = (self.words[-1] if self.words else -1), object()
        for word in words:
            number += word != previous
            previous = word
            self.words.append(number)
        self.ids += ids

    def close(self, cls_id: int, sep_id: int, source: str) -> PackedRow:
        return PackedRow([cls_id, *self.ids, sep_id], [-1, *self.words, -1], source)


class Packing(Iterator[PackedRow]):
    """The rows `pack` yields, one at a time, with counts of what it packed.

    Attributes:
        sentences: int. the sentences encoded so far.
        cut: int. those of them longer than a row's ``maxlen - 2`` pieces, cut across rows.
        rows: int. the rows yielded so far.
    """

    def __init__(self, documents: Iterable[Document], encode: Encode, maxlen: int, cls_id: int, sep_id: int) -> None:
        if maxlen < MIN_MAXLEN:
            raise fail(ConfigError, "--maxlen", f"at least {MIN_MAXLEN} word pieces a pre-training row",
                       str(maxlen), "BERT pre-trains with 128, then 512")
        self.sentences = self.cut = self.rows = 0
        self._rows = self._pack(documents, encode, maxlen - 2, cls_id, sep_id)

    def __next__(self) -> PackedRow:
        row = next(self._rows)
        self.rows += 1
        return row

    def _pack(self, documents: Iterable[Document], encode: Encode, window: int, cls_id: int,
              sep_id: int) -> Iterator[PackedRow]:
        for document in documents:
            row = RowPieces()
            for ids, words in self._units(document, encode, window):
                if len(row.ids) + len(ids) > window:
                    yield row.close(cls_id, sep_id, document.source)
                    row = RowPieces()
                row.add(ids, words)
            if row.ids:
                yield row.close(cls_id, sep_id, document.source)

    def _units(self, document: Document, encode: Encode, window: int) -> Iterator[tuple[list[int], list[int]]]:
        """Each sentence's pieces and word ids; a sentence longer than ``window`` cut into several."""
        for sentence in document.sentences:
            ids, words = encode(sentence)
            if len(ids) != len(words):
                raise fail(DataError, document.source, "a word id for each word piece",
                           f"{len(ids)} pieces and {len(words)} word ids for {sentence[:40]!r}")
            self.sentences += 1
            self.cut += len(ids) > window
            yield from _cut(list(ids), list(words), window)


def pack(documents: Iterable[Document], encode: Encode, maxlen: int, *, cls_id: int, sep_id: int) -> Packing:
    """Pack documents into pre-training rows of at most ``maxlen`` ids, lazily.

    Each row is ``[CLS] pieces [SEP]``. Whole sentences of one document fill a row greedily, up to ``maxlen - 2``
    pieces; a row never holds two documents. A sentence longer than that is cut into pieces of at most
    ``maxlen - 2``, each cut before the word that would cross it, unless that word alone is longer (it is then
    cut where the row is full); the last piece packs with the sentences after it. The word ids of a row count
    its words from 0, across its sentences, so a word's pieces share one id and a word lies in one row unless
    it is longer than a row.

    Args:
        documents: iterable of Document. read as the rows are used.
        encode: callable. ``text -> (ids, word_ids)``: a sentence's word-piece ids without [CLS] and [SEP], and
            per piece the index of its whole word (pieces of one word are adjacent).
        maxlen: int. the most ids a row holds, [CLS] and [SEP] included; at least `MIN_MAXLEN`.
        cls_id: int. the id of [CLS].
        sep_id: int. the id of [SEP].

    Returns:
        Packing: an iterator of PackedRow whose ``cut`` counts the sentences longer than a row.

    Raises:
        ConfigError: ``maxlen`` is below `MIN_MAXLEN` (now).

    Example:
    >>> encode = lambda text: ([ord(ch) for ch in text.replace(" ", "")],
    ...                        [i for i, word in enumerate(text.split()) for _ in word])
    >>> rows = pack([Document(["ab c", "de", "fgh ij", "k"], "a.txt:1")], encode, 8, cls_id=2, sep_id=3)
    >>> [(row.token_ids[1:-1], row.word_ids) for row in rows]
    [([97, 98, 99, 100, 101], [-1, 0, 0, 1, 2, 2, -1]), ([102, 103, 104, 105, 106, 107], [-1, 0, 0, 0, 1, 1, 2, -1])]
    >>> rows.cut
    0
    """
    return Packing(documents, encode, maxlen, cls_id, sep_id)


def _cut(ids: list[int], words: list[int], window: int) -> Iterator[tuple[list[int], list[int]]]:
    """``(ids, words)`` in pieces of at most ``window``, each cut before a word that would cross it unless that
    word alone is longer than ``window``."""
    starts = [i for i, word in enumerate(words) if i == 0 or word != words[i - 1]]  # where each word starts
    start = 0
    while len(ids) - start > window:
        end = start + window
        k = bisect.bisect_right(starts, end) - 1  # the word holding piece `end`
        word_end = starts[k + 1] if k + 1 < len(starts) else len(ids)
        if start < starts[k] < end and word_end - starts[k] <= window:
            end = starts[k]
        yield ids[start:end], words[start:end]
        start = end
    yield ids[start:], words[start:]
