"""kerasbert.compat.backend: K's Keras 2 calls checked against NumPy by hand; set_gelu; unknown names."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kerasbert import ConfigError
from kerasbert.compat import backend
from kerasbert.compat.backend import BackendNameError, K, keras, set_gelu
from kerasbert.compat.models import build_transformer_model

import helpers

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], "float32")  # [2, 3]


def close(tensor, expected):
    np.testing.assert_allclose(K.eval(tensor), expected, rtol=1e-6, atol=1e-6)


def test_reductions_and_elementwise():
    close(K.sum(X), 5.5)
    close(K.sum(X, axis=1, keepdims=True), [[2.0], [3.5]])
    close(K.mean(X, 0), [0.75, 1.0, 1.0])
    close(K.max(X, 1), [3.0, 4.0])
    close(K.min(X), -2.0)
    close(K.exp(K.log(K.abs(X))), np.abs(X))
    close(K.square(X), X * X)
    close(K.sqrt(X), [[1.0, 0.0, 3.0 ** 0.5], [0.5 ** 0.5, 2.0, 0.0]])  # clipped at 0
    close(K.clip(X, -1.0, 2.0), [[1.0, -1.0, 2.0], [0.5, 2.0, -1.0]])
    close(K.cumsum(X), [[1.0, -2.0, 3.0], [1.5, 2.0, 2.0]])  # axis 0, as Keras 2
    close(K.cumsum(X, axis=1), [[1.0, -1.0, 2.0], [0.5, 4.5, 3.5]])
    e = np.exp(X - X.max(-1, keepdims=True))
    close(K.softmax(X), e / e.sum(-1, keepdims=True))
    assert K.eval(K.argmax(X)).tolist() == [2, 1]
    assert K.eval(K.equal(X, 1.0)).tolist() == [[True, False, False], [False, False, False]]
    assert K.eval(K.not_equal(X, 1.0)).tolist() == [[False, True, True], [True, True, True]]
    assert K.eval(K.greater(X, 0.5)).tolist() == [[True, False, True], [False, True, False]]


def test_shapes_casts_and_constructors():
    assert K.int_shape(keras.Input((None, 3))) == (None, None, 3)
    assert tuple(K.shape(X)) == (2, 3)
    assert K.dtype(K.cast(X, "int32")) == "int32" and K.eval(K.cast(X, "int32")).tolist() == [[1, -2, 3], [0, 4, -1]]
    assert K.floatx() == "float32" and K.epsilon() == 1e-7
    close(K.reshape(X, (3, 2)), X.reshape(3, 2))
    close(K.permute_dimensions(X[None], (2, 0, 1)), X[None].transpose(2, 0, 1))
    close(K.tile(X, (2, 1)), np.tile(X, (2, 1)))
    close(K.expand_dims(X), X[..., None])
    close(K.concatenate([X, X]), np.concatenate([X, X], -1))
    assert K.eval(K.arange(1, 7, 2)).tolist() == [1, 3, 5] and K.dtype(K.arange(3)) == "int32"
    close(K.one_hot(np.array([2, 0]), 3), [[0, 0, 1], [1, 0, 0]])
    close(K.zeros_like(X), np.zeros_like(X))
    close(K.ones_like(X), np.ones_like(X))
    close(K.stop_gradient(X), X)
    close(K.eye(K.shape(X)[0]), np.eye(2))
    assert K.dtype(K.eye(3)) == "float32"
    close(K.l2_normalize(X, axis=1), X / np.linalg.norm(X, axis=1, keepdims=True))
    close(K.l2_normalize(X), X / np.linalg.norm(X))
    close(K.l2_normalize(np.zeros((1, 3), "float32"), axis=1), np.zeros((1, 3)))  # 0, not NaN


def test_batch_dot_is_keras2s():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 4)).astype("float32"), rng.normal(size=(2, 4, 5)).astype("float32")
    close(K.batch_dot(a, b), np.einsum("bij,bjk->bik", a, b))
    c = rng.normal(size=(2, 3, 5)).astype("float32")
    close(K.batch_dot(a, c, axes=[1, 1]), np.einsum("bji,bjk->bik", a, c))
    close(K.batch_dot(X, X, axes=1), (X * X).sum(1, keepdims=True))  # [B] gets a trailing axis: [B, 1]
    close(K.batch_dot(a, X, axes=[1, 1]), np.einsum("bji,bj->bi", a, X))


def test_switch_losses_and_values():
    close(K.switch(X > 0, X, K.zeros_like(X)), np.maximum(X, 0))
    close(K.switch(np.array([True, False]), X, -X), [X[0], -X[1]])  # a [B] condition picks rows
    p = np.array([[0.2, 0.7, 0.1], [0.5, 0.25, 0.25]], "float32")
    close(K.sparse_categorical_crossentropy(np.array([1, 2]), p), -np.log([0.7, 0.25]))
    close(K.categorical_crossentropy(np.array([[0, 1, 0], [1, 0, 0]], "float32"), p), -np.log([0.7, 0.5]))
    variable = keras.Variable(np.zeros((2,), "float32"))
    K.set_value(variable, [1.0, 2.0])
    assert K.get_value(variable).tolist() == [1.0, 2.0]


def test_every_name_is_documented_and_others_raise():
    names = {n for n in dir(type(K)) if not n.startswith("_")}
    documented = set(re.findall(r"\w+", type(K).__doc__.split("Names:")[1].split(".")[0]))
    assert names == documented
    with pytest.raises(BackendNameError, match=r"K.learning_phase: .* pass training=\.\.\. to the layer's call"):
        K.learning_phase()
    with pytest.raises(AttributeError, match="K.batch_flatten: .* use keras.ops.batch_flatten if it exists"):
        K.batch_flatten(X)
    assert not hasattr(K, "in_train_phase")


def test_set_gelu_chooses_the_activation_of_later_models():
    config = dict(helpers.TINY)
    assert backend.gelu_version() == "erf"
    erf = build_transformer_model(config=config, verbose=False)
    try:
        set_gelu("TANH")
        tanh = build_transformer_model(config=config, verbose=False)
        relu = build_transformer_model(config=dict(config, hidden_act="relu"), verbose=False)
        explicit = build_transformer_model(config=config, hidden_act="gelu", verbose=False)
    finally:
        set_gelu("erf")
    activations = [m.get_layer("Transformer-0-FeedForward").activation for m in (erf, tanh, relu, explicit)]
    assert activations == ["gelu", "gelu_tanh", "relu", "gelu"]
    x = [np.array([[2, 5, 6, 3]]), np.zeros((1, 4))]
    tanh.set_weights(erf.get_weights())
    assert 0 < np.abs(tanh.predict(x, verbose=0) - erf.predict(x, verbose=0)).max() < 1e-2
    with pytest.raises(ConfigError, match="set_gelu: expected \"erf\" or \"tanh\", found 'exact'"):
        set_gelu("exact")
