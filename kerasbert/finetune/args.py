"""The arguments of ``kerasbert train``, the values they may take and the options that set them.

Nothing here imports TensorFlow, so the CLI answers ``--help`` and rejects a bad argument at once. The
values the options may take are named once, in `kerasbert.choices`; `kerasbert.finetune.train_flags` adds one
option per `TrainArgs` field to the ``train`` parser.

Example:
>>> TrainArgs(task="cls", train="train.tsv", out="run").schedule
'cosine'
"""

from __future__ import annotations

import dataclasses
import glob
import os

from kerasbert.choices import (
    ADVERSARIAL_METHODS,
    ADVERSARIAL_TASKS,
    ADVERSARIAL_WHY,
    GENERATE_LIMITS,
    MODEL_FAMILIES,
    PRE_TOKENIZE_TASKS,
    PRE_TOKENIZERS,
    PRETRAIN_DEFAULTS,
    SCHEDULES,
    SIM_LOSSES,
    SIM_POOLINGS,
    STRATEGIES,
    STRIDE_TASKS,
    names_a_file,
)
from kerasbert.errors import ConfigError, fail
from kerasbert.files import check_existing, is_glob
from kerasbert.finetune.options import TaskOptions

PATH_FIELDS = ("train", "dev", "config", "checkpoint", "vocab")  # the inputs a run folder names
RELATIVE = "relative_to_run"  # the key of args.json that holds the inputs' paths relative to the run folder
# the generative families, by the one task that fine-tunes them (every other family is an encoder's, any task but lm)
GENERATIVE_FAMILIES = {"lm": ("gpt", "gpt2", "gpt2_ml"), "seq2seq": ("t5", "t5.1.0", "t5.1.1", "mt5.1.1")}
# why a task does not take --pre-tokenize (`kerasbert.choices.PRE_TOKENIZE_TASKS` do)
PRE_TOKENIZE_WHY = {
    "ner": "its tags sit on the characters as BERT splits them, not on jieba's words",
    "span": "its entities' character spans are found on the pieces as BERT splits them, not on jieba's words",
    "sim": "its sentence vectors are served by kerasbert embed and its exports, whose tokenizers cut no words",
    "mlm": "masking cuts its own words (whole-word masking): leave --pre-tokenize out",
    "lm": "a GPT family's vocabulary is of characters or SentencePiece pieces: leave --pre-tokenize out"}
GENERATIVE_HINTS = {"lm": "a GPT family is a language model: kerasbert train --task lm continues it on your texts",
                    "seq2seq": "a T5 family is an encoder-decoder: kerasbert train --task seq2seq trains it on source "
                               "and target pairs"}


