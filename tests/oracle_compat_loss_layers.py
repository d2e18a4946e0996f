"""Runs bert4keras 0.11.5's ``Loss`` and ``MaximumEntropyMarkovModel`` layers on tf-keras as the reference oracle.
Never imported by the tests.

Usage: python oracle_compat_loss_layers.py JOB.json, with TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 set before TensorFlow
is imported (`helpers.run_bert4keras` sets them).

JOB.json: {"inputs": "in.npz", "out": "out.npz", "steps": n, "learning_rate": lr, "cases": [{"name", "layer",
"kwargs"}, ...]}. in.npz holds x [B, S, H] (padding steps all zero), labels [B, S] and, per case,
"<name>/dense/<i>" and "<name>/head/<i>" for the Dense layer's and the MEMM's weights. The model is
Input -> Masking(0) -> Dense -> head, trained with Adam by ``train_on_batch`` for ``steps`` steps.

out.npz holds, per case, "<name>/loss" (one value a step) and "<name>/dense/<i>", "<name>/head/<i>" (the weights
after training); for the MEMM also "<name>/accuracy" (a step each) and "<name>/initial/<method>" (its
``sparse_loss``, ``dense_loss``, ``sparse_accuracy`` and ``dense_accuracy`` on the untrained model's outputs).
"""

import json
import sys

import numpy as np


def cross_entropy_layer():
    """The ``Loss`` subclass a bert4keras script writes: token cross-entropy over the Keras mask of y_pred."""
    from bert4keras.backend import K
    from bert4keras.layers import Loss

    class CrossEntropy(Loss):
        def compute_loss(self, inputs, mask=None):
            y_true, y_pred = inputs
            y_mask = K.cast(mask[1], K.floatx())
            loss = K.sparse_categorical_crossentropy(K.cast(y_true, "int32"), y_pred, from_logits=True)
            return K.sum(loss * y_mask) / K.sum(y_mask)

    return CrossEntropy(1)


def build(case, data):
    """The case's model (Masking -> Dense -> head), its head layer and the inputs train_on_batch takes."""
    from bert4keras.backend import keras
    from bert4keras.layers import MaximumEntropyMarkovModel

    x, labels = data["x"], data["labels"]
    inputs = keras.layers.Input(shape=x.shape[1:])
    dense = keras.layers.Dense(labels.max() + 1)
    logits = dense(keras.layers.Masking(0.0)(inputs))
    if case["layer"] == "Loss":
        y_in = keras.layers.Input(shape=(None,))
        head = cross_entropy_layer()
        model = keras.models.Model([inputs, y_in], head([y_in, logits]))
        model.compile(optimizer=keras.optimizers.Adam(case["learning_rate"]))
        batch = ([x, labels], None)
    else:
        head = MaximumEntropyMarkovModel(**case["kwargs"])
        model = keras.models.Model(inputs, head(logits))
        model.compile(optimizer=keras.optimizers.Adam(case["learning_rate"]), loss=head.sparse_loss,
                      metrics=[head.sparse_accuracy])
        batch = (x, labels)
    name = case["name"]
    for layer, key in ((dense, "dense"), (head, "head")):
        layer.set_weights([data[f"{name}/{key}/{i}"] for i in range(len(layer.weights))])
    return model, dense, head, batch


def initial_values(head, model, data):
    import tensorflow as tf

    y_pred = tf.constant(model.predict(data["x"], verbose=0))
    labels = tf.constant(data["labels"])
    one_hot = tf.one_hot(labels, y_pred.shape[-1])
    return {"initial/sparse_loss": head.sparse_loss(labels, y_pred),
            "initial/dense_loss": head.dense_loss(one_hot, y_pred),
            "initial/sparse_accuracy": head.sparse_accuracy(labels, y_pred),
            "initial/dense_accuracy": head.dense_accuracy(one_hot, y_pred)}


def run_case(case, data, steps):
    model, dense, head, batch = build(case, data)
    out = {} if case["layer"] == "Loss" else {k: np.asarray(v) for k, v in initial_values(head, model, data).items()}
    logs = [model.train_on_batch(*batch, return_dict=True) for _ in range(steps)]
    out["loss"] = np.array([log["loss"] for log in logs])
    if case["layer"] != "Loss":
        out["accuracy"] = np.array([log["sparse_accuracy"] for log in logs])
    for layer, key in ((dense, "dense"), (head, "head")):
        out.update({f"{key}/{i}": w for i, w in enumerate(layer.get_weights())})
    return out


def main(path):
    with open(path) as f:
        job = json.load(f)
    data = dict(np.load(job["inputs"]))
    out = {}
    for case in job["cases"]:
        result = run_case({**case, "learning_rate": job["learning_rate"]}, data, job["steps"])
        out.update({f"{case['name']}/{key}": value for key, value in result.items()})
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
