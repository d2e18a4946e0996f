"""Google TF1 BERT checkpoints <-> a kerasbert model, driven by one name table.

``GOOGLE_NAMES`` maps every (layer, weight) of the bert4keras-named graph to the Google
variable(s) it comes from. Three transforms, and only these, sit between the two:

- a tuple of names is concatenated on the last axis (the fused Q/K/V kernel and bias);
- ``TRANSPOSED`` names are stored ``[out, in]`` by Google (``cls/seq_relationship/output_weights``);
- ``VOCAB_ROWS`` names are sliced by ``keep_tokens`` when the vocabulary is shrunk.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import tempfile
from collections.abc import Sequence

import keras
import numpy as np

from kerasbert.errors import CheckpointError, fail
from kerasbert.log import logger

_LAYER = "bert/encoder/layer_{i}"
GOOGLE_NAMES: dict[tuple[str, str], str | tuple[str, ...]] = {
    ("Embedding-Token", "embeddings"): "bert/embeddings/word_embeddings",
    ("Embedding-Segment", "embeddings"): "bert/embeddings/token_type_embeddings",
    ("Embedding-Position", "embeddings"): "bert/embeddings/position_embeddings",
    ("Embedding-Norm", "gamma"): "bert/embeddings/LayerNorm/gamma",
    ("Embedding-Norm", "beta"): "bert/embeddings/LayerNorm/beta",
    ("Transformer-{i}-MultiHeadSelfAttention", "qkv_kernel"): tuple(
        f"{_LAYER}/attention/self/{p}/kernel" for p in ("query", "key", "value")),
    ("Transformer-{i}-MultiHeadSelfAttention", "qkv_bias"): tuple(
        f"{_LAYER}/attention/self/{p}/bias" for p in ("query", "key", "value")),
    ("Transformer-{i}-MultiHeadSelfAttention", "output_kernel"): f"{_LAYER}/attention/output/dense/kernel",
    ("Transformer-{i}-MultiHeadSelfAttention", "output_bias"): f"{_LAYER}/attention/output/dense/bias",
    ("Transformer-{i}-MultiHeadSelfAttention-Norm", "gamma"): f"{_LAYER}/attention/output/LayerNorm/gamma",
    ("Transformer-{i}-MultiHeadSelfAttention-Norm", "beta"): f"{_LAYER}/attention/output/LayerNorm/beta",
    ("Transformer-{i}-FeedForward", "intermediate_kernel"): f"{_LAYER}/intermediate/dense/kernel",
    ("Transformer-{i}-FeedForward", "intermediate_bias"): f"{_LAYER}/intermediate/dense/bias",
    ("Transformer-{i}-FeedForward", "output_kernel"): f"{_LAYER}/output/dense/kernel",
    ("Transformer-{i}-FeedForward", "output_bias"): f"{_LAYER}/output/dense/bias",
    ("Transformer-{i}-FeedForward-Norm", "gamma"): f"{_LAYER}/output/LayerNorm/gamma",
    ("Transformer-{i}-FeedForward-Norm", "beta"): f"{_LAYER}/output/LayerNorm/beta",
    ("Pooler-Dense", "kernel"): "bert/pooler/dense/kernel",
    ("Pooler-Dense", "bias"): "bert/pooler/dense/bias",
    ("NSP-Proba", "kernel"): "cls/seq_relationship/output_weights",
    ("NSP-Proba", "bias"): "cls/seq_relationship/output_bias",
    ("MLM-Dense", "kernel"): "cls/predictions/transform/dense/kernel",
    ("MLM-Dense", "bias"): "cls/predictions/transform/dense/bias",
    ("MLM-Norm", "gamma"): "cls/predictions/transform/LayerNorm/gamma",
    ("MLM-Norm", "beta"): "cls/predictions/transform/LayerNorm/beta",
    ("MLM-Bias", "bias"): "cls/predictions/output_bias",
}
TRANSPOSED = {"cls/seq_relationship/output_weights"}
VOCAB_ROWS = {"bert/embeddings/word_embeddings", "cls/predictions/output_bias"}

# Training state in fine-tuned checkpoints: skipped quietly, never reported as unused.
_OPTIMIZER_STATE = re.compile(r"(/adam_[mv]|/Adam(_1)?|/Momentum|/LAMB(_1)?)$|^(global_step|good_steps|bad_steps|"
                              r"loss_scale|current_loss_scale)$")

# Which config value a shape mismatch on a variable most likely comes from.
_HINTS = {
    "word_embeddings": "vocab_size in bert_config.json does not match this checkpoint",
    "output_bias": "vocab_size in bert_config.json does not match this checkpoint",
    "position_embeddings": "max_position_embeddings in bert_config.json does not match this checkpoint",
    "token_type_embeddings": "type_vocab_size in bert_config.json does not match this checkpoint",
}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One row of the name table, resolved against a model: a weight and its Google names."""

    layer: str
    variable: keras.Variable
    names: tuple[str, ...]


