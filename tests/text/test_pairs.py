"""Sentence pairs for next sentence prediction: each row's layout, where its second segment comes from, and the
share of random ones, on a generated corpus whose pieces say which document and sentence they are from."""

from __future__ import annotations

import numpy as np
import pytest

from kerasbert.errors import ConfigError
from kerasbert.text.corpus import Document
from kerasbert.text.pairs import pack_pairs

CLS, SEP, MAXLEN = 1, 2, 32


def encode(text: str) -> tuple[list[int], list[int]]:
    """``"d s n"``: sentence ``s`` of document ``d``, ``n`` pieces ``d·10⁴ + s·10² + k``, two pieces a word."""
    d, s, n = map(int, text.split())
    return [d * 10_000 + s * 100 + k for k in range(n)], [k // 2 for k in range(n)]


def corpus(count: int = 300, seed: int = 0) -> list[Document]:
    rng = np.random.default_rng(seed)
    return [Document([f"{d + 1} {s} {rng.integers(1, 21)}" for s in range(rng.integers(1, 9))], f"c.txt:{d * 10}")
            for d in range(count)]


def segments(row) -> tuple[list[int], list[int]]:
    """A row's two segments after checking its layout: [CLS] A [SEP] B [SEP], segment ids and word ids."""
    ids, words, types = row.token_ids, row.word_ids, row.segment_ids
    assert len(ids) <= MAXLEN and len(words) == len(types) == len(ids)
    seps = [i for i, x in enumerate(ids) if x == SEP]
    assert ids[0] == CLS and len(seps) == 2 and seps[1] == len(ids) - 1 and ids.count(CLS) == 1
    assert types == [0] * (seps[0] + 1) + [1] * (len(ids) - seps[0] - 1)
    assert [i for i, w in enumerate(words) if w < 0] == [0, *seps]
    a, b = ids[1:seps[0]], ids[seps[0] + 1:-1]
    assert a and b
    inner = [w for w in words if w >= 0]
    assert inner == sorted(inner) and max(words[1:seps[0]]) < min(words[seps[0] + 1:-1])  # A's words, then B's
    return a, b


def place(piece: int) -> tuple[int, int, int]:
    return piece // 10_000, piece // 100 % 100, piece % 100


def test_every_row_is_a_pair_whose_second_segment_follows_or_comes_from_another_document():
    documents = corpus()
    rows = list(pack_pairs(documents, encode, MAXLEN, cls_id=CLS, sep_id=SEP))
    assert len(rows) > 500
    for row in rows:
        a, b = segments(row)
        first, second = [place(x) for x in a], [place(x) for x in b]
        assert len({d for d, _, _ in first}) == len({d for d, _, _ in second}) == 1
        assert first == sorted(first) and second == sorted(second)  # in the document's order
        if row.random_next:
            assert second[0][0] != first[0][0] or first[0][0] == 1  # the first document has no other to draw from
        else:
            assert second[0][0] == first[0][0] and first[-1] < second[0]
    shares = np.mean([row.random_next for row in rows])
    assert 0.45 < shares < 0.65, shares  # half, and one-sentence chunks, which are always random


def test_rows_cover_the_corpus_and_are_the_same_every_time():
    documents = corpus(100, seed=1)
    rows = list(pack_pairs(documents, encode, MAXLEN, cls_id=CLS, sep_id=SEP))
    again = list(pack_pairs(documents, encode, MAXLEN, cls_id=CLS, sep_id=SEP))
    assert rows == again
    total = sum(len(encode(s)[0]) for document in documents for s in document.sentences)
    used = {x for row in rows for x in segments(row)[0]} | {x for row in rows if not row.random_next
                                                            for x in segments(row)[1]}
    assert len(used) > 0.85 * total  # as A or as the B that follows; truncating a pair longer than a row drops the rest


def test_a_sentence_longer_than_a_row_is_cut_and_counted():
    packing = pack_pairs([Document(["1 0 3", "1 1 60", "1 2 4"], "c.txt:1")], encode, MAXLEN, cls_id=CLS,
                         sep_id=SEP)
    rows = list(packing)
    assert packing.cut == 1 and packing.sentences == 3 and packing.rows == len(rows) >= 3
    for row in rows:
        segments(row)


def test_too_short_a_row_is_refused():
    with pytest.raises(ConfigError, match="--maxlen: expected at least 8 word pieces"):
        pack_pairs(corpus(2), encode, 7, cls_id=CLS, sep_id=SEP)
