"""Span recipes side by side: entity F1 of kerasbert's and bert4keras's GlobalPointer from the same random checkpoint.

On `ner_corpus`'s generated corpus (the NER recipes' corpus: long sentences, six types, nested-looking and adjacent
spans, test names never seen in training) every run starts from one small random Google checkpoint and trains a
GlobalPointer (one head of size 64 per type, rotary positions) with the multilabel categorical cross-entropy for
``--epochs`` epochs, batch 32, maxlen 64, learning rate ``--lr``; a span is predicted where its logit is > 0, [CLS] and
[SEP] excluded, and read back to character offsets. The epoch with the best dev F1 is scored on test by
`kerasbert.finetune.metrics.entity_metrics` (exact start, end and type; the same function on every side):

- ``kerasbert-defaults``: ``kerasbert train --task span`` with those four values and every other option at its
  default (warmup 0.1 then cosine decay, AdamW with weight decay 0.01), scored on test by ``kerasbert evaluate``;
- ``kerasbert-b4k-recipe``: the same plus ``--schedule constant --warmup 0 --weight-decay 0``, bert4keras's Adam at
  a constant rate;
- ``bert4keras``: bert4keras 0.11.5 on tf-keras, its GlobalPointer NER example's recipe (label cubes ``[types,
  start, end]`` padded per batch, ``GlobalPointer(types, 64)`` on the encoder's output, the mean
  ``multilabel_categorical_crossentropy`` of each (example, type), Adam at a constant rate), in a worker process of
  its own. Adam is tf-keras's with bert4keras's epsilon 1e-6, as in ``ner_recipe``: bert4keras's own is built on the
  optimizer class tf-keras 2.11+ moved to ``optimizers.legacy``;
- ablations (not in ``--quick``): ``kerasbert-constant``, the defaults with ``--schedule constant`` (warmup and
  weight decay kept), and ``kerasbert-no-warmup``, the defaults with ``--warmup 0``: which part of the defaults'
  optimizer moves the score.

Each recipe runs once per seed (``--seeds``); the table gives the mean, the spread (min-max) and each seed's test
F1, the mean test precision and recall, the mean dev F1 and the best epochs, and is written to RESULTS.md's
``span-recipe`` section.

Usage:
    python benchmarks/span_recipe.py              # 3 seeds, 5 epochs, every recipe: RESULTS.md, section span-recipe
    python benchmarks/span_recipe.py --quick      # a small corpus, 1 epoch, 1 seed: checks that the recipes run
    python benchmarks/span_recipe.py --recipes kerasbert-defaults,bert4keras --lr 3e-3 --seeds 5
"""

from __future__ import annotations

import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from recipes import (  # noqa: E402
    NER_SIZES,
    ner_data,
    parser,
    read_spans,
    run_benchmark,
    run_bert4keras_job,
    run_worker,
    train_and_evaluate,
)

RECIPES = ("kerasbert-defaults", "kerasbert-b4k-recipe", "bert4keras")
ABLATIONS = ("kerasbert-constant", "kerasbert-no-warmup")
MAXLEN, BATCH, HEAD_SIZE = 64, 32, 64
FLAGS = {"kerasbert-b4k-recipe": ["--schedule", "constant", "--warmup", "0", "--weight-decay", "0"],
         "kerasbert-constant": ["--schedule", "constant"], "kerasbert-no-warmup": ["--warmup", "0"]}
SPLITS = ("train", "dev", "test")


