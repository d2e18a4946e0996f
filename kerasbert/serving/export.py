"""Export a fine-tuned run for serving: a TensorFlow SavedModel that takes raw text, or an OpenVINO or ONNX model.

OpenVINO and ONNX exports hold the model alone, beside ``vocab.txt`` (a T5 run's ``spiece.model``; `write_portable`,
with the converters of `kerasbert.serving.convert`; `kerasbert.serving.runtime` runs them); the rest of this page is
about the SavedModel.

The tokenizer runs inside the graph (`kerasbert.serving.graph_text.GraphTokenizer`, tensorflow-text ops with
kerasbert's ids), so TF Serving, or any TensorFlow program, answers raw text without kerasbert installed. Two
signatures:

- ``serving_default``: ``text`` (and ``text_b`` for a run trained on pairs), a batch of strings. A classifier
  returns ``label`` (string), ``label_id`` and ``probabilities``; a tagger returns its entities padded per row,
  ``entity_text``, ``entity_label`` (``""`` as padding), ``entity_start``, ``entity_end`` (character offsets into
  the input, ``end`` exclusive; -1 as padding) and ``entity_count``, read from each word's first piece as
  ``kerasbert predict`` reads them (a CRF head is Viterbi-decoded in the graph; `kerasbert.serving.label_export`);
  a span run returns the same outputs, nested entities included (`kerasbert.serving.span_export`);
- ``ids``: ``token_ids`` and ``segment_ids`` for callers that tokenize themselves; it returns the head's output
  (``probabilities``, ``tag_ids`` per piece for a tagger, ``span_logits`` for a span run), one row per row given.

With a stride (the run's ``--stride``, or ``export(..., stride=N)``), ``serving_default`` of a cls, ner or span run
splits a text longer than ``maxlen`` into windows and merges their answers in the graph
(`kerasbert.serving.graph_windows`) as ``kerasbert predict --stride`` does; OpenVINO and ONNX exports do it in Python
(`kerasbert.text.windows`).

Beside the model, ``kerasbert-export.json`` records the task, labels, maximum length, stride, vocabulary checksum,
source run, format, precision and the exported model's dev score (`kerasbert.serving.folder`, which also publishes
the folder whole).

An OpenVINO or ONNX export scores itself on the run's dev file, as does a SavedModel in bfloat16
(`kerasbert.serving.precision` chooses the precision). One that loses more than `kerasbert.choices.LOSS_BOUND` of
the run's dev score (int8 or bf16 can) is not published: it is kept aside beside the folder asked for, and export
fails naming it, unless the caller accepts the loss.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import TYPE_CHECKING

import numpy as np

from kerasbert.choices import EXPORT_FORMATS, LOSS_BOUND, MAXLEN
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.log import logger
from kerasbert.serving.extras import require
from kerasbert.serving.folder import (
    MODEL_FILES,
    data_file,
    kind_of,
    publish_export,
    refuse_graph_tokenizer,
    unscored_why,
    vocab_checksum,
)
from kerasbert.serving.portable_decoder import PortableSeq2Seq, write_decoder
from kerasbert.serving.precision import AUTO, BF16_TASKS, choose, in_bfloat16, int8_record
from kerasbert.serving.runtime import PortableExport
from kerasbert.serving.task_exports import part
from kerasbert.serving.vector_export import export_vectors, vector_source

if TYPE_CHECKING:
    from kerasbert.finetune.runs import LoadedRun

__all__ = ["check_arguments", "export", "loss_over_bound", "write_portable"]


def _info(run, args, labels: list[str], maxlen: int, fmt: str, int8: bool, precision: tuple[str, dict]) -> dict:
    from kerasbert.finetune.runs import vocab_name

    checksum = vocab_checksum(run.file(vocab_name(args.vocab)))
    metrics = run.read_json("metrics.json") if os.path.isfile(run.file("metrics.json")) else {}
    return {"format": fmt, "int8": int8, **int8_record(int8), "precision": precision[0],
            "precision_choice": precision[1], "task": args.task, "crf": bool(args.crf),
            "pairs": args.text_b is not None, "labels": labels, "maxlen": maxlen, "stride": args.stride,
            "lowercase": bool(args.lowercase),
            "vocab_sha256": checksum, "source_run": os.path.abspath(run.path), "dev": metrics.get("dev", {}),
            "dev_run": metrics.get("dev", {}),
            **({"vocab_file": vocab_name(args.vocab)} if vocab_name(args.vocab) == "tokenizer.json" else {}),
            **({"target_maxlen": args.target_maxlen, "beams": args.beams} if args.task == "seq2seq" else {})}


def _seq2seq_info(loaded: LoadedRun, maxlen: int) -> dict:
    """What a seq2seq export records to search as the run does: the source's room (``source_maxlen``), a row's cache
    positions, the end token and, for a SentencePiece run, its vocabulary file and start token."""
    from kerasbert.finetune.runs import vocab_name
    from kerasbert.generation.generate import cached_decoder

    tokenizer, target = loaded.tokenizer, loaded.args.target_maxlen
    room = loaded.task.source_maxlen(maxlen)
    sentencepiece = vocab_name(loaded.args.vocab) == "spiece.model"
    return {"source_maxlen": room, "cache_positions": cached_decoder(loaded.model).cache_positions(room, target),
            "end_token": tokenizer._token_end, "vocab_file": vocab_name(loaded.args.vocab),
            **({"token_start": tokenizer._token_start} if sentencepiece else {})}


def check_arguments(out: str, format: str, int8: bool) -> None:
    """A ConfigError for an unknown format, int8 for a SavedModel, or an ``out`` already there or that cannot be
    written; before a model loads."""
    from kerasbert.finetune.runs import check_writable

    if format not in EXPORT_FORMATS:
        raise fail(ConfigError, "--format", " or ".join(EXPORT_FORMATS), repr(format))
    if int8 and format == "saved_model":
        raise fail(ConfigError, "--int8", "--format onnx or openvino", "--format saved_model",
                   "int8 models are written for ONNX Runtime and OpenVINO")
    if os.path.exists(out):
        raise fail(ConfigError, out, "a new export folder", "something already there", "pick another path")
    check_writable(out, "out")


def loss_over_bound(info: dict) -> str | None:
    """What an export loses against its run beyond `LOSS_BOUND`, as words, or None when within it (or unscored).

    Example:
    >>> loss_over_bound({"task": "cls", "dev": {"accuracy": 0.7867}, "dev_run": {"accuracy": 1.0}})
    "dev accuracy 0.7867 against the run's 1.0000 (-0.2133, bound 0.005)"
    """
    metric, bound = LOSS_BOUND[info["task"]]
    mine, theirs = info["dev"].get(metric), info["dev_run"].get(metric)
    if mine is None or theirs is None or theirs - mine <= bound + 1e-9:
        return None
    return f"dev {metric} {mine:.4f} against the run's {theirs:.4f} ({mine - theirs:+.4f}, bound {bound:g})"


def export(run_dir: str | os.PathLike, out: str | os.PathLike, format: str = EXPORT_FORMATS[0], int8: bool = False,
           calibration: str | None = None, precision: str = AUTO, accept_loss: bool = False,
           stride: int | None = None, pooling: str | None = None, normalize: bool | None = None) -> dict:
    """Export the best model of a ``kerasbert train`` run folder for serving; a checkpoint or sentence-transformers
    folder, or a run whose model answers sentence vectors (``--task sim``), exports a model that answers vectors
    (`kerasbert.serving.vector_export`).

    Args:
        run_dir: str. the run folder.
        out: str. the export folder to write; it appears whole or not at all, and must not exist yet.
        format: str. ``"saved_model"`` (raw text in, labels or entities out, tokenizer in the graph), ``"openvino"``
            or ``"onnx"`` (the model alone; `kerasbert.serving.runtime` tokenizes).
        int8: bool. openvino or onnx: quantize the matrix products to int8; the export's dev score is measured.
        calibration: str or None. openvino int8: a data file in the training format whose first examples
            calibrate the quantization; default: the run's training file, else its dev file.
        precision: str. what the export computes in, where it is not int8: ``"auto"`` (chosen by CPU and format,
            `kerasbert.serving.precision`), ``"f32"``, or ``"bf16"`` (openvino on a CPU with bfloat16 units; a
            cls, ner or span run's SavedModel where TensorFlow's bfloat16 is faster).
        accept_loss: bool. publish an export that loses more than `LOSS_BOUND` of the run's dev score.
        stride: int or None. split texts longer than ``maxlen`` into windows sharing this many word pieces and merge
            their answers, as ``kerasbert predict --stride`` (`kerasbert.text.windows`; in the SavedModel's graph,
            `kerasbert.serving.graph_windows`); None: as the run was trained. Recorded as ``stride``; the run's dev
            score is then measured with it.
        pooling: str or None. a checkpoint's pooling, or a sentence-transformers folder's or a vector run's, which it
            must equal (`kerasbert.serving.embed.open_embedder`).
        normalize: bool or None. unit-length vectors (`kerasbert.serving.embed.open_embedder`).

    Returns:
        dict. what ``kerasbert-export.json`` records; ``dev`` is the exported model's dev score (for onnx and
        openvino, measured on the export itself; ``{}`` with ``dev_unscored`` saying why when it could not be),
        ``dev_run`` the run's.

    Raises:
        ModelError: the export lost more than `LOSS_BOUND`; it is kept at ``OUT.rejected``, which the message names.

    Example:
    >>> import tempfile
    >>> from kerasbert import train
    >>> from kerasbert.finetune.demo_data import write_demo_data
    >>> data = write_demo_data(tempfile.mkdtemp(), n_train=16, n_dev=4, n_test=4)
    >>> run = tempfile.mkdtemp()
    >>> _ = train("cls", data["cls_train"], run, vocab=data["vocab"], epochs=1, batch_size=8, verbose=0)
    >>> info = export(run, tempfile.mkdtemp() + "/export")
    >>> info["task"], info["labels"]
    ('cls', ['neg', 'pos'])
    """
    from kerasbert.finetune.runs import open_run, with_stride
    from kerasbert.modeling.config import resolve_config
    from kerasbert.text.windows import check_stride

    out = os.fspath(out)
    check_arguments(out, format, int8)
    chosen = choose(precision, format, int8)
    vectors = vector_source(os.fspath(run_dir), pooling, normalize, stride)  # None: a run of labels or text
    if vectors is not None:
        _check_bf16_saved_model(chosen[0], format, None)
        return export_vectors(vectors, out, format, int8, calibration, chosen, accept_loss)
    trained = open_run(os.fspath(run_dir))
    loaded = with_stride(trained, stride)
    run, args = loaded.run, loaded.args
    if args.pre_tokenize is not None:  # jieba runs in Python: no export's tokenizer cuts words
        raise fail(ConfigError, os.fspath(run_dir), "a run of word pieces alone to export", f"a run trained with "
                   f"--pre-tokenize {args.pre_tokenize}", "the SavedModel's tokenizer runs in the graph and the ONNX "
                   "and OpenVINO exports' in kerasbert's runtime, and neither cuts words: generate or predict with "
                   "`kerasbert predict RUN` (or open_run in Python)")
    refuse_graph_tokenizer(format, loaded.tokenizer, f"the run {run.path}")
    if args.task not in LOSS_BOUND:
        raise fail(ModelError, os.fspath(run_dir), f"a run of --task {' or '.join(LOSS_BOUND)} to export",
                   f"a {args.task} run", "generate with `kerasbert predict RUN` or kerasbert.generate")
    if args.task == "seq2seq" and int8 and format == "openvino":
        raise fail(ConfigError, "--int8", "--format onnx for a seq2seq run (its decoder's int8 needs no calibration)",
                   "--format openvino", "export it with --format onnx --int8, or in float32")
    _check_bf16_saved_model(chosen[0], format, args.task)
    maxlen = args.maxlen or min(MAXLEN, resolve_config(run.file("bert_config.json")).max_position_embeddings)
    if args.stride is not None:
        check_stride(args.stride, maxlen)
    info = _info(run, args, loaded.labels.labels, maxlen, format, int8, chosen)
    if args.task == "seq2seq":
        info.update(_seq2seq_info(loaded, maxlen))
    if part(args.task, "export_info") is not None:  # what the task's exports read beside the labels
        info.update(part(args.task, "export_info")(loaded))
    if args.stride != trained.args.stride:  # the run's dev score was measured with its own stride
        info["dev"] = info["dev_run"] = _dev_score(loaded)
    def write(staging: str) -> None:
        if format == "saved_model":
            _write_saved_model(staging, loaded, maxlen, info)
        else:
            write_portable(staging, loaded, info, calibration, data_file(args.dev))

    publish_export(out, info, write, loss_over_bound, "the run's dev score", accept_loss)
    logger.info("exported %s (%s, %s) to %s", run.path, args.task, kind_of(info), out)
    return info


def _check_bf16_saved_model(precision: str, format: str, task: str | None) -> None:
    """A ConfigError for a bf16 SavedModel of a model that is not a cls, ner or span run (``task`` None: a model
    that answers vectors)."""
    if precision == "bf16" and format == "saved_model" and task not in BF16_TASKS:
        what = f"a {task} run" if task else "a vector model"
        raise fail(ConfigError, "--precision bf16", f"--format openvino for {what}", "--format saved_model",
                   f"a bfloat16 SavedModel is written for {', '.join(BF16_TASKS)} runs")


def _dev_score(loaded: LoadedRun) -> dict:
    """The run's score on its dev file as ``loaded`` predicts (``{}`` without one)."""
    from kerasbert.finetune.runs import score_file

    dev = data_file(loaded.args.dev)
    return score_file(loaded, dev) if dev else {}


