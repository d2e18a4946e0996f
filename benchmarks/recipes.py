"""What the recipe benchmarks (``ner_recipe.py``, ``span_recipe.py``, ``seq2seq_recipe.py``) share: one random
checkpoint every run starts from, their command line, a kerasbert run and a bert4keras worker process, the NER
corpus's spans, and the loop over seeds and recipes.

Each benchmark gives its own corpus, its kerasbert and bert4keras runs (bert4keras's in a worker process of the
same script, on tf-keras) and its table; `run_benchmark` runs every recipe once per seed and writes the table to a
section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))

#: a small BERT (2 layers, H 128): trains from random weights in a few minutes on 2 CPU cores
CONFIG = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512,
          "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 128, "type_vocab_size": 2, "initializer_range": 0.02}
#: ``ner_corpus``'s train / dev / test sentences: the full benchmark's (``ner_data(..., quick=False)``), ``--quick``'s
NER_SIZES = {False: (4000, 500, 1000), True: (64, 16, 16)}


def random_checkpoint(folder: str, vocab: str, **build) -> dict:
    """A Google checkpoint of `CONFIG` with ``vocab``'s size, random weights (seed 0), in ``folder/checkpoint``;
    ``build`` goes to ``build_transformer_model`` (``application="unilm"``). Returns ``checkpoint`` and ``config``."""
    import keras

    from kerasbert import build_transformer_model, save_google_checkpoint
    from kerasbert.modeling.config import BertConfig

    vocab_size = sum(1 for line in open(vocab, encoding="utf-8") if line.strip())
    config = dict(CONFIG, vocab_size=vocab_size)
    keras.utils.set_random_seed(0)
    model = build_transformer_model(config=BertConfig.from_dict(config), verbose=False, **build)
    checkpoint = os.path.join(folder, "checkpoint")
    os.makedirs(checkpoint, exist_ok=True)
    paths = {"checkpoint": save_google_checkpoint(model, os.path.join(checkpoint, "bert_model.ckpt")),
             "config": os.path.join(checkpoint, "bert_config.json")}
    with open(paths["config"], "w") as f:
        json.dump(config, f)
    return paths


def ner_data(folder: str, quick: bool) -> dict:
    """``ner_corpus``'s files in ``folder/data`` (``NER_SIZES``: ``--quick``'s or the full benchmark's), and the random
    checkpoint every NER run starts from."""
    from ner_corpus import write_corpus

    n_train, n_dev, n_test = NER_SIZES[quick]
    paths = write_corpus(os.path.join(folder, "data"), n_train=n_train, n_dev=n_dev, n_test=n_test)
    return {**paths, **random_checkpoint(folder, paths["vocab"])}


def check(process: subprocess.CompletedProcess, what: str) -> None:
    """A RuntimeError with the end of its stderr when a recipe's process failed."""
    if process.returncode:
        raise RuntimeError(f"{what} failed:\n{process.stderr[-3000:]}")


def train_and_evaluate(paths: dict, run: str, options: list[str], what: str) -> tuple[dict, dict]:
    """``kerasbert train`` from ``paths``'s checkpoint on its train and dev files into ``run`` with ``options``, then
    ``kerasbert evaluate`` of the best epoch on its test file: the test scores and the run's ``metrics.json``."""
    command = [sys.executable, "-m", "kerasbert", "train", "--config", paths["config"], "--checkpoint",
               paths["checkpoint"], "--vocab", paths["vocab"], "--train", paths["train"], "--dev", paths["dev"],
               "--out", run, *options]
    check(subprocess.run(command, capture_output=True, text=True), what)
    check(subprocess.run([sys.executable, "-m", "kerasbert", "evaluate", run, "--data", paths["test"]],
                          capture_output=True, text=True), what)
    with open(os.path.join(run, "eval-test.json")) as f, open(os.path.join(run, "metrics.json")) as g:
        return json.load(f), json.load(g)


