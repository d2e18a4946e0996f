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
import dataclasses
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, MutableMapping, Sequence

from kerasbert.choices import (
    CHECKPOINT_FORMATS,
    EXPORT_FORMATS,
    LOSS_BOUND,
    MAXLEN,
    PRECISIONS,
    PREDICT_BATCH_SIZE,
    SERVE_DEFAULTS,
    SUMMARY_FORMATS,
)
from kerasbert.errors import ConfigError, KerasBertError, ModelError, fail
from kerasbert.finetune.args import TaskOptions, family_argument, reading_arguments, task_argument, train_arguments
from kerasbert.finetune.demo_data import DEMO_TRAINING
from kerasbert.log import start_tensorflow

HEAD_SPECS = "cls:N, tagging:K, tagging:K:crf, mlm or nsp"


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, and how it runs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    tensorflow: Callable[[argparse.Namespace], bool] = lambda args: True  # whether running it starts TensorFlow


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
def _run_train(args: argparse.Namespace) -> int:
    from kerasbert.finetune.training import train

    options = {key: value for key, value in vars(args).items()
               if key not in ("command", "debug", "task", "train", "out", "resume", "overwrite", "quiet")}
    if not args.resume:
        for name in ("task", "train"):
            if getattr(args, name) is None:
                raise fail(ConfigError, f"--{name}", "a value (or --resume to continue a run)", "none")
    result = train(args.task, args.train, args.out, resume=args.resume, overwrite=args.overwrite,
                   verbose=0 if args.quiet else 1, **({} if args.resume else options))
    _print_scores(result.get("dev"), f"best epoch {result['best_epoch']} on dev" if result.get("dev") else "")
    print(f"run folder: {args.out}")
    return 0


def _print_scores(scores: dict | None, title: str) -> None:
    if not scores:
        return
    from kerasbert.finetune.metrics import per_type_table

    print(title)
    if "per_type" in scores:
        print(per_type_table(scores))
    elif "rouge_l" in scores:
        print("  ".join(f"{key.replace('_', '-').upper()} {scores[key]:.4f}"
                        for key in ("rouge_1", "rouge_2", "rouge_l", "bleu")))
    else:
        print(f"accuracy {scores['accuracy']:.4f}  macro-F1 {scores['macro_f1']:.4f}")


# ------------------------------------------------------------------------------------------- evaluate, predict
def _evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run folder written by `kerasbert train`")
    parser.add_argument("--data", help="a labelled file in the training format (default: the run's dev file)")
    parser.add_argument("--batch-size", type=int)


def _run_evaluate(args: argparse.Namespace) -> int:
    from kerasbert.finetune.training import evaluate

    _print_scores(evaluate(args.run, args.data, args.batch_size), f"{args.data or 'dev'}:")
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


def _check_output(path: str) -> None:
    """A ConfigError for an ``--output`` that is a folder or lies under a file, before the model loads."""
    from kerasbert.finetune.runs import check_writable

    if os.path.isdir(path):
        raise fail(ConfigError, f"--output {path}", "a file to write the predictions to", "a folder")
    check_writable(path, "--output")


def _run_predict(args: argparse.Namespace) -> int:
    from kerasbert.files import write_text
    from kerasbert.text.readers import read_texts

    if bool(args.text) == bool(args.input):
        raise fail(ConfigError, "predict", "--text or --input (one of them)",
                   "both" if args.text else "neither")
    if bool(args.run) == bool(args.model):
        raise fail(ConfigError, "predict", "a run folder or --model EXPORT (one of them)",
                   "both" if args.run else "neither")
    if args.output:
        _check_output(args.output)
    rows = [{"text": text} for text in args.text] if args.text else read_texts(args.input)
    if args.model:  # an OpenVINO or ONNX export runs without TensorFlow: nothing on this path imports it
        from kerasbert.serving.exported import predict_export

        predictions = predict_export(args.model, rows, args.batch_size or PREDICT_BATCH_SIZE)
    else:
        from kerasbert.finetune.training import predict

        predictions = predict(args.run, rows, args.batch_size)
    lines = [json.dumps(row, ensure_ascii=False) for row in predictions]
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        write_text(args.output, "".join(line + "\n" for line in lines))
        print(f"{len(lines)} predictions written to {args.output}")
    else:
        print("\n".join(lines))
    return 0