def _write_saved_model(folder: str, loaded: LoadedRun, maxlen: int, info: dict) -> None:
    """The raw-text SavedModel of a loaded run, into ``folder``; in bfloat16, ``info``'s ``dev`` is the score of the
    model it holds."""
    import tensorflow as tf

    from kerasbert.text.tokenizer import load_vocab

    require("tensorflow_text", "for the tokenizer inside the SavedModel")
    from kerasbert.serving.graph_text import GraphTokenizer

    args = loaded.args
    info.pop("dev_unscored", None)
    info["dev"] = dict(info["dev_run"])  # float32: the run's own model
    if info["precision"] == "bf16":
        loaded = dataclasses.replace(loaded, model=in_bfloat16(loaded.model))
        info["dev"] = _dev_score(loaded)
        if not info["dev"]:
            info["dev_unscored"] = unscored_why(args)
    sentencepiece = info.get("vocab_file") == "spiece.model"  # a T5 seq2seq run's: no word pieces
    vocab = [] if sentencepiece else list(load_vocab(loaded.run.file("vocab.txt")))
    served = part(args.task, "saved_model")
    if served is not None:
        module, signatures = served(loaded, vocab, maxlen, info)
    elif args.task == "seq2seq":
        module, signatures = _seq2seq_module(loaded, vocab, info)
    elif args.task == "span":
        from kerasbert.serving.span_export import served_spans

        tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=maxlen)
        module, signatures = served_spans(loaded.model, tokenizer, loaded.labels.labels, vocab, args.stride)
    else:
        from kerasbert.serving.label_export import served_labels

        tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=maxlen)
        module, signatures = served_labels(loaded.model, tokenizer, loaded.labels.labels, vocab, args.task,
                                     bool(args.crf), args.text_b is not None, args.stride)
    tf.saved_model.save(module, folder, signatures=signatures)


