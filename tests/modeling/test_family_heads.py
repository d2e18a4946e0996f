"""Every head on every family: builds and predicts, ``[CLS]``-only blocks equal the full block, pre-training heads
where the family has them, losses, the layer-wise rate of ALBERT's shared block, configs read off the layers,
``.keras`` round trips, and mixed precision in prediction and in training."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model, config_of, heads
from kerasbert.modeling import families
from kerasbert.modeling.optimizers import LayerwiseAdamW

import helpers

FAMILIES = list(families.ENCODER_NAMES)
# the families whose graphs differ from BERT's, each in its own way (BERT's heads: test_heads.py; an unshared
# ALBERT is BERT with ELECTRA's embedding mapping)
DISTINCT = ["albert", "nezha", "electra", "roformer", "roformer_v2"]
NARROW = {"albert", "albert_unshared", "electra"}  # built with embedding_size E = 16 < H = 32
BATCH = [np.array([[2, 9, 17, 40, 3, 0, 0], [2, 5, 6, 7, 8, 9, 3], [2, 70, 3, 0, 0, 0, 0]]),
         np.array([[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]])]
V = helpers.TINY["vocab_size"]
HEADS = {  # name -> (build, output shape for BATCH)
    "cls-first": (lambda b: heads.cls(b, 3), (3, 3)),
    "cls-first-full": (lambda b: heads.cls(b, 3, first_token_only=False), (3, 3)),
    "cls-pooler": (lambda b: heads.cls(b, 3, pooling="pooler", dropout=0.1), (3, 3)),
    "cls-mean": (lambda b: heads.cls(b, 3, pooling="mean", activation="sigmoid"), (3, 3)),
    "tagging": (lambda b: heads.tagging(b, 5), (3, 7, 5)),
    "tagging-crf": (lambda b: heads.tagging(b, 5, crf=True), (3, 7, 5)),
    "tagging-bilstm": (lambda b: heads.tagging(b, 5, bilstm_units=4, dropout=0.1), (3, 7, 5)),
    "spans": (lambda b: heads.spans(b, 2, head_size=8), (3, 2, 7, 7)),
    "embedding-cls": (lambda b: heads.embedding(b, "cls"), (3, 32)),
    "embedding-mean": (lambda b: heads.embedding(b, "mean", normalize=False), (3, 32)),
    "embedding-first-last": (lambda b: heads.embedding(b, "first_last_avg"), (3, 32)),
    "embedding-linear": (lambda b: heads.embedding(b, "linear"), (3, 32)),
    "mlm": (heads.mlm, (3, 7, V)),
    "nsp": (heads.nsp, (3, 2)),
}
# the pre-training heads a family's checkpoints have no layers for (as bert4keras's with_mlm / with_nsp refuse)
REFUSED = {("electra", "mlm"), ("electra", "nsp"), ("roformer_v2", "nsp")}


def backbone(family: str, **kwargs) -> keras.Model:
    extra = {"embedding_size": 16} if family in NARROW else {}
    return build_transformer_model("tiny", model=family, verbose=False, **extra, **kwargs)


@pytest.fixture(scope="module")
def backbones() -> dict[str, keras.Model]:
    """One backbone per family; every head of a test is attached to it (its layers then serve several models)."""
    return {family: backbone(family) for family in FAMILIES}


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("family", DISTINCT)
def test_every_head_builds_and_predicts_on_every_family(backbones, family, head):
    build, shape = HEADS[head]
    if (family, head) in REFUSED:
        with pytest.raises(ModelError, match=f"heads.{head}: expected a backbone of a family with"):
            build(backbones[family])
        return
    model = build(backbones[family])
    assert model.family == family and config_of(model) == config_of(backbones[family])
    out = model.predict(BATCH, verbose=0)
    assert out.shape == shape
    assert np.isfinite(np.where(np.isneginf(out), 0, out)).all()  # CRF and span logits are -inf on padding


@pytest.mark.parametrize("family", FAMILIES)
def test_the_cls_only_last_block_equals_the_full_block(backbones, family):
    # ALBERT's shared block is taken at x[:, 0] of the full sequence output: the same graph both ways
    fast, full = heads.cls(backbones[family], 3), heads.cls(backbones[family], 3, first_token_only=False)
    full.get_layer("CLS-Dense").set_weights(fast.get_layer("CLS-Dense").get_weights())
    np.testing.assert_allclose(fast.predict(BATCH, verbose=0), full.predict(BATCH, verbose=0), atol=1e-5)
    blocks = [layer.name for layer in fast.layers if layer.name.endswith("FeedForward-Norm")]
    assert len(blocks) == (1 if family == "albert" else 2)


def test_the_mlm_of_roformer_v2_is_its_output_layers_and_trains_with_the_masked_loss(backbones):
    model = heads.mlm(backbones["roformer_v2"])
    assert model.layers[-1].name == "Output-MLM-Activation" and "MLM-Dense" not in [lay.name for lay in model.layers]
    loss = heads.loss_and_metrics(model)["loss"]
    assert loss.name == "masked_lm_loss"
    model.compile("adam", **heads.loss_and_metrics(model))
    labels = np.where(BATCH[0] > 3, BATCH[0], 0)  # 0: not scored
    assert np.isfinite(model.train_on_batch(BATCH, labels)).all()


def test_electra_says_where_its_mlm_is_and_trains_its_discriminator():
    with pytest.raises(ModelError, match="found model='electra'.*with_discriminator=True"):
        heads.mlm(backbone("electra"))
    model = backbone("electra", with_discriminator=True)
    assert heads.loss_and_metrics(model)["loss"].name == "token_binary_loss"
    model.compile("adam", **heads.loss_and_metrics(model))
    replaced = (BATCH[0] % 2).astype("float32")
    assert np.isfinite(model.train_on_batch(BATCH, replaced)).all()


@pytest.mark.parametrize("family", ["albert", "nezha", "roformer_v2"])
def test_heads_train_one_step_with_their_default_losses(family):
    for build in (lambda b: heads.cls(b, 3), lambda b: heads.tagging(b, 5, crf=True)):
        model = build(backbone(family))
        model.compile("adam", **heads.loss_and_metrics(model))
        labels = np.array([0, 2, 1]) if len(model.output.shape) == 2 else BATCH[0] % 5
        assert np.isfinite(model.train_on_batch(BATCH, labels)).all()


def test_the_shared_block_learns_at_the_top_layers_rate():
    model = heads.cls(backbone("albert"), 2)
    optimizer = LayerwiseAdamW(0.5, num_layers=2)
    scales = {v.path: optimizer.lr_scale(v.path) for v in model.trainable_variables}
    assert {scale for path, scale in scales.items() if path.startswith("Transformer-")} == {0.5}
    assert scales["Embedding-Mapping/kernel"] == 0.125 and scales["CLS-Dense/kernel"] == 1.0


@pytest.mark.parametrize("family", FAMILIES)
def test_a_model_without_its_config_is_an_error_that_says_how_to_get_one(backbones, family):
    bare = keras.Model(backbones[family].inputs, backbones[family].outputs)
    for read in (config_of, families.of_model):
        with pytest.raises(ModelError, match=r"a keras.Model without one\. build it with kerasbert\."):
            read(bare)


@pytest.mark.parametrize("family", DISTINCT)
def test_keras_files_keep_family_config_and_outputs(backbones, family, tmp_path):
    model = heads.tagging(backbones[family], 5, crf=True)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert loaded.family == family and config_of(loaded) == config_of(model)
    np.testing.assert_array_equal(loaded.predict(BATCH, verbose=0), model.predict(BATCH, verbose=0))
    decoder = heads.crf_decoder(loaded)  # a head on the loaded model: the family's graph is found again
    assert decoder.family == family and decoder.predict(BATCH, verbose=0).shape == (3, 7)


@pytest.mark.parametrize(("family", "policy"), [(family, "mixed_bfloat16") for family in DISTINCT]
                         + [("albert", "mixed_float16"), ("roformer", "mixed_float16")])
def test_mixed_precision_builds_and_predicts_finite_outputs(family, policy):
    model = heads.cls(backbone(family, dtype=policy), 3)
    reference = heads.cls(backbone(family), 3)
    reference.set_weights(model.get_weights())
    assert model.get_layer("Embedding-Token").compute_dtype == policy.split("_")[1]
    low, full = np.asarray(model.predict(BATCH, verbose=0), "float32"), reference.predict(BATCH, verbose=0)
    assert np.isfinite(low).all() and np.abs(low - full).max() < 5e-2


# bfloat16 keeps 8 significant bits (each rounding within 2^-9 relative), float16 11 (2^-12); a loss through the
# two tiny blocks agrees with float32's to about 1e-3 and 1e-4: each bound leaves room for some ten roundings
LOSS_RTOL = {"mixed_bfloat16": 2e-2, "mixed_float16": 5e-3}
LABELS = {"cls-first": np.array([0, 2, 1]), "tagging-crf": BATCH[0] % 5}
# (family, policy, head): every distinct graph in bfloat16, NEZHA's with the CRF, whose per-text loss (about 17
# here) is no near-constant log(3); two in float16 with loss scaling
MIXED_TRAINING = ([(f, "mixed_bfloat16", "tagging-crf" if f == "nezha" else "cls-first") for f in DISTINCT]
                  + [(f, "mixed_float16", "cls-first") for f in ("albert", "roformer_v2")])


def loss_at(model: keras.Model, weights: list[np.ndarray]) -> float:
    """``model``'s compiled loss on `BATCH` with ``weights`` (the forward pass of a step, without its update)."""
    model.set_weights(weights)
    labels = LABELS["cls-first" if len(model.output.shape) == 2 else "tagging-crf"]
    return float(model.compute_loss(y=labels, y_pred=model(BATCH, training=False)))


