"""BertConfig: Google and HF files, validation errors, presets, to_json."""

from __future__ import annotations

import json
import re

import pytest

from kerasbert import BertConfig, ConfigError
from kerasbert.modeling.config import preset_names

GOOGLE = {"attention_probs_dropout_prob": 0.1, "directionality": "bidi", "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
          "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
          "pooler_fc_size": 768, "pooler_num_attention_heads": 12, "pooler_num_fc_layers": 3,
          "pooler_size_per_head": 128, "pooler_type": "first_token_transform", "type_vocab_size": 2,
          "vocab_size": 21128}


def write(tmp_path, values, name="bert_config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(values) if isinstance(values, dict) else values, encoding="utf-8")
    return str(path)


def test_google_config(tmp_path):
    cfg = BertConfig.from_json(write(tmp_path, GOOGLE))
    assert (cfg.vocab_size, cfg.hidden_size, cfg.head_size, cfg.activation) == (21128, 768, 64, "gelu")
    assert cfg.layer_norm_eps == 1e-12
    assert cfg.extra["pooler_type"] == "first_token_transform"
    assert BertConfig.from_json(str(tmp_path)) == cfg  # a folder holding bert_config.json


def test_hugging_face_config(tmp_path):
    hf = dict(GOOGLE, model_type="bert", layer_norm_eps=1e-5, hidden_act="gelu_new", vocab_size=30522,
              architectures=["BertForMaskedLM"], pad_token_id=0)
    cfg = BertConfig.from_json(write(tmp_path, hf, "config.json"))
    assert (cfg.layer_norm_eps, cfg.activation, cfg.vocab_size) == (1e-5, "gelu_tanh", 30522)


@pytest.mark.parametrize("act,canonical", [("gelu", "gelu"), ("gelu_new", "gelu_tanh"), ("gelu_tanh", "gelu_tanh"),
                                           ("gelu_approximate", "gelu_tanh"), ("relu", "relu"), ("swish", "swish")])
def test_activations(act, canonical):
    assert BertConfig.from_dict(dict(GOOGLE, hidden_act=act)).activation == canonical


def test_to_json_round_trip(tmp_path):
    cfg = BertConfig.from_dict(GOOGLE)
    path = str(tmp_path / "out.json")
    text = cfg.to_json(path)
    assert json.loads(text)["pooler_type"] == "first_token_transform"
    assert BertConfig.from_json(path) == cfg
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left


@pytest.mark.parametrize("change,message", [
    ({"num_attention_heads": 7}, "num_attention_heads: expected a divisor of hidden_size 768, found 7"),
    ({"hidden_size": 0}, "hidden_size: expected a positive integer, found 0"),
    ({"num_hidden_layers": "12"}, "num_hidden_layers: expected a positive integer, found '12'"),
    ({"hidden_act": "mish"}, "hidden_act: expected one of .*found 'mish'"),
    ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob: expected a number in \[0, 1\), found 1.5"),
    ({"model_type": "bart"}, "model_type: expected one of 'bert', 'albert', 'electra', 'nezha', 'roformer', "
                             "'t5', 'mt5', 'gpt2', 'roberta', 'xlm-roberta', 'distilbert', 'deberta-v2', "
                             "'modernbert', found 'bart'"),
])
def test_invalid_values_name_the_file_and_key(tmp_path, change, message):
    path = write(tmp_path, dict(GOOGLE, **change))
    with pytest.raises(ConfigError, match=f"^{path}: {message}"):
        BertConfig.from_json(path)


def test_missing_file_bad_json_missing_key(tmp_path):
    with pytest.raises(ConfigError, match="nope.json: expected a bert_config.json file, found no such file"):
        BertConfig.from_json(str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match="expected valid UTF-8 JSON, found JSONDecodeError"):
        BertConfig.from_json(write(tmp_path, "{hidden_size: 3"))
    with pytest.raises(ConfigError, match="vocab_size: expected the keys vocab_size, .*, found no vocab_size"):
        BertConfig.from_json(write(tmp_path, {"hidden_size": 768}))


PRESETS = ["albert_base_zh", "albert_tiny_zh", "bert_base_chinese", "bert_base_uncased", "bert_large_chinese",
           "electra_base_zh", "electra_small_zh", "nezha_base_zh", "roformer_base_zh", "roformer_v2_base_zh", "tiny"]


def test_presets():
    assert preset_names() == PRESETS
    large = BertConfig.from_preset("bert_large_chinese")
    assert (large.vocab_size, large.hidden_size, large.num_hidden_layers, large.num_attention_heads,
            large.intermediate_size) == (21128, 1024, 24, 16, 4096)
    assert BertConfig.from_preset("bert_base_uncased").vocab_size == 30522
    with pytest.raises(ConfigError, match="preset: expected one of"):
        BertConfig.from_preset("bert_huge")


@pytest.mark.parametrize("preset, model_type, sizes", [  # V, E, H, L, A, I, hidden_act, max_relative_position
    ("albert_tiny_zh", "albert", (21128, 128, 312, 4, 12, 1248, "gelu", 64)),
    ("albert_base_zh", "albert", (21128, 128, 768, 12, 12, 3072, "gelu", 64)),
    ("electra_small_zh", "electra", (21128, 128, 256, 12, 4, 1024, "gelu", 64)),
    ("electra_base_zh", "electra", (21128, 768, 768, 12, 12, 3072, "gelu", 64)),
    ("nezha_base_zh", "nezha", (21128, 768, 768, 12, 12, 3072, "gelu", 64)),
    ("roformer_base_zh", "roformer", (50000, 768, 768, 12, 12, 3072, "gelu", 64)),
    ("roformer_v2_base_zh", None, (12000, 768, 768, 12, 12, 3072, "relu", 64))])
def test_family_presets(preset, model_type, sizes):
    """Each family's preset has its published sizes and the model_type that picks its family (RoFormer-V2 has none:
    it is built with model="roformer_v2")."""
    cfg = BertConfig.from_preset(preset)
    assert cfg.model_type == model_type
    assert (cfg.vocab_size, cfg.embedding_width, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.intermediate_size, cfg.hidden_act, cfg.max_relative_position) == sizes


@pytest.mark.parametrize("key, value, found", [
    ("vocab_size", 10 ** 400, "found 1.00e+400, a model that would need 3.07e+403 bytes of float32 weights"),
    ("vocab_size", 10 ** 12, "found 1000000000000, a model that would need 2794.0 TiB"),
    ("hidden_size", 1 << 20, "found 1048576, a model that would need 196.4 TiB"),
    ("num_hidden_layers", 100_000, "found 100000, a model that would need 2.6 TiB")])
def test_sizes_beyond_their_bound_fail_before_allocating(key, value, found):
    with pytest.raises(ConfigError, match=rf"^<dict>: {key}: expected at most \d+, {re.escape(found)}"):
        BertConfig.from_dict({**GOOGLE, key: value})


def test_a_model_too_large_as_a_whole_names_its_largest_size():
    values = {**GOOGLE, "vocab_size": 1 << 22, "hidden_size": 1 << 14, "num_attention_heads": 16}
    with pytest.raises(ConfigError, match=r"vocab_size: expected sizes whose weights fit in 64.0 GiB, found "
                                          r"vocab_size 4194304, a model that would need 309.5 GiB"):
        BertConfig.from_dict(values)
    assert BertConfig.from_preset("bert_large_chinese").weight_bytes() < 2 << 30


@pytest.mark.parametrize("value, found", [(["gelu"], "found a list ['gelu']"), (1, "found a int 1"),
                                          ({"name": "gelu"}, "found a dict")])
def test_hidden_act_of_another_type(value, found):
    with pytest.raises(ConfigError, match=rf"hidden_act: expected one of \[.*\], or \[one of them, \"linear\"\] "
                                          rf"for a gated feed-forward, {re.escape(found)}"):
        BertConfig.from_dict({**GOOGLE, "hidden_act": value})


def test_a_gated_activation_and_a_head_size_of_its_own():
    cfg = BertConfig.from_dict({**GOOGLE, "hidden_size": 30, "num_attention_heads": 4, "attention_head_size": 8,
                                "hidden_act": ["gelu_new", "linear"]})
    assert (cfg.gated, cfg.activation, cfg.head_size) == (True, "gelu_tanh", 8)
    assert cfg.to_dict()["attention_head_size"] == 8 and "relative_attention_num_buckets" not in cfg.to_dict()
    with pytest.raises(ConfigError, match=r"hidden_act: .* found a list \['gelu', 'relu'\]"):
        BertConfig.from_dict({**GOOGLE, "hidden_act": ["gelu", "relu"]})
    with pytest.raises(ConfigError, match=r"attention_head_size: expected a positive integer up to 32768, found 0"):
        BertConfig.from_dict({**GOOGLE, "attention_head_size": 0})


def test_an_unknown_preset_lists_the_presets():
    from kerasbert.modeling.config import resolve_config

    with pytest.raises(ConfigError, match=r"^config: expected a config file or one of the presets albert_base_zh, "
                                          r"albert_tiny_zh, bert_base_chinese, .*, tiny, found 'bert_base'"):
        resolve_config("bert_base")
