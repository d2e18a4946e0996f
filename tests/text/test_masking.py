"""Whole-word masking (`kerasbert.text.masking`): the words of a text against the tokenizer's own ids and jieba's cut,
and the masks' statistics, wholeness and seeding on a generated corpus of a quarter of a million pieces."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.errors import ConfigError, DataError
from kerasbert.finetune.demo_data import LOCATIONS, ORGANIZATIONS, TIMES, ner_examples
from kerasbert.text.decoding import is_cjk
from kerasbert.text.masking import (
    MaskingRule,
    _choose,
    mask_batch,
    mask_whole_words,
    most_predictions,
    predicted_positions,
    row_rng,
    word_pieces,
)
from kerasbert.text.pre_tokenize import jieba_words
from kerasbert.text.tokenizer import Tokenizer

import helpers

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ENGLISH = ("playing", "played", "plays", "BERT", "models", "training", "trained", "tokenizer", "hello world", "GPU")
PIECES = ["play", "##ing", "##ed", "##s", "bert", "model", "train", "token", "##izer", "hello", "world", "gp", "##u",
          *"0123456789", *(f"##{d}" for d in "0123456789"), *"abcdefghijklmnopqrstuvwxyz"]
MAXLEN = 128


def sentences(n: int, seed: int = 0) -> list[str]:
    """Chinese sentences from the demo NER data with English words, numbers and punctuation put in."""
    rng = random.Random(seed)
    out = []
    for chars, _ in ner_examples(n, seed):
        text = "".join(chars)
        text += rng.choice(["，", "。", "！", ", "]) + rng.choice(TIMES) + rng.choice(["用", "和", "在"])
        text += f"{rng.choice(ENGLISH)}{rng.choice(['', ' '])}{rng.randint(0, 2024)}" + rng.choice(LOCATIONS)
        out.append(text + rng.choice(["的", "去了"]) + rng.choice(ORGANIZATIONS) + rng.choice(["。", "？", "!"]))
    return out


def vocabulary(texts: list[str]) -> list[str]:
    return SPECIALS + sorted({ch for text in texts for ch in text if not ch.isascii()} | set(",.!?")) + PIECES


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """``(tokenizer, token_ids [R, 128], word_ids [R, 128])``: sentences packed into rows of [CLS] pieces [SEP],
    each sentence's word ids offset past the row's earlier ones."""
    texts = sentences(7500)
    tokenizer = Tokenizer(helpers.write_vocab(str(tmp_path_factory.mktemp("masking")), vocabulary(texts)))
    rows, row_ids, row_words = [], [], []
    for text in texts:
        ids, words = word_pieces(tokenizer, text)
        if len(row_ids) + len(ids) > MAXLEN - 2:
            rows.append(([2, *row_ids, 3], [-1, *row_words, -1]))
            row_ids, row_words = [], []
        row_words += [word + (row_words[-1] + 1 if row_words else 0) for word in words]
        row_ids += ids
    token_ids, word_ids = np.zeros((len(rows), MAXLEN), np.int32), np.full((len(rows), MAXLEN), -1, np.int32)
    for i, (ids, words) in enumerate(rows):
        token_ids[i, :len(ids)], word_ids[i, :len(words)] = ids, words
    return tokenizer, token_ids, word_ids


def masked(tokenizer, token_ids, word_ids, rule, seed=(0, 0, 0)):
    return mask_batch(token_ids, word_ids, rule, seed, mask_id=tokenizer.token_to_id("[MASK]"),
                      vocab_size=tokenizer.vocab_size, special_ids=range(5))


def words_of(word_ids: np.ndarray) -> list[np.ndarray]:
    """The positions of each word of a row: runs of equal ids >= 0."""
    edges = np.flatnonzero(np.diff(np.concatenate([[-2], word_ids, [-2]]))).tolist()
    return [np.arange(a, b) for a, b in zip(edges, edges[1:], strict=False) if word_ids[a] >= 0]


def test_masks_follow_the_rates_on_a_real_size_corpus(corpus):
    tokenizer, token_ids, word_ids = corpus
    maskable = (word_ids >= 0) & (token_ids > 4)
    assert maskable.sum() >= 200_000 and not np.any(token_ids == 1)  # no [UNK]: every piece of the corpus is known
    inputs, labels = masked(tokenizer, token_ids, word_ids, MaskingRule(max_predictions=MAXLEN))
    chosen = labels > 0
    targets = np.maximum(1, np.round(maskable.sum(axis=1) * 0.15))  # the cap of 128 never binds
    assert np.all(chosen.sum(axis=1) <= targets) and chosen.sum() >= 0.99 * targets.sum()
    assert chosen.sum() / maskable.sum() == pytest.approx(0.15, abs=0.003)
    assert np.array_equal(labels[chosen], token_ids[chosen]) and not np.any(chosen & ~maskable)
    assert np.array_equal(inputs[~chosen], token_ids[~chosen])
    shown = inputs[chosen]
    as_mask, kept = shown == 4, shown == token_ids[chosen]
    replaced = ~as_mask & ~kept
    assert [as_mask.mean(), replaced.mean(), kept.mean()] == pytest.approx([0.8, 0.1, 0.1], abs=0.01)
    assert shown[replaced].min() > 4 and shown[replaced].max() < tokenizer.vocab_size


def test_words_are_masked_whole_and_alike(corpus):
    tokenizer, token_ids, word_ids = corpus
    inputs, labels = masked(tokenizer, token_ids[:400], word_ids[:400], MaskingRule(max_predictions=MAXLEN), seed=3)
    whole_chinese = 0
    for row in range(400):
        for positions in words_of(word_ids[row]):
            chosen, as_mask = labels[row, positions] > 0, inputs[row, positions] == 4
            assert chosen.all() or not chosen.any(), tokenizer.ids_to_tokens(token_ids[row, positions])
            assert as_mask.all() or not as_mask.any()
            pieces = tokenizer.ids_to_tokens(token_ids[row, positions])
            whole_chinese += bool(chosen.all() and len(pieces) > 1 and all(map(is_cjk, "".join(pieces))))
    assert whole_chinese > 500  # jieba's words of several characters, masked together


def test_the_cap_holds(corpus):
    tokenizer, token_ids, word_ids = corpus
    _, labels = masked(tokenizer, token_ids[:500], word_ids[:500], MaskingRule(max_predictions=5))
    counts = (labels > 0).sum(axis=1)
    assert counts.max() == 5 and (counts == 5).mean() > 0.95


@pytest.mark.parametrize("rate", [0.15, 0.2, 0.5])
def test_no_row_predicts_more_than_most_predictions_of_its_length(corpus, rate):
    """The bound that sizes the pretraining model's positions: a row's own maskable pieces give its count (met by
    nearly every row, a skipped long word aside), so its length, which is more, bounds it."""
    tokenizer, token_ids, word_ids = corpus
    rule = MaskingRule(rate=rate, max_predictions=MAXLEN)
    _, labels = masked(tokenizer, token_ids[:300], word_ids[:300], rule)
    counts, lengths = (labels > 0).sum(axis=1), (token_ids[:300] > 0).sum(axis=1)
    maskable = ((word_ids[:300] >= 0) & (token_ids[:300] > 4)).sum(axis=1)
    assert np.mean([c == most_predictions(rule, n) for c, n in zip(counts, maskable, strict=True)]) > 0.9
    assert all(c <= most_predictions(rule, n) <= most_predictions(rule, length)
               for c, n, length in zip(counts, maskable, lengths, strict=True))
    assert most_predictions(rule, MAXLEN) == round(MAXLEN * rate)  # 19 at 0.15: Google's 20 for 128, less its margin
    assert most_predictions(rule, 1) == 1 and most_predictions(MaskingRule(max_predictions=5), MAXLEN) == 5


def test_predicted_positions_hold_every_prediction_in_order(corpus):
    tokenizer, token_ids, word_ids = corpus
    _, labels = masked(tokenizer, token_ids[:64], word_ids[:64], MaskingRule())
    count = most_predictions(MaskingRule(), MAXLEN)
    positions, ids = predicted_positions(labels, count)
    assert positions.shape == ids.shape == (64, count)
    back = np.zeros_like(labels)
    np.put_along_axis(back, positions, ids, axis=1)  # the padding writes 0 at position 0, [CLS], never predicted
    np.testing.assert_array_equal(back, labels)
    assert all((np.diff(row[row > 0]) > 0).all() for row in positions)
    most = int((labels > 0).sum(axis=1).max())
    with pytest.raises(DataError, match=f"predicted_positions: count: expected at least the {most} pieces a row "
                                        f"predicts, found {most - 1}"):
        predicted_positions(labels, most - 1)


def test_masks_depend_on_the_seed_and_the_row_index_only(corpus):
    tokenizer, token_ids, word_ids = corpus
    rows, words, rule = token_ids[:16], word_ids[:16], MaskingRule()
    first = masked(tokenizer, rows, words, rule, seed=(7, 0, 0))
    assert all(np.array_equal(a, b) for a, b in zip(first, masked(tokenizer, rows, words, rule, (7, 0, 0)),
                                                    strict=True))
    later = masked(tokenizer, rows[10:], words[10:], rule, seed=(7, 0, 10))
    assert all(np.array_equal(a[10:], b) for a, b in zip(first, later, strict=True))
    next_epoch = masked(tokenizer, rows, words, rule, seed=(7, 1, 0))[1]
    assert np.mean([np.array_equal(a, b) for a, b in zip(first[1], next_epoch, strict=True)]) < 0.2
    as_int = masked(tokenizer, rows, words, rule, seed=7)[1]
    assert np.array_equal(as_int, masked(tokenizer, rows, words, rule, (7, 0))[1])  # an int s reads as (s, 0)
    inputs, labels = mask_whole_words(rows[3], words[3], rule, row_rng((7, 0, 0), 3), mask_id=4,
                                      vocab_size=tokenizer.vocab_size, special_ids=range(5))
    assert np.array_equal(inputs, first[0][3]) and np.array_equal(labels, first[1][3])


def test_a_word_holding_a_special_id_is_never_chosen():
    ids, words = np.array([2, 1, 10, 11, 12, 13, 3]), np.array([-1, 0, 0, 1, 2, 2, -1])  # [UNK] in word 0
    for seed in range(30):
        _, labels = mask_whole_words(ids, words, MaskingRule(rate=0.9), np.random.default_rng(seed), mask_id=4,
                                     vocab_size=30, special_ids=[0, 1, 2, 3, 4])
        assert labels.tolist() == [0, 0, 0, 11, 12, 13, 0]  # round(3 * 0.9) = 3: words 1 and 2, never 0


@settings(max_examples=50, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), max_size=30), target=st.integers(1, 40))
def test_words_are_taken_as_googles_loop_takes_them(lengths, target):
    expected, count = [], 0
    for index, length in enumerate(lengths):  # create_pretraining_data.py's loop over the shuffled words
        if count >= target:
            break
        if count + length > target:
            continue
        expected.append(index)
        count += length
    assert _choose(np.array(lengths, np.int64), target).tolist() == expected


TOKENS = [*SPECIALS, *"我们去北京大学中国人天气很好今恤，。", "t", "play", "##ing", "hello", "world", "3", "5", ".",
          ",", "a", "b", "ab", "##a", "##b", "0", "1", "##0", "##1", "cafe"]
TOKENIZER = Tokenizer({token: i for i, token in enumerate(TOKENS)})


@pytest.mark.parametrize(("text", "words"), [
    ("我们去北京大学，playing hello world 3.5", [["我", "们"], ["去"], ["北", "京", "大", "学"], ["，"],
                                                 ["play", "##ing"], ["hello"], ["world"], ["3"], ["."], ["5"]]),
    ("今天T恤Café", [["今", "天"], ["t"], ["恤"], ["cafe"]]),  # jieba's "T恤" mixes CJK and a letter: cut as BERT cuts
    ("  中国人 龘 abba!", [["中", "国"], ["人"], ["[UNK]"], ["ab", "##b", "##a"], ["[UNK]"]]),
])
def test_word_pieces_group_jiebas_words_and_bert_words(text, words):
    ids, word_ids = word_pieces(TOKENIZER, text)
    assert ids == TOKENIZER.encode(text)[0][1:-1]
    assert [TOKENIZER.ids_to_tokens(ids[a:a + len(w)]) for a, w in
            zip(np.cumsum([0] + [len(w) for w in words]), words, strict=False)] == words
    assert word_ids == [i for i, word in enumerate(words) for _ in word]


def test_word_pieces_without_chinese_words():
    assert word_pieces(TOKENIZER, "北京大学playing", segment=list)[1] == [0, 1, 2, 3, 4, 4]
    assert word_pieces(TOKENIZER, "北京 大学", segment=str.split)[1] == [0, 0, 1, 1]
    with pytest.raises(ConfigError, match="segment: expected words found in order in the text, found '大学' after "
                                          "character 4"):
        word_pieces(TOKENIZER, "大学北京", segment=lambda text: ["北京", "大学"])


@settings(max_examples=50, deadline=None)
@given(text=st.text(st.sampled_from("我们去北京大学中国人天气很好龘恤abtT01é .,，。!?Σ\t"), max_size=40))
def test_word_pieces_equal_the_tokenizers_ids(text):
    ids, word_ids = word_pieces(TOKENIZER, text)
    assert ids == TOKENIZER.encode(text)[0][1:-1]
    tokens = TOKENIZER.tokenize(text)[1:-1]
    # an independent reading of the words: a piece joins the one before when it is a ## piece, or when both are
    # characters of one jieba word made of CJK characters only (found through the characters rematch gives them)
    spans, start = {}, 0
    for index, word in enumerate(jieba_words(text)):
        if len(word) > 1 and all(map(is_cjk, word)):
            spans.update(dict.fromkeys(range(start, start + len(word)), index))
        start += len(word)
    where = [spans.get(chars[0], -1 - i) if len(chars) == 1 and is_cjk(text[chars[0]]) else -1 - i
             for i, chars in enumerate(TOKENIZER.rematch(text, tokens))]
    joins = [token.startswith("##") or where[i] == where[i - 1] for i, token in enumerate(tokens) if i]
    assert word_ids == list(np.cumsum([0] + [not join for join in joins]))[:len(ids)]


@pytest.mark.parametrize(("rule", "message"), [
    (MaskingRule(rate=0), r"--mask-rate: expected a share in \(0, 1\), e.g. 0.15, found 0"),
    (MaskingRule(rate=1.5), r"--mask-rate: expected a share in \(0, 1\), e.g. 0.15, found 1.5"),
    (MaskingRule(mask=-0.1), r"--mask-replace: expected a share in \[0, 1\], found -0.1"),
    (MaskingRule(random=2.0), r"--mask-random: expected a share in \[0, 1\], found 2.0"),
    (MaskingRule(mask=0.9, random=0.2), r"--mask-replace \+ --mask-random: expected at most 1 .*, found 0.9 \+ 0.2"),
    (MaskingRule(max_predictions=0), "--max-predictions: expected an int >= 1, found 0"),
    (MaskingRule(max_predictions=2.5), "--max-predictions: expected an int >= 1, found 2.5"),
])
def test_a_rule_out_of_range_names_its_option(rule, message):
    with pytest.raises(ConfigError, match=message):
        rule.check()
    with pytest.raises(ConfigError, match=message):
        mask_batch(np.zeros((1, 4), np.int32), np.zeros((1, 4), np.int32), rule, 0, mask_id=4, vocab_size=9,
                   special_ids=range(5))


def test_bad_arrays_and_seeds_are_refused():
    ids = np.array([[2, 5, 3]])
    with pytest.raises(DataError, match=r"token_ids, word_ids: expected .* found shapes \(1, 3\) and \(3,\)"):
        mask_batch(ids, ids[0], MaskingRule(), 0, mask_id=4, vocab_size=9, special_ids=range(5))
    with pytest.raises(ConfigError, match=r"seed: expected an int >= 0 .* found \(1, -2\)"):
        mask_batch(ids, ids, MaskingRule(), (1, -2), mask_id=4, vocab_size=9, special_ids=range(5))
    with pytest.raises(ConfigError, match="expected a \\[MASK\\] id in the vocabulary and ids besides the special"):
        mask_batch(ids, ids, MaskingRule(), 0, mask_id=4, vocab_size=5, special_ids=range(5))
