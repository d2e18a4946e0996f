"""Run an ONNX or OpenVINO export: tokenize in Python, run the model in its runtime, read labels, entities or vectors.

These exports hold the model without the tokenizer (``model.onnx``, or ``model.xml`` and ``model.bin``) beside
``vocab.txt`` (or a Hugging Face ``tokenizer.json``); `PortableExport` tokenizes with the tokenizer of that file
(`kerasbert.text.tokenizer_files.load_tokenizer`), pads each batch to its longest row with the tokenizer's padding
id, runs the model, and makes the rows `kerasbert.predict` makes (`kerasbert.text.predictions`: a CRF
head's Viterbi path in NumPy from the transitions ``kerasbert-export.json`` holds); `PortableVectors` gives the
sentence vectors of an export of a vector model (`kerasbert.serving.vector_export`). Nothing here imports
TensorFlow, so a server of such an export stays small.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from kerasbert.choices import PRECISIONS, PREDICT_BATCH_SIZE, input_fields
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.serving.folder import MODEL_FILES, vocab_file
from kerasbert.serving.precision import check_precision, openvino_config, runs_in, warn_int8_saturation
from kerasbert.serving.task_exports import part
from kerasbert.text.pipeline import encode_classification, encode_ner, text_example
from kerasbert.text.predictions import entities_row, label_row, piece_tags
from kerasbert.text.readers import ClassificationExample, LabelSet
from kerasbert.text.span_data import SpanExample, encode_spans, found_spans, span_rows
from kerasbert.text.tokenizer_base import pad_ids
from kerasbert.text.tokenizer_files import load_tokenizer
from kerasbert.text.windows import encode_split, mean_by_document, merge_pieces

__all__ = ["PortableExport", "PortableVectors", "check_texts", "length_batches", "load_runtime", "row_chunks",
           "runtime_errors", "vector_rows"]

INSTALL = {"onnx": "onnxruntime", "openvino": "openvino"}
LENGTH_STEP = 8


def length_batches(lengths: Sequence[int], batch_size: int, slack: float = 1.25) -> list[list[int]]:
    """Indices of rows grouped into batches of at most ``batch_size`` rows of similar length: sorted by length, a
    batch ends where the next row is over ``slack`` times its shortest, so padding stays under a fifth of it.

    Example:
    >>> length_batches([40, 10, 11, 42, 12], batch_size=2)
    [[1, 2], [4], [0, 3]]
    """
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if not batches or len(batches[-1]) == batch_size or lengths[i] > slack * lengths[batches[-1][0]]:
            batches.append([])
        batches[-1].append(i)
    return batches


def row_chunks(rows: int) -> list[int]:
    """The batch sizes, each a power of two, that ``rows`` rows run as: the largest power of two that fits, again
    and again, except that a rest that needs at most a quarter more rows to reach the next power of two is
    filled up to it.

    A runtime keeps compiled kernels for every input shape it meets; powers of two (with lengths rounded to
    `LENGTH_STEP`) keep those shapes, and so the server's memory, few and bounded.

    Example:
    >>> row_chunks(23), row_chunks(31), row_chunks(6)
    ([16, 8], [32], [4, 2])
    """
    sizes: list[int] = []
    while rows > 0:
        power = 1 << (rows.bit_length() - 1)
        if power == rows or 2 * power - rows <= rows // 4:
            return [*sizes, power if power == rows else 2 * power]
        sizes.append(power)
        rows -= power
    return sizes


@contextlib.contextmanager
def runtime_errors(fmt: str, path: str, hint: str = "export the run again") -> Iterator[None]:
    """Turn what loading the model file ``path`` in ``fmt``'s runtime raises into a ConfigError: the runtime is
    missing, or the file is unreadable (each runtime raises its own error types)."""
    try:
        yield
    except ConfigError:
        raise
    except ImportError as e:
        raise fail(ConfigError, path, f"{INSTALL[fmt]}, to run a {fmt} export", f"{type(e).__name__}: {e}",
                   f'pip install "kerasbert[serve]" (or pip install {INSTALL[fmt]})') from None
    except Exception as e:  # noqa: BLE001 - each runtime raises its own error types for an unreadable model
        raise fail(ConfigError, path, f"a readable {fmt} model", f"{type(e).__name__}: {str(e).splitlines()[0]}",
                   hint) from None


def load_runtime(fmt: str, path: str, precision: str = PRECISIONS[0]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A function ``(token_ids, segment_ids) -> output`` running the model file ``path`` in ``fmt``'s runtime;
    OpenVINO runs what is not int8 in ``precision`` (`PRECISIONS`), ONNX Runtime in float32."""
    with runtime_errors(fmt, path):
        if fmt == "onnx":
            import onnxruntime

            session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            names = [node.name for node in session.get_inputs()]
            return lambda ids, segments: session.run(None, {names[0]: ids, names[1]: segments})[0]
        import openvino

        check_precision(path, precision)
        compiled = openvino.Core().compile_model(path, "CPU", openvino_config(precision))
        request = compiled.create_infer_request()
        return lambda ids, segments: request.infer([ids, segments])[compiled.output(0)]


