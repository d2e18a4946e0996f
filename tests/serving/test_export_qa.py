"""Exports of a qa run: the SavedModel (the question cut, the context windowed and the answer read in its graph,
answering where kerasbert cannot be imported), ONNX and OpenVINO (logits decoded in NumPy) answer as
`kerasbert.predict` does, long contexts of several windows included, and so does the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import predict, train
from kerasbert.choices import LOSS_BOUND
from kerasbert.finetune.qa_demo_data import write_qa_data
from kerasbert.finetune.runs import open_run
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.runtime import PortableExport

MAXLEN = 32
LONG = "张伟在杭州工作。李娜是南京人。王芳毕业于清华大学。" * 4  # several windows at MAXLEN
ROWS = [{"question": "谁在杭州工作？", "context": "张伟在杭州工作。李娜是南京人。"},
        {"question": "王芳毕业于哪里？", "context": LONG},
        {"question": "", "context": ""},
        {"question": "Héllo 谁是南京人？" * 4, "context": "李娜是南京人。hello world"},
        {"question": "李娜是哪里人？", "context": LONG[:-1] + "李娜是南京人。"}]
EXPORTS = ("saved_model", "onnx", "openvino")

FRESH = """
import json, sys
sys.modules["kerasbert"] = None  # as on a serving host: kerasbert cannot be imported
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops, as TF Serving has them)
rows = json.loads(sys.argv[2])
out = tf.saved_model.load(sys.argv[1]).signatures["serving_default"](
    question=tf.constant([row["question"] for row in rows]), context=tf.constant([row["context"] for row in rows]))
print(json.dumps({name: value.numpy().tolist() for name, value in out.items()}, default=bytes.decode))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    """A tiny qa model trained briefly on generated questions, each with its answer (no null answers: every question
    gets a span; the graph's null answers are held against NumPy's in ``tests/text/test_qa_data.py``)."""
    paths = write_qa_data(str(tmp_path_factory.mktemp("data")), n_train=160, n_dev=24, n_test=2)
    with open(paths["vocab"], "a", encoding="utf-8") as f:
        f.write("hello\nworld\n")
    out = str(tmp_path_factory.mktemp("run"))
    train("qa", paths["train"], out, dev=paths["dev"], vocab=paths["vocab"], epochs=2, batch_size=16, lr=2e-3,
          maxlen=MAXLEN, verbose=0)
    return out


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory) -> dict[str, tuple[str, dict]]:
    out = {}
    for fmt in EXPORTS:
        folder = os.path.join(str(tmp_path_factory.mktemp(f"export-{fmt}")), "export")
        out[fmt] = folder, export(run, folder, format=fmt, precision="f32")
    return out


@pytest.fixture(scope="module")
def expected(run) -> list[dict]:
    rows = predict(run, ROWS)
    assert all(row["answer"] for i, row in enumerate(rows) if i != 2) and rows[2]["start"] == -1  # no context
    return rows


def _same(got: list[dict], want: list[dict]) -> None:
    """The same answers and offsets; the same scores up to float32 rounding (another runtime's sums)."""
    assert [{k: v for k, v in row.items() if k != "score"} for row in got] == \
        [{k: v for k, v in row.items() if k != "score"} for row in want]
    np.testing.assert_allclose([row["score"] for row in got], [row["score"] for row in want], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", EXPORTS)
def test_every_export_answers_as_predict_does(exports, expected, fmt):
    folder, info = exports[fmt]
    assert (info["task"], info["null_answers"], info["qa_stride"]) == ("qa", False, MAXLEN // 4)
    got = predict_export(folder, ROWS)
    if fmt == "saved_model":
        assert got == expected  # the same model and the same float32 sums
    _same(got, expected)
    metric, bound = LOSS_BOUND["qa"]
    assert info["dev_run"][metric] - info["dev"][metric] <= bound


@pytest.mark.slow
def test_the_savedmodel_answers_without_kerasbert(exports, expected):
    folder, _ = exports["saved_model"]
    done = subprocess.run([sys.executable, "-c", FRESH, folder, json.dumps(ROWS)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    got = [{**row, "answer": out["answer"][i], "start": out["start"][i], "end": out["end"][i],
            "score": out["score"][i]} for i, row in enumerate(ROWS)]
    _same(got, expected)


@pytest.mark.slow
def test_the_ids_signature_gives_the_models_logits(run, exports):
    import tensorflow as tf

    folder, _ = exports["saved_model"]
    ids = np.array([[2, 10, 11, 3, 12, 13, 3, 0]], np.int32)
    segments = np.array([[0, 0, 0, 0, 1, 1, 1, 0]], np.int32)
    got = tf.saved_model.load(folder).signatures["ids"](token_ids=ids, segment_ids=segments)["logits"].numpy()
    want = np.asarray(open_run(run).model([ids, segments], training=False))
    assert got.shape == (1, 8, 2)
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["saved_model", "onnx"])
def test_the_server_answers_questions(exports, expected, fmt):
    from kerasbert.serving.server import make_app

    served = open_export(exports[fmt][0])
    assert isinstance(served, PortableExport) == (fmt == "onnx")
    with TestClient(make_app(served, "m")) as client:
        answer = client.post("/v1/models/m:predict", json={"instances": ROWS})
        missing = client.post("/v1/models/m:predict", json={"instances": [{"question": "谁?"}]})
    assert answer.status_code == 200, answer.text
    _same([{**row, **got} for row, got in zip(ROWS, answer.json()["predictions"], strict=True)], expected)
    assert missing.status_code == 400 and "context" in missing.text
