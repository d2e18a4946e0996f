"""The export folder's contract, which every writer and reader of an export shares: its information file
``kerasbert-export.json`` (`EXPORT_INFO`) and the fields every export records, the model file of an ONNX or OpenVINO
export (`MODEL_FILES`), the vocabulary's checksum, reading the information (`read_info`) and publishing a folder
whole (`publish_export`).

Every export records ``task``, ``labels`` and ``pairs``; ``format``, ``int8`` and ``precision`` say what the model
computes in (`kind_of`); ``vocab_sha256`` ties ``vocab.txt`` (or a SentencePiece model's file, or a Hugging Face
``tokenizer.json``: `vocab_file`) to the model; ``dev`` is the export's score, with ``dev_unscored`` saying why
when there is none. Nothing here imports TensorFlow or a runtime.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable

from kerasbert.choices import PRECISIONS
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.files import publish_folder
from kerasbert.log import logger
from kerasbert.serving.precision import fall_back

__all__ = ["EXPORT_INFO", "MODEL_FILES", "REJECTED", "VECTOR_TASK", "data_file", "kind_of", "publish_export",
           "read_info", "refuse_graph_tokenizer", "unscored_why", "vocab_checksum", "vocab_file", "vocab_name_of"]

EXPORT_INFO = "kerasbert-export.json"
MODEL_FILES = {"onnx": "model.onnx", "openvino": "model.xml"}  # the model of an ONNX or OpenVINO export, by format
VECTOR_TASK = "embedding"  # the task kerasbert-export.json records for every export that answers vectors
# the vocabulary beside a model: WordPiece's, SentencePiece's, or a Hugging Face tokenizer.json
VOCAB_FILES = ("vocab.txt", "spiece.model", "tokenizer.json")
REJECTED = ".rejected"  # the suffix of an export kept aside for its loss


def vocab_file(info: dict) -> str:
    """The vocabulary file an export holds beside its model, as ``kerasbert-export.json`` names it: ``vocab.txt``
    (WordPiece's) unless ``vocab_file`` says ``spiece.model`` (a SentencePiece model's, a T5 run's).

    Example:
    >>> vocab_file({"task": "cls"}), vocab_file({"vocab_file": "spiece.model"})
    ('vocab.txt', 'spiece.model')
    >>> vocab_file({"vocab_file": "../vocab.txt"})
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: kerasbert-export.json vocab_file: expected 'vocab.txt' or 'spiece.model' or \
'tokenizer.json', found '../vocab.txt'. export the run again
    """
    name = info.get("vocab_file", VOCAB_FILES[0])
    if name not in VOCAB_FILES:  # a name, never a path: an export reads nothing outside its folder
        raise fail(ConfigError, f"{EXPORT_INFO} vocab_file", " or ".join(map(repr, VOCAB_FILES)), repr(name),
                   "export the run again")
    return name


def vocab_name_of(path: str) -> str:
    """The name an export gives its copy of the vocabulary file ``path``: ``tokenizer.json`` for a Hugging Face
    tokenizer's, else ``vocab.txt``.

    Example:
    >>> vocab_name_of("/models/xlm-roberta-base/tokenizer.json"), vocab_name_of("/models/bert/vocab.txt")
    ('tokenizer.json', 'vocab.txt')
    """
    return VOCAB_FILES[2] if str(path).endswith(".json") else VOCAB_FILES[0]


def refuse_graph_tokenizer(format: str, tokenizer, source: str) -> None:
    """A ConfigError for a SavedModel export of a model whose tokenizer is a Hugging Face ``tokenizer.json``
    (RoBERTa's, XLM-R's, DeBERTa-v3's, ModernBERT's): the SavedModel cuts BERT's word pieces of a ``vocab.txt`` in
    its graph, and the ONNX and OpenVINO exports, which tokenize in Python, take any tokenizer."""
    from kerasbert.text.hf_tokenizer import HfTokenizer

    if format == "saved_model" and isinstance(tokenizer, HfTokenizer):
        raise fail(ConfigError, "--format saved_model", "a model of a vocab.txt (the SavedModel cuts its word pieces "
                   "in the graph with tensorflow-text)", f"{source}, whose tokenizer is the tokenizer.json "
                   f"{tokenizer.path}", "export it with --format onnx or --format openvino, which tokenize with the "
                   "tokenizer.json in Python")


def vocab_checksum(path: str) -> str:
    """The SHA-256 of a vocabulary file, as ``kerasbert-export.json`` records it (``vocab_sha256``)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_info(path: str, task: str | None = None) -> dict:
    """``kerasbert-export.json`` of ``path``, checked: a named error for a folder that is no export, or an export of
    another ``task`` when one is given.

    Example:
    >>> read_info("/no/export")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/export: expected an export folder ..., found no such folder
    """
    info_path = os.path.join(path, EXPORT_INFO)
    if not os.path.isfile(info_path):
        raise fail(ConfigError, path, f"an export folder with {EXPORT_INFO} (`kerasbert export RUN OUT`)",
                   "no such file" if os.path.isdir(path) else "no such folder")
    try:
        with open(info_path, encoding="utf-8") as f:
            info = json.load(f)
    except ValueError:
        info = None
    if not isinstance(info, dict) or not {"task", "labels", "pairs"} <= set(info):  # the keys every export has
        raise fail(ConfigError, info_path, "the JSON `kerasbert export` writes", "something else")
    if task is not None and info["task"] != task:
        raise fail(ConfigError, path, f"an export of a {task} model", f"one of a {info['task']} model")
    return info


def kind_of(info: dict) -> str:
    """An export's format, int8 and precision as words, from what ``kerasbert-export.json`` records.

    Example:
    >>> kind_of({"format": "openvino", "int8": True, "precision": "bf16"})
    'openvino int8 bf16'
    """
    precision = info.get("precision", PRECISIONS[0])
    return info["format"] + (" int8" if info["int8"] else "") + (f" {precision}" if precision != PRECISIONS[0] else "")


def data_file(path: str | None) -> str | None:
    """``path`` if a file is there (`kerasbert.finetune.runs.open_run` has already looked beside the run too), else
    None: the run's data file an export is scored, measured or calibrated on."""
    return path if path and os.path.isfile(path) else None


def unscored_why(args) -> str:
    """Why a run's export has no dev score (``dev_unscored``): its ``args.json`` names no dev file, or one that is
    not there."""
    return f"the run's dev file {args.dev!r} is not there" if args.dev else "the run was trained without a dev file"


def publish_export(out: str, info: dict, write: Callable[[str], None], loss: Callable[[dict], str | None],
                   bound_of: str, accept_loss: bool) -> None:
    """Write an export into ``out`` whole or not at all: ``write(staging)`` fills the folder and ``info``, then
    ``kerasbert-export.json`` is written. An export whose ``loss(info)`` is not None is kept aside (`_set_aside`)
    and a ModelError names where, unless ``accept_loss``, which publishes it with a warning; one whose precision
    ``auto`` chose bf16 is first written again in float32 (`kerasbert.serving.precision.fall_back`)."""
    with publish_folder(out) as staging:
        write(staging)
        lost = loss(info)
        if lost and fall_back(info, lost):
            logger.info("%s: %s", out, info["precision_choice"]["why"])
            _empty(staging)
            write(staging)
            lost = loss(info)
        with open(os.path.join(staging, EXPORT_INFO), "w", encoding="utf-8") as f:
            f.write(json.dumps(info, ensure_ascii=False, indent=1) + "\n")
        if lost and not accept_loss:
            kept = _set_aside(staging, out)
            raise fail(ModelError, out, f"an {kind_of(info)} export within the bound of {bound_of}", lost,
                       f"not published; kept at {kept}: pass --accept-loss to publish such an export, or export "
                       "without --int8/--precision bf16")
    if lost:
        logger.warning("%s: published with its loss (--accept-loss): %s", out, lost)
    if info.get("dev_unscored"):
        logger.warning("%s: could not score the export: %s", out, info["dev_unscored"])


def _set_aside(staging: str, out: str) -> str:
    """Move a rejected export from ``staging`` to the first free ``OUT.rejected`` (``OUT.rejected-2``, ...)."""
    kept, n = os.path.abspath(out) + REJECTED, 1
    while os.path.exists(kept if n == 1 else f"{kept}-{n}"):
        n += 1
    kept = kept if n == 1 else f"{kept}-{n}"
    os.replace(staging, kept)
    return kept


def _empty(folder: str) -> None:
    """Remove what ``folder`` holds, leaving it."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
