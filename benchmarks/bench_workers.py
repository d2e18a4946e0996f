"""The worker processes of ``bench.py``: each builds one variant's model and runs its steps when told to.

A worker prints WAIT before every batch and blocks until a line comes on stdin, then prints STEP and the
batch's seconds (`_timer` inside ``fit``/``predict``; `_gate` around ``train_on_batch``/``predict_on_batch``),
so the orchestrator in ``bench.py`` can step all workers in interleaved rounds.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time

NUM_CLASSES = 2


def _timer(base, mode: str):
    """A callback on ``base`` (Keras 3 or tf-keras) that lets the orchestrator step the worker: before each
    ``fit`` (train) or ``predict`` (infer) batch it prints WAIT and blocks until a line comes on stdin; after
    the batch it prints STEP and the batch's seconds. ``ready`` is when the first batch was reached."""

    class StepGate(base):
        def __init__(self):
            super().__init__()
            self.times, self.ready = [], None

        def begin(self, batch, logs=None):
            self.ready = self.ready or time.perf_counter()
            print("WAIT", flush=True)
            sys.stdin.readline()
            self.start = time.perf_counter()

        def end(self, batch, logs=None):
            _wait(logs)
            self.times.append(time.perf_counter() - self.start)
            print(f"STEP {self.times[-1]}", flush=True)

    hook = "train" if mode == "train" else "predict"
    setattr(StepGate, f"on_{hook}_batch_begin", StepGate.begin)
    setattr(StepGate, f"on_{hook}_batch_end", StepGate.end)
    return StepGate()


def _wait(logs) -> None:
    """Block until the batch's results exist: JAX returns them before its device is done (async dispatch)."""
    if isinstance(logs, dict):
        logs = list(logs.values())
    if isinstance(logs, (list, tuple)):
        for value in logs:
            _wait(value)
    elif hasattr(logs, "block_until_ready"):
        logs.block_until_ready()


def _inputs(cfg: dict, batches: int, batch: int, seq: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.integers(5, cfg["vocab_size"], size=(batches * batch, seq)).astype("int32")
    segments = np.zeros_like(ids)
    segments[:, seq // 2:] = 1
    labels = rng.integers(0, NUM_CLASSES, size=(batches * batch,)).astype("int32")
    return ids, segments, labels


def _set_policy(policy: str | None) -> None:
    if policy:
        import keras

        keras.mixed_precision.set_global_policy(policy)


def work_kerasbert(cfg, opts, mode, batch, seq, steps, warmup):
    from kerasbert import (
        build_transformer_model,  # before Keras, as users do: it turns oneDNN on (kerasbert.perf.onednn)
    )
    from kerasbert.finetune.tasks import task_of
    from kerasbert.finetune.training import TrainArgs, compile_model
    from kerasbert.text.readers import LabelSet

    _set_policy(opts.get("policy"))
    import keras

    ids, segments, labels = _inputs(cfg, steps + warmup, batch, seq)
    start = time.perf_counter()
    backbone = build_transformer_model(config=cfg, model=opts.get("model"), verbose=False)
    timer = _timer(keras.callbacks.Callback, mode)
    if mode == "infer":
        build = time.perf_counter() - start
        if "jit_compile" in opts:
            backbone.jit_compile = opts["jit_compile"]
        backbone.predict([ids, segments], batch_size=batch, callbacks=[timer], verbose=0)
    else:
        args = TrainArgs(task="cls", train="-", out="-", batch_size=batch, jit_compile=opts.get("jit_compile"))
        the_task = task_of(args)
        model = the_task.head(backbone, LabelSet([str(i) for i in range(NUM_CLASSES)]))
        compile_model(model, the_task, args, steps + warmup, cfg["num_hidden_layers"], opts.get("policy"))
        build = time.perf_counter() - start
        data = {"Input-Token": ids, "Input-Segment": segments}
        model.fit(data, labels, batch_size=batch, epochs=1, callbacks=[timer], verbose=0, shuffle=False)
    return build, timer.times[warmup:]


def work_bert4keras(cfg, opts, mode, batch, seq, steps, warmup):
    from bert4keras.models import build_transformer_model
    from tensorflow import keras  # tf-keras under TF_USE_LEGACY_KERAS=1

    ids, segments, labels = _inputs(cfg, steps + warmup, batch, seq)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    start = time.perf_counter()
    timer = _timer(keras.callbacks.Callback, mode)
    family = opts.get("model", "bert")
    if mode == "infer":
        model = build_transformer_model(f.name, None, model=family)
        build = time.perf_counter() - start
        model.predict([ids, segments], batch_size=batch, callbacks=[timer], verbose=0)
    else:
        pooled = family not in ("electra", "roformer_v2")  # no pooler in these two (ELECTRA refuses the argument)
        bert = build_transformer_model(f.name, None, model=family, **({"with_pool": True} if pooled else {}))
        x = bert.output if pooled else keras.layers.Lambda(lambda x: x[:, 0])(bert.output)
        x = keras.layers.Dropout(cfg["hidden_dropout_prob"])(x)
        model = keras.Model(bert.inputs, keras.layers.Dense(NUM_CLASSES, activation="softmax")(x))
        # bert4keras.optimizers.Adam needs the pre-2.11 optimizer API (_set_hyper); tf-keras's own Adam instead
        model.compile(keras.optimizers.Adam(2e-5), "sparse_categorical_crossentropy", metrics=["accuracy"])
        build = time.perf_counter() - start
        model.fit([ids, segments], labels, batch_size=batch, epochs=1, callbacks=[timer], verbose=0, shuffle=False)
    os.unlink(f.name)
    return build, timer.times[warmup:]


def work_keras_hub(cfg, opts, mode, batch, seq, steps, warmup):
    _set_policy(opts.get("policy"))
    import keras
    import keras_hub
    import numpy as np

    ids, segments, labels = _inputs(cfg, steps + warmup, batch, seq)
    data = {"token_ids": ids, "segment_ids": segments, "padding_mask": np.ones_like(ids, dtype=bool)}
    start = time.perf_counter()
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=cfg["vocab_size"], num_layers=cfg["num_hidden_layers"], num_heads=cfg["num_attention_heads"],
        hidden_dim=cfg["hidden_size"], intermediate_dim=cfg["intermediate_size"], dropout=cfg["hidden_dropout_prob"],
        max_sequence_length=cfg["max_position_embeddings"], num_segments=cfg["type_vocab_size"])
    timer = _timer(keras.callbacks.Callback, mode)
    if mode == "infer":
        build = time.perf_counter() - start
        backbone.predict(data, batch_size=batch, callbacks=[timer], verbose=0)
    else:
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=NUM_CLASSES, preprocessor=None)
        build = time.perf_counter() - start
        # keras-hub's own fit makes a tf.data (or grain) dataset of the arrays first; without either (JAX on
        # a GPU machine without TensorFlow) Keras's fit takes them as they are, as it does kerasbert's
        fit = model.fit if importlib.util.find_spec("tensorflow") else functools.partial(keras.Model.fit, model)
        fit(data, labels, batch_size=batch, epochs=1, callbacks=[timer], verbose=0, shuffle=False)
    return build, timer.times[warmup:]


