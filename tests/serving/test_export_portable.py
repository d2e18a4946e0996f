"""ONNX and OpenVINO exports (float32 and int8): the model alone beside vocab.txt, run by
`kerasbert.serving.runtime` without TensorFlow, answering as `kerasbert.predict` does; the NumPy Viterbi against
the CRF layer's; the CLI, the server, and the errors of bad arguments and broken export folders."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import ConfigError, predict, train
from kerasbert.cli import main
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export, predict_export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.runtime import LENGTH_STEP, PortableExport, row_chunks
from kerasbert.serving.server import _open, make_app

from int8_cpus import INT8_CPUS, WEIGHT_BITS, assert_weight_bits, int8_cpu

pytestmark = pytest.mark.slow  # trains two small models and converts them

MAXLEN = 24
LONG = "中国银行在杭州开了一家分店，周末人比较多，排队等了半小时。张伟和李娜也去了北京的阿里巴巴公司"  # > MAXLEN pieces
TEXTS = ["张伟去年加入了华为公司", "这家餐厅的菜非常好吃", "房间很脏，真的让人失望",
         "李娜在北京的阿里巴巴工作。Hello, World! 2024", "王", "résumé: 赵敏 (Zhao Min) 在腾讯公司上班!?", LONG]
# (run, format) of each float32 export the module writes, and of each int8 one, made for each of INT8_CPUS
EXPORTS = [("cls", "onnx"), ("cls", "openvino"), ("ner-crf", "onnx"), ("ner-crf", "openvino")]
INT8_EXPORTS = [("cls", "onnx"), ("cls", "openvino"), ("ner-crf", "openvino")]
PROBABILITY_INT8 = 0.05  # int8 probabilities stay this close to float32's


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """``{"cls": run, "ner-crf": run}``, each trained briefly on the demo data."""
    data = write_demo_data(str(tmp_path_factory.mktemp("data")), n_train=300, n_dev=16, n_test=16)
    out = {}
    # batches of 8 make the classifier confident (dev accuracy 1.0), so its labels are far from a tie
    for name, task, options in (("cls", "cls", {"batch_size": 8}), ("ner-crf", "ner", {"crf": True, "batch_size": 16})):
        run = str(tmp_path_factory.mktemp(f"run-{name}"))
        train(task, data[f"{task}_train"], run, dev=data[f"{task}_dev"], vocab=data["vocab"], epochs=3, lr=2e-3,
              maxlen=MAXLEN, verbose=0, **options)
        out[name] = run
    return out


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory) -> dict[tuple[str, str, bool], tuple[str, dict]]:
    """``{(run name, format, False): (export folder, what export returned)}``, in float32."""
    out = {}
    for name, fmt in EXPORTS:
        folder = os.path.join(str(tmp_path_factory.mktemp(f"export-{name}-{fmt}")), "export")
        out[name, fmt, False] = folder, export(runs[name], folder, fmt, precision="f32")
    return out


def _int8_export(run: str, fmt: str, cpu: str, folder: str) -> tuple[str, dict]:
    """An int8 export of ``run`` into ``folder`` as made on a CPU of class ``cpu`` (`int8_cpus.INT8_CPUS`)."""
    # int8 may lose a little on these 16-example dev sets (one example is 6 points): the bound is tested in
    # test_export_gate.py, the default int8's scores on the demo tasks in benchmarks/serve_accuracy.py
    with int8_cpu(cpu):
        return folder, export(run, folder, fmt, int8=True, precision="f32", accept_loss=True)


@pytest.fixture(scope="module")
def expected(runs) -> dict[str, list[dict]]:
    """`kerasbert.predict`'s rows of TEXTS for each run."""
    return {name: predict(run, TEXTS) for name, run in runs.items()}


def _scalars(scores: dict) -> dict:
    return {key: value for key, value in scores.items() if isinstance(value, float)}


