"""kerasbert.compat.optimizers against bert4keras 0.11.5's optimizers, run on tf-keras in a subprocess.

Every case applies the same fixed gradients to the same three variables on both sides and compares the values
(float32, 1e-6 relative). Wrappers around Keras's own optimizers are checked by formula in NumPy instead:
bert4keras's wrappers work by intercepting the ``K.update`` calls of its own optimizers, and tf-keras's Adam and
SGD update through fused kernels, so bert4keras has no numbers to compare with there.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.compat import optimizers as O
from kerasbert.errors import ConfigError

import helpers

STEPS = 8
_rng = np.random.default_rng(0)
INIT = {"Norm_gamma": [1.0, 0.8, 1.2], "bias": [0.1, -0.2], "kernel": [[0.5, -0.4], [0.3, 0.9]]}
PROBLEM = {
    "init": INIT,
    "grads": [{n: np.round(_rng.normal(0, 1, np.shape(v)), 3).tolist() for n, v in INIT.items()} for _ in range(STEPS)],
}
# key, wrappers (innermost first), kwargs, steps, ema
CASES = [
    ("adam", [], {"learning_rate": 0.01}, 5, False),
    ("adam_no_correction", [], {"learning_rate": 0.01, "epsilon": 1e-3, "bias_correction": False}, 5, False),
    ("weight_decay", ["weight_decay"], {"learning_rate": 0.01, "weight_decay_rate": 0.1,
                                        "exclude_from_weight_decay": ["Norm"]}, 5, False),
    ("piecewise", ["piecewise_linear_lr"], {"learning_rate": 0.1, "lr_schedule": {2: 1.0, 5: 0.25}}, 7, False),
    ("accumulation", ["gradient_accumulation"], {"learning_rate": 0.1, "grad_accum_steps": 3}, 8, False),
    ("ema", ["exponential_moving_average"], {"learning_rate": 0.1, "ema_momentum": 0.9}, 5, True),
    ("layer_adaptation", ["layer_adaptation"], {"learning_rate": 0.01, "exclude_from_layer_adaptation": ["bias"]},
     5, False),
    ("lookahead", ["lookahead"], {"learning_rate": 0.1, "steps_per_slow_update": 3, "slow_step_size": 0.4}, 8, False),
    ("decay_then_schedule", ["weight_decay", "piecewise_linear_lr"],
     {"learning_rate": 0.1, "weight_decay_rate": 0.2, "lr_schedule": {3: 1.0}}, 6, False),
    ("schedule_then_decay", ["piecewise_linear_lr", "weight_decay"],
     {"learning_rate": 0.1, "weight_decay_rate": 0.2, "lr_schedule": {3: 1.0}}, 6, False),
    ("lamb_accumulated", ["weight_decay", "layer_adaptation", "gradient_accumulation"],
     {"learning_rate": 0.05, "weight_decay_rate": 0.1, "grad_accum_steps": 2}, 8, False),
    ("ema_lookahead", ["lookahead", "exponential_moving_average"],
     {"learning_rate": 0.1, "steps_per_slow_update": 2, "ema_momentum": 0.8}, 6, True),
]
CASE_KEYS = [case[0] for case in CASES]


def run_optimizer_oracle(workdir) -> dict:
    """Every case on bert4keras (tests/oracle_optimizers.py under tf-keras); its npz as a dict."""
    cases = [{"key": k, "wrappers": w, "kwargs": kw, "steps": s, "ema": e} for k, w, kw, s, e in CASES]
    return helpers.run_bert4keras("oracle_optimizers.py", {"problem": PROBLEM, "cases": cases}, workdir, "optimizers")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    return run_optimizer_oracle(str(tmp_path_factory.mktemp("optimizers")))


def build(wrappers, kwargs, base=O.Adam):
    """The kerasbert optimizer for a case: ``extend_with_<w>`` around ``base``, first wrapper innermost."""
    cls = base
    for wrapper in wrappers:
        cls = getattr(O, "extend_with_" + wrapper)(cls)
    return cls(**kwargs)


def variables():
    return {n: keras.Variable(np.array(v, np.float32), name=n) for n, v in sorted(INIT.items())}


def train(optimizer, weights, steps, graph=False):
    """Apply the first ``steps`` fixed gradients (eagerly, or inside one tf.function)."""
    names = sorted(weights)
    optimizer.build([weights[n] for n in names])
    apply = lambda grads: optimizer.apply(grads, [weights[n] for n in names])  # noqa: E731
    apply = tf.function(apply) if graph else apply
    for grads in PROBLEM["grads"][:steps]:
        apply([tf.constant(np.array(grads[n], np.float32)) for n in names])


def assert_matches(oracle, prefix, weights):
    for name, weight in weights.items():
        np.testing.assert_allclose(weight.numpy(), oracle[f"{prefix}/{name}"], rtol=1e-6, err_msg=f"{prefix}/{name}")


@pytest.mark.parametrize("key", CASE_KEYS)
def test_matches_bert4keras(oracle, key):
    _, wrappers, kwargs, steps, ema = CASES[CASE_KEYS.index(key)]
    optimizer, weights = build(wrappers, kwargs), variables()
    train(optimizer, weights, steps)
    assert_matches(oracle, key, weights)
    if ema:
        optimizer.apply_ema_weights()
        assert_matches(oracle, f"{key}/ema", weights)
        optimizer.reset_old_weights()
        assert_matches(oracle, f"{key}/reset", weights)


@pytest.mark.parametrize("key", ["lamb_accumulated", "ema_lookahead", "schedule_then_decay"])
def test_matches_bert4keras_in_a_tf_function(oracle, key):
    """The same numbers when the step is traced (conditions and snapshots in graph order), as in model.fit."""
    _, wrappers, kwargs, steps, _ = CASES[CASE_KEYS.index(key)]
    weights = variables()
    train(build(wrappers, kwargs), weights, steps, graph=True)
    assert_matches(oracle, key, weights)


def test_wrappers_around_a_keras_optimizer_by_formula():
    """Decay and schedule around keras.optimizers.SGD: ``w -= m * lr * g + m * lr * rate * w``, m the schedule
    multiplier at the step count before the step (here ``{2: 1}``: 0, 0.5, 1, 1...)."""
    kwargs = {"learning_rate": 0.1, "weight_decay_rate": 0.5, "lr_schedule": {2: 1.0}}
    optimizer = build(["weight_decay", "piecewise_linear_lr"], kwargs, base=keras.optimizers.SGD)
    weights = variables()
    train(optimizer, weights, 4)
    for name, weight in weights.items():
        expected = np.array(INIT[name], np.float64)
        for step, grads in enumerate(PROBLEM["grads"][:4]):
            lr = 0.1 * min(step / 2, 1.0)
            expected = expected - lr * np.array(grads[name]) - lr * 0.5 * expected
        np.testing.assert_allclose(weight.numpy(), expected, rtol=1e-6)


def test_adam_sums_an_embeddings_sparse_gradient_per_row_first():
    """Row 1 looked up twice with gradient 1 each: as tf.keras (and bert4keras), Adam's first step sees g = 2 and
    moves it by lr * 2 / (2 + eps); squared lookup by lookup it would move sqrt(2) * lr. Row 0, looked up once,
    moves by lr; row 2, never, stays."""
    weights = keras.Variable(np.zeros((3, 1), "float32"))
    gradient = tf.IndexedSlices(tf.constant([[1.0], [1.0], [-3.0]]), tf.constant([1, 1, 0]), tf.constant([3, 1]))
    O.Adam(learning_rate=0.1).apply([gradient], [weights])
    np.testing.assert_allclose(weights.numpy().ravel(), [0.1 * 3 / (3 + 1e-6), -0.1 * 2 / (2 + 1e-6), 0.0],
                               rtol=1e-6)


def test_config_round_trip_and_serialization():
    cls = O.extend_with_lookahead(O.extend_with_piecewise_linear_lr(O.AdamW))
    optimizer = cls(learning_rate=0.02, weight_decay_rate=0.05, exclude_from_weight_decay=["Norm", "bias"],
                    lr_schedule={10: 1.0, 20: 0.1}, steps_per_slow_update=4, slow_step_size=0.3, epsilon=1e-8)
    config = optimizer.get_config()
    assert config["lr_schedule"] == {10: 1.0, 20: 0.1}
    assert config["exclude_from_weight_decay"] == ["Norm", "bias"]
    assert cls.from_config(json.loads(json.dumps(config))).get_config() == config
    restored = keras.optimizers.deserialize(json.loads(json.dumps(keras.optimizers.serialize(optimizer))))
    assert type(restored) is cls and restored.get_config() == config
    assert keras.saving.get_registered_name(O.AdamW) == "kerasbert>AdamW"


def test_model_with_adamw_saves_and_loads(tmp_path):
    assert O.extend_with_weight_decay(O.Adam, "AdamW") is O.AdamW  # a script's own AdamW: the same class
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(O.AdamW(learning_rate=0.01, weight_decay_rate=0.1, exclude_from_weight_decay=["bias"]), "mse")
    model.fit(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"), epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert type(loaded.optimizer) is O.AdamW
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    for saved, restored in zip(model.optimizer.variables, loaded.optimizer.variables, strict=True):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy())


@pytest.mark.parametrize("wrap", [O.extend_with_weight_decay, O.extend_with_piecewise_linear_lr,
                                  O.extend_with_gradient_accumulation, O.extend_with_exponential_moving_average,
                                  O.extend_with_layer_adaptation, O.extend_with_lookahead])
def test_wrapping_anything_but_an_optimizer_class_is_a_config_error(wrap):
    with pytest.raises(ConfigError, match=rf"^{wrap.__name__}: expected a keras.optimizers.Optimizer subclass, "
                                          r"found <kerasbert.*Adam object"):
        wrap(O.Adam())
    with pytest.raises(ConfigError, match="found 'adam'"):
        wrap("adam")


def test_bad_wrapper_arguments_are_config_errors():
    with pytest.raises(ConfigError, match=r"^lr_schedule: expected a non-empty dict"):
        O.extend_with_piecewise_linear_lr(O.Adam)(lr_schedule={})
    with pytest.raises(ConfigError, match=r"^grad_accum_steps: expected an int >= 1, found 0"):
        O.extend_with_gradient_accumulation(O.Adam)(grad_accum_steps=0)
    with pytest.raises(ValueError, match="weight_decay_rat"):
        O.AdamW(weight_decay_rat=0.1)  # a misspelt argument reaches Keras, which refuses it
