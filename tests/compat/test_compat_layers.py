"""`kerasbert.compat.layers`' building blocks against bert4keras 0.11.5's on tf-keras (the oracle,
tests/oracle_compat_layers.py): each small model of tests/layer_graphs.py, with the same weights and padded inputs,
gives the same outputs, Keras masks and weight shapes; the layers round-trip their configs and a ``.keras`` file,
run in mixed precision, train, and refuse bad arguments with one clear error."""

from __future__ import annotations

import os

import keras
import layer_graphs
import numpy as np
import pytest
from keras import ops

from kerasbert.compat import layers
from kerasbert.errors import ConfigError, ModelError

import helpers

B, S, SK, H, V = 3, 5, 6, 8, 20
X_LENGTHS, Y_LENGTHS = [5, 3, 4], [6, 2, 4]
MASKED = {"masked": True}


def _layer(name, cls, inputs, call=None, **kwargs):
    return {"name": name, "class": cls, "inputs": inputs, "kwargs": kwargs, "call": call or {}}


def _case(name, inputs, layer_specs, outputs=None):
    inputs = {key: MASKED if key in ("x", "y", "z") else {"dtype": DTYPES.get(key, "float32")} for key in inputs}
    return {"name": name, "inputs": inputs, "layers": layer_specs, "outputs": outputs or [layer_specs[-1]["name"]]}


