"""kerasbert.compat.optimizers' AdaFactor, Lion, lazy optimization and parameter-wise rates against bert4keras
0.11.5 (tests/oracle_optimizers.py on tf-keras), and the compositions whose order bert4keras's ``K.update``
interception decides. Each case applies the same gradients to the same variables on both sides, then compares
every variable (float32, 1e-6 relative)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.compat import optimizers as O
from kerasbert.errors import ConfigError

import helpers

STEPS = 7
_rng = np.random.default_rng(1)


def _normal(shape):
    return np.round(_rng.normal(0, 1, shape), 3).tolist()


def _problem(shapes: dict, sparse=()) -> dict:
    """Random initial values and STEPS gradients; the variables in ``sparse`` (5 rows) get sparse gradients that
    touch rows 1 (twice) and 3, then 0 and 4, and a dense "kernel" gradient has a zero row on odd steps."""
    grads = []
    for step in range(STEPS):
        grad = {}
        for name, shape in shapes.items():
            if name in sparse:
                indices = [1, 3, 1] if step % 2 == 0 else [0, 4]
                grad[name] = {"indices": indices, "values": _normal((len(indices), *shape[1:]))}
            else:
                grad[name] = np.array(_normal(shape))
                if name == "kernel" and step % 2:
                    grad[name][0] = 0.0
                grad[name] = grad[name].tolist()
        grads.append(grad)
    return {"init": {name: _normal(shape) for name, shape in shapes.items()}, "grads": grads}


PROBLEMS = {
    "plain": _problem({"Norm_gamma": (3,), "bias": (2,), "kernel": (2, 2)}),
    "lazy": _problem({"embeddings": (5, 3), "kernel": (3, 2), "bias": (2,)}, sparse=("embeddings",)),
    "factored": _problem({"kernel": (4, 3), "square": (3, 3), "cube": (2, 4, 3), "bias": (3,)}),
}
SCHEDULE = {"kernel": 3.0, "ker": 0.5, "bias": 0.1, "Norm": 1.0}  # kernel: 1.5, bias: 0.1, Norm_gamma: unscaled
# key, base, wrappers (innermost first), kwargs, steps, problem
CASES = [
    ("lazy", "Adam", ["lazy_optimization"], {"learning_rate": 0.01, "include_in_lazy_optimization": ["embed"]}, 6,
     "lazy"),
    ("lazy_dense_rows", "Adam", ["lazy_optimization"],
     {"learning_rate": 0.01, "include_in_lazy_optimization": ["embeddings", "kernel"]}, 6, "lazy"),
    ("decay_around_lazy", "Adam", ["lazy_optimization", "weight_decay"],
     {"learning_rate": 0.01, "weight_decay_rate": 0.1, "include_in_lazy_optimization": ["embeddings"]}, 6, "lazy"),
    ("lazy_around_decay", "Adam", ["weight_decay", "lazy_optimization"],
     {"learning_rate": 0.01, "weight_decay_rate": 0.1, "include_in_lazy_optimization": ["embeddings"]}, 6, "lazy"),
    ("paramwise", "Adam", ["parameter_wise_lr"], {"learning_rate": 0.01, "paramwise_lr_schedule": SCHEDULE}, 6,
     "plain"),
    ("paramwise_around_lookahead", "Adam", ["lookahead", "parameter_wise_lr"],
     {"learning_rate": 0.1, "steps_per_slow_update": 3, "paramwise_lr_schedule": SCHEDULE}, 7, "plain"),
    ("layer_adaptation_around_paramwise", "Adam", ["parameter_wise_lr", "layer_adaptation"],
     {"learning_rate": 0.01, "paramwise_lr_schedule": SCHEDULE}, 5, "plain"),
    ("decay_around_accumulation", "Adam", ["gradient_accumulation", "weight_decay"],
     {"learning_rate": 0.05, "grad_accum_steps": 3, "weight_decay_rate": 0.2}, 7, "plain"),
    ("decay_around_lookahead", "Adam", ["lookahead", "weight_decay"],
     {"learning_rate": 0.05, "steps_per_slow_update": 2, "weight_decay_rate": 0.2}, 6, "plain"),
    ("adafactor", "AdaFactor", [], {"learning_rate": 0.01, "min_dim_size_to_factor": 2}, 6, "factored"),
    ("adafactor_unfactored", "AdaFactor", [],
     {"learning_rate": None, "beta1": 0.9, "min_dim_size_to_factor": 4, "exclude_from_parameter_scale": ["bias"]},
     6, "factored"),
    ("adafactor_unscaled", "AdaFactor", [],
     {"learning_rate": None, "beta2": 0.9, "multiply_by_parameter_scale": False, "clipping_threshold": None,
      "min_dim_size_to_factor": 2}, 6, "factored"),
    ("adafactor_schedule", "AdaFactor", ["piecewise_linear_lr"],
     {"learning_rate": 0.05, "lr_schedule": {2: 1.0}, "beta1": 0.5, "epsilon2": 0.5, "min_dim_size_to_factor": 3},
     5, "factored"),
    ("adafactor_lazy_sparse", "AdaFactor", ["lazy_optimization"],
     {"learning_rate": 0.01, "min_dim_size_to_factor": 2, "include_in_lazy_optimization": ["embeddings"]}, 6,
     "lazy"),
    ("lion", "Lion", [], {"learning_rate": 0.01}, 6, "plain"),
    ("lion_decay_sparse", "Lion", ["weight_decay"],
     {"learning_rate": 0.01, "beta_1": 0.9, "beta_2": 0.99, "weight_decay_rate": 0.1}, 6, "lazy"),
]
CASE_KEYS = [case[0] for case in CASES]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    cases = [{"key": k, "base": b, "wrappers": w, "kwargs": kw, "steps": s, "problem": p}
             for k, b, w, kw, s, p in CASES]
    job = {"problem": PROBLEMS["plain"], "problems": PROBLEMS, "cases": cases}
    return helpers.run_bert4keras("oracle_optimizers.py", job, str(tmp_path_factory.mktemp("optimizers")),
                                  "optimizers")


def build(base, wrappers, kwargs):
    cls = getattr(O, base) if isinstance(base, str) else base
    for wrapper in wrappers:
        cls = getattr(O, "extend_with_" + wrapper)(cls)
    return cls(**kwargs)


def gradient(value, variable):
    if isinstance(value, dict):
        return tf.IndexedSlices(tf.constant(np.array(value["values"], np.float32)), tf.constant(value["indices"]),
                                tf.constant(variable.shape))
    return tf.constant(np.array(value, np.float32))


def train(optimizer, problem, steps, graph=False) -> dict:
    """Fresh variables, the first ``steps`` gradients (eagerly, or in one tf.function); the variables."""
    names = sorted(problem["init"])
    weights = {n: keras.Variable(np.array(problem["init"][n], np.float32), name=n) for n in names}
    optimizer.build([weights[n] for n in names])
    apply = lambda grads: optimizer.apply(grads, [weights[n] for n in names])  # noqa: E731
    apply = tf.function(apply) if graph else apply
    for grads in problem["grads"][:steps]:
        apply([gradient(grads[n], weights[n]) for n in names])
    return weights


def assert_matches(oracle, key, weights):
    for name, weight in weights.items():
        np.testing.assert_allclose(weight.numpy(), oracle[f"{key}/{name}"], rtol=1e-6, atol=1e-7,
                                   err_msg=f"{key}/{name}")


@pytest.mark.parametrize("key", CASE_KEYS)
def test_matches_bert4keras(oracle, key):
    _, base, wrappers, kwargs, steps, problem = CASES[CASE_KEYS.index(key)]
    assert_matches(oracle, key, train(build(base, wrappers, kwargs), PROBLEMS[problem], steps))


@pytest.mark.parametrize("key", ["lazy", "adafactor", "adafactor_unfactored", "decay_around_accumulation"])
def test_matches_bert4keras_in_a_tf_function(oracle, key):
    _, base, wrappers, kwargs, steps, problem = CASES[CASE_KEYS.index(key)]
    assert_matches(oracle, key, train(build(base, wrappers, kwargs), PROBLEMS[problem], steps, graph=True))


def test_the_cases_reach_each_path():
    """Lazy: embedding rows not looked up stay put though Adam's moments would move them; AdaFactor: the factored
    case factors 2-D and 3-D variables and keeps the 1-D one whole, the unfactored case keeps them all whole."""
    weights = train(build("Adam", ["lazy_optimization"], CASES[0][3]), PROBLEMS["lazy"], 6)
    init = np.array(PROBLEMS["lazy"]["init"]["embeddings"], np.float32)
    moved = np.any(weights["embeddings"].numpy() != init, axis=-1)
    assert moved.tolist() == [True, True, False, True, True]
    plain = train(build("Adam", [], {"learning_rate": 0.01}), PROBLEMS["lazy"], 6)["embeddings"].numpy()
    assert not np.allclose(plain[[0, 1, 3, 4]], weights["embeddings"].numpy()[[0, 1, 3, 4]])
    factored = O.AdaFactor(min_dim_size_to_factor=2)
    assert [factored.factored_shape(s) is None for s in [(4, 3), (3, 3), (2, 4, 3), (3,)]] == [False] * 3 + [True]
    assert factored.factored_shape((4, 3)) == ((1, 3), 0, (4, 1), 1)
    assert factored.factored_shape((2, 4, 3)) == ((2, 1, 3), 1, (2, 4, 1), 2)
    assert O.AdaFactor(min_dim_size_to_factor=4).factored_shape((2, 4, 3)) is None


def test_lazy_and_paramwise_around_keras_sgd_by_formula():
    """Around keras.optimizers.SGD (which writes with assign_add and assign_sub): with momentum 0.5, a lazy row
    whose gradient is zero stays where SGD's momentum would carry it; a parameter-wise rate scales each step."""
    lazy = build(keras.optimizers.SGD, ["lazy_optimization"],
                 {"learning_rate": 0.1, "momentum": 0.5, "include_in_lazy_optimization": ["table"]})
    table = keras.Variable(np.zeros((2, 1), "float32"), name="table")
    for grad in ([[1.0], [2.0]], [[0.0], [1.0]]):
        lazy.apply([tf.constant(grad)], [table])
    np.testing.assert_allclose(table.numpy().ravel(), [-0.1, -0.2 - (0.5 * 0.2 + 0.1)], rtol=1e-6)
    paramwise = build(keras.optimizers.SGD, ["parameter_wise_lr"],
                      {"learning_rate": 0.1, "paramwise_lr_schedule": {"tab": 3.0}})
    paramwise.apply([tf.constant([[1.0], [2.0]])], [table])
    np.testing.assert_allclose(table.numpy().ravel(), [-0.1 - 0.3, -0.4 - 0.6], rtol=1e-6)


