"""Fine-tuning: ``train``, ``evaluate`` and ``predict`` for the ``cls`` and ``ner`` tasks.

``train`` reads and checks every input before it writes anything, builds the model (loading the
Google checkpoint with its per-variable log), compiles it with `kerasbert.modeling.optimizers.LayerwiseAdamW` on
a `kerasbert.modeling.optimizers.WarmupSchedule`, and runs Keras ``fit`` one epoch at a time, so each epoch draws
its own data order from ``(seed, epoch)``. A callback scores dev after each epoch, keeps the best model,
writes the history, curves and resume state (`kerasbert.finetune.callbacks`). ``--resume`` restores every model and
optimizer variable (dropout RNG included) and skips the batches already trained on, so a killed run ends where an
uninterrupted one does; Ctrl-C first saves the state of the step under way (`kerasbert.finetune.interrupt`). The
run folder is described in `kerasbert.finetune.runs`.

Example:
>>> import tempfile
>>> from kerasbert.finetune.demo_data import write_demo_data
>>> data = write_demo_data(tempfile.mkdtemp(), n_train=64, n_dev=16, n_test=16)
>>> run = tempfile.mkdtemp()
>>> result = train("cls", data["cls_train"], run, dev=data["cls_dev"], vocab=data["vocab"], epochs=1,
...                batch_size=16, lr=1e-3, verbose=0)
>>> result["monitor"], result["best_epoch"], 0.0 <= result["dev"]["accuracy"] <= 1.0
('val_accuracy', 1, True)
"""

from __future__ import annotations

import atexit
import dataclasses
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence

import keras

from kerasbert.choices import MAXLEN
from kerasbert.errors import ConfigError, fail
from kerasbert.files import copy_file, is_glob
from kerasbert.finetune import streaming
from kerasbert.finetune.args import TrainArgs, check_task_family
from kerasbert.finetune.callbacks import EpochKeeper, OneEpoch
from kerasbert.finetune.distribute import describe, fit_epoch, is_chief, is_multiworker, make_strategy, make_train_step
from kerasbert.finetune.interrupt import StopRequest
from kerasbert.finetune.options import TaskOptions
from kerasbert.finetune.runs import (
    Run,
    State,
    open_run,
    predict_rows,
    score_file,
    scored_file,
    train_args,
    vocab_name,
    with_stride,
)
from kerasbert.finetune.tasks import Task, task_of
from kerasbert.log import logger
from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig, resolve_config
from kerasbert.modeling.crf import crf_layers
from kerasbert.modeling.models import build_transformer_model
from kerasbert.modeling.optimizers import LayerwiseAdamW, WarmupSchedule
from kerasbert.perf.onednn import bf16_pays, bf16_speedup
from kerasbert.perf.xla import XLA_MIN_PARAMS, xla_pays
from kerasbert.text.label_counts import report_labels
from kerasbert.text.pipeline import Features, bucket_lengths, length_buckets, to_dataset
from kerasbert.text.pre_tokenize import refuse_word_vocabulary
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.tokenizer_base import pad_id_of
from kerasbert.text.tokenizer_files import check_family
from kerasbert.weights.google import save_google_checkpoint

__all__ = ["TrainArgs", "compile_model", "evaluate", "make_optimizer", "predict", "train"]

def make_optimizer(args: TrainArgs, total_steps: int, num_layers: int,
                   xla_update: bool = False) -> keras.optimizers.Optimizer:
    """AdamW (layer-wise when asked) on `WarmupSchedule` (``args.schedule``); no decay on norms, biases and
    CRF transitions; ``--weight-decay 0`` is plain Adam. ``xla_update``: see `LayerwiseAdamW`."""
    updates = max(1, math.ceil(total_steps / args.grad_accum))
    schedule = WarmupSchedule(args.lr, updates, int(round(args.warmup * updates)), args.schedule)
    optimizer = LayerwiseAdamW(args.layerwise_lr_decay, num_layers, learning_rate=schedule,
                               weight_decay=args.weight_decay, xla_update=xla_update,
                               gradient_accumulation_steps=args.grad_accum if args.grad_accum > 1 else None)
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias", "trans"])
    return optimizer