DTYPES = {"ids": "int32", "pos_ids": "int32", "bias_bool": "bool"}
SIN = _layer("sin", "SinusoidalPositionEmbedding", "x", output_dim=4, merge_mode="zero")
A_BIAS = {"a_bias": True}
CASES = [
    _case("gap", ["x"], [_layer("pool", "GlobalAveragePooling1D", "x")]),
    _case("gmp", ["x"], [_layer("pool", "GlobalMaxPooling1D", "x")]),
    _case("embedding", ["ids", "x"], [
        _layer("emb", "Embedding", "ids", input_dim=V, output_dim=H, mask_zero=True),
        {"name": "logits", "reuse": "emb", "inputs": "emb", "call": {"mode": "dense"}},
        {"name": "x_logits", "reuse": "emb", "inputs": "x", "call": {"mode": "dense"}}], ["emb", "logits", "x_logits"]),
    _case("embedding_unmasked", ["ids"], [_layer("emb", "Embedding", "ids", input_dim=V, output_dim=H)]),
    _case("scale_offset", ["x"], [_layer("so", "ScaleOffset", "x")]),
    _case("scale_offset_constants", ["x"], [_layer("so", "ScaleOffset", "x", scale=2.0, offset=-0.5)]),
    _case("scale_offset_no_offset", ["x"], [_layer("so", "ScaleOffset", "x", offset=False)]),
    _case("scale_offset_conditional", ["x", "cond"], [
        _layer("so", "ScaleOffset", ["x", "cond"], conditional=True, hidden_units=4, hidden_activation="relu")]),
    _case("scale_offset_conditional_constant", ["x", "cond"], [
        _layer("so", "ScaleOffset", ["x", "cond"], scale=2.0, conditional=True)]),
    _case("concatenate1d", ["x", "y"], [_layer("cat", "Concatenate1D", ["x", "y"])]),
    _case("batch_split_concat", ["x", "y"], [
        _layer("split", "BatchSplit", "x", parts=[1, 2]), _layer("join", "BatchConcat", ["split/0", "split/1"]),
        _layer("halves", "BatchSplit", ["x", "y"], parts=2)],
        ["split/0", "split/1", "join", "halves/0", "halves/1", "halves/2", "halves/3"]),
    _case("feed_forward", ["x"], [_layer("ffn", "FeedForward", "x", units=16)]),
    _case("feed_forward_gated", ["x"], [
        _layer("ffn", "FeedForward", "x", units=16, activation=["gelu", "linear"], use_bias=False)]),
    _case("feed_forward_swish", ["x"], [_layer("ffn", "FeedForward", "x", units=16, activation="swish")]),
    _case("mha", ["x"], [_layer("att", "MultiHeadAttention", ["x", "x", "x"], heads=2, head_size=4)]),
    _case("mha_cross_scores", ["x", "y"], [
        _layer("att", "MultiHeadAttention", ["x", "y", "y"], heads=2, head_size=4, out_dim=6, key_size=3,
               use_bias=False, return_attention_scores=True)], ["att/0", "att/1"]),
    _case("mha_bool_bias_squared_relu", ["x", "bias_bool"], [
        _layer("att", "MultiHeadAttention", ["x", "x", "x", "bias_bool"], A_BIAS, heads=2, head_size=4,
               normalization="squared_relu")]),
    _case("mha_causal_softmax_plus", ["x", "bias_lm"], [
        _layer("att", "MultiHeadAttention", ["x", "x", "x", "bias_lm"], A_BIAS, heads=2, head_size=4,
               normalization="softmax_plus", return_attention_scores=True)], ["att/0", "att/1"]),
    _case("mha_rotary", ["x"], [
        SIN, _layer("att", "MultiHeadAttention", ["x", "x", "x", "sin"], {"p_bias": "rotary"}, heads=2, head_size=4)]),
    _case("mha_typical_relative", ["x"], [
        _layer("rel", "RelativePositionEmbedding", ["x", "x"], input_dim=7, output_dim=4),
        _layer("att", "MultiHeadAttention", ["x", "x", "x", "rel"], {"p_bias": "typical_relative"}, heads=2,
               head_size=4, return_attention_scores=True)], ["att/0", "att/1"]),
    _case("mha_t5_relative", ["x", "bias_lm"], [
        _layer("rel", "RelativePositionEmbeddingT5", ["x", "x"], input_dim=8, output_dim=2, max_distance=5,
               bidirectional=False),
        _layer("att", "MultiHeadAttention", ["x", "x", "x", "bias_lm", "rel"],
               {"a_bias": True, "p_bias": "t5_relative"}, heads=2, head_size=4, attention_scale=False,
               use_bias=False)]),
    _case("gau", ["x"], [_layer("gau", "GatedAttentionUnit", "x", units=6, key_size=4)]),
    _case("gau_softmax_plus_rotary", ["x"], [
        SIN, _layer("gau", "GatedAttentionUnit", ["x", "sin"], {"p_bias": "rotary"}, units=6, key_size=4,
                    normalization="softmax_plus", use_bias=False)]),
    _case("gau_cross_softmax", ["x", "z"], [
        _layer("gau", "GatedAttentionUnit", ["x", "z", "z"], units=6, key_size=4, self_attention=False,
               normalization="softmax", activation="gelu")]),
    _case("gau_bool_bias", ["x", "bias_bool"], [
        _layer("gau", "GatedAttentionUnit", ["x", "bias_bool"], A_BIAS, units=6, key_size=4)]),
    _case("position_add", ["x"], [_layer("pos", "PositionEmbedding", "x", input_dim=8, output_dim=H)]),
    _case("position_mul", ["x"], [_layer("pos", "PositionEmbedding", "x", input_dim=8, output_dim=H,
                                         merge_mode="mul")]),
    _case("position_zero", ["x"], [_layer("pos", "PositionEmbedding", "x", input_dim=8, output_dim=H,
                                          merge_mode="zero")]),
    _case("position_concat", ["x"], [_layer("pos", "PositionEmbedding", "x", input_dim=8, output_dim=3,
                                            merge_mode="concat")]),
    _case("position_hierarchical", ["x"], [_layer("pos", "PositionEmbedding", "x", input_dim=3, output_dim=H,
                                                  hierarchical=True)]),
    _case("position_custom_hierarchical", ["x", "pos_ids"], [
        _layer("pos", "PositionEmbedding", ["x", "pos_ids"], input_dim=4, output_dim=H, hierarchical=0.3,
               custom_position_ids=True)]),
    _case("position_custom", ["x", "pos_ids"], [
        _layer("pos", "PositionEmbedding", ["x", "pos_ids"], input_dim=16, output_dim=H, custom_position_ids=True)]),
    _case("sinusoidal_add", ["x"], [_layer("pos", "SinusoidalPositionEmbedding", "x", output_dim=H)]),
    _case("sinusoidal_mul", ["x"], [_layer("pos", "SinusoidalPositionEmbedding", "x", output_dim=H, merge_mode="mul")]),
    _case("sinusoidal_concat", ["x"], [_layer("pos", "SinusoidalPositionEmbedding", "x", output_dim=4,
                                              merge_mode="concat")]),
    _case("sinusoidal_custom", ["x", "positions"], [
        _layer("pos", "SinusoidalPositionEmbedding", ["x", "positions"], output_dim=H, custom_position_ids=True)]),
    _case("relative", ["x", "y"], [_layer("rel", "RelativePositionEmbedding", ["x", "y"], input_dim=5, output_dim=4)]),
    _case("relative_t5", ["x", "y"], [
        _layer("rel", "RelativePositionEmbeddingT5", ["x", "y"], input_dim=8, output_dim=2, max_distance=5)]),
]


def _padded(rng, length, lengths):
    x = rng.normal(0, 1, (B, length, H)).astype(np.float32)
    return x * (np.arange(length)[None] < np.array(lengths)[:, None])[..., None]


