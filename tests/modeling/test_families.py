"""Every family bert4keras builds, against bert4keras 0.11.5: checkpoints it writes in the family's own names,
the same outputs (sequence, pooled, NSP, MLM, discriminator) and the same layer names."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import CheckpointError, ConfigError, ModelError, build_transformer_model

import helpers

TINY = {**helpers.TINY, "embedding_size": 16}
BASE = {**helpers.TINY, "vocab_size": 2000, "hidden_size": 768, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 512, "embedding_size": 128}
ALL_HEADS = {"electra": {"with_discriminator": True}, "roformer_v2": {"with_mlm": True}}
BERT_HEADS = {"with_pool": True, "with_nsp": True, "with_mlm": True}
FLAGS = {  # the head flags compared, per family
    "bert-like": [{}, {"with_pool": True}, {"with_mlm": True}, {"with_nsp": True, "with_mlm": True}],
    "electra": [{}, {"with_discriminator": True}],
    "roformer_v2": [{}, {"with_mlm": True}],
}
# family -> (the family that writes its checkpoint, whether its embeddings are narrower than H); RoFormer-V2's
# Output-Mapping has no checkpoint name, so its MLM is compared where E = H, as in its published checkpoints
FAMILIES = {"albert": ("albert", True), "albert_unshared": ("albert", True), "nezha": ("nezha", False),
            "electra": ("electra", True), "roformer": ("roformer", True), "roformer_v2": ("roformer_v2", False)}
WRITERS = sorted({writer for writer, _ in FAMILIES.values()})


def _config(shape: str, writer: str) -> dict:
    config = dict(TINY if shape == "tiny" else BASE)
    if not FAMILIES[writer][1]:
        del config["embedding_size"]
    return config


def _cases() -> dict[str, dict]:
    """name -> family, checkpoint shape, head flags, input length."""
    cases = {}
    for family, (writer, _) in FAMILIES.items():
        flags = FLAGS.get(family, FLAGS["bert-like"])
        for i, flag in enumerate(flags):
            cases[f"{family}-tiny-{i}"] = {"family": family, "writer": writer, "shape": "tiny", "kwargs": flag,
                                           "length": 12}
        cases[f"{family}-base"] = {"family": family, "writer": writer, "shape": "base", "kwargs": flags[-1],
                                   "length": 12}
    for family in ("nezha", "roformer", "roformer_v2"):  # longer than the table P and NEZHA's clipping distance
        cases[f"{family}-long"] = {"family": family, "writer": family, "shape": "tiny", "kwargs": {}, "length": 150}
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """bert4keras writes each family's checkpoints (tiny and base-shaped), then predicts every case."""
    work = str(tmp_path_factory.mktemp("families"))
    tasks, folders = [], {}
    for writer in WRITERS:
        for shape in ("tiny", "base"):
            folder = os.path.join(work, f"{writer}-{shape}")
            os.makedirs(folder)
            with open(os.path.join(folder, "bert_config.json"), "w") as f:
                json.dump(_config(shape, writer), f)
            folders[writer, shape] = folder
            tasks.append({"kind": "family_checkpoint", "model": writer, "kwargs": ALL_HEADS.get(writer, BERT_HEADS),
                          "config": os.path.join(folder, "bert_config.json"),
                          "checkpoint": os.path.join(folder, "bert_model.ckpt"),
                          "seed": len(tasks), "std": 0.2 if shape == "tiny" else 0.02})
    cases = {}
    for name, case in CASES.items():
        folder = folders[case["writer"], case["shape"]]
        inputs = os.path.join(work, f"{name}.npz")
        np.savez(inputs, **helpers.random_batch(_config(case["shape"], case["writer"])["vocab_size"],
                                                length=case["length"], seed=len(tasks)))
        cases[name] = {**case, "folder": folder, "inputs": inputs, "index": len(tasks)}
        tasks.append(helpers.predict_task(folder, inputs, model=case["family"], **case["kwargs"]))
    return cases, helpers.run_oracle(tasks, work)


