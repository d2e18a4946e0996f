"""The precision an export computes in: float32 is f32 on every CPU (OpenVINO would pick bfloat16 on CPUs with AMX or
avx512_bf16), bf16 when asked for or chosen by ``auto`` (by CPU class, recorded with why), a bf16 SavedModel, the
fall back to float32 of an ``auto`` bf16 export that loses, and one-line errors where bf16 cannot be had."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import ConfigError, build_transformer_model, train
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.perf import onednn
from kerasbert.serving import precision as precisions
from kerasbert.serving.convert import to_openvino
from kerasbert.serving.export import export
from kerasbert.serving.folder import EXPORT_INFO
from kerasbert.serving.precision import openvino_config
from kerasbert.serving.runtime import load_runtime

from int8_cpus import INT8_CPUS, WEIGHT_BITS, int8_cpu


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    """``(keras model, its OpenVINO float32 file)``: the tiny preset's backbone, whose hidden states show any
    rounding of the matrix products (bfloat16 keeps 8 bits of mantissa)."""
    model = build_transformer_model("tiny", verbose=False)
    path = os.path.join(str(tmp_path_factory.mktemp("ov")), "model.xml")
    to_openvino(model, path)
    return model, path


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    ids = np.random.default_rng(0).integers(5, 100, size=(4, 16)).astype(np.int32)
    return ids, np.zeros_like(ids)


def _matmul_precisions(path: str, precision: str) -> set[str]:
    """The precisions OpenVINO's compiled model runs its matrix products in, with the export's settings."""
    import openvino

    compiled = openvino.Core().compile_model(path, "CPU", openvino_config(precision))
    return {op.get_rt_info()["runtimePrecision"].astype(str) for op in compiled.get_runtime_model().get_ops()
            if op.get_rt_info()["layerType"].astype(str) == "FullyConnected"}


def test_the_float32_export_runs_in_f32(backbone):
    model, path = backbone
    ids, segments = _inputs()
    want = model.predict([ids, segments], verbose=0)
    np.testing.assert_allclose(load_runtime("openvino", path)(ids, segments), want, atol=2e-5)
    assert openvino_config("f32")["INFERENCE_PRECISION_HINT"] == "f32"
    assert _matmul_precisions(path, "f32") == {"f32"}  # on every CPU, bfloat16 units or not


def test_bf16_is_its_own_choice(backbone):
    model, path = backbone
    if not precisions.cpu_has_bf16():  # the f32 answer above holds on every CPU; bf16 needs the CPU's units
        with pytest.raises(ConfigError, match="expected a CPU with bfloat16"):
            load_runtime("openvino", path, "bf16")
        return
    ids, segments = _inputs()
    want = model.predict([ids, segments], verbose=0)
    error = np.abs(load_runtime("openvino", path, "bf16")(ids, segments) - want).max()
    assert 1e-4 < error < 0.1  # rounded like bfloat16, and still the same model
    assert _matmul_precisions(path, "bf16") == {"bf16"}


def test_bf16_errors_name_the_option(tmp_path, monkeypatch):
    run, out = str(tmp_path / "no-run"), str(tmp_path / "out")
    with pytest.raises(ConfigError, match=r"--precision: expected auto or f32 or bf16, found 'fp16'"):
        export(run, out, "openvino", precision="fp16")
    with pytest.raises(ConfigError, match=r"--precision bf16: expected --format openvino or saved_model, found "
                                          r"--format onnx. ONNX Runtime's CPU kernels multiply floats in float32"):
        export(run, out, "onnx", precision="bf16")
    monkeypatch.setattr(precisions, "cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match=r"--precision bf16: expected a CPU with bfloat16 units .*found none"):
        export(run, out, "openvino", precision="bf16")
    with pytest.raises(ConfigError, match=r"model.xml: expected a CPU with bfloat16 units .*--precision f32"):
        load_runtime("openvino", str(tmp_path / "model.xml"), "bf16")
    monkeypatch.setattr(onednn, "bf16_speedup", lambda: 0.55)
    with pytest.raises(ConfigError, match=r"--precision bf16: expected a CPU where TensorFlow multiplies bfloat16 at "
                                          r"least 1.25 x as fast as float32 .*found 0.55 x float32 measured here"):
        export(run, out, "saved_model", precision="bf16")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("units", "flags", "speedup", "float_export", "int8_export"), [
    (False, set(), None, "f32", "f32"),                            # AVX2, or AVX-512 without bf16
    (True, {"avx512_bf16"}, 1.7, "bf16", "f32"),                   # AVX-512 with bf16 units, no AMX
    (True, {"avx512_bf16"}, 0.6, "f32", "f32"),                    # units listed, bf16 measured slower
    (True, {"avx512_bf16", "amx_bf16"}, 2.7, "bf16", "bf16"),      # AMX
])
def test_auto_chooses_by_cpu_class_and_says_why(monkeypatch, units, flags, speedup, float_export, int8_export):
    monkeypatch.setattr(precisions, "cpu_has_bf16", lambda: units)
    monkeypatch.setattr(onednn, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(precisions, "openvino_bf16_speedup", lambda: speedup)
    for int8, want in ((False, float_export), (True, int8_export)):
        chosen, choice = precisions.choose("auto", "openvino", int8)
        assert chosen == want and choice["asked"] == "auto", (int8, choice)
        reasons = ("no bfloat16 units", f"measured {speedup or 0:.2f} x float32", "no AMX")
        assert choice["why"].startswith("auto: ") and any(words in choice["why"] for words in reasons)
    for fmt in ("onnx", "saved_model"):  # whatever the CPU
        assert precisions.choose("auto", fmt, False)[0] == "f32"
    assert precisions.choose("f32", "openvino", False) == ("f32", {"asked": "f32", "why": "asked for"})


def test_openvino_bf16_speedup_is_measured_where_the_units_are():
    if not precisions.cpu_has_bf16():
        return  # nothing to measure: auto takes float32 without asking (the case above)
    speedup = precisions.openvino_bf16_speedup()
    assert 0.1 < speedup < 20
    chosen, choice = precisions.choose("auto", "openvino", False)
    assert chosen == ("bf16" if speedup >= onednn.HALF_FASTER else "f32")
    assert f"measured {speedup:.2f} x float32" in choice["why"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> str:
    """A tiny classifier run with a dev file, trained one short epoch."""
    data = write_demo_data(str(tmp_path_factory.mktemp("data")), n_train=64, n_dev=24, n_test=4)
    run = str(tmp_path_factory.mktemp("run"))
    train("cls", data["cls_train"], run, dev=data["cls_dev"], vocab=data["vocab"], epochs=1, batch_size=16,
          maxlen=16, verbose=0)
    return run


@pytest.mark.slow
def test_an_auto_openvino_export_records_the_choice_it_runs_with(classifier, tmp_path):
    info = export(classifier, str(tmp_path / "out"), "openvino")
    chosen, choice = precisions.choose("auto", "openvino", False)
    if info["precision_choice"]["why"].startswith("auto: bf16 lost"):  # fell back: bf16 lost more than the bound
        chosen = "f32"
    assert (info["precision"], info["precision_choice"]["asked"]) == (chosen, "auto")
    with open(tmp_path / "out" / EXPORT_INFO, encoding="utf-8") as f:
        assert json.load(f)["precision_choice"] == info["precision_choice"]
    assert info["dev"]["accuracy"] >= info["dev_run"]["accuracy"] - 0.005


@pytest.mark.slow
def test_an_auto_bf16_export_runs_in_float32_on_a_cpu_without_the_units(classifier, tmp_path, monkeypatch, caplog):
    """Made where ``auto`` chose bf16, served where the CPU has no bfloat16 units: float32, with a warning; one asked
    for in bf16 is refused there instead."""
    import logging

    from kerasbert.serving.exported import open_export

    info = export(classifier, str(tmp_path / "out"), "openvino", precision="f32")
    path = str(tmp_path / "out")
    monkeypatch.setattr(precisions, "cpu_has_bf16", lambda: False)
    made_by_auto = {**info, "precision": "bf16", "precision_choice": {"asked": "auto", "why": "auto: units"}}
    with caplog.at_level(logging.WARNING):
        assert precisions.runs_in(made_by_auto, path) == "f32"
    assert "exported in bf16 by --precision auto" in caplog.text and "runs in float32" in caplog.text
    assert precisions.runs_in({**made_by_auto, "precision_choice": {"asked": "bf16"}}, path) == "bf16"
    assert precisions.runs_in(info, path) == "f32"
    with open(os.path.join(path, EXPORT_INFO), "w", encoding="utf-8") as f:
        json.dump(made_by_auto, f)
    rows = open_export(path).predict([{"text": "很好"}])
    assert rows[0]["label"] in info["labels"]


def _graph_dtypes(folder: str) -> set[str]:
    """The dtypes of the matrix products in a SavedModel's ``ids`` signature."""
    import tensorflow as tf

    graph = tf.saved_model.load(folder).signatures["ids"].graph
    ops = [op for function in graph.as_graph_def().library.function for op in function.node_def]
    return {tf.dtypes.as_dtype(op.attr["T"].type).name for op in ops if "MatMul" in op.op}


