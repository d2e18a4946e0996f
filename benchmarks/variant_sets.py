"""Speed variants measured as sets on a 12-layer BERT-base: which arm of forced choices steps fastest.

```bash
python benchmarks/variant_sets.py '{"dense_2d": {"dense_2d": true}, "all": {"dense_2d": true, "xla_gelu": true}}'
python benchmarks/variant_sets.py '{"default": {}, "norm": {"centred_layer_norm": true}}' --mode infer --rounds 12
```

Each arm (a name and the variants it forces on or off, `kerasbert.perf.variants.forced`; the others as this
machine's kind chooses) builds the classifier bert4keras's scripts build (``Lambda(x[:, 0])`` + ``Dense(2)``,
Adam; ``--mode train``: ``train_on_batch`` on 8 × 128) or the bare backbone (``--mode infer``:
``predict_on_batch`` on 16 × 128), all in this one process; they are then stepped in interleaved rounds, the order
reversed every round, and each arm's median and its paired median against the first arm are printed. The CPU
variants interact, so this measures a variant inside a set (the set with and without it), which
``benchmarks/variants.py`` (each variant against the defaults, 2 layers) cannot see. Figures: benchmarks/HISTORY.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kerasbert  # noqa: E402, F401  (before Keras: it turns TensorFlow's oneDNN on, as users get it)


def build(choices: dict, mode: str, cfg: dict):
    """The model of one arm, traced (two warm-up steps) inside ``forced(choices)``; its step function."""
    import keras
    import numpy as np

    from kerasbert import build_transformer_model
    from kerasbert.perf.variants import forced

    rng = np.random.default_rng(0)
    batch = 8 if mode == "train" else 16
    length = min(128, cfg["max_position_embeddings"])
    ids = rng.integers(5, cfg["vocab_size"], size=(batch, length)).astype("int32")
    inputs, labels = [ids, np.zeros_like(ids)], rng.integers(0, 2, size=(batch,))
    with forced(choices):
        bert = build_transformer_model(config=cfg, verbose=False)
        if mode == "train":
            x = keras.layers.Lambda(lambda t: t[:, 0])(bert.output)
            model = keras.Model(bert.inputs, keras.layers.Dense(2, activation="softmax")(x))
            model.compile(keras.optimizers.Adam(2e-5), "sparse_categorical_crossentropy")

            def step():
                return model.train_on_batch(inputs, labels)
        else:
            def step():
                return bert.predict_on_batch(inputs)
        step()
        step()
    return step


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arms", help='JSON: {"arm name": {"variant": true or false, ...}, ...}; the first is the base')
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--config", default="bert_base_chinese", help="a preset or bert_config.json")
    args = parser.parse_args(argv)
    from kerasbert.modeling.config import resolve_config

    cfg = resolve_config(args.config).to_dict()
    steps = {name: build(choices, args.mode, cfg) for name, choices in json.loads(args.arms).items()}
    names, times = list(steps), {name: [] for name in steps}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    for name in names:
        paired = statistics.median(a / b for a, b in zip(times[names[0]], times[name], strict=True))
        print(f"{name}: median {statistics.median(times[name]):.3f} s; {names[0]} / {name} paired {paired:.3f}")


if __name__ == "__main__":
    main()
