"""Load any checkpoint kerasbert reads: the format is told from the path, the names from the model's family.

A Google TF1 checkpoint is a prefix (``bert_model.ckpt``), its ``.index``/``.data-*`` file, or a folder holding
one; Hugging Face weights are a folder with ``model.safetensors`` / ``pytorch_model.bin`` (or their sharded
indexes), or one of those files. Both go through the same name-table loader (`kerasbert.weights.table`), so the
log, the `LoadReport` and the errors are the same.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from kerasbert.weights.table import LoadReport, load_into


def checkpoint_format(path: str | os.PathLike) -> str:
    """``"hf"`` for Hugging Face weights, else ``"google"``.

    Example:
    >>> checkpoint_format("bert-base-chinese/model.safetensors"), checkpoint_format("chinese_L-12/bert_model.ckpt")
    ('hf', 'google')
    """
    from kerasbert.weights.hf import is_hf_checkpoint  # not at import: kerasbert.modeling imports this module

    return "hf" if is_hf_checkpoint(path) else "google"


def load_checkpoint(model, path: str | os.PathLike, *, keep_tokens: Sequence[int] | None = None,
                    allow_missing: bool = False, verbose: bool = True) -> LoadReport:
    """Load a Google or Hugging Face checkpoint into a model built by kerasbert (heads allowed), through the
    names of the model's family (`kerasbert.modeling.families`).

    Logs one line per variable (``*INIT_FROM_CKPT*`` or ``*NEW*``) and the checkpoint's unused variables.
    Nothing is assigned unless every check passes.

    Args:
        model: keras.Model. a model with kerasbert's layer names.
        path: str. a Google checkpoint (prefix, folder, ``.index``) or Hugging Face weights (folder or file).
        keep_tokens: list of int. the vocabulary rows the model kept (as given to the build).
        allow_missing: bool. leave model variables absent from the checkpoint at their initial value.
        verbose: bool. log the per-variable lines (logger ``"kerasbert"``, level INFO).

    Returns:
        A `kerasbert.LoadReport`.

    Example:
    >>> import tempfile
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.weights.hf import save_hf_checkpoint
    >>> folder = save_hf_checkpoint(build_transformer_model("tiny", verbose=False), tempfile.mkdtemp())
    >>> report = load_checkpoint(build_transformer_model("tiny", verbose=False), folder, verbose=False)
    >>> report.loaded[0], report.new, report.unused
    (('bert.embeddings.word_embeddings.weight', (128, 32)), [], [])
    """
    from kerasbert.modeling import families
    from kerasbert.weights.hf import open_hf, weight_files

    options = {"keep_tokens": keep_tokens, "allow_missing": allow_missing, "verbose": verbose}
    if os.path.isdir(path) and not glob.glob(os.path.join(glob.escape(os.fspath(path)), "*.index")):
        weight_files(os.fspath(path))  # no Google checkpoint in the folder: says which HF files it looked for
    if checkpoint_format(path) == "hf":
        return load_into(model, *open_hf(path, families.of_model(model)), **options)
    from kerasbert.weights.google import load_google_checkpoint

    return load_google_checkpoint(model, path, **options)