@pytest.mark.slow
def test_a_bf16_saved_model_computes_in_bf16_and_scores_itself(classifier, tmp_path, monkeypatch, caplog):
    import logging

    import tensorflow as tf

    from kerasbert import predict
    from kerasbert.serving import exported

    monkeypatch.setattr(onednn, "bf16_speedup", lambda: 2.0)  # what bf16 units measure; the graph is the same
    info = export(classifier, str(tmp_path / "bf16"), "saved_model", precision="bf16")
    assert (info["precision"], info["precision_choice"]) == ("bf16", {"asked": "bf16", "why": "asked for"})
    assert info["dev"].keys() == info["dev_run"].keys() and info["dev"] is not info["dev_run"]
    assert "bfloat16" in _graph_dtypes(str(tmp_path / "bf16"))
    assert _graph_dtypes(_f32_saved_model(classifier, tmp_path)) == {"float32"}
    texts = ["很好", "这个不好用"]
    answer = tf.saved_model.load(str(tmp_path / "bf16")).signatures["serving_default"](text=tf.constant(texts))
    assert answer["probabilities"].dtype == tf.float32
    want = [list(row["probabilities"].values()) for row in predict(classifier, texts)]
    np.testing.assert_allclose(answer["probabilities"].numpy(), want, atol=0.05)
    monkeypatch.setattr(exported, "bf16_pays", lambda: False)  # served where bf16 measures no faster
    with caplog.at_level(logging.WARNING):
        exported.open_export(str(tmp_path / "bf16"))
    assert "bfloat16 measures no faster than float32" in caplog.text and "--precision f32" in caplog.text


