"""The ``kerasbert`` console script.

Each subcommand is two small functions, one that adds its arguments to a parser and one that
runs it and returns the exit status, listed once in ``COMMANDS``; adding ``train`` or ``predict``
means writing that pair and one ``COMMANDS`` entry. A :class:`~kerasbert.errors.KerasBertError`
prints its one-line message to stderr and exits 2; ``--debug`` shows the traceback instead.

Example:
>>> main(["summary", "tiny", "--head", "cls:2", "--format", "json"])  # doctest: +ELLIPSIS
{
  "model": "bert-cls",
...
0

From a shell: ``kerasbert summary bert_base_chinese --head cls:2 --batch 32 --seq 128``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import traceback
from collections.abc import Callable, MutableMapping, Sequence

from kerasbert.choices import (
    CHECKPOINT_FORMATS,
    MAXLEN,
    PREDICT_BATCH_SIZE,
    SUMMARY_FORMATS,
)
from kerasbert.errors import ConfigError, KerasBertError, ModelError, fail
from kerasbert.finetune.demo import demo_arguments, run_demo
from kerasbert.finetune.interrupt import TrainingInterrupted
from kerasbert.finetune.pretrain_cli import check_pretrain, pretrain_arguments, run_pretrain
from kerasbert.finetune.train_flags import (
    STRIDE_HELP,
    family_argument,
    reading_arguments,
    stride_argument,
    task_argument,
    train_arguments,
)
from kerasbert.log import hidden_startup_notices, progress_verbosity, start_tensorflow
from kerasbert.serving.commands import (
    check_embed,
    check_export,
    check_serve,
    embed_arguments,
    export_arguments,
    run_embed,
    run_export,
    run_serve,
    serve_arguments,
    serve_loads_tensorflow,
)
from kerasbert.serving.fill_mask_cli import check_fill_mask, fill_mask_arguments, run_fill_mask
from kerasbert.serving.rerank_command import check_rerank, rerank_arguments, run_rerank

HEAD_SPECS = "cls:N, tagging:K, tagging:K:crf, mlm or nsp"


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, how it runs, and the checks of its arguments and
    files that need no TensorFlow, run before TensorFlow starts so that a bad one is answered at once."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    tensorflow: Callable[[argparse.Namespace], bool] = lambda args: True  # whether running it starts TensorFlow
    check: Callable[[argparse.Namespace], None] = lambda args: None


# ------------------------------------------------------------------------------------------- summary
def _summary_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a bert_config.json path or a preset name (tiny, bert_base_chinese, ...)")
    family_argument(parser)
    parser.add_argument("--head", help=f"attach a head: {HEAD_SPECS}")
    parser.add_argument("--pooler", action="store_true", help="build the backbone with Pooler/Pooler-Dense")
    parser.add_argument("--format", choices=SUMMARY_FORMATS, default=SUMMARY_FORMATS[0])
    parser.add_argument("--batch", type=int, help="batch size of the activation-memory estimate")
    parser.add_argument("--seq", type=int, help="sequence length of the activation-memory estimate")
    parser.add_argument("--expand", action="store_true", help="one row per weight (qkv_kernel, qkv_bias, ...)")


def parse_head(spec: str) -> Callable:
    """``"cls:2"`` -> a function ``backbone -> keras.Model`` that attaches that head with kerasbert.modeling.heads.

    A ``cls`` head on a backbone built with ``--pooler`` classifies from ``Pooler-Dense``
    (``pooling="pooler"``); otherwise from ``CLS-token`` (``x[:, 0]``).

    Example:
    >>> parse_head("tagging:11:crf").__name__
    'tagging:11:crf'
    """
    from kerasbert import layer_names
    from kerasbert.modeling import heads

    match = re.fullmatch(r"(cls|tagging):([1-9][0-9]*)(:crf)?|mlm|nsp", spec or "")
    if not match or (match.group(3) and match.group(1) != "tagging"):
        raise fail(ModelError, "--head", HEAD_SPECS, repr(spec), "e.g. --head cls:2 or --head tagging:9:crf")
    kind, size, crf = match.group(1) or spec, match.group(2), bool(match.group(3))

    def attach(backbone):
        if kind == "cls":
            pooled = any(layer.name == layer_names.POOLER_DENSE for layer in backbone.layers)
            return heads.cls(backbone, int(size), pooling="pooler" if pooled else "first")
        if kind == "tagging":
            return heads.tagging(backbone, int(size), crf=crf)
        return getattr(heads, kind)(backbone)

    attach.__name__ = spec
    return attach


def _run_summary(args: argparse.Namespace) -> int:
    from kerasbert.annotated.collect import summary
    from kerasbert.modeling.models import build_transformer_model

    attach = parse_head(args.head) if args.head else None  # a bad spec fails before the slow build
    model = build_transformer_model(args.config, model=args.model, with_pool=args.pooler, verbose=False)
    if attach is not None:
        model = attach(model)
    summary(model, expand=args.expand, batch_size=args.batch, seq_len=args.seq, format=args.format,
            print_fn=print)  # the CLI's result goes to stdout
    return 0


# ------------------------------------------------------------------------------------------- train
def _train_options(args: argparse.Namespace) -> dict:
    """The `TrainArgs` fields ``kerasbert train``'s options give (none with ``--resume``: the run's own)."""
    return {} if args.resume else {key: value for key, value in vars(args).items() if key not in
                                   ("command", "debug", "task", "train", "out", "resume", "overwrite", "quiet")}


def _check_train(args: argparse.Namespace) -> None:
    from kerasbert.finetune.runs import train_args

    train_args(args.task, args.train, args.out, args.resume, args.overwrite, _train_options(args))


def _run_train(args: argparse.Namespace) -> int:
    from kerasbert.finetune.training import train

    result = train(args.task, args.train, args.out, resume=args.resume, overwrite=args.overwrite,
                   verbose=progress_verbosity(args.quiet), **_train_options(args))
    print_scores(result.get("dev"), f"best epoch {result['best_epoch']} on dev" if result.get("dev") else "")
    print(f"run folder: {args.out}")
    return 0


def print_scores(scores: dict | None, title: str) -> None:
    """A run's scores under ``title``, as the task reports them (`kerasbert.finetune.metrics.score_text`); nothing
    for none."""
    if not scores:
        return
    from kerasbert.finetune.metrics import score_text

    print(title)
    print(score_text(scores))


# ------------------------------------------------------------------------------------------- evaluate, predict
def _evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run folder written by `kerasbert train`")
    parser.add_argument("--data", help="a labelled file in the training format (default: the run's dev file)")
    parser.add_argument("--batch-size", type=int)
    stride_argument(parser, STRIDE_HELP)


def _check_evaluate(args: argparse.Namespace) -> None:
    from kerasbert.finetune.runs import scored_file

    scored_file(args.run, args.data)


def _run_evaluate(args: argparse.Namespace) -> int:
    from kerasbert.finetune.training import evaluate

    scores = evaluate(args.run, args.data, args.batch_size, verbose=progress_verbosity(), stride=args.stride)
    print_scores(scores, f"{args.data or 'dev'}:")
    return 0


def _predict_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", help="a run folder written by `kerasbert train`")
    parser.add_argument("--model", help="an export folder written by `kerasbert export`, instead of a run")
    parser.add_argument("--text", action="append", help="a text to predict (repeatable)")
    parser.add_argument("--input", help='a .jsonl file of {"text": ...} (and "text_b") or a .txt file, a text a line')
    parser.add_argument("--output", help="write the predictions here as JSONL (default: print them)")
    parser.add_argument("--batch-size", type=int,
                        help="texts the model runs at once (default: the run's training batch size; "
                             f"{PREDICT_BATCH_SIZE} with --model)")
    stride_argument(parser, STRIDE_HELP + "; an export windows as it was exported")
    parser.add_argument("--explain", action="store_true",
                        help="cls runs: each row also gets its word pieces (tokens) and their integrated gradients "
                             "scores in [0, 1] for the predicted label (scores)")


def _check_output(path: str) -> None:
    """A ConfigError for an ``--output`` that is a folder or lies under a file, before the model loads."""
    from kerasbert.finetune.runs import check_writable

    if os.path.isdir(path):
        raise fail(ConfigError, f"--output {path}", "a file to write the predictions to", "a folder")
    check_writable(path, "--output")


def _check_predict(args: argparse.Namespace) -> None:
    from kerasbert.files import check_existing
    from kerasbert.finetune.runs import finished_run

    if bool(args.text) == bool(args.input):
        raise fail(ConfigError, "predict", "--text or --input (one of them)",
                   "both" if args.text else "neither")
    if bool(args.run) == bool(args.model):
        raise fail(ConfigError, "predict", "a run folder or --model EXPORT (one of them)",
                   "both" if args.run else "neither")
    if args.model and args.stride is not None:
        raise fail(ConfigError, "--stride", "a run folder (an export windows as it was exported)",
                   f"--model {args.model}", "export the run again with --stride, or predict with the run folder")
    if args.output:
        _check_output(args.output)
    check_existing(args.input, "--input")
    if args.explain and args.model:
        raise fail(ConfigError, "--explain", "a run folder (its Keras model gives the gradients)",
                   f"--model {args.model}", "predict with the run folder to explain")
    if args.run:
        task = finished_run(args.run).task
        if args.explain and task != "cls":
            raise fail(ConfigError, "--explain", "a run of --task cls (a classifier)", f"--task {task}",
                       "integrated gradients explain one class's probability of a whole text")


def _input_fields(args: argparse.Namespace) -> tuple[str, ...]:
    """The fields of an input row of the run's or export's task (`kerasbert.choices.input_fields`)."""
    from kerasbert.choices import input_fields

    if args.model:
        from kerasbert.serving.folder import read_info

        info = read_info(args.model)
        return input_fields(info["task"], info["pairs"])
    from kerasbert.finetune.runs import finished_run

    args_of = finished_run(args.run)
    return input_fields(args_of.task, args_of.text_b is not None)


def _run_predict(args: argparse.Namespace) -> int:
    from kerasbert.files import output_rows
    from kerasbert.text.readers import read_texts

    fields = _input_fields(args)
    if args.text and fields != ("text",):
        raise fail(ConfigError, "--text", f"--input, a .jsonl file of {' and '.join(fields)}",
                   f"--text for a model that reads {' and '.join(fields)}")
    rows = [{"text": text} for text in args.text] if args.text else read_texts(args.input, fields)
    if args.model:  # an OpenVINO or ONNX export runs without TensorFlow: nothing on this path imports it
        from kerasbert.serving.exported import predict_export

        predictions = predict_export(args.model, rows, args.batch_size or PREDICT_BATCH_SIZE)
    else:
        from kerasbert.finetune.training import predict

        predictions = predict(args.run, rows, args.batch_size, stride=args.stride, explain=args.explain)
    output_rows(predictions, args.output, "predictions written")
    return 0


# ------------------------------------------------------------------------------------------- prepare
def _prepare_arguments(parser: argparse.ArgumentParser) -> None:
    task_argument(parser, required=True)
    parser.add_argument("--data", required=True, help="a file, or a glob of files in quotes ('data/train-*.tsv')")
    parser.add_argument("--vocab", required=True, help="vocab.txt (or tokenizer.json) of the checkpoint")
    parser.add_argument("--out", required=True, help="the folder to write (new or empty)")
    parser.add_argument("--maxlen", type=int, default=MAXLEN, help="word pieces a row keeps (default: %(default)s)")
    parser.add_argument("--labels", help="labels.json of a run: use its label ids instead of reading the data's")
    parser.add_argument("--chunk", type=int, default=10_000, help="examples encoded at once (default: %(default)s)")
    reading_arguments(parser, "NER: labels for a CRF head (every piece labelled)")
    parser.add_argument("--no-whole-word", dest="whole_word", action="store_false",
                        help="mlm: words of single characters, not whole Chinese words (as pretrain's option)")
    parser.add_argument("--nsp", action="store_true", help="mlm: sentence pairs for next sentence prediction (as "
                                                           "pretrain's option)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _check_prepare(args: argparse.Namespace) -> None:
    from kerasbert.files import check_existing, is_glob

    check_existing(args.vocab, "--vocab")
    check_existing(args.labels, "--labels")
    if not is_glob(args.data):
        check_existing(args.data, "--data")


def _run_prepare(args: argparse.Namespace) -> int:
    from kerasbert.finetune.streaming import prepare
    from kerasbert.finetune.tasks import task_of
    from kerasbert.text.pre_tokenize import refuse_word_vocabulary
    from kerasbert.text.readers import LabelSet
    from kerasbert.text.tokenizer import Tokenizer
    from kerasbert.text.tokenizer_files import load_tokenizer

    task = task_of(args)
    if not task.streams:
        raise fail(ConfigError, "--task", "a task whose rows stream from prepared shards", repr(args.task),
                   f"train --task {args.task} on one --train file; it is read in memory")
    labels = LabelSet.load(args.labels) if args.labels else None
    tokenizer = load_tokenizer(args.vocab, lowercase=args.lowercase)  # a vocab.txt, or a tokenizer.json
    if isinstance(tokenizer, Tokenizer):
        refuse_word_vocabulary(tokenizer.ids_to_tokens(range(tokenizer.vocab_size)), args.vocab)
    meta = prepare(task, args.data, tokenizer, args.maxlen, args.out, labels, chunk=args.chunk,
                   verbose=progress_verbosity(args.quiet))
    print(f"{meta['count']} examples ({meta['truncated']} cut to --maxlen {meta['maxlen']}) from "
          f"{len(meta['files'])} files in {len(meta['shards'])} shards: {args.out}")
    return 0


# ------------------------------------------------------------------------------------------- convert
def _convert_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", help="a Google checkpoint (prefix or folder) or Hugging Face weights (folder or file)")
    parser.add_argument("dst", help="the output folder: weights, config and vocab.txt")
    parser.add_argument("--to", choices=CHECKPOINT_FORMATS, help="the output format (default: the other one)")
    parser.add_argument("--force", action="store_true", help="write into a folder that already holds files")
    family_argument(parser)


def _run_convert(args: argparse.Namespace) -> int:
    from kerasbert.weights.convert import convert_checkpoint

    print(convert_checkpoint(args.src, args.dst, args.to, model=args.model, force=args.force))
    return 0


COMMANDS: dict[str, Command] = {
    "summary": Command("annotated parameter summary of a model built from a config (no weights loaded)",
                       _summary_arguments, _run_summary),
    "train": Command("fine-tune on a classification, NER, span, similarity or seq2seq dataset into a run folder",
                     train_arguments, _run_train, check=_check_train),
    "pretrain": Command("continue pretraining a BERT on raw text (whole-word masked LM) into a run folder, a Google "
                        "checkpoint and a Hugging Face folder", pretrain_arguments, run_pretrain, check=check_pretrain),
    "evaluate": Command("score a run's model on a labelled file", _evaluate_arguments, _run_evaluate,
                        check=_check_evaluate),
    "predict": Command("predict raw texts with a run's model", _predict_arguments, _run_predict,
                       lambda args: args.model is None, _check_predict),
    "prepare": Command("tokenize a large dataset (a file or a glob) once into TFRecord shards, streaming it",
                       _prepare_arguments, _run_prepare, check=_check_prepare),
    "fill-mask": Command("a masked LM's guesses for each [MASK] of texts, from a checkpoint or a pretraining run",
                         fill_mask_arguments, run_fill_mask, check=check_fill_mask),
    "embed": Command("sentence vectors of texts from a checkpoint, a sentence-transformers folder, a run or an "
                     "export", embed_arguments, run_embed, serve_loads_tensorflow, check_embed),
    "rerank": Command("order a query's passages by a rerank run's (or export's) cross-encoder scores, best first",
                      rerank_arguments, run_rerank, serve_loads_tensorflow, check_rerank),
    "export": Command("export a run's model for serving: a SavedModel that takes raw text", export_arguments,
                      run_export, check=check_export),
    "serve": Command("serve an export (or a run) over HTTP with TF Serving's REST API, batching requests",
                     serve_arguments, run_serve, serve_loads_tensorflow, check_serve),
    "convert": Command("convert a BERT checkpoint between Google's TF1 format and Hugging Face's",
                       _convert_arguments, _run_convert),
    "demo": Command("train, evaluate and predict on bundled data with the tiny config, offline",
                    demo_arguments, run_demo),
}


# ------------------------------------------------------------------------------------------- entry point
class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr and exit status 2, as kerasbert's errors."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``kerasbert`` parser with one subparser per entry of ``COMMANDS``."""
    parser = OneLineParser(prog="kerasbert", description="BERT in Keras 3 the bert4keras way.")
    parser.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command.add_arguments(sub)
    return parser