def test_a_model_trains_with_lazy_embeddings_and_saves_with_adafactor(tmp_path):
    """In ``fit`` an Embedding's gradient arrives sparse: only the rows looked up move; a model compiled with
    AdaFactor(learning_rate=None) saves and loads with its optimizer's class, config and state."""
    model = keras.Sequential([keras.Input((2,), dtype="int32"), keras.layers.Embedding(6, 3, name="embed"),
                              keras.layers.Dense(1, name="out")])
    before = model.get_layer("embed").embeddings.numpy()
    Lazy = O.extend_with_lazy_optimization(O.AdaFactor)
    model.compile(Lazy(learning_rate=None, include_in_lazy_optimization=["embed"], min_dim_size_to_factor=2), "mse")
    model.fit(np.array([[1, 2], [2, 4]]), np.ones((2, 2, 1), "float32"), epochs=2, verbose=0)
    moved = np.any(model.get_layer("embed").embeddings.numpy() != before, axis=-1)
    assert moved.tolist() == [False, True, True, False, True, False]
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert type(loaded.optimizer) is Lazy and loaded.optimizer.get_config() == model.optimizer.get_config()
    assert loaded.optimizer.get_config()["learning_rate"] is None
    for saved, restored in zip(model.optimizer.variables, loaded.optimizer.variables, strict=True):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy())


