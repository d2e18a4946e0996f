"""bert4keras's T5 families (t5 = t5.1.0, t5.1.1, mt5.1.1), whole and as their encoder and decoder alone, against
bert4keras 0.11.5: the outputs on checkpoints it writes in its own names, kerasbert's checkpoints read back by it,
keep_tokens; and what T5 refuses."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest

from kerasbert import ConfigError, ModelError, build_transformer_model, save_google_checkpoint
from kerasbert.modeling import architecture, families
from kerasbert.modeling.t5 import T5

import helpers

# heads 3 × d_kv 5 = 15 ≠ hidden 12, as T5's attention_head_size allows
CONFIG = {"vocab_size": 40, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
          "attention_head_size": 5, "intermediate_size": 20, "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
          "relative_attention_num_buckets": 32, "attention_scale": False, "is_dropout": True}
ACTIVATIONS = {"t5": "relu", "t5.1.1": ["gelu", "linear"], "mt5.1.1": ["gelu", "linear"]}  # T5.1.0's is ReLU
PARTS = ("", "_encoder", "_decoder")
KEEP = [0, 1, 2, 5, 7, 9, 11, 13, 17, 19, 23, 29, 31, 37]
ENCODER_LENGTHS, DECODER_LENGTHS = [30, 9, 1, 17], [25, 1, 12, 4]  # beyond the 8 exact buckets: the log ones too


def _ids(lengths: list[int], width: int, high: int, seed: int, first_zero: bool) -> np.ndarray:
    """Rows of random ids in [1, high) padded with 0 to ``width``; the decoder's start with id 0."""
    rng, ids = np.random.default_rng(seed), np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(1, high, length)
    if first_zero:
        ids[:, 0] = 0
    return ids


def _inputs(high: int) -> dict[str, np.ndarray]:
    context = np.random.default_rng(3).normal(0, 1, (len(ENCODER_LENGTHS), 30, CONFIG["hidden_size"]))
    return {"encoder_ids": _ids(ENCODER_LENGTHS, 30, high, 1, False), "decoder_ids": _ids(DECODER_LENGTHS, 25, high,
            2, True), "context": context.astype("float32")}


def _feed(inputs: dict, part: str) -> list:
    return {"_encoder": [inputs["encoder_ids"]], "_decoder": [inputs["context"], inputs["decoder_ids"]]}.get(
        part, [inputs["encoder_ids"], inputs["decoder_ids"]])


def _random_model(family: str, config: str, seed: int):
    """A kerasbert T5 with random weights (the norms' gains near 1)."""
    model = build_transformer_model(config, model=family, verbose=False)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") + ("gamma" in w.path) for w in model.weights])
    return model


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """kerasbert writes a checkpoint of each family; then one bert4keras run writes its own and predicts with each
    model on both (and with keep_tokens on its own)."""
    work = str(tmp_path_factory.mktemp("t5"))
    inputs, kept = os.path.join(work, "inputs.npz"), os.path.join(work, "kept.npz")
    np.savez(inputs, **_inputs(CONFIG["vocab_size"]))
    np.savez(kept, **_inputs(len(KEEP)))
    tasks, index, ours = [], {}, {}
    for family, activation in ACTIVATIONS.items():
        config = os.path.join(work, f"{family}.json")
        with open(config, "w") as f:
            json.dump({**CONFIG, "hidden_act": activation}, f)
        theirs, mine = os.path.join(work, f"b4k-{family}", "model.ckpt"), os.path.join(work, f"kb-{family}")
        os.makedirs(os.path.dirname(theirs))
        ours[family] = _random_model(family, config, seed=len(ours))
        save_google_checkpoint(ours[family], mine)
        tasks.append({"kind": "checkpoint", "config": config, "model": family, "checkpoint": theirs, "seed": 7,
                      "std": 0.3})
        common = {"kind": "outputs", "config": config}
        for part in PARTS:
            index[family + part] = len(tasks)
            tasks.append({**common, "model": family + part, "checkpoint": theirs, "inputs": inputs})
        index[family, "keep"], index[family, "ours"] = len(tasks), len(tasks) + 1
        tasks += [{**common, "model": family, "checkpoint": theirs, "inputs": kept, "keep_tokens": KEEP},
                  {**common, "model": family, "checkpoint": os.path.join(mine, "bert_model.ckpt"), "inputs": inputs}]
    out = helpers.run_bert4keras("oracle_t5.py", {"tasks": tasks}, work, name="t5")
    data = {key: dict(np.load(path)) for key, path in (("inputs", inputs), ("kept", kept))}
    return {"out": out, "index": index, "work": work, "ours": ours, **data}


def _checkpoint(oracle, family: str) -> tuple[str, str]:
    work = oracle["work"]
    return os.path.join(work, f"{family}.json"), os.path.join(work, f"b4k-{family}", "model.ckpt")


@pytest.mark.slow
@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("family", list(ACTIVATIONS))
def test_outputs_and_layer_names_equal_bert4keras(oracle, family, part):
    config, checkpoint = _checkpoint(oracle, family)
    model = build_transformer_model(config, checkpoint, model=family + part, verbose=False)
    task = oracle["index"][family + part]
    expected = oracle["out"][f"{task}/output"]
    got = model.predict(_feed(oracle["inputs"], part), verbose=0)
    assert got.shape == expected.shape == ((4, 30, 12) if part == "_encoder" else (4, 25, 40))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    theirs, mine = set(oracle["out"][f"{task}/layers"]), {layer.name for layer in model.layers}
    # kerasbert's one layer more: the encoder's padding mask, computed once (bert4keras's is implicit)
    assert mine - theirs == ({"Encoder-Attention-Mask"} if part != "_decoder" else set()) and theirs <= mine
    assert type(architecture.of(model)) is T5 and architecture.of(model).family.part == part[1:]


