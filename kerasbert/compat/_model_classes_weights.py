"""bert4keras's checkpoint mapping over kerasbert's weight tables: ``variable_mapping`` and the weights a mapping
fills, in bert4keras's order.

bert4keras maps each layer name to a list of checkpoint names, paired in order with the layer's
``trainable_weights`` (kernel before bias, beta before gamma, and its attention's query, key, value and output
projections one after another). kerasbert's tables (`kerasbert.weights.names`, `kerasbert.weights.gpt_names`) map
each (layer, weight) to its names, with Q, K and V fused in one kernel. `bert4keras_mapping` renders a table as
bert4keras's lists; `Slot` is where one listed name goes in a layer: a whole weight, or one of the parts a fused
weight concatenates on its last axis. A layer of kerasbert's takes its names through the table's order; any other
layer (one a subclass built with ``apply``) takes them in the order of its ``trainable_weights``, as bert4keras.

Example:
>>> from kerasbert.modeling.families import get
>>> from kerasbert.weights.names import google_names
>>> mapping = bert4keras_mapping(google_names(get("bert")), num_hidden_layers=1)
>>> mapping["Transformer-0-MultiHeadSelfAttention"][:3]
['bert/encoder/layer_0/attention/self/query/kernel', 'bert/encoder/layer_0/attention/self/query/bias', \
'bert/encoder/layer_0/attention/self/key/kernel']
>>> mapping["Embedding-Norm"]
['bert/embeddings/LayerNorm/beta', 'bert/embeddings/LayerNorm/gamma']
"""

from __future__ import annotations

import dataclasses

import keras

from kerasbert import layer_names as ln
from kerasbert.weights.table import weight_keys

# a weight's group (the part of its key before the last "_") and kind, in the order bert4keras's layers create them
# (T5's cross-attention: q, then k and v; T5.1.1's feed-forward: wi_0, its gate wi_1, then wo)
_GROUPS = ("qkv", "q", "kv", "intermediate", "gate", "output", "")
_KINDS = {"embeddings": 0, "kernel": 0, "beta": 0, "bias": 1, "gamma": 1}


def _split(weight: str) -> tuple[str, str]:
    """``"qkv_kernel"`` -> ``("qkv", "kernel")``, ``"gamma"`` -> ``("", "gamma")``."""
    group, _, kind = weight.rpartition("_")
    return group, kind


def _rank(weight: str) -> tuple[int, int]:
    """Where bert4keras's layers create a weight of this key: its group's place, then its kind's."""
    group, kind = _split(weight)
    return _GROUPS.index(group) if group in _GROUPS else len(_GROUPS), _KINDS.get(kind, 2)


def ordered(rows: list[tuple[str, object, tuple[str, ...]]]) -> list[tuple[object, int, int, str]]:
    """One layer's table rows ``(weight key, weight, names)`` as bert4keras lists them: by group (Q/K/V, inner,
    output, the rest), then part by part (query, key, value), kernel before bias, beta before gamma. Each entry is
    ``(weight, part, parts, name)``."""
    out = []
    for group in sorted({_split(row[0])[0] for row in rows}, key=lambda g: _rank(f"{g}_")):
        members = sorted((row for row in rows if _split(row[0])[0] == group), key=lambda row: _rank(row[0]))
        for part in range(max(len(row[2]) for row in members)):
            out += [(weight, part, len(names), names[part]) for _, weight, names in members]
    return out


def _as_tuple(names) -> tuple[str, ...]:
    return names if isinstance(names, tuple) else (names,)


def bert4keras_mapping(table: dict, num_hidden_layers: int) -> dict[str, list[str]]:
    """A kerasbert table as bert4keras's ``variable_mapping``: layer name -> its checkpoint names in bert4keras's
    order, every ``Transformer-{i}-...`` row once per layer ``i``."""
    layers: dict[str, list] = {}
    for (layer, weight), names in table.items():
        indices = range(num_hidden_layers) if ln.BLOCK_KEY in layer else [None]
        for index in indices:
            name = layer if index is None else layer.format(i=index)
            rendered = tuple(n.format(i=index) for n in _as_tuple(names)) if index is not None else _as_tuple(names)
            layers.setdefault(name, []).append((weight, None, rendered))
    return {name: [entry[3] for entry in ordered(rows)] for name, rows in layers.items()}


@dataclasses.dataclass(frozen=True)
class Slot:
    """Where one checkpoint name goes: ``weight``, whole (``parts`` 1) or its ``part``-th of ``parts`` equal pieces
    on the last axis (Q, K or V of a fused projection)."""

    weight: keras.Variable
    part: int = 0
    parts: int = 1

    @property
    def shape(self) -> tuple[int, ...]:
        shape = tuple(self.weight.shape)
        return (*shape[:-1], shape[-1] // self.parts)


def table_slots(layer: keras.layers.Layer, base_name: str, table: dict) -> list[Slot] | None:
    """The slots of a kerasbert layer in bert4keras's order, from ``table`` (its name without a prefix:
    ``base_name``); None where the table does not hold every weight of the layer (another layer by that name)."""
    match = ln.block_key(base_name)
    key = match[0] if match else base_name
    rows = []
    for weight_key, weight in weight_keys(layer):
        names = table.get((key, weight_key))
        if names is None and weight.trainable:
            return None
        if names is not None:
            rows.append((weight_key, weight, _as_tuple(names)))
    return [Slot(weight, part, parts) for weight, part, parts, _ in ordered(rows)] if rows else None


def layer_slots(layer: keras.layers.Layer, base_name: str, table: dict) -> list[Slot]:
    """The slots a mapping's names fill, in order: the table's for a layer of kerasbert's, else the layer's
    ``trainable_weights`` one by one, as bert4keras pairs them."""
    if hasattr(layer, "checkpoint_weights") or _is_kerasbert(layer):
        slots = table_slots(layer, base_name, table)
        if slots is not None:
            return slots
    return [Slot(weight) for weight in layer.trainable_weights]


def _is_kerasbert(layer: keras.layers.Layer) -> bool:
    """A layer of kerasbert's modeling (its weights named as the tables key them)."""
    return type(layer).__module__.startswith("kerasbert.modeling")
