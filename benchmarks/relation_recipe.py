"""Relation recipes side by side: triple F1 of kerasbert's ``--task relation`` and of bert4keras's GPLinker example
from the same random checkpoint.

The corpus is the relation demo's generator (`kerasbert.finetune.relation_demo_data`: people, organizations,
places and universities, the predicates 出生地, 工作单位, 位于 and 毕业院校, one or two triples a sentence or none),
seeded, as DuIE-style JSONL. Every run starts from one small random Google checkpoint (`recipes.CONFIG`) and trains
for ``--epochs`` epochs' worth of steps, batch 16, maxlen 64:

- ``kerasbert-defaults``: ``kerasbert train --task relation`` (GPLinker, head size 64, learning rate ``--lr``, warmup
  0.1 then cosine decay, AdamW with weight decay 0.01), the epoch with the best dev F1 scored on test by ``kerasbert
  evaluate``;
- ``bert4keras``: bert4keras 0.11.5 on tf-keras running ``tests/fixtures/bert4keras_examples/
  task_relation_extraction_gplinker.py``, the example ported as the compat tests run it (head size 16, heads drawn
  from a fixed generator, ``AdamEMA`` at 1e-3), in a worker process of its own: half of the steps in file order,
  then half shuffled, then its ``evaluate`` with the EMA weights on the test file. The EMA (momentum 0.999,
  bias-corrected) averages nearly every step of a run this short, the first ones included (the example's note: it
  needs 5000 steps and more), so at these sizes this side scores that average's lag as much as its model;
- ``bert4keras-no-ema`` (not in ``--quick``): the same with the EMA's evaluation off (the trained weights scored);
- ``kerasbert-b4k-recipe`` (not in ``--quick``): the kerasbert run above, but with ``--schedule constant --warmup 0
  --weight-decay 0``, Adam at a constant rate as the example;
- ``bert4keras-matched`` (not in ``--quick``): the like-for-like pair of ``kerasbert-b4k-recipe``, the ported example
  at that run's settings through the optional values of its ``data``: head size 64 (`kerasbert.finetune.relation.
  HEAD_SIZE`, the example's own), Adam at the constant ``--lr``, no weight decay, its EMA's evaluation off, the
  heads drawn by the layers' own initializer, ``--epochs`` epochs of the whole training file reshuffled each epoch
  (``fit`` on ``forfit()``, no batches in file order first), its Evaluator scoring dev after each epoch and keeping
  the best weights, which then score test (as kerasbert keeps and evaluates its best epoch by dev F1).

What still differs in that pair (neither ``kerasbert train`` nor the example's code takes a setting for it):

- the draws: both sides' heads are ``EfficientGlobalPointer`` Dense kernels from ``lecun_normal`` with zero biases,
  and both take dropout 0.1 from the checkpoint's config, but drawn by different generators from the same seed
  (tf-keras's, seeded through Python's ``random`` and TensorFlow's, against Keras 3's), and each epoch's shuffle is
  NumPy's (bert4keras's ``DataGenerator``) against tf.data's (kerasbert): the same kind of order, not the same one;
- the optimizer's epsilon: bert4keras's ``Adam`` adds 1e-6 to the root of the second moment, Keras 3's ``AdamW``
  (kerasbert's, at weight decay 0) 1e-7;
- padding: bert4keras pads a batch to its longest row, kerasbert too or, where its step is XLA-compiled, to the next
  length bucket; both mask the padding, so this changes rounding only.

Scores: triple-level precision, recall and F1 of (subject, predicate, object) strings per text (the example's
``evaluate`` compares the strings' word pieces, kerasbert the strings: the same here, one piece a character).

Usage:
    python benchmarks/relation_recipe.py           # 1 seed, 6 epochs: RESULTS.md, section relation-recipe
    python benchmarks/relation_recipe.py --seeds 2 # as RESULTS.md's figures: each recipe from seeds 0 and 1
    python benchmarks/relation_recipe.py --quick   # a small corpus, 1 epoch, 1 seed: checks that the recipes run
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from recipes import parser, random_checkpoint, run_benchmark, run_bert4keras_job, run_worker  # noqa: E402

RECIPES = ("kerasbert-defaults", "bert4keras")
ABLATIONS = ("bert4keras-no-ema", "kerasbert-b4k-recipe", "bert4keras-matched")  # not in --quick
MAXLEN, BATCH = 64, 16
SIZES = {False: (800, 100, 200), True: (32, 8, 8)}  # train / dev / test sentences; --quick's
FLAGS = {"kerasbert-b4k-recipe": {"schedule": "constant", "warmup": 0.0, "weight_decay": 0.0}}
TESTS = os.path.join(ROOT, "tests")
FIXTURE = os.path.join(TESTS, "fixtures", "bert4keras_examples")


def relation_data(folder: str, quick: bool) -> dict:
    """The corpus (``SIZES``), its schema (one ``{"predicate"}`` a line, as the example reads them) and the random
    checkpoint every run starts from."""
    from kerasbert.finetune.relation_demo_data import PREDICATES, write_relation_data

    n_train, n_dev, n_test = SIZES[quick]
    paths = write_relation_data(os.path.join(folder, "data"), seed=11, n_train=n_train, n_dev=n_dev, n_test=n_test)
    paths["schema"] = os.path.join(folder, "data", "schema.jsonl")
    with open(paths["schema"], "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"predicate": p}, ensure_ascii=False) + "\n" for p in sorted(PREDICATES))
    return {**paths, **random_checkpoint(folder, paths["vocab"])}


def steps_of(paths: dict, epochs: int) -> int:
    """The steps ``epochs`` epochs of the training file take at batch ``BATCH``."""
    with open(paths["train"], encoding="utf-8") as f:
        return epochs * math.ceil(sum(1 for line in f if line.strip()) / BATCH)


def run_kerasbert(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """Train in this process (best epoch by dev F1), score it on test with `kerasbert.evaluate`."""
    from kerasbert import evaluate, train

    run = os.path.join(folder, f"{recipe}-{seed}")
    result = train("relation", paths["train"], run, dev=paths["dev"], config=paths["config"],
                   checkpoint=paths["checkpoint"], vocab=paths["vocab"], epochs=args.epochs, batch_size=BATCH,
                   lr=args.lr, maxlen=MAXLEN, seed=seed, overwrite=True, verbose=0, **FLAGS.get(recipe, {}))
    test = evaluate(run, paths["test"], verbose=0)
    return {"test": {key: test[key] for key in ("precision", "recall", "f1")}, "dev_f1": result["dev"]["f1"],
            "steps": result["steps"]}


def bert4keras_worker(job: dict) -> dict:
    """The ported example under bert4keras: ``steps`` batches in file order, ``steps`` shuffled, then its evaluate on
    the test file; ``bert4keras-matched``: the ``data`` values of ``job["matched"]``, the best dev epoch on test."""
    import numpy as np
    import tensorflow as tf

    sys.path[:0] = [FIXTURE, TESTS]
    import oracle_examples  # the compat tests' runner of the ported examples: its tf-keras patches
    import task_relation_extraction_gplinker as example

    oracle_examples._patch_tf_keras()
    if not job["ema"]:
        _without_ema()
    random.seed(job["seed"])  # tf-keras seeds an unseeded initializer (the heads' lecun_normal) from this generator
    tf.random.set_seed(job["seed"])
    np.random.seed(job["seed"])
    files = {"train": job["train"], "valid": job["test"], "schema": job["schema"]}
    if job["matched"]:
        files.update(valid=job["dev"], test=job["test"], **job["matched"])
    out = example.run("bert4keras", job["config"], job["checkpoint"], job["vocab"], files, job["steps"],
                      maxlen=MAXLEN, batch_size=BATCH)
    f1, precision, recall = (float(value) for value in (out["test_scores"] if job["matched"] else out["scores"][-1]))
    dev = max(float(scores[0]) for scores in out["scores"]) if job["matched"] else None  # the Evaluator's best
    return {"test": {"precision": precision, "recall": recall, "f1": f1}, "dev_f1": dev,
            "steps": len(out["step_losses"]) + job["steps"] * len(out["scores"])}


def _without_ema() -> None:
    """``bert4keras-no-ema``: the example's ``AdamEMA`` evaluates with the trained weights, not their average."""
    from bert4keras import optimizers

    extend = optimizers.extend_with_exponential_moving_average

    def trained_weights(base, name=None):
        return type(name, (extend(base, name=name),), {"apply_ema_weights": lambda self, bias_correction=True: None,
                                                       "reset_old_weights": lambda self: None})

    optimizers.extend_with_exponential_moving_average = trained_weights