def _seq2seq_decoder(loaded: LoadedRun):
    """The run's cached decoder as its predictions search it: an encoder-decoder's starts with the tokenizer's start
    token where it has one (``[CLS]`` of a word-piece vocabulary), else with its own (T5's 0)."""
    from kerasbert.generation.generate import cached_decoder

    decoder, start = cached_decoder(loaded.model), getattr(loaded.tokenizer, "_token_start", None)
    if start is not None and hasattr(decoder, "starting_with"):
        return decoder.starting_with(loaded.tokenizer.token_to_id(start))
    return decoder


def _seq2seq_module(loaded: LoadedRun, vocab: list[str], info: dict) -> tuple:
    """The module and signatures of a seq2seq run's SavedModel (`kerasbert.serving.seq2seq_export`): its tokenizer
    (WordPiece's ``vocab``, or the run's SentencePiece model where ``vocab`` is empty) and its cached decoder, whose
    cache shape ``info`` records."""
    from kerasbert.serving.graph_decode import GraphDetokenizer
    from kerasbert.serving.graph_sentencepiece import GraphSpTokenizer
    from kerasbert.serving.graph_text import GraphTokenizer
    from kerasbert.serving.seq2seq_export import served_seq2seq

    args, room = loaded.args, info["source_maxlen"]
    if vocab:
        tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=room)
        detokenizer = GraphDetokenizer(vocab)
    else:
        tokenizer = detokenizer = GraphSpTokenizer(loaded.tokenizer, maxlen=room)
    decoder = _seq2seq_decoder(loaded)
    info["decoder"] = decoder.cache_shape  # what bounds a batch's cache when served
    return served_seq2seq(loaded.model, decoder, tokenizer, detokenizer, args.beams, args.target_maxlen,
                          loaded.tokenizer.token_to_id(info["end_token"]))