def compile_model(model: keras.Model, the_task: Task, args: TrainArgs, total_steps: int, num_layers: int,
                  policy: str | None = None) -> keras.optimizers.Optimizer:
    """``model.compile`` as `train` does it (the benchmark times this path); returns the optimizer.

    The step is compiled with XLA when ``args.jit_compile`` says so, or, left at None, when
    `kerasbert.perf.xla.xla_pays` (on a GPU, models of `kerasbert.choices.XLA_MIN_PARAMS` parameters and more
    without a CRF; never on a CPU with TensorFlow, whose plain graph with oneDNN is as fast there). A model of that
    size whose step is not compiled still gets the optimizer's update compiled (`LayerwiseAdamW`'s ``xla_update``).
    """
    jit_compile = xla_pays(model) if args.jit_compile is None else args.jit_compile
    if jit_compile and crf_layers(model):
        raise fail(ConfigError, "--jit-compile", "no XLA with --crf", "--jit-compile",
                   "the CRF's scan runs over a dynamic length, which XLA does not compile")
    optimizer = make_optimizer(args, total_steps, num_layers,
                               xla_update=not jit_compile and model.count_params() >= XLA_MIN_PARAMS)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer, **the_task.compile_arguments(model), jit_compile=jit_compile)
    # its variables made now, not inside fit's first trace, which would then be traced twice (see
    # `kerasbert.modeling.losses.accuracy_metric`)
    optimizer.build(model.trainable_variables)
    return optimizer


def _mixed_policy() -> str:
    import tensorflow as tf

    return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"


def train(task: str, train: str, out: str, *, resume: bool = False, overwrite: bool = False, verbose: int = 1,
          callbacks: Sequence[keras.callbacks.Callback] = (), **options) -> dict:
    """Fine-tune a BERT on ``train`` for ``task`` (``"cls"`` or ``"ner"``), writing the run folder ``out``.

    Args:
        task: str. ``"cls"`` (text or text-pair classification) or ``"ner"`` (entity tagging).
        train: str. the training file (TSV/CSV/JSONL for cls; CoNLL or span JSONL for ner), read in memory;
            or a glob of such files, or a folder written by ``kerasbert prepare``: streamed, never whole.
        out: str. the run folder; must be new or empty unless ``resume`` or ``overwrite``.
        resume: bool. continue the run in ``out`` from its saved state, with its saved arguments.
        overwrite: bool. replace the run in ``out`` (only a run folder that holds none of the inputs).
        verbose: int. 0 silent; 1 progress bars and logs; 2 logs, and a line a finished epoch instead of a bar
            (`kerasbert.log.progress_verbosity`: what the CLI passes when its output is no terminal).
        callbacks: more Keras callbacks for ``fit`` (after kerasbert's own, which saves state and scores dev).
        **options: the other `TrainArgs` fields (``dev``, ``config``, ``model`` (the family), ``checkpoint``,
            ``vocab``, ``epochs``, ``lr``, ``crf``, ...), as the CLI's ``--options``.

    Returns:
        dict. ``metrics.json``: the monitor, the best epoch and its dev metrics (train metrics without dev).

    Raises:
        TrainingInterrupted: SIGINT (Ctrl-C) or SIGTERM came while training; the step under way finished and its
            resume state was saved, so ``resume=True`` goes on from it (`kerasbert.finetune.interrupt`).
    """
    source = Run(out)  # the run folder: read on every worker, written by the chief only
    args = train_args(task, train, out, resume, overwrite, options)
    strategy = make_strategy(args.strategy)  # before any other TensorFlow work (multi-worker configures it)
    chief = is_chief(strategy)
    if chief and not resume and is_multiworker(strategy):
        source.check_new(overwrite, args.inputs())
    # non-chief workers write to a temporary folder, removed at the end (the TF multi-worker guide)
    run = source if chief else Run(_temporary_folder("kerasbert-worker-"))
    args.model = families.resolve(args.model, resolve_config(args.config)).name  # args.json names the family built
    check_task_family(args.task, args.model)
    the_task = task_of(args)  # of the family: seq2seq on a T5 is not a UniLM
    monitor = _monitor(args, the_task, strategy)
    inputs = _read_inputs(args, the_task, source.labels() if resume else None, verbose)
    keras.utils.set_random_seed(args.seed)
    model, optimizer, steps_per_epoch = _build(args, the_task, inputs, strategy, verbose)
    with strategy.scope():
        state = source.load_state(model, optimizer) if resume else State()
    if resume:
        logger.info("resuming %s at epoch %d, step %d", out, state.epoch + 1, state.step)
        if chief:
            source.remove_temporaries()
    elif chief:
        _write_run_files(run, args, inputs)
    with StopRequest() as stop:
        keeper = EpochKeeper(run, state, _dev_scorer(model, the_task, args, inputs, chief), monitor, args,
                             steps_per_epoch, stop)
        _fit(model, strategy, args, inputs, state, [*the_task.callbacks(), keeper, *callbacks], steps_per_epoch,
             verbose)
    run.save_state(state, model, optimizer)
    if inputs.prepared:
        shutil.rmtree(inputs.prepared, ignore_errors=True)
    if not chief:
        shutil.rmtree(run.path, ignore_errors=True)
        return {"task": args.task, "steps": state.global_step, "chief": False}
    return _finish(run, args, the_task, inputs, state, monitor)


