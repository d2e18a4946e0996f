"""Exports of a relation run: the SavedModel (triples decoded in the graph, answering without kerasbert), ONNX and
OpenVINO (the three pointers stacked into one output, decoded in NumPy) give `kerasbert.predict`'s triples with
their offsets, and so do `predict_export` and the server."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import predict, train
from kerasbert.finetune.relation import stacked_logits
from kerasbert.finetune.relation_demo_data import write_relation_data
from kerasbert.finetune.runs import open_run
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.runtime import PortableExport
from kerasbert.serving.server import make_app
from kerasbert.text.tokenizer import pad_ids

from helpers import savedmodel_without_kerasbert

pytestmark = pytest.mark.slow
MAXLEN = 32
TEXTS = ["张伟出生于北京，后来在华为公司工作", "复旦大学位于上海", "", "李娜和王芳都在中国银行工作",
         "hello 李娜去了南京", "王芳毕业于浙江大学，现在在腾讯公司工作，" * 3]  # the last one longer than MAXLEN
PORTABLE = ("onnx", "openvino")
FORMATS = ("saved_model", *PORTABLE)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    data = write_relation_data(str(tmp_path_factory.mktemp("data")), n_train=400, n_dev=30, n_test=8)
    folder = str(tmp_path_factory.mktemp("run"))
    keras.utils.set_random_seed(1)
    train("relation", data["train"], folder, dev=data["dev"], vocab=data["vocab"], epochs=6, batch_size=16, lr=1e-2,
          maxlen=MAXLEN, verbose=0)
    return folder


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory) -> dict[str, tuple[str, dict]]:
    """Each format's export in float32 (OpenVINO would choose bfloat16 on a CPU with its units)."""
    return {fmt: (folder, export(run, folder, format=fmt, precision="f32")) for fmt in FORMATS
            for folder in [os.path.join(str(tmp_path_factory.mktemp(f"export-{fmt}")), "export")]}


@pytest.fixture(scope="module")
def expected(run) -> list[dict]:
    rows = predict(run, TEXTS)
    assert sum(len(row["spo_list"]) for row in rows) >= 4 and rows[2]["spo_list"] == []
    return rows


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_export_gives_the_runs_triples(exports, expected, fmt):
    folder, info = exports[fmt]
    assert (info["task"], info["labels"]) == ("relation", ["位于", "出生地", "工作单位", "毕业院校"])
    assert predict_export(folder, TEXTS) == expected
    if fmt != "saved_model":  # scored on dev by the export itself
        assert info["dev"]["f1"] == pytest.approx(info["dev_run"]["f1"], abs=1e-9)


def test_the_savedmodel_answers_without_kerasbert(exports, expected):
    folder, _ = exports["saved_model"]
    out = savedmodel_without_kerasbert(folder, TEXTS)
    names = ("subject", "subject_start", "subject_end", "predicate", "object", "object_start", "object_end")
    for i, row in enumerate(expected):
        assert [{name: out[name][i][k] for name in names} for k in range(out["triple_count"][i])] == row["spo_list"]
    width = max(out["triple_count"])
    assert len(out["subject"][0]) == width and out["subject_start"][2] == [-1] * width


@pytest.fixture(scope="module")
def pointers(run) -> tuple[np.ndarray, np.ndarray]:
    """Two texts' padded ids and the run's stacked pointer logits of them."""
    loaded = open_run(run)
    ids = pad_ids([loaded.tokenizer.encode(text, maxlen=MAXLEN)[0] for text in TEXTS[:2]])
    want = np.asarray(stacked_logits(loaded.model)([ids, np.zeros_like(ids)], training=False))
    assert want.shape == (2, 2 + 2 * 4, ids.shape[1], ids.shape[1])
    return ids, want


def test_the_ids_signature_gives_the_stacked_pointers(exports, pointers):
    import tensorflow as tf

    ids, want = pointers
    got = tf.saved_model.load(exports["saved_model"][0]).signatures["ids"](
        token_ids=tf.constant(ids, tf.int32), segment_ids=tf.zeros_like(tf.constant(ids, tf.int32)))["relation_logits"]
    np.testing.assert_array_equal(np.isfinite(got.numpy()), np.isfinite(want))
    np.testing.assert_allclose(got.numpy()[np.isfinite(want)], want[np.isfinite(want)], atol=1e-5)


@pytest.mark.parametrize("fmt", PORTABLE)
def test_the_portable_model_gives_the_stacked_pointers(exports, pointers, fmt):
    ids, want = pointers
    served = open_export(exports[fmt][0])
    portable = served.run_model(ids.astype(np.int32), np.zeros_like(ids, np.int32))
    np.testing.assert_allclose(portable[np.isfinite(want)], want[np.isfinite(want)], atol=1e-4)


def test_the_server_answers_with_the_triples(exports, expected):
    folder, _ = exports["onnx"]
    served = open_export(folder)
    assert isinstance(served, PortableExport)
    with TestClient(make_app(served, "m")) as client:
        answer = client.post("/v1/models/m:predict", json={"instances": TEXTS})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": [{"spo_list": row["spo_list"]} for row in expected]}
