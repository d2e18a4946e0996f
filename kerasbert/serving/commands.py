"""The ``kerasbert`` subcommands that serve a model: ``embed``, ``export`` and ``serve``, each an argument function,
a check function and a run function as `kerasbert.cli`'s ``COMMANDS`` lists them; importing this module imports no
TensorFlow. The check functions find a missing folder or file, an output that cannot be written and options that do
not go together before TensorFlow starts, through the same checks the library calls make before a model loads."""

from __future__ import annotations

import argparse
import json
import os

from kerasbert.choices import (
    EMBED_MAXLEN,
    EMBED_POOLING,
    EXPORT_FORMATS,
    EXPORT_PRECISIONS,
    LOSS_BOUND,
    PREDICT_BATCH_SIZE,
    SERVE_DEFAULTS,
    SIM_POOLINGS,
)
from kerasbert.errors import ConfigError, fail
from kerasbert.finetune.train_flags import STRIDE_HELP, stride_argument
from kerasbert.log import progress_verbosity
from kerasbert.serving.folder import EXPORT_INFO, VECTOR_TASK, kind_of


# ------------------------------------------------------------------------------------------- embed
def _vector_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pooling", metavar="POOLING",
                        help=f"how token vectors become one: {', '.join(SIM_POOLINGS)} (default: {EMBED_POOLING} for "
                             "a checkpoint; a sentence-transformers folder's, a run's or an export's own)")
    parser.add_argument("--no-normalize", dest="normalize", action="store_false", default=None,
                        help="keep each vector's length (default: unit length for a checkpoint; as a "
                             "sentence-transformers folder, a run or an export says)")


def embed_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="MODEL", help="a checkpoint folder (Google or Hugging Face), a "
                        "sentence-transformers folder, a run folder of --task sim, or an export of one")
    parser.add_argument("--input", required=True,
                        help='a text file, one text a line, or a .jsonl file of {"text": ...}')
    parser.add_argument("--output", required=True,
                        help='vectors.npy (float32 [texts, hidden]) or vectors.jsonl ({"text", "vector"} a line)')
    _vector_arguments(parser)
    parser.add_argument("--maxlen", type=int, help=f"word pieces a text keeps (default: {EMBED_MAXLEN} for a "
                                                   "checkpoint, or fewer if its model has fewer positions; the "
                                                   "folder's, run's or export's own)")
    parser.add_argument("--batch-size", type=int, default=PREDICT_BATCH_SIZE,
                        help="texts the model runs at once (default: %(default)s)")
    prompts = parser.add_mutually_exclusive_group()
    prompts.add_argument("--prompt-name", metavar="NAME",
                         help="put the folder's prompt NAME before each text (config_sentence_transformers.json's "
                              "prompts, e.g. query for multilingual-e5; default: its default_prompt_name, if any)")
    prompts.add_argument("--prompt", metavar="TEXT",
                         help='put TEXT before each text, e.g. "query: " (--prompt "": none, the default left out)')
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def check_embed(args: argparse.Namespace) -> None:
    """``kerasbert embed``'s checks that need no TensorFlow: the model folder, ``--input``, ``--output`` and the
    options."""
    from kerasbert.files import check_existing
    from kerasbert.serving.embed import check_batch_size, check_output, check_prompt, check_source

    check_source(args.path, args.pooling, args.normalize, args.maxlen)
    check_prompt(args.path, args.prompt_name, args.prompt)
    check_existing(args.input, "--input")
    check_output(args.output)
    check_batch_size(args.batch_size)


def run_embed(args: argparse.Namespace) -> int:
    from kerasbert.serving.embed import embed_file

    vectors = embed_file(args.path, args.input, args.output, args.pooling, args.normalize, args.maxlen,
                         args.batch_size, verbose=progress_verbosity(args.quiet), prompt_name=args.prompt_name,
                         prompt=args.prompt)
    print(f"{len(vectors)} vectors of {vectors.shape[1]} written to {args.output}")
    return 0


# ------------------------------------------------------------------------------------------- export
def export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="MODEL", help="a run folder written by `kerasbert train`, or a checkpoint or "
                                                     "sentence-transformers folder (a model that answers vectors)")
    parser.add_argument("out", help="the export folder to write (must not exist)")
    parser.add_argument("--format", choices=EXPORT_FORMATS, default=EXPORT_FORMATS[0],
                        help="saved_model: raw text in, labels or entities out, TF Serving loads it; openvino or "
                             "onnx: the model alone, for `kerasbert serve` (default: %(default)s)")
    parser.add_argument("--int8", action="store_true",
                        help="openvino or onnx: quantize the matrix products to int8 and score the export on dev")
    parser.add_argument("--calibration", help="openvino --int8: the data file whose first examples calibrate int8 "
                                              "(default: the run's training file); vectors: a file of texts, one a "
                                              "line, the export is measured on against float32")
    parser.add_argument("--precision", default=EXPORT_PRECISIONS[0],
                        help="what the export computes in where it is not int8: auto (bf16 for openvino on a CPU "
                             "with AMX or avx512_bf16, else f32; kerasbert-export.json says why), f32, or bf16 "
                             "(openvino, or a cls/ner/span SavedModel where TensorFlow's bf16 is faster) "
                             "(default: %(default)s)")
    parser.add_argument("--accept-loss", action="store_true",
                        help="publish an openvino or onnx export even if it loses more than "
                             f"{LOSS_BOUND['cls'][1]:g} dev accuracy ({LOSS_BOUND['ner'][1]:g} entity F1, "
                             f"{LOSS_BOUND['seq2seq'][1]:g} ROUGE-L) against the run; without it such an export is "
                             "kept at OUT.rejected")
    stride_argument(parser, STRIDE_HELP + "; recorded in kerasbert-export.json")
    _vector_arguments(parser)


