"""NER recipes side by side: entity F1 of kerasbert and bert4keras from the same random checkpoint.

On `ner_corpus`'s generated corpus (long sentences, six types, nested-looking and adjacent spans, test
names never seen in training) every run starts from one small random Google checkpoint and trains a
Dense + CRF tagger for ``--epochs`` epochs, batch 32, maxlen 64, learning rate ``--lr``; the epoch with the
best dev F1 is scored on test (entity level, character spans, at the same maxlen on every side):

- ``kerasbert defaults``: ``kerasbert train --task ner --crf`` with those four values and every other
  option at its default;
- ``kerasbert bert4keras recipe``: the same plus ``--schedule constant --warmup 0 --weight-decay 0
  --crf-lr-multiplier M`` (plain Adam at a constant rate, as bert4keras's NER example);
- ``bert4keras``: bert4keras 0.11.5 on tf-keras, its NER example's recipe (``Dense`` + its
  ``ConditionalRandomField(lr_multiplier=M)``, Adam at a constant rate, ``ViterbiDecoder`` with paths that
  start and end on ``O``), in a worker process of its own;
- ``kerasbert-crf-lr-N``: the defaults with ``--crf-lr-multiplier N``, to show what the default is worth.

Each recipe runs once per seed (``--seeds``); the table gives the mean, the spread (min-max) and each
seed's test F1, and is written to RESULTS.md's ``ner-recipe`` section.

Usage:
    python benchmarks/ner_recipe.py                    # 3 seeds, 5 epochs, 5 recipes: RESULTS.md, section ner-recipe
    python benchmarks/ner_recipe.py --quick            # a small corpus, 1 epoch, 1 seed: checks that the recipes run
    python benchmarks/ner_recipe.py --recipes kerasbert-defaults,kerasbert-crf-lr-10 --seeds 5
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
#: the defaults with another CRF multiplier: what the default is worth
ABLATIONS = ("kerasbert-crf-lr-1", "kerasbert-crf-lr-100")


def kerasbert_flags(recipe: str, args) -> list[str]:
    """``kerasbert train`` options of ``recipe`` beyond the shared ones."""
    if recipe == "kerasbert-b4k-recipe":
        return ["--schedule", "constant", "--warmup", "0", "--weight-decay", "0",
                "--crf-lr-multiplier", str(args.b4k_multiplier)]
    if recipe.startswith("kerasbert-crf-lr-"):
        return ["--crf-lr-multiplier", recipe.rsplit("-", 1)[1]]
    return [] if args.crf_lr_multiplier is None else ["--crf-lr-multiplier", str(args.crf_lr_multiplier)]


def run_kerasbert(recipe: str, paths: dict, seed: int, folder: str, args) -> dict:
    """Train with the CLI, score the best epoch on test with ``kerasbert evaluate``."""
    run = os.path.join(folder, f"{recipe}-{seed}")
    common = ["--task", "ner", "--crf", "--epochs", str(args.epochs), "--batch-size", "32", "--lr", str(args.lr),
              "--maxlen", "64", "--seed", str(seed), "--quiet", "--overwrite"]
    test, metrics = train_and_evaluate(paths, run, [*common, *kerasbert_flags(recipe, args)], recipe)
    return {"test_f1": test["f1"], "dev_f1": metrics["dev"]["f1"]}


def run_bert4keras(paths: dict, seed: int, folder: str, args) -> dict:
    """bert4keras's recipe in a worker process (tf-keras, ``TF_KERAS=1``)."""
    job = {**paths, "seed": seed, "epochs": args.epochs, "lr": args.lr, "multiplier": args.b4k_multiplier}
    return run_bert4keras_job(__file__, job, os.path.join(folder, f"bert4keras-{seed}.json"))


# ------------------------------------------------------------------------------------------- bert4keras worker
def entity_f1(gold: list, predicted: list) -> float:
    hits = sum(len(set(g) & set(p)) for g, p in zip(gold, predicted, strict=True))
    total = sum(len(set(g)) for g in gold) + sum(len(set(p)) for p in predicted)
    return 2 * hits / total if total else 0.0


