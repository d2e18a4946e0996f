"""Shared test helpers: tiny configs, random Google checkpoints, the bert4keras oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = {
    "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def google_shapes(cfg: dict, heads: bool = True) -> dict[str, tuple[int, ...]]:
    """Every variable of a Google BERT checkpoint for ``cfg``, with its shape (the names Google's BERT release uses)."""
    V, H, inner = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    shapes = {
        "bert/embeddings/word_embeddings": (V, H),
        "bert/embeddings/token_type_embeddings": (cfg["type_vocab_size"], H),
        "bert/embeddings/position_embeddings": (cfg["max_position_embeddings"], H),
        "bert/embeddings/LayerNorm/gamma": (H,), "bert/embeddings/LayerNorm/beta": (H,),
        "bert/pooler/dense/kernel": (H, H), "bert/pooler/dense/bias": (H,),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert/encoder/layer_{i}/"
        for part in ("query", "key", "value"):
            shapes[p + f"attention/self/{part}/kernel"] = (H, H)
            shapes[p + f"attention/self/{part}/bias"] = (H,)
        shapes.update({
            p + "attention/output/dense/kernel": (H, H), p + "attention/output/dense/bias": (H,),
            p + "attention/output/LayerNorm/gamma": (H,), p + "attention/output/LayerNorm/beta": (H,),
            p + "intermediate/dense/kernel": (H, inner), p + "intermediate/dense/bias": (inner,),
            p + "output/dense/kernel": (inner, H), p + "output/dense/bias": (H,),
            p + "output/LayerNorm/gamma": (H,), p + "output/LayerNorm/beta": (H,),
        })
    if heads:
        shapes.update({
            "cls/predictions/transform/dense/kernel": (H, H), "cls/predictions/transform/dense/bias": (H,),
            "cls/predictions/transform/LayerNorm/gamma": (H,), "cls/predictions/transform/LayerNorm/beta": (H,),
            "cls/predictions/output_bias": (V,),
            "cls/seq_relationship/output_weights": (2, H), "cls/seq_relationship/output_bias": (2,),
        })
    return shapes


def random_google_weights(cfg: dict, seed: int = 0, heads: bool = True, extra=None,
                          std: float = 0.2) -> dict[str, np.ndarray]:
    """Random float32 values for every Google variable; LayerNorm gammas near 1."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in google_shapes(cfg, heads).items():
        value = rng.normal(0.0, std, shape)
        values[name] = (value + 1.0 if name.endswith("gamma") else value).astype(np.float32)
    values.update(extra or {})
    return values


def write_checkpoint(folder: str, values: dict[str, np.ndarray], cfg: dict | None = None) -> str:
    """Write a TF1-format checkpoint (``bert_model.ckpt``) with exactly these names, plus bert_config.json."""
    import tensorflow as tf

    os.makedirs(folder, exist_ok=True)
    prefix = os.path.join(folder, "bert_model.ckpt")
    names = sorted(values)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(values[n]) for n in names])
    with open(os.path.join(folder, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "bert_model.ckpt"\n')
    if cfg is not None:
        with open(os.path.join(folder, "bert_config.json"), "w") as f:
            json.dump(cfg, f)
    return prefix


def random_batch(vocab_size: int, batch: int = 4, length: int = 12, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids with ragged padding (0) and two segments; row 0 unpadded, others shorter."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, vocab_size, (batch, length)).astype(np.int32)
    segment_ids = np.zeros((batch, length), np.int32)
    for row in range(batch):
        n = length - (row * length) // (batch + 1)
        token_ids[row, n:] = 0
        segment_ids[row, n // 2:n] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids}


def predict_task(folder: str, inputs: str, **kwargs) -> dict:
    """The oracle task that builds bert4keras's model from ``folder``'s config and checkpoint with ``kwargs`` and
    predicts on ``inputs`` (an npz of token_ids and segment_ids)."""
    return {"kind": "bert", "config": os.path.join(folder, "bert_config.json"),
            "checkpoint": os.path.join(folder, "bert_model.ckpt"), "kwargs": kwargs, "inputs": inputs}


def build_from(folder: str, model: str | None = None, **kwargs):
    """kerasbert's model of family ``model`` from ``folder``'s config and checkpoint, as `predict_task` builds
    bert4keras's."""
    from kerasbert import build_transformer_model

    return build_transformer_model(os.path.join(folder, "bert_config.json"), os.path.join(folder, "bert_model.ckpt"),
                                   model, verbose=False, **kwargs)


def write_vocab(folder, tokens) -> str:
    """A ``vocab.txt`` of ``tokens`` (one a line) in ``folder``; its path."""
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return path


SP_CHINESE = ("我们今天去北京大学看看天气很好中华人民共和国成立了自然语言处理是人工智能的一个方向"
              "模型训练数据文本生成摘要标题新闻")
SP_ENGLISH = ("the model reads text and writes a short title for each news story with language processing tools "
              "from data training summary").split()


def check_generation_scores(run: str, expected: dict, printed: str) -> None:
    """A seq2seq run's ``eval-dev.json`` (``kerasbert evaluate RUN``) holds ``expected``'s ROUGE and BLEU, and the
    command's output ``printed`` shows its ROUGE-L and BLEU."""
    import pytest

    with open(os.path.join(run, "eval-dev.json")) as f:
        scores = json.load(f)
    for key in ("rouge_1", "rouge_2", "rouge_l", "bleu"):
        assert scores[key] == pytest.approx(expected[key]), key
    assert f"ROUGE-L {scores['rouge_l']:.4f}" in printed and f"BLEU {scores['bleu']:.4f}" in printed


def write_sentencepiece(folder, model_type: str = "unigram", vocab_size: int = 250, **options) -> str:
    """A SentencePiece model trained on 600 generated lines of Chinese and English (seeded), with T5's special
    ids (``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, no ``<s>``) unless ``options`` say otherwise; its ``.model`` path."""
    import random

    import sentencepiece as spm

    rng = random.Random(0)
    lines = ["".join(rng.choice(SP_CHINESE) for _ in range(rng.randint(4, 16))) + " "
             + " ".join(rng.choice(SP_ENGLISH) for _ in range(rng.randint(2, 9))) + rng.choice(["", "。", "，", "!"])
             for _ in range(600)]
    prefix = os.path.join(folder, f"spiece_{model_type}")
    spm.SentencePieceTrainer.train(**{"sentence_iterator": iter(lines), "model_prefix": prefix,
                                      "model_type": model_type, "vocab_size": vocab_size, "hard_vocab_limit": False,
                                      "pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1, "minloglevel": 2, **options})
    return prefix + ".model"


TINY_T5 = {"hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3, "attention_head_size": 5,
           "intermediate_size": 20, "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
           "relative_attention_num_buckets": 32, "attention_scale": False, "is_dropout": True,
           "hidden_act": ["gelu", "linear"]}  # an mT5.1.1 config, its vocab_size the SentencePiece model's


def write_t5_pairs(path: str, count: int, seed: int) -> str:
    """``count`` JSONL pairs (seeded) at ``path``: a source of Chinese characters and English words, its target the
    English words."""
    import random

    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(count):
            words = " ".join(rng.choice(SP_ENGLISH) for _ in range(rng.randint(1, 4)))
            source = "".join(rng.choice(SP_CHINESE) for _ in range(rng.randint(2, 20))) + " " + words
            f.write(json.dumps({"source": source, "target": words}, ensure_ascii=False) + "\n")
    return path


LEGACY_ENV = {"TF_KERAS": "1", "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}  # bert4keras on tf-keras


def run_bert4keras(script: str, job: dict, workdir: str, name: str = "oracle") -> dict[str, np.ndarray]:
    """Run ``tests/<script> JOB.json`` under bert4keras (tf-keras) in a subprocess; the job gets ``"out"``, the
    npz the script writes, which is returned as a dict."""
    job_path, out = os.path.join(workdir, f"{name}_job.json"), os.path.join(workdir, f"{name}_out.npz")
    with open(job_path, "w") as f:
        json.dump({**job, "out": out}, f)
    proc = subprocess.run([sys.executable, os.path.join(HERE, script), job_path], env={**os.environ, **LEGACY_ENV},
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"bert4keras ({script}) failed:\n{proc.stderr[-4000:]}")
    with np.load(out) as data:
        return dict(data)


def run_oracle(tasks: list[dict], workdir: str) -> dict[str, np.ndarray]:
    """Run bert4keras's side of the parity tests (tests/oracle_bert4keras.py) on ``tasks``."""
    return run_bert4keras("oracle_bert4keras.py", {"tasks": tasks}, workdir)


def kill_mid_epoch(process, run: str, epoch: int = 1, timeout: float = 300) -> dict:
    """SIGKILL ``process`` (a `kerasbert train` into ``run``) once its saved state is inside ``epoch``
    (some steps of it done), and return that state."""
    import signal
    import time

    state_file = os.path.join(run, "state", "state.json")
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            state = json.load(open(state_file))
        except (OSError, ValueError):
            state = {}
        if state.get("epoch") == epoch and state.get("step", 0) > 0:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return json.load(open(state_file))


def xla_calls(fn, *specs, jit_compile: bool | None = None) -> tuple[list, list[str]]:
    """The calls that must compile with XLA (``_XlaMustCompile``) in the graph of ``tf.function(fn)`` traced for
    ``specs``, and every op's type."""
    import tensorflow as tf

    operations = tf.function(fn, jit_compile=jit_compile).get_concrete_function(*specs).graph.get_operations()
    return ([op for op in operations if op.node_def.attr.get("_XlaMustCompile") and op.get_attr("_XlaMustCompile")],
            [op.type for op in operations])


FRESH = """
import json, sys
sys.modules["kerasbert"] = None  # as on a serving host: kerasbert cannot be imported
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops, as TF Serving has them)
served = tf.saved_model.load(sys.argv[1])
out = served.signatures["serving_default"](text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({name: value.numpy().tolist() for name, value in out.items()}, default=bytes.decode))
"""


def export_formats(run: str, tmp_path_factory, formats) -> dict:
    """``{(format, int8): (export folder, what export returned)}`` of ``run`` exported in float32 in each of
    ``formats`` (``(format, int8)`` pairs), each into a folder of its own."""
    from kerasbert.serving.export import export

    out = {}
    for fmt, int8 in formats:
        folder = os.path.join(str(tmp_path_factory.mktemp(f"export-{fmt}-{int8}")), "export")
        out[fmt, int8] = folder, export(run, folder, format=fmt, int8=int8, precision="f32")
    return out


def savedmodel_without_kerasbert(folder: str, texts: list[str]) -> dict:
    """The ``serving_default`` outputs of the SavedModel ``folder`` on ``texts``, from a process where kerasbert
    cannot be imported."""
    done = subprocess.run([sys.executable, "-c", FRESH, folder, json.dumps(texts)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def run_quick_benchmark(script: str, tmp_path) -> str:
    """Run ``benchmarks/<script> --quick`` writing its section into a RESULTS.md under ``tmp_path``; assert it exited
    0 and return that file's text."""
    import subprocess
    import sys

    results = str(tmp_path / "RESULTS.md")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, os.path.join(root, "benchmarks", script), "--quick", "--results", results]
    process = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert process.returncode == 0, process.stderr[-3000:]
    with open(results, encoding="utf-8") as f:
        return f.read()
