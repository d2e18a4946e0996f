"""Continued pretraining on a domain's raw text: does it lower the held-out masked-LM loss and raise the downstream
dev and test accuracy, against fine-tuning the same general checkpoint without it?

The data (`domain_corpus`, generated, no network): everyday Chinese text (the general corpus), a medical domain's
raw text (documents about made-up drugs of four kinds, each drug in its kind's contexts: ``X能降低血压``), held-out
domain documents, and a labelled task on the domain: a sentence naming one drug in a neutral context
(``请问X需要处方吗``), labelled with the drug's kind. A drug's name is two characters written nowhere else, so the
label is the drug's identity alone. The labelled training set names 6 drugs of each kind; dev and test name 7
others each, which the domain text uses but the labelled training set never names. Fine-tuning alone sees nothing
of a dev drug; masked-LM training on the domain text does, in contexts that tell its kind. By construction, then,
unlabelled domain text can help; the benchmark measures how much, with kerasbert's `pretrain` and `train`.

1. **general checkpoint**: the ``tiny`` preset (2 layers, H 32, 64 positions; vocab_size set to the corpus's
   characters) pretrained from random weights on the general corpus (`pretrain`, ``checkpoint=None``), seed 0.
2. **arm A** (``general``): `kerasbert.train` fine-tunes the general checkpoint's ``google/`` folder directly.
3. **arm B** (``domain``): `pretrain` continues from the general checkpoint on the domain corpus, the held-out
   documents picking its best epoch; `kerasbert.train` fine-tunes its ``google/`` folder with arm A's recipe.

The stages' rates are a tiny model's (`pretrain`'s default, 5e-5, is for BERT-base): with 240 continued steps at
1e-3 the tiny model does not learn the drugs' kinds and fine-tuning at 1e-3 does not fit its training set, so
the stages run at 2e-3 to 5e-3, the continued pretraining for 40 epochs (960 steps).

Seeds 0 to ``--seeds`` - 1 seed the fine-tuning and the continued pretraining. Each arm reports the held-out
domain masked-LM loss and accuracy (the masks are drawn once, the same in every run: arm A scores the general
checkpoint's run with `kerasbert.evaluate` on the held-out documents, arm B its continued run the same way), the
dev accuracy at the best epoch and the test accuracy of that epoch (mean and min-max over seeds), and the steps and
seconds of each stage.

Throughput (one process, the general checkpoint, batch 32 of the domain's packed rows at maxlen 64): tokens (word
pieces other than padding) a second of the pretraining step (masked-LM head over the vocabulary) against the
fine-tuning step (the classifier, its last block on ``[CLS]`` alone) on the same token batches, stepped with
``train_on_batch`` in interleaved rounds (the order reversed every round), and the data pipeline's share of a
pretraining epoch: the time to iterate the epoch's dataset alone (`MaskedLmTask.batches` over the encoded rows:
the masks drawn per batch) over the time of ``fit`` on it, and what it adds to the epoch (``fit`` on the same
batches drawn beforehand against ``fit`` drawing them), medians of the rounds' paired ratios.

Usage:
    python benchmarks/pretrain_domain.py            # 3 seeds: RESULTS.md, section pretrain-domain
    python benchmarks/pretrain_domain.py --quick    # small corpora, 1 seed, 1 epoch a stage: checks that it runs
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench import shown_options  # noqa: E402

ARMS = ("general", "domain")
MAXLEN, BATCH = 64, 32
#: epochs and learning rates of each stage: the full benchmark's, and ``--quick``'s
STAGES = {False: {"general_epochs": 20, "general_lr": 2e-3, "domain_epochs": 40, "domain_lr": 5e-3,
                  "epochs": 20, "lr": 5e-3, "rounds": 10},
          True: {"general_epochs": 1, "general_lr": 2e-3, "domain_epochs": 1, "domain_lr": 5e-3,
                 "epochs": 1, "lr": 5e-3, "rounds": 1}}
STEPS_A_ROUND = 8  # train_on_batch calls of each step a throughput round
EPOCHS_A_ROUND = 3  # pretraining epochs of each arm a pipeline round


def timed(function, *args, **kwargs) -> tuple:
    """``(function's result, seconds it took)``."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def held_out(run: str, paths: dict) -> dict:
    """The held-out domain documents' masked-LM loss, accuracy and predicted pieces under ``run``'s best model."""
    from kerasbert import evaluate

    scores = evaluate(run, paths["held_out"], verbose=0)
    return {key: scores[key] for key in ("loss", "accuracy", "count")}


def general_checkpoint(paths: dict, folder: str, args) -> dict:
    """The tiny preset pretrained from random weights on the general corpus: its run, held-out scores, steps, time."""
    from kerasbert.finetune.pretrain import pretrain

    run = os.path.join(folder, "general")
    result, seconds = timed(pretrain, paths["general"], run, config="tiny", vocab=paths["vocab"],
                            epochs=args.general_epochs, lr=args.general_lr, batch_size=BATCH, maxlen=MAXLEN, seed=0,
                            verbose=0)
    return {"run": run, "google": result["google"], "steps": result["steps"], "seconds": seconds,
            "held_out": held_out(run, paths)}


def continued(paths: dict, general: dict, seed: int, folder: str, args) -> dict:
    """Arm B's first stage: `pretrain` from the general checkpoint on the domain corpus, held-out documents as dev."""
    from kerasbert.finetune.pretrain import pretrain

    run = os.path.join(folder, f"domain-{seed}")
    result, seconds = timed(pretrain, paths["domain"], run, checkpoint=general["google"], dev=paths["held_out"],
                            epochs=args.domain_epochs, lr=args.domain_lr, batch_size=BATCH, maxlen=MAXLEN,
                            seed=seed, verbose=0)
    return {"google": result["google"], "steps": result["steps"], "seconds": seconds,
            "held_out": held_out(run, paths), "best_epoch": result["best_epoch"]}


def fine_tune(checkpoint: str, paths: dict, seed: int, run: str, args) -> dict:
    """`kerasbert.train` on the labelled task from ``checkpoint`` (best epoch by dev accuracy), scored on test."""
    from kerasbert import evaluate, train

    result, seconds = timed(train, "cls", paths["train"], run, checkpoint=checkpoint, dev=paths["dev"],
                            text="text", label="label", epochs=args.epochs, lr=args.lr, batch_size=BATCH,
                            maxlen=MAXLEN, seed=seed, verbose=0)
    test = evaluate(run, paths["test"], verbose=0)
    return {"dev": result["dev"]["accuracy"], "test": test["accuracy"], "best_epoch": result["best_epoch"],
            "steps": result["steps"], "seconds": seconds}


def run_arms(paths: dict, general: dict, seed: int, folder: str, args) -> dict:
    """Both arms at ``seed``: ``{"general": {...}, "domain": {...}}``, each with its held-out scores and stages."""
    plain = fine_tune(general["google"], paths, seed, os.path.join(folder, f"cls-general-{seed}"), args)
    domain = continued(paths, general, seed, folder, args)
    adapted = fine_tune(domain["google"], paths, seed, os.path.join(folder, f"cls-domain-{seed}"), args)
    return {"general": {**plain, "held_out": general["held_out"], "pretrain": None},
            "domain": {**adapted, "held_out": domain["held_out"], "pretrain": domain}}


# ------------------------------------------------------------------------------------------- throughput
def step_models(google: str, vocab: str):
    """The pretraining model (the checkpoint with its masked-LM head) and the fine-tuning model (the classifier on
    the checkpoint), each compiled as `kerasbert.train` compiles it; and the masked-LM task."""
    from domain_corpus import KINDS

    from kerasbert import build_transformer_model
    from kerasbert.finetune.args import TrainArgs
    from kerasbert.finetune.tasks import task_of
    from kerasbert.finetune.training import compile_model
    from kerasbert.modeling.config import resolve_config
    from kerasbert.text.readers import LabelSet

    config, built = resolve_config(google), []
    for task, extra in (("mlm", {"with_mlm": True}), ("cls", {})):
        args = TrainArgs(task=task, train=vocab, out="", checkpoint=google, maxlen=MAXLEN,  # train: not read
                         batch_size=BATCH)
        the_task = task_of(args)
        backbone = build_transformer_model(config=config, checkpoint_path=os.path.join(google, "bert_model.ckpt"),
                                           verbose=False, **extra)
        model = the_task.head(backbone, LabelSet(list(KINDS)))
        compile_model(model, the_task, args, 1000, config.num_hidden_layers)
        built += [model, the_task]
    return built


def step_batches(mlm_task, tokenizer, features, count: int) -> list[tuple]:
    """``count`` batches of masked rows: ``(inputs, masked-LM targets, random class labels, tokens)``."""
    import numpy as np

    from kerasbert.text.pipeline import to_dataset

    rng, batches = np.random.default_rng(0), []
    while len(batches) < count:
        for inputs, targets in mlm_task.batches(to_dataset(features, BATCH, seed=0, epoch=len(batches)), tokenizer,
                                                0, len(batches)):
            tokens = int(np.count_nonzero(inputs["Input-Token"].numpy()))
            batches.append((inputs, targets, rng.integers(0, 4, (targets.shape[0],)), tokens))
    return batches[:count]


def step_rates(mlm, cls, batches: list[tuple], rounds: int) -> dict:
    """Tokens a second of each step, each round's ``STEPS_A_ROUND`` steps of each in turn, the order reversed every
    round: the medians, and the median of the rounds' paired ratios (pretraining over fine-tuning)."""
    steps = {"pretrain": lambda b: mlm.train_on_batch(b[0], b[1]),
             "fine-tune": lambda b: cls.train_on_batch(b[0], b[2])}
    for step in steps.values():  # traced for each batch length outside the timed rounds
        for batch in batches:
            step(batch)
    rates: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(rounds):
        for name in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            chosen = [batches[(r * STEPS_A_ROUND + i) % len(batches)] for i in range(STEPS_A_ROUND)]
            start = time.perf_counter()
            for batch in chosen:
                steps[name](batch)
            rates[name].append(sum(b[3] for b in chosen) / (time.perf_counter() - start))
    ratios = [a / b for a, b in zip(rates["pretrain"], rates["fine-tune"], strict=True)]
    return {**{name: statistics.median(values) for name, values in rates.items()}, "ratio": statistics.median(ratios)}


def pipeline_share(mlm, mlm_task, tokenizer, features, rounds: int) -> dict:
    """`EPOCHS_A_ROUND` pretraining epochs in interleaved rounds (new masks each epoch, the order rotated every
    round): the seconds to iterate their datasets alone (``pipeline``), of ``fit`` on them (``epoch``), and of ``fit``
    on the same batches drawn beforehand (``drawn``), each a mean per epoch; the medians, and the medians of the
    rounds' ``pipeline / epoch`` (``share``) and ``(epoch - drawn) / epoch`` (``exposed``: what the pipeline adds)."""
    import keras

    from kerasbert.text.pipeline import to_dataset

    def dataset(epoch: int):
        return mlm_task.batches(to_dataset(features, BATCH, seed=0, epoch=epoch), tokenizer, 0, epoch)

    def iterate(epochs: list[int]) -> None:
        for epoch in epochs:
            for _ in dataset(epoch):
                pass

    def fit(datasets: list) -> None:
        for data in datasets:  # one epoch a call, as `kerasbert.train` runs them
            mlm.fit(data, epochs=1, verbose=0, shuffle=False, callbacks=[keras.callbacks.History()])

    def fit_live(epochs: list[int]) -> None:
        fit([dataset(epoch) for epoch in epochs])

    fit_live([0])
    iterate([0])
    times: dict[str, list[float]] = {"pipeline": [], "epoch": [], "drawn": []}
    for r in range(rounds):
        epochs = [EPOCHS_A_ROUND * r + k + 1 for k in range(EPOCHS_A_ROUND)]
        drawn = [dataset(epoch).cache() for epoch in epochs]
        count = sum(1 for data in drawn for _ in data) // EPOCHS_A_ROUND  # fills the caches: the timed fit replays
        arms = [("pipeline", iterate, epochs), ("epoch", fit_live, epochs), ("drawn", fit, drawn)]
        for name, function, argument in arms[r % 3:] + arms[:r % 3]:
            times[name].append(timed(function, argument)[1] / EPOCHS_A_ROUND)
    paired = zip(times["pipeline"], times["epoch"], times["drawn"], strict=True)
    shares, exposed = zip(*((a / b, (b - c) / b) for a, b, c in paired), strict=True)
    return {**{name: statistics.median(values) for name, values in times.items()}, "batches": count,
            "share": statistics.median(shares), "exposed": statistics.median(exposed)}


def throughput(paths: dict, general: dict, rounds: int) -> dict:
    """`step_rates` and `pipeline_share` on the general checkpoint and the domain corpus."""
    from kerasbert.text.tokenizer import Tokenizer

    mlm, mlm_task, cls, _ = step_models(general["google"], paths["vocab"])
    tokenizer = Tokenizer(paths["vocab"])
    features = mlm_task.encode(tokenizer, mlm_task.read(paths["domain"]), None, MAXLEN, paths["domain"])
    batches = step_batches(mlm_task, tokenizer, features, 2 * STEPS_A_ROUND)
    return {"steps": step_rates(mlm, cls, batches, rounds),
            "pipeline": pipeline_share(mlm, mlm_task, tokenizer, features, rounds),
            "tokens_a_batch": statistics.mean(b[3] for b in batches)}


# ------------------------------------------------------------------------------------------- report
def spread(values: list[float]) -> str:
    """``mean (min-max)`` to three decimals; the mean alone for one value."""
    mean = statistics.mean(values)
    return f"{mean:.3f}" if len(values) == 1 else f"{mean:.3f} ({min(values):.3f}-{max(values):.3f})"


def arm_rows(results: list[dict]) -> list[str]:
    """One table row per arm: held-out masked-LM loss and accuracy, dev and test accuracy, per-seed test, stages."""
    rows = []
    for arm in ARMS:
        runs = [result[arm] for result in results]
        pretrained = [run["pretrain"] for run in runs if run["pretrain"]]
        stage = (f"{statistics.mean(p['steps'] for p in pretrained):.0f} steps, "
                 f"{statistics.mean(p['seconds'] for p in pretrained):.0f} s" if pretrained else "none")
        rows.append(f"| {arm} | {spread([run['held_out']['loss'] for run in runs])} | "
                    f"{spread([run['held_out']['accuracy'] for run in runs])} | "
                    f"{spread([run['dev'] for run in runs])} | {spread([run['test'] for run in runs])} | "
                    f"{', '.join(format(run['test'], '.3f') for run in runs)} | {stage} | "
                    f"{statistics.mean(run['steps'] for run in runs):.0f} steps, "
                    f"{statistics.mean(run['seconds'] for run in runs):.0f} s |")
    return rows


def table(results: list[dict], general: dict, speed: dict, args) -> str:
    """The section of RESULTS.md: the setting, the arms' table and the throughput lines."""
    import tensorflow as tf

    steps, pipeline = speed["steps"], speed["pipeline"]
    held = general["held_out"]
    lines = [f"`python benchmarks/pretrain_domain.py{args.command}` — `domain_corpus` ({args.sizes}); the `tiny` "
             f"preset (2 layers, H 32) pretrained from random weights on the general text ({args.general_epochs} "
             f"epochs, lr {args.general_lr:g}: {general['steps']} steps, {general['seconds']:.0f} s), then per seed "
             f"arm `general` fine-tunes it and arm `domain` first continues pretraining on the domain text "
             f"({args.domain_epochs} epochs, lr {args.domain_lr:g}, linear decay; best epoch by held-out loss). "
             f"Fine-tuning: `kerasbert.train` cls, {args.epochs} epochs, lr {args.lr:g}, batch {BATCH}, maxlen "
             f"{MAXLEN}, the other options at their defaults, test scored at the best dev epoch. Held-out: masked-LM "
             f"loss and accuracy on the held-out domain documents ({held['count']} predicted pieces, one mask draw "
             f"for every run). Mean (min-max) over {len(results)} seed(s); measured on 2 shared CPU cores; "
             f"Python {platform.python_version()}, tensorflow {tf.__version__}.", "",
             "| arm | held-out MLM loss | held-out MLM accuracy | dev accuracy | test accuracy | test per seed | "
             "continued pretraining | fine-tuning |", "|---|---|---|---|---|---|---|---|", *arm_rows(results), "",
             "Chance on dev and test is 0.250 (four kinds, balanced).", "",
             f"Throughput (the general checkpoint, batch {BATCH} of packed domain rows, {speed['tokens_a_batch']:.0f} "
             f"tokens a batch; {args.rounds} interleaved rounds of {STEPS_A_ROUND} steps each, medians): pretraining "
             f"step {steps['pretrain']:,.0f} tokens/s, fine-tuning step {steps['fine-tune']:,.0f} tokens/s on the "
             f"same batches (pretraining / fine-tuning {steps['ratio']:.2f} ×, median of paired rounds).", "",
             f"Data pipeline ({args.rounds} interleaved rounds of {EPOCHS_A_ROUND} epochs each, per epoch, medians of "
             f"paired rounds): iterating a pretraining epoch's {pipeline['batches']} masked batches alone "
             f"{pipeline['pipeline']:.3f} s against {pipeline['epoch']:.3f} s for the epoch's `fit`: "
             f"**{100 * pipeline['share']:.1f} %** of it (target ≤ 5 %). `fit` on the same batches drawn beforehand: "
             f"{pipeline['drawn']:.3f} s, so the pipeline adds {100 * pipeline['exposed']:.1f} % to an epoch."]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line; the stages' epochs and rates default to `STAGES` (``--quick``'s with it)."""
    options = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    options.add_argument("--seeds", type=int, default=3)
    options.add_argument("--quick", action="store_true")
    options.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    options.add_argument("--section", default="pretrain-domain")
    for name, kind in (("general_epochs", int), ("general_lr", float), ("domain_epochs", int), ("domain_lr", float),
                       ("epochs", int), ("lr", float), ("rounds", int)):
        options.add_argument("--" + name.replace("_", "-"), type=kind, help=f"default: {STAGES[False][name]:g} "
                             f"(--quick: {STAGES[True][name]:g})")
    args = options.parse_args(argv)
    for name, value in STAGES[args.quick].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.seeds = 1 if args.quick else args.seeds
    args.command = "".join(f" {arg}" for arg in shown_options(argv))
    return args


def main(argv=None) -> None:
    from domain_corpus import SIZES, write_corpus
    from results import write_section

    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    sizes = SIZES[args.quick]
    args.sizes = (f"general {sizes['general']:,} sentences, domain {sizes['domain']:,}, held-out {sizes['held_out']}; "
                  f"labelled train / dev / test {sizes['train']} / {sizes['dev']} / {sizes['test']}")
    with tempfile.TemporaryDirectory() as folder:
        paths = write_corpus(os.path.join(folder, "data"), quick=args.quick)
        general = general_checkpoint(paths, folder, args)
        print(f"general checkpoint: {general['steps']} steps, {general['seconds']:.0f} s, held-out "
              f"{general['held_out']}", flush=True)
        results = []
        for seed in range(args.seeds):
            results.append(run_arms(paths, general, seed, folder, args))
            for arm in ARMS:
                run = results[-1][arm]
                print(f"seed {seed} {arm}: held-out loss {run['held_out']['loss']:.3f}, dev {run['dev']:.3f}, "
                      f"test {run['test']:.3f} (epoch {run['best_epoch']}, {run['seconds']:.0f} s)", flush=True)
        speed = throughput(paths, general, args.rounds)
    text = "## Continued pretraining on a domain: held-out masked LM and downstream accuracy\n\n" + table(
        results, general, speed, args)
    print(text)
    write_section(args.section, text, args.results)


if __name__ == "__main__":
    main()
