"""bert4keras's GPT families (gpt, gpt2, gpt2_ml): layer names, outputs, checkpoints both ways, keep_tokens,
decoder ids and training steps equal to bert4keras 0.11.5's, from one oracle subprocess; and the inputs refused."""

from __future__ import annotations

import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
import test_step_parity as steps

from kerasbert import build_transformer_model, generate, heads, load_google_checkpoint, save_google_checkpoint
from kerasbert.errors import CheckpointError, ModelError
from kerasbert.modeling import architecture
from kerasbert.modeling.gpt import GPT

import helpers

FAMILIES = ("gpt", "gpt2", "gpt2_ml")
CONFIG = helpers.TINY  # dropout 0.1: bert4keras builds its Dropout layers only where the rate is not 0
TRAIN_CONFIG = dict(CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # the training steps
KEEP = [0, 5, 9, 3, 17, 100, 64, 2, 31, 77]  # keep_tokens: vocabulary rows in a new order
PROMPTS = [[5, 17, 30, 8], [9, 44], [61, 12, 7, 99, 23, 40]]  # ragged: decoded in one batch here
END, MAXLEN, MINLEN, TOPKS = 3, 10, 2, (1, 3)
DECODED = FAMILIES  # gpt's decoder adds Embedding-Segment's row 0 at each step, as bert4keras feeds segment 0
TRAINED = "gpt2"


def _folder(work: str, name: str) -> str:
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    for name, config in (("bert_config.json", CONFIG), ("train_config.json", TRAIN_CONFIG)):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(config, f)
    return folder


def _ours(folder: str, family: str, **kwargs):
    return helpers.build_from(folder, family, **kwargs)


def _inputs(model, token_ids):
    return [token_ids, np.zeros_like(token_ids)][:len(model.inputs)]


def _random_weights(model, seed: int) -> None:
    """Every weight normal(0, 0.2), norm gammas near 1."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.2, weight.shape) + (weight.name == "gamma"))


def _batches(work: str) -> tuple[str, str]:
    """A ragged batch of the full vocabulary's ids, and one of ids below len(KEEP) for the keep_tokens models."""
    token_ids = helpers.random_batch(CONFIG["vocab_size"], batch=4, length=12, seed=3)["token_ids"]
    paths = os.path.join(work, "batch.npz"), os.path.join(work, "keep_batch.npz")
    np.savez(paths[0], token_ids=token_ids)
    np.savez(paths[1], token_ids=np.where(token_ids > 0, token_ids % (len(KEEP) - 1) + 1, 0))
    return paths


def _tasks(work: str) -> tuple[list, dict]:
    """The oracle's tasks and where each family's results sit among them."""
    batch, keep_batch = _batches(work)
    tasks, where = [], {}

    def add(key, task):
        where[key] = len(tasks)
        tasks.append(task)

    for seed, family in enumerate(FAMILIES):
        folder, saved = _folder(work, family), _folder(work, f"{family}-kerasbert")
        source = {"config": os.path.join(folder, "bert_config.json"), "model": family,
                  "checkpoint": os.path.join(folder, "bert_model.ckpt")}
        add((family, "checkpoint"), {"kind": "checkpoint", **source, "seed": seed, "std": 0.2})
        add((family, "predict"), {"kind": "predict", **source, "inputs": batch})
        add((family, "keep"), {"kind": "predict", **source, "inputs": keep_batch, "kwargs": {"keep_tokens": KEEP}})
        model = build_transformer_model(config=CONFIG, model=family, verbose=False)
        _random_weights(model, 10 + seed)
        save_google_checkpoint(model, saved)  # bert4keras loads kerasbert's checkpoint
        outputs = model.predict(_inputs(model, np.load(batch)["token_ids"]), verbose=0)
        np.save(os.path.join(saved, "outputs.npy"), outputs)
        add((family, "saved"), {**source, "kind": "predict", "checkpoint": os.path.join(saved, "bert_model.ckpt"),
                                "inputs": batch})
        if family in DECODED:
            add((family, "decode"), {"kind": "decode", **source, "prompts": PROMPTS, "topks": TOPKS, "end_id": END,
                                     "maxlen": MAXLEN, "minlen": MINLEN})
    data = steps.batches(7)
    train = os.path.join(work, "train.npz")
    np.savez(train, token_ids=data["token_ids"], labels=data["lm_labels"])
    add((TRAINED, "train"), {"kind": "train", "config": os.path.join(work, TRAINED, "train_config.json"),
                             "checkpoint": os.path.join(work, TRAINED, "bert_model.ckpt"), "model": TRAINED,
                             "lr": steps.LR, "batch_size": steps.BATCH, "inputs": train})
    return tasks, where


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """(work folder, where each result sits, bert4keras's results), from one bert4keras subprocess."""
    work = str(tmp_path_factory.mktemp("gpt"))
    tasks, where = _tasks(work)
    return work, where, helpers.run_bert4keras("oracle_gpt.py", {"tasks": tasks}, work)


def _result(oracle, family: str, key: str, name: str):
    _, where, theirs = oracle
    return theirs[f"{where[family, key]}/{name}"]


def _batch(oracle, name: str = "batch") -> np.ndarray:
    return np.load(os.path.join(oracle[0], f"{name}.npz"))["token_ids"]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_layers_and_outputs_equal_bert4keras(oracle, family):
    model = _ours(os.path.join(oracle[0], family), family)
    assert [layer.name for layer in model.layers] == _result(oracle, family, "predict", "layers").tolist()
    assert model.application == "lm" and type(architecture.of(model)) is GPT
    token_ids = _batch(oracle)
    assert (token_ids == 0).any(axis=1).sum() == 3  # a ragged batch: three rows padded
    ours, theirs = model.predict(_inputs(model, token_ids), verbose=0), _result(oracle, family, "predict", "output")
    assert ours.shape == theirs.shape == (4, 12, CONFIG["vocab_size"])
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_keep_tokens_equal_bert4keras(oracle, family):
    model = _ours(os.path.join(oracle[0], family), family, keep_tokens=KEEP)
    rows = tf.train.load_checkpoint(os.path.join(oracle[0], family, "bert_model.ckpt")).get_tensor(
        "newslm/embeddings/word_embed" if family == "gpt2_ml" else "gpt/embeddings/word_embeddings")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.get_layer("Embedding-Token").embeddings),
                                  rows[KEEP])
    ours = model.predict(_inputs(model, _batch(oracle, "keep_batch")), verbose=0)
    theirs = _result(oracle, family, "keep", "output")
    assert ours.shape == theirs.shape == (4, 12, len(KEEP))
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoints_both_ways(oracle, family, tmp_path):
    """bert4keras's checkpoint, saved back by kerasbert, holds the same names and values; bert4keras loads
    kerasbert's checkpoint with kerasbert's outputs."""
    model = _ours(os.path.join(oracle[0], family), family)
    original = tf.train.load_checkpoint(os.path.join(oracle[0], family, "bert_model.ckpt"))
    saved = tf.train.load_checkpoint(save_google_checkpoint(model, tmp_path))
    names = sorted(original.get_variable_to_shape_map())
    assert sorted(saved.get_variable_to_shape_map()) == names == sorted(_result(oracle, family, "checkpoint", "names"))
    for name in names:
        np.testing.assert_array_equal(saved.get_tensor(name), original.get_tensor(name), err_msg=name)
    ours = np.load(os.path.join(oracle[0], f"{family}-kerasbert", "outputs.npy"))
    np.testing.assert_allclose(ours, _result(oracle, family, "saved", "output"), atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("family", DECODED)
def test_greedy_and_beam_ids_equal_bert4keras(oracle, family):
    """The prompts decoded in one ragged batch give the ids bert4keras's decoder finds prompt by prompt."""
    model = _ours(os.path.join(oracle[0], family), family)
    theirs = json.loads(str(_result(oracle, family, "decode", "json")))
    for topk, found in zip(TOPKS, theirs, strict=True):
        method = {"method": "greedy"} if topk == 1 else {"method": "beam", "beams": topk}
        ours = generate(model, PROMPTS, **method, end_ids=END, max_length=MAXLEN, min_length=MINLEN)
        assert [one.ids[0] for one in ours] == found, topk
    lengths = {len(ids) for found in theirs for ids in found}
    assert len(lengths) > 1 or END not in {ids[-1] for found in theirs for ids in found}, lengths


@pytest.mark.slow
def test_twenty_adam_steps_equal_bert4keras(oracle, tmp_path):
    """GPT-2 trained on next-token labels, as test_step_parity trains the encoder families."""
    folder = os.path.join(oracle[0], TRAINED)
    model = build_transformer_model(os.path.join(folder, "train_config.json"), os.path.join(folder, "bert_model.ckpt"),
                                    TRAINED, verbose=False)
    data = steps.batches(7)
    model.compile(keras.optimizers.Adam(steps.LR), **heads.loss_and_metrics(model))
    losses = []
    for start in range(0, steps.STEPS * steps.BATCH, steps.BATCH):
        rows = slice(start, start + steps.BATCH)
        logs = model.train_on_batch(data["token_ids"][rows], data["lm_labels"][rows], return_dict=True)
        losses.append(logs["loss"])
    np.testing.assert_allclose(losses, _result(oracle, TRAINED, "train", "losses"), rtol=2e-6, atol=1e-5)
    assert len(set(losses)) == steps.STEPS
    ours = tf.train.load_checkpoint(save_google_checkpoint(model, tmp_path))
    initial = tf.train.load_checkpoint(os.path.join(oracle[0], TRAINED, "bert_model.ckpt"))
    names = sorted(ours.get_variable_to_shape_map())
    assert len(names) == 4 + 16 * CONFIG["num_hidden_layers"]
    for name in names:
        diff = np.abs(ours.get_tensor(name) - _result(oracle, TRAINED, "train", name))
        bound = 2 * steps.LR * steps.STEPS if name.endswith("/self/key/bias") else steps.LR / 10
        assert diff.max() <= bound, f"{name}: max |kerasbert - bert4keras| {diff.max():.3g} > {bound:.3g}"
    top = "gpt/transformer/layer_1/output/dense/kernel"
    assert np.abs(ours.get_tensor(top) - initial.get_tensor(top)).max() > 50 * steps.LR / 10


# ------------------------------------------------------------------------------------------------ bad inputs
def test_unilm_is_refused_and_lm_is_the_default():
    with pytest.raises(ModelError, match=re.escape("""application: expected "lm" (or "encoder", the same) for """
                                                   """model='gpt2', found 'unilm'. gpt2 is a causal language model""")):
        build_transformer_model("tiny", model="gpt2", application="unilm", verbose=False)
    assert build_transformer_model("tiny", model="gpt", application="lm", verbose=False).application == "lm"


def test_pretraining_flags_are_refused():
    with pytest.raises(ModelError, match=re.escape("with_mlm: expected no with_* flag for model='gpt2', found "
                                                   "with_mlm=True")):
        build_transformer_model("tiny", model="gpt2", with_mlm=True, verbose=False)
    with pytest.raises(ModelError, match=re.escape("with_pool: expected no with_* flag for model='gpt'")):
        build_transformer_model("tiny", model="gpt", with_pool=True, verbose=False)


def test_a_gpt_checkpoint_given_to_bert_names_the_family(tmp_path):
    prefix = save_google_checkpoint(build_transformer_model("tiny", model="gpt2", verbose=False), tmp_path)
    with pytest.raises(CheckpointError, match="its names are those of model='gpt2', not model='bert'"):
        load_google_checkpoint(build_transformer_model("tiny", verbose=False), prefix, verbose=False)
    with pytest.raises(CheckpointError, match="its names are those of model='gpt2', not model='gpt2_ml'"):
        load_google_checkpoint(build_transformer_model("tiny", model="gpt2_ml", verbose=False), prefix, verbose=False)


def test_token_ids_longer_than_the_positions_are_refused():
    model = build_transformer_model("tiny", model="gpt2", verbose=False)
    limit = model.bert_config.max_position_embeddings
    with pytest.raises(ModelError, match=re.escape(f"Input-Token: expected at most {limit} tokens (max_position")):
        model.predict(np.ones((1, limit + 1), "int32"), verbose=0)
    with pytest.raises(ModelError, match=f"sequence_length: expected 1 to {limit}"):
        build_transformer_model("tiny", model="gpt", sequence_length=limit + 1, verbose=False)
    with pytest.raises(ModelError, match=f"at most {limit - 8} tokens"):
        generate(model, [[5] * (limit - 4)], max_length=8)


def test_loading_logs_each_variable(tmp_path, caplog):
    prefix = save_google_checkpoint(build_transformer_model("tiny", model="gpt2_ml", verbose=False), tmp_path)
    with caplog.at_level("INFO", logger="kerasbert"):
        report = load_google_checkpoint(build_transformer_model("tiny", model="gpt2_ml", verbose=False), prefix)
    assert report.new == [] and report.unused == []
    assert "name = newslm/layer01/LayerNorm_mlp_ln1/gamma, shape = (32,), *INIT_FROM_CKPT*" in caplog.text


def test_an_embedding_size_other_than_hidden_is_refused():
    with pytest.raises(ModelError, match=re.escape("embedding_size: expected the hidden size 32 for model='gpt2', "
                                                   "found 16. its output is tied to Embedding-Token")):
        build_transformer_model("tiny", model="gpt2", embedding_size=16, verbose=False)
