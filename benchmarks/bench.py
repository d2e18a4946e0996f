"""Model speed: kerasbert against bert4keras and keras-hub, side by side, in interleaved worker processes.

Each variant runs in a worker process of its own (so peak RSS and build time are its own). The
workers are started together and stepped in turn: each waits before every batch until the
orchestrator says go, so one round is one step of every variant, back to back, in an order that
reverses every round. This machine's speed drifts by ±15 % from minute to minute; a variant and
bert4keras measured seconds apart see the same machine, so the ratio of each round's pair is
taken and the table gives the median of those paired ratios, beside median step times and the
share of the matmul peak measured by the ``matmul`` worker of the same run (FLOPs counted
analytically: `forward_flops`; training counts forward + 2 × backward). Training workers hold
4+ GB each: at most ``--group`` of them run at once, kerasbert and bert4keras in every group.

What is timed is the path users get by default:
- inference: ``model.predict`` on a model from ``build_transformer_model`` (bert4keras: its own
  ``build_transformer_model``; keras-hub: ``BertBackbone.predict``);
- training: ``fit`` of the classifier that ``kerasbert train`` builds, compiled by
  `kerasbert.finetune.training.compile_model` (bert4keras: pooler + Dense with its ``Adam``; keras-hub:
  ``BertTextClassifier`` with its default compile). kerasbert's classifier runs its last layer for
  ``[CLS]`` alone (`kerasbert.modeling.heads.cls`), and its FLOPs are counted so (``first_token_only``);
- ``kerasbert-train``: the whole ``kerasbert.train`` on generated full-length text, to show that
  data and tokenization are not the bottleneck (its step time against the bare ``kerasbert`` step);
- ``kerasbert-b4k`` against ``bert4keras-b4k``: the classifier as bert4keras's scripts build and step it,
  ``Lambda(lambda x: x[:, 0])`` + ``Dense`` with ``Adam``, ``train_on_batch`` / ``predict_on_batch``, each
  library's own ``build_transformer_model`` (`bench_workers.work_b4k_way`).
``--baseline DIR`` runs every kerasbert variant a second time on the kerasbert of another checkout (``NAME@base``,
its source first on the worker's path), in the same rounds: the ratio of the two is what a change in the code
bought or cost, on one machine at one time.
Each library runs with the environment its users give it: kerasbert's workers import kerasbert first,
which turns TensorFlow's oneDNN kernels on (`kerasbert.perf.onednn`); bert4keras and keras-hub get the
caller's ``TF_ENABLE_ONEDNN_OPTS`` (TensorFlow's own choice when unset). ``kerasbert-nodnn`` and
``bert4keras-onednn`` swap that switch, to show what it is worth to each.

Usage:
    python benchmarks/bench.py                      # BERT-base Chinese, 10 rounds: RESULTS.md, section bench-cpu
                                                    # (-cpu-amx with AMX, -cpu-avx512 with AVX-512 where bf16
                                                    # pays, -cpu-avx512-fp32 where it does not, -gpu on a GPU)
    python benchmarks/bench.py --quick              # tiny config, 3 rounds: checks that every worker runs
    python benchmarks/bench.py --device gpu         # on a GPU machine: mixed_float16 and bf16 MFU too
    python benchmarks/bench.py --variants kerasbert-b4k,bert4keras-b4k --baseline /tmp/old   # against a checkout
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import bench_families  # noqa: E402
from benchmarks.bench_workers import NUM_CLASSES, WORKERS, gpu_peak_mb  # noqa: E402
from benchmarks.results import write_section  # noqa: E402

# the orchestrator imports kerasbert, which sets TF_ENABLE_ONEDNN_OPTS (kerasbert.perf.onednn): workers get the
# user's own value, so bert4keras and keras-hub run as their users run them and kerasbert sets it itself
USER_ONEDNN = os.environ.get("TF_ENABLE_ONEDNN_OPTS")

MODES = ("infer", "train")
# name: (framework, options); kerasbert-* are kerasbert's switches, not other code paths
VARIANTS = {
    "kerasbert": ("kerasbert", {}),
    "kerasbert-xla": ("kerasbert", {"jit_compile": True}),
    "kerasbert-noxla": ("kerasbert", {"jit_compile": False}),
    "kerasbert-bf16": ("kerasbert", {"policy": "mixed_bfloat16"}),
    "kerasbert-bf16-xla": ("kerasbert", {"policy": "mixed_bfloat16", "jit_compile": True}),
    "kerasbert-fp16": ("kerasbert", {"policy": "mixed_float16"}),
    "bert4keras": ("bert4keras", {}),
    "keras-hub": ("keras_hub", {}),
    "keras-hub-fp16": ("keras_hub", {"policy": "mixed_float16"}),
    "kerasbert-train": ("kerasbert_train", {}),
    "matmul": ("matmul", {}),
    "kerasbert-nodnn": ("kerasbert", {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}),
    "bert4keras-onednn": ("bert4keras", {"env": {"TF_ENABLE_ONEDNN_OPTS": "1"}}),
    "kerasbert-b4k": ("b4k_way", {"library": "kerasbert"}),
    "bert4keras-b4k": ("b4k_way", {"library": "bert4keras"}),
    **bench_families.VARIANTS,  # --families: kerasbert-roberta_en against keras-hub-roberta_en, ...
}
WORKERS = {**WORKERS, **bench_families.WORKERS}
# kerasbert's defaults (kerasbert.perf.xla.xla_pays): XLA with a GPU for models of 10M+ parameters (-noxla shows
# the plain graph there), the plain graph on a CPU (-xla shows XLA); oneDNN on x86-64 (kerasbert.perf.onednn),
# -nodnn without it, and bert4keras-onednn bert4keras with it; -b4k: bert4keras's way of building and stepping a
# classifier (bench_workers.work_b4k_way), measured against each other
CPU_VARIANTS = ["kerasbert", "kerasbert-xla", "kerasbert-nodnn", "kerasbert-bf16", "kerasbert-bf16-xla", "bert4keras",
                "bert4keras-onednn", "keras-hub", "kerasbert-train", "kerasbert-b4k", "bert4keras-b4k"]
GPU_VARIANTS = ["kerasbert", "kerasbert-noxla", "kerasbert-fp16", "kerasbert-bf16", "bert4keras",
                "keras-hub", "keras-hub-fp16", "kerasbert-train"]
TRAIN_ONLY = {"kerasbert-train"}
BASE = "@base"  # suffix of a kerasbert variant run on the --baseline tree's kerasbert


def variant(name: str) -> tuple[str, dict]:
    """(framework, options) of ``name``; ``name@base`` is ``name`` on the baseline tree."""
    return VARIANTS[name.removesuffix(BASE)]


def peer(name: str) -> str:
    """The bert4keras variant ``name``'s ``× bert4keras`` is paired with: the same way of building the model."""
    return "bert4keras-b4k" if name.removesuffix(BASE).endswith("-b4k") else "bert4keras"