def _int8_ops(folder: str, fmt: str) -> set[str]:
    """The quantization ops of an export's graph: ONNX Runtime's integer MatMuls, or OpenVINO's FakeQuantize."""
    if fmt == "onnx":
        import onnx

        graph = onnx.load(os.path.join(folder, "model.onnx")).graph
        return {node.op_type for node in graph.node} & {"MatMulInteger", "DynamicQuantizeLinear"}
    with open(os.path.join(folder, "model.xml"), encoding="utf-8") as f:
        return {"FakeQuantize"} & set(re.findall(r'type="(\w+)"', f.read()))


# ------------------------------------------------------------------------------------------- answers
@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
@pytest.mark.parametrize("name", ["cls", "ner-crf"])
def test_float32_exports_answer_as_the_run(exports, expected, name, fmt):
    folder, info = exports[name, fmt, False]
    assert sorted(os.listdir(folder)) == sorted([EXPORT_INFO, "vocab.txt"] + (["model.onnx"] if fmt == "onnx" else
                                                                               ["model.bin", "model.xml"]))
    assert json.load(open(os.path.join(folder, EXPORT_INFO), encoding="utf-8")) == info
    assert (info["format"], info["int8"], info["maxlen"], info["crf"]) == (fmt, False, MAXLEN, name == "ner-crf")
    assert info["precision"] == "f32"  # OpenVINO's own choice on a CPU with AMX or avx512_bf16 would be bf16
    assert isinstance(open_export(folder), PortableExport)
    got, want = predict_export(folder, TEXTS), expected[name]
    assert [row["text"] for row in got] == TEXTS
    if name == "cls":
        assert [row["label"] for row in got] == [row["label"] for row in want]
        for mine, theirs in zip(got, want, strict=True):
            assert mine["probabilities"].keys() == theirs["probabilities"].keys()
            np.testing.assert_allclose(list(mine["probabilities"].values()), list(theirs["probabilities"].values()),
                                       atol=1e-5)
        assert len({row["label"] for row in want}) == 2  # both labels are predicted: the comparison says something
    else:
        assert len(info["crf_transitions"]) == len(info["labels"])
        assert got == want
        assert any(row["entities"] for row in want)  # the test would be empty otherwise
        assert any(row["entities"] and row["entities"][-1]["end"] > MAXLEN // 2 for row in want)
    # the export's own dev score is the run's: the same model
    assert _scalars(info["dev"]) and _scalars(info["dev"]).keys() <= info["dev_run"].keys()
    for key, value in _scalars(info["dev"]).items():
        assert value == pytest.approx(info["dev_run"][key], abs=1e-6), key


def test_the_openvino_graph_fuses_each_layer_norm_and_the_gelu_into_its_matmul(runs, exports):
    """Traced in `kerasbert.perf.portable.portable_graph`, every LayerNorm runs as one MVN and each feed-forward's
    GELU as a post-op of its inner matmul, not as elementwise ops of their own."""
    import openvino

    from kerasbert.serving.precision import openvino_config

    layers = json.load(open(os.path.join(runs["cls"], "bert_config.json")))["num_hidden_layers"]
    folder, _ = exports["cls", "openvino", False]
    compiled = openvino.Core().compile_model(os.path.join(folder, "model.xml"), "CPU", openvino_config("f32"))
    ops = [(op.get_rt_info()["layerType"].astype(str), op.get_rt_info()["originalLayersNames"].astype(str))
           for op in compiled.get_runtime_model().get_ops()]
    assert sum(kind == "MVN" for kind, _ in ops) == 2 * layers + 1  # the embedding's norm and two a layer
    inner = [(kind, names) for kind, names in ops if "FeedForward_1/intermediate" in names]
    assert len(inner) == layers and all(kind == "FullyConnected" and "FeedForward_1/mul" in names
                                        for kind, names in inner)
    assert not any("Erf" in names or "Gelu" in names for _, names in ops)


@pytest.mark.parametrize("cpu", INT8_CPUS)
@pytest.mark.parametrize(("name", "fmt"), INT8_EXPORTS)
def test_int8_exports_stay_close_to_float32(runs, exports, tmp_path, name, fmt, cpu):
    folder, info = _int8_export(runs[name], fmt, cpu, str(tmp_path / "export"))
    fp32 = exports[name, fmt, False][0]
    assert info["int8"] is True and info["format"] == fmt
    assert _int8_ops(folder, fmt) and not _int8_ops(fp32, fmt)  # the graph itself is quantized
    assert info["int8_choice"]["weight_bits"] == WEIGHT_BITS[cpu]
    assert_weight_bits(os.path.join(folder, "model.onnx" if fmt == "onnx" else "model.xml"), cpu)
    got, want = predict_export(folder, TEXTS), predict_export(fp32, TEXTS)
    if name == "cls":
        assert [row["label"] for row in got] == [row["label"] for row in want]
        np.testing.assert_allclose([list(row["probabilities"].values()) for row in got],
                                   [list(row["probabilities"].values()) for row in want], atol=PROBABILITY_INT8)
        metric = "accuracy"
    else:
        assert got == want
        metric = "f1"
    assert _scalars(info["dev"]).keys() == _scalars(info["dev_run"]).keys() and metric in info["dev"]
    assert info["dev_run"] == exports[name, fmt, False][1]["dev_run"]  # the run's, whatever the export
    assert abs(info["dev"][metric] - info["dev_run"][metric]) <= 0.1


# ------------------------------------------------------------------------------------------- shapes
def test_row_chunks_are_powers_of_two_padding_at_most_a_quarter():
    for rows in range(1, 300):
        sizes = row_chunks(rows)
        assert all(size & (size - 1) == 0 for size in sizes), rows
        assert rows <= sum(sizes) <= rows + rows // 4, rows
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes), rows  # each at most once
    assert [row_chunks(n) for n in (1, 5, 7, 17, 23, 32)] == [[1], [4, 1], [8], [16, 1], [16, 8], [32]]


