"""Use an export folder written by `kerasbert.serving.export.export`: check it, load it, predict with it.

`open_export` checks ``kerasbert-export.json`` and the model before any request, so a folder that is not an export,
is cut short, was made for another task, or lists other labels than its model answers fails at once with a named
error; ``kerasbert serve`` and ``kerasbert predict --model`` both open exports through it. `predict_export` gives
the same rows as `kerasbert.predict` does for a run folder (both made by `kerasbert.text.predictions`). An OpenVINO
or ONNX export is opened and run without importing TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kerasbert.choices import PREDICT_BATCH_SIZE, input_fields
from kerasbert.errors import ConfigError, fail
from kerasbert.log import logger
from kerasbert.perf.onednn import bf16_pays
from kerasbert.serving.folder import EXPORT_INFO, MODEL_FILES, VECTOR_TASK, read_info, vocab_checksum, vocab_file
from kerasbert.serving.portable_decoder import PortableSeq2Seq, check_search, decoder_files, search_batch
from kerasbert.serving.runtime import PortableExport, PortableVectors, check_texts, vector_rows
from kerasbert.serving.task_exports import TASK_EXPORTS, part
from kerasbert.text.predictions import label_row, spans_row

__all__ = ["Export", "Served", "open_export", "predict_export"]


class Export:
    """A loaded export: its ``info`` (``kerasbert-export.json``) and its ``serving_default`` signature."""

    def __init__(self, path: str, info: dict, signature):
        self.path, self.info, self.signature = path, info, signature

    def predict(self, rows: Sequence[dict], batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"text"[, "text_b"]}`` rows -> predictions, as `kerasbert.predict` writes them."""
        import tensorflow as tf

        fields = input_fields(self.info["task"], self.info["pairs"])
        check_texts(rows, fields)
        if self.info["task"] == "seq2seq":  # sources times beams, and their cache, within the bounds of generation
            batch_size = search_batch(self.info, batch_size)
        out = []
        for begin in range(0, len(rows), batch_size):
            batch = rows[begin:begin + batch_size]
            inputs = {field: tf.constant([row.get(field, "") for row in batch]) for field in fields}
            result = {name: value.numpy() for name, value in self.signature(**inputs).items()}
            out.extend(self._rows(batch, result))
        return out

    def _rows(self, batch: Sequence[dict], result: dict) -> list[dict]:
        rows_of = part(self.info["task"], "saved_rows")
        if rows_of is not None:
            return [{**row, **prediction} for row, prediction in zip(batch, rows_of(self.info, batch, result),
                                                                     strict=True)]
        if self.info["task"] == VECTOR_TASK:
            return vector_rows(batch, result["vector"])
        if self.info["task"] == "seq2seq":
            return [{**row, "target": target.decode()} for row, target in zip(batch, result["target"], strict=True)]
        if self.info["task"] == "cls":
            return [{**row, **label_row(probabilities, self.info["labels"])}
                    for row, probabilities in zip(batch, result["probabilities"], strict=True)]
        predictions = []
        for i, row in enumerate(batch):
            spans = [(int(result["entity_start"][i, k]), int(result["entity_end"][i, k]),
                      result["entity_label"][i, k].decode()) for k in range(int(result["entity_count"][i]))]
            predictions.append({**row, **spans_row(row["text"], spans)})
        return predictions


Served = Export | PortableExport | PortableSeq2Seq  # what `open_export` gives: each has info, path, predict


def _open_portable(path: str, info: dict) -> PortableExport | PortableSeq2Seq:
    """An OpenVINO or ONNX export, its model files and vocabulary checked before loading."""
    seq2seq = info["task"] == "seq2seq"
    if seq2seq and not isinstance(info.get("decoder"), dict):
        raise fail(ConfigError, os.path.join(path, EXPORT_INFO), "a seq2seq export's decoder (its files and names)",
                   "none", "export the run again")
    models = decoder_files(path, info["decoder"]).values() if seq2seq else [MODEL_FILES[info["format"]]]
    vocab = vocab_file(info)
    for name in (*models, vocab):  # the decoder's files: paths checked to lie in the folder
        if not os.path.isfile(os.path.join(path, name)):
            raise fail(ConfigError, path, f"an {info['format']} export with {os.path.basename(name)}", "no such file",
                       "export the run again")
    checksum = vocab_checksum(os.path.join(path, vocab))
    if checksum != info.get("vocab_sha256"):
        raise fail(ConfigError, os.path.join(path, vocab), "the vocabulary the model was exported with "
                   f"(sha256 {str(info.get('vocab_sha256'))[:12]}...)", f"another one (sha256 {checksum[:12]}...)",
                   "export the run again")
    if info["task"] == VECTOR_TASK:
        return PortableVectors(path, info)
    return PortableSeq2Seq(path, info) if seq2seq else PortableExport(path, info)