@dataclasses.dataclass
class _Inputs:
    """Everything `train` reads before it writes anything: the config, labels and data."""

    config: BertConfig
    labels: LabelSet
    count: int
    train_data: Callable  # (batch size, epoch, batches to skip) -> tf.data.Dataset
    prepared: str | None  # a temporary folder of prepared shards, removed at the end
    dev_examples: list | None
    dev_features: Features | None
    seen: Callable  # (dataset, epoch or None for dev, batches skipped) -> the batches the model sees (`Task.batches`)
    pad_id: int = 0  # the tokenizer's padding id, which pads the token rows


def _monitor(args: TrainArgs, the_task: Task, strategy) -> str:
    """The dev metric that picks the best epoch (``loss`` without dev); the multi-worker loop logs only some."""
    monitor = args.monitor or (the_task.monitor if args.dev else "loss")
    logged = {"loss", *(f"val_{key}" for key in the_task.dev_keys)}
    if is_multiworker(strategy) and monitor not in logged:  # the multi-worker loop logs no Keras metrics
        raise fail(ConfigError, "--monitor", f"one of {sorted(logged)} under --strategy multiworker", monitor)
    return monitor


def _read_inputs(args: TrainArgs, the_task: Task, labels: LabelSet | None, verbose: int) -> _Inputs:
    """Read and check the vocabulary, config, training and dev data (``labels``: a resumed run's)."""
    tokenizer = the_task.make_tokenizer(args.vocab, args.lowercase)
    # word pieces of uncut text never reach a whole word; a SentencePiece model's pieces are its own words
    if isinstance(tokenizer, Tokenizer) and args.pre_tokenize is None:
        refuse_word_vocabulary(tokenizer.ids_to_tokens(range(tokenizer.vocab_size)), args.vocab)
    config = resolve_config(args.config)
    if args.checkpoint is not None and tokenizer.vocab_size > config.vocab_size:  # fewer: ids stay in range
        raise fail(ConfigError, args.vocab, f"at most {config.vocab_size} tokens, the vocab_size of {config.source}",
                   f"{tokenizer.vocab_size} tokens", "pass the vocabulary that came with the checkpoint")
    if args.checkpoint is None and config.vocab_size != tokenizer.vocab_size:
        logger.info("training from scratch: vocab_size %d -> %d (the size of %s)", config.vocab_size,
                    tokenizer.vocab_size, args.vocab)
        config = config.replace(vocab_size=tokenizer.vocab_size)
    check_family(tokenizer, families.resolve(args.model, config), config, args.vocab)  # a tokenizer.json's family
    labels, count, train_data, prepared = _train_data(args, the_task, tokenizer, config, labels, verbose)
    for name, value in the_task.task_options().items():  # as the training data settled them (sim: its loss)
        setattr(args, name, value)
    dev_examples = the_task.read(args.dev, labels) if args.dev else None
    dev_features = the_task.encoded(tokenizer, dev_examples, labels, args.maxlen, args.dev) if args.dev else None
    if verbose:
        logger.info("%d training examples from %s%s%s", count, args.train,
                    f" and {len(dev_examples)} dev examples from {args.dev}" if args.dev else "",
                    f"; {len(labels)} labels" if len(labels) and _streamed(args.train) else "")  # read: counted

    def seen(dataset, epoch: int | None, skip: int = 0):
        return the_task.batches(dataset, tokenizer, args.seed, epoch, skip)

    return _Inputs(config, labels, count, lambda batch, epoch, skip: seen(train_data(batch, epoch, skip), epoch, skip),
                   prepared, dev_examples, dev_features, seen, pad_id_of(tokenizer))


