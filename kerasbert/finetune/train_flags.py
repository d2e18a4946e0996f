"""The options of ``kerasbert train`` (and the shared ones of ``pretrain``, ``prepare``, ``predict``, ``evaluate``):
one argparse option per `kerasbert.finetune.args.TrainArgs` field, in groups, without TensorFlow.

Example:
>>> parser = argparse.ArgumentParser()
>>> train_arguments(parser)
>>> parser.parse_args(["--out", "run", "--task", "qa", "--max-query-length", "32"]).max_query_length
32
"""

from __future__ import annotations

import argparse

from kerasbert.choices import (
    ADVERSARIAL_METHODS,
    MAXLEN,
    MODEL_FAMILIES,
    PRE_TOKENIZERS,
    SCHEDULES,
    SIM_LOSSES,
    SIM_POOLINGS,
    STRATEGIES,
    STRIDE_TASKS,
    TASK_NAMES,
    XLA_MIN_PARAMS,
)
from kerasbert.finetune.args import TrainArgs
from kerasbert.text.schemes import SCHEMES

__all__ = ["STRIDE_HELP", "column", "encoder_arguments", "family_argument", "fit_arguments", "reading_arguments",
           "run_arguments", "stride_argument", "task_argument", "train_arguments"]


def column(value: str) -> str | int:
    """A column given as ``0`` (index) or ``text`` (header name / JSONL key).

    Example:
    >>> column("0"), column("text")
    (0, 'text')
    """
    return int(value) if value.isdigit() else value


def task_argument(parser, extra: tuple[str, ...] = (), **options) -> None:
    """``--task``, its choices the task names (`kerasbert.choices.TASK_NAMES`) and ``extra``."""
    parser.add_argument("--task", choices=(*TASK_NAMES, *extra),
                        help="text classification, entity tagging, sequence to sequence (UniLM, or a T5 family), "
                             "sentence similarity, nested entity spans, masked-LM pretraining (mlm: see kerasbert "
                             "pretrain), or a GPT family's language model (lm)", **options)


def reading_arguments(group, crf_help: str) -> None:
    """How to read the data, shared by ``train`` and ``prepare``: fields, tag scheme, case, CRF labels."""
    for flag, dest, text in (("--text-field", "text", "text column (index or name)"),
                             ("--text-b-field", "text_b", "second text column, for pairs"),
                             ("--label-field", "label", "label column (index or name)")):
        group.add_argument(flag, dest=dest, type=column, help=text)
    group.add_argument("--scheme", choices=SCHEMES, help="NER tag scheme (detected by default)")
    group.add_argument("--strict", action="store_true",
                       help="an I- tag with no entity before it is an error (qa: an answer not at its answer_start)")
    group.add_argument("--cased", dest="lowercase", action="store_const", const=False,
                       help="keep case and accents (default: as the checkpoint's tokenizer_config.json says, else "
                            "lower-case)")
    group.add_argument("--crf", action="store_true", help=crf_help)


