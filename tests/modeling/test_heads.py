"""Heads: graphs and names, parameter counts, bert4keras parity (MLM/NSP), save/load, training, errors."""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model, heads, load_google_checkpoint
from kerasbert.modeling.crf import ConditionalRandomField
from kerasbert.modeling.layers import TakeToken

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = [np.array([[2, 9, 17, 40, 3, 0, 0], [2, 5, 6, 7, 8, 9, 3], [2, 70, 3, 0, 0, 0, 0]]),
         np.array([[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]])]


@pytest.fixture(scope="module")
def bert():
    return build_transformer_model("tiny", verbose=False)


def new_layers(model: keras.Model, backbone: keras.Model) -> list[str]:
    names = {layer.name for layer in backbone.layers}
    return [layer.name for layer in model.layers if layer.name not in names]


HEADS = {
    "cls-first": (lambda b: heads.cls(b, 3), ["CLS-token", "CLS-Dense"]),
    "cls-first-dropout": (lambda b: heads.cls(b, 3, dropout=0.1), ["CLS-token", "CLS-Dropout", "CLS-Dense"]),
    "cls-pooler": (lambda b: heads.cls(b, 3, pooling="pooler"), ["Pooler", "Pooler-Dense", "CLS-Dense"]),
    "cls-mean": (lambda b: heads.cls(b, 3, pooling="mean", activation="sigmoid"), ["CLS-Mean", "CLS-Dense"]),
    "tagging": (lambda b: heads.tagging(b, 5), ["Tagging-Mask", "Tagging-Dense"]),
    "tagging-crf": (lambda b: heads.tagging(b, 5, crf=True, bilstm_units=4, dropout=0.1),
                    ["Tagging-BiLSTM", "Tagging-Dropout", "Tagging-Dense", "Tagging-CRF"]),
    "crf-decoder": (lambda b: heads.crf_decoder(heads.tagging(b, 5, crf=True)), ["Tagging-Dense", "Tagging-CRF"]),
    "mlm": (heads.mlm, ["MLM-Dense", "MLM-Norm", "MLM-Bias", "MLM-Activation"]),
    "nsp": (heads.nsp, ["Pooler", "Pooler-Dense", "NSP-Proba"]),
}


@pytest.mark.parametrize("name", HEADS)
def test_head_layers_are_flat_and_named(bert, name):
    build, expected = HEADS[name]
    model = build(bert)
    assert new_layers(model, bert) == expected
    assert not any(isinstance(layer, keras.Model) for layer in model.layers)  # bert4keras: one flat graph
    assert [t.name for t in model.inputs] == ["Input-Token", "Input-Segment"]


def test_parameter_counts_bert_base_chinese():
    base = build_transformer_model("bert_base_chinese", verbose=False)
    assert base.count_params() == 101_677_056
    model = heads.cls(base, 2)
    assert model.count_params() == 101_678_594  # + H·C+C = 768·2+2 = 1,538
    tagging = heads.tagging(base, 11, crf=True)
    assert tagging.get_layer("Tagging-Dense").count_params() == 8_459  # H·K+K = 768·11+11
    crf = tagging.get_layer("Tagging-CRF")
    assert crf.count_params() == 121 and str(crf.param_formula()) == "K·K = 11·11"


def test_heads_share_the_graph_of_build_flags(bert):
    def layout(model):
        return [(layer["class_name"], layer["name"], layer["inbound_nodes"]) for layer in model.get_config()["layers"]]

    assert layout(heads.mlm(bert)) == layout(build_transformer_model("tiny", with_mlm=True, verbose=False))
    assert layout(heads.nsp(bert)) == layout(build_transformer_model("tiny", with_nsp=True, verbose=False))


