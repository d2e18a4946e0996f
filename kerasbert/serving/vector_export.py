"""Exports that answer with sentence vectors: ``kerasbert export`` of a checkpoint or sentence-transformers folder,
or of a run whose model answers vectors (``--task sim``).

The model exported is the `kerasbert.serving.embed.Embedder`'s: `kerasbert.modeling.heads.embedding` on the
encoder, or the run's own. A SavedModel holds the tokenizer (`kerasbert.serving.graph_text.GraphTokenizer`, cutting
each text to ``maxlen`` word pieces), so it answers raw text without kerasbert, with two signatures:

- ``serving_default``: ``text``, a batch of strings -> ``vector``, float32 ``[batch, H]``;
- ``ids``: ``token_ids``, ``segment_ids`` (int32 ``[batch, length]``, 0 as padding) -> ``vector``.

An ONNX or OpenVINO export holds the model alone beside ``vocab.txt``;
`kerasbert.serving.runtime.PortableVectors` tokenizes and runs it without TensorFlow. Such an export is measured
against the float32 Keras model on texts (``--calibration``, else a run's dev or training texts): the cosine of each
text's two vectors. With a mean under `VECTOR_MIN_COSINE` (int8 or bf16 can), the export is not published but kept
aside beside the target, as the other exports are for their loss (`kerasbert.serving.folder.publish_export`),
unless the caller accepts it. The mean is the bound, as a retrieval's quality follows the typical text; the worst
text is recorded beside it.

``kerasbert-export.json`` records ``task`` ``"embedding"`` (`kerasbert.serving.folder.VECTOR_TASK`), ``pooling``,
``normalize``, ``dimension`` (H), ``maxlen``, ``lowercase``, the vocabulary's SHA-256, the ``source`` folder and its
``source_kind``, the format, int8 and precision, and ``dev``: the ``cosine`` at worst and ``cosine_mean`` over the
``dev_texts`` measured; and a sentence-transformers folder's ``prompts``, ``default_prompt_name`` and
``include_prompt`` (`kerasbert.serving.prompts`), which `kerasbert.embed` on the export applies as on the folder.
Rows of `kerasbert.serving.exported.predict_export` and ``kerasbert serve`` carry ``"vector"``; they embed each
text as it is sent, so a client of a model with prompts puts the prompt before its texts itself.
"""

from __future__ import annotations

import json
import os

import numpy as np

from kerasbert.choices import LOSS_BOUND, PRECISIONS, VECTOR_MIN_COSINE
from kerasbert.errors import ConfigError, fail
from kerasbert.log import logger
from kerasbert.serving.embed import check_source, folder_kind, open_embedder
from kerasbert.serving.extras import require
from kerasbert.serving.folder import (
    MODEL_FILES,
    VECTOR_TASK,
    data_file,
    kind_of,
    publish_export,
    refuse_graph_tokenizer,
    vocab_checksum,
    vocab_name_of,
)
from kerasbert.serving.precision import int8_record
from kerasbert.serving.runtime import PortableVectors
from kerasbert.text.windows import ONE_WINDOW_VECTORS

__all__ = ["cosine_below_bound", "cosines", "describe", "export_vectors", "exported_kind", "vector_source"]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine of each row of ``a`` with the same row of ``b``, in float64.

    Example:
    >>> cosines(np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[2.0, 0.0], [1.0, -1.0]])).tolist()
    [1.0, 0.0]
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-30)


def describe(info: dict) -> str:
    """One line about a vector export, from its ``kerasbert-export.json``.

    Example:
    >>> line = describe({"pooling": "mean", "normalize": True, "dimension": 768, "maxlen": 128, "format": "onnx",
    ...                  "int8": True, "dev": {"cosine": 0.9951, "cosine_mean": 0.9987}, "dev_texts": 300})
    >>> for part in line.split("; "):
    ...     print(part)
    sentence vectors (mean pooling, unit length, 768 wide), maxlen 128, onnx int8
    cosine to float32 0.9951 at worst, 0.9987 on average over 300 texts
    """
    norm = "unit length" if info["normalize"] else "not normalized"
    line = (f"sentence vectors ({info['pooling'] or 'trained'} pooling, {norm}, {info['dimension']} wide), "
            f"maxlen {info['maxlen']}, {kind_of(info)}")
    if info.get("prompts"):
        default = info.get("default_prompt_name")
        line += f"; prompts {', '.join(info['prompts'])}" + (f" (default {default})" if default else "")
    dev = info.get("dev") or {}
    if "cosine" in dev:
        line += (f"; cosine to float32 {dev['cosine']:.4f} at worst, {dev['cosine_mean']:.4f} on average over "
                 f"{info['dev_texts']} texts")
    return line


