"""Exports of a multilabel run: the SavedModel (scores and the labels over the run's threshold in the graph, answering
without kerasbert), ONNX and OpenVINO (scores in their runtime, labels in NumPy) give `kerasbert.predict`'s rows, and
so do `predict_export`, ``kerasbert predict --model`` and the server; exported with ``--stride``, a long text's
windows' scores are averaged as ``kerasbert predict --stride`` averages them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import predict, train
from kerasbert.choices import LOSS_BOUND
from kerasbert.cli import main
from kerasbert.finetune.multilabel import THRESHOLD_FILE
from kerasbert.finetune.multilabel_demo_data import write_multilabel_data
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.runtime import PortableExport
from kerasbert.serving.server import make_app

from helpers import export_formats, savedmodel_without_kerasbert

pytestmark = pytest.mark.slow  # trains a small model and exports it six times

MAXLEN = 24
LONG = "服务员很好，价格太差，我们上周去的，环境一般，味道令人惊喜，朋友带我来的，性价比还行"  # > MAXLEN pieces
TEXTS = ["服务员很好，价格太差", "环境一般，味道令人惊喜", "", "我们上周去的", "hello world", LONG]
EXPORTS = [("saved_model", False), ("onnx", False), ("openvino", False), ("onnx", True)]
STRIDE = 6


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    """A tiny multilabel model trained briefly on generated reviews; its vocabulary has English pieces."""
    data = write_multilabel_data(str(tmp_path_factory.mktemp("data")), n_train=200, n_dev=24, n_test=8)
    with open(data["vocab"], "a", encoding="utf-8") as f:
        f.write("hello\n##s\nworld\n")
    folder = str(tmp_path_factory.mktemp("run"))
    train("multilabel", data["train"], folder, dev=data["dev"], vocab=data["vocab"], epochs=2, batch_size=16,
          lr=2e-3, maxlen=MAXLEN, verbose=0)
    return folder


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory) -> dict:
    """``{(format, int8 or "stride"): (export folder, what export returned)}``."""
    out = export_formats(run, tmp_path_factory, EXPORTS)
    for fmt in ("saved_model", "onnx"):
        folder = os.path.join(str(tmp_path_factory.mktemp(f"stride-{fmt}")), "export")
        out[fmt, "stride"] = folder, export(run, folder, format=fmt, stride=STRIDE, precision="f32")
    return out


@pytest.fixture(scope="module")
def expected(run) -> list[dict]:
    return predict(run, TEXTS)


def assert_rows(got: list[dict], want: list[dict]) -> None:
    """The same labels in the same order; the scores within float32's rounding."""
    assert [row["labels"] for row in got] == [row["labels"] for row in want]
    for mine, theirs in zip(got, want, strict=True):
        assert list(mine["scores"]) == list(theirs["scores"])
        np.testing.assert_allclose(list(mine["scores"].values()), list(theirs["scores"].values()), atol=1e-5)


def test_the_run_predicts_with_its_dev_threshold(run, expected):
    threshold = json.load(open(os.path.join(run, THRESHOLD_FILE)))["threshold"]
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    assert metrics["dev"]["threshold"] == threshold and 0 < threshold < 1
    for row in expected:
        over = sorted((name for name, score in row["scores"].items() if score > threshold),
                      key=lambda name: -row["scores"][name])
        assert row["labels"] == over and set(row["scores"]) == {"价格", "味道", "服务", "环境"}


@pytest.mark.parametrize("fmt", ["saved_model", "onnx", "openvino"])
def test_float32_exports_give_the_runs_rows(run, exports, expected, fmt):
    folder, info = exports[fmt, False]
    assert (info["task"], info["labels"]) == ("multilabel", ["价格", "味道", "服务", "环境"])
    assert info["threshold"] == json.load(open(os.path.join(run, THRESHOLD_FILE)))["threshold"]
    assert json.load(open(os.path.join(folder, EXPORT_INFO)))["threshold"] == info["threshold"]
    assert_rows(predict_export(folder, TEXTS), expected)
    if fmt != "saved_model":  # scored on dev by the export itself, at the run's threshold
        assert info["dev"]["micro_f1"] == pytest.approx(info["dev_run"]["micro_f1"], abs=1e-9)


def test_the_savedmodel_answers_without_kerasbert(exports, expected):
    folder, info = exports["saved_model", False]
    out = savedmodel_without_kerasbert(folder, TEXTS)
    want = [[row["scores"][name] for name in info["labels"]] for row in expected]
    np.testing.assert_allclose(out["scores"], want, atol=1e-5)
    width = max(len(row["labels"]) for row in expected)
    assert out["label_count"] == [len(row["labels"]) for row in expected]
    assert out["labels"] == [row["labels"] + [""] * (width - len(row["labels"])) for row in expected]


def test_kerasbert_predict_reads_the_export(exports, expected, capsys):
    folder, _ = exports["openvino", False]
    capsys.readouterr()
    assert main(["predict", "--model", folder, "--text", TEXTS[0]]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert_rows([row], expected[:1])


def test_an_int8_export_is_scored_within_its_bound(exports):
    folder, info = exports["onnx", True]
    metric, bound = LOSS_BOUND["multilabel"]
    assert info["int8"] and info["dev_run"][metric] - info["dev"][metric] <= bound
    assert all(set(row) == {"text", "labels", "scores"} for row in predict_export(folder, TEXTS[:2]))


def test_the_server_answers_each_labels_score(exports, expected):
    folder, _ = exports["openvino", False]
    served = open_export(folder)
    assert isinstance(served, PortableExport)
    with TestClient(make_app(served, "m")) as client:
        answer = client.post("/v1/models/m:predict", json={"instances": TEXTS})
    assert answer.status_code == 200, answer.text
    predictions = answer.json()["predictions"]
    assert all(set(row) == {"labels", "scores"} for row in predictions)
    assert_rows(predictions, expected)


@pytest.mark.parametrize("fmt", ["saved_model", "onnx"])
def test_exports_with_a_stride_average_a_long_texts_windows(run, exports, fmt):
    folder, info = exports[fmt, "stride"]
    assert info["stride"] == STRIDE
    want = predict(run, TEXTS, stride=STRIDE)
    assert want[-1]["scores"] != predict(run, TEXTS[-1:])[0]["scores"]  # the long text is windowed
    assert_rows(predict_export(folder, TEXTS), want)
