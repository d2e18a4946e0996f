"""kerasbert.compat.backend's bert4keras functions: the same inputs give bert4keras 0.11.5's numbers (one oracle run),
and the graph helpers (search_layer, recompute_grad, graph_mode_decorator) work on Keras 3 models."""

from __future__ import annotations

import math

import compat_calls
import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from kerasbert import ConfigError
from kerasbert.compat import _graph, backend
from kerasbert.compat.backend import BackendNameError, K

RNG = np.random.default_rng(0)
ARRAYS = {
    "x": RNG.normal(size=(2, 6, 4)).astype("float32"),
    "x4": RNG.normal(size=(2, 3, 4, 5)).astype("float32"),
    "scores": RNG.normal(size=(2, 6, 6)).astype("float32"),
    "bias": RNG.normal(size=(2, 6, 6)).astype("float32"),
    "bias_bool": RNG.random((1, 6, 6)) > 0.3,
    "mask": np.array([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], "int32"),
    "mask_bool": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], bool),
    "cond": RNG.random((2, 6, 1)) > 0.5,
    "indices": np.array([[5, 0, 2], [1, 1, 4]], "int32"),
    "float_indices": np.array([[5.0, 0.0], [3.0, 2.0]], "float32"),
    "params": RNG.normal(size=(2, 6)).astype("float32"),
    "positions": np.arange(6, dtype="float32"),
    "batch_positions": np.array([np.arange(6), np.arange(3, 9)], "float32"),
    "sinusoid": np.zeros((2, 6, 8), "float32"),  # replaced below by the sinusoids of batch_positions
    "heads": RNG.normal(size=(2, 6, 3, 8)).astype("float32"),
    "keys": RNG.normal(size=(2, 6, 3, 8)).astype("float32"),
    "vectors": RNG.normal(size=(2, 6, 8)).astype("float32"),
    "labels": np.array([[3, 0, 0], [1, 2, 6]], "int32"),
    "logits": RNG.normal(size=(2, 7)).astype("float32") * 3,
    "span_labels": np.array([[[4, 9], [0, 0]], [[1, 0], [15, 3]]], "int32"),  # [batch, heads, spans]
    "span_logits": RNG.normal(size=(2, 2, 16)).astype("float32") * 3,
    "dense_labels": (RNG.random((2, 7)) > 0.6).astype("float32"),
    "steps": np.array([-10, 0, 250, 1000, 1500, 2000, 5000], "float32"),
}
ARRAYS["sinusoid"] = np.stack([np.concatenate([[np.sin(p / 10000 ** (2 * i / 8)), np.cos(p / 10000 ** (2 * i / 8))]
                                               for i in range(4)]) for p in ARRAYS["batch_positions"].ravel()]
                              ).reshape(2, 6, 8).astype("float32")


def a(key: str) -> dict:
    return {"array": key}


def b(name, args, **kwargs):
    return [name, "backend", name.split(":")[0], args, kwargs]


