"""Tag schemes: detection, spans <-> tags for BIO / BIOES / BMES, orphan tags, alignment."""

from __future__ import annotations

import logging
import random

import pytest

from kerasbert.errors import DataError
from kerasbert.text.schemes import (
    SCHEMES,
    char_to_token_spans,
    convert_tags,
    detect_scheme,
    spans_to_tags,
    tags_to_spans,
    token_to_char_spans,
)

GOLD = {
    "BIO": ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O", "B-ORG"],
    "BIOES": ["B-PER", "I-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "O", "S-ORG"],
    "BMES": ["B-PER", "M-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "O", "S-ORG"],
}
SPANS = [(0, 3, "PER"), (4, 5, "LOC"), (5, 7, "LOC"), (8, 9, "ORG")]


def random_spans(rng: random.Random, length: int) -> list[tuple[int, int, str]]:
    """Non-overlapping token spans, adjacent ones included, over ``length`` tokens."""
    spans, i = [], 0
    while i < length:
        if rng.random() < 0.4:
            end = min(length, i + rng.randint(1, 4))
            spans.append((i, end, rng.choice(["PER", "LOC", "ORG"])))
            i = end
        else:
            i += 1
    return spans


@pytest.mark.parametrize("scheme", SCHEMES)
def test_gold_tags_read_and_write(scheme):
    assert tags_to_spans(GOLD[scheme]) == SPANS
    assert spans_to_tags(SPANS, 9, scheme) == GOLD[scheme]
    assert detect_scheme(GOLD[scheme]) == scheme


@pytest.mark.parametrize("source", SCHEMES)
@pytest.mark.parametrize("target", SCHEMES)
def test_convert_gold(source, target):
    assert convert_tags(GOLD[source], target) == GOLD[target]


def test_conversion_is_lossless_on_random_valid_spans(caplog):
    rng = random.Random(0)
    for _ in range(500):
        length = rng.randint(0, 20)
        spans = random_spans(rng, length)
        for scheme in SCHEMES:
            tags = spans_to_tags(spans, length, scheme)
            assert tags_to_spans(tags, strict=True) == spans
            for other in SCHEMES:
                assert convert_tags(convert_tags(tags, other, strict=True), scheme, strict=True) == tags
    assert not caplog.records


@pytest.mark.parametrize("tags, spans", [
    (["O", "I-PER", "I-PER"], [(1, 3, "PER")]),
    (["B-PER", "I-LOC"], [(0, 1, "PER"), (1, 2, "LOC")]),
    (["O", "M-PER", "E-PER"], [(1, 3, "PER")]),
    (["E-PER", "O"], [(0, 1, "PER")]),
])
def test_orphan_continuation_is_repaired_with_a_warning(tags, spans, caplog):
    where = [f"train.txt:{i + 1}" for i in range(len(tags))]
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        assert tags_to_spans(tags, where=where) == spans
    assert "with no entity before it" in caplog.text and "train.txt:" in caplog.text


def test_orphan_continuation_fails_when_strict():
    with pytest.raises(DataError, match=r"^train.txt:5: expected B-PER or S-PER before I-PER, found I-PER with no "):
        tags_to_spans(["O", "I-PER"], strict=True, where=["train.txt:4", "train.txt:5"])


@pytest.mark.parametrize("tag", ["B", "X-PER", "B-", "per"])
def test_ill_formed_tag(tag):
    expected = f"tag 1: expected a tag O or B-/I-/M-/E-/S- followed by a label, found '{tag}'"
    with pytest.raises(DataError, match=expected):
        tags_to_spans(["O", tag])


def test_mixed_schemes_and_unknown_scheme():
    with pytest.raises(DataError, match="expected one tag scheme .* found both I- and M- tags"):
        detect_scheme(["B-A", "I-A", "B-B", "M-B", "E-B"], "x.txt")
    with pytest.raises(DataError, match="scheme: expected one of BIO, BIOES, BMES, found 'IOB2'"):
        convert_tags(["O"], "IOB2")


def test_bad_spans():
    with pytest.raises(DataError, match="overlaps no other span"):
        spans_to_tags([(0, 2, "A"), (1, 3, "B")], 3)
    with pytest.raises(DataError, match="within 0..3"):
        spans_to_tags([(2, 4, "A")], 3)


def test_char_token_alignment():
    offsets = [(0, 3), (4, 7), (8, 13)]  # "Bob saw Paris"
    assert char_to_token_spans(offsets, [(8, 13, "LOC"), (0, 3, "PER")]) == [(0, 1, "PER"), (2, 3, "LOC")]
    assert token_to_char_spans(offsets, [(0, 2, "PER")]) == [(0, 7, "PER")]
    with pytest.raises(DataError, match="a span that cuts a token"):
        char_to_token_spans(offsets, [(1, 3, "PER")])
    with pytest.raises(DataError, match="a span with no token in it"):
        char_to_token_spans(offsets, [(3, 4, "PER")])
    with pytest.raises(DataError, match="entities that do not overlap"):
        char_to_token_spans(offsets, [(0, 7, "PER"), (4, 13, "LOC")])