def _gate(step, count: int) -> list[float]:
    """Run ``step()`` ``count`` times, each when the orchestrator says go (WAIT / STEP as `_timer`)."""
    times = []
    for _ in range(count):
        print("WAIT", flush=True)
        sys.stdin.readline()
        start = time.perf_counter()
        _wait(step())
        times.append(time.perf_counter() - start)
        print(f"STEP {times[-1]}", flush=True)
    return times


def work_b4k_way(cfg, opts, mode, batch, seq, steps, warmup):
    """The classifier as bert4keras's scripts build it, with ``opts["library"]``'s ``build_transformer_model``:
    ``Lambda(lambda x: x[:, 0])`` on the sequence output, ``Dense(2, softmax)``, tf-keras's or Keras's ``Adam``,
    stepped with ``train_on_batch`` (train) or ``predict_on_batch`` (infer)."""
    if opts["library"] == "kerasbert":
        import keras

        from kerasbert import build_transformer_model  # before Keras: it turns oneDNN on (kerasbert.perf.onednn)
    else:
        from bert4keras.models import build_transformer_model
        from tensorflow import keras  # tf-keras under TF_USE_LEGACY_KERAS=1
    ids, segments, labels = _inputs(cfg, steps + warmup, batch, seq)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    start = time.perf_counter()
    bert = build_transformer_model(f.name, None, model=opts.get("model", "bert"))
    x = keras.layers.Lambda(lambda x: x[:, 0])(bert.output)
    model = keras.Model(bert.inputs, keras.layers.Dense(NUM_CLASSES, activation="softmax")(x))
    model.compile(keras.optimizers.Adam(2e-5), "sparse_categorical_crossentropy", metrics=["accuracy"])
    build = time.perf_counter() - start
    os.unlink(f.name)
    batches = [(ids[i:i + batch], segments[i:i + batch], labels[i:i + batch]) for i in range(0, len(ids), batch)]
    it = iter(batches)

    def step():
        tokens, segment_ids, y = next(it)
        if mode == "infer":
            return model.predict_on_batch([tokens, segment_ids])
        return model.train_on_batch([tokens, segment_ids], y)

    times = _gate(step, steps + warmup)
    return build, times[warmup:]


