"""Seq2seq recipes side by side: ROUGE-L of titles written by kerasbert and bert4keras from the same random checkpoint.

On `title_corpus`'s generated corpus (news paragraph -> title, dev and test names never seen in training) every run
starts from one small random Google checkpoint of a UniLM (``application="unilm"``: the MLM head predicts the next
target token) and trains for ``--epochs`` epochs (10), batch 32, maxlen 128, learning rate ``--lr`` (3e-3: at 1e-3
ten epochs leave every recipe short of its plateau, the defaults' decaying rate furthest); titles are written
greedily (bert4keras's beam search with ``topk=1``) up to 32 pieces, and the epoch with the best dev ROUGE-L is
scored on test with `kerasbert.finetune.metrics.generation_metrics` (ROUGE-1/2/L and BLEU on characters):

- ``kerasbert-defaults``: ``kerasbert train --task seq2seq`` with those four values and every other option at its
  default (warmup 0.1 then cosine decay, AdamW with weight decay 0.01, greedy decoding), scored on test by
  ``kerasbert evaluate``;
- ``bert4keras``: bert4keras 0.11.5 on tf-keras, its ``task_seq2seq_autotitle`` example's recipe (the model built
  with ``application='unilm'``, its ``CrossEntropy`` loss layer masked by the segment ids, Adam at a constant
  rate, an ``AutoRegressiveDecoder`` whose ``generate(text, topk=1)`` runs ``beam_search``), in a worker process of
  its own; the vocabulary is the corpus's, so no ``keep_tokens``. Adam is tf-keras's, as in ``ner_recipe``:
  bert4keras's own ``Adam`` is built on the optimizer class tf-keras 2.11+ moved to ``optimizers.legacy``;
- ``kerasbert-b4k-recipe`` (an ablation, not in ``--quick``): kerasbert with ``--schedule constant --warmup 0
  --weight-decay 0``, bert4keras's optimizer: what the defaults' schedule and weight decay are worth.

Each recipe runs once per seed (``--seeds``); the table gives the mean, the spread (min-max) and each seed's test
ROUGE-L, the mean ROUGE-1, ROUGE-2 and BLEU, and the best epochs, and is written to RESULTS.md's
``seq2seq-recipe`` section.

Usage:
    python benchmarks/seq2seq_recipe.py              # 3 seeds, 10 epochs, 3 recipes: RESULTS.md, seq2seq-recipe
    python benchmarks/seq2seq_recipe.py --quick      # a small corpus, 1 epoch, 1 seed: checks that the recipes run
    python benchmarks/seq2seq_recipe.py --recipes kerasbert-defaults,bert4keras --lr 1e-3 --seeds 5
"""

from __future__ import annotations

import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from recipes import check, parser, random_checkpoint, run_benchmark, run_worker  # noqa: E402

RECIPES = ("kerasbert-defaults", "bert4keras")
ABLATIONS = ("kerasbert-b4k-recipe",)
MAXLEN, TARGET_MAXLEN, BATCH = 128, 32, 32
KEYS = ("rouge_l", "rouge_1", "rouge_2", "bleu")
B4K_FLAGS = ["--schedule", "constant", "--warmup", "0", "--weight-decay", "0"]  # bert4keras's optimizer


def prepare(folder: str, quick: bool) -> dict:
    """The corpus, its vocabulary and the random UniLM checkpoint (with its MLM head) every run starts from."""
    from title_corpus import write_corpus

    sizes = {"n_train": 64, "n_dev": 16, "n_test": 16} if quick else {}
    paths = write_corpus(os.path.join(folder, "data"), **sizes)
    return {**paths, **random_checkpoint(folder, paths["vocab"], application="unilm")}


def kerasbert_flags(recipe: str) -> list[str]:
    """``kerasbert train`` options of ``recipe`` beyond the shared ones."""
    return B4K_FLAGS if recipe == "kerasbert-b4k-recipe" else []


