"""The portable runtimes' forms of GELU and LayerNorm give the plain layers' numbers."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from kerasbert import build_transformer_model, heads
from kerasbert.perf import kernels
from kerasbert.perf.portable import portable_graph
from kerasbert.perf.variants import chosen

import helpers


def test_a_model_traced_for_a_portable_runtime_gives_the_plain_numbers():
    model = heads.cls(build_transformer_model(helpers.TINY, verbose=False), 3)
    batch = helpers.random_batch(helpers.TINY["vocab_size"], seed=3)
    inputs = [batch["token_ids"], batch["segment_ids"]]

    def traced():
        return tf.function(lambda ids, segments: model([ids, segments], training=False)).get_concrete_function(
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32))

    with kernels.recording() as forms:
        plain = traced()
    with portable_graph(), kernels.recording() as portable_forms:
        portable = traced()
    assert not chosen("portable_gelu") and not chosen("portable_layer_norm")
    assert {"portable_gelu", "portable_layer_norm"} <= {form for _, form in portable_forms}
    assert not {"portable_gelu", "portable_layer_norm"} & {form for _, form in forms}
    ops = {graph: {op.type for op in function.graph.get_operations()} for graph, function in
           (("plain", plain), ("portable", portable))}
    assert "Erfc" in ops["plain"] and "Erf" in ops["portable"] and "Erfc" not in ops["portable"]
    np.testing.assert_allclose(portable(*map(tf.constant, inputs)), plain(*map(tf.constant, inputs)), atol=1e-6)
