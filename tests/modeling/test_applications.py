"""bert4keras's ``application="lm"`` and ``"unilm"`` on every family, against bert4keras 0.11.5: checkpoints it
writes in each family's names, the same outputs and the same layer names; and the masks by hand."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import ConfigError, ModelError, build_transformer_model
from kerasbert.modeling.masks import AttentionMask

import helpers

CONFIG = {**helpers.TINY, "embedding_size": 16}
WRITERS = {"bert": {"with_pool": True, "with_mlm": True}, "albert": {"with_mlm": True}, "nezha": {"with_mlm": True},
           "electra": {"with_discriminator": True}, "roformer": {"with_mlm": True}, "roformer_v2": {"with_mlm": True}}
FAMILIES = {"bert": "bert", "albert": "albert", "albert_unshared": "albert", "nezha": "nezha", "electra": "electra",
            "roformer": "roformer", "roformer_v2": "roformer_v2"}  # family -> the family that writes its checkpoint
NARROW = ("albert", "electra", "roformer")  # their checkpoints' embeddings are narrower than H
# both applications imply with_mlm (next-token probabilities), as in bert4keras
CASES = {f"{family}-{application}": {"family": family, "application": application, "kwargs": {}}
         for family in FAMILIES if family != "electra"  # an encoder only, in bert4keras too
         for application in ("lm", "unilm")}
CASES["bert-lm-logits"] = {"family": "bert", "application": "lm", "kwargs": {"with_mlm": "linear"}}
CASES["bert-unilm-pool"] = {"family": "bert", "application": "unilm", "kwargs": {"with_pool": "linear"}}  # SimBERT


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """bert4keras writes each family's checkpoint, then predicts every case on one ragged two-segment batch."""
    work = str(tmp_path_factory.mktemp("applications"))
    tasks, folders = [], {}
    for writer, kwargs in WRITERS.items():
        folders[writer] = folder = os.path.join(work, writer)
        os.makedirs(folder)
        config = {k: v for k, v in CONFIG.items() if k != "embedding_size" or writer in NARROW}
        with open(os.path.join(folder, "bert_config.json"), "w") as f:
            json.dump(config, f)
        tasks.append({"kind": "family_checkpoint", "model": writer, "kwargs": kwargs, "seed": len(tasks), "std": 0.2,
                      "config": os.path.join(folder, "bert_config.json"),
                      "checkpoint": os.path.join(folder, "bert_model.ckpt")})
    inputs = os.path.join(work, "inputs.npz")
    np.savez(inputs, **helpers.random_batch(CONFIG["vocab_size"], batch=4, length=14, seed=3))
    cases = {}
    for name, case in CASES.items():
        cases[name] = {**case, "folder": folders[FAMILIES[case["family"]]], "index": len(tasks)}
        tasks.append(helpers.predict_task(cases[name]["folder"], inputs, model=case["family"],
                                          application=case["application"], **case["kwargs"]))
    return cases, np.load(inputs), helpers.run_oracle(tasks, work)


def _ours(case: dict):
    return helpers.build_from(case["folder"], case["family"], application=case["application"], **case["kwargs"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_and_layer_names_equal_bert4keras(oracle, name):
    cases, data, theirs = oracle
    case = cases[name]
    model = _ours(case)
    assert model.application == case["application"]
    outputs = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    outputs = outputs if isinstance(outputs, list) else [outputs]
    assert len(outputs) == (2 if "with_pool" in case["kwargs"] else 1)
    assert outputs[-1].shape == (*data["token_ids"].shape, CONFIG["vocab_size"])  # next-token scores
    for i, output in enumerate(outputs):
        np.testing.assert_allclose(output, theirs[f"{case['index']}/{i}"], atol=1e-5, rtol=0)
    assert sorted(layer.name for layer in model.layers) == sorted(theirs[f"{case['index']}/layers"])


def test_the_mask_changes_the_outputs(oracle):
    """The application matters: the same weights as an encoder give other outputs (so the parity above is not
    that of an unmasked model)."""
    cases, data, theirs = oracle
    case = cases["bert-unilm"]
    encoder = helpers.build_from(case["folder"], "bert", with_mlm=True)
    output = encoder.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    assert np.abs(output - theirs[f"{case['index']}/0"]).max() > 1e-2


@pytest.mark.parametrize("positions", [None, "relative", "rotary"])
def test_attention_under_a_query_by_key_mask_equals_masking_by_hand(positions):
    """A ``[B, S, S]`` mask hides what it says and nothing else: equal to the scores masked by hand; its first row
    serves the ``[CLS]``-only call."""
    from kerasbert.modeling.blocks import MultiHeadSelfAttention
    from kerasbert.modeling.positions import RelativePositions, RotaryPositions

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    tokens, segments = np.array([[3, 4, 5, 6, 0], [3, 4, 5, 0, 0]]), np.array([[0, 0, 1, 1, 0], [0, 1, 1, 0, 0]])
    mask = np.asarray(AttentionMask("unilm")([tokens, segments]))
    extra = {None: [], "relative": [RelativePositions(4, 3)(x)], "rotary": [RotaryPositions(4)(x)]}[positions]
    layer = MultiHeadSelfAttention(2, positions=positions)
    out = np.asarray(layer([x, mask, *extra]))
    for row in range(2):  # each query equals an attention whose key mask is that query's row
        for query in range(5):
            keys_only = np.asarray(layer([x[row:row + 1], mask[row:row + 1, query], *extra]))
            np.testing.assert_allclose(out[row, query], keys_only[0, query], atol=1e-6)
    padding_only = np.asarray(layer([x, tokens > 0, *extra]))
    assert np.abs(padding_only[0, 0] - out[0, 0]).max() > 1e-3  # the source does not see the target
    first = np.asarray(layer([x, mask, *extra], first_token=True))
    np.testing.assert_allclose(first, out[:, 0], atol=1e-6)


def test_masks_by_hand():
    tokens, segments = np.array([[7, 8, 9, 4, 0]]), np.array([[0, 0, 1, 1, 0]])
    lm = np.asarray(AttentionMask("lm")([tokens, segments]))[0]
    np.testing.assert_array_equal(lm, np.tril(np.ones((5, 5), bool)) & (tokens[0] > 0))
    unilm = np.asarray(AttentionMask("unilm")([tokens, segments]))[0].astype(int)
    np.testing.assert_array_equal(unilm, [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0],
                                          [1, 1, 1, 1, 0]])


def test_an_application_that_does_not_exist_lists_those_that_do():
    with pytest.raises(ModelError, match="'encoder' or 'lm' or 'unilm'.*'seq2seq'"):
        build_transformer_model("tiny", application="seq2seq", verbose=False)


@pytest.mark.parametrize("application", ["lm", "unilm"])
def test_electra_is_an_encoder_only(application):
    with pytest.raises(ModelError, match="\"encoder\" for model='electra'.*no next-token output"):
        build_transformer_model("tiny", model="electra", embedding_size=16, application=application, verbose=False)


def test_unilm_needs_segment_ids():
    with pytest.raises(ConfigError, match="type_vocab_size 0"):
        build_transformer_model("tiny", application="unilm", type_vocab_size=0, verbose=False)


def test_the_application_survives_a_keras_file(tmp_path):
    import keras

    model = build_transformer_model("tiny", application="unilm", with_mlm=True, verbose=False)
    path = str(tmp_path / "unilm.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = [np.array([[2, 5, 6, 7, 0]]), np.array([[0, 0, 1, 1, 0]])]
    assert loaded.application == "unilm"
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
