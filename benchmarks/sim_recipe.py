"""Similarity recipes side by side: test Spearman of sentence vectors trained by kerasbert and bert4keras from the
same random checkpoint.

On `paraphrase_corpus`'s generated question pairs (LCQMC-style, half of them hard negatives; dev and test names
never seen in training) every run starts from one small random Google checkpoint and trains a bi-encoder with
CoSENT (λ 20) for ``--epochs`` epochs (5, CoSENT's), batch 32 pairs (64 texts, a pair's two texts consecutive
rows), maxlen 64, learning rate ``--lr``; the epoch with the best dev Spearman is scored on test: the Spearman
correlation of the pairs' cosines with their labels, and the accuracy at the best threshold
(`kerasbert.finetune.metrics.similarity_metrics`, the same function on every side):

- ``kerasbert-defaults``: ``kerasbert train --task sim`` with those four values and every other option at its
  default (``first_last_avg`` pooling, warmup 0.1 then cosine decay, AdamW with weight decay 0.01), scored on test
  by ``kerasbert evaluate``;
- ``kerasbert-b4k-recipe``: the same with ``--schedule constant --warmup 0 --weight-decay 0`` (bert4keras's Adam at
  a constant rate) and ``--pooling`` bert4keras's (``--b4k-pooling``);
- ``bert4keras``: bert4keras 0.11.5 on tf-keras, bojone's CoSENT script's recipe (the encoder built by
  bert4keras's ``build_transformer_model``, its output pooled by ``--b4k-pooling``, the CoSENT loss on the batch's
  consecutive rows, Adam at a constant rate with bert4keras's epsilon 1e-6), in a worker process of its own. Adam is
  tf-keras's, as in ``ner_recipe``: bert4keras's own is built on the optimizer class tf-keras 2.11+ moved to
  ``optimizers.legacy``;
- ablations (not in ``--quick``): ``kerasbert-cls`` and ``bert4keras-cls``, the b4k recipe on each side with the
  ``[CLS]`` vector, the pooling bojone's CoSENT script itself uses (``first_last_avg`` is his BERT-whitening and
  SimCSE scripts'); ``kerasbert-mean``, the defaults with mean pooling.

CoSENT's own rate, 2e-5, is for a pretrained BERT-base: from random weights five epochs at 2e-5 leave every recipe
far short of its plateau (dev Spearman still climbing at the last epoch), the defaults' decaying rate furthest, so
``--lr`` (1e-3, one rate for every side) is the rate at which every recipe levels off within five epochs.

Each recipe runs once per seed (``--seeds``); the table gives the mean, the spread (min-max) and each seed's test
Spearman, the mean test accuracy, the mean dev Spearman and the best epochs, and is written to RESULTS.md's
``sim-recipe`` section.

Usage:
    python benchmarks/sim_recipe.py              # 3 seeds, 5 epochs, every recipe: RESULTS.md, section sim-recipe
    python benchmarks/sim_recipe.py --quick      # a small corpus, 1 epoch, 1 seed: checks that the recipes run
    python benchmarks/sim_recipe.py --lr 2e-5 --recipes kerasbert-defaults,kerasbert-b4k-recipe,bert4keras \
        --section sim-recipe-lr-2e-5                # CoSENT's own rate: RESULTS.md, section sim-recipe-lr-2e-5
"""

from __future__ import annotations

import csv
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench import shown_options  # noqa: E402
from recipes import (  # noqa: E402
    parser,
    random_checkpoint,
    run_benchmark,
    run_bert4keras_job,
    run_worker,
    train_and_evaluate,
)

RECIPES = ("kerasbert-defaults", "kerasbert-b4k-recipe", "bert4keras")
ABLATIONS = ("kerasbert-cls", "bert4keras-cls", "kerasbert-mean")
MAXLEN, BATCH, SCALE = 64, 32, 20.0  # CoSENT's maxlen, batch (pairs) and λ
B4K_FLAGS = ["--schedule", "constant", "--warmup", "0", "--weight-decay", "0"]  # bert4keras's optimizer
POOLINGS = ("first_last_avg", "cls", "mean")  # what the bert4keras worker pools with


def prepare(folder: str, quick: bool) -> dict:
    """The corpus, its vocabulary and the random checkpoint every run starts from."""
    from paraphrase_corpus import write_corpus

    sizes = {"n_train": 64, "n_dev": 16, "n_test": 16} if quick else {}
    paths = write_corpus(os.path.join(folder, "data"), **sizes)
    return {**paths, **random_checkpoint(folder, paths["vocab"])}


def pooling_of(recipe: str, args) -> str:
    """The pooling ``recipe`` trains with: a ``-cls`` or ``-mean`` ablation's, else bert4keras's or kerasbert's."""
    if recipe.endswith(("-cls", "-mean")):
        return recipe.rsplit("-", 1)[1]
    return args.b4k_pooling if recipe in ("bert4keras", "kerasbert-b4k-recipe") else "first_last_avg"


