"""`Transformer.load_weights_from_checkpoint` and `Transformer.save_weights_as_checkpoint`: bert4keras's mapping
(layer name -> checkpoint names, in the order of the layer's weights) read and written with kerasbert's checks,
`kerasbert.weights.table.LoadReport` and per-variable log.

Each listed name fills the layer's next slot (`kerasbert.compat._model_classes_weights.layer_slots`): a kerasbert
layer's in its table's order, Q, K and V concatenated into its fused projection; any other layer's
``trainable_weights`` one by one. The model's ``load_variable`` gives each value (bert4keras's hook: ``keep_tokens``
and ``compound_tokens`` rows, transposed names), its ``create_variable`` each saved one. Every shape is checked and
nothing is assigned unless every check passes; a name the checkpoint lacks is an error unless the model ignores
invalid weights (then its weight stays as initialized, logged ``*NEW*``).
"""

from __future__ import annotations

import functools
import os

import keras
import numpy as np

from kerasbert.compat._model_classes_weights import Slot, layer_slots
from kerasbert.errors import CheckpointError, fail
from kerasbert.files import publish_folder
from kerasbert.weights.table import LoadReport, family_hint, listed, log_report


class DictCheckpoint:
    """A dict of arrays as a `kerasbert.weights.table.Source`."""

    def __init__(self, values: dict):
        self.path, self.values = "<dict>", values

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(np.shape(value)) for name, value in self.values.items()}

    def get(self, name: str) -> np.ndarray:
        return np.asarray(self.values[name])

    def file_name(self, name: str) -> str:
        return name


@functools.lru_cache(maxsize=4)
def _tf_checkpoint(prefix: str, stamp: float):
    """The reader of a TF checkpoint, one per prefix and write (``stamp``: its index file's time)."""
    from kerasbert.weights.google import TFCheckpoint

    return TFCheckpoint(prefix)


def source(checkpoint):
    """The checkpoint as a source: a dict of arrays, or a TF checkpoint's prefix, folder or ``.index`` file."""
    if isinstance(checkpoint, dict):
        return DictCheckpoint(checkpoint)
    from kerasbert.weights.google import resolve_checkpoint

    prefix = os.path.abspath(resolve_checkpoint(checkpoint))
    return _tf_checkpoint(prefix, os.path.getmtime(prefix + ".index"))


def read_variable(checkpoint, name: str) -> np.ndarray:
    """The variable ``name`` of ``checkpoint`` (a dict's entry or a TF checkpoint's), a CheckpointError naming it
    where it is absent."""
    reader = source(checkpoint)
    if name not in reader.shapes():
        raise fail(CheckpointError, f"{name} in {reader.path}", "a variable of that name", "none")
    return reader.get(name)


def _pairs(model, mapping: dict | None) -> list[tuple[str, keras.layers.Layer, list[tuple[Slot, str]]]]:
    """Each mapped layer of the model with its slots paired to the mapping's names, bert4keras's zip."""
    mapping = model.variable_mapping() if mapping is None else mapping
    table = model.checkpoint_table()
    out = []
    for layer_name, variables in mapping.items():
        full = model.prefixed(layer_name)
        layer = model.layers.get(full)
        if not isinstance(layer, keras.layers.Layer):
            continue
        slots = layer_slots(layer, layer_name, table)
        out.append((full, layer, list(zip(slots, variables, strict=False))))
    return out


def load(model, checkpoint, mapping: dict | None = None) -> LoadReport:
    """Load ``checkpoint`` into ``model`` through ``mapping`` (None: its ``variable_mapping``)."""
    reader = source(checkpoint)
    available = reader.shapes()
    report, parts, missing = LoadReport(reader.path), {}, []
    for layer_name, _, pairs in _pairs(model, mapping):
        for slot, name in pairs:
            if name not in available:
                missing.append(name)
                continue
            value = np.asarray(model.load_variable(checkpoint, name))
            if value.shape != slot.shape and model.autoresize_weights:
                raise fail(CheckpointError, f"autoresize_weights: {name} in {reader.path}",
                           f"the shape {list(slot.shape)} of {layer_name}", str(list(value.shape)),
                           "kerasbert resizes no weight; resize the checkpoint with "
                           "kerasbert.compat.snippets.orthogonally_resize and load that")
            if value.shape != slot.shape:
                raise CheckpointError(f"{layer_name} expects {list(slot.shape)}, checkpoint has {list(value.shape)} "
                                      f"({name} in {reader.path}): the model's sizes do not match this checkpoint; "
                                      "build the model from the checkpoint's own config")
            parts.setdefault(id(slot.weight), (slot.weight, {}))[1][slot.part] = (value, slot.parts)
            report.loaded.append((name, tuple(available[name])))
    if missing and not model.ignore_invalid_weights:
        raise fail(CheckpointError, reader.path, "every variable the mapping names", listed(missing),
                   family_hint(available, model.checkpoint_format()) or "pass ignore_invalid_weights=True to keep "
                   "those weights as initialized")
    assigned = set()
    for weight, pieces in parts.values():
        count = next(iter(pieces.values()))[1]
        if len(pieces) == count:
            values = [pieces[i][0] for i in range(count)]
            weight.assign(np.concatenate(values, axis=-1).astype(weight.dtype) if count > 1
                          else values[0].astype(weight.dtype))
            assigned.add(id(weight))
    report.new.extend((w.path, tuple(w.shape)) for w in model.model.weights if id(w) not in assigned)
    used, skip = {name for name, _ in report.loaded}, model.checkpoint_format().skip
    for name in sorted(available):
        if name not in used:
            (report.skipped if skip.search(name) else report.unused).append(name)
    if model.verbose:
        log_report(report)
    return report


def save(model, filename: str | os.PathLike, mapping: dict | None = None, dtype=None) -> str:
    """Write the weights ``mapping`` names (None: the model's ``variable_mapping``) as a TF checkpoint at
    ``filename``; the files appear all at once."""
    from kerasbert.weights.google import write_google_tensors

    tensors = {}
    for _, _, pairs in _pairs(model, mapping):
        for slot, name in pairs:
            value = keras.ops.convert_to_numpy(slot.weight)
            value = np.split(value, slot.parts, axis=-1)[slot.part] if slot.parts > 1 else value
            name, value = model.create_variable(name, value, dtype)
            if name in tensors:  # an unshared ALBERT: L blocks, one group of names
                raise fail(CheckpointError, f"save_weights_as_checkpoint: {name}", "one weight under each name",
                           "two layers' weights", "the mapping names one block for all; save the model as .keras")
            tensors[name] = np.ascontiguousarray(value)
    if not tensors:
        raise fail(CheckpointError, "save_weights_as_checkpoint", "a mapping that names the model's layers",
                   "no weight to save")
    path = os.path.abspath(os.fspath(filename))
    with publish_folder(os.path.dirname(path), last="checkpoint") as staging:
        write_google_tensors(tensors, os.path.join(staging, os.path.basename(path)))
    return os.fspath(filename)
