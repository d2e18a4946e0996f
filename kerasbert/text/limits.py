"""How long one text may be where it is read from a file: `MAX_TEXT_CHARS`, checked by `check_text`.

The tokenizer reads a long text only as far as ``maxlen`` needs (`kerasbert.text.cuts`), but some paths use all of a
text: ``--stride`` windows, pre-training rows, NER's words. A text is also held whole in memory as it is read, with
its pieces and offsets after it. So each text read from a data file (a line, a TSV/CSV column, a JSONL field, a
corpus line or document) is refused past `MAX_TEXT_CHARS` characters, by file and line, before any of it is
word-pieced. A text that long is a whole book, or a file that is not the data meant: split it into shorter texts.
"""

from __future__ import annotations

from kerasbert.errors import DataError, fail

__all__ = ["MAX_TEXT_CHARS", "check_text"]

MAX_TEXT_CHARS = 1_000_000  # the most characters of one text read from a file: about 2,000 pages


def check_text(text: str, where: str) -> str:
    """``text`` itself, or a DataError naming ``where`` (``file:line``) when it holds more than `MAX_TEXT_CHARS`
    characters.

    Example:
    >>> check_text("很好", "train.tsv:1")
    '很好'
    >>> check_text("a" * 1_000_001, "in.txt:3")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: in.txt:3: expected a text of at most 1,000,000 characters, found 1,000,001 \
characters. Split it into shorter texts (a line or row each)
    """
    if len(text) > MAX_TEXT_CHARS:
        raise fail(DataError, where, f"a text of at most {MAX_TEXT_CHARS:,} characters", f"{len(text):,} characters",
                   "Split it into shorter texts (a line or row each)")
    return text
