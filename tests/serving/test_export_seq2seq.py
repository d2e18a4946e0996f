"""The SavedModel of a seq2seq run: raw text in, generated text out, as `kerasbert.predict` generates it, in a process
where kerasbert cannot be imported, and from `kerasbert serve` in TF Serving's REST shape."""

from __future__ import annotations

import functools
import json
import os
import shutil

import numpy as np
import pytest

from kerasbert import DataError, generate, predict, train
from kerasbert.finetune.demo_data import write_title_data
from kerasbert.finetune.runs import open_run
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export
from kerasbert.serving.folder import EXPORT_INFO

from helpers import savedmodel_without_kerasbert

pytestmark = pytest.mark.slow  # trains a small model and exports it

# a title, a long paragraph cut to the source's room, mixed scripts, an empty text
TEXTS = ["昨天，华为公司在杭州举办了发布会，现场来了很多人，气氛非常热烈。",
         "张伟参加了会议，" * 12, "Hello, 李娜在北京工作。2024", ""]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A seq2seq run (beam search with 3 beams, 8 target pieces) and its SavedModel export."""
    data = write_title_data(str(tmp_path_factory.mktemp("titles")), n_train=96, n_dev=8, n_test=8)
    run = str(tmp_path_factory.mktemp("run"))
    train("seq2seq", data["train"], run, dev=data["dev"], vocab=data["vocab"], epochs=2, batch_size=16, lr=3e-3,
          maxlen=40, target_maxlen=8, beams=3, verbose=0)
    folder = os.path.join(str(tmp_path_factory.mktemp("export")), "export")
    info = export(run, folder)
    return run, folder, info


def test_the_export_generates_what_the_run_generates_without_kerasbert(exported):
    run, folder, info = exported
    assert (info["task"], info["beams"], info["target_maxlen"], info["labels"]) == ("seq2seq", 3, 8, [])
    assert json.load(open(os.path.join(folder, EXPORT_INFO)))["dev"] == info["dev_run"]
    out = savedmodel_without_kerasbert(folder, TEXTS)
    expected = predict(run, TEXTS)
    assert out["target"] == [row["target"] for row in expected]
    loaded = open_run(run)
    sources = [loaded.tokenizer.encode(text, maxlen=40 - 8)[0] for text in TEXTS]
    found = generate(loaded.model, sources, "beam", beams=3, end_ids=loaded.tokenizer.token_to_id("[SEP]"),
                     max_length=8)
    np.testing.assert_allclose(out["score"], [g.scores[0] for g in found], rtol=1e-5)


def test_the_ids_signature_gives_the_generated_ids(exported):
    import tensorflow as tf

    run, folder, _ = exported
    loaded = open_run(run)
    sep = loaded.tokenizer.token_to_id("[SEP]")
    sources = [loaded.tokenizer.encode(text, maxlen=32)[0] for text in TEXTS[:3]]
    padded = np.zeros((3, max(map(len, sources))), np.int32)
    for row, source in enumerate(sources):
        padded[row, :len(source)] = source
    out = tf.saved_model.load(folder).signatures["ids"](token_ids=tf.constant(padded))
    found = generate(loaded.model, sources, "beam", beams=3, end_ids=sep, max_length=8)
    for row, one in enumerate(found):
        ids = [i for i in one.ids[0] if i != sep]
        assert out["target_ids"][row, :out["target_length"][row]].numpy().tolist() == ids
        assert not out["target_ids"][row, out["target_length"][row]:].numpy().any()


def test_serve_answers_text_in_the_tf_serving_shape(exported):
    from starlette.testclient import TestClient

    from kerasbert.serving.server import make_app

    run, folder, _ = exported
    with TestClient(make_app(open_export(folder), "titles")) as client:
        answer = client.post("/v1/models/titles:predict", json={"instances": TEXTS[:2] + [{"text": TEXTS[2]}]})
        assert answer.status_code == 200
        assert answer.json() == {"predictions": [{"target": row["target"]} for row in predict(run, TEXTS[:3])]}
        ids = client.post("/v1/models/titles:predict", json={"instances": [[2, 45, 3]]})
        assert ids.status_code == 400
        assert ids.json()["error"] == 'instances[0]: expected a string or {"text": ...}, found a list [2, 45, 3]'


def test_the_export_records_its_cache_shape_and_serves_batches_whose_cache_fits(exported, tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from kerasbert.choices import GENERATE_LIMITS
    from kerasbert.serving.server import make_app

    run, folder, info = exported
    assert info["decoder"] == {"layers": 2, "hidden_size": 32, "max_length": 64}  # the tiny config
    texts = [*TEXTS[:3], "李娜在北京工作", "张伟参加了会议"]
    expected = {"predictions": [{"target": row["target"]} for row in predict(run, texts)]}
    old = tmp_path / "old"  # an export written before the shape was recorded: the 4096 rows alone bound it
    shutil.copytree(folder, old)
    (old / EXPORT_INFO).write_text(json.dumps({key: value for key, value in info.items() if key != "decoder"}))
    one = 2 * 3 * 2 * 40 * 32 * 4  # a source's cache: keys and values x 3 beams x 2 layers x 40 positions x 32 hidden
    monkeypatch.setitem(GENERATE_LIMITS, "cache_bytes", 2 * one + one // 2)  # two sources fit, three do not
    for path, batches in ((folder, [2, 2, 1]), (old, [5])):
        served, sizes = open_export(path), []
        served.signature = functools.partial(_counted, served.signature, sizes)
        with TestClient(make_app(served, "titles", max_batch=32, max_wait_ms=100)) as client:
            assert client.post("/v1/models/titles:predict", json={"instances": texts}).json() == expected
        assert sizes == batches, path


def _counted(signature, sizes: list, text):
    """``signature``'s answer, the batch size of each call appended to ``sizes``."""
    sizes.append(len(text))
    return signature(text=text)


