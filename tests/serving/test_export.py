"""Exports for serving: a SavedModel that takes raw text answers as `kerasbert.predict` does, in a process where
kerasbert cannot be imported (the TF Serving contract), for a classifier and for softmax and CRF taggers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kerasbert import ConfigError, predict, train
from kerasbert.cli import main
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.folder import EXPORT_INFO

from helpers import savedmodel_without_kerasbert

pytestmark = pytest.mark.slow  # trains three small models

TEXTS = ["张伟去年加入了华为公司", "这家餐厅的菜非常好吃", "房间很脏，真的让人失望",
         "李娜在北京的阿里巴巴工作。Hello, World! 2024", "王"]
RUNS = {"cls": ("cls", {}), "ner": ("ner", {}), "ner-crf": ("ner", {"crf": True})}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """``{name: (run folder, export folder)}``, each trained briefly on the demo data."""
    data = write_demo_data(str(tmp_path_factory.mktemp("data")), n_train=400, n_dev=16, n_test=16)
    out = {}
    for name, (task, options) in RUNS.items():
        run = str(tmp_path_factory.mktemp(f"run-{name}"))
        train(task, data[f"{task}_train"], run, dev=data[f"{task}_dev"], vocab=data["vocab"], epochs=3,
              batch_size=16, lr=2e-3, maxlen=24, verbose=0, **options)
        folder = os.path.join(str(tmp_path_factory.mktemp(f"export-{name}")), "export")
        export(run, folder)
        out[name] = (run, folder)
    return out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_savedmodel_answers_raw_text_without_kerasbert(exports, name):
    run, folder = exports[name]
    expected = predict(run, TEXTS)
    out = savedmodel_without_kerasbert(folder, TEXTS)
    info = json.load(open(os.path.join(folder, EXPORT_INFO)))
    if name == "cls":
        assert [info["labels"][i] for i in out["label_id"]] == out["label"] == [row["label"] for row in expected]
        want = [[row["probabilities"][label] for label in info["labels"]] for row in expected]
        np.testing.assert_allclose(out["probabilities"], want, atol=1e-5)
        return
    for i, row in enumerate(expected):
        count = out["entity_count"][i]
        got = [{"start": out["entity_start"][i][k], "end": out["entity_end"][i][k], "label": out["entity_label"][i][k],
                "text": out["entity_text"][i][k]} for k in range(count)]
        assert got == row["entities"], (TEXTS[i], got, row["entities"])
    assert any(row["entities"] for row in expected)  # the test would be empty otherwise


def test_the_export_report_and_predict_from_the_cli(exports, tmp_path, capsys):
    run, folder = exports["ner-crf"]
    info = json.load(open(os.path.join(folder, EXPORT_INFO)))
    assert (info["task"], info["crf"], info["maxlen"], info["format"]) == ("ner", True, 24, "saved_model")
    assert info["labels"][0] == "O" and len(info["vocab_sha256"]) == 64 and info["source_run"] == os.path.abspath(run)
    assert "f1" in info["dev"]
    assert main(["predict", "--model", folder, "--text", TEXTS[0], "--text", TEXTS[3]]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == predict(run, TEXTS[0:1] + TEXTS[3:4])
    assert predict_export(folder, TEXTS) == predict(run, TEXTS)
    done = subprocess.run([sys.executable, "-m", "kerasbert", "predict", "--model", folder, "--text", TEXTS[0]],
                          capture_output=True, text=True, timeout=300)  # a new process: nothing imported before
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # TensorFlow's notices, written as it loads the SavedModel, are held
    assert json.loads(done.stdout.splitlines()[-1]) == predict(run, TEXTS[:1])[0]


def test_the_ids_signature_gives_the_keras_model_outputs(exports):
    import tensorflow as tf

    from kerasbert.finetune.runs import Run

    run, folder = exports["cls"]
    token_ids = np.array([[2, 10, 11, 12, 3], [2, 20, 3, 0, 0]], np.int32)
    segment_ids = np.zeros_like(token_ids)
    served = tf.saved_model.load(folder).signatures["ids"]
    out = served(token_ids=tf.constant(token_ids), segment_ids=tf.constant(segment_ids))
    np.testing.assert_allclose(out["probabilities"].numpy(), Run(run).load_model().predict([token_ids, segment_ids],
                                                                                          verbose=0), atol=1e-6)


def test_bad_exports_fail_at_once_with_a_named_error(exports, tmp_path):
    run, folder = exports["cls"]
    with pytest.raises(ConfigError, match="expected a new export folder, found something already there"):
        export(run, folder)
    empty = tmp_path / "run"
    empty.mkdir()
    with pytest.raises(ConfigError, match="args.json"):
        export(str(empty), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="expected an export of a ner model, found one of a cls model"):
        open_export(folder, task="ner")
    cut = tmp_path / "cut"
    shutil.copytree(folder, cut)
    os.remove(cut / "saved_model.pb")
    with pytest.raises(ConfigError, match="expected a readable SavedModel with a serving_default signature"):
        open_export(cut)
