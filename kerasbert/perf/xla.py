"""When kerasbert compiles a model with XLA (``jit_compile``) by default.

`build_transformer_model` sets ``model.jit_compile`` from `xla_pays`, and ``kerasbert train`` uses it for the
training step unless ``--jit-compile`` / ``--no-jit-compile`` says otherwise.
"""

from __future__ import annotations

import keras

from kerasbert.choices import XLA_MIN_PARAMS


def xla_pays(model: keras.Model) -> bool:
    """Whether XLA (``jit_compile``) should be kerasbert's default for ``model``.

    Yes with a GPU, where Keras turns it on too, and on Keras's JAX backend, where a step without XLA runs
    op by op from Python; there it compiles once per input shape (seconds, tens of seconds for a BERT-base
    training step), which a model of fewer than ``XLA_MIN_PARAMS`` parameters never wins back. No on a CPU
    with TensorFlow: its plain graph with oneDNN (which kerasbert turns on, `kerasbert.perf.onednn`) fuses MatMul +
    BiasAdd + GELU itself, the Q/K/V split and the compiled AdamW update
    (`kerasbert.modeling.optimizers.LayerwiseAdamW`) took away what XLA had saved there, and the benchmarks measured
    the plain graph level with XLA or ahead on every kind of CPU, in less memory (benchmarks/HISTORY.md and
    RESULTS.md). And in half precision XLA's CPU matmul does not use the CPU's bf16 units, oneDNN's does.
    A layer that XLA cannot compile says so with ``xla_compatible = False`` (the CRF: its scan runs over
    a dynamic length).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> xla_pays(build_transformer_model("tiny", verbose=False))
    False
    """
    if not all(getattr(layer, "xla_compatible", True) for layer in model.layers):
        return False
    if keras.config.backend() == "jax":  # JAX runs an uncompiled step op by op from Python: always slower
        return True
    return model.count_params() >= XLA_MIN_PARAMS and bool(keras.distribution.list_devices("gpu"))
