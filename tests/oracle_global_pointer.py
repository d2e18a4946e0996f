"""Runs bert4keras 0.11.5's GlobalPointer layers on tf-keras as the reference oracle. Never imported by the tests.

Usage: python oracle_global_pointer.py JOB.json, with TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 set before
TensorFlow is imported (`test_global_pointer.run_gp_oracle` sets them).

JOB.json: {"inputs": "in.npz", "out": "out.npz", "cases": [{"name", "layer", "RoPE", "tril_mask", "heads",
"head_size"}, ...]}. in.npz holds x [B, S, H] (padding rows all zero), labels [B, A, S, S] and, per case,
"<name>/<weight index>" for the layer's weights in bert4keras's order. out.npz holds, per case,
"<name>/logits", "<name>/loss" and "<name>/f1".

The layer gets its mask the way bert4keras models give it, as a Keras mask, here from a Masking layer.
The loss and F1 are those bert4keras's GlobalPointer NER example defines: the mean multilabel crossentropy
over (example, head) rows of S·S spans, and 2·|gold ∩ predicted| / (|gold| + |predicted|).
"""

import json
import sys

import numpy as np


def example_loss(y_true, y_pred):
    """bert4keras's example: flatten to (batch·heads, spans), mean of multilabel_categorical_crossentropy."""
    from bert4keras.backend import K, multilabel_categorical_crossentropy

    rows = K.prod(K.shape(y_pred)[:2])
    return K.mean(multilabel_categorical_crossentropy(K.reshape(y_true, (rows, -1)), K.reshape(y_pred, (rows, -1))))


def example_f1(y_true, y_pred):
    """bert4keras's example: spans with logit > 0 against the gold spans."""
    from bert4keras.backend import K

    predicted = K.cast(K.greater(y_pred, 0), K.floatx())
    return 2 * K.sum(y_true * predicted) / K.sum(y_true + predicted)


def run_case(case, data):
    import tensorflow as tf
    from bert4keras.backend import keras
    from bert4keras.layers import EfficientGlobalPointer, GlobalPointer

    x = data["x"]
    cls = {"GlobalPointer": GlobalPointer, "EfficientGlobalPointer": EfficientGlobalPointer}[case["layer"]]
    inputs = keras.layers.Input(shape=x.shape[1:])
    layer = cls(case["heads"], case["head_size"], RoPE=case["RoPE"], tril_mask=case["tril_mask"])
    model = keras.models.Model(inputs, layer(keras.layers.Masking(0.0)(inputs)))
    weights = [data[f"{case['name']}/{i}"] for i in range(len(layer.weights))]
    layer.set_weights(weights)
    logits = model.predict(x, verbose=0)
    labels = tf.constant(data["labels"])
    return {"logits": logits, "loss": example_loss(labels, tf.constant(logits)).numpy(),
            "f1": example_f1(labels, tf.constant(logits)).numpy()}


def main(path):
    with open(path) as f:
        job = json.load(f)
    data = dict(np.load(job["inputs"]))
    out = {}
    for case in job["cases"]:
        out.update({f"{case['name']}/{key}": value for key, value in run_case(case, data).items()})
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