def synthetic_text_data(folder: str, vocab_size: int, rows: int, chars: int, seed: int = 0) -> tuple[str, str]:
    """A vocab.txt of ``vocab_size`` tokens (specials + CJK characters) and a TSV of ``rows`` texts of
    ``chars`` random characters with random labels: every text fills ``maxlen`` word pieces."""
    rng = random.Random(seed)
    characters = [chr(0x4E00 + i) for i in range(vocab_size - 5)]
    vocab, data = os.path.join(folder, "vocab.txt"), os.path.join(folder, "train.tsv")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + characters) + "\n")
    with open(data, "w", encoding="utf-8") as f:
        for _ in range(rows):
            f.write("".join(rng.choices(characters, k=chars)) + f"\t{rng.randrange(NUM_CLASSES)}\n")
    return vocab, data


def work_kerasbert_train(cfg, opts, mode, batch, seq, steps, warmup):
    """``kerasbert.train`` end to end; also times tokenizing the same data (``encode``) per batch."""
    from kerasbert.finetune.tasks import task_of
    from kerasbert.finetune.training import TrainArgs, train
    from kerasbert.text.tokenizer import Tokenizer  # before Keras (kerasbert.perf.onednn)

    folder = tempfile.mkdtemp()
    import keras

    rows = (steps + warmup) * batch
    vocab, data = synthetic_text_data(folder, cfg["vocab_size"], rows, 2 * seq)
    config = os.path.join(folder, "bert_config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    the_task = task_of(TrainArgs(task="cls", train=data, out="-"))
    examples = the_task.read(data)
    tokenizer = Tokenizer(vocab)
    start = time.perf_counter()
    the_task.encode(tokenizer, examples, the_task.label_set(examples), seq, data)
    tokenize = (time.perf_counter() - start) / (steps + warmup)
    timer = _timer(keras.callbacks.Callback, mode)
    start = time.perf_counter()
    train("cls", data, os.path.join(folder, "run"), config=config, vocab=vocab, batch_size=batch, epochs=1,
          maxlen=seq, verbose=0, callbacks=[timer])
    return timer.ready - start, timer.times[warmup:], {"tokenize_s": tokenize}


def _matmul_products(dtype: str, shapes):
    """For each ``(m, k, n)``, the ways the Keras backend in use runs ``sum(a @ b)`` on random ``dtype``
    operands: callables that return once the result exists. TensorFlow: its plain graph and XLA; JAX: XLA."""
    import keras

    if keras.config.backend() == "jax":
        import jax
        import jax.numpy as jnp

        product = jax.jit(lambda x, y: jnp.sum(jnp.matmul(x, y), dtype="float32"))
        for m, k, n in shapes:
            a, b = (jax.random.normal(jax.random.key(seed), shape).astype(dtype)
                    for seed, shape in ((0, (m, k)), (1, (k, n))))
            yield m * k * n, [lambda a=a, b=b: product(a, b).block_until_ready()]
        return
    import tensorflow as tf

    products = [tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)), jit_compile=jit) for jit in (False, True)]
    for m, k, n in shapes:
        a, b = (tf.cast(tf.random.normal(shape), dtype) for shape in ((m, k), (k, n)))
        yield m * k * n, [lambda fn=fn, a=a, b=b: fn(a, b).numpy() for fn in products]


def work_matmul(cfg, opts, mode, batch, seq, steps, warmup, device="cpu"):
    """Best GFLOP/s of the model's own matmul shapes ([B·S, H]·[H, 3H], [H, I], [I, H]) and of a square
    [B·S, B·S]·[B·S, B·S] one, each way the backend runs them (`_matmul_products`), in float32 (and the
    mixed dtypes); ``step_s`` is unused. The orchestrator runs it at the start and the end of the run (on
    TensorFlow's CPU with and without oneDNN) and takes the best."""
    rows, h, i = batch * seq, cfg["hidden_size"], cfg["intermediate_size"]
    shapes = [(rows, h, 3 * h), (rows, h, i), (rows, i, h), (rows, rows, rows)]
    peaks = {}
    for dtype in ("float32",) + (("float16", "bfloat16") if device == "gpu" else ("bfloat16",)):
        best = 0.0
        for multiply_adds, runs in _matmul_products(dtype, shapes):
            for run in runs:
                run()
                times = []
                for _ in range(max(5, steps)):
                    t = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - t)
                best = max(best, 2 * multiply_adds / statistics.median(times) / 1e9)
        peaks[dtype] = best
    return 0.0, [0.0], {"peak_gflops": peaks}


WORKERS = {"kerasbert": work_kerasbert, "bert4keras": work_bert4keras, "keras_hub": work_keras_hub,
           "kerasbert_train": work_kerasbert_train, "matmul": work_matmul, "b4k_way": work_b4k_way}


def gpu_peak_mb() -> float | None:
    """The most GPU memory this process held (MB), as its framework counts it; None where unknown."""
    if "jax" in sys.modules:
        import jax

        return (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use", 0) / 2**20 or None
    import tensorflow as tf

    return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20 if tf.config.list_logical_devices(
        "GPU") else None
