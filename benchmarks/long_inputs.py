"""Long inputs: the memory of one ModernBERT forward pass at 8,192 tokens, and the share its attention scores take.

ModernBERT-base's shape (22 layers, H 768, I 1152, 12 heads, a vocabulary of 50,368, global attention every third
layer, a local window of 128) with random weights, one row of 8,192 tokens through ``predict``, in a worker
process of its own: its peak RSS after the model is built and traced at 64 tokens (the baseline), and after the
long forward pass. Two forms of the attention:

    kerasbert   local layers chunk by chunk ([B, A, S/64, 64, 192] scores), global layers 1,024 queries at a time
                ([B, A, 1024, S]): `kerasbert.modeling.modernbert_layers`
    whole       every layer's scores as one [B, A, S, S] tensor, the keys past a local window masked (the plain form)

The whole form is run at ``--compare`` tokens (2,048: its 8,192-token scores alone take 3 GiB a tensor); both
forms' outputs there are compared. The scores' share is computed from their sizes: the scores and probabilities
of the largest layer (float32), over the forward pass's RSS above the baseline.

Usage:
    python benchmarks/long_inputs.py              # 8,192 tokens, the whole form at 2,048: RESULTS.md, long-inputs-*
    python benchmarks/long_inputs.py --quick      # a small model, 1,500 and 1,200 tokens: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks.results import RESULTS, write_section  # noqa: E402

BASE = {"model_type": "modernbert", "vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152,
        "num_hidden_layers": 22, "num_attention_heads": 12, "max_position_embeddings": 8192, "local_attention": 128,
        "global_attn_every_n_layers": 3, "pad_token_id": 50283, "norm_eps": 1e-5}
QUICK = {**BASE, "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
         "num_attention_heads": 4, "max_position_embeddings": 2048, "local_attention": 16, "pad_token_id": 999}
FORMS = ("kerasbert", "whole")


def peak_mb() -> float:
    """This process's peak RSS so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def whole_form() -> None:
    """Every attention as one ``[B, A, S, S]`` tensor: no query blocks, the local window as a mask."""
    from keras import ops

    from kerasbert.modeling import modernbert_layers as layers

    def windowed(self, q, k, v, padding, training):
        positions = ops.arange(ops.shape(q)[2])
        band = ops.abs(positions[:, None] - positions[None]) <= self.window
        seen = ops.logical_and(padding[:, None, None, :], band)
        return self.attend(q, k, v, seen, training=training)

    layers.QUERY_BLOCK = 1 << 30
    layers.WindowedSelfAttention._windowed = windowed


def worker(config: dict, form: str, length: int, out: str | None) -> dict:
    """Build, trace at 64 tokens, run one ``length``-token row: RSS before and after, seconds, the output."""
    import numpy as np

    if form == "whole":
        whole_form()
    import keras

    from kerasbert import build_transformer_model

    keras.utils.set_random_seed(0)  # the same weights in every worker
    model = build_transformer_model(config=config, verbose=False)
    rng = np.random.default_rng(0)
    model.predict(rng.integers(0, config["pad_token_id"], (1, 64)).astype("int32"), verbose=0)
    baseline = peak_mb()
    ids = rng.integers(0, config["pad_token_id"], (1, length)).astype("int32")
    start = time.perf_counter()
    output = model.predict(ids, verbose=0)
    seconds = time.perf_counter() - start
    if out:
        np.save(out, output)
    return {"form": form, "length": length, "baseline_mb": baseline, "peak_mb": peak_mb(), "seconds": seconds}


def run_worker(config: dict, form: str, length: int, out: str | None = None) -> dict:
    """`worker` in a process of its own, so that its peak RSS is its own."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", form, "--length", str(length),
               "--config", json.dumps(config)] + (["--out", out] if out else [])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{form} at {length} tokens failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def score_bytes(config: dict, form: str, length: int, local: bool) -> int:
    """The float32 scores and probabilities of one layer's attention, batch 1."""
    from kerasbert.modeling.modernbert_layers import QUERY_BLOCK

    heads, window = config["num_attention_heads"], config["local_attention"] // 2
    keys = length if form == "whole" or not local else 3 * window
    queries = length if form == "whole" or local else min(length, QUERY_BLOCK)
    return 2 * 4 * heads * queries * keys


def report(config: dict, runs: list[dict], difference: float, quick: bool) -> str:
    """The RESULTS.md section: a row per run, the scores' share, the two forms' difference."""
    mib = 1 << 20
    lines = ["## Long inputs: ModernBERT's forward pass", "",
             f"`python benchmarks/long_inputs.py{' --quick' if quick else ''}` — {config['num_hidden_layers']} "
             f"layers, H {config['hidden_size']}, I {config['intermediate_size']}, {config['num_attention_heads']} "
             f"heads, V {config['vocab_size']}, local window {config['local_attention']}, random weights; one row, "
             f"`predict`, float32, a worker process a run. Baseline: peak RSS once built and traced at 64 tokens.",
             "", "| form | tokens | baseline MB | peak RSS MB | forward MB | s | largest scores MB | share |",
             "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        forward = run["peak_mb"] - run["baseline_mb"]
        largest = max(score_bytes(config, run["form"], run["length"], local) for local in (False, True)) / mib
        lines.append(f"| {run['form']} | {run['length']:,} | {run['baseline_mb']:,.0f} | {run['peak_mb']:,.0f} | "
                     f"{forward:,.0f} | {run['seconds']:.1f} | {largest:,.0f} | {largest / max(forward, 1):.0%} |")
    length = max(run["length"] for run in runs)
    whole = score_bytes(config, "whole", length, False) / mib
    lines += ["", f"Largest scores: one layer's float32 scores and probabilities (batch 1); share: that over the "
              f"forward pass's RSS above the baseline. The whole [S, S] form at {length:,} tokens would hold "
              f"{whole:,.0f} MB of them in every layer. Largest difference between the two forms' outputs at "
              f"{min(run['length'] for run in runs):,} tokens: {difference:.1e}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small model at 1,500 and 1,200 tokens")
    parser.add_argument("--length", type=int, default=8192, help="tokens of the long forward pass")
    parser.add_argument("--compare", type=int, default=2048, help="tokens at which both forms run")
    parser.add_argument("--results", default=RESULTS, help="the RESULTS.md to write the section into")
    parser.add_argument("--worker", choices=FORMS, help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.config), args.worker, args.length, args.out)))
        return
    import numpy as np

    config = QUICK if args.quick else BASE
    length, compare = (1500, 1200) if args.quick else (args.length, args.compare)
    with tempfile.TemporaryDirectory() as folder:
        outputs = {form: os.path.join(folder, f"{form}.npy") for form in FORMS}
        runs = [run_worker(config, form, compare, outputs[form]) for form in FORMS]
        difference = float(np.abs(np.load(outputs["kerasbert"]) - np.load(outputs["whole"])).max())
    runs.append(run_worker(config, "kerasbert", length))
    text = report(config, runs, difference, args.quick)
    print(text)
    from benchmarks.bench import machine_kind

    write_section(f"long-inputs-{machine_kind('cpu')}", text, args.results)


if __name__ == "__main__":
    main()
