"""Exports that answer with sentence vectors: a SavedModel that takes raw text (loaded where kerasbert cannot be
imported), ONNX and OpenVINO in float32 and int8 held to the float32 vectors by cosine, the gate that sets a worse
one aside, `predict_export`, `kerasbert.embed` on an export, ``kerasbert serve`` and the CLI."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import ConfigError, ModelError, convert_checkpoint, embed
from kerasbert.cli import main
from kerasbert.serving import vector_export
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.server import make_app
from kerasbert.serving.vector_export import cosines
from kerasbert.text.tokenizer import Tokenizer

import helpers
from helpers import savedmodel_without_kerasbert
from int8_cpus import INT8_CPUS, WEIGHT_BITS, assert_weight_bits, int8_cpu

ATOL = 1e-5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghij", *(f"w{i}" for i in range(113))]
TEXTS = ["a b c d e f g h i j a b c", "w1 w2", "j", "W7 w7 w7 A", "", "c a", "w100 w3 b"]
CALIBRATION = [" ".join(f"w{(7 * i + k) % 113}" for k in range(1 + i % 9)) for i in range(40)]
# (format, int8) of each ONNX or OpenVINO export: False for float32, else the CPU class (INT8_CPUS) it is made for
EXPORTS = [("onnx", False), *((fmt, cpu) for fmt in ("onnx", "openvino") for cpu in INT8_CPUS)]


@pytest.fixture(scope="module")
def checkpoint(tiny_ckpt, tmp_path_factory) -> str:
    """The tiny random checkpoint as a Hugging Face folder with a vocab.txt, and a file of calibration texts."""
    folder = str(tmp_path_factory.mktemp("vectors") / "hf")
    google = str(tmp_path_factory.mktemp("vectors") / "google")
    shutil.copytree(tiny_ckpt, google)
    helpers.write_vocab(google, VOCAB)
    convert_checkpoint(google, folder)
    with open(os.path.join(os.path.dirname(folder), "calibration.txt"), "w", encoding="utf-8") as f:
        f.write("".join(text + "\n" for text in CALIBRATION))
    return folder


def calibration(checkpoint: str) -> str:
    return os.path.join(os.path.dirname(checkpoint), "calibration.txt")


@pytest.fixture(scope="module")
def exports(checkpoint, tmp_path_factory) -> dict:
    """``{(format, False): (folder, info)}``: the checkpoint exported with cls pooling in float32, and as a
    SavedModel."""
    out = {}
    for fmt in ("saved_model", "onnx"):
        folder = str(tmp_path_factory.mktemp(f"export-{fmt}") / "export")
        out[fmt, False] = folder, export(checkpoint, folder, fmt, pooling="cls",
                                         calibration=None if fmt == "saved_model" else calibration(checkpoint))
    return out


def _int8_export(checkpoint: str, fmt: str, cpu: str, folder: str) -> tuple[str, dict]:
    """An int8 export of the checkpoint (cls pooling) into ``folder``, as made on a CPU of class ``cpu``."""
    with int8_cpu(cpu):
        return folder, export(checkpoint, folder, fmt, int8=True, pooling="cls", accept_loss=True,
                              calibration=calibration(checkpoint))


@pytest.fixture(scope="module")
def expected(checkpoint) -> np.ndarray:
    return embed(checkpoint, TEXTS, pooling="cls")


def test_the_export_records_what_it_answers(exports, checkpoint):
    folder, info = exports["saved_model", False]
    with open(os.path.join(folder, EXPORT_INFO), encoding="utf-8") as f:
        assert json.load(f) == info
    assert {key: info[key] for key in ("task", "pooling", "normalize", "dimension", "maxlen", "lowercase", "labels",
                                       "pairs", "source_kind")} == {
        "task": "embedding", "pooling": "cls", "normalize": True, "dimension": 32, "maxlen": 64, "lowercase": True,
        "labels": [], "pairs": False, "source_kind": "checkpoint"}
    assert info["source"] == os.path.abspath(checkpoint) and info["dev"] == {}


@pytest.mark.slow  # a subprocess that loads TensorFlow
def test_the_savedmodel_answers_vectors_without_kerasbert(exports, expected):
    out = savedmodel_without_kerasbert(exports["saved_model", False][0], TEXTS)
    assert sorted(out) == ["vector"]
    np.testing.assert_allclose(out["vector"], expected, atol=ATOL)


def test_the_savedmodel_ids_signature_predict_export_and_embed(exports, checkpoint, expected):
    import tensorflow as tf

    folder = exports["saved_model", False][0]
    token_ids, segment_ids = Tokenizer(os.path.join(checkpoint, "vocab.txt")).encode_batch(TEXTS, padding=True)
    out = tf.saved_model.load(folder).signatures["ids"](token_ids=tf.constant(token_ids),
                                                        segment_ids=tf.constant(segment_ids))
    np.testing.assert_allclose(out["vector"].numpy(), expected, atol=ATOL)
    rows = predict_export(folder, TEXTS)
    assert [sorted(row) for row in rows] == [["text", "vector"]] * len(TEXTS)
    assert [row["text"] for row in rows] == TEXTS
    np.testing.assert_allclose([row["vector"] for row in rows], expected, atol=ATOL)
    np.testing.assert_allclose(embed(folder, TEXTS), expected, atol=ATOL)
    with pytest.raises(ConfigError, match="--pooling mean: expected the pooling of .*kerasbert-export.json, 'cls'"):
        embed(folder, TEXTS, pooling="mean")


def _int8_ops(folder: str, fmt: str) -> bool:
    """Whether the graph itself is quantized: ONNX Runtime's integer MatMuls, or OpenVINO's FakeQuantize."""
    if fmt == "onnx":
        import onnx

        return bool({node.op_type for node in onnx.load(os.path.join(folder, "model.onnx")).graph.node}
                    & {"MatMulInteger", "DynamicQuantizeLinear"})
    with open(os.path.join(folder, "model.xml"), encoding="utf-8") as f:
        return 'type="FakeQuantize"' in f.read()


@pytest.mark.parametrize(("fmt", "int8"), EXPORTS)
def test_portable_exports_keep_the_cosine_they_record(exports, checkpoint, expected, tmp_path, fmt, int8):
    folder, info = exports[fmt, int8] if not int8 else _int8_export(checkpoint, fmt, int8, str(tmp_path / "export"))
    assert _int8_ops(folder, fmt) == bool(int8)
    if int8:
        assert info["int8_choice"]["weight_bits"] == WEIGHT_BITS[int8]
        assert_weight_bits(os.path.join(folder, "model.onnx" if fmt == "onnx" else "model.xml"), int8)
    got = np.array([row["vector"] for row in predict_export(folder, TEXTS)])
    if not int8:
        np.testing.assert_allclose(got, expected, atol=ATOL)
    if fmt == "onnx":  # OpenVINO's int8 of this random model (weights of std 0.2) may fall under the bound
        assert cosines(got, expected).min() >= 0.99
    measured = cosines(open_export(folder).vectors(CALIBRATION), embed(checkpoint, CALIBRATION, pooling="cls"))
    assert info["dev_texts"] == len(CALIBRATION) and info["dev_file"] == calibration(checkpoint)
    np.testing.assert_allclose([info["dev"]["cosine"], info["dev"]["cosine_mean"]],
                               [measured.min(), measured.mean()], atol=1e-6)
    np.testing.assert_allclose(embed(folder, TEXTS), got, atol=1e-6)


def test_an_export_under_the_bound_is_set_aside(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(vector_export, "VECTOR_MIN_COSINE", 1.0 + 1e-6)  # no int8 export keeps that
    out = str(tmp_path / "export")
    with pytest.raises(ModelError, match="expected an onnx int8 export within the bound of the float32 vectors, found "
                                         r"mean cosine 0\.\d{4} to the float32 vectors over 40 texts, 0\.\d{4} at "
                                         r"worst.*kept at"):
        export(checkpoint, out, "onnx", int8=True, calibration=calibration(checkpoint))
    assert not os.path.exists(out) and os.path.isfile(os.path.join(out + ".rejected", EXPORT_INFO))
    info = export(checkpoint, out, "onnx", int8=True, calibration=calibration(checkpoint), accept_loss=True)
    assert info["dev"]["cosine"] < 1.0 + 1e-6 and os.path.isfile(os.path.join(out, "model.onnx"))


def test_int8_needs_texts_and_float32_goes_unmeasured_without_them(checkpoint, tmp_path):
    with pytest.raises(ConfigError, match="--calibration: expected a file of texts .* to hold int8 or bf16 vectors to "
                                          "the float32 ones, found none"):
        export(checkpoint, str(tmp_path / "int8"), "onnx", int8=True)
    assert not os.path.exists(tmp_path / "int8")
    info = export(checkpoint, str(tmp_path / "f32"), "onnx")
    assert info["dev"] == {} and "pass --calibration" in info["dev_unscored"]


def test_auto_takes_float32_without_texts_and_a_bf16_savedmodel_is_refused(checkpoint, tmp_path, monkeypatch):
    from kerasbert.perf import onednn
    from kerasbert.serving import precision

    monkeypatch.setattr(precision, "_automatic", lambda fmt, int8: ("bf16", "auto: this CPU has bfloat16 units"))
    info = export(checkpoint, str(tmp_path / "auto"), "openvino")
    assert info["precision"] == "f32" and info["dev"] == {}
    assert info["precision_choice"] == {"asked": "auto", "why": "auto: no texts to hold bf16 vectors to float32 ones"}
    monkeypatch.setattr(onednn, "bf16_speedup", lambda: 2.0)
    with pytest.raises(ConfigError, match="--precision bf16: expected --format openvino for a vector model, found "
                                          "--format saved_model"):
        export(checkpoint, str(tmp_path / "bf16"), "saved_model", precision="bf16")
    assert not os.path.exists(tmp_path / "bf16")


def test_serve_answers_vectors_in_tf_serving_shape(exports, expected):
    served = open_export(exports["onnx", False][0])
    with TestClient(make_app(served, "vectors")) as client:
        answer = client.post("/v1/models/vectors:predict", json={"instances": [TEXTS[0], {"text": TEXTS[1]}]})
        assert answer.status_code == 200, answer.text
        predictions = answer.json()["predictions"]
        assert [sorted(row) for row in predictions] == [["vector"], ["vector"]]
        np.testing.assert_allclose([row["vector"] for row in predictions], expected[:2], atol=ATOL)
        bad = client.post("/v1/models/vectors:predict", json={"instances": [[2, 5, 3]]})
        assert bad.status_code == 400 and "instances[0]" in bad.json()["error"]


def test_the_cli_exports_and_refuses_what_has_no_vectors(checkpoint, exports, tmp_path, capsys):
    out = str(tmp_path / "cli")
    assert main(["export", checkpoint, out, "--format", "onnx", "--pooling", "first_last_avg", "--no-normalize",
                 "--calibration", calibration(checkpoint)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{out}: sentence vectors (first_last_avg pooling, not normalized, 32 wide), maxlen "
                              "64, onnx; cosine to float32 1.0000 at worst")
    np.testing.assert_allclose(embed(out, TEXTS), embed(checkpoint, TEXTS, "first_last_avg", False), atol=ATOL)
    run = tmp_path / "run"
    run.mkdir()
    (run / "args.json").write_text(json.dumps({"task": "cls"}), encoding="utf-8")
    for call, words in (([str(run), str(tmp_path / "a"), "--pooling", "mean"], "--pooling: expected a checkpoint, "
                         "a sentence-transformers folder or a run whose model answers sentence vectors"),
                        ([exports["onnx", False][0], str(tmp_path / "b")], "expected a checkpoint, "
                         "sentence-transformers or run folder to export, found an export folder"),
                        ([checkpoint, str(tmp_path / "c"), "--stride", "8"], "--stride: expected a run of --task cls, "
                         "ner or span, found the sentence-vector model")):
        assert main(["export", *call]) == 2
        assert words in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["cli", "run"]


@pytest.mark.slow  # trains a model
def test_a_sim_run_embeds_and_exports_as_trained(tmp_path):
    from kerasbert import train
    from kerasbert.finetune.paraphrase_data import write_paraphrase_data
    from kerasbert.finetune.runs import open_run

    data = write_paraphrase_data(str(tmp_path / "data"), n_train=32, n_dev=8, n_test=2)
    run = str(tmp_path / "run")
    train("sim", data["train"], run, dev=data["dev"], vocab=data["vocab"], epochs=1, batch_size=8, maxlen=24,
          pooling="mean", verbose=0)
    loaded = open_run(run)
    texts = [example.text for example in loaded.task.read(data["test"])]
    token_ids, segment_ids = loaded.tokenizer.encode_batch(texts, maxlen=24, padding=True)
    expected = loaded.model.predict([token_ids, segment_ids], verbose=0)
    np.testing.assert_allclose(embed(run, texts), expected, atol=ATOL)
    with pytest.raises(ConfigError, match="--pooling cls: expected the pooling of .*args.json, 'mean'"):
        embed(run, texts, pooling="cls")
    info = export(run, str(tmp_path / "onnx"), "onnx", int8=True)
    assert (info["source_kind"], info["pooling"], info["maxlen"]) == ("run", "mean", 24)
    assert info["dev_texts"] == 16 and info["dev_file"] == data["dev"]  # each dev pair's two texts
    got = np.array([row["vector"] for row in predict_export(str(tmp_path / "onnx"), texts)])
    assert cosines(got, expected).min() >= 0.99
    export(run, str(tmp_path / "saved"))
    np.testing.assert_allclose(embed(str(tmp_path / "saved"), texts), expected, atol=ATOL)
