"""Write a Keras model as ONNX or OpenVINO files, in float32 or int8.

The model written is the task's head model on ``(token_ids, segment_ids)`` (a CRF head gives its emission
scores; `kerasbert.serving.runtime` decodes them). ONNX comes from tf2onnx, OpenVINO from its own converter,
each on the model's ``tf.function``. Int8:

- ONNX: onnxruntime's dynamic quantization, int8 weights of every MatMul with a scale per output column,
  activations quantized per call;
- OpenVINO: NNCF's post-training quantization for transformers, calibrated on up to ``CALIBRATION`` examples of
  the run's own data, which runs the int8 matrix products of the CPU (VNNI, AMX) where it has them.

Both quantize the weights in 8 bits on a CPU with VNNI or AMX and in 7 bits elsewhere (ONNX Runtime's
``reduce_range``, NNCF's overflow fix), where 8-bit weights can saturate the CPU's int16 sums of int8 products
(`kerasbert.serving.precision.int8_choice`). Both keep what a pretrained BERT's activation outliers would ruin:
ONNX scales each weight column on its own (one scale for a whole matrix rounds its small columns away), and
OpenVINO leaves in float the matrix products of two activations (attention's ``Q·Kᵀ`` and its weighted sum of the
values) and skips SmoothQuant, whose per-channel rescaling moves activation outliers into the int8 weights.
``benchmarks/serve_accuracy.py`` measures each choice on a real pretrained checkpoint. The model is traced in
`kerasbert.perf.portable.portable_graph`, where its GELU and LayerNorm take the forms the runtimes fuse.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

import numpy as np

from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.log import logger
from kerasbert.perf.portable import portable_graph
from kerasbert.serving.extras import require
from kerasbert.serving.precision import int8_choice

__all__ = ["CALIBRATION", "COLLECT_BYTES", "OPSET", "Names", "activation_products", "function_to_onnx",
           "function_to_openvino", "to_onnx", "to_openvino", "weight_bits_of"]

OPSET = 17
COLLECT_BYTES = 64 << 20  # float32 weights from which an ONNX conversion frees its copies as it goes (`_tf2onnx`)
CALIBRATION = 300
Names = tuple[list[str], list[str]]  # a converted function's input names and output names, each in flattened order


def _function(model):
    """The model's ``tf.function`` on int32 ``token_ids``, ``segment_ids`` of any batch size and length."""
    import tensorflow as tf

    spec = [tf.TensorSpec([None, None], tf.int32, name="token_ids"),
            tf.TensorSpec([None, None], tf.int32, name="segment_ids")]
    return tf.function(lambda ids, segments: {"output": model([ids, segments], training=False)},
                       input_signature=spec)


def _erfc(ctx, node, name, args) -> None:
    """tf2onnx handler for TensorFlow's ``Erfc`` (exact GELU), which ONNX lacks: ``1 - Erf(x)``."""
    from tf2onnx import utils

    erf = ctx.make_node("Erf", [node.input[0]], op_name_scope=node.name)
    one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, np.float32))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


def _tf2onnx(function, path: str, collect: bool, names: Names | None = None) -> None:
    """tf2onnx's conversion of ``function`` into ``path``, step by step: its graph optimizers run one at a time,
    with a garbage collection after each when ``collect`` says so, since they leave the model's constants in
    reference cycles that Python's collector reaches late (a BERT-base conversion would hold several copies of
    its weights); a full collection costs the same whatever the model's size, so a small model skips them.
    ``names`` renames the inputs and outputs, in the concrete function's flattened order."""
    import gc

    import tensorflow as tf
    from tf2onnx import optimizer, tf_loader, tfonnx, utils

    with portable_graph():  # the forms onnxruntime fuses
        concrete = function.get_concrete_function()
    inputs, outputs = _flat_names(concrete)
    graph_def = tf_loader.from_function(concrete, inputs, outputs)
    with tf.Graph().as_default() as tf_graph:
        tf.import_graph_def(graph_def, name="")
    del graph_def
    graph = tfonnx.process_tf_graph(tf_graph, opset=OPSET, input_names=inputs, output_names=outputs,
                                    custom_op_handlers={"Erfc": (_erfc, [])})
    del tf_graph
    if names is not None:
        graph.rename_tensors(dict(zip(inputs + outputs, _checked_names(names, inputs, outputs), strict=True)))
    for _ in range(2):  # tf2onnx repeats its optimizers until nothing changes; two rounds reach that here
        for name, step in optimizer._get_optimizers().items():
            graph = optimizer.optimize_graph(graph, optimizers={name: step})
            if collect:
                gc.collect()
    utils.save_protobuf(path, graph.make_model("kerasbert"))


