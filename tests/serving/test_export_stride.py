"""Exports of runs with ``--stride``: a SavedModel that windows long texts in its graph, loaded where kerasbert cannot
be imported, and an ONNX export that windows them in Python, both answering a long document as ``kerasbert predict
--stride`` does; the stride recorded, overridden at export, and refused where it cannot apply."""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np
import pytest

from kerasbert import ConfigError, evaluate, predict, train
from kerasbert.cli import main
from kerasbert.finetune.demo_data import ner_examples, sentiment_examples, write_demo_data
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.server import _open
from kerasbert.text.ner_readers import span_example, write_span_jsonl
from kerasbert.text.schemes import tags_to_spans

from helpers import savedmodel_without_kerasbert

STRIDES = {"cls": 4, "ner-crf": 6}  # cls: given at export; ner-crf: the run's own
MAXLEN = {"cls": 16, "ner-crf": 24}


def _document(n: int, seed: int):
    """Demo sentences joined into one document, its entities as character spans."""
    text, spans = "", []
    for chars, tags in ner_examples(n, seed):
        spans += [(len(text) + start, len(text) + end, label) for start, end, label in tags_to_spans(tags)]
        text += "".join(chars) + "。"
    return span_example(text, spans)


TEXTS = {"cls": ["，".join(text for text, _ in sentiment_examples(8, seed=4)), "这家餐厅的菜非常好吃", ""],
         "ner-crf": [_document(40, seed=6).text, "张伟去年加入了华为公司", ""]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """A classifier trained without a stride, and a CRF tagger trained with one on long documents."""
    folder = str(tmp_path_factory.mktemp("data"))
    data = write_demo_data(folder, n_train=200, n_dev=16, n_test=16)
    for name, seed in (("long_train", 1), ("long_dev", 2)):
        data[name] = os.path.join(folder, f"{name}.jsonl")
        write_span_jsonl(data[name], [_document(5, seed * 100 + i) for i in range(40 if name == "long_train" else 6)])
    common = {"vocab": data["vocab"], "epochs": 2, "batch_size": 16, "lr": 3e-3, "verbose": 0}
    out = {"cls": str(tmp_path_factory.mktemp("cls")), "ner-crf": str(tmp_path_factory.mktemp("ner-crf"))}
    train("cls", data["cls_train"], out["cls"], dev=data["cls_dev"], maxlen=MAXLEN["cls"], **common)
    train("ner", data["long_train"], out["ner-crf"], dev=data["long_dev"], maxlen=MAXLEN["ner-crf"], crf=True,
          stride=STRIDES["ner-crf"], **common)
    return out


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory) -> dict[tuple[str, str], tuple[str, dict]]:
    """``{(run, format): (export folder, what export returned)}``; the classifier's stride is given at export."""
    out = {}
    for name, run in runs.items():
        for fmt in ("saved_model", "onnx"):
            folder = os.path.join(str(tmp_path_factory.mktemp(f"{name}-{fmt}")), "export")
            out[name, fmt] = folder, export(run, folder, fmt, stride=STRIDES[name] if name == "cls" else None,
                                            accept_loss=True)
    return out


def _expected(runs, name: str) -> list[dict]:
    return predict(runs[name], TEXTS[name], stride=STRIDES[name])


def _same(name: str, got: list[dict], expected: list[dict]) -> None:
    if name == "cls":
        assert [row["label"] for row in got] == [row["label"] for row in expected]
        for mine, theirs in zip(got, expected, strict=True):
            np.testing.assert_allclose(list(mine["probabilities"].values()), list(theirs["probabilities"].values()),
                                       atol=1e-5)
    else:
        assert [row["entities"] for row in got] == [row["entities"] for row in expected]


@pytest.mark.parametrize("name", sorted(STRIDES))
def test_the_savedmodel_windows_a_long_text_in_its_graph_as_predict_does(runs, exports, name):
    folder, info = exports[name, "saved_model"]
    assert len(TEXTS[name][0]) > 3 * MAXLEN[name]  # several windows
    expected = _expected(runs, name)
    out = savedmodel_without_kerasbert(folder, TEXTS[name])
    if name == "cls":
        got = [{"label": label, "probabilities": dict(zip(info["labels"], row, strict=True))}
               for label, row in zip(out["label"], out["probabilities"], strict=True)]
    else:
        got = [{"entities": [{"start": out["entity_start"][i][k], "end": out["entity_end"][i][k],
                              "label": out["entity_label"][i][k], "text": out["entity_text"][i][k]}
                             for k in range(out["entity_count"][i])]} for i in range(len(TEXTS[name]))]
        assert any(e["start"] > 4 * MAXLEN[name] for e in got[0]["entities"])  # found far past the first window
    _same(name, got, expected)
    assert predict(runs[name], TEXTS[name][:1]) != expected[:1] or name != "cls"  # the stride changed the answer


@pytest.mark.parametrize("name", sorted(STRIDES))
def test_onnx_windows_a_long_text_in_python_as_predict_does(runs, exports, name):
    folder, _ = exports[name, "onnx"]
    _same(name, open_export(folder).predict([{"text": text} for text in TEXTS[name]]), _expected(runs, name))


def test_the_export_records_the_stride_and_scores_the_run_with_it(runs, exports):
    for (name, _), (folder, info) in exports.items():
        assert json.load(open(os.path.join(folder, EXPORT_INFO)))["stride"] == info["stride"] == STRIDES[name]
    _, info = exports["cls", "onnx"]  # a stride the run was not trained with: its dev score is measured with it
    assert info["dev_run"]["accuracy"] == evaluate(runs["cls"], stride=STRIDES["cls"], verbose=0)["accuracy"]
    assert info["dev"]["accuracy"] == pytest.approx(info["dev_run"]["accuracy"], abs=1e-9)


def test_serve_and_the_command_line_take_the_stride_of_a_run(runs, exports, tmp_path, capsys):
    with contextlib.ExitStack() as stack:
        served = _open(runs["ner-crf"], stack, "onnx", stride=3)
        assert served.info["stride"] == 3
        assert served.predict([{"text": TEXTS["ner-crf"][0]}]) == predict(runs["ner-crf"], TEXTS["ner-crf"][:1],
                                                                             stride=3)
        with pytest.raises(ConfigError, match="--stride: expected a run folder .*found the export folder"):
            _open(exports["cls", "onnx"][0], stack, stride=3)
    out = str(tmp_path / "export")
    assert main(["export", runs["cls"], out, "--format", "onnx", "--stride", "5", "--accept-loss"]) == 0
    assert "maxlen 16, stride 5, onnx" in capsys.readouterr().out
    assert main(["export", runs["cls"], str(tmp_path / "bad"), "--stride", "14"]) == 2
    assert "--stride: expected less than maxlen - 2 = 14" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "bad")