@pytest.mark.parametrize("make", [
    lambda: O.Lion(learning_rate=0.02, beta_1=0.9, beta_2=0.95),
    lambda: O.AdaFactor(learning_rate=None, beta1=0.5, beta2=0.99, clipping_threshold=None,
                        exclude_from_parameter_scale=["bias"]),
    lambda: O.extend_with_lazy_optimization(O.Adam)(include_in_lazy_optimization=["Embedding-Token"]),
    lambda: O.extend_with_parameter_wise_lr(O.Lion)(paramwise_lr_schedule={"Transformer-0": 0.1}),
], ids=["lion", "adafactor", "lazy", "paramwise"])
def test_config_round_trip_and_serialization(make):
    optimizer = make()
    config = optimizer.get_config()
    assert type(optimizer).from_config(json.loads(json.dumps(config))).get_config() == config
    restored = keras.optimizers.deserialize(json.loads(json.dumps(keras.optimizers.serialize(optimizer))))
    assert type(restored) is type(optimizer) and restored.get_config() == config


def test_bert4keras_aliases_and_custom_objects():
    assert O.LionV2 is O.Lion and O.AdaFactorV1 is O.AdaFactor and O.AdaFactorV2 is O.AdaFactor
    assert issubclass(O.AdaFactor, O.AdaFactorBase)
    for name in ["weight_decay", "layer_adaptation", "piecewise_linear_lr", "gradient_accumulation", "lookahead",
                 "lazy_optimization", "exponential_moving_average", "parameter_wise_lr"]:
        assert getattr(O, f"extend_with_{name}_v2") is getattr(O, f"extend_with_{name}")
    assert O.custom_objects == {"Adam": O.Adam, "AdaFactor": O.AdaFactor}
    assert keras.saving.get_registered_name(O.AdaFactor) == "kerasbert>AdaFactor"

    @O.export_to_custom_objects
    def extend_with_nothing(BaseOptimizer):
        return O.extend_with_lookahead(BaseOptimizer)

    named = extend_with_nothing(O.Lion, "LionLookahead")
    assert named is extend_with_nothing(O.Lion, "LionLookahead") and named.__name__ == "LionLookahead"
    assert keras.saving.get_registered_name(named) == "kerasbert>LionLookahead"
    assert extend_with_nothing(O.Lion) is O.extend_with_lookahead(O.Lion)