def cosine_below_bound(info: dict) -> str | None:
    """What an export loses against the float32 vectors beyond `VECTOR_MIN_COSINE` (their mean cosine), as words,
    or None.

    Example:
    >>> cosine_below_bound({"dev": {"cosine": 0.97, "cosine_mean": 0.99}, "dev_texts": 40}) is None
    True
    >>> cosine_below_bound({"dev": {"cosine": 0.95, "cosine_mean": 0.985}, "dev_texts": 40})
    'mean cosine 0.9850 to the float32 vectors over 40 texts, 0.9500 at worst (bound 0.99)'
    """
    dev = info.get("dev") or {}
    mean = dev.get("cosine_mean")
    if mean is None or mean >= VECTOR_MIN_COSINE - 1e-9:
        return None
    return (f"mean cosine {mean:.4f} to the float32 vectors over {info['dev_texts']} texts, {dev['cosine']:.4f} at "
            f"worst (bound {VECTOR_MIN_COSINE:g})")


def vector_source(path: str, pooling: str | None = None, normalize: bool | None = None,
                  stride: int | None = None):
    """The `kerasbert.serving.embed.Embedder` a folder exports when its export answers vectors: a checkpoint or
    sentence-transformers folder, or a run of a task whose answers are neither labels nor text (``--task sim``),
    told from its ``args.json`` before its model loads (`exported_kind`); None for a run of another task."""
    return None if exported_kind(path, pooling, normalize, stride) is None else open_embedder(path, pooling, normalize)


def exported_kind(path: str, pooling: str | None = None, normalize: bool | None = None,
                  stride: int | None = None) -> str | None:
    """What ``kerasbert export`` exports from ``path``, checked before any model loads (so before TensorFlow starts):
    the folder's kind (`kerasbert.serving.embed.check_source`) when its export answers vectors, None for a run of
    labels or text; ``pooling``, ``normalize`` and ``stride`` are checked against the folder."""
    from kerasbert.finetune.runs import finished_run

    kind = folder_kind(path)
    if kind == "run" and _run_task(path) == "mlm":
        raise fail(ConfigError, path, "a fine-tuned run, a checkpoint or a sentence-transformers folder to export",
                   "a pretraining run (task mlm)", f"fine-tune it first (kerasbert train --checkpoint {path}/google), "
                   f"or export the sentence vectors of its checkpoint: kerasbert export {path}/google OUT")
    if kind == "run" and _run_task(path) in LOSS_BOUND:
        if pooling is not None or normalize is not None:
            raise fail(ConfigError, "--pooling" if pooling is not None else "--no-normalize", "a checkpoint, a "
                       "sentence-transformers folder or a run whose model answers sentence vectors (--task sim)",
                       f"a {_run_task(path)} run", "leave the option out to export the run's own answers")
        finished_run(path)
        return None
    if kind == "export":
        raise fail(ConfigError, path, "a checkpoint, sentence-transformers or run folder to export",
                   "an export folder", "serve it or predict with it as it is")
    if stride is not None:
        raise fail(ConfigError, "--stride", "a run of --task cls, ner or span", f"the sentence-vector model of {path}",
                   ONE_WINDOW_VECTORS)
    return check_source(path, pooling, normalize)


def _run_task(path: str) -> str | None:
    """The ``task`` of a run folder's ``args.json``; None where it cannot be read (`open_run` names the fault)."""
    try:
        with open(os.path.join(path, "args.json"), encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError):
        return None
    return values.get("task") if isinstance(values, dict) else None


def _run_texts(loaded) -> tuple[list[str], str | None]:
    """Texts of a run's dev file (else its training file), as its task reads them: each example's ``text`` and
    ``text_b``."""
    from kerasbert.serving.convert import CALIBRATION

    for path in (data_file(loaded.args.dev), data_file(loaded.args.train)):
        if path is not None:
            examples = loaded.task.read(path)[:CALIBRATION]
            texts = [text for example in examples for text in (getattr(example, "text", None),
                                                               getattr(example, "text_b", None)) if text]
            return texts[:CALIBRATION], path
    return [], None


def _texts(embedder, calibration: str | None, needed: bool) -> tuple[list[str], str | None]:
    """The texts an export is measured on (and OpenVINO's int8 calibrated on): ``calibration``'s, else a run's;
    a ConfigError when none are there and ``needed`` (int8 or bf16)."""
    from kerasbert.serving.convert import CALIBRATION
    from kerasbert.text.readers import read_texts

    if calibration is not None:
        return [row["text"] for row in read_texts(calibration)][:CALIBRATION], calibration
    texts, where = _run_texts(embedder.run) if embedder.run is not None else ([], None)
    if not texts and needed:
        raise fail(ConfigError, "--calibration", "a file of texts (one a line, or .jsonl with \"text\") to hold "
                   "int8 or bf16 vectors to the float32 ones", "none", "pass --calibration FILE")
    return texts, where


