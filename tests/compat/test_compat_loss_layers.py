"""`kerasbert.compat.layers.Loss` and `MaximumEntropyMarkovModel` against bert4keras 0.11.5 on tf-keras (the oracle,
tests/oracle_compat_loss_layers.py): the same weights and batch give the same losses, accuracies and weights
through a few ``train_on_batch`` steps; both layers survive a ``.keras`` round trip."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
from keras import ops

from kerasbert.compat.layers import Loss, MaximumEntropyMarkovModel
from kerasbert.errors import ConfigError

import helpers

B, S, H, K = 4, 7, 5, 4
STEPS, LEARNING_RATE = 4, 0.05
LENGTHS = [7, 5, 3, 6]
CASES = [
    {"name": "loss", "layer": "Loss", "kwargs": {}},
    {"name": "memm", "layer": "MaximumEntropyMarkovModel", "kwargs": {}},
    {"name": "memm_low_rank", "layer": "MaximumEntropyMarkovModel", "kwargs": {"lr_multiplier": 4, "hidden_dim": 3}},
]


class CrossEntropy(Loss):
    """Token cross-entropy over the Keras mask of y_pred, as a bert4keras script writes it."""

    def compute_loss(self, inputs, mask=None):
        y_true, y_pred = inputs
        y_mask = ops.cast(mask[1], "float32")
        loss = ops.sparse_categorical_crossentropy(ops.cast(y_true, "int32"), y_pred, from_logits=True)
        return ops.sum(loss * y_mask) / ops.sum(y_mask)


def padding() -> np.ndarray:
    return np.arange(S)[None] < np.array(LENGTHS)[:, None]


def random_data(seed: int = 0) -> dict[str, np.ndarray]:
    """x with all-zero padding steps (a Masking layer's mask), labels, and random weights for every case."""
    rng = np.random.default_rng(seed)
    data = {"x": (rng.normal(0, 1, (B, S, H)) * padding()[..., None]).astype(np.float32),
            "labels": (rng.integers(0, K, (B, S)) * padding()).astype(np.int32)}
    for case in CASES:
        _, dense, head, _ = build(case, data)
        for layer, key in ((dense, "dense"), (head, "head")):
            for i, weight in enumerate(layer.weights):
                data[f"{case['name']}/{key}/{i}"] = rng.normal(0, 0.5, tuple(weight.shape)).astype(np.float32)
    return data


def build(case: dict, data: dict, load: bool = False):
    """Input -> Masking(0) -> Dense -> head, compiled as the oracle's; the weights from ``data`` when ``load``."""
    inputs = keras.Input((S, H))
    dense = keras.layers.Dense(K)
    logits = dense(keras.layers.Masking(0.0)(inputs))
    if case["layer"] == "Loss":
        y_in = keras.Input((None,))
        head = CrossEntropy(1)
        model = keras.Model([inputs, y_in], head([y_in, logits]))
        model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE))
        batch = ([data["x"], data["labels"]], None)
    else:
        head = MaximumEntropyMarkovModel(**case["kwargs"])
        model = keras.Model(inputs, head(logits))
        model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss=head.sparse_loss,
                      metrics=[head.sparse_accuracy])
        batch = (data["x"], data["labels"])
    if load:
        for layer, key in ((dense, "dense"), (head, "head")):
            layer.set_weights([data[f"{case['name']}/{key}/{i}"] for i in range(len(layer.weights))])
    return model, dense, head, batch


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    data, workdir = random_data(), str(tmp_path_factory.mktemp("loss_layers_oracle"))
    inputs = os.path.join(workdir, "loss_layers_in.npz")
    np.savez(inputs, **data)
    job = {"inputs": inputs, "cases": CASES, "steps": STEPS, "learning_rate": LEARNING_RATE}
    return data, helpers.run_bert4keras("oracle_compat_loss_layers.py", job, workdir, "loss_layers")


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_training_matches_bert4keras(case, parity):
    data, oracle = parity
    name = case["name"]
    model, dense, head, batch = build(case, data, load=True)
    logs = [model.train_on_batch(*batch, return_dict=True) for _ in range(STEPS)]
    np.testing.assert_allclose(logs[0]["loss"], oracle[f"{name}/loss"][0], rtol=1e-5)
    np.testing.assert_allclose([log["loss"] for log in logs], oracle[f"{name}/loss"], rtol=1e-4)
    if case["layer"] != "Loss":
        np.testing.assert_allclose([log["sparse_accuracy"] for log in logs], oracle[f"{name}/accuracy"], rtol=1e-6)
    for layer, key in ((dense, "dense"), (head, "head")):
        for i, weight in enumerate(layer.get_weights()):
            np.testing.assert_allclose(weight, oracle[f"{name}/{key}/{i}"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", CASES[1:], ids=[case["name"] for case in CASES[1:]])
def test_memm_losses_and_accuracies_match_bert4keras(case, parity):
    data, oracle = parity
    model, _, head, _ = build(case, data, load=True)
    y_pred = model.predict(data["x"], verbose=0)
    assert np.isneginf(y_pred[~padding()]).all() and np.isfinite(y_pred[padding()]).all()
    labels, one_hot = data["labels"], np.eye(K, dtype=np.float32)[data["labels"]]
    for method, y_true in (("sparse_loss", labels), ("dense_loss", one_hot),
                           ("sparse_accuracy", labels), ("dense_accuracy", one_hot)):
        value = float(getattr(head, method)(y_true, y_pred))
        np.testing.assert_allclose(value, oracle[f"{case['name']}/initial/{method}"], rtol=1e-5, err_msg=method)


class _Zero(Loss):
    def compute_loss(self, inputs, mask=None):
        return ops.sum(inputs[0]) * 0.0


def test_loss_returns_the_chosen_inputs_and_their_masks():
    a, b = keras.Input((S, H)), keras.Input((S, H))
    masked = [a, keras.layers.Masking(0.0)(b)]
    assert _Zero()(masked)[1]._keras_mask is not None
    assert _Zero(1)(masked)._keras_mask is not None and getattr(_Zero(0)(masked), "_keras_mask", None) is None
    outputs = _Zero([1, 0])(masked)
    assert [o.shape for o in outputs] == [(None, S, H)] * 2 and outputs[0]._keras_mask is not None
    assert _Zero.from_config(_Zero([1, 0]).get_config()).output_axis == [1, 0]
    with pytest.raises(NotImplementedError, match="compute_loss"):
        Loss()([ops.ones((1, 3))])


def test_keras_save_load(tmp_path):
    data = random_data()
    for case in CASES:
        model, _, head, batch = build(case, data, load=True)
        path = str(tmp_path / f"{case['name']}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, custom_objects={"CrossEntropy": CrossEntropy}, compile=False)
        twin = loaded.layers[-1]
        assert type(twin) is type(head) and twin.get_config() == head.get_config()
        for ours, theirs in zip(loaded.get_weights(), model.get_weights(), strict=True):
            np.testing.assert_array_equal(ours, theirs)
        if case["layer"] == "Loss":
            loaded.compile(optimizer="sgd")
            np.testing.assert_allclose(loaded.evaluate(*batch, verbose=0), model.evaluate(*batch, verbose=0), rtol=1e-6)
        else:
            np.testing.assert_array_equal(ops.convert_to_numpy(twin.sparse_loss(batch[1], loaded(batch[0]))),
                                          ops.convert_to_numpy(head.sparse_loss(batch[1], model(batch[0]))))


class _TwoTerms(Loss):
    """A loss of two terms, each reported with add_metric, as SimBERT's TotalLoss writes it."""

    def compute_loss(self, inputs, mask=None):
        y_true, y_pred = inputs
        first = ops.mean(ops.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True))
        second = ops.mean(ops.square(y_pred))
        self.add_metric(first, name="first_loss")
        self.add_metric(second, name="second_loss")
        self.seen_dtype = y_true.dtype  # integer labels arrive as floatx, as bert4keras's float32 inputs
        return first + second


def test_add_metric_reports_each_term_and_integer_inputs_arrive_as_floats():
    x, y_in = keras.Input((H,)), keras.Input((1,), dtype="int32")
    head, dense = _TwoTerms([0, 1]), keras.layers.Dense(K)
    model = keras.Model([x, y_in], head([y_in, dense(x)]))
    model.compile(optimizer="sgd")
    assert keras.backend.standardize_dtype(head.seen_dtype) == "float32"
    rng = np.random.default_rng(0)
    batch = [rng.normal(size=(B, H)).astype(np.float32), rng.integers(0, K, (B, 1)).astype(np.int32)]
    logits = ops.convert_to_numpy(dense(batch[0]))
    first = ops.convert_to_numpy(ops.mean(ops.sparse_categorical_crossentropy(batch[1], logits, from_logits=True)))
    loss, first_loss, second_loss = model.train_on_batch(batch)  # the loss, then the metrics in order added
    second = (logits ** 2).mean()
    np.testing.assert_allclose([first_loss, second_loss, loss], [first, second, first + second], rtol=1e-5)
    history = model.fit(batch, batch_size=2, epochs=2, verbose=0).history
    assert sorted(history) == ["first_loss", "loss", "second_loss"] and len(history["first_loss"]) == 2
    np.testing.assert_allclose(np.add(history["first_loss"], history["second_loss"]), history["loss"], rtol=1e-5)
    labels, _ = model.predict(batch, verbose=0)
    assert labels.dtype == np.int32  # the inputs it returns, as they came


def test_add_metric_errors():
    class Unnamed(Loss):
        def compute_loss(self, inputs, mask=None):
            self.add_metric(ops.sum(inputs), **self.metric_kwargs)
            return ops.sum(inputs)

    for kwargs, message in (({}, "add_metric: name: expected the metric's name"),
                            ({"name": "m", "aggregation": "sum"}, 'add_metric: aggregation: expected None or "mean"')):
        layer = Unnamed()
        layer.metric_kwargs = kwargs
        with pytest.raises(ConfigError, match=message):
            layer(ops.ones((1, 3)))