def test_head_built_by_hand_is_the_same_graph(bert):
    x = TakeToken(0, name="CLS-token")(bert.output)
    x = keras.layers.Dense(2, activation="softmax", name="CLS-Dense")(x)
    by_hand, model = keras.Model(bert.inputs, x), heads.cls(bert, 2, first_token_only=False)
    configs = [[(layer["class_name"], layer["name"], layer["inbound_nodes"]) for layer in m.get_config()["layers"]]
               for m in (by_hand, model)]
    assert configs[0] == configs[1] and by_hand.count_params() == model.count_params()
    model.get_layer("CLS-Dense").set_weights(by_hand.get_layer("CLS-Dense").get_weights())
    np.testing.assert_array_equal(model.predict(BATCH, verbose=0), by_hand.predict(BATCH, verbose=0))


@pytest.mark.parametrize("pooling", ["first", "pooler"])
def test_classifier_runs_its_last_block_for_cls_alone_with_the_same_outputs_and_gradients(bert, pooling):
    import tensorflow as tf

    trimmed = heads.cls(bert, 3, pooling=pooling, dropout=0.1)
    full = heads.cls(bert, 3, pooling=pooling, dropout=0.1, first_token_only=False)
    full.set_weights(trimmed.get_weights())
    assert sorted(layer.name for layer in trimmed.layers) == sorted(layer.name for layer in full.layers)
    assert trimmed.count_params() == full.count_params()
    # [CLS] is taken from block 0's output; block 1 then runs on [B, H], not [B, S, H]
    taken = trimmed.get_layer("CLS-token" if pooling == "first" else "Pooler")
    assert taken.input is bert.get_layer("Transformer-0-FeedForward-Norm").output
    block_input = keras.Model(trimmed.inputs, trimmed.get_layer("CLS-Dense").input)
    assert tuple(block_input.output.shape) == (None, 32)
    np.testing.assert_allclose(trimmed.predict(BATCH, verbose=0), full.predict(BATCH, verbose=0), atol=1e-6)
    grads = []
    for model in (trimmed, full):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(BATCH, training=False) * np.arange(3.0, dtype="float32"))
        grads.append({v.path: g for v, g in zip(model.trainable_variables,
                                                 tape.gradient(loss, model.trainable_variables), strict=True)})
    assert grads[0].keys() == grads[1].keys()
    for path, g in grads[0].items():
        np.testing.assert_allclose(tf.convert_to_tensor(g), tf.convert_to_tensor(grads[1][path]), atol=1e-6,
                                   err_msg=path)


def test_pooler_comes_from_the_backbone_or_the_checkpoint(tiny_ckpt):
    config, ckpt = os.path.join(tiny_ckpt, "bert_config.json"), os.path.join(tiny_ckpt, "bert_model.ckpt")
    pooled = build_transformer_model(config, ckpt, with_pool=True, verbose=False)
    assert heads.cls(pooled, 2, pooling="pooler").get_layer("Pooler-Dense") is pooled.get_layer("Pooler-Dense")
    model = heads.cls(build_transformer_model(config, verbose=False), 2, pooling="pooler")
    report = load_google_checkpoint(model, ckpt, verbose=False)
    expected = helpers.random_google_weights(helpers.TINY, seed=1)["bert/pooler/dense/kernel"]
    np.testing.assert_array_equal(model.get_layer("Pooler-Dense").kernel.numpy(), expected)
    assert [path for path, _ in report.new] == ["CLS-Dense/kernel", "CLS-Dense/bias"]


def test_mean_pooling_ignores_padding(bert):
    model = heads.cls(bert, 2, pooling="mean")
    pooled = keras.Model(model.inputs, model.get_layer("CLS-Mean").output).predict(BATCH, verbose=0)
    sequence = bert.predict(BATCH, verbose=0)
    mask = BATCH[0] != 0
    expected = (sequence * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    np.testing.assert_allclose(pooled, expected, atol=1e-6)


@pytest.mark.parametrize("case, head", [("tiny-3", heads.nsp), ("tiny-4", heads.mlm)])
def test_mlm_and_nsp_equal_bert4keras(oracle, case, head):
    cases, theirs = oracle
    case = cases[case]
    backbone = build_transformer_model(os.path.join(case["folder"], "bert_config.json"), verbose=False)
    model = head(backbone)
    load_google_checkpoint(model, os.path.join(case["folder"], "bert_model.ckpt"), verbose=False)
    data = np.load(case["inputs"])
    ours = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    reference = theirs[f"{case['index']}/0"]
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family, flags", [("bert", {"with_nsp": True}), ("albert", {"embedding_size": 16}),
                                          ("roformer_v2", {})])
