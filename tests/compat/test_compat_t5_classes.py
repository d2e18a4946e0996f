"""bert4keras's T5 classes (kerasbert.compat.models: T5, T5_Encoder, T5_Decoder) against bert4keras 0.11.5 running
the same arguments: each version whole and as its stacks, keep_tokens, a decoder without its output layer and a
subclass that overrides a step. kerasbert writes each checkpoint with ``save_weights_as_checkpoint``; bert4keras
loads it through its own ``variable_mapping``, predicts, and writes it back, which kerasbert loads again."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest

from kerasbert import ConfigError, ModelError
from kerasbert.compat import models as compat
from kerasbert.compat.models import build_transformer_model

import helpers

HERE = os.path.dirname(os.path.abspath(__file__))
SUBCLASS = os.path.join(HERE, "..", "fixtures", "compat_t5_subclass.py")
# heads 3 × d_kv 5 = 15 ≠ hidden 12, as T5's attention_head_size allows
CONFIG = {"vocab_size": 40, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
          "attention_head_size": 5, "intermediate_size": 20, "relative_attention_num_buckets": 32,
          "dropout_rate": 0.0}
ACTIVATIONS = {"t5": "relu", "t5.1.1": ["gelu", "linear"], "mt5.1.1": ["gelu", "linear"]}  # T5.1.0's is ReLU
CASES = {f"{version}{part}": (version, part) for version in ACTIVATIONS for part in ("", "_encoder", "_decoder")}
KEEP = [0, 1, 2, 5, 7, 9, 11, 13, 17, 19, 23, 29, 31, 37]
DERIVED = {  # name -> (the case whose checkpoint it reads, the model, its kwargs)
    "keep_tokens": ("mt5.1.1", "mt5.1.1", {"keep_tokens": KEEP, "name": "T5"}),
    "without_lm": ("t5.1.1_decoder", "t5.1.1_decoder", {"with_lm": False}),
    "subclass": ("t5.1.1_encoder", "subclass", {"version": "t5.1.1"}),
}


def _ids(lengths: list[int], width: int, high: int, seed: int, first_zero: bool) -> np.ndarray:
    """Rows of random ids in [1, high) padded with 0 to ``width``; the decoder's start id 0 first."""
    rng, ids = np.random.default_rng(seed), np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(1, high, length)
    if first_zero:
        ids[:, 0] = 0
    return ids


def _data(high: int) -> dict[str, np.ndarray]:
    context = np.random.default_rng(3).normal(0, 1, (4, 20, CONFIG["hidden_size"])).astype("float32")
    return {"encoder_ids": _ids([20, 9, 1, 14], 20, high, 1, False),
            "decoder_ids": _ids([16, 1, 12, 4], 16, high, 2, True), "context": context}


def _predict(model: keras.Model, data: dict) -> np.ndarray:
    columns = {"Encoder-Input-Token": "encoder_ids", "Decoder-Input-Token": "decoder_ids", "Input-Context": "context"}
    return model.predict([data[columns[t.name]] for t in model.inputs], verbose=0)


def _models(t5) -> dict[str, keras.Model]:
    """The object's Keras models by the oracle's keys: a whole T5's three, a stack's one."""
    return {"model": t5.model, **({"encoder": t5.encoder, "decoder": t5.decoder} if hasattr(t5, "encoder") else {})}