def check_texts(rows: Sequence[dict], fields: Sequence[str]) -> None:
    """A DataError unless each row holds its texts as strings, under ``fields`` (`kerasbert.choices.input_fields`;
    ``text_b`` may be left out): an export tokenizes them itself.

    Example:
    >>> check_texts([{"question": "谁?", "context": "张伟"}], ("question", "context"))
    >>> check_texts([{"text": [2, 45, 3]}], ("text",))
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: row 0 text: expected a string (the export tokenizes it), found a list [2, 45, 3]
    """
    for i, row in enumerate(rows):
        for key in fields:
            value = row.get(key, "") if key == "text_b" else row.get(key)
            if not isinstance(value, str):
                raise fail(DataError, f"row {i} {key}", "a string (the export tokenizes it)",
                           f"a {type(value).__name__} {str(value)[:40]}")


class PortableExport:
    """An ONNX or OpenVINO export folder, loaded: ``info`` (``kerasbert-export.json``) and `predict`.

    Args:
        path: str. the export folder.
        info: dict. its ``kerasbert-export.json``.
    """

    def __init__(self, path: str, info: dict) -> None:
        self.path, self.info = path, info
        self.labels = LabelSet(info["labels"])
        self.tokenizer = load_tokenizer(os.path.join(path, vocab_file(info)), lowercase=bool(info["lowercase"]))
        self.run_model = load_runtime(info["format"], os.path.join(path, MODEL_FILES[info["format"]]),
                                      runs_in(info, path))
        warn_int8_saturation(info, path)
        self.trans = np.asarray(info["crf_transitions"], np.float64) if info.get("crf") else None
        self._lock = threading.Lock()  # an OpenVINO infer request serves one call at a time

    def predict(self, rows: Sequence[dict], batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"text"[, "text_b"]}`` rows -> predictions, as `kerasbert.predict` writes them."""
        check_texts(rows, input_fields(self.info["task"], self.info["pairs"]))
        examples_of = part(self.info["task"], "portable_examples")
        if examples_of is not None:
            examples = examples_of(self.tokenizer, rows)
        elif self.info["task"] == "cls":
            examples = [ClassificationExample(row["text"], "", row.get("text_b") if self.info["pairs"] else None)
                        for row in rows]
        elif self.info["task"] == "span":
            examples = [SpanExample(row["text"]) for row in rows]
        else:
            examples = [text_example(self.tokenizer, row["text"]) for row in rows]
        return [{**row, **prediction} for row, prediction in zip(rows, self.predict_examples(examples, batch_size),
                                                                  strict=True)]

    def predict_examples(self, examples: Sequence, batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """Predictions of examples read by the task (``ClassificationExample``, ``NerExample`` or ``SpanExample``):
        ``label`` and ``probabilities``, or ``entities``; run in batches of similar length (`length_batches`), in
        order. With the export's ``stride``, a long text's windows are merged as `kerasbert.predict` merges them
        (`kerasbert.text.windows`)."""
        predict = part(self.info["task"], "portable_predict")
        if predict is not None:
            return predict(self, examples, batch_size)
        if self.info["task"] == "span":
            return self._predict_spans(examples, batch_size)
        maxlen, cls = self.info["maxlen"], self.info["task"] == "cls"
        features = encode_split(lambda cut: encode_classification(self.tokenizer, examples, None, cut, "input") if cls
                                else encode_ner(self.tokenizer, examples, None, cut, bool(self.info["crf"]), "input"),
                                maxlen, self.info.get("stride"), "input", examples)
        rows = self.run_features(features, batch_size)
        if not cls:
            rows = [piece_tags(row[:len(ids)], self.trans) for row, ids in zip(rows, features.token_ids, strict=True)]
        if cls:
            return [label_row(row, self.labels.labels) for row in mean_by_document(features.windows, np.array(rows))]
        return [entities_row(example.text, row, firsts, example.offsets, self.labels) for example, row, firsts
                in zip(examples, merge_pieces(features.windows, rows), features.first_pieces, strict=True)]

    def _predict_spans(self, examples: Sequence[SpanExample], batch_size: int) -> list[dict]:
        """A span export's rows: each text's span logits decoded in NumPy, a long text's windows merged with the
        export's ``stride`` (`kerasbert.text.span_data.span_rows`)."""
        features = encode_spans(self.tokenizer, examples, None, self.info["maxlen"], "input", self.info.get("stride"))
        found = [found_spans(row, len(ids) - 2)
                 for row, ids in zip(self.run_features(features, batch_size), features.token_ids, strict=True)]
        return span_rows([example.text for example in examples], found, features, self.labels.labels)

    def run_features(self, features, batch_size: int = PREDICT_BATCH_SIZE) -> list[np.ndarray]:
        """The model's output of each row of ``features`` (anything with ``token_ids`` and ``segment_ids``), in order,
        run in batches of similar length (`length_batches`); each row's own, without its batch's padding rows."""
        rows: list = [None] * len(features.token_ids)
        for batch in length_batches([len(ids) for ids in features.token_ids], batch_size):
            out = self._run([features.token_ids[i] for i in batch], [features.segment_ids[i] for i in batch])
            for i, row in zip(batch, out, strict=True):
                rows[i] = row
        return rows

    def _run(self, token_ids: list[list[int]], segment_ids: list[list[int]]) -> list[np.ndarray]:
        # shapes from a small set (`row_chunks`, lengths rounded up to LENGTH_STEP) bound the runtime's kernels
        # a chunk is filled up with copies of its last row: rows of another range would move the scales of a
        # dynamically quantized model; chunks may pad to different lengths, so the rows come back one by one
        out: list[np.ndarray] = []
        begin = 0
        for size in row_chunks(len(token_ids)):
            real = min(size, len(token_ids) - begin)
            chunk = [begin + i for i in range(real)] + [begin + real - 1] * (size - real)
            ids, segments = (pad_ids([rows[i] for i in chunk], multiple=LENGTH_STEP, pad_id=pad)
                             for rows, pad in ((token_ids, self.tokenizer.pad_id), (segment_ids, 0)))
            with self._lock:  # a copy of the real rows: the request reuses its output buffer
                out.extend(np.array(self.run_model(ids, segments)[:real]))
            begin += size
        return out


