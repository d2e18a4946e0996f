"""Masked-LM targets with whole-word masking: which word pieces a pre-training row hides, and what it shows instead.

The rules are those of Google BERT's ``create_pretraining_data.py`` with ``do_whole_word_mask``: a row predicts
``min(max_predictions, max(1, round(n * rate)))`` pieces, whole words taken in a random order, a word skipped when
it would overshoot the count. Of the chosen words 80 % show ``[MASK]``, 10 % random pieces and 10 % themselves.

Where kerasbert departs from Google's script, and why:

- the 80/10/10 choice is made once per word, so all pieces of a word are masked, or all random, or all kept (Google
  draws it per piece). That is what the Chinese whole-word-masking models (HFL's Chinese BERT-wwm) do: a word
  half shown and half masked would give its masked characters away.
- ``n`` counts the maskable pieces only (Google counts ``[CLS]`` and ``[SEP]`` too).
- a random replacement is drawn uniformly from the vocabulary without the special ids ([PAD], [UNK], [CLS],
  [SEP], [MASK]): they are never the input of a real word (Google and Hugging Face draw from the whole vocabulary).
- a word holding a special id (an ``[UNK]`` piece) is never chosen: there is nothing to learn in predicting it.

Words come from `word_pieces`: Chinese words as jieba cuts them (each cut of two or more CJK characters is one
word), other words as BERT's tokenizer cuts them (a run of letters and digits with its ``##`` pieces, each
punctuation mark); with a Hugging Face ``tokenizer.json`` (`hf_word_pieces`) as its pieces mark them (byte-level
BPE's ``Ġ`` and SentencePiece's ``▁`` begin a word, WordPiece's ``##`` continues one). NumPy only: no TensorFlow
here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.text.decoding import is_cjk
from kerasbert.text.pre_tokenize import jieba_words, require_jieba
from kerasbert.text.tokenizer import Tokenizer

Segment = Callable[[str], Sequence[str]]  # text -> its words in order (jieba_words)
_is_cjk = functools.cache(is_cjk)  # per character, as jieba's words and the pieces are read
WHOLE_WORD_NEEDS = ("whole-word masking", 'pip install -e ".[chinese]" (or pip install jieba), or pass '
                    "--no-whole-word (whole_word=False) to mask single characters")  # where jieba is missing
_whole_words = functools.partial(jieba_words, needs=WHOLE_WORD_NEEDS)


def require_segmenter() -> None:
    """A ConfigError naming whole-word masking and its way out unless jieba, which cuts its Chinese words, is there;
    checked before a corpus is read."""
    require_jieba(*WHOLE_WORD_NEEDS)


def _cjk_groups(text: str, words: Sequence[str]) -> list[int]:
    """For each CJK character of ``text`` in order, the index of the word of ``words`` holding it when that word is
    two or more CJK characters and nothing else, else -1."""
    group_at, position = [-1] * len(text), 0
    for index, word in enumerate(words):
        start = text.find(word, position)
        if start < 0:
            raise fail(ConfigError, "word_pieces: segment", "words found in order in the text",
                       f"{word!r} after character {position} of {text!r}", "return pieces of the text itself")
        position = start + len(word)
        if len(word) > 1 and all(map(_is_cjk, word)):
            group_at[start:position] = [index] * len(word)
    return [group for ch, group in zip(text, group_at, strict=True) if _is_cjk(ch)]


def word_pieces(tokenizer: Tokenizer, text: str, segment: Segment | None = None) -> tuple[list[int], list[int]]:
    """The word-piece ids of ``text`` (without [CLS] and [SEP]) and the index of the whole word of each piece.

    The ids are ``tokenizer.encode(text)[0][1:-1]``. A word is what BERT's tokenizer splits apart (a run of
    letters and digits with its ``##`` pieces, each punctuation mark, each CJK character), except that the CJK
    characters of one ``segment`` word of two or more CJK characters and nothing else are one word: Chinese
    whole-word masking. A segment word that mixes CJK with other characters (jieba's "T恤") is cut as BERT cuts
    it. For no Chinese word grouping pass ``segment=list`` (each character alone); ``lambda text: [text]`` would
    make a text of CJK characters only one word. The tokenizer is one of characters and word pieces (BERT's
    vocabularies; no ``pre_tokenize``).

    Args:
        tokenizer: Tokenizer. gives the pieces.
        text: str. one text.
        segment: callable or None. ``text -> words`` in order, pieces of ``text`` itself (what lies between them
            is skipped); None: `kerasbert.text.pre_tokenize.jieba_words`.

    Returns:
        ``(ids, word_ids)``: two lists as long as each other, ``word_ids`` counting 0, 1, 2, ... in order.

    Example:
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"我们去北京大学，", "play", "##ing"]
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(vocab)})
    >>> word_pieces(tokenizer, "我们去北京大学，playing")
    ([5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [0, 0, 1, 2, 2, 2, 2, 3, 4, 4])
    >>> word_pieces(tokenizer, "我们去北京大学，playing", segment=list)[1]
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 8]
    """
    if hasattr(tokenizer, "model_type"):  # a tokenizer.json (`kerasbert.text.hf_tokenizer.HfTokenizer`)
        return hf_word_pieces(tokenizer, text, whole_word=segment is not list)
    tokens = tokenizer.tokenize(text)[1:-1]
    groups = _cjk_groups(text, (_whole_words if segment is None else segment)(text))
    word_ids: list[int] = []
    cursor, previous, words = 0, -1, 0
    for token in tokens:
        count = sum(map(_is_cjk, token))  # CJK characters the piece stands for ([UNK] pieces keep their text)
        group = groups[cursor] if count else -1
        cursor += count
        joins = bool(word_ids) and (token.startswith("##") or group >= 0 and group == previous)
        word_ids.append(word_ids[-1] if joins else words)
        words += not joins
        previous = group
    return tokenizer.tokens_to_ids(tokens), word_ids


WORD_MARKS = ("Ġ", "▁")  # byte-level BPE's and SentencePiece's mark of a piece that follows a space


def hf_word_pieces(tokenizer, text: str, whole_word: bool = True) -> tuple[list[int], list[int]]:
    """`word_pieces` with a Hugging Face ``tokenizer.json``: its piece ids of ``text`` (no special tokens) and the
    word of each piece. A piece begins a word at the start of the text, where it is marked as following a space
    (byte-level BPE's ``Ġ``, SentencePiece's ``▁``), where there is text skipped before it (a space that a
    WordPiece pre-tokenizer drops), and at each CJK character (one a word, as BERT's); otherwise it continues the
    word before it (WordPiece: a piece not ``##`` begins a word). ``whole_word`` False: each piece its own word.

    Example:
    >>> from tokenizers import Tokenizer as Rust, models, pre_tokenizers
    >>> import os, tempfile
    >>> from kerasbert.text.hf_tokenizer import HfTokenizer
    >>> pieces = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "▁play", "ing", "▁go"]
    >>> rust = Rust(models.Unigram([(piece, -1.0) for piece in pieces], unk_id=3))
    >>> rust.pre_tokenizer = pre_tokenizers.Metaspace()
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> rust.save(path)
    >>> hf_word_pieces(HfTokenizer(path), "playing go")
    ([5, 6, 7], [0, 0, 1])
    """
    [(ids, spans)] = tokenizer.offsets([text])
    tokens, word_ids, end, was_cjk = tokenizer.ids_to_tokens(ids), [], 0, False
    wordpiece = tokenizer.model_type == "wordpiece"
    for token, (start, stop) in zip(tokens, spans, strict=True):
        cjk = start < len(text) and _is_cjk(text[start])
        if wordpiece:
            joins = token.startswith("##")
        else:
            joins = not token.startswith(WORD_MARKS) and start <= end and not (cjk or was_cjk)
        joins = joins and whole_word and bool(word_ids)
        word_ids.append(word_ids[-1] if joins else (word_ids[-1] + 1 if word_ids else 0))
        end, was_cjk = max(end, stop), cjk
    return list(ids), word_ids


@dataclasses.dataclass(frozen=True)
class MaskingRule:
    """How many pieces a masked-LM row predicts and what it shows at them.

    Args:
        rate: float. the share of maskable pieces to predict, in (0, 1) (``--mask-rate``; Google's
            ``masked_lm_prob``).
        mask: float. the share of chosen words shown as ``[MASK]`` (``--mask-replace``).
        random: float. the share shown as random pieces (``--mask-random``); the rest are shown unchanged.
        max_predictions: int. the most pieces a row predicts (``--max-predictions``; Google's
            ``max_predictions_per_seq``, 20 for rows of 128 pieces: about ``rate * maxlen``).

    Example:
    >>> MaskingRule(rate=0.2).check()
    >>> MaskingRule(mask=0.9, random=0.2).check()
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --mask-replace + --mask-random: expected at most 1 (the rest keeps the piece), \
found 0.9 + 0.2 = 1.1
    """

    rate: float = 0.15
    mask: float = 0.8
    random: float = 0.1
    max_predictions: int = 20

    def check(self) -> None:
        """A ConfigError naming the option when a value is out of range."""
        if not 0 < self.rate < 1:
            raise fail(ConfigError, "--mask-rate", "a share in (0, 1), e.g. 0.15", repr(self.rate))
        for option, value in (("--mask-replace", self.mask), ("--mask-random", self.random)):
            if not 0 <= value <= 1:
                raise fail(ConfigError, option, "a share in [0, 1]", repr(value))
        if self.mask + self.random > 1:
            raise fail(ConfigError, "--mask-replace + --mask-random", "at most 1 (the rest keeps the piece)",
                       f"{self.mask} + {self.random} = {self.mask + self.random:g}")
        if isinstance(self.max_predictions, bool) or not isinstance(self.max_predictions, int | np.integer) \
                or self.max_predictions < 1:
            raise fail(ConfigError, "--max-predictions", "an int >= 1", repr(self.max_predictions))


@dataclasses.dataclass(frozen=True)
class _Vocabulary:
    """The ids a random replacement is drawn from: ``0 .. size - 1`` without the sorted ``specials``."""

    size: int
    mask_id: int
    specials: np.ndarray

    @classmethod
    def of(cls, mask_id: int, vocab_size: int, special_ids: Sequence[int]) -> _Vocabulary:
        specials = np.unique(np.asarray(special_ids, np.int64))
        specials = specials[(specials >= 0) & (specials < vocab_size)]
        if vocab_size - len(specials) < 1 or not 0 <= mask_id < vocab_size:
            raise fail(ConfigError, "mask_id, vocab_size, special_ids", "a [MASK] id in the vocabulary and ids "
                       "besides the special ones", f"mask_id {mask_id}, {vocab_size} ids, {len(specials)} special")
        return cls(vocab_size, mask_id, specials)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` ids drawn uniformly from the ids that are not special."""
        drawn = rng.integers(0, self.size - len(self.specials), count)
        # the k-th id that is not special: k plus the specials at or below it
        return drawn + np.searchsorted(self.specials - np.arange(len(self.specials)), drawn, side="right")


def _words(token_ids: np.ndarray, word_ids: np.ndarray, special_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lengths)`` of the maskable words of a row: runs of equal word ids >= 0 holding no special id."""
    valid = word_ids >= 0
    first = valid & np.concatenate([[True], word_ids[1:] != word_ids[:-1]])
    run = np.cumsum(first) - 1  # the word of each position (where valid)
    starts = np.flatnonzero(first)
    lengths = np.bincount(run[valid], minlength=len(starts))
    spoilt = np.zeros(len(starts), bool)
    spoilt[run[valid & np.isin(token_ids, special_ids)]] = True
    return starts[~spoilt], lengths[~spoilt]


def _choose(lengths: np.ndarray, target: int) -> np.ndarray:
    """Indices of the words taken in order until ``target`` pieces: a word that would overshoot is skipped, as
    Google's loop skips it (``lengths`` already shuffled)."""
    total = np.cumsum(lengths)
    taken = int(np.searchsorted(total, target, side="right"))  # the words that fit one after another
    chosen, left = list(range(taken)), target - (int(total[taken - 1]) if taken else 0)
    position = taken + 1  # the word at `taken` overshoots; later short ones may still fit
    while left > 0:
        fits = np.flatnonzero(lengths[position:] <= left)
        if not len(fits):
            break
        chosen.append(position + int(fits[0]))
        left -= int(lengths[chosen[-1]])
        position = chosen[-1] + 1
    return np.asarray(chosen, np.int64)


def most_predictions(rule: MaskingRule, length: int) -> int:
    """The most pieces a row of ``length`` maskable pieces predicts: ``min(max_predictions, max(1, round(length *
    rate)))``; a row's chosen words never pass it (`_choose` skips a word that would), and it never falls as
    ``length`` grows, so for rows of at most ``length`` pieces it is the most any of them predicts.

    Example:
    >>> most_predictions(MaskingRule(), 128), most_predictions(MaskingRule(max_predictions=5), 128)
    (19, 5)
    """
    return min(rule.max_predictions, max(1, int(round(length * rule.rate))))


def predicted_positions(labels: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions of each row's predicted pieces (``labels`` not 0) and their ids, in order, each row padded with
    position 0 and id 0 (not predicted) to ``count``: Google's ``masked_lm_positions`` and ``masked_lm_ids``.

    Args:
        labels: int array [B, S]. `mask_batch`'s labels.
        count: int. the width of the result, at least the most pieces a row predicts (`most_predictions`).

    Returns:
        ``(positions, ids)``: two int arrays [B, count]. A row predicting more than ``count`` pieces is a DataError:
        no prediction is dropped.

    Example:
    >>> predicted_positions(np.array([[0, 7, 0, 9], [0, 0, 5, 0]]), 3)
    (array([[1, 3, 0],
           [2, 0, 0]]), array([[7, 9, 0],
           [5, 0, 0]]))
    """
    labels = np.asarray(labels)
    rows, columns = np.nonzero(labels)
    counts = np.bincount(rows, minlength=len(labels))
    if counts.size and counts.max() > count:
        raise fail(DataError, "predicted_positions: count", f"at least the {counts.max()} pieces a row predicts",
                   str(count), "size it with most_predictions(rule, the batch's length)")
    slots = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)  # each piece's place in its row
    positions, ids = np.zeros((len(labels), count), labels.dtype), np.zeros((len(labels), count), labels.dtype)
    positions[rows, slots], ids[rows, slots] = columns, labels[rows, columns]
    return positions, ids


def _mask_row(token_ids: np.ndarray, word_ids: np.ndarray, rule: MaskingRule, rng: np.random.Generator,
              vocab: _Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """`mask_whole_words` of one row, its arguments checked."""
    inputs, labels = token_ids.copy(), np.zeros_like(token_ids)
    starts, lengths = _words(token_ids, word_ids, vocab.specials)
    if not len(starts):
        return inputs, labels
    target = most_predictions(rule, int(lengths.sum()))
    order = rng.permutation(len(starts))
    chosen = order[_choose(lengths[order], target)]
    treatment = np.searchsorted([rule.mask, rule.mask + rule.random], rng.random(len(chosen)), side="right")
    counts = lengths[chosen]
    # the positions of the chosen words' pieces, and the treatment of each (0 [MASK], 1 random, 2 kept)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    positions, treatment = np.repeat(starts[chosen], counts) + offsets, np.repeat(treatment, counts)
    labels[positions] = token_ids[positions]
    random_ids = vocab.draw(rng, len(positions))
    inputs[positions] = np.where(treatment == 0, vocab.mask_id,
                                 np.where(treatment == 1, random_ids, token_ids[positions]))
    return inputs, labels


def _check_shapes(token_ids: np.ndarray, word_ids: np.ndarray, rank: int) -> None:
    if token_ids.ndim != rank or token_ids.shape != word_ids.shape:
        raise fail(DataError, "token_ids, word_ids", f"two int arrays of one shape with {rank} dimension(s)",
                   f"shapes {token_ids.shape} and {word_ids.shape}")


def mask_whole_words(token_ids: np.ndarray, word_ids: np.ndarray, rule: MaskingRule, rng: np.random.Generator, *,
                     mask_id: int, vocab_size: int, special_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Masked-LM inputs and labels of one row, whole words chosen by Google's rule (module docstring).

    Args:
        token_ids: int array [S]. the row's ids.
        word_ids: int array [S]. the word of each piece (`word_pieces`'s); -1 at [CLS], [SEP] and padding, never
            masked. A word is a run of equal ids: rows packed from several texts separate them by -1 or offset
            their word ids.
        rule: MaskingRule. the rates and the cap.
        rng: np.random.Generator. the randomness.
        mask_id: int. the id of [MASK].
        vocab_size: int. random pieces are drawn from ``0 .. vocab_size - 1``...
        special_ids: list of int. ...without these ([PAD], [UNK], [CLS], [SEP], [MASK]); a word holding one is
            never chosen.

    Returns:
        ``(inputs, labels)``: arrays like ``token_ids``; ``labels`` holds the original id at the chosen positions
        and 0 ([PAD], not predicted) elsewhere.

    Example:
    >>> ids, words = np.array([2, 10, 11, 12, 13, 14, 3]), np.array([-1, 0, 0, 1, 2, 2, -1])
    >>> inputs, labels = mask_whole_words(ids, words, MaskingRule(rate=0.4), np.random.default_rng(0), mask_id=4,
    ...                                   vocab_size=20, special_ids=[0, 1, 2, 3, 4])
    >>> int((labels > 0).sum()), bool(((labels > 0) == (inputs != ids)).all())
    (2, True)
    """
    rule.check()
    token_ids, word_ids = np.asarray(token_ids), np.asarray(word_ids)
    _check_shapes(token_ids, word_ids, 1)
    return _mask_row(token_ids, word_ids, rule, rng, _Vocabulary.of(mask_id, vocab_size, special_ids))


def row_rng(seed: int | Sequence[int], row: int) -> np.random.Generator:
    """The generator of the ``row``-th row of a batch seeded ``seed``: ``SeedSequence([*seed[:-1], seed[-1] + row])``,
    the last entry of ``seed`` being the index of the batch's first row (an int ``s`` reads as ``(s, 0)``).

    Example:
    >>> row_rng((7, 0, 32), 1).random() == row_rng((7, 0, 0), 33).random()
    True
    """
    seed = (seed, 0) if isinstance(seed, int | np.integer) else tuple(seed)
    if not seed or not all(isinstance(s, int | np.integer) and s >= 0 for s in seed):
        raise fail(ConfigError, "seed", "an int >= 0 or a sequence of them (run seed, epoch, first row)", repr(seed))
    return np.random.default_rng(np.random.SeedSequence([*map(int, seed[:-1]), int(seed[-1]) + row]))


def mask_batch(token_ids: np.ndarray, word_ids: np.ndarray, rule: MaskingRule, seed: int | Sequence[int], *,
               mask_id: int, vocab_size: int, special_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """`mask_whole_words` of each row of a batch, row ``i`` with its own generator `row_rng(seed, i)`.

    With ``seed=(run_seed, epoch, first_row_index)`` a row's masks depend only on the run seed, the epoch and the
    row's index in the epoch: the same in whatever batch the row sits, new in every epoch.

    Args:
        token_ids: int array [B, S]. the rows' ids.
        word_ids: int array [B, S]. the word of each piece, -1 where never masked.
        rule: MaskingRule. the rates and the cap.
        seed: int or sequence of int. the seed, its last entry the index of the first row.
        mask_id: int. the id of [MASK].
        vocab_size: int. the size of the vocabulary.
        special_ids: list of int. ids never drawn as random pieces, nor masked.

    Returns:
        ``(inputs, labels)``: two arrays [B, S], as `mask_whole_words` gives for each row.

    Example:
    >>> ids = np.array([[2, 10, 11, 12, 3], [2, 13, 14, 3, 0]])
    >>> words = np.array([[-1, 0, 1, 1, -1], [-1, 0, 1, -1, -1]])
    >>> inputs, labels = mask_batch(ids, words, MaskingRule(), seed=(0, 1, 64), mask_id=4, vocab_size=20,
    ...                             special_ids=[0, 1, 2, 3, 4])
    >>> (labels > 0).sum(axis=1).tolist()
    [1, 1]
    """
    rule.check()
    token_ids, word_ids = np.asarray(token_ids), np.asarray(word_ids)
    _check_shapes(token_ids, word_ids, 2)
    vocab = _Vocabulary.of(mask_id, vocab_size, special_ids)
    inputs, labels = np.empty_like(token_ids), np.empty_like(token_ids)
    for row in range(len(token_ids)):
        inputs[row], labels[row] = _mask_row(token_ids[row], word_ids[row], rule, row_rng(seed, row), vocab)
    return inputs, labels
