"""What each speed variant buys here: a training and an inference step with the variant on and off.

```bash
python benchmarks/variants.py                 # BERT-base width, 2 layers, 10 rounds: RESULTS.md, variants-<kind>
python benchmarks/variants.py --layers 4 --rounds 20 --variants xla_dropout,dense_2d
python benchmarks/variants.py --quick         # a tiny model, 2 rounds: checks that it runs
```

For each speed variant of the kernel table (`kerasbert.perf.variants.MEASURED`; the portable runtimes' forms are
measured by ``serve_bench.py``), two models of the same shape and seed are built and traced
in this one process, one inside ``forced({variant: True})`` and one inside ``forced({variant: False})``, every other
variant as this machine's kind chooses (`chosen` is read when a graph is traced, so each model keeps its choice;
a forced variant runs at any width).
A training step is one ``train_on_batch`` of a ``heads.cls`` classifier (batch 8 × 128, Adam, the config's
dropout), an inference step one ``predict_on_batch`` (16 × 128). The two models are then stepped in turn, one
step each a round, in an order that reverses every round; the gain is the median over rounds of the paired
ratio ``off / on`` (above 1: the variant is faster). A control pair, two models with this machine's own
choices, shows how far apart identical arms measure: a gain inside that distance of 1.00 is noise. Float32
(``--policy`` for another), except ``float32_activation``, which acts only under mixed precision and is timed in
mixed_bfloat16, and ``half_gradients``, timed in mixed_bfloat16 with kerasbert's ``LayerwiseAdamW`` (the optimizer
whose step grants it). A variant that acts on one kind of step only is timed there (``xla_gelu``, ``xla_dropout``,
``xla_layer_norm``, ``half_gradients``: training; ``float32_activation`` and ``centred_layer_norm``: inference).

The table goes to the RESULTS.md section ``variants-<kind>`` (`kerasbert.perf.variants.machine_kind`), with the
CPU flags that decide the kind. A variant stays where it buys at least 2 % (`kerasbert.perf.variants`).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository: kerasbert and benchmarks.results

import kerasbert  # noqa: E402, F401  (before Keras: it turns TensorFlow's oneDNN on, as users get it)

MODES = {"train": "training", "infer": "inference"}
CONTROL = "control"  # both models as this machine chooses: how far apart two identical arms measure
ONLY = {"xla_gelu": ("train",), "xla_dropout": ("train",), "xla_layer_norm": ("train",), "half_gradients": ("train",),
        "float32_activation": ("infer",), "centred_layer_norm": ("infer",)}
POLICY = {"float32_activation": "mixed_bfloat16", "half_gradients": "mixed_bfloat16"}
KERASBERT_OPTIMIZER = ("half_gradients",)  # timed with LayerwiseAdamW, whose step grants the variant
SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_ne_convert", "amx_tile", "amx_bf16")
FULL = {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 21128}
TINY = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 1000}


def build(shape: dict, layers: int, policy: str, seq: int, kerasbert_optimizer: bool = False):
    """A ``heads.cls`` classifier of ``shape`` compiled for ``train_on_batch`` (Adam, or kerasbert's
    ``LayerwiseAdamW``); the same weights every call."""
    import keras

    from kerasbert import build_transformer_model, heads
    from kerasbert.modeling.optimizers import LayerwiseAdamW

    keras.utils.set_random_seed(0)
    backbone = build_transformer_model("tiny", num_hidden_layers=layers, max_position_embeddings=max(seq, 512),
                                       dtype=policy, verbose=False, **shape)
    model = heads.cls(backbone, 2)
    optimizer = LayerwiseAdamW(learning_rate=1e-5) if kerasbert_optimizer else keras.optimizers.Adam(1e-5)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    return model


def batch(size: int, seq: int, vocab: int):
    """``size`` rows of ``seq`` random ids (the last quarter of odd rows padding) and their labels."""
    import numpy as np

    rng = np.random.default_rng(size)
    ids = rng.integers(1, vocab, size=(size, seq)).astype("int32")
    ids[1::2, seq - seq // 4:] = 0
    return [ids, np.zeros_like(ids)], rng.integers(0, 2, size=(size,))


def step(model, mode: str, data) -> float:
    """Seconds for one training or inference step of ``model`` on ``data``."""
    inputs, labels = data
    start = time.perf_counter()
    if mode == "train":
        model.train_on_batch(inputs, labels)
    else:
        model.predict_on_batch(inputs)
    return time.perf_counter() - start


def measure(name: str, args, shape: dict) -> dict[str, float]:
    """The median paired gain ``off / on`` of variant ``name`` for each mode it acts on; for `CONTROL`, two
    models with this machine's own choices (the noise floor: 1.00 on a quiet machine)."""
    import keras

    from kerasbert.perf.variants import forced

    modes = ONLY.get(name, tuple(MODES))
    data = {"train": batch(args.train_batch, args.seq, shape["vocab_size"]),
            "infer": batch(args.infer_batch, args.seq, shape["vocab_size"])}
    models = {}
    for on in (True, False):
        with forced({} if name == CONTROL else {name: on}):  # traced here: each model keeps this choice
            models[on] = build(shape, args.layers, POLICY.get(name, args.policy), args.seq,
                               name in KERASBERT_OPTIMIZER)
            for mode in modes:
                for _ in range(args.warmup):
                    step(models[on], mode, data[mode])
    gains = {}
    for mode in modes:
        ratios = []
        for r in range(args.rounds):
            seconds = {on: step(models[on], mode, data[mode]) for on in ((True, False) if r % 2 else (False, True))}
            ratios.append(seconds[False] / seconds[True])
        gains[mode] = statistics.median(ratios)
    del models
    keras.backend.clear_session()
    gc.collect()
    return gains