@pytest.mark.parametrize(("family", "policy", "head"), MIXED_TRAINING)
def test_mixed_precision_trains_as_float32_does(family, policy, head):
    """Steps compiled as ``kerasbert train --mixed-precision`` does (kerasbert's AdamW, wrapped in Keras's
    LossScaleOptimizer under float16): finite losses that fall, every weight moved and still float32, and the loss
    at the first and the last weights that of the float32 model with those weights."""
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}  # one loss for one set of weights
    build = HEADS[head][0]
    keras.utils.set_random_seed(0)
    model, reference = build(backbone(family, dtype=policy, **no_dropout)), build(backbone(family, **no_dropout))
    optimizer = LayerwiseAdamW(learning_rate=1e-2)
    model.compile(keras.optimizers.LossScaleOptimizer(optimizer) if policy == "mixed_float16" else optimizer,
                  **heads.loss_and_metrics(model))
    reference.compile("adam", **heads.loss_and_metrics(reference))
    start = model.get_weights()
    losses = [float(np.atleast_1d(model.train_on_batch(BATCH, LABELS[head]))[0]) for _ in range(4)]
    end = model.get_weights()
    assert model.get_layer("Embedding-Token").compute_dtype == policy.split("_")[1]
    assert {v.dtype for v in model.weights} == {v.dtype for v in optimizer.variables} - {"int64"} == {"float32"}
    losses.append(loss_at(model, end))  # after the fourth update
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert all(np.abs(a - b).max() > 0 for a, b in zip(start, end, strict=True))  # no step skipped, none frozen
    for weights, loss in ((start, losses[0]), (end, losses[-1])):
        assert loss == pytest.approx(loss_at(reference, weights), rel=LOSS_RTOL[policy])
