"""Small functional models described as data, built the same way on tf-keras with bert4keras's layers (the oracle,
tests/oracle_compat_layers.py) and on Keras 3 with kerasbert.compat.layers (tests/compat/test_compat_layers.py).

A case is ``{"name", "inputs": {name: {"dtype", "masked"}}, "layers": [...], "outputs": [...]}``: each input is an
``Input`` fed the array of its name (``masked``: through ``Masking(0.0)``, its padding steps all zero); each layer
``{"name", "class", "kwargs", "inputs", "call"}`` (or ``"reuse": <an earlier layer's name>``) is called on the named
tensors (one name, or a list) with the ``call`` keyword arguments; a layer with several outputs names them
``<name>/<i>``. The model's outputs are the tensors named in ``outputs``.
"""

from __future__ import annotations


def build(case: dict, data: dict, keras, layers):
    """The case's model, its input arrays in order and its layers by name, with ``keras`` (tf-keras or Keras 3) and
    ``layers`` (bert4keras.layers or kerasbert.compat.layers)."""
    tensors, model_inputs, arrays, named = {}, [], [], {}
    for name, spec in case["inputs"].items():
        array = data[name]
        x = keras.layers.Input(shape=array.shape[1:], dtype=spec.get("dtype", "float32"), name=name)
        model_inputs.append(x)
        arrays.append(array)
        tensors[name] = keras.layers.Masking(0.0)(x) if spec.get("masked") else x
    for spec in case["layers"]:
        layer = named[spec["reuse"]] if "reuse" in spec else getattr(layers, spec["class"])(
            name=spec["name"], **spec.get("kwargs", {}))
        named.setdefault(spec["name"], layer)
        inputs = [tensors[i] for i in spec["inputs"]] if isinstance(spec["inputs"], list) else tensors[spec["inputs"]]
        out = layer(inputs, **spec.get("call", {}))
        tensors[spec["name"]] = out
        if isinstance(out, (list, tuple)):
            tensors.update({f"{spec['name']}/{i}": o for i, o in enumerate(out)})
    return keras.Model(model_inputs, [tensors[name] for name in case["outputs"]]), arrays, named


def run(case: dict, data: dict, keras, layers, convert) -> dict:
    """The case's outputs on its arrays (``out/<i>``) and the Keras masks they carry (``mask/<i>``, where they have
    one), with the weights ``data["<case>/<layer>/<i>"]`` set; each layer's weight shapes (``shapes/<layer>``),
    in the order of its ``trainable_weights``. ``convert`` turns a tensor into NumPy."""
    import numpy as np

    model, arrays, named = build(case, data, keras, layers)
    result = {}
    for name, layer in named.items():
        shapes = [tuple(int(d) for d in w.shape) for w in layer.trainable_weights]
        result[f"shapes/{name}"] = np.array(repr(shapes))
        key = f"{case['name']}/{name}/0"
        if key in data:
            layer.set_weights([data[f"{case['name']}/{name}/{i}"] for i in range(len(shapes))])
    outputs = model(arrays)
    for i, out in enumerate(outputs if isinstance(outputs, (list, tuple)) else [outputs]):
        result[f"out/{i}"] = convert(out)
        mask = getattr(out, "_keras_mask", None)
        if mask is not None:
            result[f"mask/{i}"] = convert(mask).astype(np.int8)
    return result
