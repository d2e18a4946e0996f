"""`heads.embedding`: each pooling equal to the same pooling in NumPy on the backbone's own outputs, the unit
normalization, the pooler's activation, and the errors."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model, heads

BATCH = [np.array([[2, 9, 17, 40, 3, 0, 0], [2, 5, 6, 7, 8, 9, 3], [2, 70, 3, 0, 0, 0, 0]]),
         np.array([[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]])]
REAL = (BATCH[0] != 0).astype(np.float64)[..., None]  # (batch, seq, 1)


def masked_mean(x: np.ndarray) -> np.ndarray:
    return (x * REAL).sum(1) / REAL.sum(1)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.fixture(scope="module", params=["bert", "albert_tiny"])
def outputs(request):
    """A backbone, and its first block's and last block's outputs on BATCH in float64."""
    backbone = (build_transformer_model("tiny", verbose=False) if request.param == "bert" else
                build_transformer_model(_albert_tiny(), model="albert", verbose=False))
    names = [layer.name for layer in backbone.layers if layer.name.endswith("FeedForward-Norm")]
    first = keras.Model(backbone.inputs, backbone.get_layer(names[0]).output)
    as64 = lambda model: np.asarray(model.predict(BATCH, verbose=0), np.float64)  # noqa: E731
    return backbone, as64(first), as64(backbone)


def _albert_tiny() -> dict:
    return {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 37, "max_position_embeddings": 64, "embedding_size": 16}


EXPECTED = {  # pooling -> vectors from (first block output, last block output)
    "cls": lambda first, last: last[:, 0],
    "mean": lambda first, last: masked_mean(last),
    "first_last_avg": lambda first, last: masked_mean((first + last) / 2),
}


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("pooling", EXPECTED)
def test_each_pooling_equals_numpy(outputs, pooling: str, normalize: bool):
    backbone, first, last = outputs
    vectors = heads.embedding(backbone, pooling, normalize=normalize).predict(BATCH, verbose=0)
    expected = EXPECTED[pooling](first, last)
    np.testing.assert_allclose(vectors, unit(expected) if normalize else expected, atol=1e-5)


@pytest.mark.parametrize("activation", ["tanh", "linear"])
def test_pooler_poolings_apply_the_pooler_dense_on_cls(outputs, activation: str):
    backbone, _, last = outputs
    model = heads.embedding(backbone, "pooler" if activation == "tanh" else "linear", normalize=False)
    kernel, bias = (np.asarray(w, np.float64) for w in model.get_layer("Pooler-Dense").weights)
    pooled = last[:, 0] @ kernel + bias
    expected = np.tanh(pooled) if activation == "tanh" else pooled
    np.testing.assert_allclose(model.predict(BATCH, verbose=0), expected, atol=1e-5)


def test_a_with_pool_backbone_gives_its_own_pooler():
    backbone = build_transformer_model("tiny", with_pool="linear", verbose=False)
    model = heads.embedding(backbone, "linear")
    assert model.get_layer("Pooler-Dense") is backbone.get_layer("Pooler-Dense")
    with pytest.raises(ModelError, match="Pooler-Dense of activation 'tanh'.*found one of 'linear'"):
        heads.embedding(backbone, "pooler")


def test_an_unknown_pooling_is_refused_by_name():
    with pytest.raises(ModelError, match="pooling: expected 'cls' or 'mean' or 'first_last_avg' or 'pooler' or "
                                         "'linear', found 'max'"):
        heads.embedding(build_transformer_model("tiny", verbose=False), "max")
