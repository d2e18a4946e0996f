"""Training steps equal bert4keras's: 20 Adam steps from the same weights, the same losses and weights after.

Both sides start from one Google checkpoint (dropout 0 in its config), get the same head weights, and
train one batch at a time with plain Adam (Keras's here, tf.keras's there) on the same batches in the
same order. Tolerances, float32:

- losses: ``rtol 2e-6, atol 1e-5``; the two graphs sum in different orders, and 20 steps of Adam carry
  those last-bit differences forward without growing them.
- every trained weight: ``atol lr / 10``. A weight moves by about ``lr`` per Adam step whatever its
  gradient's size, so a weight whose update differed in direction even once would be off by ``lr``;
  what is left is rounding.
- the attention's key bias is the exception: its gradient is zero in exact arithmetic (adding one
  vector to every key adds the same score to every key of a query, which the softmax ignores), so each
  side's Adam steps follow the sign of its own rounding noise. It is held to ``2 · lr · steps``, and the
  query and value biases beside it to ``lr / 10``.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import build_transformer_model, heads, save_google_checkpoint
from kerasbert.modeling.crf import crf_layers
from kerasbert.text.masking import MaskingRule, mask_batch

import helpers

pytestmark = pytest.mark.slow  # trains, spawns workers or runs a benchmark

STEPS, BATCH, LENGTH, LABELS, LR = 20, 4, 12, 5, 1e-3
CONFIG = dict(helpers.TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
CASES = {"cls": {"head": "cls"}, "tagging": {"head": "tagging"},
         "crf": {"head": "crf", "lr_multiplier": 1}, "crf-lr1000": {"head": "crf", "lr_multiplier": 1000},
         # the other families, each from a checkpoint bert4keras writes in its own names
         "albert-cls": {"head": "cls", "model": "albert"}, "nezha-tagging": {"head": "tagging", "model": "nezha"},
         "electra-cls": {"head": "cls", "model": "electra"}, "roformer-crf": {"head": "crf", "model": "roformer"},
         "roformer_v2-cls": {"head": "cls", "model": "roformer_v2"},
         # language models on their MLM output, next-token labels (bert4keras's application=)
         "lm": {"head": "lm", "model": "bert", "application": "lm"},
         "unilm": {"head": "lm", "model": "bert", "application": "unilm"},
         "roformer-unilm": {"head": "lm", "model": "roformer", "application": "unilm"},
         # masked-LM pretraining: bert4keras's with_mlm model and masked cross-entropy, on whole-word masks
         "mlm": {"head": "lm", "model": "bert", "application": "encoder"},
         # ... with next sentence prediction: bert4keras's with_nsp and with_mlm model, the two losses summed
         "mlm-nsp": {"head": "pretrain", "model": "bert", "application": "encoder"}}
TOP_BLOCK_KERNELS = ("layer_1/output/dense/kernel", "inner_group_0/ffn_1/intermediate/output/dense/kernel")
EMBEDDING_SIZE = {"albert": 16, "electra": 16, "roformer": 16}  # E < H where the family's checkpoints have it


def batches(seed: int) -> dict[str, np.ndarray]:
    """``STEPS`` ragged batches stacked in order, with random labels (0 on padding), and next-token labels: for
    "lm" every next real token, for "unilm" the next token where it is a target (segment 1)."""
    rows = [helpers.random_batch(CONFIG["vocab_size"], BATCH, LENGTH, seed=seed + i) for i in range(STEPS)]
    data = {key: np.concatenate([row[key] for row in rows]) for key in ("token_ids", "segment_ids")}
    rng = np.random.default_rng(seed)
    data["tag_labels"] = rng.integers(0, LABELS, data["token_ids"].shape) * (data["token_ids"] > 0)
    data["cls_labels"] = rng.integers(0, LABELS, len(data["token_ids"]))
    data["nsp_labels"] = rng.integers(0, 2, len(data["token_ids"]))
    following = np.pad(data["token_ids"][:, 1:], ((0, 0), (0, 1)))
    data["lm_labels"] = following
    data["unilm_labels"] = following * np.pad(data["segment_ids"][:, 1:], ((0, 0), (0, 1)))
    words = np.where(data["token_ids"] > 0, np.arange(LENGTH) // 2, -1)  # words of two pieces
    data["encoder_token_ids"], data["encoder_labels"] = mask_batch(
        data["token_ids"], words, MaskingRule(rate=0.3), seed=(seed, 0), mask_id=4, vocab_size=CONFIG["vocab_size"],
        special_ids=[0, 4])
    return data


def tokens_of(case: dict, data: dict) -> np.ndarray:
    """The input ids: masked ones for masked-LM pretraining."""
    return data["encoder_token_ids"] if case.get("application") == "encoder" else data["token_ids"]


def labels_of(case: dict, data: dict) -> np.ndarray:
    if case["head"] in ("lm", "pretrain"):
        return data[f"{case['application']}_labels"]
    return data["cls_labels"] if case["head"] == "cls" else data["tag_labels"]


def head_weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"kernel": rng.normal(0, 0.2, (CONFIG["hidden_size"], LABELS)).astype("float32"),
            "bias": rng.normal(0, 0.1, LABELS).astype("float32"),
            "trans": rng.normal(0, 0.5, (LABELS, LABELS)).astype("float32")}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Each case's data, head weights and bert4keras's losses and weights, from one oracle run."""
    work = str(tmp_path_factory.mktemp("step_parity"))
    helpers.write_checkpoint(work, helpers.random_google_weights(CONFIG, seed=4, heads=False), CONFIG)
    tasks = [family_checkpoint(work, *writer) for writer in sorted({_writer(case) for case in CASES.values()} - {()})]
    cases = {}
    for seed, (name, case) in enumerate(CASES.items()):
        index, folder = len(tasks), os.path.join(work, _folder(case))
        data, weights = batches(10 * seed), head_weights(seed)
        labels = labels_of(case, data)
        inputs, head = os.path.join(work, f"inputs-{index}.npz"), os.path.join(work, f"head-{index}.npz")
        nsp = {"nsp_labels": data["nsp_labels"]} if case["head"] == "pretrain" else {}
        np.savez(inputs, token_ids=tokens_of(case, data), segment_ids=data["segment_ids"], labels=labels, **nsp)
        np.savez(head, **weights)
        cases[name] = {**case, "index": index, "data": data, "labels": labels, "weights": weights}
        tasks.append({"kind": "train", "config": os.path.join(folder, "bert_config.json"),
                      "checkpoint": os.path.join(folder, "bert_model.ckpt"), "num_labels": LABELS, "lr": LR,
                      "batch_size": BATCH, "inputs": inputs, "head_weights": head, **case})
    return work, cases, helpers.run_oracle(tasks, work)