CALLS = [
    b("gelu_erf", [a("x")]), b("gelu_tanh", [a("x")]), b("swish", [a("x")]), b("leaky_relu", [a("x")]),
    b("leaky_relu:0.1", [a("x")], alpha=0.1),
    b("root_mean_square", [a("x")]), b("root_mean_square:axis", [a("x")], axis=1, keepdims=True),
    b("align", [a("mask"), [0, 2], 4]), b("align:neg", [a("x"), [0, 1, -1], 5]),
    b("reshape", [a("x"), [12, 4]]), b("reshape:pairs", [a("x"), [2, -1], 1, [2, 2], 2]),
    b("flatten", [a("x4"), 1, 3]), b("flatten:neg", [a("x4"), -2]), b("flatten:all", [a("x4")]),
    b("where", [a("cond"), a("x"), -1.0]), b("where:both", [a("cond"), 2.0, a("x")]),
    b("sequence_masking", [a("x"), a("mask")]),
    b("sequence_masking:inf", [a("scores"), a("mask"), -math.inf, -1]),
    b("sequence_masking:axes", [a("scores"), a("mask_bool"), -1e4, [1, 2]]),
    b("sequence_masking:bias", [a("scores"), a("mask"), 0, 2, a("bias")]),
    b("sequence_masking:bool_bias", [a("scores"), a("mask"), -math.inf, -1, a("bias_bool")], return_mask=True),
    b("sequence_masking:only_bias", [a("scores")], bias=a("bias")),
    b("sequence_masking:only_bool_bias", [a("scores")], value=-7.0, bias=a("bias_bool")),
    b("batch_gather", [a("params"), a("indices")]), b("batch_gather:rows", [a("x"), a("indices")]),
    b("batch_gather:float", [a("params"), a("float_indices")]),
    b("pool1d", [a("x"), 2]), b("pool1d:avg", [a("x"), 3, 2, "same"], pool_mode="avg"),
    b("pool1d:strided", [a("x"), 2, 2]),
    b("divisible_temporal_padding", [a("x"), 4]), b("divisible_temporal_padding:3", [a("x"), 3]),
    b("attention_normalize", [a("scores"), a("mask")]),
    b("attention_normalize:squared_relu", [a("scores"), a("mask")], method="squared_relu"),
    b("attention_normalize:softmax_plus", [a("scores"), a("mask")], method="softmax_plus"),
    b("attention_normalize:plain_squared_relu", [a("scores")], method="squared_relu"),
    b("attention_normalize:bias", [a("scores"), a("mask"), 1], bias=a("bias")),
    b("attention_normalize:other", [a("scores"), a("mask")], method="none"),
    b("sinusoidal_embeddings", [a("positions"), 8]),
    b("sinusoidal_embeddings:base", [a("batch_positions"), 6], base=100),
    b("Sinusoidal", [[6, 8]]),
    b("apply_rotary_position_embeddings", [a("sinusoid"), a("heads"), a("keys")]),
    b("apply_rotary_position_embeddings:one", [a("sinusoid"), a("vectors")]),
    b("sparse_multilabel_categorical_crossentropy", [a("labels"), a("logits")]),
    b("sparse_multilabel_categorical_crossentropy:mask_zero", [a("labels"), a("logits")], mask_zero=True),
    b("sparse_multilabel_categorical_crossentropy:spans", [a("span_labels"), a("span_logits"), True]),
    b("multilabel_categorical_crossentropy", [a("dense_labels"), a("logits")]),
    b("piecewise_linear", [a("steps"), {"schedule": [[1000, 1.0], [2000, 0.1]]}]),
    b("piecewise_linear:from_one", [a("steps"), {"schedule": [[500, 0.5], [1500, 1.0]]}], from_zero=False),
    b("piecewise_linear:zero", [a("steps"), {"schedule": [[0, 0.2], [1000, 1.0]]}]),
]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return compat_calls.run_oracle(CALLS, ARRAYS, str(tmp_path_factory.mktemp("oracle")))


@pytest.mark.parametrize("call", CALLS, ids=[call[0] for call in CALLS])
def test_equals_bert4keras(out, call):
    compat_calls.check(call, ARRAYS, out, 1e-6)


def test_k_gains_bert4keras_names():
    x = ARRAYS["x4"]
    assert tuple(K.flatten(x).shape) == (x.size,)  # bert4keras's flatten: every axis by default
    assert tuple(K.reshape(x, (3, -1), 1).shape) == (2, 3, 1, 4, 5)
    np.testing.assert_allclose(K.eval(K.logsumexp(x, axis=-1)), np.log(np.exp(x).sum(-1)), rtol=1e-6)
    assert K.symbolic(len) is len
    np.testing.assert_allclose(K.eval(K.where(ARRAYS["cond"], ARRAYS["x"], 0)), np.where(ARRAYS["cond"],
                                                                                         ARRAYS["x"], 0))
    with pytest.raises(BackendNameError, match="GradientTape"):
        K.gradients(None, None)


def test_argument_errors():
    with pytest.raises(ConfigError, match="align: axes"):
        backend.align(ops.ones((2, 3)), [0])
    with pytest.raises(ConfigError, match="at most one -1"):
        backend.reshape(ops.ones((2, 6)), (-1, -1), 1)
    with pytest.raises(ConfigError, match="an even number"):
        backend.sinusoidal_embeddings(ops.arange(3.0), 5)
    with pytest.raises(ConfigError, match="one shape"):
        backend.apply_rotary_position_embeddings(ops.ones((1, 2, 4)), ops.ones((1, 2, 4)), ops.ones((1, 2, 2)))
    with pytest.raises(ConfigError, match="pool_mode"):
        backend.pool1d(ops.ones((1, 4, 2)), 2, pool_mode="min")


