"""The multilabel task's files, label vectors and prediction rows (`kerasbert.text.multilabel_data`), its metrics and
threshold (`kerasbert.finetune.multilabel`), each number worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kerasbert.errors import ConfigError, DataError
from kerasbert.finetune.multilabel import THRESHOLD_FILE, THRESHOLDS, MultiLabelTask, best_threshold, multilabel_metrics
from kerasbert.text.multilabel_data import (
    MultiLabelExample,
    check_labels,
    encode_multilabel,
    iter_multilabel,
    label_set,
    multi_hot,
    score_row,
)
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer


def write(tmp_path, name: str, content: str) -> str:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return str(path)


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def read(path: str, **options) -> list[tuple]:
    return [(example.text, example.labels, example.line) for example in iter_multilabel(path, **options)]


def test_jsonl_labels_are_a_list_maybe_empty_each_label_once(tmp_path):
    path = write(tmp_path, "train.jsonl", jsonl({"text": "服务好", "labels": ["服务", "价格", "服务"]},
                                                {"text": "一般", "labels": []}, {"text": "三", "labels": [3, 2.5]}))
    assert read(path) == [("服务好", ("服务", "价格"), 1), ("一般", (), 2), ("三", ("3", "2.5"), 3)]


def test_tsv_and_csv_cells_split_at_the_separator(tmp_path):
    tsv = write(tmp_path, "train.tsv", "服务好，价格贵\t服务, 价格\n一般\t\n")
    assert read(tsv) == [("服务好，价格贵", ("服务", "价格"), 1), ("一般", (), 2)]
    csv = write(tmp_path, "train.csv", 'sentence,tags\n"好,贵",服务|价格\n')
    assert read(csv, text="sentence", label="tags", separator="|") == [("好,贵", ("服务", "价格"), 2)]


def test_the_task_reads_its_fields_and_separator(tmp_path):
    path = write(tmp_path, "train.jsonl", jsonl({"review": "好", "aspects": ["服务"]}))
    task = MultiLabelTask(text="review", label="aspects")
    assert task.read(path) == [MultiLabelExample("好", ("服务",))]
    tsv = write(tmp_path, "train.tsv", "a\tx;y\n")
    assert MultiLabelTask(label_separator=";").read(tsv)[0].labels == ("x", "y")


@pytest.mark.parametrize(("row", "words"), [
    ({"text": "好", "labels": "服务,价格"}, ("train.jsonl:2", "a JSON list", "a string '服务,价格'",
                                           '["服务", "价格"]')),
    ({"text": "好", "labels": None}, ("train.jsonl:2", "a JSON list", "found null")),
    ({"text": "好", "labels": {"a": 1}}, ("train.jsonl:2", "a JSON list", "an object")),
    ({"text": "好", "labels": ["a", None]}, ("train.jsonl:2", "string or a number", "null")),
    ({"text": "好", "labels": ["a", ["b"]]}, ("train.jsonl:2", "string or a number", "a list ['b']")),
    ({"text": "好", "labels": [True]}, ("train.jsonl:2", "string or a number", "a bool True")),
    ({"text": "好", "labels": [" "]}, ("train.jsonl:2", "an empty label")),
    ({"text": "好"}, ("train.jsonl:2", "field 'labels'", "keys ['text']")),
    ({"text": 5, "labels": []}, ("train.jsonl:2", "field 'text'", "a string")),
])
def test_a_bad_jsonl_row_is_one_error_naming_its_line(tmp_path, row, words):
    path = write(tmp_path, "train.jsonl", jsonl({"text": "a", "labels": ["x"]}, row))
    with pytest.raises(DataError) as caught:
        read(path)
    for word in words:
        assert word in str(caught.value)


def test_an_empty_file_or_one_of_a_header_is_an_error(tmp_path):
    with pytest.raises(DataError, match="at least one example, found an empty file"):
        read(write(tmp_path, "train.jsonl", "\n"))
    with pytest.raises(DataError, match="found only a header"):
        read(write(tmp_path, "train.csv", "text,labels\n"), text="text", label="labels")
    with pytest.raises(DataError, match="at least one example, found an empty file"):
        read(write(tmp_path, "empty.csv", ""), text="text", label="labels")
    with pytest.raises(DataError, match="found a row of 1 values|2 columns"):
        read(write(tmp_path, "one.tsv", "好\n"))


def test_dev_labels_must_be_training_labels_and_training_needs_one():
    examples = [MultiLabelExample("a", ("x",), line=1), MultiLabelExample("b", ("q", "z"), line=4)]
    with pytest.raises(DataError) as caught:
        check_labels(examples, LabelSet(["x", "y"]), "dev.jsonl")
    assert str(caught.value).startswith("dev.jsonl:4: expected labels seen in training, ['x', 'y'], found unseen "
                                        "labels 'q' (line 4), 'z' (line 4)")
    with pytest.raises(DataError, match="at least one example with a label, found no labels at all"):
        label_set([MultiLabelExample("a"), MultiLabelExample("b")])
    assert label_set(examples).labels == ["q", "x", "z"]


def test_rare_labels_are_counted_per_label_and_line():
    examples = [MultiLabelExample("a", ("x", "y"), line=1), MultiLabelExample("b", ("x",), line=2)]
    assert list(MultiLabelTask().labelled(examples)) == [("x", 1), ("y", 1), ("x", 2)]


def test_label_vectors_follow_each_text_into_its_windows():
    tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
    labels = LabelSet(["x", "y"])
    assert multi_hot([("y",), (), ("y", "x")], labels).tolist() == [[0, 1], [0, 0], [1, 1]]
    examples = [MultiLabelExample("a b a b", ("x",)), MultiLabelExample("b", ("y",))]
    features = encode_multilabel(tokenizer, examples, labels, maxlen=4, stride=0)
    assert features.token_ids == [[2, 4, 5, 3], [2, 4, 5, 3], [2, 5, 3]]
    assert [row.tolist() for row in features.labels] == [[1, 0], [1, 0], [0, 1]]
    assert encode_multilabel(tokenizer, examples, None, maxlen=4).labels is None


def test_a_row_has_the_labels_over_the_threshold_highest_first():
    assert score_row([0.5, 0.9, 0.55, 0.1], ["a", "b", "c", "d"], 0.5) == {
        "labels": ["b", "c"], "scores": {"a": 0.5, "b": 0.9, "c": 0.55, "d": 0.1}}
    assert score_row([0.2, 0.1], ["a", "b"], 0.5)["labels"] == []


def test_metrics_worked_out_by_hand():
    # label a: gold rows 0, 3, predicted row 0: P 1, R 1/2, F1 2/3; b: gold rows 0, 1, predicted row 1: the same;
    # c: gold row 2, predicted row 2: all 1. Micro: 3 right of 3 predicted and 5 gold: P 1, R 3/5, F1 6/8.
    gold = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])
    predicted = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]])
    m = multilabel_metrics(gold, predicted, ["a", "b", "c"])
    assert (m["micro_precision"], m["micro_recall"], m["micro_f1"]) == (1.0, 0.6, pytest.approx(0.75))
    assert m["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert m["macro_precision"] == 1.0 and m["macro_recall"] == pytest.approx((0.5 + 0.5 + 1) / 3)
    assert m["exact_match"] == 0.5  # rows 1 and 2
    assert m["per_label"]["a"] == {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2}
    json.dumps(m)  # plain numbers


def test_a_label_never_gold_nor_predicted_scores_zero():
    m = multilabel_metrics(np.array([[1, 0]]), np.array([[1, 0]]), ["a", "b"])
    assert m["per_label"]["b"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert (m["micro_f1"], m["macro_f1"]) == (1.0, 0.5)
    with pytest.raises(DataError, match="shape"):
        multilabel_metrics(np.array([[1, 0]]), np.array([[1]]), ["a", "b"])


def test_the_threshold_is_the_middle_of_the_best():
    assert THRESHOLDS[0] == 0.05 and THRESHOLDS[-1] == 0.95 and len(THRESHOLDS) == 19
    # over 0.05: all four called, 2 right: F1 4/6; over 0.10 to 0.25: three called, F1 4/5; over 0.30 and 0.35: the
    # two gold ones alone, F1 1; over 0.40: one, F1 2/3. Best: 0.30 and 0.35, the lower middle 0.30
    gold, scores = np.array([[1, 0], [0, 1]]), np.array([[0.4, 0.1], [0.3, 0.8]])
    assert best_threshold(gold, scores) == 0.3
    # gold scored 0.9, the rest 0.1: every threshold from 0.10 to 0.85 separates them; the middle is 0.45
    assert best_threshold(np.array([[1, 0]]), np.array([[0.9, 0.1]])) == 0.45


def test_the_task_scores_at_its_threshold_or_chooses_one(tmp_path):
    examples = [MultiLabelExample("a", ("x",)), MultiLabelExample("b", ("y",))]
    rows = [score_row(scores, ["x", "y"], 0.5) for scores in ([0.4, 0.1], [0.3, 0.8])]
    task, labels = MultiLabelTask(), LabelSet(["x", "y"])
    chosen = task.score(examples, rows, labels)
    assert (chosen["threshold"], chosen["micro_f1"]) == (0.3, 1.0)
    task.write_report(str(tmp_path), chosen, labels)
    assert json.loads((tmp_path / THRESHOLD_FILE).read_text()) == {"threshold": 0.3}
    assert (tmp_path / "per_label.txt").read_text().splitlines()[-2].startswith("micro     1.0000  1.0000  1.0000")
    task.read_run(str(tmp_path))
    assert task.threshold == 0.3
    fixed = task.score(examples, rows, labels)  # the rows' own labels, at 0.5: y alone
    assert (fixed["threshold"], fixed["micro_precision"], fixed["micro_recall"]) == (0.3, 1.0, 0.5)
    other = MultiLabelTask()
    other.read_run(str(tmp_path / "none"))
    assert other.threshold == 0.5


@pytest.mark.parametrize("content", ['{"threshold": "high"}', '{"threshold": 1.5}', "[0.5]", "{"])
def test_a_damaged_threshold_file_is_named(tmp_path, content):
    (tmp_path / THRESHOLD_FILE).write_text(content)
    with pytest.raises(ConfigError, match=THRESHOLD_FILE):
        MultiLabelTask().read_run(str(tmp_path))