def _writer(case: dict) -> tuple:
    """(family, with_mlm, with_nsp) of the checkpoint a case starts from; () for the plain BERT checkpoint."""
    return (case["model"], case["head"] in ("lm", "pretrain"), case["head"] == "pretrain") if "model" in case else ()


def _folder(case: dict) -> str:
    writer = _writer(case)
    return f"{writer[0]}{'-mlm' if writer[1] else ''}{'-nsp' if writer[2] else ''}" if writer else ""


def family_checkpoint(work: str, family: str, with_mlm: bool = False, with_nsp: bool = False) -> dict:
    """The oracle task that writes a random checkpoint of ``family`` in its own names (and its MLM and NSP layers
    where ``with_mlm`` and ``with_nsp``) into ``work/<family>[-mlm][-nsp]``."""
    folder = os.path.join(work, f"{family}{'-mlm' if with_mlm else ''}{'-nsp' if with_nsp else ''}")
    os.makedirs(folder)
    config = dict(CONFIG, **({"embedding_size": EMBEDDING_SIZE[family]} if family in EMBEDDING_SIZE else {}))
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(config, f)
    kwargs = {**({"with_mlm": True} if with_mlm else {}), **({"with_nsp": True} if with_nsp else {})}
    return {"kind": "family_checkpoint", "model": family, "kwargs": kwargs, "seed": 5,
            "std": 0.2, "config": os.path.join(folder, "bert_config.json"),
            "checkpoint": os.path.join(folder, "bert_model.ckpt")}