def _flat_names(concrete) -> tuple[list[str], list[str]]:
    """A concrete function's input tensors' names (its captured variables left out) and its outputs'."""
    import tensorflow as tf

    return ([tensor.name for tensor in concrete.inputs if tensor.dtype != tf.resource],
            [tensor.name for tensor in concrete.outputs])


def _checked_names(names: Names, inputs: list, outputs: list) -> list[str]:
    """``names``' inputs then outputs, a ModelError unless they count the function's own."""
    if (len(names[0]), len(names[1])) != (len(inputs), len(outputs)):
        raise fail(ModelError, "export names", f"{len(inputs)} inputs and {len(outputs)} outputs",
                   f"{len(names[0])} and {len(names[1])}")
    return [*names[0], *names[1]]


@contextlib.contextmanager
def _without_preprocessing_advice() -> Iterator[None]:
    """Hold back ONNX Runtime's advice to pre-process a model before quantizing it (logged as a warning on the root
    logger at every quantization): its shape inference pass is for convolutional models, and a user of the export
    can do nothing about it. Every other record passes."""
    import logging

    def advice(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Please consider") and "pre-processing before quantization" in message)

    root = logging.getLogger()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


def _weight_bits(weight_bits: int | None) -> int:
    """``weight_bits`` (7 or 8), or the bits this CPU calls for when None (`int8_choice`)."""
    if weight_bits is None:
        return int8_choice()["weight_bits"]
    if weight_bits not in (7, 8):
        raise fail(ConfigError, "weight_bits", "7 or 8", repr(weight_bits))
    return weight_bits


def to_onnx(model, path: str, int8: bool = False, weight_bits: int | None = None) -> None:
    """Write ``model`` (inputs ``token_ids``, ``segment_ids``, int32 ``[batch, length]``) to the ONNX file ``path``.

    Example:
    >>> import os, tempfile
    >>> from kerasbert import build_transformer_model, heads
    >>> path = os.path.join(tempfile.mkdtemp(), "model.onnx")
    >>> to_onnx(heads.cls(build_transformer_model("tiny", verbose=False), 2), path)
    >>> os.path.getsize(path) > 0
    True
    """
    function_to_onnx(_function(model), path, int8=int8, collect=model.count_params() * 4 >= COLLECT_BYTES,
                     weight_bits=weight_bits)


def function_to_onnx(function, path: str, names: Names | None = None, int8: bool = False,
                     collect: bool = False, weight_bits: int | None = None) -> None:
    """Write a ``tf.function`` with an input signature to the ONNX file ``path``.

    Args:
        function: tf.function. its signature fixes the inputs (nested ones flatten in ``tf.nest`` order).
        path: str. the ``.onnx`` file to write.
        names: pair of lists of str. the inputs' and outputs' names, in the concrete function's flattened order;
            None keeps TensorFlow's (``token_ids:0``, ``Identity:0``).
        int8: bool. onnxruntime's dynamic int8 quantization of the MatMuls' weights, a scale per column.
        collect: bool. free the converter's copies of the weights as it goes (a model of ``COLLECT_BYTES`` up).
        weight_bits: int or None. int8: 8, or 7 (``reduce_range``) for a CPU without VNNI; None: as this CPU calls
            for (`kerasbert.serving.precision.int8_choice`).
    """
    require("tf2onnx", "to write ONNX")
    target = path + ".fp32" if int8 else path
    _tf2onnx(function, target, collect, names)
    if int8:
        quantization = require("onnxruntime.quantization", "to quantize ONNX to int8")
        with _without_preprocessing_advice():
            quantization.quantize_dynamic(target, path, weight_type=quantization.QuantType.QInt8, per_channel=True,
                                          reduce_range=_weight_bits(weight_bits) == 7)
        os.remove(target)


def to_openvino(model, path: str, calibration: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
                weight_bits: int | None = None) -> None:
    """Write ``model`` as OpenVINO IR ``path`` (``.xml``, with its ``.bin``); int8 when ``calibration`` is given.

    Args:
        model: keras.Model. inputs ``token_ids``, ``segment_ids``.
        path: str. the ``.xml`` file to write.
        calibration: sequence of ``(token_ids, segment_ids)``, each ``[1, length]``, or None for float32.
        weight_bits: int or None. int8: 8, or 7 (NNCF's overflow fix) for a CPU without VNNI; None: as this CPU
            calls for (`kerasbert.serving.precision.int8_choice`).
    """
    openvino = require("openvino", "to write OpenVINO")
    converted = function_to_openvino(_function(model))
    if calibration is not None:
        converted = _quantize_openvino(converted, calibration, _weight_bits(weight_bits))
    openvino.save_model(converted, path, compress_to_fp16=False)


def function_to_openvino(function, names: Names | None = None):
    """OpenVINO's float32 model of a ``tf.function`` with an input signature (save it with
    ``openvino.save_model(model, path, compress_to_fp16=False)``).

    Args:
        function: tf.function. its signature fixes the inputs (nested ones flatten in ``tf.nest`` order).
        names: pair of lists of str. the inputs' and outputs' names, in the concrete function's flattened order;
            given, the model keeps the function's outputs alone (the converter also makes outputs of the graph's
            unused ends), in that order.
    """
    openvino = require("openvino", "to write OpenVINO")
    with portable_graph():  # the forms OpenVINO fuses
        concrete = function.get_concrete_function()
    converted = openvino.convert_model(concrete)
    if names is None:
        return converted
    inputs, outputs = _flat_names(concrete)
    named = dict(zip(inputs + outputs, _checked_names(names, inputs, outputs), strict=True))
    named |= {name.rsplit(":", 1)[0]: new for name, new in named.items()}  # a flat signature's inputs lose ":0"
    ends = {name: end for end in converted.outputs for name in end.get_names()}
    kept = openvino.Model([ends[name] for name in outputs], converted.get_parameters(), "kerasbert")
    for port in [*kept.inputs, *kept.outputs]:
        port.get_tensor().set_names({named[next(name for name in port.get_names() if name in named)]})
    return kept


def activation_products(converted) -> list[str]:
    """The names of an OpenVINO model's MatMuls whose two inputs are both computed (no weight among them)."""
    return [op.get_friendly_name() for op in converted.get_ops() if op.get_type_name() == "MatMul"
            and not any(port.get_source_output().get_node().get_type_name() == "Constant" for port in op.inputs())]


def _quantize_openvino(converted, calibration: Sequence[tuple[np.ndarray, np.ndarray]], weight_bits: int):
    """NNCF's int8 of a converted model: the products of two activations stay float, SmoothQuant off, every weight
    in ``weight_bits`` (7: the overflow fix on every layer; 8: on none)."""
    import logging

    nncf = require("nncf", "to quantize OpenVINO to int8")
    from nncf.quantization.advanced_parameters import (
        AdvancedQuantizationParameters,
        AdvancedSmoothQuantParameters,
        OverflowFix,
    )

    logger.info("quantizing to int8 on %d calibration examples", len(calibration))
    nncf_logger, level = logging.getLogger("nncf"), logging.getLogger("nncf").level
    nncf_logger.setLevel(logging.WARNING)  # one INFO line per operation left in float otherwise
    try:
        return nncf.quantize(converted, nncf.Dataset(list(calibration)), model_type=nncf.ModelType.TRANSFORMER,
                             subset_size=len(calibration),
                             ignored_scope=nncf.IgnoredScope(names=activation_products(converted), validate=False),
                             advanced_parameters=AdvancedQuantizationParameters(
                                 overflow_fix=OverflowFix.ENABLE if weight_bits == 7 else OverflowFix.DISABLE,
                                 smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=-1)))
    finally:
        nncf_logger.setLevel(level)


def weight_bits_of(info: dict) -> int | None:
    """The weight bits an export's ``int8_choice`` records, None when it records none."""
    return info.get("int8_choice", {}).get("weight_bits")
