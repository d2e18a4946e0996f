"""What int8 costs in accuracy: dev scores of each export against the run's own, on three tasks.

Trains three runs, exports each to OpenVINO and ONNX in float32 and int8 (``kerasbert export``, which scores
the export on the run's dev file), and tabulates the export's dev score against the run's:
- ``demo-cls``: the bundled sentiment demo, the tiny preset;
- ``demo-ner-crf``: the bundled NER demo with a CRF head, the tiny preset;
- ``corpus-ner-crf``: ``ner_corpus.py``'s generated corpus (long sentences, six entity types, unseen names in
  dev), the 2-layer BERT of ``ner_recipe.py`` from random weights.
The targets: int8 within 0.5 point of accuracy, and 0.01 of entity F1, of float32.

Usage:
    python benchmarks/serve_accuracy.py              # RESULTS.md, section serve-accuracy
    python benchmarks/serve_accuracy.py --quick      # small data, one epoch: checks that it runs
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

FORMATS = {"openvino": ("openvino", False), "openvino-int8": ("openvino", True), "onnx": ("onnx", False),
           "onnx-int8": ("onnx", True)}
METRIC = {"cls": "accuracy", "ner": "f1"}
TOLERANCE = {"cls": 0.005, "ner": 0.01}


def tasks(folder: str, quick: bool) -> dict:
    """``{name: (task, train options)}`` with their data written into ``folder``."""
    from ner_recipe import prepare

    from kerasbert.finetune.demo_data import write_demo_data

    demo = write_demo_data(os.path.join(folder, "demo"), **({"n_train": 200, "n_dev": 50} if quick else {}))
    corpus = prepare(os.path.join(folder, "corpus"), quick)
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
    }


def export_scores(run: str, folder: str) -> dict:
    """``{format: the export's dev scores}``, each export made by the CLI in a process of its own."""
    scores = {}
    for name, (fmt, int8) in FORMATS.items():
        out = os.path.join(folder, name)
        command = [sys.executable, "-m", "kerasbert", "export", run, out, "--format", fmt] + ["--int8"] * int8
        done = subprocess.run(command, capture_output=True, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        with open(os.path.join(out, "kerasbert-export.json"), encoding="utf-8") as f:
            scores[name] = json.load(f)["dev"]
    return scores


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, one epoch")
    parser.add_argument("--results", default=None, help="the markdown file to write (default RESULTS.md)")
    args = parser.parse_args(argv)
    from kerasbert import train

    folder = tempfile.mkdtemp(prefix="serve-accuracy-")
    rows = ["| task | metric | run | " + " | ".join(FORMATS) + " |", "|---|---|---|" + "---|" * len(FORMATS)]
    verdicts = []
    for name, (task, options) in tasks(folder, args.quick).items():
        run = os.path.join(folder, name)
        train_file = options.pop("train")
        result = train(task, train_file, run, **options)
        metric, run_score = METRIC[task], result["dev"][METRIC[task]]
        scores = export_scores(run, os.path.join(folder, name + "-exports"))
        rows.append(f"| {name} | dev {metric} | {run_score:.4f} | "
                    + " | ".join(f"{scores[f][metric]:.4f}" for f in FORMATS) + " |")
        for fmt in ("openvino-int8", "onnx-int8"):
            gap = run_score - scores[fmt][metric]  # shown as int8's score minus float32's
            verdicts.append(f"- {name}, {fmt}: within {TOLERANCE[task]:g} of float32: "
                            f"**{'met' if abs(gap) <= TOLERANCE[task] else 'missed'}** ({-gap:+.4f})")
    text = "\n".join([f"## int8 accuracy{' (quick)' if args.quick else ''}", "",
                      "Dev scores of the run (float32 Keras) and of each export, measured on the export.", "",
                      *rows, "", *verdicts])
    write_section("serve-accuracy-quick" if args.quick else "serve-accuracy", text,
                  **({"path": args.results} if args.results else {}))
    print(text)


if __name__ == "__main__":
    main()
