"""Words before word pieces: bert4keras's ``pre_tokenize``, for vocabularies of whole words.

RoFormer's Chinese checkpoints (``chinese_roformer_L-12_H-768_A-12``, ``junnyu/roformer_chinese_base``) read a
vocabulary of 50,000 words and characters, and are fed text cut into words by jieba first:
``Tokenizer(vocab, pre_tokenize=jieba_words)``. A word the vocabulary holds is then one token; any other is
tokenized as BERT tokenizes text (each CJK character a token, other words split into word pieces), as
bert4keras's ``Tokenizer(..., pre_tokenize=...)`` does.

The cutting runs in Python (jieba is a Python library) before the Rust ``tokenizers`` find the word pieces:
`PreTokenized` rewrites the text so that the words of the vocabulary stand between spaces, and the Rust tokenizer
keeps its own serializable whitespace pre-tokenizer. An in-graph tokenizer (a SavedModel that reads strings)
has no such step: it would tokenize such text character by character.

Example:
>>> from kerasbert.text.tokenizer import Tokenizer
>>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "北京", "北", "京", "大", "学"]
>>> vocab = {t: i for i, t in enumerate(tokens)}
>>> Tokenizer(vocab).tokenize("北京大学")
['[CLS]', '北', '京', '大', '学', '[SEP]']
>>> Tokenizer(vocab, pre_tokenize=lambda text: ["北京", "大学"]).tokenize("北京大学")
['[CLS]', '北京', '大', '学', '[SEP]']
"""

from __future__ import annotations

import functools
import logging
import unicodedata
from collections.abc import Callable, Container, Iterable
from types import ModuleType

from kerasbert.choices import PRE_TOKENIZERS
from kerasbert.errors import ConfigError, fail

PreTokenize = Callable[[str], Iterable[str]]  # text -> its words, in order (jieba.cut)
# whole words of two or more CJK characters beyond which a vocabulary is a word vocabulary (BERT's Chinese
# vocabularies hold single characters; RoFormer's holds tens of thousands of words)
WORD_VOCABULARY = 1000
PRE_TOKENIZE_NEEDS = ("pre_tokenize", "pip install 'kerasbert[chinese]' (or pip install jieba)")  # who, the way out


def _cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf"


def refuse_word_vocabulary(tokens: Iterable[str], where: str) -> None:
    """A ConfigError where ``tokens`` (a vocabulary, from ``where``) holds more than `WORD_VOCABULARY` whole
    Chinese words: text tokenized without `jieba_words` would never reach them, and the ids would be silently wrong.

    Example:
    >>> refuse_word_vocabulary(["[PAD]", "北", "京", "北京"], "vocab.txt")
    >>> refuse_word_vocabulary([f"{chr(0x4e00 + i)}{chr(0x4e00 + i)}" for i in range(1001)], "words.txt")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: words.txt: expected a vocabulary of characters and word pieces, found 1001 whole \
Chinese words (a word-level vocabulary, as RoFormer's or T5 PEGASUS's). cut the texts into words first: kerasbert \
train --pre-tokenize jieba (cls, seq2seq), or Tokenizer(vocab, pre_tokenize=jieba_words) in Python
    """
    words = sum(1 for token in tokens if len(token) > 1 and all(map(_cjk, token)))
    if words > WORD_VOCABULARY:
        raise fail(ConfigError, where, "a vocabulary of characters and word pieces", f"{words} whole Chinese words (a "
                   "word-level vocabulary, as RoFormer's or T5 PEGASUS's)", "cut the texts into words first: kerasbert "
                   "train --pre-tokenize jieba (cls, seq2seq), or Tokenizer(vocab, pre_tokenize=jieba_words) in Python")