def run_kerasbert(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """Train with the CLI (best epoch by dev ROUGE-L), score it on test with ``kerasbert evaluate``."""
    run = os.path.join(folder, f"{recipe}-{seed}")
    common = ["--task", "seq2seq", "--epochs", str(args.epochs), "--batch-size", str(BATCH), "--lr", str(args.lr),
              "--maxlen", str(MAXLEN), "--seed", str(seed), "--quiet", "--overwrite"]
    command = [sys.executable, "-m", "kerasbert", "train", "--config", paths["config"], "--checkpoint",
               paths["checkpoint"], "--vocab", paths["vocab"], "--train", paths["train"], "--dev", paths["dev"],
               "--out", run, *common, *kerasbert_flags(recipe)]
    check(subprocess.run(command, capture_output=True, text=True), recipe)
    check(subprocess.run([sys.executable, "-m", "kerasbert", "evaluate", run, "--data", paths["test"]],
                          capture_output=True, text=True), recipe)
    with open(os.path.join(run, "eval-test.json")) as f, open(os.path.join(run, "metrics.json")) as g:
        test, metrics = json.load(f), json.load(g)
    with open(os.path.join(run, "history.csv")) as f:
        curve = [float(row["val_rouge_l"]) for row in csv.DictReader(f)]
    return {"test": {key: test[key] for key in KEYS}, "dev_rouge_l": metrics["dev"]["rouge_l"],
            "best_epoch": metrics["best_epoch"], "dev_curve": curve}


def run_bert4keras(paths: dict, seed: int, folder: str, args) -> dict:
    """bert4keras's recipe in a worker process (tf-keras, ``TF_KERAS=1``)."""
    job = os.path.join(folder, f"bert4keras-{seed}.json")
    with open(job, "w") as f:
        json.dump({**paths, "seed": seed, "epochs": args.epochs, "lr": args.lr, "out": job + ".result"}, f)
    env = dict(os.environ, TF_KERAS="1", TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    check(subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", job], env=env, capture_output=True,
                          text=True), "bert4keras")
    with open(job + ".result") as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------- bert4keras worker
def bert4keras_worker(job: dict) -> dict:
    """bert4keras's task_seq2seq_autotitle on ``job``'s data: UniLM, CrossEntropy on the title, Adam, beam search."""
    import numpy as np
    import tensorflow as tf
    from bert4keras.backend import K, keras
    from bert4keras.layers import Loss
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import AutoRegressiveDecoder, sequence_padding
    from bert4keras.tokenizers import Tokenizer

    from kerasbert.finetune.metrics import generation_metrics  # after TensorFlow: leaves its oneDNN switch alone

    tf.random.set_seed(job["seed"])
    rng = np.random.default_rng(job["seed"])
    tokenizer = Tokenizer(job["vocab"], do_lower_case=True)
    data = {split: [json.loads(line) for line in open(job[split], encoding="utf-8")]
            for split in ("train", "dev", "test")}

    class CrossEntropy(Loss):
        """The example's loss: cross-entropy of each title token, the source masked out by the segment ids."""

        def compute_loss(self, inputs, mask=None):
            y_true, y_mask, y_pred = inputs
            y_true, y_mask, y_pred = y_true[:, 1:], y_mask[:, 1:], y_pred[:, :-1]
            loss = K.sparse_categorical_crossentropy(y_true, y_pred)
            return K.sum(loss * y_mask) / K.sum(y_mask)

    bert = build_transformer_model(job["config"], job["checkpoint"], application="unilm")
    model = keras.models.Model(bert.inputs, CrossEntropy(2)(bert.inputs + bert.outputs))
    model.compile(optimizer=keras.optimizers.Adam(job["lr"]))

    class AutoTitle(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            token_ids, segment_ids = inputs
            token_ids = np.concatenate([token_ids, output_ids], 1)
            segment_ids = np.concatenate([segment_ids, np.ones_like(output_ids)], 1)
            # the example's `.predict([...])`, one call without its per-call setup: the same probabilities
            return self.last_token(bert).predict_on_batch([token_ids, segment_ids])

        def generate(self, text, topk=1):
            token_ids, segment_ids = tokenizer.encode(text, maxlen=MAXLEN - self.maxlen)
            return tokenizer.decode(self.beam_search([token_ids, segment_ids], topk=topk))

    autotitle = AutoTitle(start_id=None, end_id=tokenizer._token_end_id, maxlen=TARGET_MAXLEN)
    train = [tokenizer.encode(row["source"], row["target"], maxlen=MAXLEN) for row in data["train"]]

    def score(split):
        titles = [autotitle.generate(row["source"], topk=1) for row in data[split]]
        return generation_metrics([row["target"] for row in data[split]], titles)

    best, weights, curve = -1.0, None, []
    for epoch in range(job["epochs"]):
        order = rng.permutation(len(train))
        for start in range(0, len(order), BATCH):
            batch = [train[i] for i in order[start:start + BATCH]]
            model.train_on_batch([sequence_padding([ids for ids, _ in batch]),
                                  sequence_padding([segments for _, segments in batch])])
        curve.append(score("dev")["rouge_l"])
        if curve[-1] > best:
            best, weights, best_epoch = curve[-1], model.get_weights(), epoch + 1
    model.set_weights(weights)
    test = score("test")
    return {"test": {key: test[key] for key in KEYS}, "dev_rouge_l": best, "best_epoch": best_epoch,
            "dev_curve": curve}


# ------------------------------------------------------------------------------------------- orchestrator
def describe(recipe: str) -> str:
    """What ``recipe`` trains with, for the table."""
    if recipe == "bert4keras":
        return "its task_seq2seq_autotitle: CrossEntropy on the title, constant Adam, beam search topk=1"
    if recipe == "kerasbert-b4k-recipe":
        return f"`{' '.join(kerasbert_flags(recipe))}`"
    return "the defaults: warmup 0.1, cosine, AdamW 0.01, greedy"


def table(results: dict, args) -> str:
    lines = [f"`python benchmarks/seq2seq_recipe.py{' --quick' if args.quick else ''}` — `title_corpus` (train / dev "
             f"/ test {args.sizes}, dev and test names unseen in training), a random checkpoint of a 2-layer H-128 "
             f"UniLM, {args.epochs} epochs, batch {BATCH}, maxlen {MAXLEN}, lr {args.lr:g}, titles of at most "
             f"{TARGET_MAXLEN} pieces written greedily. Test scores at the best dev ROUGE-L epoch (characters, "
             f"`generation_metrics`), {len(args.seed_list)} seeds; Python {platform.python_version()}.",
             "", "| recipe | test ROUGE-L mean | spread (min-max) | per seed | ROUGE-1 | ROUGE-2 | BLEU | "
             "dev ROUGE-L mean | best epochs | options |", "|---|---|---|---|---|---|---|---|---|---|"]
    for recipe, runs in results.items():
        test = [run["test"]["rouge_l"] for run in runs]
        means = {key: statistics.mean(run["test"][key] for run in runs) for key in KEYS}
        dev = statistics.mean(run["dev_rouge_l"] for run in runs)
        lines.append(f"| {recipe} | {means['rouge_l']:.4f} | {min(test):.4f}-{max(test):.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in test)} | {means['rouge_1']:.4f} | {means['rouge_2']:.4f} | "
                     f"{means['bleu']:.4f} | {dev:.4f} | {', '.join(str(run['best_epoch']) for run in runs)} | "
                     f"{describe(recipe)} |")
    lines += ["", "Dev ROUGE-L per epoch (each seed): " + "; ".join(
        f"{recipe} " + " / ".join(" ".join(f"{v:.3f}" for v in run["dev_curve"]) for run in runs)
        for recipe, runs in results.items())]
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parser(__doc__, epochs=10, lr=3e-3, section="seq2seq-recipe", recipes=RECIPES,
                  ablations=ABLATIONS).parse_args(argv)
    if args.worker:
        return run_worker(args.worker, bert4keras_worker)
    args.sizes = "64 / 16 / 16" if args.quick else "2,000 / 200 / 200"

    def run(recipe: str, paths: dict, seed: int, folder: str) -> dict:
        start = time.perf_counter()
        out = (run_bert4keras(paths, seed, folder, args) if recipe == "bert4keras" else
               run_kerasbert(recipe, paths, seed, folder, args))
        return {**out, "summary": f"test ROUGE-L {out['test']['rouge_l']:.4f} (dev {out['dev_rouge_l']:.4f}, epoch "
                                  f"{out['best_epoch']}; {time.perf_counter() - start:.0f} s)"}

    run_benchmark(args, RECIPES, ABLATIONS, prepare, run, "Seq2seq recipes: title ROUGE-L, kerasbert vs bert4keras",
                  lambda results: table(results, args))


if __name__ == "__main__":
    main()