def test_pretraining_gives_the_with_mlm_probabilities_at_the_positions_asked(family, flags):
    """`heads.pretraining` on a ``with_mlm`` backbone (its masked-LM weights random, so that copying them shows): at
    any positions, repeated or padding, the ``with_mlm`` model's probabilities there, its NSP output unchanged; the
    only new names are the positions' input and the gather."""
    full = build_transformer_model("tiny", model=family, with_mlm=True, verbose=False, **flags)
    rng = np.random.default_rng(0)
    for layer in full.layers:
        if layer.name.startswith(("MLM-", "Output-")):
            layer.set_weights([rng.normal(size=w.shape) for w in layer.get_weights()])
    model = heads.pretraining(full)
    positions = np.array([[0, 3, 3], [6, 1, 0], [2, 0, 0]])
    expected, found = full.predict(BATCH, verbose=0), model.predict([*BATCH, positions], verbose=0)
    expected, found = ([x] if isinstance(x, np.ndarray) else x for x in (expected, found))
    assert found[-1].shape == (3, 3, 128)
    np.testing.assert_allclose(found[-1], np.take_along_axis(expected[-1], positions[..., None], axis=1), atol=1e-6)
    for ours, theirs in zip(found[:-1], expected[:-1], strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert set(new_layers(model, full)) == {"Input-MLM-Positions", "MLM-Gather"}


def test_pretraining_needs_a_with_mlm_backbone(bert):
    with pytest.raises(ModelError, match="MLM-Activation: expected a model built with_mlm"):
        heads.pretraining(bert)


@pytest.mark.parametrize("name", HEADS)
def test_save_and_load_without_custom_objects(tmp_path, bert, name):
    model = HEADS[name][0](bert)
    path = str(tmp_path / f"{name}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects
    np.testing.assert_array_equal(loaded.predict(BATCH, verbose=0), model.predict(BATCH, verbose=0))
    if name == "crf-decoder":
        assert (loaded.predict(BATCH, verbose=0)[BATCH[0] == 0] == -1).all()


# --- training: each head learns a small synthetic task on the tiny model (vocab 128) -----------------------

def frame(rng, n: int, length: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] filler… [SEP] then padding; fillers 5..63; returns token ids and lengths (6..length)."""
    lengths = rng.integers(6, length + 1, n)
    tokens = np.where(np.arange(length) < lengths[:, None], rng.integers(5, 64, (n, length)), 0)
    tokens[:, 0], tokens[np.arange(n), lengths - 1] = 2, 3
    return tokens.astype(np.int32), lengths


def marker_class(rng, n):
    """3 classes: the class c is the marker token 100+c hidden at a random position."""
    tokens, lengths = frame(rng, n)
    labels = rng.integers(0, 3, n)
    tokens[np.arange(n), rng.integers(1, lengths - 1)] = 100 + labels
    return [tokens, np.zeros_like(tokens)], labels


def marker_segment(rng, n):
    """Sentence pairs: the label says whether marker 100 is in the second segment (1) or the first (0)."""
    tokens, lengths = frame(rng, n)
    segments, labels = np.zeros_like(tokens), rng.integers(0, 2, n)
    for i, length in enumerate(lengths):
        cut = rng.integers(3, length - 2)
        tokens[i, cut], segments[i, cut + 1:length] = 3, 1
        tokens[i, rng.integers(cut + 1, length - 1) if labels[i] else rng.integers(1, cut)] = 100
    return [tokens, segments], labels


def token_bucket(rng, n):
    """Per-token labels: token id // 32 (4 labels); padding labelled 0."""
    tokens, _ = frame(rng, n)
    tokens = np.where(tokens > 3, rng.integers(5, 128, tokens.shape), tokens).astype(np.int32)
    return [tokens, np.zeros_like(tokens)], tokens // 32


def entity_spans(rng, n):
    """BIO tags (O 0, B 1, I 2): runs of 1-3 tokens from 64..127 are entities, fillers 5..63 are O."""
    tokens, lengths = frame(rng, n)
    labels = np.zeros_like(tokens)
    for i, length in enumerate(lengths):
        t = 1
        while t < length - 1:
            span = min(rng.integers(1, 4), length - 1 - t) if rng.random() < 0.35 else 0
            tokens[i, t:t + span] = rng.integers(64, 128, span)
            labels[i, t:t + span] = [1] + [2] * (span - 1) if span else []
            t += span + 1
    return [tokens, np.zeros_like(tokens)], labels


def copy_masked(rng, n):
    """MLM: every filler is one token t; two positions are [MASK] (id 1) with label t, others label 0."""
    tokens, lengths = frame(rng, n)
    labels = np.zeros_like(tokens)
    for i, length in enumerate(lengths):
        tokens[i, 1:length - 1] = rng.integers(5, 128)
        masked = rng.choice(np.arange(1, length - 1), 2, replace=False)
        labels[i, masked], tokens[i, masked] = tokens[i, 1], 1
    return [tokens, np.zeros_like(tokens)], labels


# name: (head, data, steps, max held-out loss, chance loss, min held-out accuracy)
TASKS = {
    "cls": (lambda b: heads.cls(b, 3, dropout=0.1), marker_class, 200, 0.1, np.log(3), 0.95),
    "nsp": (heads.nsp, marker_segment, 200, 0.1, np.log(2), 0.95),
    "tagging": (lambda b: heads.tagging(b, 4), token_bucket, 200, 0.1, np.log(4), 0.95),
    "tagging-bilstm-crf": (lambda b: heads.tagging(b, 3, crf=True, bilstm_units=16, dropout=0.1), entity_spans,
                           200, 1.5, 9 * np.log(3), 0.95),  # CRF loss is per sequence (≈ 9 real tokens)
    "mlm": (heads.mlm, copy_masked, 300, 1.5, np.log(128), 0.8),
}


def accuracy(model, x, y) -> float:
    """Held-out accuracy on real tokens (Viterbi paths for the CRF), masked tokens for MLM, rows otherwise."""
    if any(isinstance(layer, ConditionalRandomField) for layer in model.layers):
        predicted = heads.crf_decoder(model).predict(x, verbose=0)
    else:
        predicted = model.predict(x, verbose=0).argmax(-1)
    if y.ndim == 1:
        return float((predicted == y).mean())
    keep = y != 0 if model.layers[-1].name == "MLM-Activation" else x[0] != 0
    return float((predicted == y)[keep].mean())


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_each_head_learns_a_synthetic_task(name):
    build, data, steps, max_loss, chance, min_accuracy = TASKS[name]
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    model = build(build_transformer_model("tiny", verbose=False))
    model.compile(keras.optimizers.Adam(2e-3), **heads.loss_and_metrics(model))
    x, y = data(rng, 32 * steps)  # fresh examples for every step: one epoch
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    x_test, y_test = data(rng, 256)
    loss = model.evaluate(x_test, y_test, verbose=0, return_dict=True)["loss"]
    assert loss < max_loss < chance / 2
    assert accuracy(model, x_test, y_test) >= min_accuracy


def test_softmax_tagging_loss_and_accuracy_skip_padding(bert):
    # By hand: the mean cross-entropy and accuracy over the real tokens only, as on bert4keras's masked output.
    model = heads.tagging(bert, 4)
    model.compile("adam", **heads.loss_and_metrics(model))
    labels = np.random.default_rng(0).integers(0, 4, BATCH[0].shape)
    probabilities = model.predict(BATCH, verbose=0)
    real = BATCH[0] != 0
    chosen = np.take_along_axis(probabilities, labels[..., None], -1)[..., 0]
    scores = model.evaluate(BATCH, labels, verbose=0, return_dict=True)
    assert scores["loss"] == pytest.approx(-np.log(chosen[real]).mean(), rel=1e-5)
    assert scores["sparse_categorical_accuracy"] == pytest.approx((probabilities.argmax(-1) == labels)[real].mean())


# --- bad input ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda b: heads.cls(b, 0), "num_classes: expected an integer >= 1, found 0"),
    (lambda b: heads.cls(b, 2.0), "num_classes: expected an integer >= 1, found 2.0"),
    (lambda b: heads.tagging(b, 0), "num_labels: expected an integer >= 1, found 0"),
    (lambda b: heads.tagging(b, 3, bilstm_units=0), "bilstm_units: expected an integer >= 1, found 0"),
    (lambda b: heads.cls(b, 2, pooling="max"), "pooling: expected 'first' or 'pooler' or 'mean', found 'max'"),
    (lambda b: heads.cls(b, 2, activation="softmaxx"), "activation: expected a Keras activation name .*'softmaxx'"),
    (lambda b: heads.cls(b, 2, dropout=1.5), r"dropout: expected None or a rate in \[0, 1\), found 1.5"),
    (lambda b: heads.loss_and_metrics(b), "loss_and_metrics: expected a model whose outputs come from Tagging-CRF"),
])
def test_bad_arguments_raise_one_clear_error(bert, call, message):
    with pytest.raises(ModelError, match=message):
        call(bert)