def vector_rows(rows: Sequence[dict], vectors) -> list[dict]:
    """Each row with its ``"vector"`` (a list of floats), as predictions are written.

    Example:
    >>> vector_rows([{"text": "a"}], np.array([[0.5, 1.0]], np.float32))
    [{'text': 'a', 'vector': [0.5, 1.0]}]
    """
    return [{**row, "vector": np.asarray(vector, np.float32).tolist()}
            for row, vector in zip(rows, vectors, strict=True)]


class PortableVectors(PortableExport):
    """An ONNX or OpenVINO export of a vector model, loaded: ``predict`` gives each row its ``"vector"``."""

    def predict(self, rows: Sequence[dict], batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"text"}`` rows -> the rows with their ``"vector"``."""
        check_texts(rows, ("text",))
        return vector_rows(rows, self.vectors([row["text"] for row in rows], batch_size))

    def vectors(self, texts: Sequence[str], batch_size: int = PREDICT_BATCH_SIZE) -> np.ndarray:
        """float32 ``[len(texts), H]``, run in batches of similar length."""
        token_ids, segment_ids = self.tokenizer.encode_batch(list(texts), maxlen=self.info["maxlen"])
        out = np.zeros((len(token_ids), int(self.info["dimension"])), np.float32)
        for batch in length_batches([len(ids) for ids in token_ids], batch_size):
            out[batch] = self._run([token_ids[i] for i in batch], [segment_ids[i] for i in batch])
        return out