def test_the_runtime_meets_few_shapes_and_answers_as_row_by_row(exports):
    ner = open_export(exports["ner-crf", "openvino", False][0])
    shapes, run_model = [], ner.run_model
    ner.run_model = lambda ids, segments: shapes.append(ids.shape) or run_model(ids, segments)
    texts = [TEXTS[i % len(TEXTS)][: 3 + i % 17] for i in range(23)]  # 23 rows of 3 to 19 characters
    together = ner.predict([{"text": text} for text in texts], batch_size=32)
    assert {rows for rows, _ in shapes} <= {1, 2, 4, 8, 16, 32} and len(shapes) >= 2
    assert all(length % LENGTH_STEP == 0 for _, length in shapes)
    assert together == [ner.predict([{"text": text}])[0] for text in texts]


# ------------------------------------------------------------------------------------------- no TensorFlow
FRESH = """
import json, sys
from kerasbert.serving.exported import predict_export
rows = predict_export(sys.argv[1], json.loads(sys.argv[2]))
print(json.dumps({"rows": rows, "tensorflow": "tensorflow" in sys.modules, "keras": "keras" in sys.modules}))
"""


@pytest.mark.parametrize("name", ["cls", "ner-crf"])
def test_a_fresh_process_answers_without_tensorflow(exports, expected, name):
    folder, _ = exports[name, "openvino", False]
    done = subprocess.run([sys.executable, "-c", FRESH, folder, json.dumps(TEXTS)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert (out["tensorflow"], out["keras"]) == (False, False)
    assert out["rows"] == predict_export(folder, TEXTS)
    if name == "ner-crf":
        assert out["rows"] == expected[name]
    else:
        assert [row["label"] for row in out["rows"]] == [row["label"] for row in expected[name]]


# ------------------------------------------------------------------------------------------- CLI and server
def test_export_and_predict_from_the_cli(runs, expected, tmp_path, capsys):
    out = str(tmp_path / "export")
    assert main(["export", runs["ner-crf"], out, "--format", "onnx", "--int8", "--accept-loss"]) == 0
    printed = capsys.readouterr().out
    info = json.load(open(os.path.join(out, EXPORT_INFO), encoding="utf-8"))
    assert (info["format"], info["int8"], info["task"]) == ("onnx", True, "ner")
    assert f"{out}: ner model, {len(info['labels'])} labels, maxlen {MAXLEN}, onnx int8" in printed
    assert f"precision int8 (f32 elsewhere): {info['precision_choice']['why']}\n" in printed  # as the JSON says
    for name, scores in (("export", info["dev"]), ("run", info["dev_run"])):
        assert f"dev score of the {name}: " in printed and f"f1 {scores['f1']:.4f}" in printed
    assert main(["predict", "--model", out, "--text", TEXTS[0], "--text", TEXTS[3]]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == predict_export(out, [TEXTS[0], TEXTS[3]])
    assert [row["text"] for row in lines] == [TEXTS[0], TEXTS[3]] and any(row["entities"] for row in lines)
    assert [[(e["label"], e["text"]) for e in row["entities"]] for row in lines] \
        == [[(e["label"], e["text"]) for e in expected["ner-crf"][i]["entities"]] for i in (0, 3)]


def test_the_server_answers_with_a_portable_export(exports):
    folder, _ = exports["ner-crf", "openvino", False]
    served = open_export(folder)
    want = [{key: value for key, value in row.items() if key != "text"} for row in served.predict(
        [{"text": text} for text in TEXTS])]
    assert any(row["entities"] for row in want)
    with TestClient(make_app(served, "m")) as client:
        for instances, rows in ((TEXTS, want), ([{"text": text} for text in TEXTS], want), (TEXTS[4:], want[4:])):
            answer = client.post("/v1/models/m:predict", json={"instances": instances})
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"predictions": rows}


def test_an_export_with_8_bit_weights_warns_where_the_cpu_has_no_vnni(exports, caplog):
    """The runtime opens an int8 export that records 8-bit weights (made on a CPU with VNNI) with a warning on a CPU
    without VNNI; one with 7-bit weights opens quietly."""
    folder, info = exports["cls", "onnx", False]
    made_with_vnni = {**info, "int8": True, "int8_choice": {"weight_bits": 8, "why": "this CPU has avx512_vnni"}}
    with int8_cpu("no-vnni"), caplog.at_level(logging.WARNING):
        PortableExport(folder, {**made_with_vnni, "int8_choice": {"weight_bits": 7, "why": "no VNNI"}})
        assert caplog.text == ""
        PortableExport(folder, made_with_vnni)
    assert f"{folder}: int8 with 8-bit weights, made on a CPU with VNNI or AMX" in caplog.text


# ------------------------------------------------------------------------------------------- errors
def test_bad_arguments_fail_at_once_and_leave_no_folder(runs, tmp_path):
    run, out = runs["cls"], str(tmp_path / "out")
    with pytest.raises(ConfigError, match="--int8: expected --format onnx or openvino, found --format saved_model"):
        export(run, out, "saved_model", int8=True)
    with pytest.raises(ConfigError, match="--format: expected saved_model or openvino or onnx, found 'tflite'"):
        export(run, out, "tflite")
    with pytest.raises(ConfigError, match="--calibration: .*found '/no/such/file'"):
        export(run, out, "openvino", int8=True, calibration="/no/such/file")
    assert not os.path.exists(out) and os.listdir(tmp_path) == []


def test_broken_export_folders_fail_with_a_named_error(exports, tmp_path):
    folder, _ = exports["cls", "openvino", False]
    cut = tmp_path / "cut"
    shutil.copytree(folder, cut)
    os.remove(cut / "model.xml")
    with pytest.raises(ConfigError, match="expected an openvino export with model.xml, found no such file"):
        open_export(cut)
    changed = tmp_path / "changed"
    shutil.copytree(folder, changed)
    with open(changed / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("新词\n")
    with pytest.raises(ConfigError, match=r"vocab.txt: expected the vocabulary the model was exported with"):
        open_export(changed)
    with contextlib.ExitStack() as stack, pytest.raises(ConfigError, match="--backend: .*'openvino', found 'onnx'"):
        _open(folder, stack, backend="onnx")
    with contextlib.ExitStack() as stack:
        assert isinstance(_open(folder, stack, backend="openvino"), PortableExport)