def kerasbert_flags(recipe: str, args) -> list[str]:
    """``kerasbert train`` options of ``recipe`` beyond the shared ones."""
    flags = B4K_FLAGS if recipe in ("kerasbert-b4k-recipe", "kerasbert-cls") else []
    return flags + ([] if recipe == "kerasbert-defaults" else ["--pooling", pooling_of(recipe, args)])


def run_kerasbert(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """Train with the CLI (best epoch by dev Spearman), score it on test with ``kerasbert evaluate``."""
    run = os.path.join(folder, f"{recipe}-{seed}")
    options = ["--task", "sim", "--epochs", str(args.epochs), "--batch-size", str(BATCH), "--lr", str(args.lr),
               "--maxlen", str(MAXLEN), "--seed", str(seed), "--quiet", "--overwrite", *kerasbert_flags(recipe, args)]
    test, metrics = train_and_evaluate(paths, run, options, recipe)
    with open(os.path.join(run, "history.csv")) as f:
        curve = [float(row["val_spearman"]) for row in csv.DictReader(f)]
    return {"test": {key: test[key] for key in ("spearman", "accuracy")}, "dev_spearman": metrics["dev"]["spearman"],
            "best_epoch": metrics["best_epoch"], "dev_curve": curve}


def run_bert4keras(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """bert4keras's recipe in a worker process (tf-keras, ``TF_KERAS=1``)."""
    job = {**paths, "seed": seed, "epochs": args.epochs, "lr": args.lr, "pooling": pooling_of(recipe, args)}
    return run_bert4keras_job(__file__, job, os.path.join(folder, f"{recipe}-{seed}.json"))


# ------------------------------------------------------------------------------------------- bert4keras worker
def read_pairs(path: str) -> list[tuple[str, str, float]]:
    """``(text_a, text_b, label)`` of each line of an LCQMC-style TSV."""
    with open(path, encoding="utf-8") as f:
        return [(a, b, float(label)) for a, b, label in (line.rstrip("\n").split("\t") for line in f if line.strip())]


def bert4keras_worker(job: dict) -> dict:
    """bojone's CoSENT recipe on ``job``'s data: a bert4keras encoder, its pooled vector, CoSENT, constant Adam."""
    import numpy as np
    import tensorflow as tf
    from bert4keras.backend import K, keras
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import sequence_padding
    from bert4keras.tokenizers import Tokenizer

    from kerasbert.finetune.metrics import similarity_metrics  # after TensorFlow: leaves its oneDNN switch alone

    tf.random.set_seed(job["seed"])
    rng = np.random.default_rng(job["seed"])
    tokenizer = Tokenizer(job["vocab"], do_lower_case=True)
    data = {split: read_pairs(job[split]) for split in ("train", "dev", "test")}

    bert = build_transformer_model(job["config"], job["checkpoint"])
    encoder = keras.Model(bert.inputs, pooled(bert, job["pooling"], K, keras))
    encoder.compile(loss=cosent, optimizer=keras.optimizers.Adam(job["lr"], epsilon=1e-6))

    def rows(pairs):
        """The pairs' texts, a pair's two texts consecutive rows, and each row's label."""
        encoded = [tokenizer.encode(text, maxlen=MAXLEN) for a, b, _ in pairs for text in (a, b)]
        return ([sequence_padding([ids for ids, _ in encoded]), sequence_padding([seg for _, seg in encoded])],
                np.repeat([[label] for *_, label in pairs], 2, axis=0))

    def score(split):
        inputs, labels = rows(data[split])
        vectors = encoder.predict(inputs, batch_size=2 * BATCH, verbose=0).astype(np.float64)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return similarity_metrics(labels[::2, 0].tolist(), (vectors[::2] * vectors[1::2]).sum(1).tolist())

    best, weights, curve = -2.0, None, []
    for epoch in range(job["epochs"]):
        order = rng.permutation(len(data["train"]))
        for start in range(0, len(order), BATCH):
            encoder.train_on_batch(*rows([data["train"][i] for i in order[start:start + BATCH]]))
        curve.append(score("dev")["spearman"])
        if curve[-1] > best:
            best, weights, best_epoch = curve[-1], encoder.get_weights(), epoch + 1
    encoder.set_weights(weights)
    test = score("test")
    return {"test": {key: test[key] for key in ("spearman", "accuracy")}, "dev_spearman": best,
            "best_epoch": best_epoch, "dev_curve": curve}


def cosent(y_true, y_pred):
    """CoSENT on bert4keras's backend: log(1 + Σ exp(λ (cos_j − cos_i))) over the pairs i, j of the batch with
    label_i > label_j; rows 2i and 2i + 1 are pair i's texts, each with its label."""
    from bert4keras.backend import K

    labels = y_true[::2, 0]
    vectors = K.l2_normalize(y_pred, axis=1)
    cosines = K.sum(vectors[::2] * vectors[1::2], axis=1) * SCALE
    ranked = K.cast(labels[:, None] > labels[None, :], K.floatx())
    differences = K.reshape(cosines[None, :] - cosines[:, None] - (1 - ranked) * 1e12, (-1,))
    return K.logsumexp(K.concatenate([K.zeros_like(cosines[:1]), differences], axis=0))  # the 1 is e^0


def pooled(bert, pooling: str, K, keras):
    """One vector per text from a bert4keras model: its ``[CLS]`` output, the mean over the tokens of its output
    (``mean``), or of its first and last blocks' outputs averaged (``first_last_avg``, BERT-whitening's); the mean
    over the tokens whose id is not 0."""
    if pooling == "cls":
        return keras.layers.Lambda(lambda x: x[:, 0])(bert.output)
    last = bert.output
    if pooling == "first_last_avg":
        last = keras.layers.Average()([bert.get_layer("Transformer-0-FeedForward-Norm").output, last])

    def masked_mean(inputs):
        x, token_ids = inputs
        mask = K.cast(K.not_equal(token_ids, 0), K.floatx())[:, :, None]
        return K.sum(x * mask, axis=1) / K.maximum(K.sum(mask, axis=1), 1.0)

    return keras.layers.Lambda(masked_mean)([last, bert.inputs[0]])


# ------------------------------------------------------------------------------------------- orchestrator
def describe(recipe: str, args) -> str:
    """What ``recipe`` trains with, for the table."""
    if recipe.startswith("bert4keras"):
        return f"bojone's CoSENT script: {pooling_of(recipe, args)} pooling, constant Adam"
    if recipe == "kerasbert-defaults":
        return "the defaults: first_last_avg, warmup 0.1, cosine, AdamW 0.01"
    return f"`{' '.join(kerasbert_flags(recipe, args))}`"


def table(results: dict, args) -> str:
    lines = [f"`python benchmarks/sim_recipe.py{args.command}` — `paraphrase_corpus` (train / dev "
             f"/ test {args.sizes} pairs, half positive, dev and test names unseen in training), a random checkpoint "
             f"of a 2-layer H-128 BERT, CoSENT (λ {SCALE:g}), {args.epochs} epochs, batch {BATCH} pairs, maxlen "
             f"{MAXLEN}, lr {args.lr:g}; bert4keras's pooling {args.b4k_pooling}. Test Spearman of the cosines with "
             f"the labels and accuracy at the best threshold, at the best dev Spearman epoch, "
             f"{len(args.seed_list)} seeds; Python {platform.python_version()}.",
             "", "| recipe | test Spearman mean | spread (min-max) | per seed | test accuracy mean | "
             "dev Spearman mean | best epochs | options |", "|---|---|---|---|---|---|---|---|"]
    for recipe, runs in results.items():
        test = [run["test"]["spearman"] for run in runs]
        accuracy = statistics.mean(run["test"]["accuracy"] for run in runs)
        dev = statistics.mean(run["dev_spearman"] for run in runs)
        lines.append(f"| {recipe} | {statistics.mean(test):.4f} | {min(test):.4f}-{max(test):.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in test)} | {accuracy:.4f} | {dev:.4f} | "
                     f"{', '.join(str(run['best_epoch']) for run in runs)} | {describe(recipe, args)} |")
    lines += ["", "Dev Spearman per epoch (each seed): " + "; ".join(
        f"{recipe} " + " / ".join(" ".join(f"{v:.3f}" for v in run["dev_curve"]) for run in runs)
        for recipe, runs in results.items())]
    return "\n".join(lines)


def main(argv=None) -> None:
    options = parser(__doc__, epochs=5, lr=1e-3, section="sim-recipe", recipes=RECIPES, ablations=ABLATIONS)
    options.add_argument("--b4k-pooling", choices=POOLINGS, default="first_last_avg",
                         help="the pooling of bert4keras's recipe, on both sides (default: %(default)s)")
    argv = sys.argv[1:] if argv is None else argv
    args = options.parse_args(argv)
    if args.worker:
        return run_worker(args.worker, bert4keras_worker)
    args.sizes = "64 / 16 / 16" if args.quick else "3,000 / 300 / 1,000"

    def run(recipe: str, paths: dict, seed: int, folder: str) -> dict:
        start = time.perf_counter()
        out = (run_bert4keras(recipe, paths, seed, folder, args) if recipe.startswith("bert4keras") else
               run_kerasbert(recipe, paths, seed, folder, args))
        return {**out, "summary": f"test Spearman {out['test']['spearman']:.4f}, accuracy "
                                  f"{out['test']['accuracy']:.4f} (dev {out['dev_spearman']:.4f}, epoch "
                                  f"{out['best_epoch']}; {time.perf_counter() - start:.0f} s)"}

    args.command = "".join(f" {arg}" for arg in shown_options(argv))
    run_benchmark(args, RECIPES, ABLATIONS, prepare, run,
                  f"Similarity recipes: test Spearman, kerasbert vs bert4keras, lr {args.lr:g}",
                  lambda results: table(results, args))


if __name__ == "__main__":
    main()