def _info(embedder, fmt: str, int8: bool, precision: tuple[str, dict]) -> dict:
    return {"format": fmt, "int8": int8, **int8_record(int8), "precision": precision[0],
            "precision_choice": precision[1], "task": VECTOR_TASK, "crf": False, "pairs": False,
            "labels": [], "pooling": embedder.pooling, "normalize": embedder.normalize,
            "dimension": embedder.dimension, "maxlen": embedder.maxlen, "lowercase": embedder.lowercase,
            "vocab_sha256": vocab_checksum(embedder.vocab), "source": os.path.abspath(embedder.path),
            "source_kind": embedder.kind, "prompts": embedder.prompts,
            "default_prompt_name": embedder.default_prompt_name, "include_prompt": embedder.include_prompt, "dev": {},
            **({"vocab_file": vocab_name_of(embedder.vocab)} if vocab_name_of(embedder.vocab) != "vocab.txt" else {})}


def export_vectors(embedder, out: str, format: str, int8: bool = False, calibration: str | None = None,
                   precision: tuple[str, dict] = (PRECISIONS[0], {"asked": PRECISIONS[0], "why": "asked for"}),
                   accept_loss: bool = False) -> dict:
    """Write the export of a vector model (an opened `kerasbert.serving.embed.Embedder`) to ``out``; called by
    `kerasbert.serving.export.export`, which has checked the arguments. Returns what ``kerasbert-export.json``
    records.

    Raises:
        ModelError: an ONNX or OpenVINO export under `VECTOR_MIN_COSINE` to the float32 vectors on some text; it is
            kept at ``OUT.rejected``, which the message names.
    """
    portable, asked = format != "saved_model", precision[1]["asked"]
    refuse_graph_tokenizer(format, embedder.tokenizer, embedder.path)
    texts, where = _texts(embedder, calibration, portable and (int8 or asked == "bf16"))
    if not texts and precision[0] == "bf16":  # chosen by auto: nothing to hold bf16 vectors to, so float32
        precision = (PRECISIONS[0], {"asked": asked, "why": "auto: no texts to hold bf16 vectors to float32 ones"})
    info = _info(embedder, format, int8, precision)
    def write(staging: str) -> None:
        if portable:
            _write_portable(staging, embedder, info, texts, where)
        else:
            _write_saved_model(staging, embedder)

    publish_export(out, info, write, cosine_below_bound, "the float32 vectors", accept_loss)
    logger.info("exported %s (%s) to %s", embedder.path, describe(info), out)
    return info


def _write_portable(folder: str, embedder, info: dict, texts: list[str], where: str | None) -> None:
    """The model as ONNX or OpenVINO beside ``vocab.txt``; ``info``'s ``dev``: the cosines to the float32 vectors
    on ``texts`` (``dev_unscored`` saying why without them)."""
    import shutil

    from kerasbert.serving.convert import to_onnx, to_openvino, weight_bits_of

    shutil.copyfile(embedder.vocab, os.path.join(folder, vocab_name_of(embedder.vocab)))
    path = os.path.join(folder, MODEL_FILES[info["format"]])
    if info["format"] == "onnx":
        to_onnx(embedder.model, path, int8=info["int8"], weight_bits=weight_bits_of(info))
    else:
        to_openvino(embedder.model, path, _calibration(embedder, texts) if info["int8"] else None,
                    weight_bits_of(info))
    if not texts:
        info["dev_unscored"] = "no texts to measure it on: pass --calibration FILE"
        return
    cosine = cosines(PortableVectors(folder, info).vectors(texts), embedder(texts, prompt=""))  # both as sent
    info["dev"] = {"cosine": float(cosine.min()), "cosine_mean": float(cosine.mean())}
    info["dev_texts"], info["dev_file"] = len(texts), where


def _calibration(embedder, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """OpenVINO int8's calibration examples: each text encoded alone, ``[1, length]``."""
    token_ids, segment_ids = embedder.tokenizer.encode_batch(texts, maxlen=embedder.maxlen)
    return [(np.array([ids], np.int32), np.array([segments], np.int32))
            for ids, segments in zip(token_ids, segment_ids, strict=True)]


def _write_saved_model(folder: str, embedder) -> None:
    """The raw-text SavedModel: the tokenizer in the graph, then the vector model."""
    import tensorflow as tf

    from kerasbert.text.tokenizer import load_vocab

    require("tensorflow_text", "for the tokenizer inside the SavedModel")
    from kerasbert.serving.graph_text import GraphTokenizer

    module = tf.Module()
    module.model = embedder.model
    module.tokenizer = GraphTokenizer(list(load_vocab(embedder.vocab)), lowercase=embedder.lowercase,
                                      maxlen=embedder.maxlen)

    def on_ids(token_ids, segment_ids) -> dict:
        return {"vector": tf.cast(module.model([token_ids, segment_ids], training=False), tf.float32)}

    def on_text(text) -> dict:
        pieces = module.tokenizer.tokenize(text)
        return on_ids(pieces["token_ids"], pieces["segment_ids"])

    ids = [tf.TensorSpec([None, None], tf.int32, name="token_ids"),
           tf.TensorSpec([None, None], tf.int32, name="segment_ids")]
    module.serve_text = tf.function(on_text, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    module.serve_ids = tf.function(on_ids, input_signature=ids)
    tf.saved_model.save(module, folder, signatures={"serving_default": module.serve_text.get_concrete_function(),
                                                    "ids": module.serve_ids.get_concrete_function()})
