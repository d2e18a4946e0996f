"""bert4keras's model objects and classes (kerasbert.compat.models) against bert4keras 0.11.5 running the same
arguments: each family's ``return_keras_model=False`` object, a subclass, compound tokens, a prefix, UniLM and
conditional layer norm. kerasbert writes each checkpoint with ``save_weights_as_checkpoint``; bert4keras loads it
through its own ``variable_mapping``, predicts, and writes it back with its ``save_weights_as_checkpoint``, which
kerasbert loads again."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest

from kerasbert import CheckpointError, ConfigError, ModelError
from kerasbert.compat import models as compat
from kerasbert.compat.models import build_transformer_model

import helpers

HERE = os.path.dirname(os.path.abspath(__file__))
SUBCLASS = os.path.join(HERE, "..", "fixtures", "compat_model_subclass.py")
BIAS_SUBCLASS = os.path.join(HERE, "..", "fixtures", "compat_attention_bias_subclass.py")  # its own attention bias
SUBCLASSES = {"gau": SUBCLASS, "bias": BIAS_SUBCLASS}
WIDE = {**helpers.TINY, "embedding_size": 16}  # E != H: Embedding-Mapping
GAU = {**helpers.TINY, "num_attention_heads": 1, "attention_key_size": 16, "hidden_act": "swish"}
CASES = {  # name -> (config, model, kwargs)
    "bert": (WIDE, "bert", {"with_pool": True, "with_nsp": True, "with_mlm": True}),
    "albert": (WIDE, "albert", {"with_mlm": True}),
    "nezha": (helpers.TINY, "nezha", {"with_mlm": True}),
    "roformer": (helpers.TINY, "roformer", {"with_mlm": True}),
    "roformer_v2": (helpers.TINY, "roformer_v2", {"with_mlm": True}),  # E = H: no Output-Mapping, which no
    # checkpoint name maps
    "electra": (WIDE, "electra", {"with_discriminator": True}),
    "gpt": (helpers.TINY, "gpt", {}),
    "gpt2": (helpers.TINY, "gpt2", {}),
    "gpt2_ml": (helpers.TINY, "gpt2_ml", {}),
}
KEEP, COMPOUND = list(range(60)), [[1, 2], [3, 4, 5]]
DERIVED = {  # name -> (the case whose checkpoint it reads, its kwargs)
    "compound": ("bert", {"with_mlm": True, "keep_tokens": KEEP, "compound_tokens": COMPOUND}),
    "prefix": ("bert", {"with_pool": True, "prefix": "Student-"}),
    "unilm": ("roformer", {"application": "unilm"}),
    "albert_unshared": ("albert", {"with_mlm": True}),  # ALBERT's one group read by each of its L blocks
}


def _randomize(model: keras.Model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for weight in model.trainable_weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape) + ("gamma" in weight.path))


def _inputs(model: keras.Model, data: dict) -> list:
    columns = {"Input-Token": "token_ids", "Input-Segment": "segment_ids", "Input-Condition": "condition"}
    return [data[next(column for name, column in columns.items() if t.name.endswith(name))] for t in model.inputs]


def _outputs(model: keras.Model, data: dict) -> list:
    outputs = model.predict(_inputs(model, data), verbose=0)
    return outputs if isinstance(outputs, list) else [outputs]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """kerasbert writes a random checkpoint of each case; bert4keras loads, predicts and writes it back."""
    work = str(tmp_path_factory.mktemp("compat_model_classes"))
    data = {**helpers.random_batch(60, length=10), "condition": np.random.default_rng(1).normal(size=(4, 6))}
    data["token_ids"][0, :2] = [60, 61]  # the compound tokens
    np.savez(inputs := os.path.join(work, "inputs.npz"), **data)
    tasks, objects = [], {}
    own = {"gau": (GAU, None, {}), "bias": (helpers.TINY, None, {"with_mlm": True})}
    for index, (name, (config, model, kwargs)) in enumerate({**CASES, **own}.items()):
        path = os.path.join(work, f"{name}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        cls = _subclass("kerasbert.compat", SUBCLASSES[name]) if name in SUBCLASSES else model
        objects[name] = build_transformer_model(path, model=cls, return_keras_model=False, verbose=False, **kwargs)
        _randomize(objects[name].model, index)
        objects[name].save_weights_as_checkpoint(os.path.join(work, name, "model.ckpt"))
        task = {"config": path, "checkpoint": os.path.join(work, name, "model.ckpt"), "kwargs": kwargs}
        tasks.append({"kind": "object", "model": model, **task, "inputs": inputs,
                      "save": os.path.join(work, f"{name}_b4k", "model.ckpt"),
                      **({"subclass": SUBCLASSES[name]} if name in SUBCLASSES else {})})
    tasks.append(_conditional(work, inputs, objects))
    for name, (case, kwargs) in DERIVED.items():
        task = {**tasks[list(CASES).index(case)], **({"model": name} if name == "albert_unshared" else {})}
        kwargs = dict(kwargs)
        application = kwargs.pop("application", None)
        tasks.append({**task, "kwargs": {**kwargs, **({"application": application} if application else {})},
                      "save": os.path.join(work, f"{name}_b4k", "model.ckpt")})
    results = helpers.run_bert4keras("oracle_compat_models.py", {"tasks": tasks}, work)
    names = [*CASES, "gau", "bias", "cond", *DERIVED]
    return data, objects, {name: (tasks[i], {k.split("/", 1)[1]: v for k, v in results.items()
                                             if k.startswith(f"{i}/")}) for i, name in enumerate(names)}


def _conditional(work: str, inputs: str, objects: dict) -> dict:
    """A BERT whose every norm reads ``Input-Condition`` through a Dense(4, relu); its checkpoint written with a
    mapping that names the condition's kernels too (after beta and gamma, as bert4keras orders them)."""
    path = os.path.join(work, "cond.json")
    with open(path, "w") as f:
        json.dump(WIDE, f)
    condition = keras.Input((6,), name="Input-Condition")
    cond = build_transformer_model(path, return_keras_model=False, verbose=False, with_mlm=True,
                                   layer_norm_cond=condition, layer_norm_cond_hidden_size=4,
                                   layer_norm_cond_hidden_act="relu", additional_input_layers=condition)
    _randomize(cond.model, 99)
    mapping = cond.variable_mapping()
    for name, layer in cond.layers.items():
        if name.endswith("Norm") and name in mapping:
            mapping[name] = mapping[name] + [f"cond/{name}/{i}" for i in range(len(layer.trainable_weights) - 2)]
    cond.save_weights_as_checkpoint(checkpoint := os.path.join(work, "cond", "model.ckpt"), mapping=mapping)
    objects["cond"] = cond
    return {"kind": "object", "model": "bert", "config": path, "checkpoint": checkpoint, "mapping": mapping,
            "kwargs": {"with_mlm": True}, "condition": 6, "cond_hidden": 4, "cond_act": "relu", "inputs": inputs,
            "save": os.path.join(work, "cond_b4k", "model.ckpt")}