@pytest.mark.parametrize("flags, head", [({"with_pool": True}, heads.tagging),
                                         ({"with_mlm": True}, lambda b, *_: heads.mlm(b)),
                                         ({"with_nsp": True}, lambda b, *_: heads.cls(b, 2))])
def test_heads_need_the_sequence_output(flags, head):
    backbone = build_transformer_model("tiny", verbose=False, **flags)
    with pytest.raises(ModelError, match=r"head: expected a backbone whose output is the sequence output "
                                         r"\[batch, seq, H\], found outputs \(None, "):
        head(backbone, 3)


def test_classifier_in_few_lines_example(tmp_path):
    helpers.write_checkpoint(str(tmp_path), helpers.random_google_weights(helpers.TINY, seed=5), helpers.TINY)
    script = os.path.join(ROOT, "examples", "classifier_in_few_lines.py")
    source = open(script).read()
    code = source.split('"""', 2)[2]  # after the module docstring
    assert len([line for line in code.splitlines() if line.strip() and not line.startswith("#")]) <= 15
    proc = subprocess.run([sys.executable, script, str(tmp_path / "bert_config.json"),
                           str(tmp_path / "bert_model.ckpt")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CLS-Dense (Dense)" in proc.stdout and "probabilities (2, 2)" in proc.stdout
    assert "name = bert/pooler/dense/kernel" not in proc.stderr  # pooling="first": the pooler stays unused


@pytest.mark.parametrize("family, config", [("gpt2", "tiny"), ("t5.1.1", None)])
def test_a_language_model_takes_no_task_head(family, config):
    from kerasbert import build_transformer_model

    t5 = {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
          "attention_head_size": 8, "intermediate_size": 32, "hidden_act": ["gelu", "linear"],
          "relative_attention_num_buckets": 32}
    model = build_transformer_model(config, config=None if config else t5, model=family, verbose=False)
    for head, call in (("cls", lambda: heads.cls(model, 2)), ("tagging", lambda: heads.tagging(model, 3)),
                       ("embedding", lambda: heads.embedding(model))):
        with pytest.raises(ModelError, match=rf"^heads.{head}: expected a backbone of an encoder family \(bert, "
                                             rf"albert, .*\), found model='{family}'. GPT and T5 are language models"):
            call()
