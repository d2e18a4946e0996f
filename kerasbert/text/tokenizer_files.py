"""Which tokenizer a vocabulary gives: BERT's `kerasbert.text.tokenizer.Tokenizer` for a ``vocab.txt``, a Hugging Face
``tokenizer.json``'s `kerasbert.text.hf_tokenizer.HfTokenizer` for one (RoBERTa's, XLM-R's, DeBERTa-v3's,
ModernBERT's folders hold no ``vocab.txt``), and the check that it is the tokenizer of the model's family.

`vocabulary_file` finds the file in a folder (``vocab.txt`` first, as before); `load_tokenizer` opens it;
`check_family` refuses a tokenizer of another family than the model's (its model, BPE, Unigram or WordPiece,
against the family's), a vocabulary larger than the config's, and a padding token other than the one the model
masks. No TensorFlow here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from kerasbert.errors import ConfigError, fail
from kerasbert.text.hf_tokenizer import TOKENIZER_FILE, HfTokenizer
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["VOCABULARY_FILES", "check_family", "load_tokenizer", "tokenizer_model", "vocabulary_file"]

VOCABULARY_FILES = ("vocab.txt", TOKENIZER_FILE)  # what a folder's tokenizer is read from, the first found


def vocabulary_file(path: str | os.PathLike) -> str:
    """``path`` itself for a file; for a folder its ``vocab.txt``, else its ``tokenizer.json``; a ConfigError
    naming the folder where it holds neither.

    Example:
    >>> vocabulary_file("/models/bert/vocab.txt")
    '/models/bert/vocab.txt'
    >>> vocabulary_file("/no/such/folder")
    '/no/such/folder'
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path
    for name in VOCABULARY_FILES:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    raise fail(ConfigError, path, "a folder with " + " or ".join(VOCABULARY_FILES), "neither",
               "pass the checkpoint's folder, or the vocabulary file itself")


def load_tokenizer(path: str | os.PathLike, family=None, lowercase: bool | None = None,
                   pre_tokenize: Callable[[str], Iterable[str]] | None = None,
                   config=None) -> Tokenizer | HfTokenizer:
    """The tokenizer of a vocabulary: ``vocab.txt`` (or a folder holding one) BERT's WordPiece `Tokenizer`,
    ``tokenizer.json`` (or a folder holding one and no ``vocab.txt``) an `HfTokenizer`, checked against
    ``family`` and ``config`` where given (`check_family`).

    Args:
        path: str. a ``vocab.txt``, a ``tokenizer.json``, or a folder holding one.
        family: Family, str or None. the model's family (`kerasbert.modeling.families`), checked when given.
        lowercase: bool or None. a ``vocab.txt``'s case (`Tokenizer`'s ``do_lower_case``); a ``tokenizer.json``'s
            own normalizer decides its case.
        pre_tokenize: callable or None. ``text -> words`` before word pieces (a ``vocab.txt`` only).
        config: BertConfig or None. the model's config, checked when given.

    Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "vocab.txt"), "w").write(chr(10).join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    >>> type(load_tokenizer(folder, "bert")).__name__
    'Tokenizer'
    """
    file = vocabulary_file(path)
    if os.path.basename(file) == TOKENIZER_FILE or (file.endswith(".json") and os.path.isfile(file)):
        if pre_tokenize is not None:
            raise fail(ConfigError, "--pre-tokenize", "a WordPiece vocab.txt", f"the tokenizer.json {file}",
                       "a tokenizer.json cuts its own words: leave --pre-tokenize out")
        tokenizer = HfTokenizer(file)
    else:
        tokenizer = Tokenizer(file, do_lower_case=lowercase, pre_tokenize=pre_tokenize)
    if family is not None:
        check_family(tokenizer, family, config, file)
    return tokenizer


def tokenizer_model(tokenizer) -> str | None:
    """The model of a tokenizer's pieces: ``"wordpiece"`` for a ``vocab.txt``, a ``tokenizer.json``'s
    ``model.type`` lower-cased, None for another tokenizer (SentencePiece's)."""
    if isinstance(tokenizer, HfTokenizer):
        return tokenizer.model_type
    return "wordpiece" if isinstance(tokenizer, Tokenizer) else None


def check_family(tokenizer, family, config=None, where: str = "--vocab") -> None:
    """A ConfigError naming ``where`` for a tokenizer of another family than the model's: its model (BPE, Unigram,
    WordPiece) not the family's (`Family.tokenizer`), or, for a ``tokenizer.json``, more tokens than the config's
    ``vocab_size`` or a padding token other than the one the model masks (`kerasbert.modeling.families.pad_id`).

    Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "vocab.txt"), "w").write(chr(10).join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    >>> check_family(Tokenizer(folder), "xlm_roberta", where="vocab.txt")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: vocab.txt: expected a unigram tokenizer, xlm_roberta's (its tokenizer.json), \
found a wordpiece tokenizer (a vocab.txt). pass the tokenizer.json of the xlm_roberta checkpoint
    """
    from kerasbert.modeling import families

    family = families.get(family) if isinstance(family, str) else family
    found = tokenizer_model(tokenizer)
    if found is None:
        return
    if found != family.tokenizer:
        source = "a vocab.txt" if isinstance(tokenizer, Tokenizer) else f"model.type {found!r}"
        wanted = "its vocab.txt" if family.tokenizer == "wordpiece" else "its tokenizer.json"
        raise fail(ConfigError, where, f"a {family.tokenizer} tokenizer, {family.name}'s ({wanted})",
                   f"a {found} tokenizer ({source})", f"pass the tokenizer.json of the {family.name} checkpoint"
                   if family.tokenizer != "wordpiece" else f"pass the vocab.txt of the {family.name} checkpoint")
    if config is None or not isinstance(tokenizer, HfTokenizer):
        return
    if tokenizer.vocab_size > config.vocab_size:
        raise fail(ConfigError, where, f"at most {config.vocab_size} tokens, the vocab_size of the config",
                   f"{tokenizer.vocab_size} tokens", "pass the tokenizer.json that came with the checkpoint")
    masked = families.pad_id(family, config)
    if tokenizer.pad_id != masked:
        raise fail(ConfigError, where, f"the padding id {masked} the model masks (the config's pad_token_id)",
                   f"the padding token {tokenizer.id_to_token(tokenizer.pad_id)!r} of id {tokenizer.pad_id}",
                   "pass the tokenizer.json that came with the checkpoint")