def _precision_policy(args: TrainArgs) -> str | None:
    """The mixed precision policy of ``--mixed-precision`` (None without it); on a CPU, says whether bf16 pays."""
    policy = _mixed_policy() if args.mixed_precision else None
    if policy == "mixed_bfloat16" and keras.config.backend() == "tensorflow":
        speedup = bf16_speedup()
        if bf16_pays(speedup):
            logger.info("mixed precision: bfloat16 matmuls measured %.2f x float32 on this CPU", speedup)
        else:
            logger.warning("--mixed-precision: bfloat16 matmuls measured %.2f x float32 on this CPU, so bfloat16 is "
                           "no faster here (it pays on CPUs with bf16 matrix instructions, oneDNN on): leave it out "
                           "for speed", speedup)
    return policy


def _build(args: TrainArgs, the_task: Task, inputs: _Inputs, strategy, verbose: int):
    """The compiled model in ``strategy``'s scope: ``(model, optimizer, steps per epoch)``."""
    policy = _precision_policy(args)
    global_batch = _global_batch(args, strategy)
    steps_per_epoch = math.ceil(inputs.count / global_batch)
    total = min(steps_per_epoch * args.epochs, args.max_steps or math.inf)
    logger.info("%s: %d replica(s) x %d %s = global batch %d; %d steps an epoch", describe(strategy),
                strategy.num_replicas_in_sync, args.batch_size, "rows" if the_task.group == 1 else "pairs",
                global_batch, steps_per_epoch)
    with strategy.scope():
        backbone = build_transformer_model(config=inputs.config, checkpoint_path=args.checkpoint, model=args.model,
                                           application=the_task.application, verbose=verbose > 0, dtype=policy,
                                           **the_task.backbone_heads())
        model = the_task.head(backbone, inputs.labels)
        optimizer = compile_model(model, the_task, args, total, inputs.config.num_hidden_layers, policy)
    if args.adversarial is not None:
        _adversarial(model, args, strategy)
    if _buckets(model, strategy):
        logger.info("XLA (jit_compile): on; batches padded to lengths %s", bucket_lengths(args.maxlen))
    elif getattr(optimizer, "inner_optimizer", optimizer).xla_update and describe(strategy) == "one device":
        logger.info("XLA (jit_compile): off for the step (%s), on for AdamW's update", "--crf" if args.crf else
                    "--no-jit-compile" if args.jit_compile is False else "on a CPU")
    return model, optimizer, steps_per_epoch


