"""The machinery every checkpoint format shares: a name table from the model's weights to the file's names.

A format (`Format`) is data: a table from each (layer, weight) of the bert4keras-named graph to the name(s)
the file stores it under, which of those names are stored transposed (``[out, in]``), which carry one row per
vocabulary entry (sliced by ``keep_tokens``), and which names are training state to skip quietly. A reader
(`Source`) gives the file's names, shapes and arrays. `load_into` puts the two together, with the same checks,
log and `LoadReport` for every format, and assigns nothing unless every check passes.

Three transforms, and only these, sit between a file and the model: a tuple of names is concatenated on the
last axis (the fused Q/K/V kernel and bias); transposed names are transposed; vocabulary rows are sliced.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Protocol

import keras
import numpy as np

from kerasbert import layer_names as ln
from kerasbert.errors import CheckpointError, fail
from kerasbert.log import logger

Names = dict[tuple[str, str], "str | tuple[str, ...]"]


class Source(Protocol):
    """A checkpoint opened for reading: its path, its names with shapes, one array by name (read only when asked
    for), and the name the file itself stores a name under (for the log and the errors)."""

    path: str

    def shapes(self) -> dict[str, tuple[int, ...]]: ...

    def get(self, name: str) -> np.ndarray: ...

    def file_name(self, name: str) -> str: ...


def listed(names: list[str], most: int = 8) -> str:
    """``names`` counted and listed for an error message, the first ``most`` of them.

    Example:
    >>> listed(["a", "b", "c"], most=2)
    '3 missing: a, b ...'
    """
    return f"{len(names)} missing: " + ", ".join(names[:most]) + (" ..." if len(names) > most else "")


@dataclasses.dataclass(frozen=True)
class Format:
    """A checkpoint format as data.

    Args:
        name: str. ``"google"`` or ``"hf"``.
        config_file: str. the config file beside the weights, named in hints.
        names: dict. ``(layer, weight)`` -> the file's name, or a tuple of names concatenated on the last axis;
            ``Transformer-{i}-...`` layers use ``{i}`` in both.
        transposed: callable. whether a file name is stored ``[out, in]``.
        vocab_rows: set of str. names with one row per vocabulary entry.
        skip: regex. training state and buffers that are skipped quietly, never reported as unused.
        hints: dict. part of a name -> the config key a shape mismatch on it points to.
        optional: set of str. layers filled only when the shapes match (a fine-tuned head of another size is
            reported, not an error).
        family: str. the model family whose names the table holds (`kerasbert.modeling.families`).
        vocab_columns: set of str. names with one column per vocabulary entry (T5.1.1's output kernel).
    """

    name: str
    config_file: str
    names: Names
    transposed: Callable[[str], bool]
    vocab_rows: frozenset[str]
    skip: re.Pattern
    hints: dict[str, str]
    optional: frozenset[str] = frozenset()
    family: str = "bert"
    vocab_columns: frozenset[str] = frozenset()


def vocab_axis(name: str, fmt: Format) -> int | None:
    """The axis of the file's variable ``name`` that has one entry per vocabulary token (``keep_tokens`` slices
    it): 0 for `Format.vocab_rows`, -1 for `Format.vocab_columns`, None for any other name."""
    return 0 if name in fmt.vocab_rows else -1 if name in fmt.vocab_columns else None


@dataclasses.dataclass(frozen=True)
class Entry:
    """One row of the name table, resolved against a model: a weight and its names in the file."""

    layer: str
    variable: keras.Variable
    names: tuple[str, ...]


@dataclasses.dataclass
class LoadReport:
    """What loading a checkpoint did; the same lists it logs.

    Attributes:
        checkpoint: str. the resolved checkpoint path.
        loaded: list of (name in the file, shape). variables initialized from the checkpoint.
        new: list of (variable path, shape). model variables left at their initial value.
        unused: list of str. checkpoint variables no model variable took (training state excluded).
        skipped: list of str. optimizer slots, counters and buffers skipped quietly.
    """

    checkpoint: str
    loaded: list = dataclasses.field(default_factory=list)
    new: list = dataclasses.field(default_factory=list)
    unused: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)


def all_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """All layers, nested models flattened, each once."""
    seen, out = set(), []
    for layer in model.layers:
        for sub in all_layers(layer) if isinstance(layer, keras.Model) else [layer]:
            if id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
    return out


def weight_keys(layer: keras.layers.Layer) -> list[tuple[str, keras.Variable]]:
    """A layer's weights under the keys of the name tables: a Transformer block's own (its ``checkpoint_weights``:
    ``qkv_kernel`` for its ``qkv`` projection's kernel), else each weight's name."""
    if hasattr(layer, "checkpoint_weights"):
        return list(layer.checkpoint_weights().items())
    return [(variable.name, variable) for variable in layer.weights]


def name_table(model: keras.Model, names: Names) -> list[Entry]:
    """The rows of ``names`` that apply to ``model``, in graph order."""
    entries = []
    for layer in all_layers(model):
        match = ln.block_key(layer.name)  # (name with {i}, index) of a block layer
        key = match[0] if match else layer.name
        for weight_key, variable in weight_keys(layer):
            found = names.get((key, weight_key))
            if found is not None:
                found = found if isinstance(found, tuple) else (found,)
                index = match[1] if match else ""
                entries.append(Entry(layer.name, variable, tuple(n.format(i=index) for n in found)))
    return entries


def expected_shape(entry: Entry, name: str, fmt: Format) -> tuple[int, ...]:
    """The shape the file's variable ``name`` must have for ``entry``'s model weight."""
    shape = tuple(entry.variable.shape)
    if len(entry.names) > 1:
        shape = (*shape[:-1], shape[-1] // len(entry.names))
    return shape[::-1] if fmt.transposed(name) else shape


def _config_hint(key: str, fmt: Format) -> str:
    """The hint of a size the model and the checkpoint disagree on. The model may come from a preset, a dict or a
    file, so the hint names the model's config and the checkpoint's own file, never a file the user did not give."""
    return (f"the model's {key} does not match this checkpoint; build the model from the checkpoint's own "
            f"{fmt.config_file}")


def _mismatch_hint(name: str, expected: tuple[int, ...], found: tuple[int, ...], fmt: Format, hidden: int) -> str:
    """Which config value a shape mismatch points to: hidden_size when every differing axis is the model's
    hidden size, else the format's hint for the name (vocab_size, intermediate_size, ...)."""
    axes = [i for i, (a, b) in enumerate(zip(expected, found, strict=False)) if a != b]
    if len(expected) == len(found) and axes and all(expected[i] == hidden for i in axes):
        return _config_hint("hidden_size", fmt)
    key = next((key for part, key in fmt.hints.items() if part in name), None)
    return _config_hint(key, fmt) if key else "the config's sizes do not match"


def _checked(source: Source, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The file's variable ``name``, read once its shape is known to fit; a CheckpointError when it holds no
    floating-point numbers or not the shape the file declared."""
    value = source.get(name)
    if value.dtype.kind != "f" and value.dtype.name != "bfloat16":
        raise fail(CheckpointError, f"{source.file_name(name)} in {source.path}", "float values",
                   f"dtype {value.dtype.name}", "the file is not a BERT checkpoint, or was written wrongly")
    if tuple(value.shape) != shape:
        raise fail(CheckpointError, f"{source.file_name(name)} in {source.path}", f"the declared shape {shape}",
                   f"{tuple(value.shape)}", "the file is damaged")
    return value


def _check_shapes(source: Source, entry: Entry, fmt: Format, available: dict, keep_tokens, hidden: int) -> None:
    """Check the shapes the file declares for one entry against the model, before anything is read."""
    for name in entry.names:
        shape, expected, axis = tuple(available[name]), expected_shape(entry, name, fmt), vocab_axis(name, fmt)
        if axis is not None and keep_tokens is not None:
            if max(keep_tokens) >= shape[axis]:
                raise fail(CheckpointError, "keep_tokens", f"ids below the checkpoint's vocabulary {shape[axis]}",
                           f"max id {max(keep_tokens)}", f"{source.file_name(name)} in {source.path} has "
                           f"{shape[axis]} {'rows' if axis == 0 else 'columns'}")
            shape = (len(keep_tokens), *shape[1:]) if axis == 0 else (*shape[:-1], len(keep_tokens))
        if shape != expected:
            hint = _mismatch_hint(name, expected, shape, fmt, hidden)
            raise CheckpointError(f"{entry.layer} expects {list(expected)}, checkpoint has {list(shape)} "
                                  f"({source.file_name(name)} in {source.path}): {hint}")


def _read(source: Source, entry: Entry, fmt: Format, available: dict, keep_tokens) -> np.ndarray:
    """Read and transform the file's variables of one entry (shapes already checked) into the model weight."""
    parts = []
    for name in entry.names:
        value = _checked(source, name, tuple(available[name]))
        if vocab_axis(name, fmt) is not None and keep_tokens is not None:
            value = np.take(value, np.asarray(keep_tokens), axis=vocab_axis(name, fmt))
        parts.append(value.T if fmt.transposed(name) else value)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def _fits(entry: Entry, fmt: Format, available: dict) -> bool:
    """Whether an optional layer's variables have the model's shapes (a head fine-tuned for another size)."""
    return all(tuple(available[n]) == expected_shape(entry, n, fmt) for n in entry.names)


def load_into(model: keras.Model, source: Source, fmt: Format, *, keep_tokens: Sequence[int] | None = None,
              allow_missing: bool = False, verbose: bool = True) -> LoadReport:
    """Load ``source`` into ``model`` through ``fmt``'s table; nothing is assigned unless every check passes."""
    available = source.shapes()
    entries = name_table(model, fmt.names)
    report, assignments = LoadReport(source.path), []
    absent = {n for e in entries for n in e.names if n not in available}
    misfit = {id(e.variable) for e in entries if e.layer in fmt.optional and not absent & set(e.names)
              and not _fits(e, fmt, available)}
    missing = [n for e in entries if e.layer not in fmt.optional for n in e.names if n in absent]
    if missing and not allow_missing:
        raise fail(CheckpointError, source.path, "every variable the model needs", listed(missing),
                   family_hint(available, fmt) or _missing_hint(entries, absent, fmt))
    hidden = next((layer.output_dim for layer in all_layers(model) if layer.name == ln.EMBEDDING_TOKEN), 0)
    present = [e for e in entries if not absent & set(e.names) and id(e.variable) not in misfit]
    for entry in present:  # every name and shape checked before any tensor is read
        _check_shapes(source, entry, fmt, available, keep_tokens, hidden)
    chosen = {id(e) for e in present}
    for entry in entries:
        if id(entry) not in chosen:
            report.new.append((entry.variable.path, tuple(entry.variable.shape)))
            continue
        assignments.append((entry.variable, _read(source, entry, fmt, available, keep_tokens)))
        report.loaded.extend((source.file_name(n), tuple(available[n])) for n in entry.names)
    for variable, value in assignments:
        variable.assign(value.astype(variable.dtype))
    covered = {id(e.variable) for e in entries}
    report.new.extend((v.path, tuple(v.shape)) for v in model.weights if id(v) not in covered)
    used = {n for e in present for n in e.names}
    for name in sorted(available, key=source.file_name):
        if name not in used:
            (report.skipped if fmt.skip.search(name) else report.unused).append(source.file_name(name))
    if verbose:
        log_report(report)
    return report


def family_hint(available, fmt: Format) -> str:
    """Which family a checkpoint's names (``available``) look like, where that is not ``fmt``'s: a hint for an
    error, "" where they fit.

    Example:
    >>> fmt = Format("hf", "config.json", {}, bool, frozenset(), re.compile("$^"), {})
    >>> family_hint(["albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"], fmt)[:60]
    "its names are those of model='albert', not model='bert': bui"
    """
    from kerasbert.weights.names import looks_like

    found, family = looks_like(available), re.sub(r"_(encoder|decoder)$", "", fmt.family)  # a T5's part: its family
    if family in found.split(" or ") or (found == "albert" and family == "albert_unshared"):
        return ""
    families = " or ".join(f"model={name!r}" for name in found.split(" or "))
    return (f"its names are those of {families}, not model={fmt.family!r}: build the model with {families} "
            f"(the family's own config)")


def _missing_hint(entries: list[Entry], absent: set[str], fmt: Format) -> str:
    """num_hidden_layers when the missing variables are whole transformer blocks, else how to load without a head."""
    def block(entry: Entry) -> int | None:
        match = ln.parse_block(entry.layer)
        return match[0] if match else None

    hit = {block(e) for e in entries if absent & set(e.names)}
    whole = {block(e) for e in entries} - {block(e) for e in entries if not set(e.names) <= absent}
    if hit and None not in hit and hit <= whole:
        layers = len({block(e) for e in entries} - {None})
        return (f"the model's num_hidden_layers is {layers}, the checkpoint has {layers - len(hit)} layers; build the "
                f"model from the checkpoint's own {fmt.config_file}")
    return "build without that head, or pass allow_missing=True to keep them newly initialized"


def log_report(report: LoadReport) -> None:
    """Google run_classifier's "**** Trainable Variables ****" log, plus the unused list."""
    logger.info("**** Loading %s ****", report.checkpoint)
    for name, shape in report.loaded:
        logger.info("  name = %s, shape = %s, *INIT_FROM_CKPT*", name, shape)
    for name, shape in report.new:
        logger.info("  name = %s, shape = %s, *NEW*", name, shape)
    if report.unused:
        logger.info("  %d checkpoint variables not used: %s", len(report.unused), ", ".join(report.unused))


def model_tensors(model: keras.Model, fmt: Format) -> dict[str, np.ndarray]:
    """The model's weights under ``fmt``'s names and layouts, float32, for writing a checkpoint."""
    tensors = {}
    for entry in name_table(model, fmt.names):
        value = keras.ops.convert_to_numpy(entry.variable).astype(np.float32)
        for name, part in zip(entry.names, np.split(value, len(entry.names), axis=-1), strict=True):
            if name in tensors:  # an unshared ALBERT: L blocks, one group of names
                raise fail(CheckpointError, f"{entry.layer}", f"a weight of its own under {name}",
                           "another layer's weight there too", f"the {fmt.family} format holds one block; save "
                           "the model as .keras instead")
            tensors[name] = np.ascontiguousarray(part.T if fmt.transposed(name) else part)
    if not tensors:
        raise fail(CheckpointError, "model", f"layers with bert4keras names ({ln.EMBEDDING_TOKEN}, ...)", "none")
    return tensors
