"""Every layer, loss, metric, optimizer and schedule kerasbert defines is registered by ``import kerasbert.modeling``.

The classes and functions are listed from the code (every kerasbert module outside ``compat``, whose
bert4keras-porting classes register when ``kerasbert.compat`` is imported); `.keras` files that use each of them
are written here and loaded in a fresh process after ``import kerasbert.modeling`` alone.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys

import keras
import numpy as np
import pytest

import kerasbert

BASES = (keras.layers.Layer, keras.losses.Loss, keras.optimizers.Optimizer,
         keras.optimizers.schedules.LearningRateSchedule, keras.metrics.Metric)


def defined() -> dict[str, object]:
    """Public classes of `BASES` and registered functions defined in kerasbert's modules, outside compat."""
    found = {}
    for info in pkgutil.walk_packages(kerasbert.__path__, "kerasbert."):
        if ".compat" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != info.name or name.startswith("_"):
                continue
            if inspect.isclass(obj) and issubclass(obj, BASES):
                found[f"{info.name}.{name}"] = obj
            elif inspect.isfunction(obj) and keras.saving.get_registered_name(obj).startswith("kerasbert>"):
                found[f"{info.name}.{name}"] = obj
    return found


T5 = {"vocab_size": 50, "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 3, "attention_head_size": 5,
      "intermediate_size": 20, "hidden_act": ["gelu", "linear"], "relative_attention_num_buckets": 32}


def write_models(folder) -> list[str]:
    """One `.keras` file for each head (compiled with its own loss and metrics), a LayerwiseAdamW with a
    WarmupSchedule, a model compiled with the multilabel loss directly, and sentence-vector models compiled with
    the pair losses; the paths."""
    from kerasbert import build_transformer_model
    from kerasbert.modeling import heads
    from kerasbert.modeling.conditional_norm import ConditionalLayerNorm
    from kerasbert.modeling.global_pointer import (
        PairCodeLoss,
        SpanCodeLoss,
        multilabel_categorical_crossentropy,
        span_f1,
    )
    from kerasbert.modeling.losses import (
        CoSENTLoss,
        InBatchNegativesLoss,
        PointerLoss,
        UnmaskedLoss,
        UnmaskedMean,
        masked_accuracy,
    )
    from kerasbert.modeling.optimizers import LayerwiseAdamW, WarmupSchedule

    bert = build_transformer_model("tiny", verbose=False)
    tanh_bert = build_transformer_model("tiny", verbose=False, hidden_act="gelu_new")
    models = {"cls": heads.cls(bert, 2), "mean": heads.cls(bert, 2, pooling="mean"), "tagging": heads.tagging(bert, 3),
              "crf": heads.tagging(bert, 3, crf=True), "mlm": heads.mlm(tanh_bert), "mlm-erf": heads.mlm(bert),
              "spans": heads.spans(bert, 2, head_size=8), "nsp": heads.nsp(bert), "bert": bert,
              "efficient": heads.spans(bert, 2, head_size=8, efficient=True),
              "nezha": build_transformer_model("tiny", model="nezha", verbose=False),
              "roformer_v2": build_transformer_model("tiny", model="roformer_v2", verbose=False),
              "unilm": build_transformer_model("tiny", application="unilm", verbose=False),
              "electra": build_transformer_model("tiny", model="electra", with_discriminator=True, verbose=False),
              "pretraining": heads.pretraining(build_transformer_model("tiny", with_mlm=True, verbose=False)),
              "t5": build_transformer_model(config=T5, model="t5.1.1", verbose=False),
              "deberta": build_transformer_model("tiny", model="deberta_v3", verbose=False),
              "modernbert": build_transformer_model("tiny", model="modernbert", verbose=False)}  # a local layer
    with_head = {"cls", "mean", "tagging", "crf", "mlm", "mlm-erf", "spans", "nsp", "efficient", "electra", "unilm",
                 "pretraining"}
    pair_losses = {"cosent": CoSENTLoss(), "in_batch": InBatchNegativesLoss()}
    models.update({"cosent": heads.embedding(bert), "in_batch": heads.embedding(bert, "first_last_avg")})
    models["span_codes"] = heads.spans(bert, 2, head_size=8)  # as the span task compiles it: gold spans as codes
    models.update({"qa": heads.qa(bert), "relations": heads.relations(bert, 1, head_size=8)})
    condition = keras.Input((1,), name="Input-Condition")  # bert4keras's layer_norm_cond, on the sequence output
    models["conditional"] = keras.Model([*bert.inputs, condition], ConditionalLayerNorm(
        conditional=True, hidden_units=4)([bert.output, condition]))
    own = {"span_codes": {"loss": SpanCodeLoss(), "metrics": [span_f1]},  # as the span task compiles it
           "t5": {"loss": UnmaskedLoss(T5["vocab_size"], ignore_id=0),  # as the T5 seq2seq task compiles it
                  "metrics": [UnmaskedMean(masked_accuracy)]},
           "conditional": {"loss": "mse"},
           "qa": {"loss": PointerLoss()},  # as the qa and relation tasks compile them
           "relations": {"loss": [PairCodeLoss(0, 2, 4), PairCodeLoss(2, 1, 4), PairCodeLoss(3, 1, 4)]}}
    paths = []
    ids = np.array([[2, 9, 3, 0]], "int32")
    for name, model in models.items():
        schedule = WarmupSchedule(1e-3, total=10, warmup=2)
        compiled = heads.loss_and_metrics(model) if name in with_head else own.get(name) or {
            "loss": pair_losses.get(name, multilabel_categorical_crossentropy)}
        model.compile(LayerwiseAdamW(learning_rate=schedule, num_layers=2), **compiled)
        model.predict([ids, np.zeros_like(ids), np.array([[1]], "int32")][:len(model.inputs)], verbose=0)
        paths.append(str(folder / f"{name}.keras"))
        model.save(paths[-1])
    return paths


