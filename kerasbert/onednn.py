"""TensorFlow's oneDNN CPU kernels: on with kerasbert on x86-64, where TensorFlow may leave them off.

TensorFlow turns its oneDNN kernels on by itself only on x86 CPUs with AVX-512 VNNI, BF16 or AMX. On the
AVX2 CPUs measured here (``benchmarks/HISTORY.md``: AMD EPYC, avx2 + fma) they make BERT-base training
with XLA 1.15-1.3 x faster and the plain graph's inference about 1.2 x (its MatMul + BiasAdd + GELU run
as one kernel), with outputs equal to bert4keras's within 1e-5 as before.

TensorFlow reads the switch, the environment variable ``TF_ENABLE_ONEDNN_OPTS``, once: when it is
imported. So kerasbert sets it when kerasbert is imported before TensorFlow (and before Keras, which
imports TensorFlow), never over a value already set: ``TF_ENABLE_ONEDNN_OPTS=0`` keeps it off,
``TF_ENABLE_ONEDNN_OPTS=1`` turns it on for code that imports Keras first.

With oneDNN on, TensorFlow's graph runs a projection and its GELU as one kernel, which computes the GELU
on the matmul's float32 accumulator and rounds once: in bfloat16 too where oneDNN does bf16 (an AVX-512 or
AVX-NE-CONVERT CPU, as TensorFlow decides). `fuses_bf16_activation` says when that holds for the graph
being traced; `kerasbert.layers.FeedForward` reads it under mixed precision.

Example:
>>> prefer_onednn(environ={}, modules={}, machine="x86_64")
True
>>> prefer_onednn(environ={"TF_ENABLE_ONEDNN_OPTS": "0"}, modules={}, machine="x86_64")
False
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from collections.abc import Container, MutableMapping

ENV = "TF_ENABLE_ONEDNN_OPTS"
X86_64 = ("x86_64", "amd64")
ONEDNN_BF16_FLAGS = ("avx512f", "avx_ne_convert")  # TensorFlow gives oneDNN bf16 ops on these (its
# IsBF16SupportedByOneDNNOnThisCPU); it computes bf16 dot products in hardware only with these:
BF16_UNIT_FLAGS = ("avx512_bf16", "amx_bf16")


def prefer_onednn(environ: MutableMapping[str, str] = os.environ, modules: Container[str] = sys.modules,
                  machine: str | None = None) -> bool:
    """Set ``TF_ENABLE_ONEDNN_OPTS=1`` in ``environ`` if TensorFlow is not in ``modules`` yet, the CPU is
    x86-64 and nothing is set; returns whether it set it."""
    machine = (machine or platform.machine()).lower()
    if ENV in environ or "tensorflow" in modules or machine not in X86_64:
        return False
    environ[ENV] = "1"
    return True


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them in /proc/cpuinfo (none elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _onednn_with(flags: Container[str] | None, wanted: tuple[str, ...]) -> bool:
    """TensorFlow is Keras's backend, its oneDNN is on, and the CPU's ``flags`` (`cpu_flags` when None) have
    one of ``wanted``."""
    import keras

    if keras.config.backend() != "tensorflow" or not any(f in (cpu_flags() if flags is None else flags)
                                                         for f in wanted):
        return False
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def bf16_pays(flags: Container[str] | None = None) -> bool:
    """Whether TensorFlow's oneDNN computes bfloat16 matmuls on bf16 units of the CPU (`BF16_UNIT_FLAGS`):
    BERT-base's measured 1.9 x fp32 with AVX-512 bf16 (AMD EPYC Zen 4) and 4 x with AMX; without them
    0.9 x (AVX2). ``flags``: the CPU's (`cpu_flags` when None).

    Example:
    >>> bf16_pays(flags={"avx2", "fma"})
    False
    """
    return _onednn_with(flags, BF16_UNIT_FLAGS)


def fuses_bf16_activation(flags: Container[str] | None = None) -> bool:
    """Whether the graph being traced runs a bfloat16 MatMul + BiasAdd + GELU as one oneDNN kernel.

    That is a graph TensorFlow traces (not eager, not inside an XLA compile), with no GPU to place ops on,
    oneDNN on and a CPU on which TensorFlow gives oneDNN bf16 ops (`ONEDNN_BF16_FLAGS`). There the kernel
    computes the GELU in float32 on the accumulator (BERT-base bf16 inference 1.065 x faster than a float32
    GELU beside the matmul, on AVX-512 bf16); elsewhere TensorFlow would run bf16 erf element by element.

    Example:
    >>> fuses_bf16_activation(flags={"avx2"})
    False
    """
    if not _onednn_with(flags, ONEDNN_BF16_FLAGS):
        return False
    import tensorflow as tf

    return (not tf.executing_eagerly() and tf.__internal__.get_enclosing_xla_context() is None
            and not tf.config.list_logical_devices("GPU"))