def _f32_saved_model(run: str, tmp_path) -> str:
    export(run, str(tmp_path / "f32"), "saved_model")
    return str(tmp_path / "f32")


@pytest.mark.slow
def test_auto_falls_back_to_float32_when_bf16_loses(classifier, tmp_path, monkeypatch):
    """A run claiming a better dev score than its model's: the bf16 export ``auto`` chose loses against it, so it
    is written again in float32, whose score is the run's own."""
    import shutil

    claiming = str(tmp_path / "run")
    shutil.copytree(classifier, claiming)
    with open(os.path.join(claiming, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    metrics["dev"]["accuracy"] += 0.0051
    with open(os.path.join(claiming, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f)
    monkeypatch.setattr(precisions, "_automatic", lambda fmt, int8: ("bf16", "auto: this CPU has bfloat16 units"))
    info = export(claiming, str(tmp_path / "out"), "saved_model")
    assert info["precision"] == "f32" and info["dev"] == info["dev_run"]
    assert info["precision_choice"]["why"].startswith("auto: bf16 lost dev accuracy")
    assert _graph_dtypes(str(tmp_path / "out")) == {"float32"}
    assert sorted(os.listdir(tmp_path)) == ["out", "run"]  # nothing kept aside


def _fed_by(port, kind: str) -> bool:
    """Whether an OpenVINO input ``port`` reads an op of type ``kind``, directly or through reshapes."""
    node = port.get_source_output().get_node()
    if node.get_type_name() == kind:
        return True
    return node.get_type_name() in ("Reshape", "Transpose") and any(_fed_by(p, kind) for p in node.inputs())


def test_openvino_int8_keeps_the_products_of_two_activations_in_float(backbone, tmp_path):
    import openvino

    from kerasbert.serving.convert import activation_products

    model, path = backbone
    products = activation_products(openvino.Core().read_model(path))
    assert len(products) == 2 * 2  # Q·Kᵀ and the weighted sum of V, in each of the tiny preset's 2 layers
    ids, segments = _inputs()
    int8 = str(tmp_path / "int8.xml")
    to_openvino(model, int8, [(ids[i:i + 1], segments[i:i + 1]) for i in range(len(ids))])
    matmuls = [op for op in openvino.Core().read_model(int8).get_ops() if op.get_type_name() == "MatMul"]
    quantized = {op.get_friendly_name() for op in matmuls if any(_fed_by(port, "FakeQuantize") for port in op.inputs())}
    assert {op.get_friendly_name() for op in matmuls} - quantized == set(products)


def test_onnx_int8_scales_each_weight_column(backbone, tmp_path):
    import onnx

    from kerasbert.serving.convert import to_onnx

    model, _ = backbone
    to_onnx(model, str(tmp_path / "model.onnx"), int8=True)
    graph = onnx.load(str(tmp_path / "model.onnx")).graph
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    weights = [node.input[1] for node in graph.node if node.op_type == "MatMulInteger"]
    assert len(weights) == 2 * 4  # the fused Q, K, V projection, the attention output and the two feed-forward
    for weight in weights:  # one scale per output column
        assert shapes[weight.removesuffix("_quantized") + "_scale"] == shapes[weight][1:], weight


@pytest.mark.parametrize("cpu", INT8_CPUS)
def test_int8_weights_take_the_bits_of_the_cpu_class_and_8_bits_warn_without_vnni(cpu, caplog):
    """8-bit weights where the CPU has VNNI or AMX, 7-bit ones elsewhere, recorded with why; an int8 export with
    8-bit weights (or made before the record) warns when opened on a CPU without VNNI, and nothing else does."""
    import logging

    with int8_cpu(cpu):
        choice = precisions.int8_choice()
        assert choice["weight_bits"] == WEIGHT_BITS[cpu]
        assert precisions.int8_record(True) == {"int8_choice": choice} and precisions.int8_record(False) == {}
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            for info in ({"int8": True, "int8_choice": {"weight_bits": 7}}, {"int8": False}, {}):
                precisions.warn_int8_saturation(info, "exports/x")
            assert caplog.text == ""
            for info in ({"int8": True, "int8_choice": {"weight_bits": 8}}, {"int8": True}):
                precisions.warn_int8_saturation(info, "exports/x")
    if cpu == "vnni":
        assert "int32" in choice["why"] and caplog.text == ""
    else:
        assert "no VNNI or AMX" in choice["why"] and "vpmaddubsw" in choice["why"]
        assert caplog.text.count("exports/x: int8 with 8-bit weights, made on a CPU with VNNI or AMX") == 2
