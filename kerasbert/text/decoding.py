"""Tokens back to text as bert4keras 0.11.5's ``Tokenizer.decode`` writes it, and the same rules as data for a graph.

`decode_tokens` is the reference: special tokens dropped, ``##`` pieces joined to the piece before, a CJK character
or a punctuation mark written without a space before it (a mark with one after it), a word after a CJK character
without a space, then `_DECODE_RULES` tidy the spaces. `piece_table` states the same per vocabulary token, and
`decode_rules_re2` gives the regex passes (and the final ``strip``) in RE2, so that
`kerasbert.serving.graph_decode.GraphDetokenizer` decodes inside a TensorFlow graph and gives the same text.

The character classes of the RE2 forms are spelled out code point by code point from Python's own answers
(``\\d`` is any Unicode decimal digit in Python's ``re``, ASCII only in RE2; ``str.strip`` strips every character
that ``str.isspace`` accepts), so the graph agrees whatever Unicode version RE2 knows.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

# Characters after which bert4keras's decode removes the space (CJK punctuation and +-/={(<[).
_NO_SPACE_AFTER = ("\uff02\uff03\uff04\uff05\uff06\uff07\uff08\uff09\uff0a\uff0b\uff0c\uff0d\uff0f\uff1a\uff1b"
                   "\uff1c\uff1d\uff1e\uff20\uff3b\uff3c\uff3d\uff3e\uff3f\uff40\uff5b\uff5c\uff5d\uff5e\uff5f"
                   "\uff60\uff62\uff63\uff64\u3000\u3001\u3003\u3008\u3009\u300a\u300b\u300c\u300d\u300e\u300f"
                   "\u3010\u3011\u3014\u3015\u3016\u3017\u3018\u3019\u301a\u301b\u301c\u301d\u301e\u301f\u3030"
                   "\u303e\u303f\u2013\u2014\u2018\u2019\u201b\u201c\u201d\u201e\u201f\u2026\u2027\ufe4f\ufe51"
                   "\ufe54\u00b7\uff01\uff1f\uff61\u3002+-/={(<[")
_CONTRACTIONS = "(re|m|s|t|ve|d|ll)"
_DECODE_RULES = (
    (re.compile(" +"), " "),
    (re.compile(f"' {_CONTRACTIONS} "), r"'\1 "),
    (re.compile("([" + re.escape(_NO_SPACE_AFTER) + "]) "), r"\1"),
    (re.compile(r"(\d\.) (\d)"), r"\1\2"),
)

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk(ch: str) -> bool:
    """A CJK unified ideograph (the ranges Google's BERT tokenizer splits one per token)."""
    return any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES)


def is_punctuation(ch: str) -> bool:
    """ASCII symbols and every Unicode punctuation category, as BERT's tokenizer treats them."""
    code = ord(ch)
    return 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126 \
        or unicodedata.category(ch).startswith("P")


def is_special(token: str) -> bool:
    """``[CLS]``, ``[SEP]``, ``[UNK]``...: bracketed tokens, skipped by ``decode`` and ``rematch``."""
    return len(token) > 1 and token[0] == "[" and token[-1] == "]"


def decode_tokens(tokens: Sequence[str]) -> str:
    """Readable text of word pieces (special tokens dropped, ``##`` pieces joined), as bert4keras decodes.

    Args:
        tokens: list of str. the word pieces, in order.

    Returns:
        The text, with the spaces bert4keras's rules leave.

    Example:
    >>> decode_tokens(["[CLS]", "今", "天", "，", "we", "play", "##ed", "3", ".", "5", "[SEP]"])
    '今天，we played 3.5'
    >>> decode_tokens(["don", "'", "t", "stop", "(", "here", ")", "!"])
    "don't stop(here) !"
    """
    text = ""
    for token in (token for token in tokens if not is_special(token)):
        if token[:2] == "##":
            text += token[2:]
        elif len(token) == 1 and (is_cjk(token) or is_punctuation(token)):
            text += token + (" " if not is_cjk(token) else "")
        elif text and is_cjk(text[-1]):
            text += token
        else:
            text += " " + token
    for pattern, replacement in _DECODE_RULES:
        text = pattern.sub(replacement, text)
    return text.strip()