@pytest.mark.slow
@pytest.mark.parametrize("family", list(ACTIVATIONS))
def test_a_saved_checkpoint_gives_bert4keras_the_same_outputs(oracle, family):
    ours = oracle["ours"][family]
    expected = ours.predict(_feed(oracle["inputs"], ""), verbose=0)
    np.testing.assert_allclose(oracle["out"][f"{oracle['index'][family, 'ours']}/output"], expected, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(ACTIVATIONS))
def test_keep_tokens_slice_the_embedding_and_the_output_as_bert4keras(oracle, family):
    config, checkpoint = _checkpoint(oracle, family)
    model = build_transformer_model(config, checkpoint, model=family, keep_tokens=KEEP, verbose=False)
    got = model.predict(_feed(oracle["kept"], ""), verbose=0)
    assert got.shape == (4, 25, len(KEEP))
    np.testing.assert_allclose(got, oracle["out"][f"{oracle['index'][family, 'keep']}/output"], atol=1e-5)


# ------------------------------------------------------------------------------------ without bert4keras
def _config(**changes) -> dict:
    return {**CONFIG, "hidden_act": ["gelu", "linear"], **changes}


def test_the_parts_are_named_as_bert4keras_names_them():
    assert families.get("T5.1.0_Encoder") == families.get("t5_encoder")
    assert (families.get("mt5.1.1_decoder").name, families.get("mt5.1.1_decoder").checkpoint) == (
        "mt5.1.1_decoder", "mt5.1.1")
    with pytest.raises(ModelError, match="model: expected one of bert"):
        families.get("bert_encoder")  # only an encoder-decoder has parts


def test_a_t5_config_is_refused_by_an_encoder_family(tmp_path):
    path = tmp_path / "t5_config.json"
    path.write_text(json.dumps(_config()))
    with pytest.raises(ConfigError, match=rf"{path}: relative_attention_num_buckets: expected a bert config, "
                                          r"without T5's relative_attention_num_buckets, found 32\. .*model='t5'"):
        build_transformer_model(str(path), model="bert", verbose=False)
    gated = {key: value for key, value in _config().items() if key != "relative_attention_num_buckets"}
    with pytest.raises(ConfigError, match=r"hidden_act: expected a nezha config, without T5's hidden_act, found "
                                          r"\['gelu', 'linear'\]"):
        build_transformer_model(config=gated, model="nezha", verbose=False)


def test_a_bert_config_is_refused_by_t5(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(helpers.TINY))
    with pytest.raises(ConfigError, match=rf"{path}: relative_attention_num_buckets: expected the key every "
                                          r"t5.1.1_encoder config gives, found no relative_attention_num_buckets"):
        build_transformer_model(str(path), model="t5.1.1_encoder", verbose=False)


@pytest.mark.parametrize("options, match", [
    ({"application": "lm"}, r"application: expected \"encoder\" for model='t5.1.1', found 'lm'"),
    ({"application": "unilm"}, r"application: expected \"encoder\" for model='t5.1.1', found 'unilm'"),
    ({"with_mlm": True}, r"with_mlm: expected no with_\* flag for model='t5.1.1'"),
    ({"with_pool": True}, r"with_pool: expected no with_\* flag for model='t5.1.1'"),
    ({"embedding_size": 8}, r"embedding_size: expected none \(T5's embeddings are hidden_size 12 wide\), found 8"),
    ({"hierarchical_position": True}, r"hierarchical_position: expected None for model='t5.1.1'"),
])
def test_what_t5_refuses(options, match):
    with pytest.raises((ModelError, ConfigError), match=match):
        build_transformer_model(config=_config(), model="t5.1.1", verbose=False, **options)


def test_a_t5_config_without_attention_dropout_has_none_as_in_bert4keras():
    """bert4keras's T5 configs give hidden_dropout_prob alone; it reads the missing attention rate as 0, and a BERT
    config keeps Google's 0.1 (test_t5_training trains both libraries on such a config)."""
    assert "attention_probs_dropout_prob" not in CONFIG
    for given, rate in (({}, 0.0), ({"attention_probs_dropout_prob": 0.2}, 0.2)):
        model = build_transformer_model(config=_config(**given), model="t5.1.1", verbose=False)
        assert model.bert_config.attention_probs_dropout_prob == rate
    bert = {key: value for key, value in helpers.TINY.items() if key != "attention_probs_dropout_prob"}
    assert build_transformer_model(config=bert, verbose=False).bert_config.attention_probs_dropout_prob == 0.1


def test_a_saved_model_loads_with_the_same_outputs(tmp_path):
    model = _random_model("t5.1.1", _config(), seed=5)
    path = str(tmp_path / "t5.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    inputs = _feed(_inputs(CONFIG["vocab_size"]), "")
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), model.predict(inputs, verbose=0), atol=1e-6)
    assert loaded.family == "t5.1.1" and type(architecture.of(loaded)) is T5


def test_the_decoder_sees_no_later_token_and_the_encoder_no_padding():
    """A later decoder token changes no earlier position; padding after the encoder's tokens changes nothing."""
    model = _random_model("t5.1.1", _config(), seed=6)
    encoder, decoder = np.array([[5, 6, 7, 0, 0]]), np.array([[0, 8, 9, 10]])
    first = model.predict([encoder, decoder], verbose=0)
    changed = model.predict([np.array([[5, 6, 7, 0, 0, 0, 0]]), np.array([[0, 8, 9, 11]])], verbose=0)
    np.testing.assert_allclose(first[:, :3], changed[:, :3], atol=1e-6)
    assert not np.allclose(first[:, 3], changed[:, 3])