def jieba_words(text: str, needs: tuple[str, str] = PRE_TOKENIZE_NEEDS) -> list[str]:
    """The words of ``text`` as jieba cuts them with its HMM off (``jieba.cut(text, HMM=False)``): only words of
    jieba's dictionary, no guessed new ones, as bert4keras's RoFormer examples cut their text.

    Needs the ``jieba`` package (``pip install 'kerasbert[chinese]'``); where it is missing, a ConfigError names
    ``needs``: what needs it and the way out (`require_jieba`), ``pre_tokenize`` unless a caller says otherwise.

    Example:
    >>> jieba_words("我们去北京大学")
    ['我们', '去', '北京大学']
    """
    return list(require_jieba(*needs).cut(text, HMM=False))


def pre_tokenizer(name: str | None) -> PreTokenize | None:
    """The ``pre_tokenize`` function a run's ``--pre-tokenize`` names (`kerasbert.choices.PRE_TOKENIZERS`):
    `jieba_words` for ``"jieba"``, None for None (word pieces alone); a ConfigError for another name.

    Example:
    >>> pre_tokenizer("jieba")("北京大学"), pre_tokenizer(None)
    (['北京大学'], None)
    """
    if name is None:
        return None
    if name not in PRE_TOKENIZERS:
        raise fail(ConfigError, "--pre-tokenize", " or ".join(PRE_TOKENIZERS), repr(name))
    return functools.partial(jieba_words, needs=("--pre-tokenize jieba", PRE_TOKENIZE_NEEDS[1]))


@functools.cache
def require_jieba(needed_by: str, hint: str) -> ModuleType:
    """The jieba module with its logger at warnings (at info it prints four lines as it builds its dictionary); a
    ConfigError naming ``needed_by``, what needs it, with ``hint`` where it is not installed.

    Example:
    >>> require_jieba("whole-word masking", "pip install jieba, or pass --no-whole-word").__name__
    'jieba'
    """
    try:
        import jieba
    except ImportError:
        raise fail(ConfigError, needed_by, "the jieba package (Chinese word segmentation)", "it is not installed",
                   hint) from None
    jieba.setLogLevel(logging.WARNING)
    return jieba


def _lowercase_and_normalize(text: str) -> str:
    """Lower-cased, decomposed (NFD), nonspacing marks dropped: the text an uncased tokenizer cuts into words."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(ch) != "Mn")


class PreTokenized:
    """``text -> normalized text`` for the word pieces, with ``pre_tokenize``'s words of the vocabulary kept whole.

    The text (lower-cased and stripped of accents with ``lowercase``) is cut by ``pre_tokenize``; each word the
    vocabulary holds stays as it is, any other is ``normalize``d (its CJK characters and punctuation spaced
    apart); the words are joined by spaces. The Rust WordPiece model then reads each word of the vocabulary as
    one token (it tries the whole word first).

    Args:
        pre_tokenize: callable. ``text -> words`` (e.g. `jieba_words`).
        vocabulary: container of str. the tokens of the vocabulary.
        lowercase: bool. the tokenizer's ``do_lower_case``.
        normalize: callable. ``(text, lowercase) -> text``, `kerasbert.text.tokenizer.normalize`.

    Example:
    >>> from kerasbert.text.tokenizer import normalize
    >>> PreTokenized(str.split, {"ab"}, True, normalize)("AB abc 中国")
    'ab abc  中  国 '
    """

    def __init__(self, pre_tokenize: PreTokenize, vocabulary: Container[str], lowercase: bool,
                 normalize: Callable[[str, bool], str]) -> None:
        if not callable(pre_tokenize):
            raise fail(ConfigError, "pre_tokenize", "a function from a text to its words (jieba_words)",
                       repr(pre_tokenize))
        self.pre_tokenize, self.vocabulary, self.lowercase, self.normalize = (pre_tokenize, vocabulary, lowercase,
                                                                              normalize)

    def __call__(self, text: str) -> str:
        text = _lowercase_and_normalize(text) if self.lowercase else text
        return " ".join(word if word in self.vocabulary else self.normalize(word, self.lowercase)
                        for word in self.pre_tokenize(text))
