"""The precision an export computes in: ``auto`` (the default), ``f32`` or ``bf16``.

bfloat16 keeps float32's range with 8 bits of mantissa; CPUs with bfloat16 units (AMX, avx512_bf16) multiply it
much faster than float32. ``auto`` chooses by the CPU the export is made on and by the format, and
``kerasbert-export.json`` records the choice as ``precision`` and how it was made as ``precision_choice``
(``{"asked": ..., "why": ...}``):

- openvino: ``bf16`` where OpenVINO finds bfloat16 units and its bfloat16 matrix products measure at least
  `kerasbert.perf.onednn.HALF_FASTER` × its float32 ones here (`openvino_bf16_speedup`, one product timed each way: a
  CPU may list the units and gain nothing); with ``--int8``, what is not int8 runs in bf16 only on a CPU with AMX, since
  with avx512_bf16 alone it is no faster than int8 beside float32 (``benchmarks/RESULTS.md``, the
  ``serve-precision-*`` sections); ``f32`` elsewhere;
- onnx: ``f32``, as ONNX Runtime's CPU kernels multiply floats in float32;
- saved_model: ``f32``, since a SavedModel is served wherever TensorFlow runs and its bfloat16 graph is slower on a
  CPU without the units; ``--precision bf16`` asks for one where TensorFlow's bf16 products measure faster
  (`kerasbert.perf.onednn.bf16_pays`): the run's model is rebuilt computing in bfloat16, its head in float32
  (`in_bfloat16`).

An int8 export quantizes its weights by the CPU class it is made on (`int8_choice`, recorded as ``int8_choice``): in 8
bits where VNNI or AMX sums each int8 product in int32, in 7 bits elsewhere, where ``vpmaddubsw`` sums pairs of
products in int16 and 8-bit weights can saturate it. Served on a CPU without VNNI, an export with 8-bit weights
answers with a warning (`warn_int8_saturation`).

An export ``auto`` made in bf16 whose dev score falls beyond `kerasbert.choices.LOSS_BOUND` is made again in float32
(`fall_back`), so the default never fails for a precision it chose itself; moved to a CPU without bfloat16 units,
such an export runs in float32 there (`runs_in`).

Example:
>>> choose("f32", "openvino", int8=False)
('f32', {'asked': 'f32', 'why': 'asked for'})
>>> choose("auto", "onnx", int8=True)[0]
'f32'
"""

from __future__ import annotations

import functools
import statistics
import time

from kerasbert.choices import EXPORT_PRECISIONS, PRECISIONS
from kerasbert.errors import ConfigError, fail
from kerasbert.log import logger
from kerasbert.perf import onednn  # read through the module: a stand-in CPU set on it is seen here
from kerasbert.serving.extras import require

__all__ = ["AUTO", "BF16_TASKS", "BF16_UNITS", "INT8_UNITS", "check_precision", "choose", "cpu_has_bf16", "fall_back",
           "in_bfloat16", "int8_choice", "int8_record", "openvino_bf16_speedup", "openvino_config", "runs_in",
           "warn_int8_saturation"]

AUTO = EXPORT_PRECISIONS[0]  # ``--precision``'s default: chosen by CPU and format (`choose`)
BF16_UNITS = frozenset({"amx_bf16", "avx512_bf16"})  # the CPU flags of bfloat16 matrix units
INT8_UNITS = frozenset({"amx_int8", "avx512_vnni", "avx_vnni"})  # the CPU flags of int8 products summed in int32
BF16_TASKS = ("cls", "ner", "span")  # the runs a bf16 SavedModel is written for (its head answers in float32)
_F32_BY_FORMAT = {
    "onnx": "ONNX Runtime's CPU kernels multiply floats in float32",
    "saved_model": "a SavedModel is served wherever TensorFlow runs (--precision bf16 asks for bfloat16)",
}


