"""Where a long text may be cut before its word pieces, so that the pieces of its parts, joined, are its own.

`kerasbert.text.tokenizer.Tokenizer` reads a text longer than `PART_CHARS` characters part by part (`parts`): it
word-pieces only the parts that ``maxlen`` can need, and never hands the Rust tokenizer more than one part at a
time, so memory follows the part, not the text. Three steps of BERT's tokenizer look past one character; a cut just
before a character ``ch`` leaves each of them alone when:

- the split into words: ``ch`` starts a word of its own (a space, a punctuation mark or a CJK character, which
  `kerasbert.text.tokenizer.normalize` puts a space before);
- NFD decomposition, which reorders combining marks that follow each other: ``ch`` (lower-cased) decomposes to a
  base character first, so no mark moves across the cut;
- lower-casing, where Python writes a capital sigma as final or not by the letters around it: ``ch`` is neither
  cased nor case-ignorable (a sigma looking past the cut stops at it), or the text holds no capital sigma.

Without lower-casing only the first applies. A text with no such character for a while runs on in one part until
the next one.

Example:
>>> from kerasbert.text.tokenizer import normalize_character
>>> list(parts("ab cd,ef", normalize_character, lowercase=True, size=2))
['ab', ' cd', ',ef']
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Iterator

__all__ = ["PART_CHARS", "cut_before", "parts"]

PART_CHARS = 8192  # the characters of a long text word-pieced at a time
CAPITAL_SIGMA, FINAL_SIGMA = "\u03a3", "\u03c2"
Spaced = Callable[[str, bool], str]  # `kerasbert.text.tokenizer.normalize_character`


@functools.lru_cache(maxsize=1 << 16)
def cut_before(ch: str, spaced: Spaced, lowercase: bool, sigma: bool) -> bool:
    """Whether a text may be cut just before ``ch`` (see the module): ``spaced`` is how the tokenizer normalizes one
    character, ``sigma`` whether the text holds a capital sigma.

    Example:
    >>> from kerasbert.text.tokenizer import normalize_character
    >>> [cut_before(ch, normalize_character, True, True) for ch in (" ", "中", "a", "\\u0301", ".")]
    [True, True, False, False, False]
    """
    if not spaced(ch, lowercase).startswith(" "):
        return False
    if not lowercase:
        return True
    base = unicodedata.normalize("NFD", ch.lower())[:1]
    # CPython writes a capital sigma as final when a cased letter comes before it and none after, skipping the
    # case-ignorable characters between: here only a character that is neither cased nor ignorable makes it final
    neutral = ("A" + CAPITAL_SIGMA + ch + "A").lower()[1] == FINAL_SIGMA
    return unicodedata.combining(base) == 0 and (neutral or not sigma)


def parts(text: str, spaced: Spaced, lowercase: bool, size: int | None = None) -> Iterator[str]:
    """``text`` in consecutive parts of at least ``size`` characters (the last may be shorter), each cut just before
    the first character after ``size`` where `cut_before` allows; joined they are ``text``.

    Args:
        text: str. the raw text, before normalization.
        spaced: callable. ``(character, lowercase) -> normalized``, `kerasbert.text.tokenizer.normalize_character`.
        lowercase: bool. whether the tokenizer lower-cases.
        size: int or None. the fewest characters of a part but the last; None: `PART_CHARS`.
    """
    size = PART_CHARS if size is None else size
    sigma = lowercase and CAPITAL_SIGMA in text
    start = 0
    while len(text) - start > size:
        end = start + size
        while end < len(text) and not cut_before(text[end], spaced, lowercase, sigma):
            end += 1
        yield text[start:end]
        start = end
    if start < len(text) or not text:
        yield text[start:]