@dataclasses.dataclass
class LoadReport:
    """What `load_google_checkpoint` did; the same lists it logs.

    Attributes:
        checkpoint: str. the resolved checkpoint prefix.
        loaded: list of (google name, shape). variables initialized from the checkpoint.
        new: list of (variable path, shape). model variables left at their initial value.
        unused: list of str. checkpoint variables no model variable took (optimizer state excluded).
        skipped: list of str. optimizer slots and counters skipped quietly.
    """

    checkpoint: str
    loaded: list = dataclasses.field(default_factory=list)
    new: list = dataclasses.field(default_factory=list)
    unused: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)


def _layers(model: keras.Model) -> list[keras.layers.Layer]:
    """All layers, nested models flattened, each once."""
    seen, out = set(), []
    for layer in model.layers:
        for sub in _layers(layer) if isinstance(layer, keras.Model) else [layer]:
            if id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
    return out


def name_table(model: keras.Model) -> list[Entry]:
    """The rows of ``GOOGLE_NAMES`` that apply to ``model``, in graph order."""
    entries = []
    for layer in _layers(model):
        match = re.fullmatch(r"Transformer-(\d+)-(.*)", layer.name)
        key = f"Transformer-{{i}}-{match.group(2)}" if match else layer.name
        for variable in layer.weights:
            names = GOOGLE_NAMES.get((key, variable.name))
            if names is not None:
                names = names if isinstance(names, tuple) else (names,)
                index = match.group(1) if match else ""
                entries.append(Entry(layer.name, variable, tuple(n.format(i=index) for n in names)))
    return entries


def resolve_checkpoint(path: str | os.PathLike) -> str:
    """Return the checkpoint prefix for a prefix, a folder, or an ``.index`` / ``.data-*`` file."""
    path = re.sub(r"\.(index|data-\d{5}-of-\d{5})$", "", os.fspath(path))
    if os.path.isdir(path):
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(path)
        indexes = sorted(glob.glob(os.path.join(glob.escape(path), "*.index")))
        if latest is None and len(indexes) == 1:
            latest = indexes[0][: -len(".index")]
        if latest is None:
            found = f"{len(indexes)} checkpoints" if indexes else "no *.index file"
            raise fail(CheckpointError, path, "a folder holding one checkpoint (bert_model.ckpt.index)", found,
                       "pass the checkpoint prefix, e.g. .../bert_model.ckpt")
        return latest
    if not os.path.isfile(path + ".index"):
        raise fail(CheckpointError, path, "a TF checkpoint (prefix with .index and .data-* files)",
                   "no such checkpoint", "pass e.g. chinese_L-12_H-768_A-12/bert_model.ckpt")
    return path