def test_bad_arguments_are_config_errors():
    with pytest.raises(ConfigError, match=r"^include_in_lazy_optimization: expected a list of strings, "
                                          r"found 'Embedding'\. write \['Embedding'\]"):
        O.extend_with_lazy_optimization(O.Adam)(include_in_lazy_optimization="Embedding")
    with pytest.raises(ConfigError, match=r"^paramwise_lr_schedule: expected a dict \{name part: multiplier\}, "
                                          r"found \[\('bias', 0\.1\)\]"):
        O.extend_with_parameter_wise_lr(O.Adam)(paramwise_lr_schedule=[("bias", 0.1)])
    with pytest.raises(ConfigError, match=r"^beta1: expected a float in \[0, 1\), found 1\.5"):
        O.AdaFactor(beta1=1.5)
    with pytest.raises(ConfigError, match=r"^min_dim_size_to_factor: expected an int >= 1, found 0"):
        O.AdaFactor(min_dim_size_to_factor=0)
    with pytest.raises(ConfigError, match=r"^exclude_from_parameter_scale: expected a list of strings"):
        O.AdaFactorBase(exclude_from_parameter_scale="bias")
    with pytest.raises(ConfigError, match=r"^beta_2: expected a float in \[0, 1\], found 2"):
        O.Lion(beta_2=2)
    with pytest.raises(ConfigError, match=r"^_extend_with_list: expected a function returning a keras.optimizers"):
        O.export_to_custom_objects(_extend_with_list)(O.Adam)
    with pytest.raises(ConfigError, match=r"^extend_with_lazy_optimization: expected a keras.optimizers.Optimizer"):
        O.extend_with_lazy_optimization(O.Lion())


def _extend_with_list(BaseOptimizer):
    return [BaseOptimizer]