def random_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """The inputs: x, z ``[B, S, H]`` and y ``[B, SK, H]`` with zero padding steps (Masking's mask), token ids with
    padding and a leading 0, a condition, position ids and positions, a boolean and a causal additive bias."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, V, (B, S)).astype(np.int32) * (np.arange(S)[None] < np.array(X_LENGTHS)[:, None])
    ids[2, 0] = 0  # the first position is real whatever its id (bert4keras's Embedding mask)
    causal = np.tril(np.ones((S, S), bool))
    return {"x": _padded(rng, S, X_LENGTHS), "z": _padded(rng, S, X_LENGTHS), "y": _padded(rng, SK, Y_LENGTHS),
            "ids": ids.astype(np.int32), "cond": rng.normal(0, 1, (B, 3)).astype(np.float32),
            "pos_ids": rng.integers(0, 16, (B, S)).astype(np.int32),
            "positions": (rng.uniform(0, 20, (B, S))).astype(np.float32),
            "bias_bool": (rng.uniform(size=(B, S, S)) < 0.7) | np.eye(S, dtype=bool),
            "bias_lm": np.broadcast_to(-(1.0 - causal) * 1e12, (B, 1, S, S)).astype(np.float32)}


def random_data(seed: int = 0) -> dict[str, np.ndarray]:
    """The inputs and, for every case's layers (built here), random weights ``<case>/<layer>/<i>``."""
    rng = np.random.default_rng(seed + 1)
    data = random_arrays(seed)
    for case in CASES:
        _, _, named = layer_graphs.build(case, data, keras, layers)
        for name, layer in named.items():
            for i, weight in enumerate(layer.trainable_weights):
                data[f"{case['name']}/{name}/{i}"] = rng.normal(0, 0.5, tuple(weight.shape)).astype(np.float32)
    return data


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    data, workdir = random_data(), str(tmp_path_factory.mktemp("compat_layers_oracle"))
    inputs = os.path.join(workdir, "compat_layers_in.npz")
    np.savez(inputs, **data)
    return data, helpers.run_bert4keras("oracle_compat_layers.py", {"inputs": inputs, "cases": CASES}, workdir,
                                        "compat_layers")


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_matches_bert4keras(case, parity):
    data, oracle = parity
    ours = layer_graphs.run(case, data, keras, layers, ops.convert_to_numpy)
    prefix = case["name"] + "/"
    theirs = {key[len(prefix):]: value for key, value in oracle.items() if key.startswith(prefix)}
    assert sorted(ours) == sorted(theirs)  # the same outputs, masks and layers
    for key, value in theirs.items():
        if key.startswith("shapes/"):
            assert str(ours[key]) == str(value), key  # weight shapes, in bert4keras's order
        else:
            assert ours[key].shape == value.shape, key
            np.testing.assert_allclose(ours[key], value, rtol=1e-5, atol=1e-5, err_msg=key)


def test_custom_objects_hold_bert4keras_layers(parity):
    _, oracle = parity
    names = set(str(oracle["custom_objects"]).split())
    assert names - set(layers.custom_objects) <= {"LayerNormalization"}  # its own module adds it
    assert all(issubclass(cls, keras.layers.Layer) for cls in layers.custom_objects.values())


def test_configs_round_trip():
    data = random_arrays()
    for case in CASES:
        _, _, named = layer_graphs.build(case, data, keras, layers)
        for layer in named.values():
            config = layer.get_config()
            twin = type(layer).from_config(config)
            assert twin.get_config() == config, layer.name
            revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
            assert type(revived) is type(layer) and revived.get_config() == config


def small_model(length=None):
    """Token ids -> Embedding -> PositionEmbedding -> MultiHeadAttention (rotary, then T5 positions) -> ScaleOffset
    -> gated FeedForward -> GatedAttentionUnit -> Concatenate1D -> the tied output and a masked max pooling."""
    ids = keras.Input((length,), dtype="int32")
    emb = layers.Embedding(V, H, mask_zero=True, embeddings_initializer="normal")
    x = layers.PositionEmbedding(16, H, embeddings_initializer="normal")(emb(ids))
    sin = layers.SinusoidalPositionEmbedding(4, merge_mode="zero")(x)
    x = layers.MultiHeadAttention(2, 4)([x, x, x, sin], p_bias="rotary")
    rel = layers.RelativePositionEmbeddingT5(8, 2, embeddings_initializer="normal")([x, x])
    x = layers.MultiHeadAttention(2, 4, attention_scale=False)([x, x, x, rel], p_bias="t5_relative")
    x = layers.FeedForward(16, ["gelu", "linear"])(layers.ScaleOffset()(x))
    x = layers.Concatenate1D()([layers.GatedAttentionUnit(6, 4)(x), x])
    return keras.Model(ids, [emb(x, mode="dense"), layers.GlobalMaxPooling1D()(x)])