def bert4keras_worker(job: dict) -> dict:
    """bert4keras's NER example on ``job``'s data: BIO label ids on characters, Dense + CRF, Adam, Viterbi."""
    import numpy as np
    import tensorflow as tf
    from bert4keras.backend import K, keras
    from bert4keras.layers import ConditionalRandomField
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import ViterbiDecoder, sequence_padding
    from bert4keras.tokenizers import Tokenizer

    tf.random.set_seed(job["seed"])
    rng = np.random.default_rng(job["seed"])
    tokenizer = Tokenizer(job["vocab"], do_lower_case=True)
    data = {split: read_spans(job[split]) for split in ("train", "dev", "test")}
    types = sorted({kind for _, spans in data["train"] for *_, kind in spans})

    def encode(text, spans=()):
        tokens = tokenizer.tokenize(text, maxlen=64)
        mapping = tokenizer.rematch(text, tokens)
        starts = {m[0]: i for i, m in enumerate(mapping) if m}
        ends = {m[-1]: i for i, m in enumerate(mapping) if m}
        labels = np.zeros(len(tokens), "int32")
        for start, end, kind in spans:
            if start in starts and end - 1 in ends:
                labels[starts[start]] = 2 * types.index(kind) + 1
                labels[starts[start] + 1:ends[end - 1] + 1] = 2 * types.index(kind) + 2
        return tokenizer.tokens_to_ids(tokens), labels, mapping

    bert = build_transformer_model(job["config"], job["checkpoint"])
    crf = ConditionalRandomField(lr_multiplier=job["multiplier"])
    model = keras.Model(bert.input, crf(keras.layers.Dense(2 * len(types) + 1)(bert.output)))
    model.compile(loss=crf.sparse_loss, optimizer=keras.optimizers.Adam(job["lr"]))
    train = [encode(text, spans)[:2] for text, spans in data["train"]]

    def recognize(split):
        encoded = [encode(text) for text, _ in data[split]]
        decoder = ViterbiDecoder(K.eval(crf.trans), starts=[0], ends=[0])
        predicted = []
        for start in range(0, len(encoded), 64):
            rows = encoded[start:start + 64]
            ids = sequence_padding([ids for ids, _, _ in rows])
            nodes = model.predict([ids, np.zeros_like(ids)], verbose=0)
            for (row_ids, _, mapping), emissions in zip(rows, nodes, strict=True):
                predicted.append(spans_of(decoder.decode(emissions[:len(row_ids)]), mapping))
        return entity_f1([spans for _, spans in data[split]], predicted)

    def spans_of(labels, mapping):
        entities, inside = [], False
        for i, label in enumerate(labels):
            if label and label % 2:
                entities.append([i, i, types[(label - 1) // 2]])
            elif label and inside:
                entities[-1][1] = i
            inside = bool(label) and (label % 2 == 1 or inside)
        return [(mapping[a][0], mapping[b][-1] + 1, kind) for a, b, kind in entities]

    best, weights = -1.0, None
    for _ in range(job["epochs"]):
        order = rng.permutation(len(train))
        for start in range(0, len(order), 32):
            batch = [train[i] for i in order[start:start + 32]]
            ids = sequence_padding([ids for ids, _ in batch])
            model.train_on_batch([ids, np.zeros_like(ids)], sequence_padding([labels for _, labels in batch]))
        f1 = recognize("dev")
        if f1 > best:
            best, weights = f1, model.get_weights()
    model.set_weights(weights)
    return {"dev_f1": best, "test_f1": recognize("test")}


# ------------------------------------------------------------------------------------------- orchestrator
def describe(recipe: str, args) -> str:
    """What ``recipe`` trains with, for the table."""
    if recipe == "bert4keras":
        return f"its NER example: CRF lr_multiplier {args.b4k_multiplier:g}, constant Adam"
    if recipe == "kerasbert-b4k-recipe":
        return f"`{' '.join(kerasbert_flags(recipe, args))}`"
    flags = kerasbert_flags(recipe, args)
    return "the defaults" + (f", `{' '.join(flags)}`" if flags else "")


def table(results: dict, args) -> str:
    import kerasbert.choices

    lines = [f"`python benchmarks/ner_recipe.py{' --quick' if args.quick else ''}` — `ner_corpus` (train / dev / "
             f"test {args.sizes}), a random checkpoint of a 2-layer H-128 BERT, Dense + CRF, {args.epochs} epochs, "
             f"batch 32, maxlen 64, lr {args.lr:g}; bert4keras's recipe with CRF lr_multiplier "
             f"{args.b4k_multiplier:g}; kerasbert defaults: CRF lr multiplier "
             f"{args.crf_lr_multiplier or kerasbert.choices.CRF_LR_MULTIPLIER:g}, warmup 0.1, cosine, AdamW 0.01. "
             f"Test entity F1 at the best dev epoch, {len(args.seed_list)} seeds; Python {platform.python_version()}.",
             "", "| recipe | test F1 mean | spread (min-max) | per seed | dev F1 mean | options |",
             "|---|---|---|---|---|---|"]
    for recipe, runs in results.items():
        test = [run["test_f1"] for run in runs]
        dev = [run["dev_f1"] for run in runs]
        lines.append(f"| {recipe} | {statistics.mean(test):.4f} | {min(test):.4f}-{max(test):.4f} | "
                     f"{', '.join(f'{v:.4f}' for v in test)} | {statistics.mean(dev):.4f} | {describe(recipe, args)} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    options = parser(__doc__, epochs=5, lr=1e-3, section="ner-recipe", recipes=RECIPES, ablations=ABLATIONS)
    options.add_argument("--b4k-multiplier", type=float, default=1000.0,
                         help="the CRF lr_multiplier of bert4keras's recipe (its NER example's)")
    options.add_argument("--crf-lr-multiplier", type=float, help="kerasbert-defaults: this instead of the default")
    args = options.parse_args(argv)
    if args.worker:
        return run_worker(args.worker, bert4keras_worker)
    args.sizes = " / ".join(f"{n:,}" for n in NER_SIZES[args.quick])

    def run(recipe: str, paths: dict, seed: int, folder: str) -> dict:
        out = (run_bert4keras(paths, seed, folder, args) if recipe == "bert4keras" else
               run_kerasbert(recipe, paths, seed, folder, args))
        return {**out, "summary": f"test F1 {out['test_f1']:.4f} (dev {out['dev_f1']:.4f})"}

    run_benchmark(args, RECIPES, ABLATIONS, ner_data, run, "NER recipes: entity F1, kerasbert vs bert4keras",
                  lambda results: table(results, args))


if __name__ == "__main__":
    main()
