"""kerasbert.compat.training's steps and kerasbert.explain equal bert4keras's examples on the same model.

bert4keras's side (tests/oracle_adversarial.py) runs the examples' own ``adversarial_training``,
``loss_with_gradient_penalty``, ``virtual_adversarial_training`` and ``Gradient`` layer in tf-keras's graph mode,
where their ``K.gradients`` and ``train_function`` rewrites work. Both sides start from one Google checkpoint
(dropout 0), the same ``CLS-Dense`` weights, bert4keras's ``Adam`` (kerasbert.compat.optimizers' here), the same
batches and, for VAT, NumPy's generator seeded the same way before the first step (both draw the first direction
with ``np.random.randn``).

Every weight is compared after one step and after three, within 1e-5, except the attention's key bias: its gradient
is zero in exact arithmetic (one vector added to every key moves every score of a query alike, which the softmax
ignores), so each side's Adam follows the sign of its own rounding noise; it is held to ``2 · lr · steps``.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import oracle_examples
import pytest
import tensorflow as tf

from kerasbert import save_google_checkpoint
from kerasbert.compat import training
from kerasbert.compat.backend import K
from kerasbert.compat.models import build_transformer_model
from kerasbert.compat.optimizers import Adam
from kerasbert.errors import ConfigError, ModelError
from kerasbert.finetune.explain import explain, integrated_gradients, scores

import helpers

BATCH, LENGTH, STEPS, CLASSES, LR = 4, 10, 3, 3, 1e-3
CASES = {"fgm": {"method": "fgm", "epsilon": 0.5}, "gp": {"method": "gp", "epsilon": 1.0},
         "vat": {"method": "vat", "epsilon": 1.0}}


def sparse_categorical_crossentropy(y_true, y_pred):
    """task_iflytek_gradient_penalty.py's loss, whose gradient has a gradient (Keras's fused one has none)."""
    y_true = K.reshape(y_true, K.shape(y_pred)[:-1])
    y_true = K.cast(y_true, "int32")
    y_true = K.one_hot(y_true, K.shape(y_pred)[-1])
    return K.categorical_crossentropy(y_true, y_pred)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """The files both sides read and bert4keras's results."""
    work = str(tmp_path_factory.mktemp("adversarial"))
    paths = oracle_examples.write_bert(work)
    rng = np.random.default_rng(3)
    np.savez(os.path.join(work, "head.npz"), kernel=rng.normal(0, 0.3, (32, CLASSES)).astype("float32"),
             bias=rng.normal(0, 0.1, CLASSES).astype("float32"))
    rows = [helpers.random_batch(oracle_examples.CFG["vocab_size"], BATCH, LENGTH, seed=7 + i) for i in range(STEPS)]
    data = {key: np.concatenate([row[key] for row in rows]) for key in ("token_ids", "segment_ids")}
    data["labels"] = rng.integers(0, CLASSES, (len(data["token_ids"]), 1))
    np.savez(os.path.join(work, "data.npz"), **data)
    cases = [{"name": name, **case, "num_classes": CLASSES, "lr": LR, "head": os.path.join(work, "head.npz"),
              "data": os.path.join(work, "data.npz"), "batch_size": BATCH, "steps": STEPS, "seed": 11}
             for name, case in CASES.items()]
    text = data["token_ids"][1]
    tokens = text[: int((text != 0).sum())].tolist()
    job = {"config": paths[0], "checkpoint": paths[1], "cases": cases,
           "explain": {"num_classes": CLASSES, "head": os.path.join(work, "head.npz"), "token_ids": tokens,
                       "segment_ids": [0] * len(tokens), "n": 20}}
    return {"work": work, "paths": paths, "data": data, "cases": {case["name"]: case for case in cases},
            "explain": job["explain"], "theirs": helpers.run_bert4keras("oracle_adversarial.py", job, work)}


def classifier(oracle):
    """The examples' model on kerasbert.compat: BERT, ``x[:, 0]``, a softmax Dense with the oracle's weights."""
    bert = build_transformer_model(oracle["paths"][0], oracle["paths"][1])
    output = keras.layers.Lambda(lambda x: x[:, 0])(bert.output)
    output = keras.layers.Dense(CLASSES, activation="softmax", name="CLS-Dense")(output)
    model = keras.Model(bert.inputs, output)
    head = np.load(os.path.join(oracle["work"], "head.npz"))
    model.get_layer("CLS-Dense").set_weights([head["kernel"], head["bias"]])
    return bert, model


