"""kerasbert.compat.models.build_transformer_model against bert4keras 0.11.5: bert4keras's model= values passed
through, with its set_gelu."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import config_of
from kerasbert.compat.backend import set_gelu
from kerasbert.compat.models import build_transformer_model

import helpers

ALBERT = {**helpers.TINY, "embedding_size": 16}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """bert4keras writes a random ALBERT checkpoint, then predicts with it after set_gelu("tanh")."""
    work = str(tmp_path_factory.mktemp("compat_models"))
    config, checkpoint, inputs = (os.path.join(work, name) for name in ("bert_config.json", "bert_model.ckpt",
                                                                        "inputs.npz"))
    with open(config, "w") as f:
        json.dump(ALBERT, f)
    np.savez(inputs, **helpers.random_batch(ALBERT["vocab_size"], length=12))
    tasks = [{"kind": "family_checkpoint", "model": "albert", "config": config, "checkpoint": checkpoint,
              "kwargs": {"with_mlm": True}, "seed": 0, "std": 0.5},
             {"kind": "bert", "config": config, "checkpoint": checkpoint, "inputs": inputs, "gelu": "tanh",
              "kwargs": {"model": "albert", "with_mlm": True}}]
    return config, checkpoint, np.load(inputs), helpers.run_oracle(tasks, work)["1/0"]


def test_albert_after_set_gelu_tanh_equals_bert4keras(oracle):
    config, checkpoint, data, expected = oracle
    set_gelu("tanh")
    try:
        model = build_transformer_model(config, checkpoint, model="albert", with_mlm=True, verbose=False)
    finally:
        set_gelu("erf")
    erf = build_transformer_model(config, checkpoint, model="albert", with_mlm=True, verbose=False)
    assert (model.family, config_of(model).activation, config_of(erf).activation) == ("albert", "gelu_tanh", "gelu")
    inputs = [data["token_ids"], data["segment_ids"]]
    np.testing.assert_allclose(model.predict(inputs, verbose=0), expected, atol=1e-5, rtol=0)
    assert np.abs(erf.predict(inputs, verbose=0) - expected).max() > 1e-5  # the GELU set_gelu chose matters


def test_every_family_passes_through():
    for family in ("bert", "roberta", "albert", "albert_unshared", "nezha", "electra", "roformer", "roformer_v2"):
        model = build_transformer_model(config=ALBERT, model=family, verbose=False)
        assert model.family == {"roberta": "bert"}.get(family, family)


def test_a_hugging_face_config_names_its_family_when_model_is_left_out():
    config = {**ALBERT, "model_type": "albert"}
    assert build_transformer_model(config=config, verbose=False).family == "albert"
    assert build_transformer_model(config=dict(helpers.TINY), verbose=False).family == "bert"


T5_CONFIG = {"vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
             "attention_head_size": 4, "intermediate_size": 32, "hidden_act": ["gelu", "linear"],
             "relative_attention_num_buckets": 32}


@pytest.mark.parametrize("name", ["T5", None])
def test_return_keras_model_false_gives_t5s_model_encoder_and_decoder_over_one_set_of_layers(name):
    """bert4keras's T5 object: the decoder alone on the encoder alone's output gives the whole model's
    probabilities, all three over the same variables; the parts named as bert4keras names them."""
    t5 = build_transformer_model(config=T5_CONFIG, model="mt5.1.1", return_keras_model=False, name=name,
                                 verbose=False)
    assert (t5.encoder.name, t5.decoder.name) == (("T5_Encoder", "T5_Decoder") if name else ("Encoder", "Decoder"))
    assert [t.name for t in t5.encoder.inputs] == ["Encoder-Input-Token"]
    assert [t.name for t in t5.decoder.inputs] == ["Input-Context", "Decoder-Input-Token"]
    assert (t5.encoder.family, t5.decoder.family, t5.inputs) == ("mt5.1.1_encoder", "mt5.1.1_decoder", t5.model.inputs)
    whole = {id(w) for w in t5.model.weights}
    parts = [{id(w) for w in part.weights} for part in (t5.encoder, t5.decoder)]
    shared = {id(t5.model.get_layer("Embedding-Token").embeddings)}  # both stacks read the token embedding
    assert parts[0] | parts[1] == whole and parts[0] & parts[1] == shared
    rng = np.random.default_rng(0)
    source, target = rng.integers(1, 50, (2, 7)), rng.integers(1, 50, (2, 5))
    target[:, 0] = 0
    expected = t5.model.predict([source, target], verbose=0)
    got = t5.decoder.predict([t5.encoder.predict(source, verbose=0), target], verbose=0)
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_return_keras_model_false_on_a_t5_part_alone_gives_its_class():
    """A T5 part alone is bert4keras's T5_Encoder (T5_Decoder), over the model return_keras_model=True builds."""
    encoder = build_transformer_model(config=T5_CONFIG, model="mt5.1.1_encoder", return_keras_model=False,
                                      verbose=False)
    plain = build_transformer_model(config=T5_CONFIG, model="mt5.1.1_encoder", verbose=False)
    assert type(encoder).__name__ == "T5_Encoder" and encoder.model.family == plain.family == "mt5.1.1_encoder"
    assert [layer.name for layer in encoder.model.layers] == [layer.name for layer in plain.layers]
