"""``kerasbert pretrain``: its options and what it runs (`kerasbert.finetune.pretrain.pretrain`); importing this
module imports no TensorFlow."""

from __future__ import annotations

import argparse

from kerasbert.choices import PRETRAIN_DEFAULTS
from kerasbert.errors import ConfigError, fail
from kerasbert.finetune.args import TrainArgs, check_corpus, pretrain_options
from kerasbert.finetune.train_flags import encoder_arguments, fit_arguments, run_arguments
from kerasbert.log import progress_verbosity


def pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``kerasbert pretrain``: corpus, masking, encoder, training, run folder.

    Example:
    >>> parser = argparse.ArgumentParser()
    >>> pretrain_arguments(parser)
    >>> args = parser.parse_args(["--data", "corpus/*.txt", "--out", "runs/pt"])
    >>> args.lr, args.schedule, args.mask_rate, args.whole_word
    (5e-05, 'linear', 0.15, True)
    """
    defaults = TrainArgs(task="mlm", train="", out="", **PRETRAIN_DEFAULTS)
    data = parser.add_argument_group("corpus")
    data.add_argument("--data", help="plain text (a sentence a line, a blank line between documents) or JSONL "
                                     "({\"text\": ...} a document): a file, a glob (streamed) or a prepared folder")
    data.add_argument("--dev", help="held-out documents in the same format: their masked-LM loss picks the best "
                                    "epoch")
    data.add_argument("--out", required=True, help="the run folder to write (new or empty)")
    data.add_argument("--text-field", dest="text", help="JSONL: the field of a document's text (default: text)")
    rule = parser.add_argument_group("masking")
    for name, text in (("mask_rate", "share of word pieces predicted"),
                       ("mask_replace", "share of those replaced by [MASK]"),
                       ("mask_random", "share of those replaced by a random piece (the rest are kept)")):
        rule.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name),
                          help=f"{text} (default: {getattr(defaults, name):g})")
    rule.add_argument("--max-predictions", type=int, help="the most pieces predicted in a row (default: as many as "
                                                          "--mask-rate gives)")
    rule.add_argument("--no-whole-word", dest="whole_word", action="store_false",
                      help="mask single characters, not whole Chinese words (cut by jieba)")
    rule.add_argument("--nsp", action="store_true",
                      help="rows are sentence pairs and the model also learns next sentence prediction, as Google's "
                           "BERT was pretrained (default: off, masked LM alone, as RoBERTa)")
    encoder_arguments(parser.add_argument_group("encoder"))
    fit_arguments(parser.add_argument_group("training"), defaults, stride=False)
    run_arguments(parser.add_argument_group("run folder"))


def _options(args: argparse.Namespace) -> dict:
    return {key: value for key, value in vars(args).items()
            if key not in ("command", "debug", "data", "out", "resume", "overwrite", "quiet")}


def check_pretrain(args: argparse.Namespace) -> None:
    """The checks of ``kerasbert pretrain``'s arguments and files that need no TensorFlow, and jieba for whole-word
    masking (the run's own choice with ``--resume``)."""
    from kerasbert.finetune.runs import train_args
    from kerasbert.text.masking import require_segmenter

    if not args.resume and args.data is None:
        raise fail(ConfigError, "--data", "a corpus (or --resume to continue a run)", "none")
    if not args.resume:
        check_corpus(args.data)
    checked = train_args("mlm", args.data, args.out, args.resume, args.overwrite,
                         pretrain_options(args.resume, _options(args)))
    if checked.whole_word and not str(checked.vocab or "").endswith(".json"):  # a tokenizer.json marks its words
        require_segmenter()


def run_pretrain(args: argparse.Namespace) -> int:
    """Run ``kerasbert pretrain`` and print the best epoch's held-out scores and the folders written."""
    from kerasbert.finetune.pretrain import pretrain

    result = pretrain(args.data, args.out, resume=args.resume, overwrite=args.overwrite,
                      verbose=progress_verbosity(args.quiet), **({} if args.resume else _options(args)))
    if result.get("chief") is False:  # a multi-worker run's other workers: the chief reports
        return 0
    if result.get("dev"):
        dev = result["dev"]
        nsp = f", next sentence accuracy {dev['nsp_accuracy']:.4f}" if "nsp_accuracy" in dev else ""
        print(f"best epoch {result['best_epoch']} on dev: masked-LM loss {dev.get('mlm_loss', dev['loss']):.4f}, "
              f"accuracy {dev['accuracy']:.4f}{nsp}")
    print(f"run folder: {args.out}\nGoogle checkpoint: {result['google']}\nHugging Face folder: {result['hf']}")
    return 0