def test_keras_save_load(tmp_path):
    keras.utils.set_random_seed(0)
    model = small_model()
    ids = random_arrays()["ids"]
    path = str(tmp_path / "layers.keras")
    model.save(path)
    for loaded in (keras.saving.load_model(path), keras.saving.load_model(path, custom_objects=layers.custom_objects)):
        for ours, theirs in zip(loaded(ids), model(ids), strict=True):
            np.testing.assert_array_equal(ops.convert_to_numpy(ours), ops.convert_to_numpy(theirs))


def test_multi_head_attention_in_mixed_bfloat16():
    data = random_arrays()
    x = keras.layers.Masking(0.0)(ops.convert_to_tensor(data["x"]))
    sin = layers.SinusoidalPositionEmbedding(4, merge_mode="zero", dtype="mixed_bfloat16")(x)
    rel = layers.RelativePositionEmbedding(7, 4, embeddings_initializer="normal", dtype="mixed_bfloat16")([x, x])
    t5 = layers.RelativePositionEmbeddingT5(8, 2, embeddings_initializer="normal", dtype="mixed_bfloat16")([x, x])
    for extra, call in (([sin], {"p_bias": "rotary"}), ([rel], {"p_bias": "typical_relative"}),
                        ([data["bias_lm"], t5], {"a_bias": True, "p_bias": "t5_relative"})):
        layer = layers.MultiHeadAttention(2, 4, return_attention_scores=True, dtype="mixed_bfloat16")
        out, scores = layer([x, x, x, *extra], **call)
        assert keras.backend.standardize_dtype(out.dtype) == "bfloat16", call
        assert np.isfinite(ops.convert_to_numpy(ops.cast(out, "float32"))).all(), call
        assert np.isfinite(ops.convert_to_numpy(ops.cast(scores, "float32"))).all(), call


def test_bad_arguments_are_one_clear_error():
    x = keras.Input((S, H))
    with pytest.raises(ConfigError, match="p_bias: expected None or 'typical_relative'.*found 'foo'"):
        layers.MultiHeadAttention(2, 4)([x, x, x, x], p_bias="foo")
    with pytest.raises(ModelError, match=r"inputs: expected at least 3 \(q, k, v\), found 2"):
        layers.MultiHeadAttention(2, 4)([x, x])
    with pytest.raises(ModelError, match=r"inputs: expected 4 \(q, k, v, the a_bias\), found 3"):
        layers.MultiHeadAttention(2, 4)([x, x, x], a_bias=True)
    with pytest.raises(ConfigError, match="normalization: expected 'softmax' or 'squared_relu' or 'softmax_plus'"):
        layers.MultiHeadAttention(2, 4, normalization="relu")
    with pytest.raises(ConfigError, match="p_bias: expected None or 'rotary', found 't5_relative'"):
        layers.GatedAttentionUnit(6, 4)([x, x], p_bias="t5_relative")
    with pytest.raises(ModelError, match="mode: expected 'embedding' or 'dense', found 'logits'"):
        layers.Embedding(V, H)(x, mode="logits")
    with pytest.raises(ConfigError, match=r"inputs: expected \[x, position_ids\]"):
        layers.PositionEmbedding(8, H, custom_position_ids=True)(x)
    with pytest.raises(ModelError, match="expected at most 4 tokens"):
        layers.PositionEmbedding(4, H)(x)


def test_a_model_of_these_layers_trains_one_step():
    keras.utils.set_random_seed(0)
    ids = keras.Input((None,), dtype="int32")
    emb = layers.Embedding(V, H, mask_zero=True)
    x = emb(ids)
    x = layers.MultiHeadAttention(2, 4)([x, x, x, layers.SinusoidalPositionEmbedding(4, "zero")(x)], p_bias="rotary")
    model = keras.Model(ids, emb(layers.FeedForward(16, ["gelu", "linear"])(x), mode="dense"))
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [ops.convert_to_numpy(w).copy() for w in model.trainable_weights]
    token_ids = random_arrays()["ids"]
    loss = model.train_on_batch(token_ids, np.roll(token_ids, -1, axis=1))
    assert np.isfinite(loss)
    assert all((ops.convert_to_numpy(w) != b).any() for w, b in zip(model.trainable_weights, before, strict=True))