def weights(bert, model, folder) -> dict[str, np.ndarray]:
    """Every weight under its Google name, the Dense's as CLS-Dense/...."""
    reader = tf.train.load_checkpoint(save_google_checkpoint(bert, os.path.join(folder, "bert_model.ckpt")))
    out = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    dense = model.get_layer("CLS-Dense")
    out.update({"CLS-Dense/kernel": dense.kernel.numpy(), "CLS-Dense/bias": dense.bias.numpy()})
    return out


def train(oracle, name, tmp_path):
    """kerasbert's side of one case: its losses and weights after step 1 and the last step."""
    keras.utils.clear_session()
    bert, model = classifier(oracle)
    case, data = oracle["cases"][name], oracle["data"]
    loss = {"fgm": "sparse_categorical_crossentropy", "gp": sparse_categorical_crossentropy, "vat": "kld"}[name]
    model.compile(loss=loss, optimizer=Adam(LR))
    {"fgm": training.adversarial_training, "gp": training.gradient_penalty,
     "vat": training.virtual_adversarial_training}[name](model, "Embedding-Token", case["epsilon"])
    np.random.seed(case["seed"])
    losses, snapshots = [], {}
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        labels = data["labels"][rows] if name != "vat" else keras.utils.to_categorical(np.zeros(BATCH), CLASSES)
        losses.append(float(model.train_on_batch([data["token_ids"][rows], data["segment_ids"][rows]], labels)))
        if step + 1 in (1, STEPS):
            snapshots[step + 1] = weights(bert, model, str(tmp_path / str(step)))
    return np.array(losses), snapshots


@pytest.mark.parametrize("name", list(CASES))
def test_steps_equal_bert4keras(oracle, name, tmp_path):
    losses, snapshots = train(oracle, name, tmp_path)
    theirs = oracle["theirs"]
    np.testing.assert_allclose(losses, theirs[f"{name}/losses"], rtol=1e-5, atol=1e-5)
    initial = tf.train.load_checkpoint(oracle["paths"][1])
    for step, ours in snapshots.items():
        prefix = f"{name}/{step}/"
        names = {key[len(prefix):] for key in theirs if key.startswith(prefix)}
        assert names == set(ours)
        for variable in sorted(names):
            bound = 2 * LR * step if variable.endswith("/self/key/bias") else 1e-5
            np.testing.assert_allclose(ours[variable], theirs[prefix + variable], rtol=0, atol=bound,
                                       err_msg=f"{name} after {step} step(s): {variable}")
        moved = ours["bert/embeddings/word_embeddings"] - initial.get_tensor("bert/embeddings/word_embeddings")
        assert np.abs(moved).max() > LR / 2  # the steps trained the embedding


def test_the_perturbation_changes_the_update(oracle, tmp_path):
    """FGM's weights are not plain Adam's: the step trained at the perturbed embedding."""
    _, adversarial = train(oracle, "fgm", tmp_path)
    keras.utils.clear_session()
    bert, model = classifier(oracle)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=Adam(LR))
    data = oracle["data"]
    model.train_on_batch([data["token_ids"][:BATCH], data["segment_ids"][:BATCH]], data["labels"][:BATCH])
    plain = weights(bert, model, str(tmp_path / "plain"))
    assert np.abs(plain["CLS-Dense/kernel"] - adversarial[1]["CLS-Dense/kernel"]).max() > 1e-6


def test_integrated_gradients_equal_bert4keras(oracle):
    theirs, task = oracle["theirs"], oracle["explain"]
    keras.utils.clear_session()
    _, model = classifier(oracle)
    found = integrated_gradients(model, task["token_ids"], task["segment_ids"], steps=task["n"])
    assert found.target == int(theirs["explain/label"])
    np.testing.assert_allclose(found.probabilities, theirs["explain/probabilities"], atol=1e-6)
    np.testing.assert_allclose(found.gradients, theirs["explain/gradients"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(scores(found.gradients), theirs["explain/norm"], atol=1e-5)
    np.testing.assert_allclose(scores(found.gradients, "max"), theirs["explain/max"], atol=1e-5)


def test_bad_uses_are_named_errors(oracle):
    keras.utils.clear_session()
    bert, model = classifier(oracle)
    with pytest.raises(ModelError, match="compiled model"):
        training.adversarial_training(model, "Embedding-Token", 0.5)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=Adam(LR))
    with pytest.raises(ModelError, match="'Embedding-Tokens'"):
        training.adversarial_training(model, "Embedding-Tokens", 0.5)
    with pytest.raises(ConfigError, match="epsilon"):
        training.gradient_penalty(model, "Embedding-Token", -1)
    with pytest.raises(ModelError, match="a classifier"):
        integrated_gradients(bert, [2, 7, 3])
    with pytest.raises(ConfigError, match="tokenizer"):
        explain(model, "text")