def report(gains: dict[str, dict[str, float]], args, shape: dict) -> str:
    """The Markdown section: how it was measured, then one row per variant."""
    import importlib

    import keras

    from kerasbert.perf.onednn import cpu_flags
    from kerasbert.perf.variants import MEASURED, VARIANTS, machine_kind

    kind, backend = machine_kind(), keras.config.backend()
    version = importlib.import_module(backend).__version__
    flags = " ".join(f for f in SHOWN_FLAGS if f in cpu_flags()) or "none of " + " ".join(SHOWN_FLAGS)
    command = "python benchmarks/variants.py" + (" --quick" if args.quick else
                                                 f" --layers {args.layers} --rounds {args.rounds}") + (
        f" --policy {args.policy}" if args.policy != "float32" else "")
    lines = [f"## Speed variants: what each buys on this machine ({kind})", "",
             f"`{command}` — hidden {shape['hidden_size']}, {shape['num_attention_heads']} heads, inner "
             f"{shape['intermediate_size']}, {args.layers} layers, `heads.cls`; training {args.train_batch} × "
             f"{args.seq} (`train_on_batch`), inference {args.infer_batch} × {args.seq} (`predict_on_batch`); "
             f"{args.policy} (float32_activation, half_gradients: mixed_bfloat16). Gain: median over interleaved "
             f"rounds of the paired ratio variant off / on (above 1.00: the variant is faster). "
             f"{os.cpu_count()} CPU cores, {platform.machine()}, CPU flags: {flags}; Keras {keras.__version__} on "
             f"{backend} {version}.",
             "", "| variant | what | machine kind | runs here by default | inference gain | training gain | rounds |",
             "|---|---|---|---|---|---|---|"]
    for name in [n for n in (*MEASURED, CONTROL) if n in gains]:
        cells = [f"{gains[name][mode]:.3f} ×" if mode in gains[name] else "—" for mode in MODES]
        if name == CONTROL:
            what, runs = "(no variant: two identical models, the noise floor)", "—"
        else:
            what, runs = VARIANTS[name].what, "yes" if kind in VARIANTS[name].kinds else "no"
        lines.append(f"| {name} | {what} | {kind} | {runs} | {cells[1]} | {cells[0]} | {args.rounds} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import keras

    from kerasbert.perf.variants import MEASURED, machine_kind

    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # each model traces its own step functions: TensorFlow warns of retracing

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model and 2 rounds: checks that it runs")
    parser.add_argument("--variants", default=",".join([*MEASURED, CONTROL]),
                        help=f"comma-separated subset of the variants and {CONTROL!r} (two identical models)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--train-batch", type=int, default=8)
    parser.add_argument("--infer-batch", type=int, default=16)
    parser.add_argument("--policy", default="float32", help="the models' dtype policy (float32_activation's: "
                        "mixed_bfloat16), e.g. mixed_bfloat16 where half precision is the speed option (a GPU)")
    parser.add_argument("--results", default=None, help="the file to write the section to (RESULTS.md)")
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    unknown = sorted(set(names) - {*MEASURED, CONTROL})
    if unknown:
        parser.error(f"--variants: unknown {unknown}; expected some of {sorted(MEASURED)}")
    shape = TINY if args.quick else FULL
    if args.quick:
        args.layers, args.rounds, args.warmup, args.seq, args.train_batch, args.infer_batch = 1, 2, 1, 16, 2, 2
    gains = {}
    for name in names:
        gains[name] = measure(name, args, shape)
        print(name, {mode: round(g, 3) for mode, g in gains[name].items()}, flush=True)
    text = report(gains, args, shape)
    print(text)
    from benchmarks.results import RESULTS, write_section

    write_section(f"variants-{machine_kind()}", text, args.results or RESULTS)


if __name__ == "__main__":
    main()
