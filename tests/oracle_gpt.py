"""Runs bert4keras 0.11.5's GPT families (gpt, gpt2, gpt2_ml) as the reference oracle. Never imported by the tests.

Usage: python oracle_gpt.py JOB.json (run by `helpers.run_bert4keras`, with TF_KERAS=1 and TF_USE_LEGACY_KERAS=1).

JOB.json: {"out": "result.npz", "tasks": [{"kind": ..., ...}, ...]}; each task's results are stored in the npz as
"<task index>/<key>". Kinds: "checkpoint" writes a random checkpoint of a family in bert4keras's own names;
"predict" builds a model from a config and checkpoint and predicts on a padded batch; "decode" runs
AutoRegressiveDecoder as bert4keras's basic_language_model_gpt2_ml.py example does; "train" runs Adam steps.
"""

import json
import sys

import numpy as np


def _inputs(model, token_ids):
    """The inputs bert4keras's model takes: token ids, and segment ids 0 where it has an Input-Segment (GPT)."""
    return [token_ids, np.zeros_like(token_ids)] if len(model.inputs) > 1 else token_ids


def checkpoint(task):
    """A random checkpoint of ``task["model"]`` in its own names: every trainable weight normal(0, std) (norm
    gammas near 1), [PAD]'s embedding row zero (a decoder never chooses id 0, which bert4keras would read as padding
    when fed back), each mapped layer's weights saved under its ``variable_mapping`` names in their order, as
    ``save_weights_as_checkpoint`` pairs them. Returns the layer names."""
    import tensorflow as tf
    from bert4keras.backend import K
    from bert4keras.models import build_transformer_model

    gpt = build_transformer_model(task["config"], model=task["model"], return_keras_model=False)
    rng = np.random.default_rng(task["seed"])
    for weight in gpt.model.trainable_weights:
        value = rng.normal(0.0, task["std"], K.int_shape(weight)) + ("gamma" in weight.name)
        K.set_value(weight, value.astype("float32"))
    embeddings = K.get_value(gpt.layers["Embedding-Token"].embeddings)
    embeddings[0] = 0.0  # the logit of id 0 is then 0, never among the likeliest, as in a trained model
    K.set_value(gpt.layers["Embedding-Token"].embeddings, embeddings)
    names, values = [], []
    for name, variables in gpt.variable_mapping().items():
        layer = gpt.layers.get(name)
        for variable, weight in zip(variables, layer.trainable_weights if layer is not None else [], strict=False):
            names.append(variable)
            values.append(K.get_value(weight))
    tf.raw_ops.SaveV2(prefix=task["checkpoint"], tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(v) for v in values])
    return {"layers": np.array([layer.name for layer in gpt.model.layers]), "names": np.array(names)}


def predict(task):
    """bert4keras's model of the family from the config and checkpoint (with ``kwargs``: keep_tokens), its
    layer names and its output on the batch's token ids."""
    from bert4keras.models import build_transformer_model

    model = build_transformer_model(task["config"], task["checkpoint"], model=task["model"], **task.get("kwargs", {}))
    token_ids = np.load(task["inputs"])["token_ids"]
    return {"layers": np.array([layer.name for layer in model.layers]),
            "output": model.predict(_inputs(model, token_ids), verbose=0)}


def decode(task):
    """AutoRegressiveDecoder driven as basic_language_model_gpt2_ml.py drives it (``start_id=None``, probabilities
    of the prompt and the ids so far at the last token), by beam search with each ``topk`` on each prompt; one JSON
    string: per topk, per prompt, the ids found."""
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import AutoRegressiveDecoder

    model = build_transformer_model(task["config"], task["checkpoint"], model=task["model"])

    class Completion(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            token_ids = np.concatenate([inputs[0], output_ids], 1)
            return self.last_token(model).predict(_inputs(model, token_ids), verbose=0)

    completion = Completion(start_id=None, end_id=task["end_id"], maxlen=task["maxlen"], minlen=task["minlen"])
    found = [[completion.beam_search([prompt], topk=topk).tolist() for prompt in task["prompts"]]
             for topk in task["topks"]]
    return {"json": np.array(json.dumps(found))}


def train(task):
    """The family's language model trained with tf.keras's plain Adam one batch at a time on next-token labels
    (0: not counted); each step's loss, then every weight under its ``variable_mapping`` name."""
    from bert4keras.backend import K, keras
    from bert4keras.models import build_transformer_model
    from oracle_bert4keras import _next_token_loss

    gpt = build_transformer_model(task["config"], task["checkpoint"], model=task["model"], return_keras_model=False)
    model = gpt.model
    model.compile(loss=_next_token_loss, optimizer=keras.optimizers.Adam(task["lr"]))
    data, size, losses = np.load(task["inputs"]), task["batch_size"], []
    for start in range(0, len(data["labels"]), size):
        rows = slice(start, start + size)
        losses.append(model.train_on_batch(_inputs(model, data["token_ids"][rows]), data["labels"][rows]))
    out = {"losses": np.array(losses)}
    for name, variables in gpt.variable_mapping().items():
        layer = gpt.layers.get(name)
        if layer is not None:
            out.update({variable: K.get_value(weight)
                        for weight, variable in zip(layer.trainable_weights, variables, strict=True)})
    return out


KINDS = {"checkpoint": checkpoint, "predict": predict, "decode": decode, "train": train}


if __name__ == "__main__":
    from oracle_bert4keras import main

    main(sys.argv[1], KINDS)
