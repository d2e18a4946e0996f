"""``kerasbert train --adversarial``: each method trains, is recorded in the run and refused where it cannot apply;
the supervised VAT step is the labelled loss's gradient plus the KL term's at the perturbed embedding.

The methods' updates equal bert4keras's examples in tests/compat/test_compat_training.py (the same step class).
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import build_transformer_model, heads
from kerasbert.cli import main
from kerasbert.finetune.adversarial import AdversarialStep, enable, unit
from kerasbert.finetune.args import TrainArgs
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.runs import Run

import helpers

pytestmark = pytest.mark.slow  # trains

NO_DROPOUT = dict(helpers.TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # steps comparable


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_demo_data(str(tmp_path_factory.mktemp("demo-data")), n_train=48, n_dev=16, n_test=16)


def _train(data, out, task="cls", *extra):
    files = {"cls": ("cls_train", "cls_dev"), "ner": ("ner_train", "ner_dev")}[task]
    return main(["train", "--task", task, "--train", data[files[0]], "--dev", data[files[1]], "--vocab", data["vocab"],
                 "--out", out, "--epochs", "1", "--batch-size", "16", "--lr", "2e-3", "--maxlen", "32", "--quiet",
                 *extra])


@pytest.fixture(scope="module")
def plain(data, tmp_path_factory):
    """The same run without --adversarial: its weights."""
    out = str(tmp_path_factory.mktemp("plain") / "run")
    assert _train(data, out) == 0
    return Run(out).load_model().get_weights()


@pytest.mark.parametrize("method", ["fgm", "gp", "vat"])
def test_each_method_trains_and_is_recorded(data, plain, tmp_path, method):
    out = str(tmp_path / "run")
    assert _train(data, out, "cls", "--adversarial", method, "--adversarial-epsilon", "0.5") == 0
    args = json.load(open(os.path.join(out, "args.json")))
    assert (args["adversarial"], args["adversarial_epsilon"]) == (method, 0.5)
    assert TrainArgs.saved(args, out).adversarial == method  # a resumed run reads it back
    history = open(os.path.join(out, "history.csv")).read()
    assert "nan" not in history.lower()
    weights = Run(out).load_model().get_weights()
    assert max(float(np.abs(a - b).max()) for a, b in zip(weights, plain, strict=True)) > 1e-6  # it took effect


def test_ner_takes_fgm(data, tmp_path):
    out = str(tmp_path / "run")
    assert _train(data, out, "ner", "--adversarial", "fgm") == 0
    assert json.load(open(os.path.join(out, "args.json")))["adversarial"] == "fgm"


@pytest.mark.parametrize("extra, message", [
    (("--task", "ner", "--adversarial", "vat"), "--adversarial vat: expected --task cls, found --task ner. vat "
                                                "compares"),
    (("--adversarial", "fgm", "--adversarial-epsilon", "0"), "--adversarial-epsilon: expected a number > 0, found 0.0"),
    (("--adversarial", "gp", "--strategy", "mirrored"), "--adversarial gp: expected --strategy one or auto on one "
                                                        "device, found --strategy mirrored"),
    (("--adversarial", "pgd"), "argument --adversarial: invalid choice: 'pgd'"),
])
def test_refused_in_one_line(data, tmp_path, capsys, extra, message):
    out = str(tmp_path / "run")
    task = extra[1] if extra[0] == "--task" else "cls"
    rest = extra[2:] if extra[0] == "--task" else extra
    assert _train(data, out, task, *rest) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not os.path.exists(out)


def test_generative_tasks_are_refused():
    args = TrainArgs(task="seq2seq", train="", out="", adversarial="fgm")
    with pytest.raises(Exception, match="its token embedding is also its output layer"):
        args._check_adversarial()


def test_supervised_vat_step_by_hand():
    """One step with SGD(1): the weights move by the gradient of CE at E plus that of KL(p ‖ f(E + r)), r as the
    module says (its first direction given)."""
    keras.utils.set_random_seed(1)
    model = heads.cls(build_transformer_model(NO_DROPOUT, verbose=False), 3)
    ids = np.array([[2, 7, 9, 7, 3, 0], [2, 11, 12, 3, 0, 0]], "int32")
    x, y = [tf.constant(ids), tf.zeros_like(ids)], tf.constant([2, 0])
    direction = tf.random.stateless_normal(tuple(model.get_layer("Embedding-Token").embeddings.shape), (4, 2))
    model.compile(keras.optimizers.SGD(1.0), "sparse_categorical_crossentropy")
    start = [w.numpy() for w in model.trainable_weights]
    embeddings = model.get_layer("Embedding-Token").embeddings

    p = model(x, training=False)
    embeddings.assign_add(10.0 * unit(direction))
    with tf.GradientTape() as tape:
        kl = tf.reduce_mean(keras.losses.kl_divergence(p, model(x, training=False)))
    g = tf.convert_to_tensor(tape.gradient(kl, embeddings))
    embeddings.assign_sub(10.0 * unit(direction))
    r = 0.5 * unit(g)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
    supervised = tape.gradient(loss, model.trainable_weights)
    embeddings.assign_add(r)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.kl_divergence(p, model(x, training=True)))
    virtual = tape.gradient(loss, model.trainable_weights)
    embeddings.assign_sub(r)
    expected = [w - tf.convert_to_tensor(a).numpy() - tf.convert_to_tensor(b).numpy()
                for w, a, b in zip(start, supervised, virtual, strict=True)]

    enable(model, "vat", 0.5, draw=lambda shape: direction)
    model.train_on_batch(x, y)
    for weight, value in zip(model.trainable_weights, expected, strict=True):
        np.testing.assert_allclose(weight.numpy(), value, atol=1e-5, err_msg=weight.path)


def test_default_vat_draw_follows_seed_and_step():
    """The default direction is drawn from (seed, step): a resumed run draws what an uninterrupted one does."""
    model = heads.cls(build_transformer_model("tiny", verbose=False), 2)
    model.compile(keras.optimizers.Adam(), "sparse_categorical_crossentropy")
    one, same, other = (AdversarialStep(model, "vat", 1.0, seed=seed) for seed in (3, 3, 4))
    first = one._normal((4, 2))
    np.testing.assert_array_equal(first, same._normal((4, 2)))
    assert not np.array_equal(first, other._normal((4, 2)))
    model.optimizer.iterations.assign(5)
    assert not np.array_equal(first, one._normal((4, 2)))
