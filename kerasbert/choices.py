"""The values kerasbert's options may take and their defaults, each named once, without TensorFlow.

The CLI reads them to answer ``--help`` and to reject a bad argument before TensorFlow starts; the modules that
act on them (`kerasbert.modeling.families`, `kerasbert.modeling.optimizers.WarmupSchedule`,
`kerasbert.modeling.crf.ConditionalRandomField`, `kerasbert.finetune.tasks`, `kerasbert.finetune.distribute`,
`kerasbert.perf.xla`, `kerasbert.serving.export`, `kerasbert.serving.runtime`, `kerasbert.serving.server`,
`kerasbert.annotated.report`, `kerasbert.weights.convert`) import them from here.

Example:
>>> SCHEDULES[0], CRF_LR_MULTIPLIER, EXPORT_FORMATS[0], PRECISIONS[0]
('cosine', 1000.0, 'saved_model', 'f32')
"""

from __future__ import annotations

import os

# the tasks of ``kerasbert train --task``; mlm: pretrain; lm: a GPT family's language model; qa: extractive question
# answering; multilabel: several labels a text; relation: (subject, predicate, object) triples; rerank: a
# cross-encoder's query-passage scores
TASK_NAMES = ("cls", "ner", "seq2seq", "span", "sim", "mlm", "lm", "qa", "multilabel", "relation", "rerank")
# the fields of one input row of a task's predictions, its exports and ``kerasbert serve`` (the others: "text", and
# "text_b" for pairs)
TASK_INPUTS = {"qa": ("question", "context"), "rerank": ("query", "passage")}


def input_fields(task: str, pairs: bool = False) -> tuple[str, ...]:
    """The fields of one input row of ``task``'s predictions (`TASK_INPUTS`; else ``text``, and ``text_b`` for
    ``pairs``).

    Example:
    >>> input_fields("qa"), input_fields("cls", pairs=True), input_fields("ner")
    (('question', 'context'), ('text', 'text_b'), ('text',))
    """
    return TASK_INPUTS.get(task, ("text", "text_b")[:1 + bool(pairs)])


# the tasks whose answers ``--stride`` merges over a long text's windows (qa: a context's windows; multilabel: the
# mean of its windows' scores)
STRIDE_TASKS = ("cls", "ner", "span", "qa", "multilabel")
# ``--pre-tokenize``: how a text is cut into words before its word pieces (`kerasbert.text.pre_tokenize`), and the
# tasks that tokenize whole texts through it (ner and span label characters; sim's vectors and mlm's masking read
# word pieces as BERT cuts them)
PRE_TOKENIZERS = ("jieba",)
PRE_TOKENIZE_TASKS = ("cls", "seq2seq")
# ``--task sim``: how a text becomes its vector (``--pooling``, `kerasbert.modeling.heads.EMBEDDING_POOLINGS`), the
# first the default (see `kerasbert.finetune.sim`), and the losses of ``--sim-loss``
SIM_POOLINGS = ("first_last_avg", "mean", "cls", "pooler", "linear")
SIM_LOSSES = ("cosent", "in_batch")
# ``--adversarial``: training against a perturbation of the token embedding (`kerasbert.finetune.adversarial`), and
# the tasks each method takes: fgm and gp perturb the input of any encoder's task; vat compares class distributions
ADVERSARIAL_METHODS = ("fgm", "gp", "vat")
ADVERSARIAL_TASKS = {"fgm": ("cls", "ner", "span", "sim"), "gp": ("cls", "ner", "span", "sim"), "vat": ("cls",)}
# why a task does not take it
ADVERSARIAL_WHY = {
    **dict.fromkeys(("seq2seq", "lm", "mlm"), "its token embedding is also its output layer: a perturbation there "
                    "would move the predictions' own weights"),
    "vat": "vat compares a text's class distributions before and after the perturbation, which --task cls gives (its "
           "training texts serve as the unlabelled ones): use fgm or gp"}
# every family ``model=`` builds (bert4keras's, then the Hugging Face encoders beyond it), then their aliases:
# ``kerasbert train --model`` and
# `kerasbert.modeling.families.NAMES`, which defines each
MODEL_FAMILIES = ("bert", "albert", "albert_unshared", "nezha", "electra", "roformer", "roformer_v2", "gpt", "gpt2",
                  "gpt2_ml", "t5", "t5.1.1", "mt5.1.1", "roberta_en", "xlm_roberta", "distilbert", "deberta_v3",
                  "modernbert", "roberta", "t5.1.0")
