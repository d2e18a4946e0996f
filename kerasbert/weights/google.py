"""Google TF1 BERT checkpoints <-> a kerasbert model: the `GOOGLE` format of `kerasbert.weights.table`, and each
family's (`google_format`: ALBERT's shared group, ELECTRA's ``electra/`` names, ...).

`kerasbert.weights.names` maps every (layer, weight) of the bert4keras-named graph to the Google variable(s) it
comes from. Google stores one variable transposed (``cls/seq_relationship/output_weights``, ``[out, in]``); the
word embeddings and the MLM output bias have one row per vocabulary entry.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections.abc import Sequence

import keras
import numpy as np

from kerasbert import layer_names as ln
from kerasbert.errors import CheckpointError, fail
from kerasbert.files import publish_folder
from kerasbert.modeling import families
from kerasbert.modeling.families import Family
from kerasbert.weights.names import GOOGLE_NAMES, google_names
from kerasbert.weights.table import Format, LoadReport, load_into, model_tensors

TRANSPOSED = {"cls/seq_relationship/output_weights"}
GOOGLE = Format(
    name="google",
    config_file="bert_config.json",
    names=GOOGLE_NAMES,
    transposed=TRANSPOSED.__contains__,
    vocab_rows=frozenset({"bert/embeddings/word_embeddings", "cls/predictions/output_bias"}),
    # training state in fine-tuned checkpoints
    skip=re.compile(r"(/adam_[mv]|/Adam(_1)?|/Momentum|/LAMB(_1)?)$|^(global_step|good_steps|bad_steps|"
                    r"loss_scale|current_loss_scale)$"),
    hints={"word_embeddings": "vocab_size", "output_bias": "vocab_size",
           "position_embeddings": "max_position_embeddings", "token_type_embeddings": "type_vocab_size",
           "intermediate/": "intermediate_size", "/output/dense/kernel": "intermediate_size"},
)


def google_format(family: Family) -> Format:
    """The Google format of a family's checkpoints (`kerasbert.weights.names.google_names`).

    Example:
    >>> sorted(google_format(families.get("electra")).vocab_rows)
    ['cls/predictions/output_bias', 'electra/embeddings/word_embeddings']

    A family without a Google TF1 form (`kerasbert.modeling.families.Family.checkpoint` ``""``: Hugging Face's
    RoBERTa, XLM-R, DistilBERT, ...) is a CheckpointError that names the Hugging Face route.
    """
    if not family.checkpoint:
        having = [name for name in families.FAMILY_NAMES if families.get(name).checkpoint]
        raise fail(CheckpointError, "model", f"a family with a Google TF1 checkpoint ({', '.join(having)})",
                   f"model={family.name!r}, whose checkpoints are Hugging Face folders alone",
                   "save it with kerasbert.save_hf_checkpoint and load it from that folder (config.json with "
                   "model.safetensors or pytorch_model.bin)")
    if family.architecture == "gpt":  # each generative architecture's names in a table of its own
        from kerasbert.weights.gpt_names import gpt_format

        return gpt_format(family, GOOGLE)
    if family.architecture == "t5":
        from kerasbert.weights.t5_names import t5_format

        return t5_format(family, GOOGLE)
    names = google_names(family)
    return dataclasses.replace(GOOGLE, names=names, family=family.name,
                               vocab_rows=frozenset({names[(ln.EMBEDDING_TOKEN, "embeddings")],
                                                     "cls/predictions/output_bias"}))


class TFCheckpoint:
    """A TF checkpoint as a `kerasbert.weights.table.Source`."""

    def __init__(self, prefix: str):
        import tensorflow as tf

        self.path = prefix
        try:
            self._reader = tf.train.load_checkpoint(prefix)
        except Exception as e:  # a corrupt or foreign file: one line, not a TF trace
            raise fail(CheckpointError, prefix, "a readable TF checkpoint", f"{type(e).__name__}: {e}") from None

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(shape) for name, shape in self._reader.get_variable_to_shape_map().items()}

    def file_name(self, name: str) -> str:
        return name  # the table's names are the file's own

    def get(self, name: str) -> np.ndarray:
        try:
            return self._reader.get_tensor(name)
        except Exception as e:  # a truncated or damaged .data file: one line, not a TF trace
            first = str(e).splitlines()[0] if str(e) else ""
            raise fail(CheckpointError, self.path, f"a readable value of {name}", f"{type(e).__name__}: {first}",
                       "the .data file is missing, truncated or damaged: download the checkpoint again") from None


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
    source = TFCheckpoint(resolve_checkpoint(checkpoint_path))
    fmt = google_format(families.of_model(model))
    return load_into(model, source, fmt, keep_tokens=keep_tokens, allow_missing=allow_missing, verbose=verbose)


def save_google_checkpoint(model: keras.Model, path: str | os.PathLike) -> str:
    """Write the model's BERT weights as a Google TF1 checkpoint (Google's names and shapes).

    The files appear all at once or not at all: they are written in a temporary folder
    beside ``path`` and renamed into place. Heads without a Google name are not saved.

    Args:
        model: keras.Model. a model with kerasbert's layer names.
        path: str. the checkpoint prefix (``out/bert_model.ckpt``: a name holding ``.ckpt``) or a folder, which gets
            ``bert_model.ckpt``; the folder is created if needed.

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
    path = os.fspath(path)
    is_prefix = ".ckpt" in os.path.basename(path.rstrip(os.sep)) and not os.path.isdir(path)
    prefix = path if is_prefix else os.path.join(path, "bert_model.ckpt")
    tensors = model_tensors(model, google_format(families.of_model(model)))
    with publish_folder(os.path.dirname(os.path.abspath(prefix)), last="checkpoint") as staging:
        write_google_tensors(tensors, os.path.join(staging, os.path.basename(prefix)))
    return prefix


def write_google_tensors(tensors: dict[str, np.ndarray], prefix: str) -> None:
    """Write ``tensors`` as a TF checkpoint at ``prefix``, with the ``checkpoint`` state file beside it."""
    import tensorflow as tf

    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    base = os.path.basename(prefix)
    with open(os.path.join(os.path.dirname(prefix), "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
