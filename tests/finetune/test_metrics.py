"""Metrics: entity scores equal seqeval's, classification scores match a hand computation, the table."""

from __future__ import annotations

import random
import warnings

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from kerasbert.errors import DataError
from kerasbert.finetune.metrics import classification_metrics, entity_metrics, per_type_table
from kerasbert.text.schemes import tags_to_spans

# (gold, predicted) BIO tags per sentence; the comment names what each pair exercises.
SENTENCES = [
    # right PER, LOC cut short, right ORG at the end of the sentence
    ("B-PER I-PER O B-LOC I-LOC O B-ORG", "B-PER I-PER O B-LOC O O B-ORG"),
    # PER predicted as LOC (wrong type); ORG right, at the end
    ("B-PER O B-ORG I-ORG I-ORG", "B-LOC O B-ORG I-ORG I-ORG"),
    # MISC missed
    ("O O B-MISC I-MISC O", "O O O O O"),
    # spurious PER, and a spurious DATE (a type only ever predicted) at the end
    ("O O O", "B-PER O B-DATE"),
    # two adjacent LOCs predicted as one long LOC; PER too long, running to the end
    ("B-LOC B-LOC I-LOC O B-PER O", "B-LOC I-LOC I-LOC O B-PER I-PER"),
    # a one-token entity alone; an entity started by an orphan I- tag in the prediction
    ("B-MISC O B-PER I-PER", "B-MISC O I-PER I-PER"),
]
GOLD_TAGS = [gold.split() for gold, _ in SENTENCES]
PRED_TAGS = [pred.split() for _, pred in SENTENCES]


def spans(tag_lists: list[list[str]]) -> list[list[tuple[int, int, str]]]:
    return [tags_to_spans(tags) for tags in tag_lists]


def assert_same_as_seqeval(gold_tags: list[list[str]], pred_tags: list[list[str]]) -> dict:
    """Compare entity_metrics on the spans with seqeval on the tags, to 1e-9; return our metrics."""
    ours = entity_metrics(spans(gold_tags), spans(pred_tags))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns on zero divisions, then uses 0 as we do
        assert ours["precision"] == pytest.approx(precision_score(gold_tags, pred_tags), abs=1e-9)
        assert ours["recall"] == pytest.approx(recall_score(gold_tags, pred_tags), abs=1e-9)
        assert ours["f1"] == pytest.approx(f1_score(gold_tags, pred_tags), abs=1e-9)
        report = classification_report(gold_tags, pred_tags, output_dict=True)
    types = sorted(key for key in report if not key.endswith(" avg"))
    assert list(ours["per_type"]) == types
    for name in types:
        got, want = ours["per_type"][name], report[name]
        assert got["support"] == want["support"], name
        for ours_key, their_key in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
            assert got[ours_key] == pytest.approx(want[their_key], abs=1e-9), (name, ours_key)
    micro, macro = report["micro avg"], report["macro avg"]
    assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx(
        (micro["precision"], micro["recall"], micro["f1-score"]), abs=1e-9)
    assert (ours["macro_precision"], ours["macro_recall"], ours["macro_f1"]) == pytest.approx(
        (macro["precision"], macro["recall"], macro["f1-score"]), abs=1e-9)
    return ours


def test_entity_metrics_equal_seqeval():
    ours = assert_same_as_seqeval(GOLD_TAGS, PRED_TAGS)
    # Pinned by hand: 11 gold, 11 predicted, 5 exact matches (PER, ORG; ORG; MISC, PER from the orphan I-).
    assert (ours["precision"], ours["recall"]) == pytest.approx((5 / 11, 5 / 11))
    assert ours["per_type"]["DATE"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert ours["per_type"]["ORG"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2}


def test_entity_metrics_equal_seqeval_on_random_tags():
    rng = random.Random(0)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(60)]
    pred = [[tag if rng.random() < 0.7 else rng.choice(tags) for tag in sentence] for sentence in gold]
    assert_same_as_seqeval(gold, pred)


def test_entity_metrics_empty_and_mismatched():
    empty = entity_metrics([[], []], [[], []])
    assert empty["f1"] == empty["macro_f1"] == 0.0 and empty["per_type"] == {}
    with pytest.raises(DataError, match="sentences"):
        entity_metrics([[]], [[], []])


def test_classification_metrics_by_hand():
    # label "d" is never gold and never predicted: F1 0 by convention, and it counts in the macro mean.
    m = classification_metrics([0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 0, 1, 2, 2, 2, 0], ["a", "b", "c", "d"])
    assert m["confusion"] == [[2, 1, 0, 0], [0, 1, 1, 0], [1, 0, 2, 0], [0, 0, 0, 0]]
    assert m["accuracy"] == pytest.approx(5 / 8)
    assert m["per_label"]["a"] == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3})
    assert m["per_label"]["b"] == pytest.approx({"precision": 1 / 2, "recall": 1 / 2, "f1": 1 / 2, "support": 2})
    assert m["per_label"]["c"]["f1"] == pytest.approx(2 / 3)
    assert m["per_label"]["d"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert m["macro_f1"] == pytest.approx((2 / 3 + 1 / 2 + 2 / 3 + 0) / 4)


def test_classification_metrics_unequal_precision_and_recall():
    m = classification_metrics([0, 0, 0, 1], [0, 1, 1, 1], ["x", "y"])
    assert m["per_label"]["x"] == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5, "support": 3})
    assert m["per_label"]["y"] == pytest.approx({"precision": 1 / 3, "recall": 1.0, "f1": 0.5, "support": 1})
    assert m["confusion"] == [[1, 2], [0, 1]]


@pytest.mark.parametrize("y_true, y_pred", [([0, 1], [0]), ([0, 3], [0, 1]), ([0, 1], [-1, 1])])
def test_classification_metrics_rejects_bad_ids(y_true, y_pred):
    with pytest.raises(DataError):
        classification_metrics(y_true, y_pred, ["a", "b"])


def test_per_type_table_has_every_row():
    m = entity_metrics(spans(GOLD_TAGS), spans(PRED_TAGS))
    lines = per_type_table(m).splitlines()
    assert lines[0].split() == ["type", "precision", "recall", "f1", "support"]
    assert [line.split()[0] for line in lines[1:]] == ["DATE", "LOC", "MISC", "ORG", "PER", "micro", "macro"]
    assert lines[-2].split() == ["micro", "0.4545", "0.4545", "0.4545", "11"]
    assert lines[4].split() == ["ORG", "1.0000", "1.0000", "1.0000", "2"]
    assert len({len(line) for line in lines}) == 1  # aligned columns
