"""Word-piece vocabulary helpers (the Tokenizer itself arrives with the tokenizer issue).

``load_vocab`` reads a BERT ``vocab.txt`` and can shrink it the way bert4keras does: drop the
multi-character pieces that hold a CJK character or a punctuation mark (the BERT tokenizer
splits those characters apart, so such pieces can never be produced), and return
``keep_tokens`` to pass to ``build_transformer_model``.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence

from kerasbert.errors import ConfigError, fail

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


def is_redundant(token: str) -> bool:
    """A piece the tokenizer can never produce: longer than one character and holding CJK or punctuation."""
    stem = token[2:] if token.startswith("##") else token
    return len(token) > 1 and any(is_cjk(ch) or is_punctuation(ch) for ch in stem)


def load_vocab(
    path: str | os.PathLike, simplified: bool = False, startswith: Sequence[str] | None = None
) -> dict[str, int] | tuple[dict[str, int], list[int]]:
    """Read ``vocab.txt`` (one token per line) into ``{token: id}``, optionally shrunk.

    Args:
        path: str. the vocabulary file.
        simplified: bool. drop redundant pieces and also return ``keep_tokens``.
        startswith: list of str. tokens put first in the shrunk vocabulary (e.g. [PAD], [UNK], [CLS], [SEP]).

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
    if not os.path.isfile(path):
        raise fail(ConfigError, path, "a vocab.txt file", "no such file")
    token_dict: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            token = line.split()[0] if line.split() else line.strip()
            token_dict[token] = len(token_dict)
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