def _ours(case: dict, **extra):
    return helpers.build_from(case["folder"], case["family"], **case["kwargs"], **extra)


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_equal_bert4keras(oracle, name):
    cases, theirs = oracle
    case = cases[name]
    model = _ours(case)
    data = np.load(case["inputs"])
    outputs = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    outputs = outputs if isinstance(outputs, list) else [outputs]
    expected = [theirs[f"{case['index']}/{j}"] for j in range(3) if f"{case['index']}/{j}" in theirs]
    assert len(outputs) == len(expected)
    for mine, ref in zip(outputs, expected, strict=True):
        assert mine.shape == ref.shape
        np.testing.assert_allclose(mine, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", sorted(n for n in CASES if "-tiny-" in n))
def test_layer_names_equal_bert4keras(oracle, name):
    cases, theirs = oracle
    case = cases[name]
    names = [layer.name for layer in _ours(case).layers]
    assert names.count("Attention-Mask") == 1
    assert [n for n in names if n != "Attention-Mask"] == list(theirs[f"{case['index']}/layers"])


def test_albert_shares_one_block_and_saves_back_to_its_names(oracle, tmp_path):
    import tensorflow as tf

    from kerasbert import save_google_checkpoint

    case = oracle[0]["albert-tiny-3"]
    model = _ours(case)
    shared = model.get_layer("Transformer-FeedForward")
    assert len(shared._inbound_nodes) == TINY["num_hidden_layers"]
    prefix = save_google_checkpoint(model, str(tmp_path))
    original = tf.train.load_checkpoint(os.path.join(case["folder"], "bert_model.ckpt"))
    saved = tf.train.load_checkpoint(prefix)
    assert sorted(saved.get_variable_to_shape_map()) == sorted(original.get_variable_to_shape_map())
    for name in saved.get_variable_to_shape_map():
        np.testing.assert_array_equal(saved.get_tensor(name), original.get_tensor(name))


def test_a_checkpoint_of_another_family_says_which(oracle):
    case = oracle[0]["albert-tiny-0"]
    with pytest.raises(CheckpointError, match="are those of model='albert', not model='bert': build the model with "
                                              "model='albert'"):
        helpers.build_from(case["folder"], "bert")
    nezha = oracle[0]["nezha-tiny-0"]
    with pytest.raises(CheckpointError, match="model='nezha' or model='roformer'"):
        helpers.build_from(nezha["folder"], "bert")


def test_unknown_family_lists_those_that_exist():
    with pytest.raises(ModelError, match="model: expected one of bert, albert, albert_unshared, nezha, electra, "
                                         "roformer, roformer_v2, gpt, gpt2, gpt2_ml, t5, t5.1.1, mt5.1.1, roberta_en, "
                                         "xlm_roberta, distilbert, deberta_v3, modernbert, roberta, t5.1.0, found "
                                         "'gpt5'. did you mean model='gpt'"):
        build_transformer_model("tiny", model="gpt5")


def test_a_config_missing_the_family_key():
    with pytest.raises(ConfigError, match="embedding_size: expected the key every albert config gives, found no "
                                          "embedding_size"):
        build_transformer_model("tiny", model="albert")


def test_heads_the_family_does_not_have():
    with pytest.raises(ModelError, match="with_mlm: expected one of with_discriminator for model='electra'"):
        build_transformer_model("tiny", model="electra", with_mlm=True)
    with pytest.raises(ModelError, match="with_discriminator: expected one of with_pool, with_nsp, with_mlm"):
        build_transformer_model("tiny", with_discriminator=True)


def test_an_unshared_albert_is_not_written_into_one_group(tmp_path):
    from kerasbert import save_google_checkpoint

    model = build_transformer_model("tiny", model="albert_unshared", embedding_size=16, verbose=False)
    with pytest.raises(CheckpointError, match="Transformer-1-MultiHeadSelfAttention: expected a weight of its own "
                                              "under .*group_0.*the albert_unshared format holds one block"):
        save_google_checkpoint(model, str(tmp_path))
    assert not os.listdir(tmp_path)