SCHEDULES = ("cosine", "linear", "constant")  # the decays after warmup of ``--schedule``; the first is the default
# the CRF's transitions learn this many times faster than the encoder in kerasbert's tagging head (as in bert4keras's
# NER example): at the encoder's rate they barely move, and the CRF decodes almost as argmax would
CRF_LR_MULTIPLIER = 1000.0
TARGET_MAXLEN = 32  # the word pieces a seq2seq run generates unless ``--target-maxlen`` says
# the bounds of generation (`kerasbert.generate`, the seq2seq task, its exports and ``kerasbert serve``), checked before
# anything is allocated: the most tokens generated; the most rows one search decodes at once (inputs of a batch times
# beams or samples); the most bytes of the keys and values it caches, rows x layers x positions x hidden x 4 bytes,
# twice (keys and values)
GENERATE_LIMITS = {"max_length": 2048, "rows": 4096, "cache_bytes": 4 * 2**30}
MAXLEN = 128  # the word pieces a row keeps unless ``--maxlen`` says (fewer when the model has fewer positions)
# ``kerasbert pretrain``'s defaults where they differ from fine-tuning's: Google's run_pretraining.py (its rate, a
# linear decay); rows of MAXLEN (128) pieces, the length of its first phase
PRETRAIN_DEFAULTS = {"lr": 5e-5, "schedule": "linear"}
STRATEGIES = ("auto", "one", "mirrored", "multiworker")  # the ``tf.distribute`` choices of ``--strategy``
# ``--jit-compile``'s default: XLA compiles the training step on a GPU for models of this many parameters and more
XLA_MIN_PARAMS = 10_000_000

SUMMARY_FORMATS = ("text", "markdown", "json")  # ``kerasbert summary --format``; the first is the default
CHECKPOINT_FORMATS = ("google", "hf")  # ``kerasbert convert --to``: Google's TF1 checkpoints, Hugging Face's folders

EXPORT_FORMATS = ("saved_model", "openvino", "onnx")  # ``kerasbert export --format``; the first is the default
PRECISIONS = ("f32", "bf16")  # what an export computes in where it is not int8; the first is float32
# ``kerasbert export --precision``, the first the default: auto chooses by CPU and format
EXPORT_PRECISIONS = ("auto", *PRECISIONS)  # auto: `kerasbert.serving.precision`
# the most dev score an export may lose against its run unless ``--accept-loss``: (metric, bound) by task
LOSS_BOUND = {"cls": ("accuracy", 0.005), "ner": ("f1", 0.01), "seq2seq": ("rouge_l", 0.01),
              "span": ("f1", 0.01), "qa": ("f1", 0.01), "multilabel": ("micro_f1", 0.01), "relation": ("f1", 0.01),
              "rerank": ("mrr_at_10", 0.01)}
PREDICT_BATCH_SIZE = 32  # texts an export runs at once unless told

# sentence vectors (`kerasbert.embed`, ``kerasbert embed``, vector exports), which pool as SIM_POOLINGS: the pooling
# a checkpoint gets unless told (sentence-transformers' default: on a BERT that was not trained for vectors, the mean
# of its tokens beats its [CLS] on every STS task of the SBERT paper, arXiv:1908.10084, Table 1); the word pieces a
# text keeps unless the model says fewer; the suffixes of ``--output``; the cosine to the float32 vectors an int8 or
# bf16 export must keep on average over the texts it is measured on
EMBED_POOLING = "mean"
EMBED_MAXLEN = 512
VECTOR_FILES = (".npy", ".jsonl")
VECTOR_MIN_COSINE = 0.99

# ``kerasbert serve``'s address and limits (`kerasbert.serving.server.serve` has one argument of each name)
SERVE_DEFAULTS = {"host": "127.0.0.1", "port": 8501, "max_batch": 32, "max_wait_ms": 5.0, "max_queue": 1024,
                  "max_instances": 256, "max_body_bytes": 1_000_000, "timeout_s": 30.0, "header_timeout_s": 10.0,
                  "body_timeout_s": 20.0, "keep_alive_s": 5.0, "max_connections": 512, "grace_s": 25.0}


def names_a_file(config: str) -> bool:
    """Whether a ``--config`` value names a file rather than a preset: something is there, or it reads as a path.

    Example:
    >>> names_a_file("tiny"), names_a_file("models/bert_config.json")
    (False, True)
    """
    return os.path.exists(config) or os.sep in config or config.endswith(".json")