@dataclasses.dataclass
class TrainArgs(TaskOptions):
    """The arguments of ``kerasbert train`` (and of `train`), saved as ``args.json`` in the run folder; the task's
    options are `TaskOptions`'s fields."""

    task: str
    train: str
    out: str
    dev: str | None = None
    config: str | None = None  # None: the checkpoint folder's config, else the tiny preset
    model: str | None = None  # the family (bert4keras's model=); None: the config's model_type, else bert
    checkpoint: str | None = None
    vocab: str | None = None  # None: the checkpoint folder's vocab.txt
    lowercase: bool | None = None  # None: the checkpoint folder's tokenizer_config.json, else True
    maxlen: int | None = None  # None: MAXLEN, or the model's max positions when fewer
    batch_size: int = 32
    epochs: int = 3
    lr: float = 2e-5
    warmup: float = 0.1
    schedule: str = SCHEDULES[0]
    weight_decay: float = 0.01
    grad_accum: int = 1
    layerwise_lr_decay: float = 1.0
    seed: int = 0
    mixed_precision: bool = False
    jit_compile: bool | None = None  # None: XLA when kerasbert.perf.xla.xla_pays (GPU, XLA_MIN_PARAMS+, no CRF)
    strategy: str = STRATEGIES[0]
    max_steps: int | None = None
    monitor: str | None = None
    save_every: int | None = None
    export_google_checkpoint: bool = False
    adversarial: str | None = None  # fgm, gp or vat: `kerasbert.finetune.adversarial`
    adversarial_epsilon: float = 1.0  # the perturbation's norm (fgm, vat) or the penalty's weight (gp)

    def __post_init__(self) -> None:
        """Fill what a checkpoint folder (Google or Hugging Face) holds and was not given: config, vocab, case."""
        folder = self.checkpoint if self.checkpoint is not None and os.path.isdir(self.checkpoint) else None
        if self.config is None:
            self.config = folder if folder is not None else "tiny"
        # BERT's and GPT's vocabulary, T5's SentencePiece model, or a Hugging Face tokenizer.json (RoBERTa's, ...)
        for name in ("vocab.txt", "spiece.model", "tokenizer.json"):
            if self.vocab is None and folder is not None and os.path.isfile(os.path.join(folder, name)):
                self.vocab = os.path.join(folder, name)
        if self.vocab is not None and os.path.isdir(self.vocab):  # --vocab a folder: its vocab.txt or tokenizer.json
            from kerasbert.text.tokenizer_files import vocabulary_file

            self.vocab = vocabulary_file(self.vocab)
        if self.lowercase is None and folder is None:
            self.lowercase = True
        elif self.lowercase is None:
            from kerasbert.text.tokenizer import folder_lower_case

            self.lowercase = folder_lower_case(folder)

    def check(self) -> None:
        """One clear error for the first argument out of range or path that does not exist."""
        self._check_files()
        self._check_numbers()
        if self.crf and self.task != "ner":
            raise fail(ConfigError, "--crf", "--task ner", f"--task {self.task}")
        if not (isinstance(self.label_separator, str) and self.label_separator.strip()):
            raise fail(ConfigError, "--label-separator", "a non-blank string", repr(self.label_separator))
        if self.schedule not in SCHEDULES:
            raise fail(ConfigError, "--schedule", " or ".join(SCHEDULES), repr(self.schedule))
        self._check_family()
        if not (isinstance(self.crf_lr_multiplier, (int, float)) and self.crf_lr_multiplier > 0):
            raise fail(ConfigError, "--crf-lr-multiplier", "a number > 0", repr(self.crf_lr_multiplier))
        self.check_stride()
        self._check_sim_options()
        self._check_pre_tokenize()
        self._check_adversarial()

    def _check_family(self) -> None:
        """``--model``: one of bert4keras's families, and one ``--task`` fine-tunes (`check_task_family`)."""
        if self.model is not None and str(self.model).lower() not in MODEL_FAMILIES:
            raise fail(ConfigError, "--model", f"a family: {', '.join(MODEL_FAMILIES)}", repr(self.model))
        if self.model is not None:
            check_task_family(self.task, self.model)

    def _check_files(self) -> None:
        """A ConfigError for the first data file, vocabulary, config or checkpoint that is not there."""
        for name in ("train", "dev", "vocab"):
            path = getattr(self, name)
            if name == "train" and (is_glob(path) or os.path.isdir(path)):
                continue  # a glob or a prepared folder, checked when it is read
            check_existing(path, f"--{name}")
            if path is not None and not os.access(path, os.R_OK):
                raise fail(ConfigError, f"--{name}", "a readable file", f"{path!r}, which this user cannot read")
        if self.vocab is None:
            raise fail(ConfigError, "--vocab", "the vocab.txt of the checkpoint (or of your data)", "none")
        for option, path in self.missing().items():
            if option in ("--config", "--checkpoint"):
                raise fail(ConfigError, f"{option} {path}", "a config file or preset" if option == "--config" else
                           "a Google checkpoint (prefix or folder) or Hugging Face weights", "nothing there")

    def _check_numbers(self) -> None:
        """A ConfigError for the first number out of its range."""
        positive = {"maxlen": 3, "batch_size": 1, "epochs": 1, "grad_accum": 1, "max_query_length": 1,
                    "max_answer_length": 1}
        for name, low in positive.items():
            if name == "maxlen" and self.maxlen is None:
                continue
            if not isinstance(getattr(self, name), int) or getattr(self, name) < low:
                raise fail(ConfigError, "--" + name.replace("_", "-"), f"an int >= {low}", repr(getattr(self, name)))
        for name in ("lr", "warmup", "weight_decay", "layerwise_lr_decay"):
            value, zero = getattr(self, name), name in ("warmup", "weight_decay")  # 0: no warmup, plain Adam
            if not (0 <= value <= 1 and (zero or value > 0)):
                raise fail(ConfigError, "--" + name.replace("_", "-"), f"a number in {'[' if zero else '('}0, 1]",
                           repr(value))
        for name, most in (("target_maxlen", GENERATE_LIMITS["max_length"]), ("beams", GENERATE_LIMITS["rows"])):
            if not isinstance(getattr(self, name), int) or not 1 <= getattr(self, name) <= most:
                raise fail(ConfigError, "--" + name.replace("_", "-"), f"an int from 1 to {most} (the bound of "
                           "generation)", repr(getattr(self, name)))
        unilm = str(self.model).lower() not in GENERATIVE_FAMILIES["seq2seq"]  # a T5 reads the source alone
        if self.task == "seq2seq" and unilm and self.maxlen is not None and self.maxlen <= self.target_maxlen + 2:
            raise fail(ConfigError, "--maxlen", f"more than --target-maxlen + 2 = {self.target_maxlen + 2} word "
                       "pieces: room for the source, [CLS] and [SEP]", repr(self.maxlen))
        for name in ("max_steps", "save_every", "bilstm_units"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise fail(ConfigError, "--" + name.replace("_", "-"), "an int >= 1", repr(value))

    def check_stride(self) -> None:
        """A ConfigError for a ``stride`` this run cannot use: out of range for ``maxlen`` (when known), with a
        seq2seq task (generation starts from one source) or a sim task (a sentence vector is of one window), or
        with text pairs (a second text is not windowed)."""
        if self.stride is None:
            return
        from kerasbert.text.windows import ONE_WINDOW_VECTORS, check_stride

        if self.task not in STRIDE_TASKS:
            why = {"seq2seq": "a seq2seq source is one input to generate from: it is cut to --maxlen - --target-maxlen",
                   "sim": ONE_WINDOW_VECTORS}
            raise fail(ConfigError, "--stride", f"--task {', '.join(STRIDE_TASKS[:-1])} or {STRIDE_TASKS[-1]}",
                       f"--task {self.task}", why.get(self.task, "leave --stride out: the texts are cut at --maxlen"))
        if self.text_b is not None:
            raise fail(ConfigError, "--stride", "single texts", f"text pairs (--text-b-field {self.text_b})",
                       "a pair's second text is not windowed: leave --stride out to cut pairs at --maxlen")
        check_stride(self.stride, self.maxlen)

    def _check_sim_options(self) -> None:
        """A ConfigError for ``--pooling`` or ``--sim-loss`` out of its choices, or given to a task other than sim."""
        for name, choices in (("pooling", SIM_POOLINGS), ("sim_loss", SIM_LOSSES)):
            value, flag = getattr(self, name), "--" + name.replace("_", "-")
            if value is not None and self.task != "sim":
                raise fail(ConfigError, flag, "--task sim", f"--task {self.task}")
            if value is not None and value not in choices:
                raise fail(ConfigError, flag, " or ".join(choices), repr(value))

    def _check_pre_tokenize(self) -> None:
        """A ConfigError for a ``--pre-tokenize`` out of its choices, of a task that does not tokenize whole texts
        through it, or with a SentencePiece model, which cuts its own pieces; jieba checked installed."""
        if self.pre_tokenize is None:
            return
        if self.pre_tokenize not in PRE_TOKENIZERS:
            raise fail(ConfigError, "--pre-tokenize", " or ".join(PRE_TOKENIZERS), repr(self.pre_tokenize))
        if self.task not in PRE_TOKENIZE_TASKS:
            raise fail(ConfigError, "--pre-tokenize", f"--task {' or '.join(PRE_TOKENIZE_TASKS)}",
                       f"--task {self.task}", PRE_TOKENIZE_WHY.get(self.task, "leave --pre-tokenize out"))
        if str(self.vocab).endswith(".model"):
            raise fail(ConfigError, "--pre-tokenize", "a WordPiece vocab.txt (T5 PEGASUS's, RoFormer's)",
                       f"the SentencePiece model {self.vocab!r}", "SentencePiece cuts its own pieces: leave "
                       "--pre-tokenize out")
        from kerasbert.text.pre_tokenize import PRE_TOKENIZE_NEEDS, require_jieba

        require_jieba("--pre-tokenize jieba", PRE_TOKENIZE_NEEDS[1])

    def _check_adversarial(self) -> None:
        """A ConfigError for ``--adversarial`` out of its choices, with a task it does not train (`ADVERSARIAL_WHY`)
        or several replicas, or an epsilon <= 0."""
        if self.adversarial is None:
            return
        if self.adversarial not in ADVERSARIAL_METHODS:
            raise fail(ConfigError, "--adversarial", " or ".join(ADVERSARIAL_METHODS), repr(self.adversarial))
        tasks = ADVERSARIAL_TASKS[self.adversarial]
        if self.task not in tasks:
            raise fail(ConfigError, f"--adversarial {self.adversarial}", f"--task {' or '.join(tasks)}",
                       f"--task {self.task}", ADVERSARIAL_WHY.get(self.task, ADVERSARIAL_WHY["vat"]))
        if self.strategy in ("mirrored", "multiworker"):
            raise fail(ConfigError, f"--adversarial {self.adversarial}", "--strategy one or auto on one device",
                       f"--strategy {self.strategy}", "the perturbation moves the model's one embedding matrix")
        epsilon = self.adversarial_epsilon
        if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or not epsilon > 0:
            raise fail(ConfigError, "--adversarial-epsilon", "a number > 0", repr(epsilon))

    def inputs(self) -> dict[str, str]:
        """The paths this run reads, by option (``--train``, ``--dev``, ...); a preset name is no path."""
        found = {f"--{name}": getattr(self, name) for name in PATH_FIELDS if getattr(self, name) is not None}
        if "--config" in found and not names_a_file(found["--config"]):
            del found["--config"]  # a preset name
        return found

    def missing(self) -> dict[str, str]:
        """The inputs (paths by option) with nothing at their path."""
        return {option: path for option, path in self.inputs().items() if not _exists(path)}

    def to_saved(self, run_dir: str) -> dict:
        """``args.json``: these arguments with every input path absolute, and relative to ``run_dir`` under
        ``relative_to_run``, so the run folder works from any working directory and after the folders around
        it were moved together."""
        values = dataclasses.asdict(self)
        values["out"] = os.path.abspath(run_dir)
        relative = {}
        for option, path in self.inputs().items():
            name = option[2:]
            values[name] = os.path.abspath(path)
            relative[name] = os.path.relpath(values[name], values["out"])
        return {**values, RELATIVE: relative}

    @classmethod
    def saved(cls, values: dict, run_dir: str | None = None) -> TrainArgs:
        """The arguments a run folder's ``args.json`` holds, each input path as it is found now: absolute, or,
        when nothing is there any more, relative to ``run_dir`` (the folder was moved). One without
        ``crf_lr_multiplier`` trained its CRF at 1, and its saved transitions are stored for that.

        Raises:
            ConfigError: ``values`` is not an object, lacks ``task`` or ``train``, or has a key this version
                does not know (a run written by a newer kerasbert).
        """
        where = os.path.join(run_dir, "args.json") if run_dir is not None else "args.json"
        if not isinstance(values, dict):
            raise fail(ConfigError, where, "a JSON object", type(values).__name__)
        values = dict(values)
        relative = values.pop(RELATIVE, {})
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = [key for key in values if key not in known]
        if unknown:
            raise fail(ConfigError, where, "the keys of TrainArgs", f"the unknown key {unknown[0]!r}",
                       "a newer kerasbert wrote this run: upgrade kerasbert to read it")
        if not isinstance(relative, dict):
            raise fail(ConfigError, where, f"{RELATIVE}, an object of paths", repr(relative)[:80])
        missing = [key for key in ("task", "train") if key not in values]
        if missing:
            raise fail(ConfigError, where, f"the key {missing[0]!r}", "none", "train the run again")
        if run_dir is not None:
            values["out"] = run_dir
            for name, path in relative.items():
                values[name] = _found(values.get(name), os.path.join(run_dir, str(path)))
        return cls(**{"crf_lr_multiplier": 1.0, "out": "", **values})

def check_task_family(task: str, family: str) -> None:
    """A ConfigError naming ``--task`` where the family ``family`` is not fine-tuned by ``task``: the GPT families
    train ``--task lm`` alone and the T5 families ``--task seq2seq`` alone (`GENERATIVE_FAMILIES`), and ``lm``
    needs a GPT family.

    Example:
    >>> check_task_family("lm", "gpt2")
    >>> check_task_family("cls", "gpt2")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --task: expected --task lm for --model gpt2, found --task cls. a GPT family is \
a language model: kerasbert train --task lm continues it on your texts
    """
    family = str(family).lower()
    for allowed, names in GENERATIVE_FAMILIES.items():
        if family in names and task != allowed:
            raise fail(ConfigError, "--task", f"--task {allowed} for --model {family}", f"--task {task}",
                       GENERATIVE_HINTS[allowed])
    if task == "lm" and family not in GENERATIVE_FAMILIES["lm"]:
        raise fail(ConfigError, "--model", f"a GPT family for --task lm: {', '.join(GENERATIVE_FAMILIES['lm'])}",
                   repr(family), "pass --model gpt, gpt2 or gpt2_ml with the GPT checkpoint's config")


def _exists(path: str) -> bool:
    """Something is at ``path``: a file or folder, a checkpoint prefix's files, or a glob's matches."""
    return os.path.exists(path) or bool(glob.glob(glob.escape(path) + ".*") or (is_glob(path) and glob.glob(path)))


def _found(absolute: str | None, relative: str) -> str | None:
    """``absolute`` while something is there, else ``relative`` (normalized) if something is there instead."""
    relative = os.path.normpath(relative)
    if absolute is not None and not _exists(absolute) and _exists(relative):
        return relative
    return absolute


def pretrain_options(resume: bool, options: dict) -> dict:
    """The `TrainArgs` fields of a pretraining run: ``options`` over `PRETRAIN_DEFAULTS` (an option left at None
    keeps its default); none with ``resume``, which reads the run's own."""
    given = {key: value for key, value in options.items() if value is not None or key not in PRETRAIN_DEFAULTS}
    return {} if resume else {**PRETRAIN_DEFAULTS, **given}


def check_corpus(data: str) -> None:
    """A ConfigError naming ``--data`` (which `kerasbert.finetune.training.train` reads as its ``--train``) unless
    ``data`` is a readable file, a glob or a prepared folder."""
    if is_glob(data) or os.path.isdir(data):
        return
    if not os.path.isfile(data):
        found = "a device or pipe, not a regular file" if os.path.exists(data) else "which does not exist"
        raise fail(ConfigError, "--data", "a corpus file, a glob or a prepared folder", f"{data!r}, {found}")
    if not os.access(data, os.R_OK):
        raise fail(ConfigError, "--data", "a readable file", f"{data!r}, which this user cannot read")