def _adversarial(model, args: TrainArgs, strategy) -> None:
    """``--adversarial``: the model's step trains against its perturbation (`kerasbert.finetune.adversarial`)."""
    from kerasbert.finetune.adversarial import enable

    if strategy.num_replicas_in_sync > 1:
        raise fail(ConfigError, f"--adversarial {args.adversarial}", "one device", f"{strategy.num_replicas_in_sync} "
                   "replicas", "the perturbation moves the model's one embedding matrix: pass --strategy one")
    enable(model, args.adversarial, args.adversarial_epsilon, seed=args.seed)
    logger.info("adversarial training: %s, epsilon %g", args.adversarial, args.adversarial_epsilon)


def _global_batch(args: TrainArgs, strategy) -> int:
    """Rows a step takes over all replicas (``--batch-size`` is per replica)."""
    return args.batch_size * strategy.num_replicas_in_sync


def _buckets(model, strategy) -> bool:
    """Batches padded to length buckets: under XLA, one compile per padded shape (not in the multi-worker loop)."""
    return bool(model.jit_compile) and not is_multiworker(strategy)


def _write_run_files(run: Run, args: TrainArgs, inputs: _Inputs) -> None:
    """The run folder's fixed files (arguments, labels, config and vocabulary), swapped in whole for what
    ``--out`` held (`Run.create`; `Run.check_new` made sure that was a run and held no input)."""

    def write(staging: Run) -> None:
        inputs.labels.save(staging.file("labels.json"))
        staging.write_json("bert_config.json", inputs.config.to_dict())
        copy_file(args.vocab, staging.file(vocab_name(args.vocab)))
        staging.write_json("args.json", args.to_saved(run.path))  # last: it marks a run folder

    run.create(write)


def _dev_scorer(model, the_task: Task, args: TrainArgs, inputs: _Inputs, chief: bool):
    """A function that scores dev with the model as it is (``{}`` without dev, and on non-chief workers)."""

    def score_dev() -> dict:
        if inputs.dev_features is None or not chief:
            return {}
        scores = _dev_scores(model, the_task, args, inputs)
        return {f"val_{key}": scores[key] for key in the_task.dev_keys if key in scores}

    return score_dev


def _dev_scores(model, the_task: Task, args: TrainArgs, inputs: _Inputs) -> dict:
    """The task's scores of ``model`` on the dev set."""
    predictions = the_task.predict(model, inputs.dev_features, inputs.dev_examples, inputs.labels, args.batch_size)
    return the_task.score(inputs.dev_examples, predictions, inputs.labels)


def _fit(model, strategy, args: TrainArgs, inputs: _Inputs, state: State, callbacks: list, steps_per_epoch: int,
         verbose: int) -> None:
    """Train epoch by epoch from ``state`` (each epoch's data order from seed and epoch) until done."""
    train_data = inputs.train_data
    dev_data = None if inputs.dev_features is None else inputs.seen(to_dataset(inputs.dev_features, args.batch_size),
                                                                    None)
    if _buckets(model, strategy):
        train_data = _bucketed(train_data, args.maxlen, inputs.pad_id)
        dev_data = length_buckets(dev_data, args.maxlen, pad_id=inputs.pad_id) if dev_data is not None else None
    loop = None
    if is_multiworker(strategy):
        loop = keras.callbacks.CallbackList(callbacks, add_progbar=bool(verbose), model=model,
                                            verbose=verbose, epochs=args.epochs, steps=steps_per_epoch)
        train_step = make_train_step(model, strategy)
    global_batch = _global_batch(args, strategy)
    while not state.finished and state.epoch < args.epochs:
        data = train_data(global_batch, state.epoch, state.step)
        if loop is not None:
            fit_epoch(model, strategy, data, loop, state.epoch, train_step)
        else:  # one epoch a call (its own data order), counted "Epoch k/N"
            model.fit(data, epochs=args.epochs, initial_epoch=state.epoch, validation_data=dev_data,
                      callbacks=[*callbacks, OneEpoch()], verbose=verbose, shuffle=False)
        state.finished = bool(args.max_steps and state.global_step >= args.max_steps)
    state.finished = True


