"""ModernBERT's architecture: its layers and names, the heads on it, the annotated summary, its local attention in
chunks equal to the whole masked form, lengths up to P, a .keras file, and what it refuses (numbers against
transformers' equations: tests/weights/test_modernbert_weights.py)."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest

from kerasbert import ConfigError, ModelError, build_transformer_model, heads
from kerasbert.annotated.collect import summary
from kerasbert.modeling import architecture, families
from kerasbert.modeling.blocks import MultiHeadSelfAttention
from kerasbert.modeling.modernbert import ModernBert
from kerasbert.modeling.modernbert_layers import ThetaRotaryPositions, WindowedSelfAttention
from kerasbert.modeling.positions import rotate

from modernbert_folders import BIASES, CONFIG, batch

QUIET = {"print_fn": lambda text: None}


def build(cfg: dict | None = None, **options):
    return build_transformer_model(config=dict(cfg or CONFIG), verbose=False, **options)


def test_layers_names_and_windows():
    model = build()
    built = architecture.of(model)
    assert type(built) is ModernBert and built.config == model.bert_config and not built.segments
    assert [t.name for t in model.inputs] == ["Input-Token"]
    assert [layer.window for layer in built.attentions] == [None, 2, 2, None]
    names = {layer.name for layer in model.layers}
    assert "Transformer-0-MultiHeadSelfAttention-Norm" not in names  # the embeddings are normed: no attn_norm
    assert {"Transformer-1-MultiHeadSelfAttention-Norm", "Transformer-3-FeedForward-Norm", "Encoder-Output-Norm",
            "Attention-Mask", "Embedding-Rotary-Position-Local"} <= names
    assert {"Embedding-Position", "Embedding-Segment", "Input-Segment"}.isdisjoint(names)
    rotary = ("Embedding-Rotary-Position", "Embedding-Rotary-Position-Local")
    bases = {name: model.get_layer(name).base for name in rotary}
    assert bases == {"Embedding-Rotary-Position": 160000.0, "Embedding-Rotary-Position-Local": 10000.0}
    assert model.get_layer("Attention-Mask").pad_id == 62 and model.get_layer("Embedding-Token").pad_id == 62


@pytest.mark.parametrize("variant", ["published", "biases"])
def test_the_annotated_summary_adds_up(variant):
    cfg = {**CONFIG, **(BIASES if variant == "biases" else {})}
    for model in (build(cfg), build(cfg, with_mlm=True)):
        s = summary(model, **QUIET)
        assert s.mismatches == [] and s.params == model.count_params() == s.formula_params
        assert [r.name for r in s.rows if r.source == "generic" and r.params] == []
        assert all(row.formula.value == row.params for row in s.rows)
    symbols = {row.name: row.formula.symbols for row in s.rows}
    biased = variant == "biases"
    assert symbols["Transformer-1-FeedForward"] == ("H·2·I+2·I+I·H+H" if biased else "H·2·I+I·H")
    assert symbols["Transformer-1-MultiHeadSelfAttention"] == ("4·(H·H+H)" if biased else "4·H·H")
    assert symbols["Transformer-1-FeedForward-Norm"] == symbols["Encoder-Output-Norm"] == ("2·H" if biased else "H")
    assert symbols["MLM-Dense"] == ("H·H+H" if biased else "H·H") and symbols["MLM-Bias"] == "V"


@pytest.mark.parametrize("layers", [3, 4])  # the last layer local (2 % 3), then global (3 % 3)
def test_heads_read_the_sequence_output(layers):
    model = build({**CONFIG, "num_hidden_layers": layers})
    data = batch(CONFIG)
    sequence = model.predict(data["ids"], verbose=0)
    first = heads.cls(model, 3)
    full = heads.cls(model, 3, first_token_only=False)
    full.set_weights(first.get_weights())
    np.testing.assert_allclose(first.predict(data["ids"], verbose=0), full.predict(data["ids"], verbose=0),
                               atol=1e-6)
    vectors = heads.embedding(model, "cls", normalize=False).predict(data["ids"], verbose=0)
    np.testing.assert_allclose(vectors, sequence[:, 0], atol=1e-5)
    mean = heads.embedding(model, "mean", normalize=False).predict(data["ids"], verbose=0)
    real = data["real"][..., None]
    np.testing.assert_allclose(mean, (sequence * real).sum(1) / real.sum(1), atol=1e-5)
    assert heads.embedding(model, "first_last_avg").output.shape == (None, 16)
    assert heads.tagging(model, 5, crf=True).output.shape == (None, None, 5)
    assert [tuple(o.shape) for o in heads.spans(model, 2, head_size=8).outputs] == [(None, 2, None, None)]


def test_the_mlm_head_is_the_with_mlm_output():
    with_mlm = build(with_mlm=True)
    head = heads.mlm(build())
    assert [layer.name for layer in head.layers] == [layer.name for layer in with_mlm.layers]
    head.set_weights(with_mlm.get_weights())
    data = batch(CONFIG)
    np.testing.assert_allclose(head.predict(data["ids"], verbose=0), with_mlm.predict(data["ids"], verbose=0),
                               atol=1e-6)
    assert "MLM-Bias" not in {layer.name for layer in build({**CONFIG, "decoder_bias": False}, with_mlm=True).layers}


@pytest.mark.parametrize("length, window", [(1, 1), (5, 2), (13, 2), (16, 4), (17, 3), (40, 64)])
def test_the_local_layers_chunks_give_the_whole_masked_attention(length, window):
    """A local layer's scores chunk by chunk ``[B, A, S/w, w, 3w]`` equal the whole ``S×S`` form with the keys
    past the window masked, at the real queries."""
    rng = np.random.default_rng(length)
    x = rng.standard_normal((2, length, 16)).astype("float32")
    real = np.ones((2, length), bool)
    real[1, max(1, length - 3):] = False
    sinusoid = ThetaRotaryPositions(8)(x)
    layer = WindowedSelfAttention(2, window=window)
    chunked = keras.ops.convert_to_numpy(layer([x, real, sinusoid]))
    q, k, v = (rotate(t, sinusoid, halves=True) if i < 2 else t for i, t in enumerate(layer.qkv(x)))
    positions = np.arange(length)
    seen = real[:, None, None, :] & (np.abs(positions[:, None] - positions[None]) <= window)
    whole = keras.ops.convert_to_numpy(MultiHeadSelfAttention.merge(layer, layer.attend(q, k, v, seen)))
    np.testing.assert_allclose(chunked[real], whole[real], atol=1e-6)
    assert layer.activation_elements(1, 8192) < 8192 * 8192  # the scores: 3·window keys a query, not S


@pytest.mark.parametrize("length", [5, 8, 9, 30])
def test_a_global_layer_past_its_query_block_gives_the_whole_attention(length, monkeypatch):
    """Past `QUERY_BLOCK` queries a global layer attends block by block, in a graph of unknown length too."""
    from kerasbert.modeling import modernbert_layers

    monkeypatch.setattr(modernbert_layers, "QUERY_BLOCK", 8)
    rng = np.random.default_rng(length)
    x = rng.standard_normal((2, length, 16)).astype("float32")
    real = np.ones((2, length), bool)
    real[1, length - 2:] = False
    layer = WindowedSelfAttention(2)
    sinusoid = ThetaRotaryPositions(8)(x)
    blocks = keras.ops.convert_to_numpy(layer([x, real, sinusoid]))
    q, k, v = (rotate(t, sinusoid, halves=True) if i < 2 else t for i, t in enumerate(layer.qkv(x)))
    whole = keras.ops.convert_to_numpy(layer.merge(layer.attend(q, k, v, real[:, None, None, :])))
    np.testing.assert_allclose(blocks[real], whole[real], atol=1e-6)
    inputs = [keras.Input((None, 16)), keras.Input((None,), dtype="bool")]
    graph = keras.Model(inputs, layer([*inputs, ThetaRotaryPositions(8)(inputs[0])]))
    np.testing.assert_allclose(graph.predict([x, real], verbose=0)[real], whole[real], atol=1e-6)


def test_positions_up_to_max_position_embeddings():
    cfg = build().bert_config
    assert families.max_length("modernbert", cfg) == 32
    model = build()
    assert model.predict(np.full((1, 32), 5, "int32"), verbose=0).shape == (1, 32, 16)
    with pytest.raises(ModelError, match=r"Input-Token: expected at most 32 tokens \(max_position_embeddings\), "
                                         r"found sequences of 33"):
        model(np.full((1, 33), 5, "int32"))
    with pytest.raises(ModelError, match=r"sequence_length: expected 1 to 32"):
        build(sequence_length=33)


@pytest.mark.parametrize("key, value, expected", [
    ("local_attention", 5, "local_attention: expected an even positive window"),
    ("local_attention", 0, "local_attention: expected an even positive window"),
    ("local_attention", True, "local_attention: expected an even positive window"),
    ("global_attn_every_n_layers", 0, "global_attn_every_n_layers: expected a positive integer"),
    ("local_rope_theta", -1.0, "local_rope_theta: expected a positive number"),
    ("norm_bias", "no", "norm_bias: expected true or false"),
    ("classifier_activation", "tanhh", "classifier_activation: expected one of"),
    ("layer_types", ["full_attention"] * 4, r"layer_types: expected \['full_attention', 'sliding_attention'"),
    ("rope_parameters", {"full_attention": {"rope_type": "yarn"}},
     "rope_parameters.full_attention.rope_type: expected \"default\""),
])
def test_a_config_it_cannot_build_is_a_config_error(key, value, expected, tmp_path):
    path = os.path.join(tmp_path, "config.json")
    with open(path, "w") as f:
        json.dump({**CONFIG, key: value}, f)
    with pytest.raises(ConfigError, match=f"config.json: {expected}"):
        build_transformer_model(path, verbose=False)


def test_a_newer_configs_layer_types_and_rope_parameters_are_read():
    kinds = ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    model = build({**CONFIG, "layer_types": kinds, "rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 5000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 700.0}}})
    assert [layer.window for layer in ModernBert.of(model).attentions] == [None, 2, 2, None]
    assert model.get_layer("Embedding-Rotary-Position-Local").base == 700.0


@pytest.mark.parametrize("options, expected", [
    ({"application": "lm"}, "application: expected \"encoder\" for model='modernbert', found 'lm'"),
    ({"application": "unilm"}, "application: expected \"encoder\" for model='modernbert', found 'unilm'"),
    ({"with_pool": True}, "with_pool: expected one of with_mlm for model='modernbert'"),
    ({"hierarchical_position": True}, "hierarchical_position: expected none for model='modernbert'"),
])
def test_what_it_refuses(options, expected):
    with pytest.raises(ModelError, match=expected):
        build(**options)
    with pytest.raises(ModelError, match="ModernBERT is an encoder; it has no cached decoder"):
        ModernBert.of(build()).block(0, None, None, cache=lambda k, v: (k, v))


def test_a_keras_file_loads_the_same_model(tmp_path):
    model = heads.cls(build(), 2)
    path = os.fspath(tmp_path / "modernbert.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    data = batch(CONFIG)
    np.testing.assert_allclose(loaded.predict(data["ids"], verbose=0), model.predict(data["ids"], verbose=0),
                               atol=1e-6)
