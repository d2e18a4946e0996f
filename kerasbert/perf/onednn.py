"""TensorFlow's oneDNN CPU kernels: on with kerasbert on x86-64, where TensorFlow may leave them off.

TensorFlow turns its oneDNN kernels on by itself only on x86 CPUs with AVX-512 VNNI, BF16 or AMX. On AVX2
CPUs they are faster too, as the plain graph runs a projection's MatMul + BiasAdd + GELU as one kernel
(figures in ``benchmarks/HISTORY.md``), with outputs equal to bert4keras's within 1e-5.

TensorFlow reads the switch, the environment variable ``TF_ENABLE_ONEDNN_OPTS``, once, when it is imported,
and has no call that turns oneDNN on later. So kerasbert sets it when kerasbert is imported before TensorFlow
(and before Keras, which imports TensorFlow), never over a value already set: ``TF_ENABLE_ONEDNN_OPTS=0`` keeps
it off, ``TF_ENABLE_ONEDNN_OPTS=1`` turns it on for code that imports Keras first.

With oneDNN on, TensorFlow's graph runs a projection and its GELU as one kernel, which computes the GELU
on the matmul's float32 accumulator and rounds once: in bfloat16 too where oneDNN does bf16 (an AVX-512 or
AVX-NE-CONVERT CPU, as TensorFlow decides). `kerasbert.perf.block_variants.fuses_bf16_activation` says when
that holds for the graph being traced; the feed-forward's activation kernel reads it under mixed precision.
Whether bf16 is any faster than float32 on a CPU is measured, not read from its flags (`bf16_speedup`):
`kerasbert train --mixed-precision` says what it measured.

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
import statistics
import sys
import time
from collections.abc import Container, MutableMapping

ENV = "TF_ENABLE_ONEDNN_OPTS"
X86_64 = ("x86_64", "amd64")
ONEDNN_BF16_FLAGS = ("avx512f", "avx_ne_convert")  # TensorFlow gives oneDNN bf16 ops on these (its
# IsBF16SupportedByOneDNNOnThisCPU)
HALF_FASTER = 1.25  # half precision is a speed option where its matmuls measure this much faster than float32


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


@functools.cache
def bf16_speedup(shape: tuple[int, int, int] = (1024, 768, 3072), rounds: int = 5) -> float | None:
    """How much faster TensorFlow multiplies bfloat16 matrices than float32 ones here, measured: the median of
    ``rounds`` paired timings of an ``[m, k]·[k, n]`` matmul in its traced graph, one dtype after the other
    (an untimed first round traces and warms up). Measured once a process. None where
    Keras's backend is not TensorFlow.

    The CPU's flags do not tell: bf16 matmuls are much faster than float32 with AMX and on some AVX-512 bf16
    CPUs, and slower on others that list ``avx512_bf16`` (figures in ``benchmarks/HISTORY.md``). The
    default shape is BERT-base's feed-forward at 8 × 128 tokens.

    Example:
        bf16_speedup()  # above HALF_FASTER where bf16 pays (`bf16_pays`), below 1 where it is slower
    """
    import keras

    if keras.config.backend() != "tensorflow":
        return None
    import tensorflow as tf

    m, k, n = shape
    product = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b), "float32")))
    operands = {dtype: [tf.cast(tf.random.stateless_normal(size, seed=(0, i)), dtype)
                        for i, size in enumerate(((m, k), (k, n)))] for dtype in ("float32", "bfloat16")}
    seconds: dict[str, list[float]] = {dtype: [] for dtype in operands}
    for _ in range(rounds + 1):
        for dtype, (a, b) in operands.items():
            start = time.perf_counter()
            product(a, b).numpy()
            seconds[dtype].append(time.perf_counter() - start)
    return statistics.median(f / b for f, b in zip(seconds["float32"][1:], seconds["bfloat16"][1:], strict=True))


def bf16_pays(speedup: float | None = None) -> bool:
    """Whether mixed bfloat16 is a speed option here: its matmuls measure at least `HALF_FASTER` × float32's
    (``speedup``; `bf16_speedup` when None).

    Example:
    >>> bf16_pays(speedup=1.9), bf16_pays(speedup=0.55)
    (True, False)
    """
    speedup = bf16_speedup() if speedup is None else speedup
    return speedup is not None and speedup >= HALF_FASTER