def train_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``kerasbert train``, in four groups: data, model, training, run folder.

    Example:
    >>> parser = argparse.ArgumentParser()
    >>> train_arguments(parser)
    >>> parser.parse_args(["--out", "run", "--model", "ALBERT"]).model
    'albert'
    """
    defaults = TrainArgs(task="cls", train="", out="")
    data = parser.add_argument_group("data")
    task_argument(data)
    data.add_argument("--train", help="training file: TSV/CSV/JSONL (cls), CoNLL or span JSONL (ner), "
                                      "source/target JSONL or two-column TSV (seq2seq), text_a/text_b/label "
                                      "TSV/CSV/JSONL (sim), span JSONL with nested entities or CoNLL (span), "
                                      "plain-text or JSONL documents (mlm), a text a line or JSONL of "
                                      "{\"text\": ...} (lm)")
    data.add_argument("--dev", help="dev file in the same format: scored every epoch, keeps the best model")
    data.add_argument("--out", required=True, help="the run folder to write (new or empty)")
    reading_arguments(data, "NER: a CRF on the tagging head")
    data.add_argument("--pre-tokenize", choices=PRE_TOKENIZERS, help="cls and seq2seq: cut each text into words "
                      "first (jieba, its HMM off), for a vocab.txt of whole words: T5 PEGASUS's, RoFormer's "
                      "(default: word pieces alone)")
    _model_arguments(parser.add_argument_group("model"), defaults)
    fit = parser.add_argument_group("training")
    fit_arguments(fit, defaults)
    fit.add_argument("--adversarial", choices=ADVERSARIAL_METHODS,
                     help="train against a perturbation of the token embedding: fgm (the loss's gradient direction), "
                          "gp (a penalty on that gradient) or vat (cls: the predictions' own change); bert4keras's "
                          "examples' updates (default: none)")
    fit.add_argument("--adversarial-epsilon", type=float, default=defaults.adversarial_epsilon,
                     help="fgm and vat: the perturbation's norm; gp: the penalty's weight "
                          f"(default: {defaults.adversarial_epsilon:g})")
    run = run_arguments(parser.add_argument_group("run folder"))
    run.add_argument("--export-google-checkpoint", action="store_true",
                     help="also write the fine-tuned encoder as a Google checkpoint in OUT/google")


def run_arguments(run):
    """The run folder (``train``, ``pretrain``): resume, overwrite, quiet; returns ``run`` for more."""
    run.add_argument("--resume", action="store_true", help="continue the run in --out with its saved arguments")
    run.add_argument("--overwrite", action="store_true",
                     help="replace the run in --out (a run folder holding none of the inputs)")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    return run


STRIDE_HELP = ("split texts longer than the run's maxlen into windows sharing N word pieces and merge their "
               "predictions (cls, ner, span; default: as the run was trained)")


def stride_argument(parser, text: str) -> None:
    """``--stride N``: texts longer than ``maxlen`` split into overlapping windows (`kerasbert.text.windows`)."""
    parser.add_argument("--stride", type=int, metavar="N", help=text)


def family_argument(parser) -> None:
    """``--model FAMILY``: the family built, as bert4keras's ``model=`` (train, summary, convert)."""
    parser.add_argument("--model", type=str.lower, choices=MODEL_FAMILIES, metavar="FAMILY",
                        help=f"the family, as bert4keras's model=: {', '.join(MODEL_FAMILIES)} (default: the "
                             "config's model_type, else bert)")


def encoder_arguments(model) -> None:
    """The encoder (``train``, ``pretrain``): config, family, checkpoint, vocabulary."""
    model.add_argument("--config", help="bert_config.json / config.json or a preset (default: the checkpoint "
                                        "folder's, else tiny)")
    family_argument(model)
    model.add_argument("--checkpoint", help="Google checkpoint or Hugging Face folder to start from (default: "
                                            "random weights)")
    model.add_argument("--vocab", help="vocab.txt of the checkpoint, its SentencePiece .model (T5, CPM-style GPT-2) "
                                       "or its tokenizer.json (RoBERTa, XLM-R, DeBERTa-v3, ModernBERT), or a folder "
                                       "holding one; default: the checkpoint folder's vocab.txt, spiece.model or "
                                       "tokenizer.json")