def test_sequence_masking_reads_inf_strings():
    masked = backend.sequence_masking(ops.ones((1, 3)), ops.array([[1, 0, 1]]), "-inf")
    assert ops.convert_to_numpy(masked).tolist() == [[1.0, -math.inf, 1.0]]


def test_functions_work_inside_a_functional_model():
    token_ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, 8)(token_ids)
    masked = backend.sequence_masking(x, ops.not_equal(token_ids, 0), -1.0)
    padded = keras.layers.Lambda(lambda t: backend.divisible_temporal_padding(t, 4))(masked)
    model = keras.Model(token_ids, backend.reshape(padded, (2, -1), 1))
    output = model.predict(np.array([[1, 2, 3, 0, 0]]), verbose=0)
    assert output.shape == (1, 2, 4, 8) and (output[0, 1, 1:] == 0.0).all()  # 5 -> 8 positions, as 2 x 4
    assert (output[0, 0, 3] == -1.0).all() and (output[0, 1, 0] == -1.0).all()  # positions 3 and 4 masked


def test_search_layer_walks_up_from_outputs():
    inner_in = keras.Input((4,))
    inner = keras.Model(inner_in, keras.layers.Dense(4, name="Inner-Dense")(inner_in), name="Inner")
    x = keras.Input((4,), name="In")
    y = keras.layers.Dense(3, name="Head")(inner(keras.layers.Dense(4, name="Embedding-Token")(x)))
    model = keras.Model(x, y)
    assert backend.search_layer(model.outputs[0], "Embedding-Token") is model.get_layer("Embedding-Token")
    assert backend.search_layer(y, "Inner-Dense").name == "Inner-Dense"  # inside a nested model
    assert backend.search_layer(model.get_layer("Head"), "Head").name == "Head"
    assert backend.search_layer(y, "Nowhere") is None
    with pytest.raises(ConfigError, match="search_layer"):
        backend.search_layer(np.ones(2), "Head")


class _Doubling(keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, inputs):
        return ops.tanh(inputs * self.w) * 2.0


def test_recompute_grad_gives_the_same_gradients(monkeypatch):
    assert _graph.recompute_grad(_Doubling.call) is _Doubling.call  # RECOMPUTE unset: the call itself
    monkeypatch.setattr(_graph, "do_recompute", True)

    class Recomputed(_Doubling):
        call = _graph.recompute_grad(_Doubling.call)

    x = tf.constant(ARRAYS["x"])
    results = []
    for layer in (_Doubling(), Recomputed()):
        layer.build(x.shape)
        layer.w.assign(np.linspace(0.5, 1.5, 4).astype("float32"))
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = ops.sum(ops.square(layer(x, training=True)))
        results.append([g.numpy() for g in tape.gradient(loss, [x, layer.w.value])] + [loss.numpy()])
    for plain, recomputed in zip(*results, strict=True):
        np.testing.assert_allclose(recomputed, plain, rtol=1e-6)


def test_graph_mode_decorator_and_flags():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = backend.graph_mode_decorator(lambda v: (v * v, lambda dy: dy * 10.0), x)
    assert tape.gradient(y, x).numpy().tolist() == [10.0, 10.0]
    assert backend.is_tf_keras is True and backend.do_recompute is False
    assert backend.get_available_gpus() == [d.name for d in tf.config.list_logical_devices("GPU")]
    assert backend.custom_objects["gelu"] is backend.gelu_erf
    initializer = keras.initializers.deserialize(keras.initializers.serialize(backend.Sinusoidal()))
    assert isinstance(initializer, backend.Sinusoidal)


def test_env_flag(monkeypatch):
    monkeypatch.setenv("RECOMPUTE", "Yes")
    assert _graph._env_flag("RECOMPUTE") is True
    monkeypatch.setenv("RECOMPUTE", "maybe")
    with pytest.raises(ConfigError, match="RECOMPUTE"):
        _graph._env_flag("RECOMPUTE")