def _bucketed(train_data, maxlen: int, pad_id: int = 0):
    """``train_data`` (a function of batch size, epoch and batches to skip) with `length_buckets`."""
    return lambda batch, epoch, skip: length_buckets(train_data(batch, epoch, skip), maxlen, pad_id=pad_id)


def _temporary_folder(prefix: str) -> str:
    """A new temporary folder, removed when `train` ends and, should it fail, when the process exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _maxlen(args: TrainArgs, config, prepared: int | None = None) -> int:
    """``--maxlen``: as given, or the prepared data's, or `kerasbert.choices.MAXLEN` (at most the model's
    positions: a position table's P; any for NEZHA's and RoFormer's positions)."""
    limit = families.max_length(args.model or "bert", config)
    maxlen = args.maxlen or prepared or min(MAXLEN, limit or MAXLEN)
    if limit is not None and maxlen > limit:
        raise fail(ConfigError, "--maxlen", f"<= max_position_embeddings = {limit}", str(maxlen))
    if prepared and maxlen != prepared:
        raise fail(ConfigError, "--maxlen", f"{prepared}, the maxlen {args.train} was prepared with", str(maxlen))
    return maxlen


def _train_data(args: TrainArgs, the_task: Task, tokenizer: Tokenizer, config, labels, verbose: int):
    """``--train`` as ``(labels, count, dataset(batch_size, epoch, skip_batches), temporary folder)``.

    One file is read and encoded in memory. A folder from ``kerasbert prepare`` is streamed from its
    shards; a glob is first prepared (streamed, tokenized once) into a temporary folder, removed at the end.
    """
    if not the_task.streams and _streamed(args.train):
        raise fail(ConfigError, "--train", f"one file, read in memory, for --task {args.task} with --model "
                   f"{args.model or 'the config'}", f"the streamed data {args.train!r}",
                   "concatenate the files into one --train file")
    if args.stride is not None and _streamed(args.train):
        raise fail(ConfigError, "--stride", "a --train file, read in memory", f"the streamed data {args.train!r}",
                   "prepared shards hold rows already cut at --maxlen: train on the file, or leave --stride out")
    if not _streamed(args.train):
        args.maxlen = _maxlen(args, config)
        examples = the_task.read(args.train, labels)
        report_labels(the_task.labelled(examples), args.train, the_task.label_noun, verbose)
        labels = labels or the_task.label_set(examples)
        features = the_task.encoded(tokenizer, examples, labels, args.maxlen, args.train)
        return labels, len(features) // features.group, lambda batch, epoch, skip: to_dataset(
            features, batch, seed=args.seed, epoch=epoch, skip_batches=skip), None
    folder = temporary = None
    if os.path.isdir(args.train):
        folder = args.train
        meta = streaming.read_prepared(folder)
        args.maxlen = _maxlen(args, config, meta["maxlen"])
    else:
        args.maxlen = _maxlen(args, config)
        temporary = _temporary_folder("kerasbert-prepared-")
        folder = os.path.join(temporary, "prepared")
        meta = streaming.prepare(the_task, args.train, tokenizer, args.maxlen, folder, labels, verbose=verbose)
    _check_prepared(args, meta, tokenizer.vocab_size)
    if labels is not None and labels.labels != meta["labels"]:
        raise fail(ConfigError, f"--train {args.train}", f"the run's labels {labels.labels}", str(meta["labels"]))
    return LabelSet(meta["labels"]), meta["count"], lambda batch, epoch, skip: streaming.prepared_dataset(
        folder, batch, seed=args.seed, epoch=epoch, skip_batches=skip), temporary


def _streamed(train: str) -> bool:
    """Whether ``--train`` is streamed (a folder from ``kerasbert prepare`` or a glob) rather than read whole."""
    return os.path.isdir(train) or is_glob(train)