LOAD = """
import inspect, json, sys
import keras
import kerasbert.modeling

KERAS = (keras.layers.Layer, keras.losses.Loss, keras.optimizers.Optimizer, keras.metrics.Metric,
         keras.optimizers.schedules.LearningRateSchedule)
names, seen = set(), set()


def walk(obj):
    # the registered names of obj and of every Keras object and function it holds, sublayers included
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        for item in obj:
            walk(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            walk(item)
    elif isinstance(obj, KERAS):
        names.add(keras.saving.get_registered_name(type(obj)))
        walk(vars(obj))
    elif inspect.isfunction(obj):
        names.add(keras.saving.get_registered_name(obj))


loaded = [keras.saving.load_model(path) for path in sys.argv[1:]]
walk(loaded)
others = sorted(m for m in sys.modules
                if m.startswith("kerasbert.") and m.split(".")[1] in ("compat", "finetune", "serving"))
ours = sorted(n for n in names if n.startswith("kerasbert>"))
print(json.dumps({"loaded": len(loaded), "others": others, "names": ours}))
"""


def test_import_kerasbert_modeling_registers_everything_kerasbert_defines(tmp_path):
    found = defined()
    wanted = {keras.saving.get_registered_name(obj) for obj in found.values()}
    unregistered = sorted(path for path, obj in found.items()
                          if not keras.saving.get_registered_name(obj).startswith("kerasbert>"))
    assert not unregistered, f"not registered with kerasbert.modeling.registry.register: {unregistered}"
    paths = write_models(tmp_path)
    done = subprocess.run([sys.executable, "-c", LOAD, *paths], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["loaded"], result["others"]) == (len(paths), [])
    assert wanted <= set(result["names"]), f"no loaded .keras file holds {sorted(wanted - set(result['names']))}"


def test_compat_registers_its_own_classes():
    import kerasbert.compat  # noqa: F401
    from kerasbert.compat import layers, optimizers

    extended = optimizers.extend_with_weight_decay(keras.optimizers.Adam)
    for obj in (layers.Loss, layers.MaximumEntropyMarkovModel, extended):
        name = keras.saving.get_registered_name(obj)
        assert name.startswith("kerasbert>") and keras.saving.get_registered_object(name) is obj


def test_a_name_two_classes_would_hold_is_refused():
    """bert4keras's ``FeedForward`` in kerasbert.compat and kerasbert's own each keep their class in a saved file."""
    import kerasbert.compat.layers
    from kerasbert.errors import ModelError
    from kerasbert.modeling import blocks
    from kerasbert.modeling.registry import register

    assert keras.saving.get_registered_object("kerasbert>FeedForward") is blocks.FeedForward
    assert keras.saving.get_registered_object("kerasbert.compat>FeedForward") is kerasbert.compat.layers.FeedForward

    class FeedForward(keras.layers.Layer):
        pass

    with pytest.raises(ModelError, match="kerasbert>FeedForward held by kerasbert.modeling.blocks.FeedForward"):
        register(FeedForward)
