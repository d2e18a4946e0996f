"""Export a fine-tuned run for serving: a TensorFlow SavedModel that takes raw text, or an OpenVINO or ONNX model.

OpenVINO and ONNX exports hold the model alone, beside ``vocab.txt`` (`kerasbert.serving.convert` writes them,
`kerasbert.serving.runtime` runs them); the rest of this page is about the SavedModel.

The tokenizer runs inside the graph (`kerasbert.serving.graph_text.GraphTokenizer`, tensorflow-text ops with
kerasbert's ids), so TF Serving, or any TensorFlow program, answers raw text without kerasbert installed. Two
signatures:

- ``serving_default``: ``text`` (and ``text_b`` for a run trained on pairs), a batch of strings. A classifier
  returns ``label`` (string), ``label_id`` and ``probabilities``; a tagger returns its entities padded per row,
  ``entity_text``, ``entity_label`` (``""`` as padding), ``entity_start``, ``entity_end`` (character offsets into
  the input, ``end`` exclusive; -1 as padding) and ``entity_count``, read from each word's first piece as
  ``kerasbert predict`` reads them (a CRF head is Viterbi-decoded in the graph); a span run returns the same
  outputs, nested entities included (`kerasbert.serving.span_export`);
- ``ids``: ``token_ids`` and ``segment_ids`` for callers that tokenize themselves; it returns the head's output
  (``probabilities``, ``tag_ids`` per piece for a tagger, ``span_logits`` for a span run), one row per row given.

With a stride (the run's ``--stride``, or ``export(..., stride=N)``), ``serving_default`` of a cls, ner or span run
splits a text longer than ``maxlen`` into windows and merges their answers in the graph
(`kerasbert.serving.graph_windows`) as ``kerasbert predict --stride`` does; OpenVINO and ONNX exports do it in Python
(`kerasbert.text.windows`).

Beside the model, ``kerasbert-export.json`` records the task, labels, maximum length, stride, vocabulary checksum,
source run, format, precision and the exported model's dev score.

An OpenVINO or ONNX export scores itself on the run's dev file, as does a SavedModel in bfloat16
(`kerasbert.serving.precision` chooses the precision). One that loses more than `kerasbert.choices.LOSS_BOUND` of
the run's dev score (int8 or bf16 can) is not published: it is kept aside beside the folder asked for, and export
fails naming it, unless the caller accepts the loss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from kerasbert.choices import EXPORT_FORMATS, LOSS_BOUND, MAXLEN, PRECISIONS
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.files import publish_folder
from kerasbert.log import logger
from kerasbert.serving.precision import AUTO, BF16_TASKS, choose, fall_back, in_bfloat16, int8_record

if TYPE_CHECKING:
    from kerasbert.finetune.runs import LoadedRun

EXPORT_INFO = "kerasbert-export.json"
REJECTED = ".rejected"  # the suffix of an export kept aside for its loss


def _entities(text, tag_ids, token_ids, starts, ends, lengths, vocab, labels) -> dict:
    """Entities of a batch, padded per row, from piece tags read on each word's first piece (BIO)."""
    import tensorflow as tf

    position = tf.range(tf.shape(token_ids)[1])[None]
    real = (position >= 1) & (position < lengths[:, None] - 1)  # not [CLS], [SEP] or padding
    first = real & ~tf.strings.regex_full_match(tf.gather(vocab, token_ids), "##.+")
    word_tags = tf.ragged.boolean_mask(tag_ids, first)
    rows, names = word_tags.value_rowids(), tf.gather(labels, word_tags.flat_values)
    word_start = tf.ragged.boolean_mask(starts, first).flat_values
    words_before = tf.cumsum(word_tags.row_lengths(), exclusive=True)
    word_of_piece = tf.cumsum(tf.cast(first, tf.int64), axis=1) - 1 + words_before[:, None]
    word_end = tf.math.unsorted_segment_max(tf.boolean_mask(ends, real), tf.boolean_mask(word_of_piece, real),
                                            tf.shape(names, tf.int64)[0])
    kind = tf.strings.regex_replace(names, "^[BI]-", "")
    outside = ~tf.strings.regex_full_match(names, "[BI]-.+")
    same_row = tf.concat([[False], rows[1:] == rows[:-1]], 0)
    continues = (same_row & ~tf.concat([[True], outside[:-1]], 0) & (tf.concat([[""], kind[:-1]], 0) == kind)
                 & tf.strings.regex_full_match(names, "I-.+"))
    begins = ~outside & ~continues
    entity = tf.boolean_mask(tf.cumsum(tf.cast(begins, tf.int64)) - 1, ~outside)
    count = tf.reduce_sum(tf.cast(begins, tf.int64))
    start = tf.math.unsorted_segment_min(tf.boolean_mask(word_start, ~outside), entity, count)
    end = tf.math.unsorted_segment_max(tf.boolean_mask(word_end, ~outside), entity, count)
    return padded_entities(text, tf.boolean_mask(rows, begins), tf.boolean_mask(kind, begins), start, end)