def test_an_export_given_ids_instead_of_text_says_so(exported):
    with pytest.raises(DataError, match=r"row 1 text: expected a string \(the export tokenizes it\), found a list "
                                        r"\[2, 45, 3\]"):
        open_export(exported[1]).predict([{"text": "好"}, {"text": [2, 45, 3]}])


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_portable_exports_generate_what_the_run_generates(exported, tmp_path, fmt):
    run = exported[0]
    info = export(run, str(tmp_path / "export"), format=fmt, precision="f32")
    extension = {"onnx": ".onnx", "openvino": ".xml"}[fmt]
    assert info["decoder"]["files"] == {"prefill": "prefill" + extension, "step": "step" + extension}
    assert info["dev"] == info["dev_run"]  # scored on the export itself: the same targets
    assert open_export(str(tmp_path / "export")).predict([{"text": text} for text in TEXTS]) == predict(run, TEXTS)


def test_an_int8_decoder_is_onnx_and_a_bf16_savedmodel_is_of_a_labelling_run(exported, tmp_path, monkeypatch):
    from kerasbert import ConfigError
    from kerasbert.perf import onednn

    monkeypatch.setattr(onednn, "bf16_speedup", lambda: 2.0)  # what bf16 units measure
    with pytest.raises(ConfigError, match="--int8: expected --format onnx for a seq2seq run"):
        export(exported[0], str(tmp_path / "openvino"), format="openvino", int8=True)
    assert not os.path.exists(tmp_path / "openvino")
    with pytest.raises(ConfigError, match="--precision bf16: expected --format openvino for a seq2seq run"):
        export(exported[0], str(tmp_path / "bf16"), precision="bf16")
    assert not os.path.exists(tmp_path / "bf16")


def test_a_portable_seq2seq_export_without_its_decoder_says_so(tmp_path):
    from kerasbert import ConfigError

    (tmp_path / EXPORT_INFO).write_text(json.dumps({"task": "seq2seq", "labels": [], "pairs": False,
                                                    "format": "onnx"}))
    with pytest.raises(ConfigError, match="kerasbert-export.json: expected a seq2seq export's decoder"):
        open_export(str(tmp_path))