def run_bert4keras_job(script: str, job: dict, path: str) -> dict:
    """``job`` written to ``path`` and run by ``script --worker`` in a process of its own (tf-keras: ``TF_KERAS=1``,
    ``TF_USE_LEGACY_KERAS=1``); the result it writes to ``path.result``."""
    with open(path, "w") as f:
        json.dump({**job, "out": path + ".result"}, f)
    env = dict(os.environ, TF_KERAS="1", TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    check(subprocess.run([sys.executable, os.path.abspath(script), "--worker", path], env=env, capture_output=True,
                          text=True), "bert4keras")
    with open(path + ".result") as f:
        return json.load(f)


def read_spans(path: str) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """``(text, [(start, end, type)])`` of each sentence of a BMES CoNLL file (end exclusive), read without
    kerasbert: the bert4keras workers' reader of ``ner_corpus``'s files."""
    sentences, chars, spans = [], [], []
    for line in [*open(path, encoding="utf-8"), ""]:
        if not line.strip():
            if chars:
                sentences.append(("".join(chars), spans))
            chars, spans = [], []
            continue
        char, tag = line.split()
        if tag[0] in "BS":
            spans.append([len(chars), len(chars) + 1, tag[2:]])
        elif tag[0] in "ME":
            spans[-1][1] = len(chars) + 1
        chars.append(char)
    return [(text, [tuple(span) for span in found]) for text, found in sentences]


def parser(doc: str, epochs: int, lr: float, section: str, recipes: tuple, ablations: tuple) -> argparse.ArgumentParser:
    """The options every recipe benchmark takes; a benchmark adds its own."""
    parsed = argparse.ArgumentParser(description=doc.split("\n")[0])
    parsed.add_argument("--seeds", type=int, default=3)
    parsed.add_argument("--epochs", type=int, default=epochs)
    parsed.add_argument("--lr", type=float, default=lr)
    parsed.add_argument("--recipes", help=f"comma-separated (default: {','.join(recipes + ablations)}; "
                                          f"--quick: {','.join(recipes)})")
    parsed.add_argument("--quick", action="store_true")
    parsed.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    parsed.add_argument("--section", default=section)
    parsed.add_argument("--worker", help=argparse.SUPPRESS)
    return parsed


def run_worker(path: str, worker: Callable[[dict], dict]) -> None:
    """The bert4keras side: ``worker`` on the job at ``path``, its result written to the job's ``out``."""
    with open(path) as f:
        job = json.load(f)
    result = worker(job)
    with open(job["out"], "w") as f:
        json.dump(result, f)


def run_benchmark(args, recipes: tuple, ablations: tuple, prepare: Callable[[str, bool], dict],
                  run: Callable[[str, dict, int, str], dict], title: str,
                  table: Callable[[dict], str]) -> None:
    """Every recipe of ``args.recipes`` (default: ``recipes`` and ``ablations``; ``--quick``: ``recipes``, one seed,
    one epoch) once per seed, ``run(recipe, paths, seed, folder)`` each, on the corpus ``prepare`` writes; the
    ``table`` of their results under ``title``, printed and written to ``args.section`` of ``args.results``."""
    from results import write_section

    if args.quick:
        args.seeds, args.epochs = 1, 1
    args.recipes = args.recipes or ",".join(recipes if args.quick else recipes + ablations)
    args.seed_list = list(range(args.seeds))
    with tempfile.TemporaryDirectory() as folder:
        paths = prepare(folder, args.quick)
        results: dict[str, list[dict]] = {recipe: [] for recipe in args.recipes.split(",")}
        for seed in args.seed_list:
            for recipe in results:
                results[recipe].append(run(recipe, paths, seed, folder))
                print(f"{recipe} seed {seed}: {results[recipe][-1]['summary']}", flush=True)
    text = f"## {title}\n\n" + table(results)
    print(text)
    write_section(args.section, text, args.results)
