"""The multilabel task end to end: the demo's generated reviews learnt by the tiny config, the threshold chosen on dev
and kept in the run, ``kerasbert train/evaluate/predict --task multilabel`` from the CLI (a TSV with a header, its
own separator, ``--stride``, no dev), and text pairs."""

from __future__ import annotations

import json
import os
import re

import pytest

from kerasbert import evaluate, predict, train
from kerasbert.cli import main
from kerasbert.finetune.demo import DEMO_TEXTS, demo_files
from kerasbert.finetune.demo_data import DEMO_OPTIONS, DEMO_TRAINING
from kerasbert.finetune.multilabel import THRESHOLD_FILE, THRESHOLDS
from kerasbert.finetune.multilabel_demo_data import ASPECTS, review_examples, write_multilabel_data
from kerasbert.finetune.runs import Run, open_run

pytestmark = pytest.mark.slow  # trains small models


def test_a_review_has_exactly_the_tags_of_its_aspect_words():
    reviews = review_examples(300, seed=3)
    assert reviews == review_examples(300, seed=3) and reviews != review_examples(300, seed=4)
    for text, tags in reviews:
        assert tags == [tag for tag, words in ASPECTS.items() if any(word in text for word in words)], text
    counts = {len(tags) for _, tags in reviews}
    assert counts == {0, 1, 2, 3, 4}


def test_the_demo_data_is_covered_by_its_vocabulary(tmp_path):
    paths = write_multilabel_data(str(tmp_path), n_train=50, n_dev=5, n_test=5)
    vocab = set(open(paths["vocab"], encoding="utf-8").read().split())
    rows = [json.loads(line) for line in open(paths["train"], encoding="utf-8")]
    assert all(set(row["text"]) <= vocab for row in rows) and all(set(text) <= vocab for text in
                                                                   DEMO_TEXTS["multilabel"])


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[str, dict]:
    """The demo's run: its data and settings (`kerasbert demo --task multilabel`), seed 0."""
    out = str(tmp_path_factory.mktemp("demo"))
    data = demo_files("multilabel", out, seed=0)
    run = os.path.join(out, "multilabel")
    train("multilabel", data["train"], run, dev=data["dev"], vocab=data["vocab"],
          **{**DEMO_TRAINING, **DEMO_OPTIONS["multilabel"]}, verbose=0)
    return run, data


def test_the_demo_learns_its_tags(demo_run):
    run, data = demo_run
    scores = evaluate(run, data["test"], verbose=0)
    assert scores["micro_f1"] > 0.9 and scores["macro_f1"] > 0.9, scores
    rows = predict(run, DEMO_TEXTS["multilabel"])
    assert [set(row["labels"]) for row in rows] == [{"服务", "价格"}, {"环境", "味道"}, set()]


def test_the_dev_threshold_is_kept_and_used(demo_run):
    run, data = demo_run
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    threshold = json.load(open(os.path.join(run, THRESHOLD_FILE)))["threshold"]
    assert metrics["monitor"] == "val_micro_f1" and metrics["dev"]["threshold"] == threshold in THRESHOLDS
    assert open_run(run).task.threshold == threshold
    dev = evaluate(run, verbose=0)  # the run's dev file, at its threshold: the best epoch's dev scores
    assert dev["threshold"] == threshold and dev["micro_f1"] == pytest.approx(metrics["dev"]["micro_f1"])
    table = open(os.path.join(run, "per_label.txt"), encoding="utf-8").read()
    assert re.search(r"^micro\s+[\d.]+\s+[\d.]+\s+" + f"{metrics['dev']['micro_f1']:.4f}", table, re.M)
    Run(run).check_new(overwrite=True)  # a multilabel run folder may be trained over


def test_the_cli_trains_evaluates_and_predicts(tmp_path, capsys):
    rows = [(text, "|".join(tags)) for text, tags in review_examples(48, seed=7)]
    (tmp_path / "train.tsv").write_text("review\taspects\n" + "".join(f"{t}\t{a}\n" for t, a in rows),
                                        encoding="utf-8")
    paths = write_multilabel_data(str(tmp_path / "data"), n_train=2, n_dev=2, n_test=2)
    (tmp_path / "in.txt").write_text("服务好，价格一般\n" + "环境不错，" * 10 + "\n", encoding="utf-8")
    run = str(tmp_path / "run")
    common = ["--text-field", "review", "--label-field", "aspects", "--label-separator", "|"]
    assert main(["train", "--task", "multilabel", "--train", str(tmp_path / "train.tsv"), "--vocab", paths["vocab"],
                 "--out", run, "--epochs", "1", "--maxlen", "16", "--stride", "4", "--quiet", *common]) == 0
    assert not os.path.exists(os.path.join(run, THRESHOLD_FILE))  # no dev: 0.5
    capsys.readouterr()
    assert main(["evaluate", run, "--data", str(tmp_path / "train.tsv")]) == 0
    assert re.search(r"micro_f1 [\d.]+ .*threshold 0\.5000", capsys.readouterr().out)
    assert main(["predict", run, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.jsonl")]) == 0
    got = [json.loads(line) for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    assert [set(row) for row in got] == [{"text", "labels", "scores"}] * 2
    assert all(row["labels"] == [name for name, score in sorted(row["scores"].items(), key=lambda item: -item[1])
                                 if score > 0.5] for row in got)


def test_text_pairs_train_and_predict(tmp_path):
    paths = write_multilabel_data(str(tmp_path / "data"), n_train=2, n_dev=2, n_test=2)
    reviews = review_examples(32, seed=2)
    rows = [{"text": a, "text_b": b, "labels": sorted(set(x) | set(y))}
            for (a, x), (b, y) in zip(reviews[::2], reviews[1::2], strict=True)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                                          encoding="utf-8")
    run = str(tmp_path / "run")
    train("multilabel", str(tmp_path / "pairs.jsonl"), run, dev=str(tmp_path / "pairs.jsonl"), vocab=paths["vocab"],
          text_b="text_b", epochs=1, maxlen=32, batch_size=8, verbose=0)
    got = predict(run, [{"text": "服务好", "text_b": "价格一般"}])
    assert set(got[0]) == {"text", "text_b", "labels", "scores"} and len(got[0]["scores"]) == 4
