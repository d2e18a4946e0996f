"""GlobalPointer and EfficientGlobalPointer: parity with bert4keras 0.11.5, masks, saving, precision, training."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
from keras import ops

from kerasbert.modeling.global_pointer import (
    EfficientGlobalPointer,
    GlobalPointer,
    global_pointer_crossentropy,
    global_pointer_f1,
    multilabel_categorical_crossentropy,
)

import helpers

B, S, H, HEADS, D = 3, 10, 16, 4, 8
LENGTHS = [10, 7, 4]
LAYERS = {"GlobalPointer": GlobalPointer, "EfficientGlobalPointer": EfficientGlobalPointer}
CASES = [{"name": f"{layer}-rope{int(rope)}-tril{int(tril)}", "layer": layer, "RoPE": rope, "tril_mask": tril,
          "heads": HEADS, "head_size": D}
         for layer in LAYERS for rope in (True, False) for tril in (True, False)]
VERY_NEGATIVE = -1e30


def padding() -> np.ndarray:
    return np.arange(S)[None, :] < np.array(LENGTHS)[:, None]  # (batch, seq)


def make_layer(case: dict) -> keras.layers.Layer:
    layer = LAYERS[case["layer"]](case["heads"], case["head_size"], RoPE=case["RoPE"], tril_mask=case["tril_mask"])
    layer.build((None, S, H))
    return layer


def random_data(seed: int = 0) -> dict[str, np.ndarray]:
    """x with all-zero padding rows (a Masking layer's mask), gold spans on real upper-triangle cells only,
    and random weights for every case, in each layer's weight order."""
    rng = np.random.default_rng(seed)
    mask = padding()
    x = (rng.normal(0, 1, (B, S, H)) * mask[..., None]).astype(np.float32)
    valid = mask[:, None, :, None] & mask[:, None, None, :] & np.triu(np.ones((S, S), bool))
    data = {"x": x, "labels": ((rng.random((B, HEADS, S, S)) < 0.15) & valid).astype(np.float32)}
    for case in CASES:
        for i, weight in enumerate(make_layer(case).weights):
            data[f"{case['name']}/{i}"] = rng.normal(0, 0.3, tuple(weight.shape)).astype(np.float32)
    return data


def run_gp_oracle(data: dict, workdir: str) -> dict[str, np.ndarray]:
    """bert4keras on tf-keras in a subprocess (tests/oracle_global_pointer.py)."""
    inputs = os.path.join(workdir, "gp_in.npz")
    np.savez(inputs, **data)
    return helpers.run_bert4keras("oracle_global_pointer.py", {"inputs": inputs, "cases": CASES}, workdir, "gp")


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    data = random_data()
    return data, run_gp_oracle(data, str(tmp_path_factory.mktemp("gp_oracle")))


def ours(case: dict, data: dict) -> keras.layers.Layer:
    layer = make_layer(case)
    layer.set_weights([data[f"{case['name']}/{i}"] for i in range(len(layer.weights))])
    return layer


def assert_same_logits(actual, expected, atol=1e-5):
    """Equal where both are finite; where bert4keras masked (-inf), ours is very negative too."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    masked = expected < VERY_NEGATIVE
    assert masked.any() and (actual[masked] < VERY_NEGATIVE).all()
    np.testing.assert_allclose(actual[~masked], expected[~masked], rtol=0, atol=atol)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_parity_with_bert4keras(case, parity):
    data, oracle = parity
    name = case["name"]
    # the Keras mask from Masking, as bert4keras gets it; the explicit [x, mask]; both together
    inputs = keras.Input((S, H))
    model = keras.Model(inputs, ours(case, data)(keras.layers.Masking(0.0)(inputs)))
    layer = model.layers[-1]
    for logits in (model.predict(data["x"], verbose=0), layer([data["x"], padding()]),
                   layer(data["x"], mask=ops.convert_to_tensor(padding()))):
        assert_same_logits(logits, oracle[f"{name}/logits"])
    logits = ops.convert_to_tensor(oracle[f"{name}/logits"])  # the loss and F1 on the same logits as bert4keras
    loss = float(global_pointer_crossentropy(data["labels"], logits))
    np.testing.assert_allclose(loss, oracle[f"{name}/loss"], rtol=1e-6)
    np.testing.assert_allclose(float(global_pointer_f1(data["labels"], logits)), oracle[f"{name}/f1"], rtol=1e-6)
    ours_logits = model.predict(data["x"], verbose=0)  # and on ours
    np.testing.assert_allclose(float(global_pointer_crossentropy(data["labels"], ours_logits)), loss, rtol=1e-5)


def test_masking_without_padding_and_rows():
    """No mask and tril_mask=False: no -inf at all; tril_mask alone: exactly the strict lower triangle."""
    x = np.random.default_rng(1).normal(size=(2, 5, 6)).astype(np.float32)
    assert np.isfinite(GlobalPointer(2, 4, tril_mask=False)(x)).all()
    logits = ops.convert_to_numpy(EfficientGlobalPointer(2, 4)(x))
    np.testing.assert_array_equal(np.isinf(logits), np.broadcast_to(np.tril(np.ones((5, 5)), -1) > 0, logits.shape))


def test_loss_ignores_masked_logits_and_matches_formula():
    y_pred = np.array([[2.0, -1.0, -np.inf, 0.5]], np.float32)
    y_true = np.array([[1.0, 0.0, 1.0, 0.0]], np.float32)  # a gold label on a masked cell counts nowhere
    expected = np.log(1 + np.exp(-1.0) + np.exp(0.5)) + np.log(1 + np.exp(-2.0))
    np.testing.assert_allclose(ops.convert_to_numpy(multilabel_categorical_crossentropy(y_true, y_pred)),
                               [expected], rtol=1e-6)
    assert float(global_pointer_f1(np.zeros((1, 1, 2, 2)), -np.ones((1, 1, 2, 2)))) == 0.0


@pytest.mark.parametrize("cls", list(LAYERS.values()), ids=list(LAYERS))
def test_config_round_trip_and_formula(cls):
    layer = cls(3, 6, RoPE=False, use_bias=False, tril_mask=False, kernel_initializer="glorot_uniform", name="gp")
    layer.build((None, S, H))
    config = layer.get_config()
    assert {"heads": 3, "head_size": 6, "RoPE": False, "use_bias": False, "tril_mask": False}.items() <= config.items()
    clone = cls.from_config(config)
    clone.build((None, S, H))
    assert clone.get_config() == config and clone.count_params() == layer.count_params()
    for use_bias in (True, False):
        built = cls(HEADS, D, use_bias=use_bias)
        built.build((None, S, H))
        assert built.param_formula().value == built.count_params()
    with pytest.raises(Exception, match="even head_size"):
        cls(2, 5)


@pytest.mark.parametrize("cls", list(LAYERS.values()), ids=list(LAYERS))
def test_keras_save_load(cls, tmp_path):
    token_ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(50, H, mask_zero=True)(token_ids)
    model = keras.Model(token_ids, cls(HEADS, D, name="global_pointer")(hidden))
    model.compile("adam", loss=global_pointer_crossentropy, metrics=[global_pointer_f1])
    model.optimizer.build(model.trainable_variables)
    ids = np.random.default_rng(2).integers(1, 50, (B, S)) * padding()
    path = str(tmp_path / "gp.keras")
    model.save(path)
    loaded = keras.models.load_model(path)  # no custom_objects: every piece is registered
    np.testing.assert_array_equal(loaded.predict(ids, verbose=0), model.predict(ids, verbose=0))
    assert loaded.loss is not None


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision(policy):
    data = random_data()
    x = data["x"]
    for case in CASES[::3]:
        reference = ours(case, data)([x, padding()])
        layer = LAYERS[case["layer"]](HEADS, D, RoPE=case["RoPE"], tril_mask=case["tril_mask"], dtype=policy)
        layer.build((None, S, H))
        layer.set_weights([data[f"{case['name']}/{i}"] for i in range(len(layer.weights))])
        logits = layer([x, padding()])
        assert keras.backend.standardize_dtype(logits.dtype) == policy.split("_")[1]
        assert_same_logits(ops.cast(logits, "float32"), reference, atol=0.1)
        assert np.isfinite(float(global_pointer_crossentropy(data["labels"], logits)))


def test_training_reduces_loss():
    """A few dozen steps on synthetic spans (entity type t: a run of token t+1s) learn to find them."""
    rng = np.random.default_rng(3)
    ids, labels = rng.integers(5, 30, (32, S)), np.zeros((32, 2, S, S), np.float32)
    for row in range(32):
        kind, start = rng.integers(0, 2), rng.integers(0, S - 3)
        end = start + rng.integers(0, 3)
        ids[row, start:end + 1] = kind + 1
        labels[row, kind, start, end] = 1
    ids[::4, -2:] = 0  # some padding
    labels[::4, :, -2:] = labels[::4, :, :, -2:] = 0
    keras.utils.set_random_seed(0)
    token_ids = keras.Input((S,), dtype="int32")
    hidden = keras.layers.Embedding(30, H)(token_ids)  # the mask goes in explicitly
    hidden = keras.layers.Conv1D(H, 3, padding="same", activation="relu")(hidden)  # sees its neighbours
    model = keras.Model(token_ids, EfficientGlobalPointer(2, D)([hidden, keras.ops.not_equal(token_ids, 0)]))
    model.compile(keras.optimizers.Adam(0.02), loss=global_pointer_crossentropy, metrics=[global_pointer_f1])
    history = model.fit(ids, labels, batch_size=8, epochs=10, verbose=0).history
    assert history["loss"][-1] < 0.3 * history["loss"][0]
    assert history["global_pointer_f1"][-1] > 0.8


@pytest.mark.parametrize("efficient", [False, True])
def test_spans_head_trains_saves_and_loads(tmp_path, efficient):
    from kerasbert import build_transformer_model
    from kerasbert.modeling import heads

    model = heads.spans(build_transformer_model("tiny", verbose=False), 2, head_size=8, efficient=efficient)
    layer = model.get_layer("Span-GlobalPointer")
    assert isinstance(layer, EfficientGlobalPointer if efficient else GlobalPointer)
    compiled = heads.loss_and_metrics(model)
    assert compiled["loss"] is global_pointer_crossentropy and compiled["metrics"][0].name == "global_pointer_f1"
    ids = np.array([[2, 9, 10, 11, 3, 0], [2, 12, 3, 0, 0, 0]], "int32")
    inputs = [ids, np.zeros_like(ids)]
    labels = np.zeros((2, 2, 6, 6), "float32")
    labels[0, 1, 1, 2] = labels[1, 0, 1, 1] = 1.0
    model.compile(keras.optimizers.Adam(1e-3), **compiled)
    model.fit(inputs, labels, epochs=1, verbose=0)
    logits = model.predict(inputs, verbose=0)
    assert logits.shape == (2, 2, 6, 6)
    assert np.isneginf(logits[1, :, 3:, :]).all() and np.isneginf(logits[0, :, 2, 1]).all()  # padding, end before start
    model.save(tmp_path / "spans.keras")
    np.testing.assert_allclose(keras.saving.load_model(tmp_path / "spans.keras").predict(inputs, verbose=0), logits,
                               atol=1e-6)