def run_bert4keras(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """bert4keras's side in a worker process (tf-keras), as many steps as kerasbert's: half of them in file order
    and half shuffled, or (``bert4keras-matched``) ``args.epochs`` epochs as kerasbert's."""
    from kerasbert.finetune.relation import HEAD_SIZE

    job = {**paths, "seed": seed, "steps": max(1, steps_of(paths, args.epochs) // 2), "ema": recipe == "bert4keras",
           "matched": None}
    if recipe == "bert4keras-matched":
        job.update(steps=steps_of(paths, 1), matched={"head_size": HEAD_SIZE, "learning_rate": args.lr,
                                                      "fixed_heads": False, "steps_in_order": 0, "epochs": args.epochs})
    return run_bert4keras_job(__file__, job, os.path.join(folder, f"{recipe}-{seed}.json"))


def table(results: dict, args) -> str:
    """RESULTS.md's table: per recipe, test F1 (mean, spread, per seed), test precision and recall, dev F1, steps."""
    sizes = " / ".join(f"{n:,}" for n in SIZES[args.quick])
    flags = " --quick" if args.quick else f" --seeds {args.seeds}" if args.seeds != 1 else ""
    lines = [f"`python benchmarks/relation_recipe.py{flags}` — the relation demo's "
             f"generator (train / dev / test {sizes}), a random checkpoint of a 2-layer H-128 BERT, {args.epochs} "
             f"epochs' steps, batch {BATCH}, maxlen {MAXLEN}; kerasbert: lr {args.lr:g}, head size 64; bert4keras: "
             f"the ported example (head size 16, AdamEMA 1e-3; bert4keras-matched: kerasbert-b4k-recipe's settings, "
             f"head size 64, Adam {args.lr:g}, no EMA, best dev epoch). Test triple F1 (subject, predicate, object "
             f"strings), {len(args.seed_list)} seed(s); Python {platform.python_version()}.", "",
             "| recipe | test F1 mean | spread (min-max) | per seed | test P / R mean | dev F1 mean | steps |",
             "|---|---|---|---|---|---|---|"]
    for recipe, runs in results.items():
        f1 = [run["test"]["f1"] for run in runs]
        precision, recall = (statistics.mean(run["test"][key] for run in runs) for key in ("precision", "recall"))
        dev = [run["dev_f1"] for run in runs if run["dev_f1"] is not None]
        lines.append(f"| {recipe} | {statistics.mean(f1):.4f} | {min(f1):.4f}-{max(f1):.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in f1)} | {precision:.4f} / {recall:.4f} | "
                     f"{f'{statistics.mean(dev):.4f}' if dev else '-'} | {runs[0]['steps']} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parser(__doc__, epochs=6, lr=2e-3, section="relation-recipe", recipes=RECIPES, ablations=ABLATIONS
                  ).parse_args(argv)
    if args.worker:
        return run_worker(args.worker, bert4keras_worker)
    if "--seeds" not in (argv or sys.argv):
        args.seeds = 1  # one run of every recipe fits in minutes on a CPU

    def run(recipe: str, paths: dict, seed: int, folder: str) -> dict:
        out = (run_bert4keras(recipe, paths, seed, folder, args) if recipe.startswith("bert4keras") else
               run_kerasbert(recipe, paths, seed, folder, args))
        return {**out, "summary": f"test F1 {out['test']['f1']:.4f} ({out['steps']} steps)"}

    run_benchmark(args, RECIPES, ABLATIONS, relation_data, run, "Relation recipes (GPLinker): triple F1, kerasbert vs "
                  "bert4keras", lambda results: table(results, args))


if __name__ == "__main__":
    main()