def _subclass(pkg: str, path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location("subclass_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make(pkg)


def _check_mapping(ours: dict, theirs: dict, layers: set) -> None:
    """Every layer the model has maps to bert4keras's names, in bert4keras's order."""
    for layer in layers:
        if layer in theirs or layer in ours:
            assert ours.get(layer) == theirs.get(layer), layer


@pytest.mark.parametrize("name", [*CASES, "gau", "bias", "cond"])
def test_model_object_equals_bert4keras(oracle, name):
    """bert4keras reads the object's checkpoint to the same outputs and mapping; kerasbert reads bert4keras's."""
    data, objects, results = oracle
    obj, (task, result) = objects[name], results[name]
    expected = _outputs(obj.model, data)
    got = [result[f"output/{i}"] for i in range(len(expected))]
    assert len([k for k in result if k.startswith("output/")]) == len(expected)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-5, rtol=0)
    _check_mapping(obj.variable_mapping(), json.loads(str(result["mapping"])),
                   {layer.name for layer in obj.model.layers if layer.weights})
    if name == "cond":  # the condition's kernels: bert4keras's mapping has beta and gamma only
        return
    again = build_transformer_model(task["config"], model=type(obj), return_keras_model=False, verbose=False,
                                    **task["kwargs"])
    again.load_weights_from_checkpoint(task["save"])  # the multi-GPU examples' order: build, then load
    for e, g in zip(expected, _outputs(again.model, data), strict=True):
        np.testing.assert_allclose(g, e, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", list(DERIVED))
def test_derived_builds_equal_bert4keras(oracle, name):
    """compound_tokens (means of kept rows), a prefix on every layer, application="unilm"."""
    data, _, results = oracle
    task, result = results[name]
    kwargs = dict(task["kwargs"])
    family = name if name == "albert_unshared" else CASES[DERIVED[name][0]][1]
    model = build_transformer_model(task["config"], task["checkpoint"], model=family,
                                    return_keras_model=False, verbose=False, **kwargs)
    for i, output in enumerate(_outputs(model.model, data)):
        np.testing.assert_allclose(output, result[f"output/{i}"], atol=1e-5, rtol=0)
    if name == "prefix":
        assert all(layer.name.startswith("Student-") for layer in model.model.layers)
        assert set(result["layers"]) <= {layer.name for layer in model.model.layers} | {"Student-Embedding-Dropout"}


def test_an_unchanged_class_builds_kerasbert_s_model():
    """BERT as a class builds today's model: the same layers, names and weights in order."""
    bert = build_transformer_model(config=WIDE, model=compat.BERT, with_pool=True, return_keras_model=False,
                                   verbose=False)
    model = bert.model
    reference = build_transformer_model(config=WIDE, with_pool=True, verbose=False)
    assert [layer.name for layer in model.layers] == [layer.name for layer in reference.layers]
    assert [w.shape for w in model.weights] == [w.shape for w in reference.weights]
    assert bert.initializer.stddev == 0.02 and bert.layers["Pooler-Dense"] is model.get_layer("Pooler-Dense")


def test_a_step_overridden_with_other_parameters_is_one_error():
    class Wrong(compat.BERT):
        def apply_main_layers(self, x):
            return x

    with pytest.raises(ModelError, match=r"Wrong.apply_main_layers: expected the parameters \(self, inputs, index\)"):
        build_transformer_model(config=WIDE, model=Wrong, verbose=False)


def test_layer_norm_cond_without_its_input_is_one_error():
    with pytest.raises(ModelError, match="layer_norm_cond: expected a tensor computed from the model's inputs"):
        build_transformer_model(config=WIDE, return_keras_model=False, layer_norm_cond=keras.Input((6,)),
                                verbose=False)


def test_compound_tokens_take_weighted_means_of_the_kept_rows():
    """bert4keras's (ids, weights) form: the new row is the weighted mean of the kept rows."""
    bert = compat.BERT(vocab_size=100, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=16, hidden_act="gelu", max_position=16, keep_tokens=[5, 6, 7],
                       compound_tokens=[([0, 2], [1, 3]), [1, 2]])
    table = np.arange(400, dtype="float32").reshape(100, 4)
    rows = bert.load_embeddings(table)
    np.testing.assert_allclose(rows, [table[5], table[6], table[7], (table[5] + 3 * table[7]) / 4,
                                      (table[6] + table[7]) / 2])
    assert bert.vocab_size == 5


def test_an_unshared_albert_cannot_save_its_blocks_under_one_group_of_names(tmp_path):
    albert = build_transformer_model(config=WIDE, model="albert_unshared", return_keras_model=False, verbose=False)
    with pytest.raises(CheckpointError, match="one weight under each name"):
        albert.save_weights_as_checkpoint(str(tmp_path / "model.ckpt"))


def test_the_own_attention_bias_changes_the_outputs(oracle):
    """The subclass's mask (each token sees itself and [CLS]) is read: a plain BERT on its weights differs."""
    data, objects, _ = oracle
    biased = objects["bias"].model
    plain = build_transformer_model(config=helpers.TINY, with_mlm=True, verbose=False)
    plain.set_weights(biased.get_weights())
    assert np.abs(_outputs(plain, data)[0] - _outputs(biased, data)[0]).max() > 1e-3


def test_residual_attention_scores_in_kerasbert_s_own_blocks_is_one_error():
    with pytest.raises(ConfigError, match="residual_attention_scores: expected False for BERT's own blocks"):
        build_transformer_model(config=WIDE, residual_attention_scores=True, verbose=False)


def test_autoresize_weights_names_the_weight_it_would_resize(tmp_path):
    small = build_transformer_model(config=helpers.TINY, return_keras_model=False, verbose=False)
    small.save_weights_as_checkpoint(checkpoint := str(tmp_path / "model.ckpt"))
    wide = build_transformer_model(config={**helpers.TINY, "intermediate_size": 2 * helpers.TINY["intermediate_size"]},
                                   return_keras_model=False, verbose=False, autoresize_weights=True)
    with pytest.raises(CheckpointError, match="autoresize_weights: .*kerasbert resizes no weight"):
        wide.load_weights_from_checkpoint(checkpoint)