def write_portable(folder: str, loaded: LoadedRun, info: dict, calibration: str | None = None,
                   dev: str | None = None) -> None:
    """An OpenVINO or ONNX export of an opened run (`kerasbert.finetune.runs.LoadedRun`) into ``folder``
    (`kerasbert.serving.convert`; a seq2seq run's decoder, `kerasbert.serving.portable_decoder.write_decoder`); fills
    ``info``'s ``crf_transitions`` and ``dev`` with the export's own score on the dev file ``dev`` (``{}`` without
    one, and ``dev_unscored`` saying why)."""
    from kerasbert.modeling.crf import crf_layers
    from kerasbert.serving.convert import to_onnx, to_openvino, weight_bits_of

    run, args, the_task, labels, model = loaded.run, loaded.args, loaded.task, loaded.labels, loaded.model
    vocab = info.get("vocab_file", "vocab.txt")
    shutil.copyfile(run.file(vocab), os.path.join(folder, vocab))
    if info["crf"]:
        info["crf_transitions"] = np.asarray(crf_layers(model)[0].trans, np.float64).tolist()
    path = os.path.join(folder, MODEL_FILES[info["format"]])
    served = PortableExport
    if args.task == "seq2seq":  # the decoder's prefill and step, searched in Python
        written = write_decoder(model, folder, info["format"], info["int8"], info.get("int8_choice"),
                                _seq2seq_decoder(loaded))
        info["decoder"] = {**written,
                           "precision": info["precision"], "precision_choice": info["precision_choice"]}
        served = PortableSeq2Seq
    elif info["format"] == "onnx":
        to_onnx(portable_model(loaded), path, int8=info["int8"], weight_bits=weight_bits_of(info))
    else:
        to_openvino(portable_model(loaded), path, _calibration(loaded, info, calibration) if info["int8"] else None,
                    weight_bits_of(info))
    if dev is not None:
        examples = the_task.read(dev, labels)
        predictions = served(folder, info).predict_examples(examples)
        info["dev"] = the_task.score(examples, predictions, labels)
    else:
        info["dev"] = {}
        info["dev_unscored"] = unscored_why(args)


