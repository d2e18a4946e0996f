"""A whole T5 trained as ``kerasbert train --task seq2seq`` trains it equals bert4keras's T5 trained as its mT5 title
example trains it: 20 steps from one checkpoint on the same batches, the same losses and the same weights after.

kerasbert's side is `T5Seq2SeqTask`'s feed (decoder ids and their next ids), loss and metrics, compiled by
`kerasbert.finetune.training.compile_model` with the CLI's optimizer (`LayerwiseAdamW` at a constant rate, no
weight decay: plain Adam), or with Keras's own Adam; bert4keras's side is the example's ``CrossEntropy(Loss)``
with tf.keras's plain Adam. The relative position tables and the shared token embedding are read many times a
batch; their gradients must be summed per row before Adam squares them, as tf.keras sums them, whichever optimizer
kerasbert's side has. The tolerances are test_step_parity's: T5 has no
biases, so no key bias is held apart.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import test_step_parity as steps

from kerasbert import build_transformer_model, layer_names, save_google_checkpoint
from kerasbert.finetune.tasks import task_of
from kerasbert.finetune.training import TrainArgs, compile_model

import helpers

pytestmark = pytest.mark.slow  # trains, and bert4keras trains in a subprocess

FAMILIES = {"t5": "relu", "t5.1.1": ["gelu", "linear"], "mt5.1.1": ["gelu", "linear"]}  # t5: tied output
CONFIG = {"vocab_size": 40, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
          "attention_head_size": 5, "intermediate_size": 20, "hidden_dropout_prob": 0.0, "initializer_range": 0.02,
          "relative_attention_num_buckets": 32}
SOURCE_LENGTH, TARGET_LENGTH = 30, 9  # sources beyond the 8 exact buckets: the logarithmic ones train too


def _batches(seed: int) -> dict[str, np.ndarray]:
    """``STEPS`` batches of ragged sources, and decoder ids ``[0] + target`` (targets ragged, ending with
    ``</s>``, id 1), padded with 0."""
    rng = np.random.default_rng(seed)
    rows = steps.STEPS * steps.BATCH
    sources = np.zeros((rows, SOURCE_LENGTH), "int32")
    decoder = np.zeros((rows, TARGET_LENGTH + 1), "int32")
    for row in range(rows):
        source, target = rng.integers(2, SOURCE_LENGTH + 1), rng.integers(1, TARGET_LENGTH)
        sources[row, :source] = rng.integers(2, CONFIG["vocab_size"], source)
        decoder[row, 1:target + 1] = rng.integers(2, CONFIG["vocab_size"], target)
        decoder[row, target + 1] = 1
    return {"encoder_ids": sources, "decoder_ids": decoder}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(work folder, the batches, bert4keras's results per family), from one bert4keras run that writes each
    family's checkpoint and trains on it."""
    work = str(tmp_path_factory.mktemp("t5_training"))
    data = _batches(seed=11)
    inputs = os.path.join(work, "batches.npz")
    np.savez(inputs, **data)
    tasks, index = [], {}
    for family, activation in FAMILIES.items():
        folder = os.path.join(work, family)
        os.makedirs(folder)
        source = {"config": os.path.join(folder, "bert_config.json"), "model": family,
                  "checkpoint": os.path.join(folder, "model.ckpt")}
        with open(source["config"], "w") as f:
            json.dump({**CONFIG, "hidden_act": activation}, f)
        index[family] = len(tasks) + 1
        tasks += [{"kind": "checkpoint", **source, "seed": 3, "std": 0.3},
                  {"kind": "train", **source, "lr": steps.LR, "batch_size": steps.BATCH, "inputs": inputs}]
    out = helpers.run_bert4keras("oracle_t5.py", {"tasks": tasks}, work, name="t5_training")
    return work, data, {family: {key.partition("/")[2]: value for key, value in out.items()
                                 if key.startswith(f"{task}/")} for family, task in index.items()}


def train_kerasbert(folder: str, family: str, data: dict, optimizer: str) -> tuple:
    """kerasbert's T5 from ``folder`` after ``STEPS`` steps of the seq2seq task's training, compiled as the CLI
    compiles it (``optimizer="cli"``) or with Keras's plain Adam (``"adam"``): (model, losses)."""
    args = TrainArgs(task="seq2seq", train="-", out="-", model=family, lr=steps.LR, warmup=0.0, schedule="constant",
                     weight_decay=0.0, batch_size=steps.BATCH, jit_compile=False)
    task = task_of(args)
    model = task.head(build_transformer_model(os.path.join(folder, "bert_config.json"),
                                              os.path.join(folder, "model.ckpt"), family, verbose=False), None)
    if optimizer == "cli":
        compile_model(model, task, args, total_steps=steps.STEPS, num_layers=CONFIG["num_hidden_layers"])
    else:
        model.compile(keras.optimizers.Adam(steps.LR), **task.compile_arguments(model))
    sources = {layer_names.TOKEN_INPUT: data["encoder_ids"]}
    feed = task.batches(tf.data.Dataset.from_tensor_slices((sources, data["decoder_ids"])).batch(steps.BATCH),
                        None, seed=0, epoch=0)
    losses = [model.train_on_batch(inputs, labels, return_dict=True)["loss"] for inputs, labels in feed]
    return model, np.array(losses)


@pytest.mark.parametrize("family, optimizer", [(family, "cli") for family in FAMILIES] + [("t5.1.1", "adam")])
def test_twenty_steps_equal_bert4keras(trained, family, optimizer, tmp_path):
    """The CLI's optimizer, and Keras's plain Adam, which squares an embedding's gradient as the layer gives it."""
    work, data, theirs = trained
    theirs = theirs[family]
    model, losses = train_kerasbert(os.path.join(work, family), family, data, optimizer)
    assert len(losses) == steps.STEPS and len(set(losses.tolist())) == steps.STEPS  # each step saw a new batch
    np.testing.assert_allclose(losses, theirs["losses"], rtol=2e-6, atol=1e-5)

    ours = tf.train.load_checkpoint(save_google_checkpoint(model, str(tmp_path)))
    initial = tf.train.load_checkpoint(os.path.join(work, family, "model.ckpt"))
    names = sorted(ours.get_variable_to_shape_map())
    assert names == sorted(key for key in theirs if key != "losses")
    biases = [name for name in names if "relative_attention_bias" in name]
    assert len(biases) == 2 and "shared/embedding" in names  # the tables read many times a batch are compared
    for name in names:
        diff = np.abs(ours.get_tensor(name) - theirs[name])
        assert diff.max() <= steps.LR / 10, f"{name}: max |kerasbert - bert4keras| {diff.max():.3g}"
        moved = np.abs(ours.get_tensor(name) - initial.get_tensor(name)).max()
        assert moved > 50 * diff.max(), f"{name}: moved {moved:.3g} only"