def forward_flops(cfg: dict, batch: int, seq: int, first_token_only: bool = False) -> int:
    """Multiply-adds × 2 of one forward pass: per layer and token, Q/K/V/O projections 8H², the
    feed-forward 4HI and attention scores and mixing 4SH; plus the pooler 2H² and the head 2HC a sequence.
    ``first_token_only``: the last layer computes only keys and values (4H²) for all but ``[CLS]``, as
    kerasbert's classifier does (`kerasbert.modeling.heads.cls`)."""
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    per_token = 8 * h * h + 4 * h * i + 4 * seq * h
    left_out = (seq - 1) * (per_token - 4 * h * h) if first_token_only else 0
    return batch * (layers * seq * per_token - left_out) + batch * (2 * h * h + 2 * h * NUM_CLASSES)


# ---------------------------------------------------------------------------------------- orchestrator
def worker_main(args) -> None:
    framework, opts = variant(args.worker)
    opts = {"model": args.model, **opts}  # a --families variant names its own family
    with open(args.config_file) as f:
        cfg = json.load(f)
    extra_args = {"device": args.device} if framework == "matmul" else {}
    result = WORKERS[framework](cfg, opts, args.mode, args.batch, args.seq, args.steps, args.warmup, **extra_args)
    build, times, extra = result if len(result) == 3 else (*result, {})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.device == "gpu":
        extra["gpu_mb"] = gpu_peak_mb()
    print("RESULT " + json.dumps({"build_s": build, "step_s": statistics.median(times), "times": times,
                                  "rss_mb": rss, **extra}), flush=True)


