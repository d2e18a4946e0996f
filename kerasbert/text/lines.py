"""A data file's text, whole (`read_text`) or line by line (`read_lines`), each line's bytes bounded as it is read.

`kerasbert.text.limits.MAX_TEXT_CHARS` bounds a text once it is decoded; a line is bounded before that, where it is
read, or one line of a multi-gigabyte file without a line break would be held whole in memory first. `raw_lines`
reads at most `MAX_LINE_BYTES` + 1 bytes of a line and refuses it, by file and line, as soon as it passes the bound:
a line takes at most the bound in memory however long it is.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "in.txt")
>>> _ = open(path, "wb").write(b"one\\r\\ntwo")
>>> list(raw_lines(path))
[(1, 0, b'one\\r\\n'), (2, 5, b'two')]
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from typing import BinaryIO

from kerasbert.errors import DataError, fail
from kerasbert.text.limits import MAX_TEXT_CHARS

__all__ = ["MAX_LINE_BYTES", "raw_lines", "read_lines", "read_text"]

# The most bytes of one line before its "\n". Any line whose texts pass `MAX_TEXT_CHARS` fits: a line holds at most
# two texts (a pair), a character takes at most 12 bytes (4 in UTF-8, 6 as a JSON \uXXXX escape, 12 as the escaped
# surrogate pair of a character outside the BMP), so 24 bytes a character, rounded up to 32 for the label and a
# row's other fields.
MAX_LINE_BYTES = 32 * MAX_TEXT_CHARS
_PIECE = 1 << 20  # the most bytes of a line read at once


def raw_lines(path: str) -> Iterator[tuple[int, int, bytes]]:
    """``(number, offset, raw)`` of each line of ``path``: its 1-based number, its first byte's offset and its bytes
    with the ``\\n`` that ends it, split at ``\\n`` only.

    Raises:
        DataError: a line holds more than `MAX_LINE_BYTES` bytes before its ``\\n``, raised once that many and one
            more are read, never the rest of the line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "in.txt")
    >>> with open(path, "wb") as handle:
    ...     _ = handle.write(b"short\\n"), handle.truncate(6 + MAX_LINE_BYTES + 1)  # a sparse line of NUL bytes
    >>> list(raw_lines(path))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: ...in.txt:2: expected a line of at most 32,000,000 bytes, found more than \
32,000,000 bytes from byte offset 6. Split it into lines of one example each (a corpus: a sentence or document \
each); a text holds at most 1,000,000 characters
    """
    offset = 0
    with open(path, "rb") as handle:
        for number in itertools.count(1):
            raw = _next_line(handle)
            if raw is None:
                raise fail(DataError, f"{path}:{number}", f"a line of at most {MAX_LINE_BYTES:,} bytes",
                           f"more than {MAX_LINE_BYTES:,} bytes from byte offset {offset}",
                           f"Split it into lines of one example each (a corpus: a sentence or document each); a text "
                           f"holds at most {MAX_TEXT_CHARS:,} characters")
            if not raw:
                return
            yield number, offset, raw
            offset += len(raw)


def _next_line(handle: BinaryIO) -> bytes | None:
    """The next line of ``handle`` with its ``\\n`` (``b""`` at the end of the file), or None once it passes
    `MAX_LINE_BYTES`. A line longer than `_PIECE` is read in pieces into one growing buffer, so that it is held once
    (``readline`` of a large size holds it twice, its chunks and their join)."""
    line = handle.readline(min(_PIECE, MAX_LINE_BYTES + 1))
    if len(line) == _PIECE and not line.endswith(b"\n"):
        line = bytearray(line)
        while not line.endswith(b"\n") and len(line) <= MAX_LINE_BYTES:
            piece = handle.readline(min(_PIECE, MAX_LINE_BYTES + 1 - len(line)))
            if not piece:  # the file's last line, without a line break
                break
            line += piece
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        return None
    return bytes(line)


def read_text(path: str) -> str:
    """Read a whole UTF-8 file (a BOM is dropped), failing clearly when it cannot be used.

    Args:
        path: str. the file.

    Returns:
        str. its text.

    Raises:
        DataError: the file does not exist, is empty, or is not UTF-8 (with the byte offset).

    Example:
    >>> read_text("/no/such/file.tsv")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: /no/such/file.tsv: expected an existing file, found nothing at that path
    """
    _check_exists(path)
    with open(path, "rb") as handle:
        text = _decode(handle.read(), path)
    if not text.strip():
        raise _empty(path)
    return text


_LINE_BREAK = re.compile(r"\r\n?|\n")  # a line break in a data file; `read_lines`


def read_lines(path: str) -> Iterator[str]:
    """Yield a UTF-8 file's lines one at a time, split at ``\\n``, ``\\r\\n`` and ``\\r`` only.

    The other breaks ``str.splitlines`` knows (U+2028, U+0085, form feed, ...) stay inside their line: a JSON
    string or a text may hold them. The file is read line by line (`raw_lines`), never whole, and a line of more
    than `MAX_LINE_BYTES` bytes is refused before the rest of it is read, so memory does not grow with the file's
    size. The errors are those of :func:`read_text` and `raw_lines`; an empty file is reported once all of it is read.

    Args:
        path: str. the file.

    Yields:
        str. each line, without its line break.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = open(path, "wb").write(b"\\xef\\xbb\\xbfone\\r\\ntwo")
    >>> list(read_lines(path))
    ['one', 'two']
    >>> _ = open(path, "w", encoding="utf-8", newline="").write("a\\u2028b\\rc\\n")
    >>> list(read_lines(path))
    ['a\\u2028b', 'c']
    """
    _check_exists(path)
    blank = True
    for number, offset, raw in raw_lines(path):
        text = _decode(raw, path, number, offset)
        blank = blank and not text.strip()
        lines = _LINE_BREAK.split(text)
        yield from lines[:-1] if lines[-1] == "" else lines
    if blank:
        raise _empty(path)


def _check_exists(path: str) -> None:
    if not os.path.isfile(path):
        raise fail(DataError, path, "an existing file", "nothing at that path")


def _empty(path: str) -> DataError:
    return fail(DataError, path, "at least one example", "an empty file")


def _decode(raw: bytes, path: str, line: int = 1, offset: int = 0) -> str:
    """UTF-8 ``raw`` (a BOM dropped at the file's start), found at ``line`` and byte ``offset`` of ``path``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line += raw.count(b"\n", 0, error.start)
        raise fail(DataError, f"{path}:{line}", "UTF-8 text",
                   f"byte {raw[error.start]:#04x} at byte offset {offset + error.start} that is not UTF-8",
                   "convert the file to UTF-8 (e.g. iconv -f GBK -t UTF-8)") from None
    return text[1:] if offset == 0 and text.startswith("\ufeff") else text