def openvino_config(precision: str = PRECISIONS[0]) -> dict:
    """OpenVINO's CPU settings for an export: latency first, and the precision pinned, since OpenVINO would
    otherwise run a float32 model in bfloat16 on a CPU with AMX or avx512_bf16 units.

    Example:
    >>> openvino_config()
    {'PERFORMANCE_HINT': 'LATENCY', 'INFERENCE_PRECISION_HINT': 'f32'}
    """
    return {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": precision}


def cpu_has_bf16() -> bool:
    """Whether OpenVINO finds bfloat16 units (AMX, avx512_bf16) on this CPU."""
    import openvino

    return "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def check_precision(what: str, precision: str, hint: str = "export the run again with --precision f32") -> None:
    """A ConfigError, blaming ``what``, unless OpenVINO runs ``precision`` (one of `PRECISIONS`) on this CPU."""
    if precision not in PRECISIONS:
        raise fail(ConfigError, what, " or ".join(PRECISIONS), repr(precision))
    if precision == "bf16" and not cpu_has_bf16():
        raise fail(ConfigError, what, "a CPU with bfloat16 units (AMX or avx512_bf16)",
                   "none in OpenVINO's CPU capabilities", hint)


def choose(asked: str, format: str, int8: bool) -> tuple[str, dict]:
    """The precision an export of ``format`` computes in, and ``precision_choice``: what was asked and why.

    Raises:
        ConfigError: an unknown precision, bf16 for ONNX, or bf16 on a CPU that has no use for it.
    """
    if asked == AUTO:
        precision, why = _automatic(format, int8)
        return precision, {"asked": AUTO, "why": why}
    check_asked(asked, format)
    what = f"--precision {asked}"
    if asked == "bf16" and format == "saved_model":
        _check_tensorflow_bf16(what)
    elif asked == "bf16":
        require("openvino", "to run bf16")
        check_precision(what, asked, "use --precision f32")
    return asked, {"asked": asked, "why": "asked for"}


def check_asked(asked: str, format: str) -> None:
    """A ConfigError for a precision that is not one of `EXPORT_PRECISIONS`, or bf16 for ONNX: what `choose` refuses
    without looking at the CPU or a runtime.

    Example:
    >>> check_asked("bf16", "onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --precision bf16: expected --format openvino or saved_model, found --format onnx...
    """
    if asked == AUTO:
        return
    what = f"--precision {asked}" if asked in PRECISIONS else "--precision"
    if asked not in PRECISIONS:
        raise fail(ConfigError, what, " or ".join(EXPORT_PRECISIONS), repr(asked))
    if asked == "bf16" and format == "onnx":
        raise fail(ConfigError, what, "--format openvino or saved_model", "--format onnx", _F32_BY_FORMAT["onnx"])


def _automatic(format: str, int8: bool) -> tuple[str, str]:
    """``auto``'s precision and why (see the module's docstring)."""
    if format != "openvino":
        return "f32", f"auto: {_F32_BY_FORMAT[format]}"
    if not cpu_has_bf16():
        return "f32", "auto: OpenVINO finds no bfloat16 units on this CPU"
    units = ", ".join(sorted(BF16_UNITS & onednn.cpu_flags())) or "OpenVINO's BF16"
    if int8 and "amx_bf16" not in onednn.cpu_flags():
        return "f32", f"auto: with {units} and no AMX, int8 beside bf16 is no faster than beside float32"
    speedup = openvino_bf16_speedup()
    measured = f"OpenVINO's bf16 matrix products measured {speedup:.2f} x float32 here ({units})"
    return ("bf16" if speedup >= onednn.HALF_FASTER else "f32"), f"auto: {measured}"


@functools.cache
def openvino_bf16_speedup(shape: tuple[int, int, int] = (1024, 768, 3072), rounds: int = 5) -> float:
    """How much faster OpenVINO multiplies in bfloat16 than in float32 on this CPU, measured: the median of
    ``rounds`` paired timings of one ``[m, k]·[k, n]`` product compiled with each precision hint (an untimed first
    round warms up). Measured once a process. The default shape is BERT-base's feed-forward at 8 × 128 tokens.

    Example:
        openvino_bf16_speedup()  # about 2 with AMX or avx512_bf16 units that pay, below 1 where bf16 is emulated
    """
    import numpy as np
    import openvino
    import openvino.opset13 as ops

    m, k, n = shape
    x = ops.parameter([m, k], np.float32, name="x")
    weights = ops.constant(np.random.default_rng(0).normal(0, 0.05, (k, n)).astype(np.float32))
    product = openvino.Model([ops.result(ops.matmul(x, weights, False, False))], [x])
    requests = {hint: openvino.Core().compile_model(product, "CPU", openvino_config(hint)).create_infer_request()
                for hint in PRECISIONS}
    feed = {0: np.random.default_rng(1).normal(0, 1, (m, k)).astype(np.float32)}
    seconds: dict[str, list[float]] = {hint: [] for hint in PRECISIONS}
    for _ in range(rounds + 1):
        for hint, request in requests.items():
            start = time.perf_counter()
            request.infer(feed)
            seconds[hint].append(time.perf_counter() - start)
    return statistics.median(f / b for f, b in zip(seconds["f32"][1:], seconds["bf16"][1:], strict=True))


def _check_tensorflow_bf16(what: str) -> None:
    """A ConfigError unless TensorFlow's bfloat16 matrix products measure faster than float32's here."""
    speedup = onednn.bf16_speedup()
    if speedup is None or speedup < onednn.HALF_FASTER:
        found = "no TensorFlow backend" if speedup is None else f"{speedup:.2f} x float32 measured here"
        raise fail(ConfigError, what, f"a CPU where TensorFlow multiplies bfloat16 at least {onednn.HALF_FASTER:g} x "
                   "as fast as float32 (AMX, some avx512_bf16)", found, "use --precision f32")


def runs_in(info: dict, path: str) -> str:
    """The precision an OpenVINO export (its ``kerasbert-export.json`` as ``info``, its folder ``path``) runs in on
    this CPU: the one it records, but float32 for one ``auto`` made in bf16 on a CPU that has no bfloat16 units
    (float32 answers at least as close to the run; a warning says so). An export asked for in bf16 stays bf16, which
    `check_precision` refuses here."""
    precision = info.get("precision", PRECISIONS[0])
    if precision != "bf16" or info.get("precision_choice", {}).get("asked") != AUTO or cpu_has_bf16():
        return precision
    logger.warning("%s: exported in bf16 by --precision auto on a CPU with bfloat16 units; this CPU has none, so it "
                   "runs in float32 (export it here again for this CPU's own choice)", path)
    return "f32"


def int8_choice() -> dict:
    """How an int8 export made on this CPU quantizes its weights, and why: ``{"weight_bits": 8 or 7, "why": ...}``.

    Activations are unsigned 8-bit and weights signed. A CPU with VNNI or AMX sums each u8 × s8 product in int32;
    one without (AVX2, AVX-512 without VNNI) multiplies with ``vpmaddubsw``, which adds each pair of products in
    int16: 2 · 255 · 128 overflows it, 2 · 255 · 64 does not. So weights take 8 bits with VNNI or AMX and 7 bits
    elsewhere (ONNX Runtime's ``reduce_range``, NNCF's ``OverflowFix.ENABLE``); 7-bit weights compute alike on
    every CPU.

    Example:
        int8_choice()  # {'weight_bits': 8, 'why': 'this CPU has avx512_vnni, ...'} on a CPU with VNNI
    """
    units = sorted(INT8_UNITS & onednn.cpu_flags())
    if units:
        return {"weight_bits": 8, "why": f"this CPU has {', '.join(units)}: its int8 products sum in int32"}
    return {"weight_bits": 7, "why": "this CPU has no VNNI or AMX: it adds pairs of int8 products in int16 "
                                     "(vpmaddubsw), which 8-bit weights can saturate"}


def int8_record(int8: bool) -> dict:
    """``kerasbert-export.json``'s ``int8_choice`` (`int8_choice`) for an int8 export made here, logged; ``{}`` for
    an export in float.

    Example:
    >>> int8_record(False)
    {}
    """
    if not int8:
        return {}
    choice = int8_choice()
    logger.info("int8 weights in %d bits: %s", choice["weight_bits"], choice["why"])
    return {"int8_choice": choice}


def warn_int8_saturation(info: dict, path: str) -> None:
    """Warn when an int8 export (its ``kerasbert-export.json``, or a decoder's record, as ``info``; its folder
    ``path``) holds 8-bit weights and this CPU has no VNNI or AMX, whose int16 sums they can saturate. An export
    that records no ``int8_choice`` was written with 8-bit weights."""
    if not info.get("int8") or info.get("int8_choice", {}).get("weight_bits", 8) == 7:
        return
    here = int8_choice()
    if here["weight_bits"] == 8:
        return
    logger.warning("%s: int8 with 8-bit weights, made on a CPU with VNNI or AMX; %s, so its answers can drift from "
                   "the run's (export it again here for 7-bit weights)", path, here["why"])


def fall_back(info: dict, lost: str) -> bool:
    """Turn an export ``auto`` made in bf16 to float32, saying why in ``info``; whether it did (then the export is
    to be written again)."""
    choice = info.get("precision_choice", {})
    if choice.get("asked") != AUTO or info.get("precision") != "bf16":
        return False
    info["precision"] = "f32"
    info["precision_choice"] = {"asked": AUTO, "why": f"auto: bf16 lost {lost}, so float32"}
    return True


def in_bfloat16(model):
    """``model`` rebuilt to compute in bfloat16 (Keras's ``mixed_bfloat16``: float32 variables, the same weights),
    but for its output layers, which answer in float32.

    Example:
        served = in_bfloat16(open_run("runs/ner").model)
    """
    config = model.get_config()
    ends = config["output_layers"]
    outputs = {ends[0]} if isinstance(ends[0], str) else {name for name, *_ in ends}
    config["layers"] = [layer if layer["name"] in outputs else _policy_in(layer, "mixed_bfloat16")
                        for layer in config["layers"]]
    rebuilt = model.__class__.from_config(config)
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def _policy_in(node, policy: str):
    """A layer's config with each float32 dtype policy in it made ``policy``."""
    if isinstance(node, dict):
        if node.get("class_name") == "DTypePolicy" and node.get("config", {}).get("name") == "float32":
            return {**node, "config": {"name": policy}}
        return {key: _policy_in(value, policy) for key, value in node.items()}
    if isinstance(node, list):
        return [_policy_in(value, policy) for value in node]
    return node
