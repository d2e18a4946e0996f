"""The CPU's matrix-product peaks in float32, bfloat16 and int8, measured with OpenVINO, and the precision each
served variant computes in (`serve_bench.py` gives each its share of that precision's peak).

A peak is one product ``[tokens, H] × [H, I]`` of BERT-base's feed-forward shape (4,096 × 768 × 3,072), compiled
by OpenVINO's CPU plugin: float32 and bfloat16 by its precision hint (bfloat16 only where the CPU has the units),
int8 as NNCF writes a quantized product (a FakeQuantize of 256 levels on the activations and of 255 on the
weights, which the plugin runs as one u8 × i8 product). The best of ``rounds`` timed runs after a warm-up.

Usage:
    python benchmarks/matmul_peaks.py        # prints the three peaks of this CPU
"""

from __future__ import annotations

import time

SHAPE = (4096, 768, 3072)  # tokens, H, I: BERT-base's feed-forward on 32 rows of 128 pieces
#: the precision each serving variant's matrix products run in (int8 variants: their quantized products)
PRECISION_OF = {"bert4keras": "f32", "keras": "f32", "saved_model": "f32", "onnx": "f32", "onnx-int8": "int8",
                "openvino": "f32", "openvino-int8": "int8", "openvino-bf16": "bf16", "openvino-int8-bf16": "int8",
                "saved_model-bf16": "bf16"}


def _product(int8: bool):
    """OpenVINO's model of one ``[M, K] × [N, K]ᵀ`` product, quantized as NNCF quantizes one where ``int8``."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    m, k, n = SHAPE
    x = ops.parameter([m, k], np.float32, name="x")
    w = ops.constant(np.random.default_rng(0).normal(0, 0.05, (n, k)).astype(np.float32))
    a, b = x, w
    if int8:
        low, high = ops.constant(np.float32(-4)), ops.constant(np.float32(4))
        a = ops.fake_quantize(x, low, high, low, high, 256)
        w_low, w_high = ops.constant(np.float32(-0.25)), ops.constant(np.float32(0.25))
        b = ops.fake_quantize(w, w_low, w_high, w_low, w_high, 255)
    return ov.Model([ops.result(ops.matmul(a, b, False, True))], [x])


def peak_gflops(precision: str, rounds: int = 10) -> float:
    """The best GFLOP/s of the product in ``precision`` (``f32``, ``bf16`` or ``int8``)."""
    import numpy as np
    import openvino as ov

    hint = "bf16" if precision == "bf16" else "f32"
    compiled = ov.Core().compile_model(_product(precision == "int8"), "CPU",
                                       {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": hint})
    request = compiled.create_infer_request()
    x = np.random.default_rng(1).normal(0, 1, SHAPE[:2]).astype(np.float32)
    for _ in range(2):
        request.infer({0: x})
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        request.infer({0: x})
        best = min(best, time.perf_counter() - start)
    m, k, n = SHAPE
    return 2 * m * k * n / best / 1e9


def peaks(rounds: int = 10) -> dict[str, float]:
    """This CPU's peaks by precision, the best of ``rounds`` runs each; no ``bf16`` where the CPU has no bfloat16
    units."""
    from kerasbert.serving.precision import cpu_has_bf16

    return {precision: peak_gflops(precision, rounds) for precision in ("f32", "bf16", "int8")
            if precision != "bf16" or cpu_has_bf16()}


if __name__ == "__main__":
    for precision, gflops in peaks().items():
        print(f"{precision}: {gflops:.0f} GFLOP/s")