def check_export(args: argparse.Namespace) -> None:
    """``kerasbert export``'s checks that need no TensorFlow: ``OUT`` new and writable, the options, ``--calibration``
    and the folder to export with the options it takes."""
    from kerasbert.files import check_existing
    from kerasbert.serving.export import check_arguments
    from kerasbert.serving.precision import check_asked
    from kerasbert.serving.vector_export import exported_kind

    check_arguments(args.out, args.format, args.int8)
    check_asked(args.precision, args.format)
    check_existing(args.calibration, "--calibration")
    exported_kind(args.run, args.pooling, args.normalize, args.stride)


def run_export(args: argparse.Namespace) -> int:
    from kerasbert.serving.export import export

    info = export(args.run, args.out, args.format, int8=args.int8, calibration=args.calibration,
                  precision=args.precision, accept_loss=args.accept_loss, stride=args.stride, pooling=args.pooling,
                  normalize=args.normalize)
    if info["task"] == VECTOR_TASK:
        from kerasbert.serving.vector_export import describe

        print(f"{args.out}: {describe(info)}")
        return 0
    windows = f", stride {info['stride']}" if info.get("stride") is not None else ""
    labels = f", {len(info['labels'])} labels" if info["labels"] else ""  # seq2seq and sim have none
    print(f"{args.out}: {info['task']} model{labels}, maxlen {info['maxlen']}{windows}, {kind_of(info)}")
    if info["precision_choice"]["asked"] != info["precision"]:
        print(f"precision {computes_in(info)}: {info['precision_choice']['why']}")
    for name, scores in (("export", info["dev"]), ("run", info["dev_run"])):
        if scores:  # every format and task alike: a float32 SavedModel's score is the run's own
            print(f"dev score of the {name}: " + ", ".join(f"{key} {scores[key]:.4f}" for key in sorted(scores)
                                                            if isinstance(scores[key], float)))
    return 0


def computes_in(info: dict) -> str:
    """What an export computes in, from its ``kerasbert-export.json``: int8 products and ``precision`` elsewhere.

    Example:
    >>> computes_in({"int8": True, "precision": "f32"}), computes_in({"int8": False, "precision": "bf16"})
    ('int8 (f32 elsewhere)', 'bf16')
    """
    return f"int8 ({info['precision']} elsewhere)" if info.get("int8") else info["precision"]


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


def serve_arguments(parser: argparse.ArgumentParser) -> None:
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
    stride_argument(parser, "a run folder: " + STRIDE_HELP + " (an export folder windows as it was exported)")
    for flag, kind, text in SERVE_LIMITS:
        parser.add_argument(flag, type=kind, default=SERVE_DEFAULTS[flag[2:].replace("-", "_")],
                            help=f"{text} (default: %(default)s)")


def serve_loads_tensorflow(args: argparse.Namespace) -> bool:
    """Whether ``serve`` runs TensorFlow: for a run folder or a SavedModel export, not for an OpenVINO or ONNX one."""
    try:
        with open(os.path.join(args.path, EXPORT_INFO), encoding="utf-8") as f:
            return json.load(f).get("format", "saved_model") == "saved_model"
    except (OSError, ValueError, AttributeError):  # a run folder, or no export: its error comes from serve
        return True


def _server():
    """`kerasbert.serving.server`, or a ConfigError naming the ``serve`` extra where starlette or uvicorn is missing."""
    try:
        from kerasbert.serving import server
    except ImportError as e:
        raise fail(ConfigError, "serve", "starlette and uvicorn", f"{type(e).__name__}: {e}",
                   'pip install "kerasbert[serve]"') from None
    return server


def _settings(args: argparse.Namespace) -> dict:
    """The ``SERVE_LIMITS`` options' values by `kerasbert.serving.server.serve`'s names."""
    return {key: getattr(args, key) for key in (flag[2:].replace("-", "_") for flag, *_ in SERVE_LIMITS)}


def check_serve(args: argparse.Namespace) -> None:
    """``kerasbert serve``'s checks that need no TensorFlow (`kerasbert.serving.server.check_serve`)."""
    _server().check_serve(args.path, args.name, args.port, _settings(args), args.backend, args.stride)


def run_serve(args: argparse.Namespace) -> int:
    _server().serve(args.path, host=args.host, port=args.port, name=args.name, backend=args.backend,
                    stride=args.stride, **_settings(args))
    return 0


