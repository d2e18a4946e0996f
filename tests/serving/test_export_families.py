"""Exports of runs of other families answer as the run: NEZHA (relative positions computed from the input length)
as a SavedModel with the tokenizer in its graph and as OpenVINO int8, ALBERT (one shared block) as ONNX; the server
of `kerasbert serve` answers with the run's predictions too."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import predict, train
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.server import make_app

from int8_cpus import INT8_CPUS, WEIGHT_BITS, int8_cpu

pytestmark = pytest.mark.slow  # trains two small models and converts them

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = ["张伟去年加入了华为公司", "这家餐厅的菜非常好吃", "房间很脏，真的让人失望",
         "李娜在北京的阿里巴巴工作。Hello!", "王"]
RUNS = {"nezha-ner-crf": ("nezha", "ner", {"crf": True}), "albert-cls": ("albert", "cls", {})}
EXPORTS = {  # (run, format, int8): False for float32, else the CPU class (INT8_CPUS) it is made for
    "saved_model": ("nezha-ner-crf", "saved_model", False),
    **{f"openvino-int8-{cpu}": ("nezha-ner-crf", "openvino", cpu) for cpu in INT8_CPUS},
    "onnx": ("albert-cls", "onnx", False),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    folder = str(tmp_path_factory.mktemp("data"))
    data = write_demo_data(folder, n_train=200, n_dev=16, n_test=16)
    with open(os.path.join(ROOT, "configs", "tiny.json"), encoding="utf-8") as f:
        config = {**json.load(f), "embedding_size": 16}  # ALBERT's E
    with open(os.path.join(folder, "albert_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    out = {}
    for name, (family, task, options) in RUNS.items():
        out[name] = str(tmp_path_factory.mktemp(f"run-{name}"))
        extra = {"config": os.path.join(folder, "albert_config.json")} if family == "albert" else {}
        train(task, data[f"{task}_train"], out[name], dev=data[f"{task}_dev"], vocab=data["vocab"], epochs=3,
              batch_size=8, lr=2e-3, maxlen=24, verbose=0, model=family, **options, **extra)
    return out


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory) -> Callable[[str], tuple[str, dict]]:
    """``kind`` of `EXPORTS` -> ``(folder, info)`` of its export, made once for the module's tests."""
    made = {}

    def made_once(kind: str) -> tuple[str, dict]:
        if kind not in made:
            name, fmt, int8 = EXPORTS[kind]
            folder = os.path.join(str(tmp_path_factory.mktemp(f"export-{kind}")), "export")
            with int8_cpu(int8) if int8 else contextlib.nullcontext():
                made[kind] = folder, export(runs[name], folder, fmt, int8=bool(int8), precision="f32",
                                            accept_loss=bool(int8))
        return made[kind]

    return made_once


@pytest.mark.parametrize("kind", EXPORTS)
def test_a_family_export_answers_as_its_run(runs, exports, kind):
    name, fmt, int8 = EXPORTS[kind]
    folder, info = exports(kind)
    assert json.load(open(os.path.join(folder, EXPORT_INFO), encoding="utf-8"))["format"] == fmt
    assert info.get("int8_choice", {}).get("weight_bits") == (WEIGHT_BITS[int8] if int8 else None)
    got, want = predict_export(folder, TEXTS), predict(runs[name], TEXTS)
    if name.endswith("cls"):
        assert [row["label"] for row in got] == [row["label"] for row in want]
        for mine, theirs in zip(got, want, strict=True):
            np.testing.assert_allclose(list(mine["probabilities"].values()), list(theirs["probabilities"].values()),
                                       atol=1e-5)
    else:
        assert got == want and any(row["entities"] for row in want)
    assert info["dev"]["accuracy" if name.endswith("cls") else "f1"] == pytest.approx(
        info["dev_run"]["accuracy" if name.endswith("cls") else "f1"], abs=0.07 if int8 else 1e-6)


@pytest.mark.parametrize("kind", ["saved_model", "onnx"])
def test_the_server_answers_a_family_export_as_its_run(runs, exports, kind):
    """NEZHA's SavedModel (TensorFlow's signature) and ALBERT's ONNX (the portable runtime) behind the HTTP server:
    one request of every text and one request a text give the run's predictions, less the text."""
    name = EXPORTS[kind][0]
    want = [{key: value for key, value in row.items() if key != "text"} for row in predict(runs[name], TEXTS)]
    with TestClient(make_app(open_export(exports(kind)[0]), name)) as client:
        status = client.get(f"/v1/models/{name}").json()["model_version_status"][0]["state"]
        answers = [client.post(f"/v1/models/{name}:predict", json={"instances": texts})
                   for texts in (TEXTS, *([text] for text in TEXTS))]
    assert status == "AVAILABLE" and [answer.status_code for answer in answers] == [200] * (1 + len(TEXTS))
    together = answers[0].json()["predictions"]
    alone = [row for answer in answers[1:] for row in answer.json()["predictions"]]
    for got in (together, alone):
        if name.endswith("cls"):
            assert [row["label"] for row in got] == [row["label"] for row in want]
            assert len({row["label"] for row in want}) == 2  # both labels answered
            for mine, theirs in zip(got, want, strict=True):
                assert mine["probabilities"].keys() == theirs["probabilities"].keys()
                np.testing.assert_allclose(list(mine["probabilities"].values()),
                                           list(theirs["probabilities"].values()), atol=1e-5)
        else:
            assert got == want and any(row["entities"] for row in want)
