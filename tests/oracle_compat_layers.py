"""Runs bert4keras 0.11.5's layers (``bert4keras.layers``) on tf-keras as the reference oracle. Never imported by the
tests.

Usage: python oracle_compat_layers.py JOB.json, with TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 set before TensorFlow is
imported (`helpers.run_bert4keras` sets them).

JOB.json: {"inputs": "in.npz", "out": "out.npz", "cases": [...]}, each case a small model as tests/layer_graphs.py
describes; in.npz holds the input arrays by name and the weights as "<case>/<layer>/<i>". out.npz holds, per case,
"<case>/out/<i>" (each output), "<case>/mask/<i>" (its Keras mask, where it has one) and "<case>/shapes/<layer>"
(the layer's trainable weight shapes in order); "custom_objects" the names in bert4keras.layers.custom_objects.
"""

import json
import sys

import numpy as np


def main(path):
    import bert4keras.layers as layers
    from bert4keras.backend import keras
    from layer_graphs import run

    with open(path) as f:
        job = json.load(f)
    data = dict(np.load(job["inputs"]))
    out = {"custom_objects": np.array(" ".join(sorted(layers.custom_objects)))}
    for case in job["cases"]:
        result = run(case, data, keras, layers, lambda tensor: np.asarray(tensor))
        out.update({f"{case['name']}/{key}": value for key, value in result.items()})
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