def _output_width(served: Served) -> int | None:
    """How many scores a token or a text gets from the model: one per label (None: the labels are in the graph, or
    a seq2seq model writes text); a span model's logits ``[B, K, S, S]`` have one head per label."""
    if served.info["task"] in ("seq2seq", VECTOR_TASK):  # text, or vectors: no labels
        return None
    width = part(served.info["task"], "width")
    if isinstance(served, PortableExport):
        ids, segments = served.tokenizer.encode("warm up")
        shape = served.run_model(np.array([ids], np.int32), np.array([segments], np.int32)).shape
        if width is not None or served.info["task"] in TASK_EXPORTS:
            return width(shape[1:]) if width is not None else None
        return int(shape[1] if served.info["task"] == "span" else shape[-1])
    if served.info["task"] in TASK_EXPORTS:
        return None  # its SavedModel names its answers itself
    if served.info["task"] != "cls":
        return None  # a SavedModel tagger names its entities' labels itself; a seq2seq model has none
    return int(served.signature.structured_outputs["probabilities"].shape[-1])


def _check_answers(served: Served) -> None:
    """The labels of ``kerasbert-export.json`` fit the model's outputs, and one text gets an answer."""
    info_path, labels = os.path.join(served.path, EXPORT_INFO), served.info["labels"]
    try:
        width = _output_width(served)
    except Exception as e:  # noqa: BLE001 - each runtime raises its own error types
        raise fail(ConfigError, served.path, "an export whose model answers a text", f"{type(e).__name__}: {e}",
                   "export the run again") from None
    if width is not None and width != len(labels):
        raise fail(ConfigError, f"{info_path} labels", f"{width} labels, one per score of the model",
                   f"{len(labels)}: {str(labels)[:80]}", "the file belongs to another model: export the run again")
    transitions = np.shape(served.info.get("crf_transitions"))  # what a portable export's Viterbi reads
    if isinstance(served, PortableExport) and served.info.get("crf") and transitions != (len(labels),) * 2:
        raise fail(ConfigError, f"{info_path} crf_transitions", f"a {len(labels)} x {len(labels)} matrix",
                   f"shape {transitions}", "export the run again")
    try:
        served.predict([dict.fromkeys(input_fields(served.info["task"], served.info["pairs"]), "warm up")])
    except Exception as e:  # noqa: BLE001 - any failure here is a bad export
        raise fail(ConfigError, served.path, "an export that answers a text", f"{type(e).__name__}: {e}",
                   "export the run again") from None


def open_export(path: str | os.PathLike, task: str | None = None) -> Served:
    """Check and load an export folder (`kerasbert.serving.folder.read_info`); ``task`` (``"cls"``/``"ner"``), when
    given, must be the export's.

    A SavedModel export gives an `Export`, an OpenVINO or ONNX one a `kerasbert.serving.runtime.PortableExport`;
    both have ``info``, ``path`` and ``predict(rows, batch_size)``. The export answers one text before it is
    returned, and its labels must be as many as its model's scores.
    """
    path = os.fspath(path)
    info = read_info(path, task)
    portable = info.get("format", "saved_model") in MODEL_FILES
    served = _open_portable(path, info) if portable else _open_saved_model(path, info)
    _check_answers(served)
    return served


def _open_saved_model(path: str, info: dict) -> Export:
    """A SavedModel export with its ``serving_default`` signature, a seq2seq one's search checked against the bounds
    of generation first (`check_search`); TensorFlow and tensorflow-text are imported here."""
    if info["task"] == "seq2seq":
        check_search(path, info)
    import tensorflow as tf

    try:
        import tensorflow_text  # noqa: F401  (registers the word-piece ops of the SavedModel's tokenizer)
    except ImportError as e:
        raise fail(ConfigError, "open_export", "tensorflow-text, for the tokenizer inside the SavedModel",
                   f"{type(e).__name__}: {e}", 'pip install "kerasbert[serve]"') from None
    try:
        signature = tf.saved_model.load(path).signatures["serving_default"]
    except (OSError, ValueError, KeyError, RuntimeError, tf.errors.OpError) as e:
        raise fail(ConfigError, path, "a readable SavedModel with a serving_default signature",
                   f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", "export the run again") from None
    if info.get("precision") == "bf16" and not bf16_pays():  # the measurement export asks of a bf16 SavedModel
        logger.warning("%s: a bfloat16 SavedModel, on a CPU where TensorFlow's bfloat16 measures no faster than "
                       "float32: it runs slower than the run's float32 here; export the run again with --precision "
                       "f32", path)
    return Export(path, info, signature)


def predict_export(path: str | os.PathLike, texts: Sequence[str | dict],
                   batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
    """Predict raw texts (str, or ``{"text", "text_b"}``) with an export folder, as `kerasbert.predict` does.

    Example:
    >>> predict_export("/no/export", ["text"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/export: expected an export folder ..., found no such folder
    """
    rows = [row if isinstance(row, dict) else {"text": row} for row in texts]
    info = read_info(os.fspath(path))
    check_texts(rows, input_fields(info["task"], info["pairs"]))  # before the slow load
    return open_export(path).predict(rows, batch_size)