def padded_entities(text, row, label, start, end) -> dict:
    """The ``serving_default`` outputs of a batch's entities, given flat in row order (``row`` of each): padded per
    row (``""`` and -1), with each entity's text cut from its input and ``entity_count``."""
    import tensorflow as tf

    values = {"entity_text": tf.strings.substr(tf.gather(text, row), start, end - start, unit="UTF8_CHAR"),
              "entity_label": label, "entity_start": start, "entity_end": end}
    nrows = tf.shape(text, tf.int64)[0]
    out = {name: tf.RaggedTensor.from_value_rowids(value, row, nrows).to_tensor("" if value.dtype == tf.string
                                                                                else -1)
           for name, value in values.items()}
    out["entity_count"] = tf.math.bincount(row, minlength=nrows, maxlength=nrows, dtype=tf.int64)
    return out


def _served(model, tokenizer, labels: list[str], vocab: list[str], task: str, crf: bool, pairs: bool,
            stride: int | None = None):
    """The tf.Module to save, and its two signatures; with ``stride``, ``serving_default`` splits long texts into
    windows and merges their answers (`kerasbert.serving.graph_windows`)."""
    import tensorflow as tf

    from kerasbert.modeling.heads import crf_decoder

    module = tf.Module()
    module.model, module.tokenizer = (crf_decoder(model) if crf else model), tokenizer
    label_names, pieces = tf.constant(labels), tf.constant(vocab)

    def labelled(probabilities) -> dict:
        label_id = tf.argmax(probabilities, -1, output_type=tf.int32)
        return {"probabilities": probabilities, "label_id": label_id, "label": tf.gather(label_names, label_id)}

    def head(token_ids, segment_ids) -> dict:
        output = module.model([token_ids, segment_ids], training=False)
        if task == "cls":
            return labelled(output)
        tag_ids = output if crf else tf.argmax(output, -1, output_type=tf.int32)
        return {"tag_ids": tf.cast(tag_ids, tf.int32)}

    def on_windows(text) -> dict:
        from kerasbert.serving import graph_windows

        windows = graph_windows.split(module.tokenizer.pieces(text), tokenizer.maxlen, stride, vocab.index("[CLS]"),
                                      vocab.index("[SEP]"))
        out = head(windows["token_ids"], windows["segment_ids"])
        if task == "cls":
            return labelled(graph_windows.mean_by_document(out["probabilities"], windows))
        return _entities(text, graph_windows.merge_pieces(out["tag_ids"], windows), windows["text_token_ids"],
                         windows["text_starts"], windows["text_ends"], windows["text_lengths"], pieces, label_names)

    def on_text(text, text_b=None) -> dict:
        if stride is not None:
            return on_windows(text)
        pieces_of = module.tokenizer.tokenize(text, text_b) if pairs else module.tokenizer.tokenize(text)
        out = head(pieces_of["token_ids"], pieces_of["segment_ids"])
        if task == "cls":
            return out
        return _entities(text, out["tag_ids"], pieces_of["token_ids"], pieces_of["starts"], pieces_of["ends"],
                         pieces_of["lengths"], pieces, label_names)

    text = [tf.TensorSpec([None], tf.string, name="text")] + ([tf.TensorSpec([None], tf.string, name="text_b")]
                                                              if pairs else [])
    ids = [tf.TensorSpec([None, None], tf.int32, name="token_ids"), tf.TensorSpec([None, None], tf.int32,
                                                                                  name="segment_ids")]
    module.serve_text = tf.function(on_text, input_signature=text)
    module.serve_ids = tf.function(head, input_signature=ids)
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}


