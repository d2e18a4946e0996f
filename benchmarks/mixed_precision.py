"""Mixed precision on the demo: ``kerasbert train --mixed-precision`` against float32, same data and seed.

For each demo task (cls, ner, ner with a CRF) this trains the tiny config as ``kerasbert demo`` does
(`kerasbert.finetune.demo_data.DEMO_TRAINING`): twice in float32, then with mixed precision (float16 on a GPU,
bfloat16 on a CPU). It reports each run's test score, how often its test predictions agree with the first
float32 run's (`benchmarks.precision.argmax_agreement`: one per example for cls, one per word for ner) and
how far apart their loss curves run (`benchmarks.precision.loss_gap`). The target is agreement >= 99.5 % with
close loss curves. Speed is not measured here (a tiny model says nothing about it): ``bench.py`` times the
``kerasbert-bf16`` / ``kerasbert-fp16`` workers on BERT-base.

Usage:
    python benchmarks/mixed_precision.py           # section mixed-precision-cpu (-cpu-amx, -cpu-avx512, -gpu)
    python benchmarks/mixed_precision.py --quick   # cls only, 1 epoch on 120 examples: checks that it runs
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.bench import cpu_text, machine_kind  # noqa: E402
from benchmarks.results import write_section  # noqa: E402

TASKS = {"cls": ("cls", False), "ner": ("ner", False), "ner-crf": ("ner", True)}
TARGET = 0.995


def compare(name: str, data: dict, folder: str, epochs: int) -> dict:
    """Train ``name`` in float32 twice and in mixed precision once; test scores, agreements, loss gaps.

    The second float32 run shows that a run repeats itself exactly, so what differs in the mixed run comes
    from its precision. (A change in summation order moves this too: before kerasbert's AdamW made an
    embedding's sparse gradient dense once instead of twice, the float32 ner run had 22 words of 1526 tagged
    otherwise.)
    """
    from benchmarks.precision import argmax_agreement, loss_gap
    from kerasbert.finetune.demo_data import DEMO_TRAINING
    from kerasbert.finetune.training import evaluate, train

    task, crf = TASKS[name]
    runs, scores = {}, {}
    for run in ("float32", "float32-again", "mixed"):
        runs[run] = os.path.join(folder, name, run)
        train(task, data[f"{task}_train"], runs[run], dev=data[f"{task}_dev"], vocab=data["vocab"], seed=0,
              crf=crf, mixed_precision=run == "mixed", verbose=0, **{**DEMO_TRAINING, "epochs": epochs})
        result = evaluate(runs[run], data[f"{task}_test"], verbose=0)
        scores[run] = result["accuracy"] if task == "cls" else result["f1"]
    return {run: {**argmax_agreement(runs["float32"], runs[run], data[f"{task}_test"]),
                  "loss_gap": loss_gap(runs["float32"], runs[run]), "score": scores[run]}
            for run in ("mixed", "float32-again")} | {"float32": {"score": scores["float32"]}}


def table(results: dict) -> str:
    rows = ["| task | test score: float32 / again / mixed | compared | differ: again / mixed | "
            "agreement: again / mixed | loss gap: again / mixed |", "|---|---|---:|---|---|---|"]
    for name, r in results.items():
        again, mixed = r["float32-again"], r["mixed"]
        met = "met" if mixed["agreement"] >= TARGET else "**missed**"
        rows.append(f"| {name} | {r['float32']['score']:.3f} / {again['score']:.3f} / {mixed['score']:.3f} | "
                    f"{mixed['compared']} | {again['differ']} / {mixed['differ']} | {again['agreement']:.2%} / "
                    f"{mixed['agreement']:.2%} ({met}) | {again['loss_gap']:.1%} / {mixed['loss_gap']:.1%} |")
    differ, compared = (sum(r["mixed"][key] for r in results.values()) for key in ("differ", "compared"))
    agreement, fewest = 1 - differ / max(1, compared), min(r["mixed"]["compared"] for r in results.values())
    rows.append(f"\nAll heads together: {differ} of {compared:,} predictions differ, agreement {agreement:.2%} "
                f"({'met' if agreement >= TARGET else '**missed**'}; one of a head's {fewest} predictions is "
                f"{1 / fewest:.2%}: a head of fewer than {math.ceil(1 / (1 - TARGET))} cannot resolve {TARGET:.1%}).")
    return "\n".join(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="cls only, 1 epoch on 120 examples")
    parser.add_argument("--results", default=None, help="markdown file to write (default benchmarks/RESULTS.md)")
    args = parser.parse_args(argv)
    import tensorflow as tf

    from kerasbert.finetune.demo_data import DEMO_TRAINING, write_demo_data
    from kerasbert.finetune.training import _mixed_policy

    folder = tempfile.mkdtemp(prefix="kerasbert-mixed-")
    sizes = {"n_train": 120, "n_dev": 30, "n_test": 30} if args.quick else {}
    data = write_demo_data(os.path.join(folder, "data"), **sizes)
    epochs = 1 if args.quick else DEMO_TRAINING["epochs"]
    results = {name: compare(name, data, folder, epochs) for name in (["cls"] if args.quick else TASKS)}
    device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    where = "GPU" if device == "gpu" else cpu_text()
    command = "python benchmarks/mixed_precision.py" + " --quick" * args.quick
    epochs_text = f"{epochs} epoch{'s' * (epochs != 1)}"
    text = (f"## Mixed precision on the demo: the same answers as float32?\n\n`{command}` — the tiny config "
            f"trained from scratch as `kerasbert demo` does ({epochs_text}), twice in float32 and once with "
            f"`--mixed-precision` ({_mixed_policy()} on this {device}: {where}), same data and seed; each compared "
            f"with the first float32 run. Agreement: equal argmax on the test set (cls: per example; ner: per word, "
            f"on its first piece); target >= {TARGET:.1%}. Loss gap: the largest gap between two runs' epoch "
            f"losses, as a share of the first epoch's loss. The second float32 run repeats the first exactly: the "
            f"mixed run's differences come from its precision.\n\n"
            f"{table(results)}\n")
    print(text)
    write_section(f"mixed-precision-{'quick' if args.quick else machine_kind(device)}", text,
                  args.results or os.path.join(HERE, "RESULTS.md"))


if __name__ == "__main__":
    main()
