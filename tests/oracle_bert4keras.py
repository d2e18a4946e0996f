"""Runs bert4keras 0.11.5 on tf-keras as the reference oracle. Never imported by the tests.

Usage: python oracle_bert4keras.py JOB.json  (run by `helpers.run_oracle`, which sets
TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 before TensorFlow is imported).

JOB.json: {"out": "result.npz", "tasks": [{"kind": ..., ...}, ...]}. Each task's outputs are
stored in the npz as "<task index>/<output index>"; layer names as "<task index>/layers".
"""

import json
import sys

import numpy as np


def bert_outputs(task):
    """Build (and load) a bert4keras model, predict on the task's inputs."""
    from bert4keras.models import build_transformer_model

    model = build_transformer_model(task["config"], task.get("checkpoint"), **task.get("kwargs", {}))
    out = {"layers": np.array([layer.name for layer in model.layers])}
    if "inputs" in task:
        data = np.load(task["inputs"])
        outputs = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        out.update({str(i): o for i, o in enumerate(outputs)})
    return out


def vocab(task):
    """bert4keras's load_vocab(simplified=True, startswith=...): the kept tokens and their ids."""
    from bert4keras.tokenizers import load_vocab

    token_dict, keep_tokens = load_vocab(task["path"], simplified=True, startswith=task["startswith"])
    return {"tokens": np.array(sorted(token_dict, key=token_dict.get)), "keep_tokens": np.array(keep_tokens)}


KINDS = {"bert": bert_outputs, "vocab": vocab}


def main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    result = {}
    for index, task in enumerate(job["tasks"]):
        for key, value in KINDS[task["kind"]](task).items():
            result[f"{index}/{key}"] = value
    np.savez(job["out"], **result)


if __name__ == "__main__":
    main(sys.argv[1])
