"""BERT's text normalization, before word pieces: `normalize` a text, `normalize_character` one character alone.

Python's own Unicode tables, as bert4keras uses them (the Rust ``tokenizers`` normalizer drops private-use and
unassigned characters and has tables of another Unicode version). `kerasbert.text.tokenizer.Tokenizer` normalizes
each text with `normalize` before the Rust ``WordPiece`` model splits its words, and `rematch_character` maps its
tokens back to the raw text; `kerasbert.text.cuts` and the graph tokenizer (`kerasbert.serving.graph_text`) probe
characters with `normalize_character`.
"""

from __future__ import annotations

import unicodedata

from kerasbert.text.decoding import is_cjk, is_punctuation

__all__ = ["normalize", "normalize_character", "rematch_character"]


def _decomposed(text: str, lowercase: bool) -> str:
    """``text`` lower-cased and decomposed (NFD) with ``lowercase``, else as it is."""
    return unicodedata.normalize("NFD", text.lower()) if lowercase else text


def _is_dropped(ch: str, strip_marks: bool) -> bool:
    """A character the tokenizer drops (unless it counts as a space first): NUL, U+FFFD, a control or format
    character, and with ``strip_marks`` a nonspacing mark (an accent after NFD)."""
    category = unicodedata.category(ch)
    return ch in "\x00\ufffd" or category in ("Cc", "Cf") or strip_marks and category == "Mn"


def _spaced(ch: str, strip_marks: bool) -> str:
    """One character of a text that `normalize` has lower-cased and decomposed: a punctuation mark or CJK character
    between spaces (a word of its own), a space one space, a dropped character (`_is_dropped`) nothing, anything
    else itself."""
    if is_punctuation(ch) or is_cjk(ch):
        return f" {ch} "
    if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
        return " "
    if _is_dropped(ch, strip_marks):
        return ""
    return " " if ch.isspace() else ch  # a line or paragraph separator: str.split() breaks words there too


class _CharTable(dict):
    """A ``str.translate`` table of `_spaced`, filled as characters are first met."""

    def __init__(self, strip_marks: bool) -> None:
        super().__init__()
        self.strip_marks = strip_marks

    def __missing__(self, code: int) -> str:
        self[code] = out = _spaced(chr(code), self.strip_marks)
        return out


_TABLES = {True: _CharTable(strip_marks=True), False: _CharTable(strip_marks=False)}


def normalize(text: str, lowercase: bool) -> str:
    """``text`` as BERT's tokenizer sees it before word pieces: with ``lowercase`` lower-cased, decomposed (NFD)
    and stripped of nonspacing marks; control characters dropped; each punctuation mark and CJK character
    between spaces. The words are then what lies between spaces. Python's Unicode tables, as bert4keras's.

    Example:
    >>> normalize("Héllo, 北京!", lowercase=True).split()
    ['hello', ',', '北', '京', '!']
    """
    return _decomposed(text, lowercase).translate(_TABLES[lowercase])


def normalize_character(ch: str, lowercase: bool) -> str:
    """`normalize` of one character alone, not kept in the shared tables (to probe every character at once).

    Example:
    >>> normalize_character("É", lowercase=True), normalize_character("，", lowercase=False)
    ('e', ' ， ')
    """
    return "".join(_spaced(c, lowercase) for c in _decomposed(ch, lowercase))


def rematch_character(ch: str, lower: bool) -> str:
    """One character as `Tokenizer.rematch` sees it: with ``lower`` lower-cased and accent-stripped, control
    characters dropped (spaces and punctuation stay as they are, unlike `normalize_character`).

    Example:
    >>> rematch_character("É", lower=True), rematch_character("，", lower=False), rematch_character("\\x07", True)
    ('e', '，', '')
    """
    return "".join(c for c in _decomposed(ch, lower) if not _is_dropped(c, lower))
