"""build_transformer_model: parity with bert4keras, layer names, outputs, save/load, errors."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert import ModelError, build_transformer_model

from conftest import HEAD_FLAGS

CASES = [f"tiny-{i}" for i in range(len(HEAD_FLAGS))] + ["base2-0", "base2-1", "base2-2", "tiny-keep_tokens",
                                                          "saved-by-kerasbert"]


def ours(case: dict):
    """Our model for a parity case, its outputs on the case's inputs (always a list)."""
    folder = case["folder"]
    model = build_transformer_model(os.path.join(folder, "bert_config.json"), os.path.join(folder, "bert_model.ckpt"),
                                    verbose=False, **case["kwargs"])
    data = np.load(case["inputs"])
    outputs = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    return model, outputs if isinstance(outputs, list) else [outputs]


@pytest.mark.parametrize("name", CASES)
def test_outputs_equal_bert4keras(oracle, name):
    cases, theirs = oracle
    case = cases[name]
    model, outputs = ours(case)
    expected = [theirs[f"{case['index']}/{j}"] for j in range(3) if f"{case['index']}/{j}" in theirs]
    assert len(outputs) == len(expected)
    for mine, ref in zip(outputs, expected, strict=True):
        assert mine.shape == ref.shape
        np.testing.assert_allclose(mine, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", CASES[:len(HEAD_FLAGS)])
def test_layer_names_equal_bert4keras(oracle, name):
    cases, theirs = oracle
    case = cases[name]
    model = build_transformer_model(os.path.join(case["folder"], "bert_config.json"), verbose=False, **case["kwargs"])
    names = [layer.name for layer in model.layers]
    # kerasbert computes the padding mask once, explicitly (bert4keras relies on Keras mask propagation).
    assert names.count("Attention-Mask") == 1
    assert [n for n in names if n != "Attention-Mask"] == list(theirs[f"{case['index']}/layers"])


def test_output_order_follows_bert4keras():
    shapes = {}
    for flags in HEAD_FLAGS:
        model = build_transformer_model("tiny", verbose=False, **flags)
        outputs = model.outputs
        shapes[tuple(sorted(flags.items()))] = [tuple(o.shape) for o in outputs]
    assert shapes[()] == [(None, None, 32)]
    assert shapes[(("with_nsp", True),)] == [(None, 2)]
    assert shapes[(("with_mlm", True), ("with_nsp", True))] == [(None, 2), (None, None, 128)]
    assert shapes[(("with_mlm", True), ("with_pool", True))] == [(None, 32), (None, None, 128)]


def test_with_nsp_implies_pooler_and_pool_activation():
    model = build_transformer_model("tiny", with_nsp=True, verbose=False)
    assert model.get_layer("Pooler-Dense").activation.__name__ == "tanh"
    model = build_transformer_model("tiny", with_pool="linear", verbose=False)
    assert model.get_layer("Pooler-Dense").activation.__name__ == "linear"


def test_keras_save_load_same_outputs(tmp_path, tiny_ckpt):
    model = build_transformer_model(os.path.join(tiny_ckpt, "bert_config.json"), tiny_ckpt, with_nsp=True,
                                    with_mlm=True, verbose=False)
    path = str(tmp_path / "bert.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: every layer is registered
    x = np.array([[2, 9, 17, 3, 0, 0]]), np.array([[0, 0, 1, 1, 0, 0]])
    for a, b in zip(model.predict(x, verbose=0), loaded.predict(x, verbose=0), strict=True):
        np.testing.assert_array_equal(a, b)
    assert loaded.get_layer("Embedding-Token").embeddings is not None


def test_padding_keys_are_masked():
    model = build_transformer_model("tiny", verbose=False)
    short = model.predict([np.array([[5, 6, 7]]), np.zeros((1, 3))], verbose=0)
    padded = model.predict([np.array([[5, 6, 7, 0, 0]]), np.zeros((1, 5))], verbose=0)
    np.testing.assert_allclose(short[0], padded[0, :3], atol=1e-5)


def test_fixed_sequence_length_and_any_length_up_to_max():
    model = build_transformer_model("tiny", sequence_length=16, verbose=False)
    assert tuple(model.inputs[0].shape) == (None, 16)
    free = build_transformer_model("tiny", verbose=False)
    assert free.predict([np.ones((1, 64)), np.zeros((1, 64))], verbose=0).shape == (1, 64, 32)


def test_sequence_longer_than_max_positions_is_a_clear_error():
    model = build_transformer_model("tiny", verbose=False)
    with pytest.raises(ModelError, match=r"Input-Token: expected at most 64 tokens .* found sequences of 65"):
        model([np.ones((1, 65), "int32"), np.zeros((1, 65), "int32")])
    with pytest.raises(ModelError, match="found sequences of 70"):
        model.predict([np.ones((2, 70)), np.zeros((2, 70))], verbose=0)
    with pytest.raises(ModelError, match="sequence_length: expected 1 to 64"):
        build_transformer_model("tiny", sequence_length=65, verbose=False)


def test_overrides_and_bert4keras_aliases():
    model = build_transformer_model("tiny", num_hidden_layers=1, max_position=32, segment_vocab_size=3,
                                    dropout_rate=0.0, verbose=False)
    assert model.get_layer("Embedding-Position").embeddings.shape == (32, 32)
    assert model.get_layer("Embedding-Segment").embeddings.shape == (3, 32)
    assert model.get_layer("Embedding-Dropout").rate == 0.0
    assert not any(layer.name.startswith("Transformer-1") for layer in model.layers)
    with pytest.raises(kerasbert.ConfigError, match="config override: expected one of .* found num_hiden_layers"):
        build_transformer_model("tiny", num_hiden_layers=1)


def test_no_segment_input_when_type_vocab_size_is_zero():
    model = build_transformer_model("tiny", type_vocab_size=0, verbose=False)
    assert [t.name for t in model.inputs] == ["Input-Token"]
    assert "Embedding-Segment" not in [layer.name for layer in model.layers]


def test_keep_tokens_errors():
    with pytest.raises(ModelError, match=r"keep_tokens: expected a non-empty list of ids in \[0, 128\), found 1 ids"):
        build_transformer_model("tiny", keep_tokens=[0, 1, 128])
    with pytest.raises(ModelError, match="found an empty list"):
        build_transformer_model("tiny", keep_tokens=[])


def test_unknown_model_and_both_configs():
    with pytest.raises(ModelError, match="model: expected one of bert, albert, .*, found 'bart'"):
        build_transformer_model("tiny", model="bart")
    with pytest.raises(kerasbert.ConfigError, match="config_path or config, not both"):
        build_transformer_model("tiny", config={"vocab_size": 10})


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_build_and_predict(policy):
    model = build_transformer_model("tiny", with_mlm=True, dtype=policy, verbose=False)
    reference = build_transformer_model("tiny", with_mlm=True, verbose=False)
    reference.set_weights(model.get_weights())
    x = [np.array([[2, 9, 17, 3, 0]]), np.zeros((1, 5))]
    low, full = model.predict(x, verbose=0), reference.predict(x, verbose=0)
    assert model.get_layer("Transformer-0-MultiHeadSelfAttention").compute_dtype == policy.split("_")[1]
    assert model.get_layer("Transformer-0-MultiHeadSelfAttention").qkv_kernel.dtype == "float32"
    np.testing.assert_allclose(np.asarray(low, "float32").sum(-1), 1.0, atol=2e-2)
    assert np.abs(np.asarray(low, "float32") - full).max() < 5e-2


def test_xla_is_the_predict_default_on_a_gpu_from_ten_million_parameters_without_a_crf(monkeypatch):
    """On a CPU with TensorFlow the plain graph with oneDNN is as fast as XLA or faster (benchmarks/HISTORY.md on
    AVX2, RESULTS.md on AMX)."""
    import keras

    from kerasbert.modeling import heads
    from kerasbert.perf.xla import XLA_MIN_PARAMS, xla_pays

    tiny = build_transformer_model("tiny", verbose=False)
    base2 = build_transformer_model("bert_base_chinese", num_hidden_layers=1, verbose=False)  # 30.9M
    assert tiny.count_params() < XLA_MIN_PARAMS <= base2.count_params()
    assert keras.distribution.list_devices("gpu") == []  # the tests' machines have none
    base2_bf16 = build_transformer_model("bert_base_chinese", num_hidden_layers=1, dtype="mixed_bfloat16",
                                         verbose=False)
    assert (tiny.jit_compile, base2.jit_compile, base2_bf16.jit_compile) == (False, False, False)
    monkeypatch.setattr(keras.distribution, "list_devices", lambda kind=None: ["gpu:0"])
    assert xla_pays(base2) and xla_pays(base2_bf16) and not xla_pays(tiny)
    assert xla_pays(heads.tagging(base2, 3)) and not xla_pays(heads.tagging(base2, 3, crf=True))


def test_xla_for_every_model_without_a_crf_on_jax(monkeypatch):
    """JAX runs an uncompiled step op by op from Python; Keras compiles there by default too."""
    import keras

    from kerasbert.modeling import heads
    from kerasbert.perf.xla import xla_pays

    tiny = build_transformer_model("tiny", verbose=False)
    bf16 = build_transformer_model("tiny", dtype="mixed_bfloat16", verbose=False)
    assert not xla_pays(tiny) and not xla_pays(bf16)
    monkeypatch.setattr(keras.config, "backend", lambda: "jax")
    assert xla_pays(tiny) and xla_pays(bf16) and not xla_pays(heads.tagging(tiny, 3, crf=True))
