"""The rerank task: ``kerasbert demo --task rerank`` learns its generated questions and passages on the tiny config
(MRR@10 well above a ranker that reads nothing), its label scale recorded in the run; evaluation, predictions of
``{"query", "passage"}`` rows, `kerasbert.rerank` and ``kerasbert rerank`` on the run; graded labels scaled to the
targets of a binary cross-entropy on one logit."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from kerasbert import evaluate, predict, rerank
from kerasbert.cli import main
from kerasbert.errors import ConfigError, DataError
from kerasbert.finetune.demo import DEMO_TEXTS
from kerasbert.finetune.rerank_demo_data import RANDOM_MRR
from kerasbert.finetune.tasks import get_task
from kerasbert.serving.rerank_command import read_passages

pytestmark = pytest.mark.slow  # trains the demo

QUERY = "张伟在哪里工作"
PASSAGES = ["张伟是杭州人", "张伟每天去华为公司上班", "张伟现在住在上海", "张伟毕业于清华大学"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, str]:
    """``kerasbert demo --task rerank``'s run folder and data files."""
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--task", "rerank", "--out", str(out), "--quiet"]) == 0
    data = out / "data" / "rerank"
    return {"run": str(out / "rerank"), **{split: str(data / f"{split}.jsonl") for split in ("train", "dev", "test")}}


def test_the_demo_ranks_well_above_random(demo):
    with open(os.path.join(demo["run"], "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["monitor"] == "val_mrr_at_10" and metrics["dev"]["count"] == 50
    test = evaluate(demo["run"], demo["test"], verbose=0)
    assert metrics["dev"]["mrr_at_10"] > RANDOM_MRR + 0.15 and test["mrr_at_10"] > RANDOM_MRR + 0.15, (metrics, test)
    assert test["ndcg_at_10"] >= test["mrr_at_10"] * 0.99  # one relevant passage: 1 / log2(rank + 1) >= 1 / rank
    with open(os.path.join(demo["run"], "args.json"), encoding="utf-8") as f:
        assert json.load(f)["label_scale"] == 1.0  # 0/1 labels stay 0/1


def test_predictions_are_the_sigmoid_of_the_models_logit(demo):
    from kerasbert.finetune.runs import open_run

    rows = predict(demo["run"], DEMO_TEXTS["rerank"])
    assert [set(row) for row in rows] == [{"query", "passage", "score"}] * 3
    loaded = open_run(demo["run"])
    ids, segments = loaded.tokenizer.encode(DEMO_TEXTS["rerank"][1]["query"], DEMO_TEXTS["rerank"][1]["passage"])
    logit = float(np.asarray(loaded.model([np.array([ids]), np.array([segments])], training=False))[0, 0])
    assert rows[1]["score"] == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-6)
    assert segments == [0] * (len(QUERY) + 2) + [1] * (len(DEMO_TEXTS["rerank"][1]["passage"]) + 1)


def test_the_cli_predicts_and_evaluates(demo, tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in DEMO_TEXTS["rerank"]), "utf-8")
    capsys.readouterr()
    assert main(["predict", demo["run"], "--input", str(pairs)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == predict(demo["run"], DEMO_TEXTS["rerank"])
    assert main(["evaluate", demo["run"], "--data", demo["test"]]) == 0
    assert "MRR@10" in capsys.readouterr().out


def test_rerank_orders_the_passages_by_score(demo):
    scores = [row["score"] for row in predict(demo["run"], [{"query": QUERY, "passage": p} for p in PASSAGES])]
    ranked = rerank(demo["run"], QUERY, PASSAGES)
    assert [row["index"] for row in ranked] == sorted(range(4), key=lambda i: -scores[i])
    assert [row["passage"] for row in ranked] == [PASSAGES[row["index"]] for row in ranked]
    assert [row["score"] for row in ranked] == pytest.approx(sorted(scores, reverse=True), abs=1e-9)
    assert rerank(demo["run"], QUERY, PASSAGES, top_k=2) == ranked[:2]


@pytest.mark.parametrize("name", ["passages.txt", "passages.jsonl"])
def test_the_rerank_command(demo, tmp_path, capsys, name):
    rows = [{"passage": p} if i % 2 else {"text": p} for i, p in enumerate(PASSAGES)]
    content = ("\n\n".join(PASSAGES) if name.endswith(".txt")
               else "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    (tmp_path / name).write_text(content, encoding="utf-8")
    assert read_passages(str(tmp_path / name)) == PASSAGES
    out = tmp_path / "ranked.jsonl"
    capsys.readouterr()
    assert main(["rerank", demo["run"], "--query", QUERY, "--input", str(tmp_path / name), "--top-k", "3",
                 "--output", str(out)]) == 0
    assert "3 passages ranked" in capsys.readouterr().out
    written = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert written == [{"rank": k + 1, **row} for k, row in enumerate(rerank(demo["run"], QUERY, PASSAGES, 3))]


# ------------------------------------------------------------------------------------------- labels and head
def _pairs(tmp_path, labels, name="train.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps({"query": "q", "passage": f"p{i}", "label": label}) + "\n"
                            for i, label in enumerate(labels)), "utf-8")
    return str(path)


def test_graded_labels_become_targets_in_zero_one(tmp_path):
    from kerasbert.text.tokenizer import Tokenizer

    task = get_task("rerank")
    examples = task.read(_pairs(tmp_path, [0, 1, 2, 3]))
    labels = task.label_set(examples)
    assert task.label_scale == 3.0 and len(labels) == 0
    tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "q", "p"])})
    assert task.encode(tokenizer, examples, labels, 16, "train").labels == pytest.approx([0, 1 / 3, 2 / 3, 1])
    dev = task.read(_pairs(tmp_path, [0, 4], "dev.jsonl"), labels)  # above the training data's largest: 1
    assert task.encode(tokenizer, dev, labels, 16, "dev").labels == [0.0, 1.0]
    with pytest.raises(DataError, match=r"line 4: expected labels of at most label_scale = 2, found 3"):
        get_task("rerank", label_scale=2.0).label_set(examples)
    with pytest.raises(DataError, match="training data: expected at least one relevant pair"):
        task.label_set(task.read(_pairs(tmp_path, [0, 0])))
    with pytest.raises(DataError, match=r"dev.jsonl: expected at least one relevant pair \(a label > 0\) to rank"):
        task.read(_pairs(tmp_path, [0, 0], "dev.jsonl"), labels)
    with pytest.raises(ConfigError, match="label_scale: expected a number > 0"):
        get_task("rerank", label_scale=0).label_set(examples)


def test_the_head_is_one_logit_and_the_loss_binary_cross_entropy():
    from kerasbert import build_transformer_model

    task = get_task("rerank")
    model = task.head(build_transformer_model("tiny", verbose=False), None)
    assert tuple(model.output.shape) == (None, 1) and model.layers[-1].name == "CLS-Dense"
    loss = task.compile_arguments(model)["loss"]
    targets, logits = np.array([0.0, 0.5, 1.0], np.float32), np.array([[1.5], [-0.3], [2.0]], np.float32)
    sigmoid = 1 / (1 + np.exp(-logits[:, 0].astype(np.float64)))
    by_hand = -np.mean(targets * np.log(sigmoid) + (1 - targets) * np.log(1 - sigmoid))
    assert float(loss(targets, logits)) == pytest.approx(by_hand, rel=1e-5)
