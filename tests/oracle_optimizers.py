"""Runs bert4keras 0.11.5's optimizers on tf-keras as the reference oracle. Never imported by the tests.

Usage: python oracle_optimizers.py JOB.json  (run by `test_compat_optimizers.run_optimizer_oracle`, which sets
TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 before TensorFlow is imported).

JOB.json: {"out": "result.npz", "problem": {"init": {name: values}, "grads": [{name: values}, ...]},
"problems": {problem name: a problem}, "cases": [{"key": ..., "wrappers": ["weight_decay", ...], "kwargs": {...},
"steps": n, "ema": bool, "base": "Adam", "problem": problem name}]}.
Each case builds ``extend_with_<wrapper>`` around bert4keras's optimizer ``base`` (Adam unless given; first
wrapper innermost), applies the first ``steps`` gradients of its problem ("problem" unless it names one of
"problems") and stores every variable as "<key>/<name>"; with "ema" also the weights after
``apply_ema_weights()`` ("<key>/ema/<name>") and after ``reset_old_weights()`` ("<key>/reset/<name>"). A gradient
given as {"indices": [...], "values": [...]} is an embedding's sparse gradient (``tf.IndexedSlices``).

bert4keras 0.11.5 derives its optimizers from ``keras.optimizers.Optimizer`` and calls OptimizerV2's methods
(``_set_hyper``, ``_decayed_lr``, slots); tf-keras 2.11+ moved that class to ``keras.optimizers.legacy``, so
the oracle points the name back at it before importing ``bert4keras.optimizers``. bert4keras's code runs unchanged.
"""

import json
import sys

import numpy as np


def load_optimizers():
    """bert4keras.optimizers, built on tf-keras's OptimizerV2."""
    from bert4keras.backend import keras

    keras.optimizers.Optimizer = keras.optimizers.legacy.Optimizer
    from bert4keras import optimizers

    return optimizers


def gradient(value, variable):
    """A dense gradient, or {"indices", "values"} as a sparse one over ``variable``'s rows."""
    import tensorflow as tf

    if isinstance(value, dict):
        return tf.IndexedSlices(tf.constant(np.array(value["values"], np.float32)), tf.constant(value["indices"]),
                                tf.constant(variable.shape.as_list()))
    return tf.constant(np.array(value, np.float32))


def run_case(optimizers, case, problem):
    """Apply the case's optimizer to fresh variables; return {output key: values}."""
    import tensorflow as tf

    cls = getattr(optimizers, case.get("base", "Adam"))
    for wrapper in case["wrappers"]:
        cls = getattr(optimizers, "extend_with_" + wrapper)(cls)
    optimizer = cls(**case["kwargs"])
    names = sorted(problem["init"])
    variables = [tf.Variable(np.array(problem["init"][n], np.float32), name=n) for n in names]
    for grads in problem["grads"][:case["steps"]]:
        grads = [gradient(grads[n], v) for n, v in zip(names, variables, strict=True)]
        optimizer.apply_gradients(zip(grads, variables, strict=True))
    out = {f"{case['key']}/{n}": v.numpy() for n, v in zip(names, variables, strict=True)}
    if case.get("ema"):
        optimizer.apply_ema_weights()
        out.update({f"{case['key']}/ema/{n}": v.numpy() for n, v in zip(names, variables, strict=True)})
        optimizer.reset_old_weights()
        out.update({f"{case['key']}/reset/{n}": v.numpy() for n, v in zip(names, variables, strict=True)})
    return out


def main(path):
    with open(path) as f:
        job = json.load(f)
    optimizers = load_optimizers()
    out = {}
    for case in job["cases"]:
        problem = job["problems"][case["problem"]] if "problem" in case else job["problem"]
        out.update(run_case(optimizers, case, problem))
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
