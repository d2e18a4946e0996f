"""``bert4keras.tokenizers`` -> ``kerasbert.compat.tokenizers``: `Tokenizer`, as `kerasbert.text.tokenizer`
defines it, `SpTokenizer`, as `kerasbert.text.sentencepiece` defines it, and `load_vocab` under bert4keras's
argument names."""

from __future__ import annotations

import os
from collections.abc import Sequence

from kerasbert.text import tokenizer as _tokenizer
from kerasbert.text.sentencepiece import SpTokenizer
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["SpTokenizer", "Tokenizer", "load_vocab"]


def load_vocab(dict_path: str | os.PathLike, simplified: bool = False, startswith: Sequence[str] | None = None):
    """`kerasbert.text.tokenizer.load_vocab` under bert4keras's argument name ``dict_path``, so that
    ``load_vocab(dict_path=dict_path, simplified=True, startswith=[...])`` ports unchanged.

    Args:
        dict_path: str. the vocab.txt (or a checkpoint folder holding one).
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
    return _tokenizer.load_vocab(dict_path, simplified=simplified, startswith=startswith)