def _expected_shape(entry: Entry, name: str) -> tuple[int, ...]:
    """The shape the Google variable ``name`` must have for ``entry``'s model weight."""
    shape = tuple(entry.variable.shape)
    if len(entry.names) > 1:
        shape = (*shape[:-1], shape[-1] // len(entry.names))
    return shape[::-1] if name in TRANSPOSED else shape


def _read(reader, entry: Entry, keep_tokens, prefix: str) -> np.ndarray:
    """Read, check and transform the Google variables of one entry into the model weight's value."""
    parts = []
    for name in entry.names:
        value = reader.get_tensor(name)
        expected = _expected_shape(entry, name)
        if name in VOCAB_ROWS and keep_tokens is not None:
            if max(keep_tokens) >= value.shape[0]:
                raise fail(CheckpointError, "keep_tokens", f"ids below the checkpoint's vocabulary {value.shape[0]}",
                           f"max id {max(keep_tokens)}", f"{name} in {prefix} has {value.shape[0]} rows")
            value = value[np.asarray(keep_tokens)]
        if tuple(value.shape) != expected:
            hint = _HINTS.get(name.rsplit("/", 1)[-1], "the config's sizes do not match this checkpoint")
            raise CheckpointError(f"{entry.layer} expects {list(expected)}, checkpoint has {list(value.shape)} "
                                  f"({name} in {prefix}): {hint}")
        parts.append(value.T if name in TRANSPOSED else value)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def load_google_checkpoint(
    model: keras.Model,
    checkpoint_path: str | os.PathLike,
    *,
    keep_tokens: Sequence[int] | None = None,
    allow_missing: bool = False,
    verbose: bool = True,
) -> LoadReport:
    """Load a Google TF1 BERT checkpoint into a model built by kerasbert (heads allowed).

    Logs, like Google's run_classifier, one line per variable (``*INIT_FROM_CKPT*`` or ``*NEW*``)
    and the checkpoint variables left unused. Nothing is assigned unless every check passes.

    Args:
        model: keras.Model. a model with kerasbert's layer names.
        checkpoint_path: str. a prefix (``bert_model.ckpt``), a folder, or an ``.index``/``.data-*`` file.
        keep_tokens: list of int. the vocabulary rows the model kept (as given to the build).
        allow_missing: bool. leave model variables absent from the checkpoint at their initial value.
        verbose: bool. log the per-variable lines (logger ``"kerasbert"``, level INFO).

    Returns:
        A `LoadReport`.

    Example:
    >>> import tempfile
    >>> from kerasbert import build_transformer_model
    >>> folder = tempfile.mkdtemp()
    >>> prefix = save_google_checkpoint(build_transformer_model("tiny", verbose=False), folder)
    >>> report = load_google_checkpoint(build_transformer_model("tiny", verbose=False), prefix, verbose=False)
    >>> report.loaded[0], report.new, report.unused[:1]
    (('bert/embeddings/word_embeddings', (128, 32)), [], [])
    """
    import tensorflow as tf

    prefix = resolve_checkpoint(checkpoint_path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as e:  # a corrupt or foreign file: one line, not a TF trace
        raise fail(CheckpointError, prefix, "a readable TF checkpoint", f"{type(e).__name__}: {e}") from None
    available = reader.get_variable_to_shape_map()
    entries = name_table(model)
    missing = [n for e in entries for n in e.names if n not in available]
    if missing and not allow_missing:
        raise fail(CheckpointError, prefix, "every variable the model needs", f"{len(missing)} missing: "
                   + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""),
                   "build without that head, or pass allow_missing=True to keep them newly initialized")
    report, assignments = LoadReport(prefix), []
    for entry in entries:
        if any(n in missing for n in entry.names):
            report.new.append((entry.variable.path, tuple(entry.variable.shape)))
            continue
        assignments.append((entry.variable, _read(reader, entry, keep_tokens, prefix)))
        report.loaded.extend((n, tuple(available[n])) for n in entry.names)
    for variable, value in assignments:
        variable.assign(value.astype(variable.dtype))
    covered = {id(e.variable) for e in entries}
    report.new.extend((v.path, tuple(v.shape)) for v in model.weights if id(v) not in covered)
    used = {n for n, _ in report.loaded}
    for name in sorted(available):
        if name not in used:
            (report.skipped if _OPTIMIZER_STATE.search(name) else report.unused).append(name)
    if verbose:
        _log_report(report)
    return report


def _log_report(report: LoadReport) -> None:
    """Google run_classifier's "**** Trainable Variables ****" log, plus the unused list."""
    logger.info("**** Loading %s ****", report.checkpoint)
    for name, shape in report.loaded:
        logger.info("  name = %s, shape = %s, *INIT_FROM_CKPT*", name, shape)
    for name, shape in report.new:
        logger.info("  name = %s, shape = %s, *NEW*", name, shape)
    if report.unused:
        logger.info("  %d checkpoint variables not used: %s", len(report.unused), ", ".join(report.unused))


def save_google_checkpoint(model: keras.Model, path: str | os.PathLike) -> str:
    """Write the model's BERT weights as a Google TF1 checkpoint (Google's names and shapes).

    The files appear all at once or not at all: they are written in a temporary folder
    beside ``path`` and renamed into place. Heads without a Google name are not saved.

    Args:
        model: keras.Model. a model with kerasbert's layer names.
        path: str. the checkpoint prefix (``out/bert_model.ckpt``) or an existing folder.

    Returns:
        The prefix written; ``tf.train.load_checkpoint`` and bert4keras read it.

    Example:
    >>> import os, tempfile
    >>> from kerasbert import build_transformer_model
    >>> folder = tempfile.mkdtemp()
    >>> prefix = save_google_checkpoint(build_transformer_model("tiny", verbose=False), folder)
    >>> prefix == os.path.join(folder, "bert_model.ckpt"), sorted(os.listdir(folder))[1:]
    (True, ['bert_model.ckpt.index', 'checkpoint'])
    """
    import tensorflow as tf

    path = os.fspath(path)
    prefix = os.path.join(path, "bert_model.ckpt") if os.path.isdir(path) else path
    folder = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(folder):
        raise fail(CheckpointError, prefix, "a path in an existing folder", f"no folder {folder}")
    tensors = {}
    for entry in name_table(model):
        value = keras.ops.convert_to_numpy(entry.variable).astype(np.float32)
        for name, part in zip(entry.names, np.split(value, len(entry.names), axis=-1), strict=True):
            tensors[name] = part.T if name in TRANSPOSED else part
    if not tensors:
        raise fail(CheckpointError, "model", "layers with bert4keras names (Embedding-Token, ...)", "none")
    staging = tempfile.mkdtemp(prefix=".kerasbert-save-", dir=folder)
    try:
        staged = os.path.join(staging, os.path.basename(prefix))
        names = sorted(tensors)
        tf.raw_ops.SaveV2(prefix=staged, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(tensors[n]) for n in names])
        with open(os.path.join(staging, "checkpoint"), "w") as f:
            base = os.path.basename(prefix)
            f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
        for file in sorted(os.listdir(staging), key=lambda n: n == "checkpoint"):  # state file last
            os.replace(os.path.join(staging, file), os.path.join(folder, file))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return prefix