def train_kerasbert(work: str, case: dict):
    """kerasbert's model for ``case`` after the same steps: (model, losses)."""
    folder = os.path.join(work, _folder(case))
    backbone = build_transformer_model(os.path.join(folder, "bert_config.json"),
                                       os.path.join(folder, "bert_model.ckpt"), case.get("model"),
                                       case.get("application", "encoder"), with_mlm=case["head"] in ("lm", "pretrain"),
                                       with_nsp=case["head"] == "pretrain", verbose=False)
    if case["head"] in ("lm", "pretrain"):
        model = backbone
    elif case["head"] == "cls":
        model = heads.cls(backbone, LABELS)
    else:
        model = heads.tagging(backbone, LABELS, crf=case["head"] == "crf",
                              crf_lr_multiplier=case.get("lr_multiplier", 1))
    if case["head"] not in ("lm", "pretrain"):
        dense = model.get_layer("CLS-Dense" if case["head"] == "cls" else "Tagging-Dense")
        dense.set_weights([case["weights"]["kernel"], case["weights"]["bias"]])
    for crf in crf_layers(model):
        crf._trans.assign(case["weights"]["trans"] / crf.lr_multiplier)
    model.compile(keras.optimizers.Adam(LR), **heads.loss_and_metrics(model))
    data, losses = case["data"], []
    for start in range(0, STEPS * BATCH, BATCH):
        rows = slice(start, start + BATCH)
        labels = case["labels"][rows]
        labels = (data["nsp_labels"][rows], labels) if case["head"] == "pretrain" else labels
        logs = model.train_on_batch([tokens_of(case, data)[rows], data["segment_ids"][rows]], labels,
                                    return_dict=True)
        losses.append(logs["loss"])
    return model, np.array(losses)


def kerasbert_weights(model: keras.Model, folder: str) -> dict[str, np.ndarray]:
    """The encoder's weights under their Google names (written by save_google_checkpoint), and the head's."""
    reader = tf.train.load_checkpoint(save_google_checkpoint(model, os.path.join(folder, "bert_model.ckpt")))
    weights = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    for layer in ("CLS-Dense", "Tagging-Dense"):
        if layer in [layer.name for layer in model.layers]:
            dense = model.get_layer(layer)
            weights.update({f"{layer}/kernel": keras.ops.convert_to_numpy(dense.kernel),
                            f"{layer}/bias": keras.ops.convert_to_numpy(dense.bias)})
    for crf in crf_layers(model):
        weights["Tagging-CRF/trans"] = keras.ops.convert_to_numpy(crf.trans)
    return weights


@pytest.mark.parametrize("name", CASES)
def test_twenty_adam_steps_equal_bert4keras(trained, name, tmp_path):
    work, cases, theirs = trained
    case = cases[name]
    model, losses = train_kerasbert(work, case)
    np.testing.assert_allclose(losses, theirs[f"{case['index']}/losses"], rtol=2e-6, atol=1e-5)
    assert np.isfinite(losses).all() and len(set(losses.tolist())) == STEPS  # each step saw a new batch

    ours = kerasbert_weights(model, str(tmp_path))
    initial = tf.train.load_checkpoint(os.path.join(work, _folder(case), "bert_model.ckpt"))
    prefix = f"{case['index']}/"
    names = sorted(key[len(prefix):] for key in theirs if key.startswith(prefix) and not key.endswith("losses"))
    assert set(names) == set(ours)
    assert any(name.endswith(TOP_BLOCK_KERNELS) for name in names)  # the check below runs: the steps trained
    for variable in names:
        diff = np.abs(ours[variable] - theirs[prefix + variable])
        bound = 2 * LR * STEPS if variable.endswith("/self/key/bias") else LR / 10
        assert diff.max() <= bound, f"{variable}: max |kerasbert - bert4keras| {diff.max():.3g} > {bound:.3g}"
        if variable.endswith(TOP_BLOCK_KERNELS):  # the top block moved, so the check means something
            start = initial.get_tensor(variable)
            assert np.abs(ours[variable] - start).max() > 50 * diff.max()