def _model_arguments(model, defaults: TrainArgs) -> None:
    """The encoder and its head: config, family, checkpoint, vocabulary, CRF, BiLSTM, dropout."""
    encoder_arguments(model)
    model.add_argument("--crf-lr-multiplier", type=float, default=defaults.crf_lr_multiplier,
                       help="NER: the CRF transitions learn this many times faster than the encoder "
                            f"(default: {defaults.crf_lr_multiplier:g})")
    model.add_argument("--bilstm-units", type=int, help="NER: a BiLSTM of this size before the tagging head")
    model.add_argument("--dropout", type=float, help="dropout before the head")
    model.add_argument("--target-maxlen", type=int, default=defaults.target_maxlen,
                       help=f"seq2seq and lm: the most word pieces generated (seq2seq on T5: also the most target "
                            f"pieces trained; default: {defaults.target_maxlen})")
    model.add_argument("--beams", type=int, default=defaults.beams,
                       help="seq2seq and lm: beams of the beam search that generates; 1 is greedy (default: 1)")
    model.add_argument("--pooling", choices=SIM_POOLINGS,
                       help=f"sim: how a text becomes its vector (default: {SIM_POOLINGS[0]})")
    model.add_argument("--max-query-length", type=int, default=defaults.max_query_length,
                       help=f"qa: the most word pieces of a question (default: {defaults.max_query_length})")
    model.add_argument("--max-answer-length", type=int, default=defaults.max_answer_length,
                       help=f"qa: the most word pieces of an answer (default: {defaults.max_answer_length})")
    model.add_argument("--null-answers", action=argparse.BooleanOptionalAction, default=None,
                       help="qa: a question may have no answer (SQuAD 2.0), given where the null score beats the "
                            "best span's (default: yes when a training question has no answer)")
    model.add_argument("--label-separator", default=defaults.label_separator,
                       help="multilabel: what separates the labels of a TSV/CSV label column (default: "
                            f"{defaults.label_separator!r})")
    model.add_argument("--sim-loss", choices=SIM_LOSSES,
                       help="sim: cosent ranks the pairs by their labels; in_batch takes the other pairs' second "
                            "texts as negatives (default: in_batch when every training label is the same, else "
                            "cosent)")


def fit_arguments(fit, defaults: TrainArgs, stride: bool = True) -> None:
    """How to train (``train``, ``pretrain``): length, batch, epochs, learning rate and its schedule, precision,
    XLA, strategy; ``--stride`` with ``stride``."""
    fit.add_argument("--maxlen", type=int,
                     help=f"word pieces a row keeps (default: {MAXLEN}, or the model's max positions)")
    if stride:
        stride_argument(fit, "split longer texts into windows of --maxlen sharing N word pieces, each a training "
                             f"example, and score dev per text ({', '.join(STRIDE_TASKS)}; default: cut at --maxlen)")
    for name, kind, text in (("batch_size", int, "rows per batch (sim: pairs)"),
                             ("epochs", int, "epochs"), ("lr", float, "peak learning rate"),
                             ("warmup", float, "warmup, a ratio of the steps in [0, 1]"),
                             ("schedule", SCHEDULES,
                              "learning rate after warmup: cosine or linear decay to 0, or constant"),
                             ("weight_decay", float, "AdamW weight decay (not on norms and biases)"),
                             ("grad_accum", int, "accumulate gradients over N batches"),
                             ("layerwise_lr_decay", float, "learning-rate factor per layer down from the top"),
                             ("seed", int, "seed of weights, dropout and data order")):
        choices = kind if isinstance(kind, tuple) else None
        fit.add_argument("--" + name.replace("_", "-"), type=str if choices else kind, choices=choices,
                         default=getattr(defaults, name), help=f"{text} (default: {getattr(defaults, name)})")
    fit.add_argument("--max-steps", type=int, help="stop after this many batches")
    fit.add_argument("--mixed-precision", action="store_true", help="float16 on GPU, bfloat16 on CPU")
    fit.add_argument("--monitor", help="dev metric that picks the best epoch (default: val_accuracy / val_f1)")
    fit.add_argument("--save-every", type=int, help="also save the resume state every N batches")
    fit.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None,
                     help="compile the training step with XLA; batches are then padded to length buckets "
                          f"(default: on a GPU for {XLA_MIN_PARAMS / 1e6:g}M+ parameters without --crf)")
    fit.add_argument("--strategy", choices=STRATEGIES, default=defaults.strategy,
                     help="tf.distribute strategy; --batch-size is per replica (default: %(default)s)")
