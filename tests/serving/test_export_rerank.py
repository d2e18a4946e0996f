"""Exports of a rerank run: the SavedModel (``query`` and ``passage`` in, the pair encoded in the graph, ``score``
out, answering where kerasbert cannot be imported), ONNX and OpenVINO (scores in NumPy) give the run's scores, and
so do `predict_export`, ``kerasbert serve`` and `kerasbert.rerank` / ``kerasbert rerank`` over them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import predict, rerank, train
from kerasbert.choices import LOSS_BOUND
from kerasbert.cli import main
from kerasbert.finetune.rerank_demo_data import write_rerank_data
from kerasbert.finetune.runs import open_run
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.server import make_app
from kerasbert.text.rerank_data import RerankExample, encode_pairs

from helpers import export_formats

pytestmark = pytest.mark.slow  # trains a small model and exports it

MAXLEN = 24
QUERY = "张伟在哪里工作"
PASSAGES = ["张伟是杭州人", "张伟每天去华为公司上班", "张伟现在住在上海", "张伟毕业于清华大学",
            "Héllo 张伟在华为公司工作，每天都很忙，周末也要去公司加班，已经连续三个月没有休息了", ""]  # cut; empty
ROWS = [*({"query": QUERY, "passage": passage} for passage in PASSAGES),
        {"query": "李娜是哪里人", "passage": "李娜是南京人"}]
EXPORTS = [("saved_model", False), ("onnx", False), ("openvino", False), ("onnx", True)]
FRESH = """
import json, sys
sys.modules["kerasbert"] = None  # as on a serving host: kerasbert cannot be imported
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer's ops, as TF Serving has them)
rows = json.loads(sys.argv[2])
out = tf.saved_model.load(sys.argv[1]).signatures["serving_default"](
    query=tf.constant([row["query"] for row in rows]), passage=tf.constant([row["passage"] for row in rows]))
print(json.dumps(out["score"].numpy().tolist()))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    """A small rerank model trained briefly on the generated questions and passages."""
    data = write_rerank_data(str(tmp_path_factory.mktemp("data")), n_train=200, n_dev=20, n_test=4)
    folder = str(tmp_path_factory.mktemp("run"))
    train("rerank", data["train"], folder, dev=data["dev"], vocab=data["vocab"], epochs=2, batch_size=32, lr=4e-3,
          maxlen=MAXLEN, verbose=0)
    return folder


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory) -> dict[tuple[str, bool], tuple[str, dict]]:
    """``{(format, int8): (export folder, what export returned)}``."""
    return export_formats(run, tmp_path_factory, EXPORTS)


@pytest.fixture(scope="module")
def expected(run) -> list[dict]:
    rows = predict(run, ROWS)
    assert len({round(row["score"], 5) for row in rows}) == len(rows)  # distinct: the order is the model's
    return rows


def _scores(rows: list[dict]) -> list[float]:
    return [row["score"] for row in rows]


@pytest.mark.parametrize("fmt", ["saved_model", "onnx", "openvino"])
def test_float32_exports_give_the_runs_scores(exports, expected, fmt):
    folder, info = exports[fmt, False]
    assert (info["task"], info["labels"], info["maxlen"]) == ("rerank", [], MAXLEN)
    rows = predict_export(folder, ROWS)
    assert [{k: v for k, v in row.items() if k != "score"} for row in rows] == ROWS
    assert _scores(rows) == pytest.approx(_scores(expected), abs=1e-6)
    assert info["dev"]["mrr_at_10"] == pytest.approx(info["dev_run"]["mrr_at_10"], abs=1e-9)


def test_the_savedmodel_answers_without_kerasbert(exports, expected):
    folder, _ = exports["saved_model", False]
    done = subprocess.run([sys.executable, "-c", FRESH, folder, json.dumps(ROWS)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == pytest.approx(_scores(expected), abs=1e-6)


def test_the_ids_signature_gives_the_models_logit(run, exports):
    import tensorflow as tf

    folder, _ = exports["saved_model", False]
    loaded = open_run(run)
    features = encode_pairs(loaded.tokenizer, [RerankExample(row["query"], row["passage"]) for row in ROWS[:2]],
                            MAXLEN)
    length = max(map(len, features.token_ids))
    ids, segments = (np.array([row + [0] * (length - len(row)) for row in rows], np.int32)
                     for rows in (features.token_ids, features.segment_ids))
    out = tf.saved_model.load(folder).signatures["ids"](token_ids=ids, segment_ids=segments)
    logits = np.asarray(loaded.model([ids, segments], training=False))[:, 0]
    np.testing.assert_allclose(out["logit"].numpy(), logits, atol=1e-5)
    np.testing.assert_allclose(out["score"].numpy(), 1 / (1 + np.exp(-logits)), atol=1e-6)


def test_an_int8_export_is_scored_within_its_bound(exports):
    folder, info = exports["onnx", True]
    metric, bound = LOSS_BOUND["rerank"]
    assert metric == "mrr_at_10" and info["int8"] and info["dev_run"][metric] - info["dev"][metric] <= bound
    assert all(0 < row["score"] < 1 for row in predict_export(folder, ROWS[:2]))


@pytest.mark.parametrize("fmt", ["saved_model", "openvino"])
def test_the_server_answers_with_the_scores(exports, expected, fmt):
    folder, _ = exports[fmt, False]
    with TestClient(make_app(open_export(folder), "m")) as client:
        answer = client.post("/v1/models/m:predict", json={"instances": ROWS})
    assert answer.status_code == 200, answer.text
    predictions = answer.json()["predictions"]
    assert [set(row) for row in predictions] == [{"score"}] * len(ROWS)
    assert _scores(predictions) == pytest.approx(_scores(expected), abs=1e-6)


@pytest.mark.parametrize("fmt", ["saved_model", "onnx", "openvino"])
def test_rerank_over_an_export_gives_the_runs_order(run, exports, fmt):
    folder, _ = exports[fmt, False]
    want = rerank(run, QUERY, PASSAGES)
    got = rerank(folder, QUERY, PASSAGES)
    assert [row["index"] for row in got] == [row["index"] for row in want]
    assert _scores(got) == pytest.approx(_scores(want), abs=1e-6)


def test_the_rerank_command_over_an_export(run, exports, tmp_path, capsys):
    folder, _ = exports["onnx", False]
    (tmp_path / "passages.txt").write_text("\n".join(PASSAGES[:4]), encoding="utf-8")
    capsys.readouterr()
    assert main(["rerank", folder, "--query", QUERY, "--input", str(tmp_path / "passages.txt")]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["rank"] for row in printed] == [1, 2, 3, 4]
    assert [row["passage"] for row in printed] == [row["passage"] for row in rerank(run, QUERY, PASSAGES[:4])]