def quiet_tensorflow(environ: MutableMapping[str, str] = os.environ) -> None:
    """Hide TensorFlow's C++ start-up lines (device and CPU-feature notices) unless the user set the level.

    TensorFlow reads ``TF_CPP_MIN_LOG_LEVEL`` when it starts, so this runs before any command imports it;
    level 2 still shows errors.
    """
    environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kerasbert COMMAND ...``; returns the exit status (0, or 2 for a usage or kerasbert error).

    Args:
        argv: list of str. the arguments after the program name; ``sys.argv[1:]`` when None.

    Example:
    >>> main(["summary", "tiny", "--head", "bad"])
    2
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit:  # argparse exits on --help and on usage errors
        return int(exit.code or 0)
    command = COMMANDS[args.command]
    with contextlib.nullcontext() if args.debug else hidden_startup_notices():  # TensorFlow's notices, all run long
        try:
            command.check(args)
            if not args.debug:
                quiet_tensorflow()
                if command.tensorflow(args):
                    start_tensorflow()
            return command.run(args)
        except KerasBertError as error:
            if args.debug:
                traceback.print_exc()
            print(f"kerasbert {args.command}: error: {error}", file=sys.stderr)
            return 2
        except TrainingInterrupted as stop:  # its resume state saved
            print(stop.line(f"kerasbert {args.command}"), file=sys.stderr)
            return stop.exit_status
        except KeyboardInterrupt:  # before training started, or a second Ctrl-C: the last state saved stays
            print(f"kerasbert {args.command}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
