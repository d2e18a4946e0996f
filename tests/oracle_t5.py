"""Runs bert4keras 0.11.5's T5 families on tf-keras as the reference oracle. Never imported by the tests.

Usage: python oracle_t5.py JOB.json  (run by `helpers.run_bert4keras`, which sets TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1 before TensorFlow is imported).

JOB.json: {"out": "result.npz", "tasks": [{"kind": "checkpoint" | "outputs" | "train", ...}, ...]}, run in order.
Each task's results are stored in the npz as "<task index>/<key>".
"""

import json
import sys

import numpy as np


def checkpoint(task):
    """Write a random checkpoint of a T5 family in bert4keras's own names, as its ``variable_mapping`` and
    ``create_variable`` give them (``relative_attention_bias`` transposed).

    task: config, model (the family), checkpoint (the prefix to write), seed, std. Every trainable weight gets
    normal(0, std) values, the norms' gains near 1. Returns the whole model's layer names.
    """
    import tensorflow as tf
    from bert4keras.backend import K
    from bert4keras.models import build_transformer_model

    t5 = build_transformer_model(task["config"], model=task["model"], return_keras_model=False)
    rng = np.random.default_rng(task["seed"])
    for weight in t5.model.trainable_weights:
        value = rng.normal(0.0, task["std"], K.int_shape(weight)) + ("gamma" in weight.name)
        K.set_value(weight, value.astype("float32"))
    names, values = zip(*_named_weights(t5).items(), strict=True)
    tf.raw_ops.SaveV2(prefix=task["checkpoint"], tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(v) for v in values])
    return {"layers": np.array([layer.name for layer in t5.model.layers])}


def _named_weights(t5) -> dict:
    """Every mapped weight's value under its Google name, as ``variable_mapping`` pairs them
    (``relative_attention_bias`` transposed to Google's ``[heads, buckets]``)."""
    from bert4keras.backend import K

    named = {}
    for name, variables in t5.variable_mapping().items():
        for variable, weight in zip(variables, t5.layers[name].trainable_weights, strict=True):
            value = K.get_value(weight)
            named[variable] = value.T if "relative_attention_bias" in variable else value
    return named


def outputs(task):
    """Build a T5 model (``model``: ``t5.1.1``, ``t5.1.1_encoder``, ``t5.1.1_decoder``, ...) from ``config`` and
    ``checkpoint`` (with ``keep_tokens`` where given), and predict on the npz ``inputs``: the whole model on
    ``encoder_ids`` and ``decoder_ids``, the encoder on ``encoder_ids``, the decoder on ``context`` and
    ``decoder_ids``. Returns the output and the layer names."""
    from bert4keras.models import build_transformer_model

    kwargs = {"keep_tokens": task["keep_tokens"]} if "keep_tokens" in task else {}
    model = build_transformer_model(task["config"], task["checkpoint"], model=task["model"], **kwargs)
    data = np.load(task["inputs"])
    part = task["model"].rpartition("_")[2]
    inputs = {"encoder": [data["encoder_ids"]], "decoder": [data["context"], data["decoder_ids"]]}.get(
        part, [data["encoder_ids"], data["decoder_ids"]])
    return {"output": model.predict(inputs, verbose=0), "layers": np.array([layer.name for layer in model.layers])}


def train(task):
    """The whole T5 (``model``) from ``config`` and ``checkpoint`` trained as task_seq2seq_autotitle_csl_mt5.py
    trains it: its ``CrossEntropy(Loss)`` on ``[model.inputs[1], model.outputs[0]]`` (the output at i against the
    decoder id i + 1, where the decoder's own mask says that id is not 0), here with tf.keras's plain
    ``Adam(lr)``, one ``batch_size`` rows at a time from the npz ``inputs`` (``encoder_ids``, ``decoder_ids``).
    Returns each step's loss and every weight after under its Google name."""
    from bert4keras.backend import K, keras
    from bert4keras.layers import Loss
    from bert4keras.models import build_transformer_model

    class CrossEntropy(Loss):
        def compute_loss(self, inputs, mask=None):
            y_true, y_pred = inputs
            y_mask = K.cast(mask[1], K.floatx())[:, 1:]  # the decoder's mask: ids != 0, the first kept
            loss = K.sparse_categorical_crossentropy(y_true[:, 1:], y_pred[:, :-1])
            return K.sum(loss * y_mask) / K.sum(y_mask)

    t5 = build_transformer_model(task["config"], task["checkpoint"], model=task["model"], return_keras_model=False)
    output = CrossEntropy(1)([t5.model.inputs[1], t5.model.outputs[0]])
    model = keras.models.Model(t5.model.inputs, output)
    model.compile(optimizer=keras.optimizers.Adam(task["lr"]))
    data, size, losses = np.load(task["inputs"]), task["batch_size"], []
    for start in range(0, len(data["encoder_ids"]), size):
        rows = slice(start, start + size)
        losses.append(model.train_on_batch([data["encoder_ids"][rows], data["decoder_ids"][rows]], None))
    return {"losses": np.array(losses), **_named_weights(t5)}


def main(path, kinds=None):
    """Run the job at ``path``, each task by its ``kind``: one of ``kinds`` (a script importing this one gives its
    own), by default ``checkpoint``, ``outputs`` and ``train``."""
    from bert4keras.backend import set_gelu

    set_gelu("erf")
    kinds = kinds or {"checkpoint": checkpoint, "outputs": outputs, "train": train}
    with open(path) as f:
        job = json.load(f)
    out = {}
    for index, task in enumerate(job["tasks"]):
        result = kinds[task["kind"]](task)
        out.update({f"{index}/{key}": value for key, value in result.items()})
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
