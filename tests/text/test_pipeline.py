"""Encoding, word-piece label alignment, span decoding and tf.data batches."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest

from kerasbert.errors import ConfigError, DataError
from kerasbert.text.ner_readers import read_conll, span_example
from kerasbert.text.pipeline import (
    Features,
    bucket_length,
    decode_ner,
    encode_classification,
    encode_ner,
    length_buckets,
    ner_tag_set,
    text_example,
    to_dataset,
)
from kerasbert.text.readers import ClassificationExample, LabelSet
from kerasbert.text.tokenizer import Tokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "sm", "##ith", "met", "in", "new", "york", "##er",
         "张", "三", "在", "北", "京", "工", "作", ".", "a", "b", "##s"]
CONLL = ("John B-PER\nSmith E-PER\nmet O\nNew B-LOC\nYorkers E-LOC\nin O\n北 S-LOC\n.\tO\n\n"
         "张 B-PER\n三 E-PER\n在 O\n北 B-LOC\n京 E-LOC\n工 O\n作 O\n")


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer({token: i for i, token in enumerate(VOCAB)})


@pytest.fixture
def examples(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL, encoding="utf-8")
    return read_conll(str(path))


def test_first_piece_carries_the_tag(tokenizer, examples):
    tags = ner_tag_set(examples)
    assert tags.labels == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    softmax = encode_ner(tokenizer, examples, tags)
    # [CLS] john sm ##ith met new york ##er ##s in 北 . [SEP]
    assert softmax.token_ids[0] == [2, 5, 6, 7, 8, 10, 11, 12, 23, 9, 16, 20, 3]
    assert softmax.first_pieces[0] == [1, 2, 4, 5, 6, 9, 10, 11]
    assert softmax.labels[0] == [0, 3, 4, 0, 0, 1, 2, 0, 0, 0, 1, 0, 0]
    assert softmax.weights[0] == [0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0]
    crf = encode_ner(tokenizer, examples, tags, crf=True)
    assert crf.weights is None
    assert crf.labels[0] == [0, 3, 4, 4, 0, 1, 2, 2, 2, 0, 1, 0, 0]  # pieces continue their word's tag


@pytest.mark.parametrize("crf", [False, True])
def test_round_trip_gold_labels_give_back_gold_spans(tokenizer, examples, crf):
    tags = ner_tag_set(examples)
    features = encode_ner(tokenizer, examples, tags, crf=crf)
    for example, labels, firsts in zip(examples, features.labels, features.first_pieces, strict=True):
        spans = decode_ner(labels, firsts, example.offsets, tags)
        assert spans == example.spans
        assert [example.text[a:b] for a, b, _ in spans] == [text for text, _ in example.entities()]
    assert examples[0].entities() == [("John Smith", "PER"), ("New Yorkers", "LOC"), ("北", "LOC")]


def test_round_trip_random_spans(tokenizer):
    rng = random.Random(0)
    words = ["john", "smith", "北", "京", "yorker", "in", "a"]
    examples = []
    for _ in range(50):
        tokens = [rng.choice(words) for _ in range(rng.randint(1, 12))]
        text, offsets, position = " ".join(tokens), [], 0
        for token in tokens:
            offsets.append((position, position + len(token)))
            position += len(token) + 1
        spans, i = [], 0
        while i < len(tokens):
            length = rng.randint(1, 3)
            if rng.random() < 0.4 and i + length <= len(tokens):
                spans.append((offsets[i][0], offsets[i + length - 1][1], rng.choice(["PER", "LOC"])))
                i += length
            else:
                i += 1
        examples.append(span_example(text, spans, tokens="word"))
    tags = ner_tag_set(examples)
    features = encode_ner(tokenizer, examples, tags)
    decoded = [decode_ner(labels, firsts, example.offsets, tags)
               for example, labels, firsts in zip(examples, features.labels, features.first_pieces, strict=True)]
    assert decoded == [example.spans for example in examples]


def test_maxlen_cuts_whole_words_and_reports(tokenizer, examples, caplog):
    tags = ner_tag_set(examples)
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        features = encode_ner(tokenizer, examples, tags, maxlen=6, what="train.txt")
    assert "train.txt: 2 of 2 examples are longer than maxlen=6" in caplog.text
    assert features.truncated == 2
    # john sm ##ith met fits (5 + [SEP] = 6); "new york ##er" does not
    assert features.token_ids[0] == [2, 5, 6, 7, 8, 3]
    assert features.first_pieces[0] == [1, 2, 4, -1, -1, -1, -1, -1]
    assert decode_ner(features.labels[0], features.first_pieces[0], examples[0].offsets, tags) == [(0, 10, "PER")]
    assert all(len(row) <= 6 for row in features.token_ids)


def test_unknown_entity_type_is_an_error(tokenizer, examples):
    with pytest.raises(DataError, match=r"label: expected one of \['O', 'B-PER', 'I-PER'\], found 'B-LOC'"):
        encode_ner(tokenizer, examples, LabelSet(["O", "B-PER", "I-PER"]))


def test_raw_text_predictions_map_to_character_offsets(tokenizer):
    text = "John  Smíth met 北京 in New-York."
    example = text_example(tokenizer, text)
    assert example.tokens == ["John", "Smíth", "met", "北", "京", "in", "New", "-", "York", "."]
    tags = LabelSet(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"])
    features = encode_ner(tokenizer, [example])
    predicted = [0] * len(features.token_ids[0])
    firsts = features.first_pieces[0]
    for word, tag in [(0, 3), (1, 4), (3, 1), (4, 2), (6, 1), (7, 2), (8, 2)]:
        predicted[firsts[word]] = tag
    spans = decode_ner(predicted, firsts, example.offsets, tags)
    assert [(text[a:b], label) for a, b, label in spans] == [("John  Smíth", "PER"), ("北京", "LOC"),
                                                             ("New-York", "LOC")]


def test_empty_words_get_unk(tokenizer):
    assert tokenizer.encode_words([["\u200b", "john", "\x00"]]) == [[[1], [5], [1]]]


def test_classification_truncation_equals_encode(tokenizer, caplog):
    rng = random.Random(1)
    pieces = ["a", "b", "john", "smith", "北京"]
    rows = [ClassificationExample(" ".join(rng.choices(pieces, k=rng.randint(1, 9))), "x",
                                  " ".join(rng.choices(pieces, k=rng.randint(1, 9)))) for _ in range(40)]
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        features = encode_classification(tokenizer, rows, LabelSet(["x"]), maxlen=8, what="dev.tsv")
    expected = [tokenizer.encode(row.text, row.text_b, maxlen=8) for row in rows]
    assert features.token_ids == [ids for ids, _ in expected]
    assert features.segment_ids == [segments for _, segments in expected]
    longer = sum(len(tokenizer.encode(row.text, row.text_b)[0]) > 8 for row in rows)
    assert features.truncated == longer > 0
    assert f"dev.tsv: {longer} of 40 examples are longer than maxlen=8" in caplog.text


def test_mixed_pairs_and_bad_maxlen(tokenizer):
    rows = [ClassificationExample("a", "x", "b", line=1), ClassificationExample("a", "x", line=2)]
    with pytest.raises(DataError, match="dev.tsv:2: expected text pairs in every row, or in none"):
        encode_classification(tokenizer, rows, what="dev.tsv")
    with pytest.raises(ConfigError, match="maxlen: expected an int >= 3"):
        encode_classification(tokenizer, rows[:1], maxlen=2)


def _features(n: int) -> Features:
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 20, n)
    return Features([[2] + [i + 5] * int(k - 2) + [3] for i, k in enumerate(lengths)], [[0] * int(k) for k in lengths],
                    [list(range(int(k))) for k in lengths], [[1.0] * int(k) for k in lengths])


def _first_ids(dataset) -> list[int]:
    return [int(t) for x, *_ in dataset for t in x["Input-Token"][:, 1]]


def test_batches_pad_to_their_own_length():
    features = _features(10)
    batches = list(to_dataset(features, 4))
    assert [x["Input-Token"].shape[0] for x, _, _ in batches] == [4, 4, 2]
    for b, (x, y, w) in enumerate(batches):
        rows = features.token_ids[4 * b:4 * b + 4]
        assert x["Input-Token"].shape[1] == max(map(len, rows)) == y.shape[1] == w.shape[1]
        for row, padded, weights in zip(rows, x["Input-Token"].numpy(), w.numpy(), strict=True):
            assert list(padded[:len(row)]) == row and not padded[len(row):].any()
            assert weights.sum() == len(row)
    unlabeled = next(iter(to_dataset(features, 4, labels=False)))
    assert set(unlabeled) == {"Input-Token", "Input-Segment"}


def test_seeded_shuffle_is_reproducible_and_resumable():
    features = _features(30)
    first = _first_ids(to_dataset(features, 4, seed=7, epoch=0))
    assert first == _first_ids(to_dataset(features, 4, seed=7, epoch=0))
    assert sorted(first) == list(range(5, 35)) and first != list(range(5, 35))
    assert first != _first_ids(to_dataset(features, 4, seed=7, epoch=1))
    assert _first_ids(to_dataset(features, 4, seed=7, epoch=0, skip_batches=3)) == first[12:]


def test_bucketing_groups_similar_lengths():
    features = _features(200)
    for x, _, _ in to_dataset(features, 8, bucket_boundaries=[8, 14]):
        lengths = (x["Input-Token"].numpy() != 0).sum(axis=1)
        assert len({int(np.searchsorted([8, 14], k, side="right")) for k in lengths}) == 1
    assert sum(int(x["Input-Token"].shape[0]) for x, _, _ in to_dataset(features, 8, bucket_boundaries=[8, 14])) == 200


def test_classification_batches_have_scalar_labels(tokenizer):
    features = encode_classification(tokenizer, [ClassificationExample("a b", "x"), ClassificationExample("a", "y")],
                                     LabelSet(["x", "y"]))
    x, y = next(iter(to_dataset(features, 2)))
    assert x["Input-Token"].numpy().tolist() == [[2, 21, 22, 3], [2, 21, 3, 0]]
    assert y.numpy().tolist() == [0, 1]


def test_large_inputs_encode_in_chunks_with_the_same_result(tokenizer, examples, monkeypatch, capsys):
    from kerasbert.text import pipeline

    rows = [ClassificationExample("john smith", "x", "北京 a"), ClassificationExample("a b", "y", "b")] * 4
    tags = ner_tag_set(examples)
    whole_cls, whole_ner = encode_classification(tokenizer, rows), encode_ner(tokenizer, examples * 4, tags)
    monkeypatch.setattr(pipeline, "PROGRESS_CHUNK", 3)
    assert encode_classification(tokenizer, rows) == whole_cls
    assert encode_ner(tokenizer, examples * 4, tags) == whole_ner
    out = capsys.readouterr().out  # not a terminal: the bar's closing line alone, never redrawn
    assert "8/8" in out and "\r" not in out and "\b" not in out and "\x1b[" not in out, repr(out)


def test_length_buckets_pad_each_batch_to_a_power_of_two_up_to_maxlen(tokenizer):
    features = _features(40)  # lengths 3..19
    plain, bucketed = list(to_dataset(features, 4)), list(length_buckets(to_dataset(features, 4), 20))
    assert len(plain) == len(bucketed) == 10
    seen = set()
    for (x, y, w), (bx, by, bw) in zip(plain, bucketed, strict=True):
        length = x["Input-Token"].shape[1]
        expected = 16 if length <= 16 else 20  # powers of two from 16, never past maxlen
        seen.add(expected)
        for key in ("Input-Token", "Input-Segment"):
            assert bx[key].shape == (x[key].shape[0], expected)
            assert (bx[key].numpy()[:, :length] == x[key].numpy()).all() and not bx[key].numpy()[:, length:].any()
        assert (by.numpy()[:, :length] == y.numpy()).all() and bw.numpy().sum() == w.numpy().sum()
    assert seen == {16, 20}
    assert [bucket_length(n, 512) for n in (1, 16, 17, 33, 300, 512)] == [16, 16, 32, 64, 512, 512]
    labels = encode_classification(tokenizer, [ClassificationExample("a", "x")], LabelSet(["x"]))
    x, y = next(iter(length_buckets(to_dataset(labels, 1), 64)))
    assert x["Input-Token"].shape == (1, 16) and y.numpy().tolist() == [0]  # class labels keep their shape