def _check_prepared(args: TrainArgs, meta: dict, vocab_size: int) -> None:
    """A ConfigError where the prepared data's task, vocabulary or encoding options are not the run's."""
    defaults = TaskOptions()  # what a folder prepared before these options was encoded with
    options = {"whole_word": defaults.whole_word, "nsp": defaults.nsp, "pre_tokenize": None, **meta["options"]}
    wanted = {"task": args.task, "vocab_size": vocab_size, "crf": args.crf, "pre_tokenize": args.pre_tokenize,
              **({"whole_word": args.whole_word, "nsp": args.nsp} if args.task == "mlm" else {})}
    found = {**options, "task": meta["task"], "vocab_size": meta["vocab_size"], "crf": bool(options.get("crf"))}
    for key, expected in wanted.items():
        if found[key] != expected:
            raise fail(ConfigError, f"--train {args.train}", f"data prepared with {key} {expected}", str(found[key]))


def _finish(run, args, the_task, inputs: _Inputs, state, monitor) -> dict:
    """Score the best model on dev and write metrics.json, the task's report (confusion plot or per-type
    table) and the Google export."""
    best = run.load_model()
    result = {"task": args.task, "monitor": monitor, "best_epoch": state.best_epoch, "steps": state.global_step,
              "history": state.history[-1] if state.history else {}}
    if inputs.dev_examples is not None:
        result["dev"] = _dev_scores(best, the_task, args, inputs)
        the_task.write_report(run.path, result["dev"], inputs.labels)
    run.write_json("metrics.json", result)
    if args.export_google_checkpoint:
        os.makedirs(run.file("google"), exist_ok=True)
        save_google_checkpoint(best, run.file("google"))
        copy_file(run.file("bert_config.json"), run.file("google/bert_config.json"))
        vocab = run.vocab()
        copy_file(vocab, run.file(os.path.join("google", os.path.basename(vocab))))
    return result


def evaluate(run_dir: str, data: str | None = None, batch_size: int | None = None, verbose: int = 1,
             stride: int | None = None) -> dict:
    """Score the run's model on a labelled file in the training format (None: the run's dev file); writes
    ``eval-<file>.json``. ``stride``: split long texts into windows sharing that many word pieces (None: as the
    run was trained), each text scored whole (`kerasbert.finetune.runs.with_stride`).

    Returns:
        dict. cls: ``accuracy``, ``macro_f1``, ``per_label``, ``confusion``; ner: micro/macro
        ``precision``/``recall``/``f1`` and ``per_type`` (entity level, on character spans).
    """
    data = scored_file(run_dir, data)
    loaded = with_stride(open_run(run_dir), stride)
    scores = score_file(loaded, data, batch_size, verbose)
    loaded.run.write_json(f"eval-{os.path.splitext(os.path.basename(data))[0]}.json", scores)
    return scores


def predict(run_dir: str, texts: Sequence[str | dict], batch_size: int | None = None, verbose: int = 0,
            stride: int | None = None, explain: bool = False) -> list[dict]:
    """Predict raw texts (str, or ``{"text", "text_b"}`` for pairs) with the run's model; ``stride``: split long
    texts into windows sharing that many word pieces (None: as the run was trained;
    `kerasbert.finetune.runs.with_stride`); ``explain``: a cls run's rows also get each word piece's integrated
    gradients score for the predicted label (`kerasbert.finetune.explain.with_attributions`).

    Returns:
        list of dict. cls: ``{"text", "label", "probabilities"}`` (with ``explain``: and ``"tokens"``,
        ``"scores"``); ner: ``{"text", "entities": [{"start", "end", "label", "text"}]}`` with character offsets into
        the text.
    """
    loaded = with_stride(open_run(run_dir), stride)
    rows = [row if isinstance(row, dict) else {"text": row} for row in texts]
    predictions = predict_rows(loaded, rows, batch_size, verbose)
    rows = [{**row, **prediction} for row, prediction in zip(rows, predictions, strict=True)]
    if explain:
        from kerasbert.finetune.explain import with_attributions

        return with_attributions(loaded, rows)
    return rows
