"""Exports of a span run: the SavedModel (entities decoded in the graph, answering without kerasbert), ONNX and
OpenVINO (logits decoded in NumPy) give `kerasbert.predict`'s entities, nested ones included, and so do
`predict_export` and the server; exported with ``--stride``, they window a long text as ``kerasbert predict --stride``
does (the SavedModel in its graph)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import evaluate, predict, train
from kerasbert.choices import LOSS_BOUND
from kerasbert.finetune.demo_data import span_examples, write_span_data
from kerasbert.finetune.runs import open_run
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.runtime import PortableExport
from kerasbert.serving.server import make_app
from kerasbert.text.span_data import SpanExample, encode_spans
from kerasbert.text.tokenizer import Tokenizer

from helpers import export_formats, savedmodel_without_kerasbert

MAXLEN = 24
LONG = "李娜在杭州银行工作，张伟去年加入了北京大学，王芳明天来上海开会，周末大家都在家休息"  # > MAXLEN pieces
TEXTS = ["张伟去年加入了北京大学", "Héllos, 李娜在杭州银行工作!", "", "下个月王芳要去南京出差", "hello world", LONG]
EXPORTS = [("saved_model", False), ("onnx", False), ("openvino", False), ("onnx", True)]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    """A tiny span model trained on generated texts with nested entities; its vocabulary has English pieces."""
    data = write_span_data(str(tmp_path_factory.mktemp("data")), n_train=300, n_dev=24, n_test=8)
    with open(data["vocab"], "a", encoding="utf-8") as f:
        f.write("hello\n##s\nworld\n")
    folder = str(tmp_path_factory.mktemp("run"))
    train("span", data["train"], folder, dev=data["dev"], vocab=data["vocab"], epochs=5, batch_size=16, lr=2e-3,
          maxlen=MAXLEN, verbose=0)
    return folder


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory) -> dict[tuple[str, bool], tuple[str, dict]]:
    """``{(format, int8): (export folder, what export returned)}``."""
    return export_formats(run, tmp_path_factory, EXPORTS)


@pytest.fixture(scope="module")
def expected(run) -> list[dict]:
    rows = predict(run, TEXTS)
    nested = [(a, b) for row in rows for a in row["entities"] for b in row["entities"]
              if a != b and a["start"] <= b["start"] and b["end"] <= a["end"]]
    assert nested and rows[2]["entities"] == []  # the texts hold nested entities, and one has none
    return rows


def test_word_pieces_and_their_offsets_are_the_savedmodel_tokenizers(run):
    from kerasbert.serving.graph_text import GraphTokenizer

    tokenizer = Tokenizer(os.path.join(run, "vocab.txt"))
    texts = [*TEXTS, "HELLOS\u200bworlds  北京", "ＡＢ１２ café"]
    features = encode_spans(tokenizer, [SpanExample(text) for text in texts], None, MAXLEN)
    graph = GraphTokenizer(os.path.join(run, "vocab.txt"), lowercase=True, maxlen=MAXLEN).tokenize(texts)
    for i, (ids, offsets) in enumerate(zip(features.token_ids, features.offsets, strict=True)):
        length = len(ids)
        assert graph["token_ids"][i, :length].numpy().tolist() == ids
        assert list(zip(graph["starts"][i, 1:length - 1].numpy().tolist(),
                        graph["ends"][i, 1:length - 1].numpy().tolist(), strict=True)) == offsets, texts[i]


@pytest.mark.parametrize("fmt", ["saved_model", "onnx", "openvino"])
def test_float32_exports_give_the_runs_entities(exports, expected, fmt):
    folder, info = exports[fmt, False]
    assert (info["task"], info["labels"]) == ("span", ["LOC", "ORG", "PER"])
    assert predict_export(folder, TEXTS) == expected
    if fmt != "saved_model":  # scored on dev by the export itself
        assert info["dev"]["f1"] == pytest.approx(info["dev_run"]["f1"], abs=1e-9)


def test_the_savedmodel_answers_without_kerasbert(exports, expected):
    folder, _ = exports["saved_model", False]
    out = savedmodel_without_kerasbert(folder, TEXTS)
    for i, row in enumerate(expected):
        got = [{"start": out["entity_start"][i][k], "end": out["entity_end"][i][k], "label": out["entity_label"][i][k],
                "text": out["entity_text"][i][k]} for k in range(out["entity_count"][i])]
        assert got == row["entities"], TEXTS[i]
    width = max(out["entity_count"])
    assert len(out["entity_start"][0]) == width and out["entity_start"][2] == [-1] * width


def test_the_ids_signature_gives_the_models_logits(run, exports):
    import tensorflow as tf

    folder, _ = exports["saved_model", False]
    loaded = open_run(run)
    features = encode_spans(loaded.tokenizer, [SpanExample(text) for text in TEXTS[:2]], None, MAXLEN)
    length = max(map(len, features.token_ids))
    ids = np.array([row + [0] * (length - len(row)) for row in features.token_ids], np.int32)
    logits = tf.saved_model.load(folder).signatures["ids"](token_ids=ids, segment_ids=np.zeros_like(ids))
    want = np.asarray(loaded.model([ids, np.zeros_like(ids)], training=False))
    got = logits["span_logits"].numpy()
    assert got.shape == (2, 3, length, length)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_allclose(got[np.isfinite(got)], want[np.isfinite(want)], atol=1e-5)


def test_an_int8_export_is_scored_within_its_bound(exports):
    folder, info = exports["onnx", True]
    metric, bound = LOSS_BOUND["span"]
    assert info["int8"] and info["dev_run"][metric] - info["dev"][metric] <= bound
    rows = predict_export(folder, TEXTS[:2])
    assert all({"start", "end", "label", "text"} == set(e) for row in rows for e in row["entities"])


def test_the_server_answers_with_the_spans(exports, expected):
    folder, _ = exports["openvino", False]
    served = open_export(folder)
    assert isinstance(served, PortableExport)
    with TestClient(make_app(served, "m")) as client:
        answer = client.post("/v1/models/m:predict", json={"instances": TEXTS})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": [{"entities": row["entities"]} for row in expected]}
    assert json.load(open(os.path.join(folder, EXPORT_INFO)))["format"] == "openvino"


# --stride given at export: a long document of generated sentences, its nested entities all along it
STRIDE = 6
DOCUMENT = "。".join(text for text, _ in span_examples(30, seed=5))


@pytest.fixture(scope="module")
def stride_exports(run, tmp_path_factory) -> dict[str, tuple[str, dict]]:
    """``{format: (export folder, what export returned)}`` of the run exported with ``--stride``."""
    out = {}
    for fmt in ("saved_model", "onnx"):
        folder = os.path.join(str(tmp_path_factory.mktemp(f"stride-{fmt}")), "export")
        out[fmt] = folder, export(run, folder, format=fmt, stride=STRIDE)
    return out


@pytest.fixture(scope="module")
def expected_with_stride(run) -> list[dict]:
    rows = predict(run, [DOCUMENT, *TEXTS], stride=STRIDE)
    assert len(DOCUMENT) > 10 * MAXLEN and any(e["start"] > 8 * MAXLEN for e in rows[0]["entities"])
    assert rows[1:3] == predict(run, TEXTS[:2])  # texts that fit: as without a stride
    return rows


def test_the_savedmodel_windows_a_long_text_in_its_graph_as_predict_does(stride_exports, expected_with_stride):
    folder, info = stride_exports["saved_model"]
    assert info["stride"] == STRIDE and json.load(open(os.path.join(folder, EXPORT_INFO)))["stride"] == STRIDE
    texts = [DOCUMENT, *TEXTS]
    out = savedmodel_without_kerasbert(folder, texts)
    for i, row in enumerate(expected_with_stride):
        got = [{"start": out["entity_start"][i][k], "end": out["entity_end"][i][k], "label": out["entity_label"][i][k],
                "text": out["entity_text"][i][k]} for k in range(out["entity_count"][i])]
        assert got == row["entities"], texts[i]


def test_onnx_and_the_server_window_a_long_text_as_predict_does(run, stride_exports, expected_with_stride):
    folder, info = stride_exports["onnx"]
    texts = [DOCUMENT, *TEXTS]
    assert predict_export(folder, texts) == expected_with_stride
    assert info["dev"]["f1"] == pytest.approx(info["dev_run"]["f1"], abs=1e-9)  # dev scored by the export, windowed
    assert info["dev_run"]["f1"] == evaluate(run, stride=STRIDE, verbose=0)["f1"]
    with TestClient(make_app(open_export(folder), "m")) as client:
        answer = client.post("/v1/models/m:predict", json={"instances": texts[:2]})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": [{"entities": row["entities"]} for row in expected_with_stride[:2]]}