def _subclass(pkg: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location("t5_subclass_source", SUBCLASS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make(pkg)


def _randomize(model: keras.Model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for weight in model.trainable_weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape) + ("gamma" in weight.path))


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """kerasbert writes a random checkpoint of each case; bert4keras loads, predicts and writes it back."""
    work = str(tmp_path_factory.mktemp("compat_t5_classes"))
    np.savez(inputs := os.path.join(work, "inputs.npz"), **_data(CONFIG["vocab_size"]))
    np.savez(kept := os.path.join(work, "kept.npz"), **_data(len(KEEP)))
    tasks, objects = [], {}
    for index, (name, (version, _)) in enumerate(CASES.items()):
        config = os.path.join(work, f"{version}.json")
        with open(config, "w") as f:
            json.dump({**CONFIG, "hidden_act": ACTIVATIONS[version]}, f)
        objects[name] = build_transformer_model(config, model=name, return_keras_model=False, verbose=False)
        _randomize(objects[name].model, index)
        objects[name].save_weights_as_checkpoint(checkpoint := os.path.join(work, name, "model.ckpt"))
        tasks.append({"kind": "t5", "model": name, "config": config, "checkpoint": checkpoint, "inputs": inputs,
                      "save": os.path.join(work, f"{name}_b4k", "model.ckpt")})
    for name, (case, model, kwargs) in DERIVED.items():
        task = {**tasks[list(CASES).index(case)], "model": model, "kwargs": kwargs,
                "save": os.path.join(work, f"{name}_b4k", "model.ckpt")}
        tasks.append({**task, **({"inputs": kept} if "keep_tokens" in kwargs else {}),
                      **({"subclass": SUBCLASS} if model == "subclass" else {})})
    results = helpers.run_bert4keras("oracle_compat_models.py", {"tasks": tasks}, work)
    data = {"inputs.npz": _data(CONFIG["vocab_size"]), "kept.npz": _data(len(KEEP))}
    return objects, {name: (tasks[i], data[os.path.basename(tasks[i]["inputs"])],
                            {k.split("/", 1)[1]: v for k, v in results.items() if k.startswith(f"{i}/")})
                     for i, name in enumerate([*CASES, *DERIVED])}


def _build(task: dict, checkpoint: str | None = None):
    model = _subclass("kerasbert.compat") if task["model"] == "subclass" else task["model"]
    return build_transformer_model(task["config"], checkpoint, model=model, return_keras_model=False, verbose=False,
                                   **task.get("kwargs", {}))


def _check(t5, data: dict, result: dict) -> None:
    """Each of the object's Keras models gives bert4keras's outputs; the mapping is bert4keras's."""
    assert sorted(_models(t5)) == sorted(k.split("/")[0] for k in result if k.endswith("/output"))
    for key, model in _models(t5).items():
        np.testing.assert_allclose(_predict(model, data), result[f"{key}/output"], atol=1e-5, rtol=0)
    assert t5.variable_mapping() == json.loads(str(result["mapping"]))


@pytest.mark.parametrize("name", list(CASES))
def test_t5_object_equals_bert4keras(oracle, name):
    """bert4keras reads the object's checkpoint to the same outputs and mapping; kerasbert reads bert4keras's."""
    objects, results = oracle
    task, data, result = results[name]
    t5 = objects[name]
    _check(t5, data, result)
    expected = {key: _predict(model, data) for key, model in _models(t5).items()}
    again = _build(task)
    again.load_weights_from_checkpoint(task["save"])
    for key, model in _models(again).items():
        np.testing.assert_allclose(_predict(model, data), expected[key], atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", list(DERIVED))
def test_derived_t5_builds_equal_bert4keras(oracle, name):
    """keep_tokens (the kept rows of the embedding, columns of T5.1.1's output), ``with_lm=False``, a subclass
    whose encoder runs each block twice."""
    _, results = oracle
    task, data, result = results[name]
    t5 = _build(task, task["checkpoint"])
    _check(t5, data, result)
    if name == "keep_tokens":
        assert [t5.encoder.name, t5.decoder.name] == list(result["parts"]) == ["T5_Encoder", "T5_Decoder"]
        assert t5.model.get_layer("Decoder-Output-LM").kernel.shape[-1] == len(KEEP)
    if name == "without_lm":
        assert t5.model.output.shape[-1] == CONFIG["hidden_size"]


def test_the_whole_t5_shares_its_layers_and_builds_kerasbert_s_model():
    """T5's three models share one set of layers; the whole is kerasbert's mT5 layer for layer."""
    config = {**CONFIG, "hidden_act": ACTIVATIONS["mt5.1.1"]}
    t5 = build_transformer_model(config=config, model="mt5.1.1", return_keras_model=False, verbose=False)
    assert isinstance(t5, compat.T5) and isinstance(t5._encoder, compat.T5_Encoder)
    assert t5.encoder.get_layer("Embedding-Token") is t5.model.get_layer("Embedding-Token") is \
        t5.decoder.get_layer("Embedding-Token")
    reference = build_transformer_model(config=config, model="mt5.1.1", verbose=False)
    assert sorted(layer.name for layer in t5.model.layers) == sorted(layer.name for layer in reference.layers)
    assert (t5.model.name, t5.encoder.name, t5.decoder.family) == ("mt5.1.1", "Encoder", "mt5.1.1_decoder")


def test_what_kerasbert_s_t5_cannot_take_is_one_error():
    config = {**CONFIG, "hidden_act": ACTIVATIONS["t5.1.1"]}
    with pytest.raises(ConfigError, match="with_lm: expected True, \"softmax\" or False"):
        build_transformer_model(config=config, model="t5.1.1_decoder", with_lm="sigmoid", verbose=False)
    with pytest.raises(ConfigError, match="cross_position_bias: expected True, found False"):
        build_transformer_model(config=config, model="t5.1.1_decoder", cross_position_bias=False, verbose=False)
    with pytest.raises(ConfigError, match="version: expected one of t5.1.0, t5.1.1, mt5.1.1"):
        build_transformer_model(config=config, model=compat.T5_Encoder, version="t5.2", verbose=False)
    with pytest.raises(ModelError, match="layer_norm_cond: expected None for T5_Encoder"):
        build_transformer_model(config=config, model="t5.1.1_encoder", layer_norm_cond=keras.Input((4,)),
                                verbose=False)
