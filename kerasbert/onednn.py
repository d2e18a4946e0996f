"""TensorFlow's oneDNN CPU kernels: on with kerasbert on x86-64, where TensorFlow may leave them off.

TensorFlow turns its oneDNN kernels on by itself only on x86 CPUs with AVX-512 VNNI, BF16 or AMX. On the
AVX2 CPUs measured here (``benchmarks/HISTORY.md``: AMD EPYC, avx2 + fma) they make BERT-base training
with XLA 1.15-1.3 x faster and the plain graph's inference about 1.2 x (its MatMul + BiasAdd + GELU run
as one kernel), with outputs equal to bert4keras's within 1e-5 as before.

TensorFlow reads the switch, the environment variable ``TF_ENABLE_ONEDNN_OPTS``, once: when it is
imported. So kerasbert sets it when kerasbert is imported before TensorFlow (and before Keras, which
imports TensorFlow), never over a value already set: ``TF_ENABLE_ONEDNN_OPTS=0`` keeps it off,
``TF_ENABLE_ONEDNN_OPTS=1`` turns it on for code that imports Keras first.

Example:
>>> prefer_onednn(environ={}, modules={}, machine="x86_64")
True
>>> prefer_onednn(environ={"TF_ENABLE_ONEDNN_OPTS": "0"}, modules={}, machine="x86_64")
False
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Container, MutableMapping

ENV = "TF_ENABLE_ONEDNN_OPTS"
X86_64 = ("x86_64", "amd64")


def prefer_onednn(environ: MutableMapping[str, str] = os.environ, modules: Container[str] = sys.modules,
                  machine: str | None = None) -> bool:
    """Set ``TF_ENABLE_ONEDNN_OPTS=1`` in ``environ`` if TensorFlow is not in ``modules`` yet, the CPU is
    x86-64 and nothing is set; returns whether it set it."""
    machine = (machine or platform.machine()).lower()
    if ENV in environ or "tensorflow" in modules or machine not in X86_64:
        return False
    environ[ENV] = "1"
    return True
