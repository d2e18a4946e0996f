"""The precision an OpenVINO export runs in: float32 is f32 on every CPU (OpenVINO would pick bfloat16 on CPUs
with AMX or avx512_bf16), bf16 only when asked for, and one-line errors where bf16 cannot be had."""

from __future__ import annotations

import os

import numpy as np
import pytest

from kerasbert import ConfigError, build_transformer_model
from kerasbert.serving import runtime
from kerasbert.serving.convert import to_openvino
from kerasbert.serving.export import export
from kerasbert.serving.runtime import load_runtime, openvino_config


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
    if not runtime.cpu_has_bf16():  # the f32 answer above holds on every CPU; bf16 needs the CPU's units
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
    with pytest.raises(ConfigError, match=r"--precision: expected f32 or bf16, found 'fp16'"):
        export(run, out, "openvino", precision="fp16")
    for fmt in ("onnx", "saved_model"):
        with pytest.raises(ConfigError, match=rf"--precision bf16: expected --format openvino, found --format {fmt}"):
            export(run, out, fmt, precision="bf16")
    monkeypatch.setattr(runtime, "cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match=r"--precision bf16: expected a CPU with bfloat16 units .*found none"):
        export(run, out, "openvino", precision="bf16")
    with pytest.raises(ConfigError, match=r"model.xml: expected a CPU with bfloat16 units .*--precision f32"):
        load_runtime("openvino", str(tmp_path / "model.xml"), "bf16")
    assert os.listdir(tmp_path) == []


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