def run_kerasbert(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """Train with the CLI (best epoch by dev F1), score it on test with ``kerasbert evaluate``."""
    common = ["--task", "span", "--epochs", str(args.epochs), "--batch-size", str(BATCH), "--lr", str(args.lr),
              "--maxlen", str(MAXLEN), "--seed", str(seed), "--quiet", "--overwrite"]
    test, metrics = train_and_evaluate(paths, os.path.join(folder, f"{recipe}-{seed}"),
                                       [*common, *FLAGS.get(recipe, [])], recipe)
    return {"test": {key: test[key] for key in ("precision", "recall", "f1")}, "dev_f1": metrics["dev"]["f1"],
            "best_epoch": metrics["best_epoch"]}


def run_bert4keras(paths: dict, seed: int, folder: str, args) -> dict:
    """bert4keras's recipe in a worker process (tf-keras, ``TF_KERAS=1``)."""
    job = {**paths, "seed": seed, "epochs": args.epochs, "lr": args.lr}
    return run_bert4keras_job(__file__, job, os.path.join(folder, f"bert4keras-{seed}.json"))


# ------------------------------------------------------------------------------------------- bert4keras worker
def b4k_encode(tokenizer, text: str, spans, types: list[str]):
    """The example's encoding: token ids, the label cube ``[types, start, end]`` (1 on each span whose first and last
    characters start and end a token) and each token's characters (``rematch``)."""
    import numpy as np

    tokens = tokenizer.tokenize(text, maxlen=MAXLEN)
    mapping = tokenizer.rematch(text, tokens)
    starts = {chars[0]: i for i, chars in enumerate(mapping) if chars}
    ends = {chars[-1]: i for i, chars in enumerate(mapping) if chars}
    cube = np.zeros((len(types), len(tokens), len(tokens)))
    for start, end, kind in spans:
        if start in starts and end - 1 in ends:
            cube[types.index(kind), starts[start], ends[end - 1]] = 1
    return tokenizer.tokens_to_ids(tokens), cube, mapping


def b4k_model(job: dict, heads: int):
    """The example's model: ``GlobalPointer(heads, 64)`` on the encoder, its loss, Adam at a constant rate."""
    from bert4keras.backend import K, keras, multilabel_categorical_crossentropy
    from bert4keras.layers import GlobalPointer
    from bert4keras.models import build_transformer_model

    def global_pointer_crossentropy(y_true, y_pred):
        """Each (example, type) flattened to one row of spans; the mean multilabel cross-entropy of the rows."""
        rows = K.prod(K.shape(y_pred)[:2])
        return K.mean(multilabel_categorical_crossentropy(K.reshape(y_true, (rows, -1)),
                                                          K.reshape(y_pred, (rows, -1))))

    bert = build_transformer_model(job["config"], job["checkpoint"])
    model = keras.models.Model(bert.input, GlobalPointer(heads, HEAD_SIZE)(bert.output))
    model.compile(loss=global_pointer_crossentropy, optimizer=keras.optimizers.Adam(job["lr"], epsilon=1e-6))
    return model


def b4k_scores(model, tokenizer, sentences: list, types: list[str]) -> dict:
    """`entity_metrics` of the spans scored > 0 ([CLS] and [SEP] excluded), as character spans, end exclusive."""
    import numpy as np
    from bert4keras.snippets import sequence_padding

    from kerasbert.finetune.metrics import entity_metrics  # after TensorFlow: leaves its oneDNN switch alone

    encoded, predicted = [b4k_encode(tokenizer, text, (), types) for text, _ in sentences], []
    for first in range(0, len(encoded), 64):
        rows = encoded[first:first + 64]
        ids = sequence_padding([row_ids for row_ids, _, _ in rows])
        for (row_ids, _, mapping), logits in zip(rows, model.predict([ids, np.zeros_like(ids)], verbose=0),
                                                 strict=True):
            inner = logits[:, 1:len(row_ids) - 1, 1:len(row_ids) - 1]  # (types, start, end) over the text's tokens
            predicted.append([(mapping[i + 1][0], mapping[j + 1][-1] + 1, types[k])
                              for k, i, j in zip(*np.nonzero(inner > 0), strict=True)])
    return entity_metrics([spans for _, spans in sentences], predicted)


def bert4keras_worker(job: dict) -> dict:
    """bert4keras's GlobalPointer NER example on ``job``'s data, the epoch with the best dev F1 scored on test."""
    import numpy as np
    import tensorflow as tf
    from bert4keras.snippets import sequence_padding
    from bert4keras.tokenizers import Tokenizer

    tf.random.set_seed(job["seed"])
    rng = np.random.default_rng(job["seed"])
    tokenizer = Tokenizer(job["vocab"], do_lower_case=True)
    data = {split: read_spans(job[split]) for split in SPLITS}
    types = sorted({kind for _, spans in data["train"] for *_, kind in spans})
    train = [b4k_encode(tokenizer, text, spans, types)[:2] for text, spans in data["train"]]
    model = b4k_model(job, len(types))
    best, weights = {"f1": -1.0}, None
    for epoch in range(1, job["epochs"] + 1):
        order = rng.permutation(len(train))
        for first in range(0, len(order), BATCH):
            batch = [train[i] for i in order[first:first + BATCH]]
            ids = sequence_padding([ids for ids, _ in batch])
            model.train_on_batch([ids, np.zeros_like(ids)], sequence_padding([cube for _, cube in batch], seq_dims=3))
        dev = b4k_scores(model, tokenizer, data["dev"], types)
        if dev["f1"] > best["f1"]:
            best, weights = {**dev, "epoch": epoch}, model.get_weights()
    model.set_weights(weights)
    test = b4k_scores(model, tokenizer, data["test"], types)
    return {"test": {key: test[key] for key in ("precision", "recall", "f1")}, "dev_f1": best["f1"],
            "best_epoch": best["epoch"]}


# ------------------------------------------------------------------------------------------- orchestrator
def describe(recipe: str, args) -> str:
    """What ``recipe`` trains with, for the table."""
    if recipe == "bert4keras":
        return "its GlobalPointer NER example: constant Adam"
    flags = FLAGS.get(recipe)
    return f"`{' '.join(flags)}`" if recipe == "kerasbert-b4k-recipe" else (
        "the defaults" + (f", `{' '.join(flags)}`" if flags else ""))


def table(results: dict, args) -> str:
    """RESULTS.md's table: per recipe, test F1 (mean, spread, per seed), test precision and recall, dev F1, epochs."""
    sizes = " / ".join(f"{n:,}" for n in NER_SIZES[args.quick])
    lines = [f"`python benchmarks/span_recipe.py{' --quick' if args.quick else ''}` — `ner_corpus` (train / dev / "
             f"test {sizes}), a random checkpoint of a 2-layer H-128 BERT, GlobalPointer (head size {HEAD_SIZE}, "
             f"RoPE), {args.epochs} epochs, batch {BATCH}, maxlen {MAXLEN}, lr {args.lr:g}; kerasbert defaults: "
             f"warmup 0.1, cosine, AdamW 0.01. Test entity F1 (exact character spans, "
             f"`kerasbert.finetune.metrics.entity_metrics` on every side) at the best dev epoch, "
             f"{len(args.seed_list)} seeds; Python {platform.python_version()}.",
             "", "| recipe | test F1 mean | spread (min-max) | per seed | test P / R mean | dev F1 mean | best epochs "
             "| options |", "|---|---|---|---|---|---|---|---|"]
    for recipe, runs in results.items():
        f1 = [run["test"]["f1"] for run in runs]
        precision, recall = (statistics.mean(run["test"][key] for run in runs) for key in ("precision", "recall"))
        lines.append(f"| {recipe} | {statistics.mean(f1):.4f} | {min(f1):.4f}-{max(f1):.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in f1)} | {precision:.4f} / {recall:.4f} | "
                     f"{statistics.mean(run['dev_f1'] for run in runs):.4f} | "
                     f"{', '.join(str(run['best_epoch']) for run in runs)} | {describe(recipe, args)} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parser(__doc__, epochs=5, lr=1e-3, section="span-recipe", recipes=RECIPES, ablations=ABLATIONS
                  ).parse_args(argv)
    if args.worker:
        return run_worker(args.worker, bert4keras_worker)

    def run(recipe: str, paths: dict, seed: int, folder: str) -> dict:
        out = (run_bert4keras(paths, seed, folder, args) if recipe == "bert4keras" else
               run_kerasbert(recipe, paths, seed, folder, args))
        return {**out, "summary": f"test F1 {out['test']['f1']:.4f} (dev {out['dev_f1']:.4f}, "
                                  f"epoch {out['best_epoch']})"}

    run_benchmark(args, RECIPES, ABLATIONS, ner_data, run, "Span recipes (GlobalPointer): entity F1, kerasbert vs "
                  "bert4keras", lambda results: table(results, args))


if __name__ == "__main__":
    main()