# ------------------------------------------------------------------------------------------- prepare
def _prepare_arguments(parser: argparse.ArgumentParser) -> None:
    task_argument(parser, required=True)
    parser.add_argument("--data", required=True, help="a file, or a glob of files in quotes ('data/train-*.tsv')")
    parser.add_argument("--vocab", required=True, help="vocab.txt of the checkpoint")
    parser.add_argument("--out", required=True, help="the folder to write (new or empty)")
    parser.add_argument("--maxlen", type=int, default=MAXLEN, help="word pieces a row keeps (default: %(default)s)")
    parser.add_argument("--labels", help="labels.json of a run: use its label ids instead of reading the data's")
    parser.add_argument("--chunk", type=int, default=10_000, help="examples encoded at once (default: %(default)s)")
    reading_arguments(parser, "NER: labels for a CRF head (every piece labelled)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _run_prepare(args: argparse.Namespace) -> int:
    from kerasbert.finetune.streaming import prepare
    from kerasbert.finetune.tasks import get_task
    from kerasbert.text.pre_tokenize import refuse_word_vocabulary
    from kerasbert.text.readers import LabelSet
    from kerasbert.text.tokenizer import Tokenizer

    task = get_task(args.task, **TaskOptions.of(args).task_options())
    labels = LabelSet.load(args.labels) if args.labels else None
    tokenizer = Tokenizer(args.vocab, do_lower_case=args.lowercase)
    refuse_word_vocabulary(tokenizer.ids_to_tokens(range(tokenizer.vocab_size)), args.vocab)
    meta = prepare(task, args.data, tokenizer, args.maxlen, args.out, labels, chunk=args.chunk,
                   verbose=0 if args.quiet else 1)
    print(f"{meta['count']} examples ({meta['truncated']} cut to --maxlen {meta['maxlen']}) from "
          f"{len(meta['files'])} files in {len(meta['shards'])} shards: {args.out}")
    return 0


# ------------------------------------------------------------------------------------------- demo
def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    task_argument(parser, extra=("all",), default="all")
    parser.add_argument("--out", default="kerasbert-demo", help="folder for the data and runs (default: %(default)s)")
    parser.add_argument("--epochs", type=int,
                        help=f"epochs (default: {DEMO_TRAINING['epochs']}; "
                             f"seq2seq {DEMO_OPTIONS['seq2seq']['epochs']})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


DEMO_TEXTS = {"cls": ["这家餐厅的菜非常好吃，服务也很满意", "房间很脏，真的让人失望"],
              "ner": ["张伟去年加入了华为公司", "李娜和王芳昨天去了北京"],
              "seq2seq": ["昨天，华为公司在杭州举办了发布会，现场来了很多人，气氛非常热烈。"]}
DEMO_ALL = ("cls", "ner")  # what `kerasbert demo` runs by default; seq2seq needs the seq2seq extra
DEMO_OPTIONS = {"seq2seq": {"target_maxlen": 16, "epochs": 30, "lr": 3e-3}}  # a title needs longer to learn


def _demo_files(task: str, out: str, seed: int) -> dict[str, str]:
    """The demo's ``train``, ``dev``, ``test`` and ``vocab`` files of ``task``, written under ``out/data``."""
    import os

    from kerasbert.finetune.demo_data import write_demo_data, write_title_data

    if task == "seq2seq":
        return write_title_data(os.path.join(out, "data", "seq2seq"), seed=seed)
    data = write_demo_data(os.path.join(out, "data"), seed=seed)
    return {split: data[f"{task}_{split}"] for split in ("train", "dev", "test")} | {"vocab": data["vocab"]}


def _run_demo(args: argparse.Namespace) -> int:
    import os

    from kerasbert.finetune.training import evaluate, predict, train

    for task in DEMO_ALL if args.task == "all" else (args.task,):
        data, run = _demo_files(task, args.out, args.seed), os.path.join(args.out, task)
        print(f"== {task}: training the tiny config from scratch on {data['train']}")
        settings = {**DEMO_TRAINING, **DEMO_OPTIONS.get(task, {})}
        train(task, data["train"], run, dev=data["dev"], vocab=data["vocab"],
              **{**settings, "epochs": args.epochs or settings["epochs"]}, seed=args.seed, overwrite=True,
              verbose=0 if args.quiet else 1)
        _print_scores(evaluate(run, data["test"], verbose=0), f"== {task}: test set")
        for row in predict(run, DEMO_TEXTS[task]):
            print(json.dumps(row, ensure_ascii=False))
        print(f"== {task}: run folder {run}")
    return 0


# ------------------------------------------------------------------------------------------- export
def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run folder written by `kerasbert train`")
    parser.add_argument("out", help="the export folder to write (must not exist)")
    parser.add_argument("--format", choices=EXPORT_FORMATS, default=EXPORT_FORMATS[0],
                        help="saved_model: raw text in, labels or entities out, TF Serving loads it; openvino or "
                             "onnx: the model alone, for `kerasbert serve` (default: %(default)s)")
    parser.add_argument("--int8", action="store_true",
                        help="openvino or onnx: quantize the matrix products to int8 and score the export on dev")
    parser.add_argument("--calibration", help="openvino --int8: the data file whose first examples calibrate int8 "
                                              "(default: the run's training file)")
    parser.add_argument("--precision", default=PRECISIONS[0],
                        help="openvino: f32, or bf16 on a CPU with AMX or avx512_bf16, for what is not int8 "
                             "(default: %(default)s)")
    parser.add_argument("--accept-loss", action="store_true",
                        help="publish an openvino or onnx export even if it loses more than "
                             f"{LOSS_BOUND['cls'][1]:g} dev accuracy ({LOSS_BOUND['ner'][1]:g} entity F1, "
                             f"{LOSS_BOUND['seq2seq'][1]:g} ROUGE-L) against the run; without it such an export is "
                             "kept at OUT.rejected")


def _run_export(args: argparse.Namespace) -> int:
    from kerasbert.serving.export import export, kind_of

    info = export(args.run, args.out, args.format, int8=args.int8, calibration=args.calibration,
                  precision=args.precision, accept_loss=args.accept_loss)
    print(f"{args.out}: {info['task']} model, {len(info['labels'])} labels, maxlen {info['maxlen']}, {kind_of(info)}")
    for name, scores in (("export", info["dev"]), ("run", info["dev_run"])):
        if scores and info["format"] != "saved_model":
            print(f"dev score of the {name}: " + ", ".join(f"{key} {scores[key]:.4f}" for key in sorted(scores)
                                                            if isinstance(scores[key], float)))
    return 0


# ------------------------------------------------------------------------------------------- serve
SERVE_LIMITS = (("--max-batch", int, "the most instances the model runs at once"),
                ("--max-wait-ms", float, "how long the oldest waiting instance waits for others, in ms"),
                ("--max-queue", int, "the most instances waiting; a request that does not fit answers 429"),
                ("--max-instances", int, "the most instances of one request; beyond, 413"),
                ("--max-body-bytes", int, "the largest request body; beyond, 413"),
                ("--timeout-s", float, "how long a request waits for its answer; beyond, 504"),
                ("--header-timeout-s", float, "how long a client may take to send a request's header; beyond, 408 "
                                              "and the connection closes"),
                ("--body-timeout-s", float, "how long a client may take to send a body after its header; beyond, "
                                            "408 and the connection closes"),
                ("--keep-alive-s", float, "how long an idle kept-alive connection stays open"),
                ("--max-connections", int, "the most connections open at once; beyond, 503 at once (lowered to fit "
                                           "the open-file limit)"),
                ("--grace-s", float, "on SIGTERM, how long requests in flight may finish; then 503 and exit (keep it "
                                     "under the orchestrator's, 30 s in Kubernetes)"))  # defaults: SERVE_DEFAULTS


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="an export folder (`kerasbert export`), or a run folder, exported first into a "
                                     "temporary folder")
    parser.add_argument("--host", default=SERVE_DEFAULTS["host"], help="the address to listen on (default: "
                                                                       "%(default)s)")
    parser.add_argument("--port", type=int, default=SERVE_DEFAULTS["port"],
                        help="the port; 0 picks a free one (default: %(default)s)")
    parser.add_argument("--name", help="the model name of the URLs, /v1/models/NAME:predict (default: the folder's "
                                       "name)")
    parser.add_argument("--backend", choices=EXPORT_FORMATS,
                        help="the format a run folder is exported to first (default: saved_model); an export folder "
                             "is served in its own format")
    for flag, kind, text in SERVE_LIMITS:
        parser.add_argument(flag, type=kind, default=SERVE_DEFAULTS[flag[2:].replace("-", "_")],
                            help=f"{text} (default: %(default)s)")


def _serve_loads_tensorflow(args: argparse.Namespace) -> bool:
    """Whether ``serve`` runs TensorFlow: for a run folder or a SavedModel export, not for an OpenVINO or ONNX one."""
    try:
        with open(os.path.join(args.path, "kerasbert-export.json"), encoding="utf-8") as f:
            return json.load(f).get("format", "saved_model") == "saved_model"
    except (OSError, ValueError, AttributeError):  # a run folder, or no export: its error comes from serve
        return True


def _run_serve(args: argparse.Namespace) -> int:
    try:
        from kerasbert.serving.server import serve
    except ImportError as e:
        raise fail(ConfigError, "serve", "starlette and uvicorn", f"{type(e).__name__}: {e}",
                   'pip install "kerasbert[serve]"') from None
    options = ["host", "port", "name", "backend"] + [flag[2:].replace("-", "_") for flag, *_ in SERVE_LIMITS]
    serve(args.path, **{option: getattr(args, option) for option in options})
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
    "train": Command("fine-tune on a classification or NER dataset into a run folder", train_arguments, _run_train),
    "evaluate": Command("score a run's model on a labelled file", _evaluate_arguments, _run_evaluate),
    "predict": Command("predict raw texts with a run's model", _predict_arguments, _run_predict,
                       lambda args: args.model is None),
    "prepare": Command("tokenize a large dataset (a file or a glob) once into TFRecord shards, streaming it",
                       _prepare_arguments, _run_prepare),
    "export": Command("export a run's model for serving: a SavedModel that takes raw text", _export_arguments,
                      _run_export),
    "serve": Command("serve an export (or a run) over HTTP with TF Serving's REST API, batching requests",
                     _serve_arguments, _run_serve, _serve_loads_tensorflow),
    "convert": Command("convert a BERT checkpoint between Google's TF1 format and Hugging Face's",
                       _convert_arguments, _run_convert),
    "demo": Command("train, evaluate and predict on bundled data with the tiny config, offline",
                    _demo_arguments, _run_demo),
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
    try:
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


if __name__ == "__main__":
    sys.exit(main())
