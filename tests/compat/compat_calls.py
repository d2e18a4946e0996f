"""One list of calls run on both sides: by bert4keras in tests/oracle_compat_functions.py, and here by
kerasbert.compat. Arguments are encoded as that oracle's docstring says."""

from __future__ import annotations

import json
import os

import numpy as np
from keras import ops
from oracle_compat_functions import made_object

import helpers


def _argument(value, arrays: dict, tensors: bool):
    if not isinstance(value, dict):
        return value
    if "array" in value:
        array = arrays[value["array"]]
        return ops.convert_to_tensor(array) if tensors else array
    if "bytes" in value:
        return value["bytes"].encode("utf-8")
    if "tuple" in value:
        return tuple(value["tuple"])
    if "schedule" in value:
        return {int(t): v for t, v in value["schedule"]}
    return value


def _function(module: str, name: str):
    from kerasbert.compat import backend, snippets, tokenizers

    source = {"backend": backend, "snippets": snippets, "tokenizers": tokenizers}[module]
    if name == "Sinusoidal":
        return lambda *args: source.Sinusoidal()(*args)
    if "." in name:  # "Class.method": the first argument holds the constructor's keywords
        cls, method = name.split(".")
        return lambda made, *args, **kwargs: getattr(made_object(getattr(source, cls), made), method)(*args, **kwargs)
    return getattr(source, name)


def ours(call: list, arrays: dict):
    """kerasbert.compat's result of one call, as the oracle stores it: a list of arrays, or a JSON value."""
    _, module, function, args, kwargs = call
    tensors = module == "backend"
    result = _function(module, function)(*[_argument(a, arrays, tensors) for a in args],
                                        **{k: _argument(v, arrays, tensors) for k, v in kwargs.items()})
    parts = result if isinstance(result, (list, tuple)) else [result]
    if parts and all(hasattr(p, "dtype") and hasattr(p, "shape") for p in parts):
        return [np.asarray(ops.convert_to_numpy(p)) for p in parts]
    return json.loads(json.dumps(result, ensure_ascii=False))


def theirs(name: str, out: dict):
    """bert4keras's result of the call ``name`` from the oracle's npz, in `ours`' form."""
    if f"{name}/json" in out:
        return json.loads(str(out[f"{name}/json"]))
    return [out[f"{name}/{i}"] for i in range(sum(key.startswith(f"{name}/") for key in out))]


def run_oracle(calls: list, arrays: dict, workdir: str) -> dict:
    """bert4keras's results of ``calls`` (one subprocess)."""
    inputs = os.path.join(workdir, "in.npz")
    np.savez(inputs, **arrays)
    return helpers.run_bert4keras("oracle_compat_functions.py", {"inputs": inputs, "calls": calls}, workdir)


def check(call: list, arrays: dict, out: dict, tolerance: float) -> None:
    """kerasbert.compat's result of ``call`` equals bert4keras's: arrays of the same shape and dtype within
    ``tolerance``, other values exactly."""
    mine, expected = ours(call, arrays), theirs(call[0], out)
    if not (isinstance(expected, list) and expected and isinstance(expected[0], np.ndarray)):
        assert mine == expected, call
        return
    assert len(mine) == len(expected), call
    for got, want in zip(mine, expected, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, call
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, err_msg=str(call))