def portable_model(loaded: LoadedRun):
    """The Keras model an OpenVINO or ONNX export of ``loaded`` converts: the run's, or the one its task's exports
    make of it (`kerasbert.serving.task_exports`)."""
    made = part(loaded.args.task, "portable_model")
    return loaded.model if made is None else made(loaded)


def _calibration(loaded: LoadedRun, info: dict, path: str | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Up to ``CALIBRATION`` examples of ``path`` (default: the run's training file, else its dev file), encoded."""
    from kerasbert.serving.convert import CALIBRATION

    args, the_task, tokenizer, labels = loaded.args, loaded.task, loaded.tokenizer, loaded.labels
    candidates = [path] if path is not None else [p for p in (data_file(args.train), data_file(args.dev)) if p]
    if not candidates or not os.path.isfile(candidates[0]):
        found = repr(path) if path is not None else f"neither the training file {args.train!r} nor a dev file"
        raise fail(ConfigError, "--calibration", "a data file in the training format, to calibrate int8", found,
                   "pass --calibration FILE")
    examples = the_task.read(candidates[0], labels)[:CALIBRATION]
    features = the_task.encoded(tokenizer, examples, None, info["maxlen"], candidates[0])
    return [(np.array([ids], np.int32), np.array([segments], np.int32))
            for ids, segments in zip(features.token_ids, features.segment_ids, strict=True)]