def available(name: str) -> str | None:
    """Why ``name`` cannot run here, or None. On TensorFlow every worker needs only the test requirements
    (keras-hub is measured where it is installed). On another Keras backend (``KERAS_BACKEND=jax``, e.g. on a
    GPU machine without TensorFlow) bert4keras and ``kerasbert train`` (tf.data) need TensorFlow, and
    ``jit_compile=False`` means op-by-op Python there, not TensorFlow's plain graph."""
    framework, opts = variant(name)
    needs = {"keras_hub": ["keras_hub"], "keras_hub_family": ["keras_hub"],
             "bert4keras": ["tensorflow", "bert4keras"],
             "kerasbert_train": ["tensorflow"]}.get(opts.get("library", framework), [])
    missing = [module for module in needs if importlib.util.find_spec(module) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    if opts.get("jit_compile") is False and keras_backend() != "tensorflow":
        return f"no plain graph on {keras_backend()}"
    return None


def keras_backend() -> str:
    """The Keras backend the workers get, without importing Keras (which would import TensorFlow)."""
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def _worker_process(name: str, mode: str, args, config_file: str, extra_env=None) -> tuple[list[str], dict]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    framework, opts = variant(name)
    if "bert4keras" in (framework, opts.get("library")):
        env.update(TF_KERAS="1", TF_USE_LEGACY_KERAS="1")
    if USER_ONEDNN is None:
        env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    else:
        env["TF_ENABLE_ONEDNN_OPTS"] = USER_ONEDNN
    env.update(opts.get("env", {}), **(extra_env or {}))
    if name.endswith(BASE):  # the baseline tree's kerasbert first on the path
        env["PYTHONPATH"] = args.baseline + os.pathsep + env["PYTHONPATH"]
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    else:  # the workers share the GPU: each takes memory as it needs it, not all of it at start
        env.update(TF_FORCE_GPU_ALLOW_GROWTH="true", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    batch = args.infer_batch if mode == "infer" else args.train_batch
    command = [sys.executable, os.path.abspath(__file__), "--worker", name, "--mode", mode, "--config-file",
               config_file, "--batch", str(batch), "--seq", str(args.seq), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--device", args.device, "--model", args.model]
    return command, env


class Worker:
    """A worker process: ``ready()`` waits until it is built and waiting before its first batch, ``step()``
    lets it run one batch and waits until it is idle again; ``result()`` lets it finish and returns its
    RESULT (build time, step times, peak RSS; the matmul worker, which is not stepped, its peaks)."""

    def __init__(self, name: str, mode: str, args, config_file: str, extra_env=None):
        self.name, self.mode = name, mode
        self.log = tempfile.TemporaryFile("w+")
        command, env = _worker_process(name, mode, args, config_file, extra_env)
        self.process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True)

    def ready(self) -> Worker:
        self._read("WAIT")
        return self

    def _read(self, prefix: str) -> str:
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        self.process.wait()
        self.log.seek(0)
        raise RuntimeError(f"worker {self.name} ({self.mode}) failed with exit {self.process.returncode}:\n"
                           f"{self.log.read()[-3000:]}")

    def step(self, last: bool) -> float:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        seconds = float(self._read("STEP "))
        if not last:
            self._read("WAIT")
        return seconds

    def result(self) -> dict:
        result = json.loads(self._read("RESULT "))
        self.process.wait()
        self.log.close()
        return result


def onednn_switches(args) -> tuple[str, ...]:
    """The ``TF_ENABLE_ONEDNN_OPTS`` values the matmul peak is measured with: both on TensorFlow's CPU (except
    --quick), where the best is taken; one elsewhere (no oneDNN on a GPU or on JAX)."""
    both = args.device == "cpu" and keras_backend() == "tensorflow" and not args.quick
    return ("0", "1") if both else ("1",)


def measure_peak(args, config_file: str) -> dict:
    """The matmul worker's peaks, the best over `onednn_switches`."""
    peaks: dict = {}
    for onednn in onednn_switches(args):
        result = Worker("matmul", "infer", args, config_file, {"TF_ENABLE_ONEDNN_OPTS": onednn}).result()
        for dtype, gflops in result["peak_gflops"].items():
            peaks[dtype] = max(peaks.get(dtype, 0.0), gflops)
    return {"peak_gflops": peaks}


def groups(names: list[str], size: int) -> list[list[str]]:
    """``names`` in groups of at most ``size`` that run at once, kerasbert and bert4keras in every group."""
    anchors = [name for name in ("kerasbert", "bert4keras") if name in names]
    rest = [name for name in names if name not in anchors]
    if len(names) <= size or not rest:
        return [names]
    width = max(1, size - len(anchors))
    return [anchors + rest[i:i + width] for i in range(0, len(rest), width)]


def run_group(names: list[str], mode: str, args, config_file: str, index: int) -> dict:
    """Start the group's workers one after another (each builds alone; with --quick all at once, as its
    build times are not for reading), then step them round-robin: warm-up rounds, then ``args.steps`` timed
    rounds, the order reversed every round."""
    if args.quick:
        workers = [worker.ready() for worker in [Worker(name, mode, args, config_file) for name in names]]
    else:
        workers = [Worker(name, mode, args, config_file).ready() for name in names]
    rounds = args.warmup + args.steps
    for round_ in range(rounds):
        line = []
        for worker in workers if round_ % 2 == 0 else workers[::-1]:
            line.append(f"{worker.name} {worker.step(last=round_ == rounds - 1):.3f}")
        print(f"{mode} group {index + 1} round {round_ + 1}/{rounds}" + " (warm-up)" * (round_ < args.warmup)
              + ": " + ", ".join(line) + " s", flush=True)
    return {worker.name: {**worker.result(), "group": index} for worker in workers}


def paired_ratios(results: dict, mode: str, a: str, b: str) -> list[float]:
    """a's step time / b's, one ratio per round where both ran (same group): how much faster b is."""
    ratios = []
    for run_a in results.get((a, mode), []):
        for run_b in results.get((b, mode), []):
            if run_a["group"] == run_b["group"]:
                ratios += [x / y for x, y in zip(run_a["times"], run_b["times"], strict=True)]
    return ratios


def paired(results: dict, mode: str, a: str, b: str) -> float | None:
    """The median of `paired_ratios`, or None where a and b never ran side by side."""
    ratios = paired_ratios(results, mode, a, b)
    return statistics.median(ratios) if ratios else None


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of what ``values`` sample: the k-th smallest and
    the k-th largest value, with k the largest rank whose binomial tail P(Bin(n, ½) < k) is ≤ (1 - confidence)/2
    (it covers the median with probability ≥ ``confidence``, whatever the distribution). None when n is too
    small for any such k (n < 6 at 95 %).

    Example (n = 10: the 2nd smallest and 2nd largest, P(Bin(10, ½) ≤ 1) = 11/1024 ≤ 0.025):
    >>> median_interval([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9])
    (1.1, 1.8)
    """
    n, tail, k = len(values), 0.0, 0
    while k < n and tail + math.comb(n, k) / 2 ** n <= (1 - confidence) / 2:
        tail += math.comb(n, k) / 2 ** n
        k += 1
    ordered = sorted(values)
    return (ordered[k - 1], ordered[n - k]) if k else None


def _cpuinfo(field: str) -> str:
    info = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    found = re.search(rf"^{field}\s*:\s*(.+)$", info, re.M)
    return found.group(1) if found else ""


def cpu_text() -> str:
    """The CPU's model and the vector extensions TensorFlow's CPU kernels choose by (from /proc/cpuinfo)."""
    from kerasbert.perf.onednn import cpu_flags

    wanted = [f for f in cpu_flags() if f.startswith(("avx", "amx")) or f == "fma"]
    return f"{_cpuinfo('model name') or platform.machine()} ({' '.join(sorted(set(wanted))) or 'flags unknown'})"


def shown_options(argv: list[str]) -> list[str]:
    """The command line's options for the report, without where it was written (``--results``)."""
    shown, skip = [], False
    for word in argv:
        if skip or word == "--results":
            skip = not skip
            continue
        if not word.startswith("--results="):
            shown.append(word)
    return shown


def peak_how(args) -> str:
    """How the matmul peak was measured, for the report."""
    if keras_backend() == "tensorflow":
        how = "TensorFlow's plain graph and XLA" + (", with and without oneDNN" * (len(onednn_switches(args)) > 1))
    else:
        how = f"{keras_backend()}, compiled"
    # JAX and TensorFlow run float32 matmuls as TF32 on the tensor cores of an Ampere or later GPU by default
    return how + ("; float32 matmuls run as TF32, in the models too" if args.device == "gpu" else "")


def gpu_text() -> str:
    """`` (NVIDIA H100 80GB HBM3, driver 580.1)`` from nvidia-smi, or nothing."""
    try:
        found = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" ({found[0].replace(', ', ', driver ')})" if found else ""


def machine_kind(device: str, flags: str | None = None, half: float | None = None) -> str:
    """Which section a run's results go to: ``gpu``; ``cpu-amx`` (a CPU with AMX bf16 units, where oneDNN's
    bf16 matmuls measured 4 x its fp32 ones); on AVX-512 without AMX, by ``half`` (bf16 matmuls' speed over
    fp32's, `half_speedup` of the run's peaks; `kerasbert.perf.onednn.bf16_speedup` when None): ``cpu-avx512``
    where bf16 pays (`kerasbert.perf.onednn.bf16_pays`; AMD EPYC Zen 4 here, 1.9 x), ``cpu-avx512-fp32`` where it
    does not (an Intel Xeon with avx512_bf16 and no AMX here, 0.55 x); ``cpu`` (AVX2). ``flags``: the CPU's,
    space-separated as /proc/cpuinfo lists them (`kerasbert.perf.onednn.cpu_flags` when None).

    Example:
    >>> machine_kind("cpu", "fma avx2 avx512f avx512_bf16", half=1.9)
    'cpu-avx512'
    >>> machine_kind("cpu", "fma avx2 avx512f avx512_bf16", half=0.55)
    'cpu-avx512-fp32'
    """
    if device == "gpu":
        return "gpu"
    from kerasbert.perf.onednn import bf16_pays, cpu_flags

    found = cpu_flags() if flags is None else set(flags.split())
    if "amx_bf16" in found:
        return "cpu-amx"
    if "avx512f" not in found:
        return "cpu"
    return "cpu-avx512" if bf16_pays(half) else "cpu-avx512-fp32"


def half_speedup(peaks: dict) -> float | None:
    """The best half-precision matmul peak over the float32 one (``peaks``: GFLOP/s by dtype), or None."""
    half = [peaks[dtype] for dtype in ("float16", "bfloat16") if peaks.get(dtype)]
    return max(half) / peaks["float32"] if half and peaks.get("float32") else None


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("tensorflow", "jax", "jaxlib", "keras", "tf-keras", "bert4keras", "keras-hub", "tokenizers"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def summarize(results: dict, args, cfg: dict, names: list[str]) -> tuple[str, dict]:
    """The markdown table and the figures the targets are read from."""
    peaks = {k: max(r["peak_gflops"][k] for r in results[("matmul", "infer")])
             for k in results[("matmul", "infer")][0]["peak_gflops"]}
    figures, lines = {}, []
    gpu = any(r.get("gpu_mb") for runs in results.values() for r in runs)
    lines.append("| mode | variant | build s | step s (median) | seq/s | × bert4keras | GFLOP/s | % of matmul peak "
                 "| peak RSS MB |" + " peak GPU MB |" * gpu)
    lines.append("|---|---|---|---|---|---|---|---|---|" + "---|" * gpu)
    for mode in MODES:
        batch = args.infer_batch if mode == "infer" else args.train_batch
        for name in names:
            if (mode == "infer" and name in TRAIN_ONLY) or (name, mode) not in results:
                continue
            # kerasbert's classifier runs its last layer for [CLS] alone; bert4keras's and keras-hub's do not
            first_only = mode == "train" and variant(name)[0] in ("kerasbert", "kerasbert_train")
            flops = forward_flops(cfg, batch, args.seq, first_only) * (3 if mode == "train" else 1)
            runs = results[(name, mode)]
            step = statistics.median(t for r in runs for t in r["times"])
            policy = variant(name)[1].get("policy")
            peak = peaks.get("float32" if not policy else policy.split("_")[1])  # none for fp16 on a CPU
            row = {"step_s": step, "seq_s": batch / step, "build_s": statistics.median(r["build_s"] for r in runs),
                   "rss_mb": statistics.median(r["rss_mb"] for r in runs), "gflops": flops / step / 1e9,
                   "peak_pct": 100 * flops / step / 1e9 / peak if peak else None,
                   "vs_bert4keras": paired(results, mode, peer(name), name)}
            if "tokenize_s" in runs[0]:
                row["tokenize_s"] = statistics.median(r["tokenize_s"] for r in runs)
            figures[(name, mode)] = row
            ratio = f"{row['vs_bert4keras']:.2f}" if row["vs_bert4keras"] else "—"
            share = f"{row['peak_pct']:.0f}%" if peak else "—"
            if gpu:
                row["gpu_mb"] = statistics.median(r.get("gpu_mb") or 0 for r in runs)
            lines.append(f"| {mode} | {name} | {row['build_s']:.1f} | {step:.3f} | {row['seq_s']:.1f} | {ratio} | "
                         f"{row['gflops']:.0f} | {share} | {row['rss_mb']:,.0f} |"
                         + (f" {row['gpu_mb']:,.0f} |" if gpu else ""))
    peak_text = ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items())
    return "\n".join(lines), {"figures": figures, "peaks": peaks, "peak_text": peak_text}


def target_line(text: str, value, goal, higher: bool = True, unit: str = "×",
                rounds: list[float] | None = None) -> str | None:
    """One target's line: the figure, the goal, the rounds' 95 % interval (`median_interval`) and whether it is
    met; None without a figure.

    Example:
    >>> target_line("infer: a vs b", 1.2, 1.0)
    '- infer: a vs b: 1.20× (target ≥ 1.0×) — met'
    """
    if value is None:
        return None
    met = value >= goal if higher else value <= goal
    spread = median_interval(rounds or [])
    inside = spread and spread[0] <= goal <= spread[1]
    return (f"- {text}: {value:.2f}{unit} (target {'≥' if higher else '≤'} {goal}{unit}"
            + (f"; 95 % interval {spread[0]:.2f}–{spread[1]:.2f} over {len(rounds)} rounds" if spread else "")
            + f") — {'met' if met else '**missed**'}" + " (the target is inside the interval)" * bool(inside))


def targets(summary: dict, results: dict) -> str:
    """The speed and memory goals, each with the figure measured and whether it is met. Mixed precision must be
    ≥ 1.6 × fp32 where the run's matmul peaks (``summary["peaks"]``) measured half precision ≥ `HALF_FASTER`
    × fp32 (a GPU, a CPU with AMX or AVX-512 bf16 under oneDNN); elsewhere fp32 stays the default."""
    from kerasbert.perf.onednn import HALF_FASTER

    f = summary["figures"]
    half = half_speedup(summary.get("peaks", {}))
    out = []

    def check(text: str, value, goal, higher: bool = True, unit: str = "×", rounds: list[float] | None = None):
        line = target_line(text, value, goal, higher, unit, rounds)
        if line:
            out.append(line)

    def check_pair(text: str, mode: str, a: str, b: str, goal, higher: bool = True):
        check(text, paired(results, mode, a, b), goal, higher, rounds=paired_ratios(results, mode, a, b))

    for mode, goal, peak_goal in (("infer", 1.15, 80), ("train", 1.25, 70)):
        mine = f.get(("kerasbert", mode))
        if not mine:
            continue
        check_pair(f"{mode}: kerasbert vs bert4keras", mode, "bert4keras", "kerasbert", goal)
        check_pair(f"{mode}: kerasbert vs keras-hub", mode, "keras-hub", "kerasbert", 1.0)
        check_pair(f"{mode}: kerasbert-fp16 vs keras-hub-fp16", mode, "keras-hub-fp16", "kerasbert-fp16", 1.0)
        check(f"{mode}: kerasbert share of the matmul peak", mine["peak_pct"], peak_goal, unit="%")
    for mode in MODES:
        check_pair(f"{mode}, bert4keras's way (Lambda + Dense, *_on_batch): kerasbert vs bert4keras", mode,
                   "bert4keras-b4k", "kerasbert-b4k", 1.0)
        for name in sorted({n.removesuffix(BASE) for (n, m) in f if n.endswith(BASE) and m == mode}):
            check_pair(f"{mode}: {name} against the baseline tree's", mode, name + BASE, name, 1.0)
    mine, b4k = f.get(("kerasbert", "train")), f.get(("bert4keras", "train"))
    if mine and b4k:
        check("train: peak RSS kerasbert / bert4keras", mine["rss_mb"] / b4k["rss_mb"], 1.0, higher=False)
    e2e = f.get(("kerasbert-train", "train"))
    if mine and e2e:
        check_pair("`kerasbert train` step / bare model step", "train", "kerasbert-train", "kerasbert", 1.05,
                   higher=False)
        check("tokenization time per batch / model step", 100 * e2e["tokenize_s"] / mine["step_s"], 5,
              higher=False, unit="%")
    for name in ("kerasbert-bf16", "kerasbert-fp16"):
        for mode in MODES:
            if (name, mode) in f and ("kerasbert", mode) in f:
                if half and half >= HALF_FASTER:
                    check_pair(f"{mode}: {name} / fp32 speed", mode, "kerasbert", name, 1.6)
                else:
                    speed = paired(results, mode, "kerasbert", name)
                    matmul = f"its matmul {half:.2f}× fp32" if half else "its matmul not measured"
                    out.append(f"- {mode}: {name} / fp32 speed: {speed:.2f}× ({matmul}: fp32 stays the default)")
    return "\n".join(out)


def run_families(families: list[str], args, results: dict) -> None:
    """Each family's kerasbert and keras-hub workers (`bench_families`), inference, stepped in interleaved rounds
    as a group of their own, on the family's config."""
    for family in families:
        config_file = os.path.join(tempfile.mkdtemp(), "config.json")
        with open(config_file, "w") as f:
            json.dump(bench_families.family_config(family, args.quick), f)
        for name, result in run_group(list(bench_families.variant_names(family)), "infer", args, config_file,
                                      0).items():
            results.setdefault((name, "infer"), []).append(result)
            print(f"WORKER {name} infer {json.dumps(result)}", flush=True)


def families_text(families: list[str], args, results: dict) -> str:
    """The report's part on the Hugging Face families (`bench_families.report`), or nothing without them."""
    table, lines = bench_families.report(results, families, paired, target_line, paired_ratios)
    if not lines:
        return ""
    sizes = "tiny configs" if args.quick else "the published base sizes (DistilBERT 6 layers, the others 12)"
    return (f"\nHugging Face families, inference against keras-hub's backbones: {sizes}, batch {args.infer_batch} × "
            f"seq {args.seq}, random weights of the same shapes, the same ids; each family's two workers stepped in "
            f"turn, × keras-hub the median of the rounds' paired ratios.\n\n{table}\n\nTargets:\n"
            + "\n".join(lines) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny config, small batches, 3 rounds")
    parser.add_argument("--config", default=None, help="preset or bert_config.json (default bert_base_chinese)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--model", default="bert", help="the family kerasbert and bert4keras build (albert, nezha, "
                        "electra, roformer, roformer_v2, ...); keras-hub's variants build BERT only")
    parser.add_argument("--group", type=int, default=4, help="training workers alive at once (4+ GB each)")
    parser.add_argument("--infer-batch", type=int, default=None)
    parser.add_argument("--train-batch", type=int, default=None)
    parser.add_argument("--seq", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="timed rounds: one step of every worker each")
    parser.add_argument("--warmup", type=int, default=None, help="untimed first rounds (tracing, compiling)")
    parser.add_argument("--variants", default=None, help="comma-separated subset of " + ", ".join(
        name for name in VARIANTS if name not in bench_families.VARIANTS) + "; none: only --families")
    parser.add_argument("--families", default=None, help="also the Hugging Face families keras-hub has, inference "
                        "against its backbones: all, or some of " + ", ".join(bench_families.FAMILIES))
    parser.add_argument("--replay", default=None, help="summarize the WORKER lines of an earlier run's output")
    parser.add_argument("--results", default=None, help="markdown file to write (default benchmarks/RESULTS.md)")
    parser.add_argument("--baseline", default=None, help="a checkout of another kerasbert version: each kerasbert "
                        "variant also runs on it, as NAME@base, in the same rounds")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--config-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args)
    try:
        families = bench_families.parse_families(args.families)
    except ValueError as e:
        parser.error(str(e))

    quick = args.quick
    gpu = args.device == "gpu" and not quick  # a GPU wants bigger batches, and its steps take milliseconds
    defaults = dict(config="tiny" if quick else "bert_base_chinese", infer_batch=2 if quick else 128 if gpu else 16,
                    train_batch=2 if quick else 32 if gpu else 8, seq=16 if quick else 128,
                    steps=3 if quick else 30 if gpu else 10, warmup=2 if gpu else 1)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    from kerasbert.modeling.config import resolve_config

    cfg = resolve_config(args.config).to_dict()
    config_file = os.path.join(tempfile.mkdtemp(), "bert_config.json")
    with open(config_file, "w") as f:
        json.dump(cfg, f)
    names = ([] if args.variants == "none" else args.variants.split(",") if args.variants
             else GPU_VARIANTS if args.device == "gpu" else CPU_VARIANTS)
    reasons = {n: available(n) or (f"builds BERT only, not {args.model}" if args.model != "bert"
                                    and variant(n)[0] == "keras_hub" else None) for n in names}
    skipped = {n: why for n, why in reasons.items() if why}
    names = [n for n in names if n not in skipped and n != "matmul"]
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
        names += [n + BASE for n in names if variant(n)[0] in ("kerasbert", "b4k_way") and "kerasbert" in n]
    results: dict = {}
    if args.replay:  # the WORKER lines of an earlier run's output, e.g. one stopped before its end
        for line in open(args.replay, encoding="utf-8"):
            if line.startswith("WORKER "):
                _, name, mode, raw = line.split(" ", 3)
                results.setdefault((name, mode), []).append(json.loads(raw))
        names = [name for name in names if (name, "infer") in results or (name, "train") in results]
    else:
        results[("matmul", "infer")] = [measure_peak(args, config_file)]  # and at the end: the machine drifts
        for mode in MODES:
            members = [name for name in names if not (mode == "infer" and name in TRAIN_ONLY)]
            size = args.group if mode == "train" and not quick else len(members)
            for index, group in enumerate(groups(members, size)):
                for name, result in run_group(group, mode, args, config_file, index).items():
                    results.setdefault((name, mode), []).append(result)
                    print(f"WORKER {name} {mode} {json.dumps(result)}", flush=True)
        run_families(families, args, results)
        if not quick:
            results[("matmul", "infer")].append(measure_peak(args, config_file))
        for result in results[("matmul", "infer")]:
            print(f"WORKER matmul infer {json.dumps(result)}", flush=True)
    table, summary = summarize(results, args, cfg, names)
    import multiprocessing

    kind = machine_kind(args.device, half=half_speedup(summary["peaks"]))
    command = " ".join(["python benchmarks/bench.py", *shown_options(sys.argv[1:] if argv is None else argv)])
    if keras_backend() != "tensorflow":
        command = f"KERAS_BACKEND={keras_backend()} {command}"
    text = (f"## Model speed: kerasbert vs bert4keras and keras-hub\n\n`{command}`"
            f" — model {args.model}, config {args.config} (L={cfg['num_hidden_layers']}, H={cfg['hidden_size']}, "
            f"V={cfg['vocab_size']}), inference batch {args.infer_batch} × seq {args.seq}, training batch "
            f"{args.train_batch} × seq {args.seq}; a worker process a variant, stepped in turn: {args.steps} timed "
            f"rounds (one step of each) after {args.warmup} warm-up round{'s' * (args.warmup > 1)}; median step "
            f"times, and × bert4keras is the median of the rounds' paired ratios. Device: {args.device}{gpu_text()}, "
            f"{multiprocessing.cpu_count()} CPU cores, {cpu_text()}; Keras backend {keras_backend()}; "
            f"Python {platform.python_version()}, {versions()}.\n\n"
            + "".join(f"Not measured: {name} ({why}).\n\n" for name, why in skipped.items()) +
            f"Matmul peak measured by the same run ({peak_how(args)}, at its start and end): "
            f"{summary['peak_text']}.\n\n{table}\n\n"
            f"Targets (ratios are medians of paired rounds; the interval, where there are 6 rounds or more, is a "
            f"95 % confidence interval for that median from the rounds' order statistics, `median_interval`):\n"
            f"{targets(summary, results)}\n" + families_text(families, args, results))
    print(text)
    section = "bench-quick" if quick else f"bench-{kind}" + (f"-{args.model}" if args.model != "bert" else "")
    write_section(section, text, args.results or os.path.join(HERE, "RESULTS.md"))


if __name__ == "__main__":
    main()
