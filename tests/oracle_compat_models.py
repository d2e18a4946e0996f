"""Runs bert4keras 0.11.5's model objects (``return_keras_model=False``) as the reference oracle. Never imported by
the tests.

Usage: python oracle_compat_models.py JOB.json (run by `helpers.run_bert4keras`, with TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1).

JOB.json: {"out": "result.npz", "tasks": [{"kind": "object", ...}, ...]}; each task's results are stored in the npz
as "<task index>/<key>". An "object" task builds bert4keras's model object from "config" and "checkpoint" (one
kerasbert wrote) with "model" (a family, or "subclass": a file whose ``make(pkg)`` returns a model class) and
"kwargs"; with "condition" (its width C) every norm is conditioned on an ``Input-Condition`` ``[B, C]`` given to
``build`` (``layer_norm_cond``, ``"cond_hidden"`` its Dense's width, ``additional_input_layers``); with "mapping",
it is built without a checkpoint and loads it through that mapping. It predicts on
"inputs" (an npz: token_ids, segment_ids, condition), gives its layer names, its ``variable_mapping`` as JSON, and
writes its weights as ``save_weights_as_checkpoint`` pairs them to "save". A "t5" task does the same for T5's
classes (`t5_object`).
"""

import importlib.util
import json
import sys

import numpy as np


def _model_class(task):
    """The family's name, or the class the subclass file's ``make("bert4keras")`` returns."""
    if "subclass" not in task:
        return task["model"]
    spec = importlib.util.spec_from_file_location("subclass_source", task["subclass"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make("bert4keras")


def _inputs(model, data):
    """The batch for the model's inputs, by name (a prefix before it): token ids, segment ids, the condition."""
    columns = {"Input-Token": "token_ids", "Input-Segment": "segment_ids", "Input-Condition": "condition"}
    return [data[next(column for name, column in columns.items() if t.name.split(":")[0].endswith(name))]
            for t in model.inputs]


def model_object(task):
    """bert4keras's model object from the config and checkpoint: its outputs, layers, mapping and saved weights."""
    from bert4keras.backend import keras
    from bert4keras.models import build_transformer_model

    kwargs = dict(task.get("kwargs", {}))
    if "condition" in task:
        condition = keras.layers.Input(shape=(task["condition"],), name="Input-Condition")
        kwargs.update(layer_norm_cond=condition, layer_norm_cond_hidden_size=task.get("cond_hidden"),
                      layer_norm_cond_hidden_act=task.get("cond_act"), additional_input_layers=condition)
    mapping = task.get("mapping")  # a mapping of its own: build, then load through it
    model = build_transformer_model(task["config"], None if mapping else task["checkpoint"],
                                    model=_model_class(task), return_keras_model=False, **kwargs)
    if mapping:
        model.load_weights_from_checkpoint(task["checkpoint"], mapping=mapping)
    data = dict(np.load(task["inputs"]))
    outputs = model.model.predict(_inputs(model.model, data), verbose=0)
    outputs = outputs if isinstance(outputs, list) else [outputs]
    save(model, task["save"])
    return {"layers": np.array([layer.name for layer in model.model.layers]),
            "mapping": np.array(json.dumps(model.variable_mapping())),
            **{f"output/{i}": output for i, output in enumerate(outputs)}}


def t5_object(task):
    """bert4keras's T5 object or stack (``model``: ``mt5.1.1``, ``t5.1.1_encoder``, ..., or "subclass") from the
    config and checkpoint kerasbert wrote, with "kwargs": the outputs of its model (and a whole T5's encoder and
    decoder) on "inputs" (an npz: encoder_ids, decoder_ids, context), the parts' names, its mapping as JSON, and its
    weights written to "save"."""
    from bert4keras.models import build_transformer_model

    t5 = build_transformer_model(task["config"], task["checkpoint"], model=_model_class(task),
                                 return_keras_model=False, **task.get("kwargs", {}))
    data = dict(np.load(task["inputs"]))
    columns = {"Encoder-Input-Token": "encoder_ids", "Decoder-Input-Token": "decoder_ids", "Input-Context": "context"}
    models = {"model": t5.model, **({"encoder": t5.encoder, "decoder": t5.decoder} if hasattr(t5, "encoder") else {})}
    out = {f"{key}/output": model.predict([data[columns[t.name.split(":")[0]]] for t in model.inputs], verbose=0)
           for key, model in models.items()}
    save(t5, task["save"])
    parts = [t5.encoder.name, t5.decoder.name] if hasattr(t5, "encoder") else []
    return {**out, "parts": np.array(parts), "mapping": np.array(json.dumps(t5.variable_mapping()))}


def save(model, prefix):
    """bert4keras's ``save_weights_as_checkpoint`` (which needs a TF1 session): each mapped layer's trainable
    weights under its names in order (the first of a name written twice), the NSP kernel transposed as its
    ``create_variable`` stores it."""
    import os

    import tensorflow as tf
    from bert4keras.backend import K

    tensors = {}  # an unshared ALBERT's blocks share their names: the first block's are kept
    for name, variables in model.variable_mapping().items():
        layer = model.layers.get(model.prefixed(name))
        for variable, value in zip(variables, K.batch_get_value(layer.trainable_weights) if layer else [],
                                   strict=False):
            transposed = variable == "cls/seq_relationship/output_weights" or "relative_attention_bias" in variable
            tensors.setdefault(variable, value.T if transposed else value)
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(tensors), shape_and_slices=[""] * len(tensors),
                      tensors=[tf.constant(v) for v in tensors.values()])


KINDS = {"object": model_object, "t5": t5_object}

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from oracle_bert4keras import main

    main(sys.argv[1], KINDS)