def vocab_checksum(path: str) -> str:
    """The SHA-256 of a vocabulary file, as ``kerasbert-export.json`` records it."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _info(run, args, labels: list[str], maxlen: int, fmt: str, int8: bool, precision: tuple[str, dict]) -> dict:
    checksum = vocab_checksum(run.file("vocab.txt"))
    metrics = run.read_json("metrics.json") if os.path.isfile(run.file("metrics.json")) else {}
    return {"format": fmt, "int8": int8, **int8_record(int8), "precision": precision[0],
            "precision_choice": precision[1], "task": args.task, "crf": bool(args.crf),
            "pairs": args.text_b is not None, "labels": labels, "maxlen": maxlen, "stride": args.stride,
            "lowercase": bool(args.lowercase),
            "vocab_sha256": checksum, "source_run": os.path.abspath(run.path), "dev": metrics.get("dev", {}),
            "dev_run": metrics.get("dev", {}),
            **({"target_maxlen": args.target_maxlen, "beams": args.beams} if args.task == "seq2seq" else {})}


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
    None."""
    return path if path and os.path.isfile(path) else None


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


def _set_aside(staging: str, out: str) -> str:
    """Move a rejected export from ``staging`` to the first free ``OUT.rejected`` (``OUT.rejected-2``, ...)."""
    kept, n = os.path.abspath(out) + REJECTED, 1
    while os.path.exists(kept if n == 1 else f"{kept}-{n}"):
        n += 1
    kept = kept if n == 1 else f"{kept}-{n}"
    os.replace(staging, kept)
    return kept


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
    from kerasbert.serving.vector_export import export_vectors, vector_source
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
    if args.stride != trained.args.stride:  # the run's dev score was measured with its own stride
        info["dev"] = info["dev_run"] = _dev_score(loaded)
    def write(staging: str) -> None:
        if format == "saved_model":
            _write_saved_model(staging, loaded, maxlen, info)
        else:
            from kerasbert.serving.convert import write_portable

            write_portable(staging, loaded, info, calibration, data_file(args.dev))

    publish_export(out, info, write, loss_over_bound, "the run's dev score", accept_loss)
    logger.info("exported %s (%s, %s) to %s", run.path, args.task, kind_of(info), out)
    return info


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


def _empty(folder: str) -> None:
    """Remove what ``folder`` holds, leaving it."""
    import shutil

    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def unscored_why(args) -> str:
    """Why a run's export has no dev score: its ``args.json`` names no dev file, or one that is not there."""
    return f"the run's dev file {args.dev!r} is not there" if args.dev else "the run was trained without a dev file"


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

    try:
        from kerasbert.serving.graph_text import GraphTokenizer
    except ImportError as e:
        raise fail(ConfigError, "export", "tensorflow-text, for the tokenizer inside the SavedModel",
                   f"{type(e).__name__}: {e}", 'pip install "kerasbert[serve]"') from None
    args = loaded.args
    info.pop("dev_unscored", None)
    info["dev"] = dict(info["dev_run"])  # float32: the run's own model
    if info["precision"] == "bf16":
        loaded = dataclasses.replace(loaded, model=in_bfloat16(loaded.model))
        info["dev"] = _dev_score(loaded)
        if not info["dev"]:
            info["dev_unscored"] = unscored_why(args)
    vocab = list(load_vocab(loaded.run.file("vocab.txt")))
    if args.task == "seq2seq":
        from kerasbert.generation.cache import CachedModel
        from kerasbert.serving.graph_decode import GraphDetokenizer
        from kerasbert.serving.seq2seq_export import served_seq2seq

        tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=maxlen - args.target_maxlen)
        module, signatures = served_seq2seq(loaded.model, tokenizer, GraphDetokenizer(vocab), args.beams,
                                            args.target_maxlen, vocab.index("[SEP]"))
        info["decoder"] = CachedModel(loaded.model).cache_shape  # what bounds a batch's cache when served
    elif args.task == "span":
        from kerasbert.serving.span_export import served_spans

        tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=maxlen)
        module, signatures = served_spans(loaded.model, tokenizer, loaded.labels.labels, vocab, args.stride)
    else:
        tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=maxlen)
        module, signatures = _served(loaded.model, tokenizer, loaded.labels.labels, vocab, args.task,
                                     bool(args.crf), args.text_b is not None, args.stride)
    tf.saved_model.save(module, folder, signatures=signatures)
