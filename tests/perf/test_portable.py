"""The portable runtimes' forms of GELU and LayerNorm give the plain layers' numbers."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from kerasbert import build_transformer_model, heads
from kerasbert.perf.portable import in_portable_graph, portable_graph

import helpers


def test_a_model_traced_for_a_portable_runtime_gives_the_plain_numbers():
    model = heads.cls(build_transformer_model(helpers.TINY, verbose=False), 3)
    batch = helpers.random_batch(helpers.TINY["vocab_size"], seed=3)
    inputs = [batch["token_ids"], batch["segment_ids"]]

    def traced():
        return tf.function(lambda ids, segments: model([ids, segments], training=False)).get_concrete_function(
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32))

    plain = traced()
    with portable_graph():
        portable = traced()
    assert not in_portable_graph()
    ops = {graph: {op.type for op in function.graph.get_operations()} for graph, function in
           (("plain", plain), ("portable", portable))}
    assert "Erfc" in ops["plain"] and "Erf" in ops["portable"] and "Erfc" not in ops["portable"]
    np.testing.assert_allclose(portable(*map(tf.constant, inputs)), plain(*map(tf.constant, inputs)), atol=1e-6)
