"""The two CPU classes an int8 export quantizes its weights for (`kerasbert.serving.precision.int8_choice`), made
selectable so that an int8 test runs in both on any CPU: ``"vnni"`` (8-bit weights; this CPU's own flags, and the
test skipped on a CPU without VNNI or AMX, whose int16 sums such weights saturate) and ``"no-vnni"`` (7-bit weights;
the CPU flag reader answers without VNNI and AMX, and 7-bit weights compute alike on either class). Also the
largest int8 weight of an export's matrix products, which says which one a file holds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

INT8_CPUS = ("vnni", "no-vnni")
WEIGHT_BITS = {"vnni": 8, "no-vnni": 7}
SEVEN_BITS = 64  # the largest |int8 weight| in 7 bits: ONNX Runtime's reach 64, NNCF's 63; 8 bits reach 127


@contextlib.contextmanager
def int8_cpu(cpu: str) -> Iterator[None]:
    """Inside, int8 exports are made (and opened) as on a CPU of class ``cpu``, one of `INT8_CPUS`."""
    from kerasbert.perf import onednn
    from kerasbert.serving.precision import INT8_UNITS

    flags = onednn.cpu_flags()
    if cpu == "vnni" and not flags & INT8_UNITS:
        pytest.skip("this CPU has no VNNI or AMX: 8-bit int8 weights saturate its int16 sums (its exports take 7 bits)")
    with pytest.MonkeyPatch.context() as patch:
        if cpu == "no-vnni":
            patch.setattr(onednn, "cpu_flags", lambda: flags - INT8_UNITS)
        yield


def assert_weight_bits(path: str, cpu: str) -> None:
    """An ONNX or OpenVINO file's matrix products read the int8 weights made for a CPU of class ``cpu``: each
    weight column's largest |weight| maps to 127 in 8 bits, and none passes `SEVEN_BITS` in 7."""
    largest = largest_matmul_weight(path)
    assert largest <= SEVEN_BITS if WEIGHT_BITS[cpu] == 7 else largest == 127, (path, cpu, largest)


def largest_matmul_weight(path: str) -> int:
    """The largest |int8 weight| that an ONNX (``.onnx``) or OpenVINO (``.xml``) file's matrix products read: ONNX
    Runtime's ``MatMulInteger`` weights, or OpenVINO's int8 constants that reach a ``MatMul`` (the embedding tables,
    which a ``Gather`` reads, are left out: no product sums them)."""
    if path.endswith(".onnx"):
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(path).graph
        weights = {node.input[1] for node in graph.node if node.op_type == "MatMulInteger"}
        return max(int(np.abs(numpy_helper.to_array(t).astype(np.int32)).max()) for t in graph.initializer
                   if t.name in weights)
    import openvino

    model = openvino.Core().read_model(path)
    return max(int(np.abs(op.get_data().astype(np.int32)).max()) for op in model.get_ops()
               if op.get_type_name() == "Constant" and op.get_element_type() == openvino.Type.i8
               and _reaches_matmul(op))


def _reaches_matmul(op, depth: int = 6) -> bool:
    """Whether an OpenVINO node's output reaches a MatMul within ``depth`` nodes (through its dequantization)."""
    if depth == 0:
        return False
    consumers = [port.get_node() for port in op.output(0).get_target_inputs()]
    return any(node.get_type_name() == "MatMul" or _reaches_matmul(node, depth - 1) for node in consumers)
