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
