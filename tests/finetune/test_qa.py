"""The qa task: its loss against NumPy's cross-entropy over the real positions, a tiny run trained on generated
questions (some unanswerable, so its answers may be none) and its evaluate, predict and CLI, and the demo."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from kerasbert import ConfigError, evaluate, predict, train
from kerasbert.finetune.qa import PointerLoss, QaTask
from kerasbert.finetune.qa_demo_data import FACTS, qa_examples, write_qa_data
from kerasbert.text.qa_data import QaExample, pointer_labels

MAXLEN = 48


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def test_the_loss_is_the_mean_start_and_end_cross_entropy_over_real_positions():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 6, 2)).astype(np.float32)
    labels = np.array([pointer_labels(6, 2, 4), pointer_labels(4, 0, 0) + [0, 0]])  # the second row: 2 of padding
    want = np.mean([(-_log_softmax(logits[0, :, 0])[2] - _log_softmax(logits[0, :, 1])[4]) / 2,
                    (-_log_softmax(logits[1, :4, 0])[0] - _log_softmax(logits[1, :4, 1])[0]) / 2])
    assert float(PointerLoss()(labels, logits)) == pytest.approx(want, rel=1e-5)


def test_null_answers_follow_the_training_data_unless_set():
    answered, unanswered = QaExample("谁?", "张伟", [(0, 2)]), QaExample("谁?", "张伟", [])
    assert QaTask().label_set([answered]).labels == [] and QaTask().label_set([answered]) is not None
    task = QaTask()
    task.label_set([answered])
    assert task.null_answers is False
    task = QaTask()
    task.label_set([answered, unanswered])
    assert task.null_answers is True
    task = QaTask(null_answers=False)
    task.label_set([answered, unanswered])
    assert task.null_answers is False


def _with_unanswerable(rows: list[dict], seed: int) -> list[dict]:
    """Every fourth question asks about a person the context does not name: no answer."""
    out = []
    for i, row in enumerate(rows):
        if i % 4 == 3:
            row = {**row, "question": f"{'赵钱孙'[seed % 3]}某去年加入了哪里？", "answers": []}
        out.append(row)
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("qa-data")
    paths = write_qa_data(str(folder), n_train=8, n_dev=2, n_test=2)
    for split, n, seed in (("train", 240, 1), ("test", 24, 2)):
        rows = _with_unanswerable(qa_examples(n, seed=seed), seed)
        with open(paths[split], "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    dev = _with_unanswerable(qa_examples(24, seed=3), 3)  # as SQuAD JSON, one paragraph a question
    paths["dev"] = str(folder / "dev.json")
    squad = {"data": [{"title": "demo", "paragraphs": [
        {"context": row["context"], "qas": [{"id": f"d{i}", "question": row["question"], "answers": row["answers"],
                                             "is_impossible": not row["answers"]}]} for i, row in enumerate(dev)]}]}
    with open(paths["dev"], "w", encoding="utf-8") as f:
        json.dump(squad, f, ensure_ascii=False, indent=1)
    return paths


@pytest.fixture(scope="module")
def run(data, tmp_path_factory) -> str:
    folder = str(tmp_path_factory.mktemp("qa-run"))
    train("qa", data["train"], folder, dev=data["dev"], vocab=data["vocab"], epochs=2, batch_size=16, lr=2e-3,
          maxlen=MAXLEN, verbose=0)
    return folder


@pytest.mark.slow
def test_a_run_scores_dev_with_squad_v2_splits_and_settles_null_answers(run):
    args = json.load(open(os.path.join(run, "args.json"), encoding="utf-8"))
    assert args["null_answers"] is True and args["max_query_length"] == 64 and args["stride"] is None
    dev = json.load(open(os.path.join(run, "metrics.json"), encoding="utf-8"))["dev"]
    assert dev["metric"] == "cmrc2018" and dev["total"] == 24 and dev["NoAns_total"] == 6
    assert 0 <= dev["exact"] <= dev["f1"] <= 1
    assert "f1 " in open(os.path.join(run, "scores.txt"), encoding="utf-8").read()


@pytest.mark.slow
def test_evaluate_and_predict_give_answers_that_are_spans_of_the_context(run, data):
    scores = evaluate(run, data["test"], verbose=0)
    assert {"exact", "f1", "HasAns_f1", "NoAns_f1"} <= set(scores) and scores["total"] == 24
    rows = [{"question": "谁在杭州工作？", "context": "张伟在杭州工作。李娜是南京人。" * 6, "id": 3},
            {"question": "", "context": ""}]
    predicted = predict(run, rows)
    for row, got in zip(rows, predicted, strict=True):
        assert {**row, "answer": got["answer"], "start": got["start"], "end": got["end"], "score": got["score"]} == got
        assert got["answer"] == (row["context"][got["start"]:got["end"]] if got["start"] >= 0 else "")
    assert predicted[1]["start"] == predicted[1]["end"] == -1


@pytest.mark.slow
def test_the_cli_predicts_question_rows(run, tmp_path, capsys):
    from kerasbert.cli import main

    path = tmp_path / "q.jsonl"
    rows = [{"question": "李娜是哪里人？", "context": "张伟在杭州工作。李娜是南京人。"}]
    path.write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["predict", run, "--input", str(path), "--output", str(tmp_path / "out.jsonl")]) == 0
    [got] = [json.loads(line) for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    assert got == predict(run, rows)[0]
    capsys.readouterr()
    assert main(["predict", run, "--text", "李娜是哪里人？"]) == 2
    assert "--text: expected --input, a .jsonl file of question and context" in capsys.readouterr().err


def test_a_stride_that_leaves_no_room_is_refused_before_a_run_is_written(data, tmp_path):
    with pytest.raises(ConfigError, match="--stride: expected at most maxlen - 5 = 27 for qa"):
        train("qa", data["train"], str(tmp_path / "run"), vocab=data["vocab"], maxlen=32, stride=28, verbose=0)
    assert not os.path.exists(tmp_path / "run")


def _pattern(template: str) -> re.Pattern:
    return re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>.+?)", template))


def test_only_its_words_tell_which_fact_a_demo_question_is_about():
    """Every fact of a context holds a name of the kind asked for, and a context's names of one kind share one length:
    neither the answer's kind nor a name's length points at the fact."""
    facts = [_pattern(fact) for fact, _ in FACTS]
    questions = [(_pattern(question), slot) for _, asked in FACTS for question, slot in asked]
    for row in qa_examples(300, seed=5):
        slot = next(slot for pattern, slot in questions if pattern.fullmatch(row["question"]))
        sentences = row["context"].rstrip("。").split("。")
        names = [next(filter(None, (pattern.fullmatch(s) for pattern in facts))).groupdict() for s in sentences]
        assert 2 <= len(names) <= 3 and all(slot in found for found in names), row
        for kind in ("PER", "LOC", "ORG"):
            lengths = {len(found[kind]) for found in names if kind in found}
            assert len(lengths) <= 1, row


@pytest.mark.slow  # trains the qa demo as `kerasbert demo --task qa` does
def test_the_qa_demo_learns_its_questions(tmp_path, capsys):
    from kerasbert.cli import main

    assert main(["demo", "--task", "qa", "--out", str(tmp_path), "--quiet"]) == 0
    scores = json.load(open(tmp_path / "qa" / "metrics.json", encoding="utf-8"))["dev"]
    assert scores["metric"] == "cmrc2018" and scores["exact"] >= 0.85 and scores["f1"] >= 0.88, scores  # chance: ~0
    out = capsys.readouterr().out
    assert "== qa: test set" in out
    test = json.load(open(tmp_path / "qa" / "eval-test.json", encoding="utf-8"))
    assert test["exact"] >= 0.85 and test["f1"] >= 0.88, test
    # the demo's questions: one on each fact of a context whose facts both hold a person and a place
    answers = [json.loads(line)["answer"] for line in out.splitlines() if line.startswith('{"question"')]
    assert answers == ["张伟", "南京"], out