def _piece(token: str) -> tuple[str, bool]:
    """What `decode_tokens` appends for ``token``: its text, and whether a space comes first unless the text so far
    ends in a CJK character."""
    if is_special(token):
        return "", False
    if token[:2] == "##":
        return token[2:], False
    if len(token) == 1 and (is_cjk(token) or is_punctuation(token)):
        return token + (" " if not is_cjk(token) else ""), False
    return token, True


def piece_table(tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """What `decode_tokens` appends for each vocabulary token, as arrays a graph can gather from.

    A token's ``text`` follows the text so far, after a space when ``spaced`` is true and the text so far does not
    end in a CJK character. A token with an empty ``text`` (a special token, ``"##"``) leaves the last character as
    it was; any other decides it, and ``ends_cjk`` says whether that character is CJK. The regex passes and the
    strip of `decode_rules_re2` then apply to the whole text.

    Args:
        tokens: list of str. the vocabulary, in id order.

    Returns:
        dict of arrays, one entry per token: ``text`` (object array of str), ``spaced`` and ``ends_cjk`` (bool).

    Example:
    >>> table = piece_table(["[CLS]", "中", ",", "##ab", "cd"])
    >>> table["text"].tolist(), table["spaced"].tolist(), table["ends_cjk"].tolist()
    (['', '中', ', ', 'ab', 'cd'], [False, False, False, False, True], [False, True, False, False, False])
    """
    pieces = [_piece(token) for token in tokens]
    texts = np.empty(len(pieces), object)
    texts[:] = [text for text, _ in pieces]
    return {"text": texts, "spaced": np.array([spaced for _, spaced in pieces], bool),
            "ends_cjk": np.array([bool(text) and is_cjk(text[-1]) for text, _ in pieces], bool)}


def _re2_class(codes: Iterable[int]) -> str:
    """An RE2 character class holding exactly the code points ``codes``, as ranges of ``\\x{...}``."""
    codes, parts, start = sorted(set(codes)), [], None
    for i, code in enumerate(codes):
        start = code if start is None else start
        if i + 1 == len(codes) or codes[i + 1] != code + 1:
            parts.append(f"\\x{{{start:X}}}" + (f"-\\x{{{code:X}}}" if code != start else ""))
            start = None
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=1)
def decode_rules_re2() -> tuple[tuple[str, str], ...]:
    """``(pattern, rewrite)`` pairs for ``tf.strings.regex_replace`` (RE2, ``replace_global``) that do what
    `_DECODE_RULES` then ``str.strip`` do in `decode_tokens`, in that order.

    Python's ``\\d`` and the characters ``str.strip`` removes are written out from Python's own tables (a second
    to build, the first time in a process).

    Example:
    >>> import tensorflow as tf
    >>> text = tf.constant(" don' t  pay 3. 5 ， ok \u3000")
    >>> for pattern, rewrite in decode_rules_re2():
    ...     text = tf.strings.regex_replace(text, pattern, rewrite)
    >>> text.numpy().decode()
    "don't pay 3.5 ，ok"
    """
    chars = [chr(code) for code in range(0x110000)]
    digit = _re2_class(ord(ch) for ch in chars if re.fullmatch(r"\d", ch))
    space = _re2_class(ord(ch) for ch in chars if ch.strip() == "")
    return (
        (" +", " "),
        (f"' {_CONTRACTIONS} ", r"'\1 "),
        ("(" + _re2_class(map(ord, _NO_SPACE_AFTER)) + ") ", r"\1"),
        (f"({digit}\\.) ({digit})", r"\1\2"),
        (f"^{space}+|{space}+$", ""),
    )
