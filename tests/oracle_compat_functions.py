"""Runs bert4keras 0.11.5's ``backend`` and ``snippets`` functions on tf-keras as the reference oracle. The tests
import only `made_object` (which imports nothing), to build objects as the oracle does.

Usage: python oracle_compat_functions.py JOB.json, with TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 set before TensorFlow is
imported (`helpers.run_bert4keras` sets them).

JOB.json: {"inputs": "in.npz", "out": "out.npz", "calls": [[name, module, function, args, kwargs], ...]}. An argument
is plain JSON, or an object: {"array": key} (in.npz's array, a tensor for ``backend``), {"bytes": text} (its UTF-8
bytes), {"tuple": [...]}, {"schedule": [[t, value], ...]} (a dict with int keys). ``function`` "Sinusoidal" calls
``Sinusoidal()(*args)``, and "Class.method" calls ``Class(**args[0]).method(*args[1:], **kwargs)``, the attributes of
args[0]'s "__set__" (``{name: value}``) set on the object first. out.npz holds each call's tensors as "<name>/<i>" (i:
the position in a returned list, 0 for one tensor) and, for other results, "<name>/json" (the result as JSON, tuples
as lists).
"""

import json
import sys

import numpy as np


def _argument(value, arrays, tensors):
    """One argument of a call, decoded (see the module docstring)."""
    import tensorflow as tf

    if not isinstance(value, dict):
        return value
    if "array" in value:
        array = arrays[value["array"]]
        return tf.constant(array) if tensors else array
    if "bytes" in value:
        return value["bytes"].encode("utf-8")
    if "tuple" in value:
        return tuple(value["tuple"])
    if "schedule" in value:
        return {int(t): v for t, v in value["schedule"]}
    return value


def _function(module, name):
    import bert4keras.backend
    import bert4keras.snippets
    import bert4keras.tokenizers

    source = {"backend": bert4keras.backend, "snippets": bert4keras.snippets, "tokenizers": bert4keras.tokenizers}
    source = source[module]
    if name == "Sinusoidal":
        return lambda *args: source.Sinusoidal()(*args)
    if "." in name:  # "Class.method": the first argument holds the constructor's keywords
        cls, method = name.split(".")
        return lambda made, *args, **kwargs: getattr(made_object(getattr(source, cls), made), method)(*args, **kwargs)
    return getattr(source, name)


def made_object(cls, made):
    """``cls(**made)``, then ``made["__set__"]``'s attributes set on it (a script's ``tokenizer._token_unk_id = 0``)."""
    made = dict(made)
    attributes = made.pop("__set__", {})
    instance = cls(**made)
    for attribute, value in attributes.items():
        setattr(instance, attribute, value)
    return instance


def _stored(name, result):
    """The npz entries of one result."""
    from bert4keras.backend import K

    parts = result if isinstance(result, (list, tuple)) else [result]
    if all(hasattr(part, "dtype") and hasattr(part, "shape") for part in parts) and parts:
        return {f"{name}/{i}": np.asarray(part if isinstance(part, np.ndarray) else K.eval(part))
                for i, part in enumerate(parts)}
    return {f"{name}/json": np.array(json.dumps(result, ensure_ascii=False))}


def main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    arrays = dict(np.load(job["inputs"])) if job.get("inputs") else {}
    out = {}
    for name, module, function, args, kwargs in job["calls"]:
        tensors = module == "backend"
        args = [_argument(a, arrays, tensors) for a in args]
        kwargs = {k: _argument(v, arrays, tensors) for k, v in kwargs.items()}
        out.update(_stored(name, _function(module, function)(*args, **kwargs)))
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
