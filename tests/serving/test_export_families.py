"""Exports of runs of other families answer as the run: NEZHA (relative positions computed from the input length)
as a SavedModel with the tokenizer in its graph and as OpenVINO int8, ALBERT (one shared block) as ONNX."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import predict, train
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.serving.export import EXPORT_INFO, export
from kerasbert.serving.exported import predict_export

pytestmark = pytest.mark.slow  # trains two small models and converts them

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = ["张伟去年加入了华为公司", "这家餐厅的菜非常好吃", "房间很脏，真的让人失望",
         "李娜在北京的阿里巴巴工作。Hello!", "王"]
RUNS = {"nezha-ner-crf": ("nezha", "ner", {"crf": True}), "albert-cls": ("albert", "cls", {})}
EXPORTS = {  # (run, format, int8)
    "saved_model": ("nezha-ner-crf", "saved_model", False),
    "openvino-int8": ("nezha-ner-crf", "openvino", True),
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


@pytest.mark.parametrize("kind", EXPORTS)
def test_a_family_export_answers_as_its_run(runs, kind, tmp_path):
    name, fmt, int8 = EXPORTS[kind]
    folder = str(tmp_path / "export")
    info = export(runs[name], folder, fmt, int8=int8, accept_loss=int8)
    assert json.load(open(os.path.join(folder, EXPORT_INFO), encoding="utf-8"))["format"] == fmt
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
