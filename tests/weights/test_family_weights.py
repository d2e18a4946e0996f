"""Hugging Face weights of every family: keras-hub parity (ALBERT, ELECTRA), Google <-> HF round trips, NEZHA and
RoFormer folders against the Google path, and the family a config's model_type picks.

The Hugging Face folders here are written by the test under transformers' names (`albert_tensors`,
`electra_tensors`, `bert_like_tensors`), with a mapping of its own, so a wrong name or a missing transpose in
kerasbert's tables shows up as a difference against keras-hub or against the Google checkpoint of the same numbers.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from kerasbert import CheckpointError, ConfigError, build_transformer_model, save_google_checkpoint
from kerasbert.weights.checkpoint import load_checkpoint
from kerasbert.weights.convert import convert_checkpoint
from kerasbert.weights.hf import save_hf_checkpoint

import helpers

ATOL = 1e-5
NARROW = {**helpers.TINY, "embedding_size": 16, "hidden_act": "gelu_new"}  # keras-hub computes GELU with tanh
HEADS = {"bert": {"with_nsp": True, "with_mlm": True}, "albert": {"with_nsp": True, "with_mlm": True},
         "albert_unshared": {"with_nsp": True, "with_mlm": True}, "nezha": {"with_nsp": True, "with_mlm": True},
         "electra": {"with_discriminator": True}, "roformer": {"with_mlm": True}, "roformer_v2": {"with_mlm": True}}
MODEL_TYPES = {"bert": "bert", "albert": "albert", "albert_unshared": "albert", "nezha": "nezha",
               "electra": "electra", "roformer": "roformer", "roformer_v2": "roformer"}


def random_values(shapes: dict, seed: int) -> dict[str, np.ndarray]:
    """Random float32 values for ``shapes``; norm weights near 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        norm = name.endswith(("LayerNorm.weight", "layer_norm.weight"))
        out[name] = (rng.normal(0.0, 0.2, shape) + (1.0 if norm else 0.0)).astype(np.float32)
    return out


def block_shapes(prefix: str, h: int, inner: int) -> dict:
    """transformers' BertLayer names (ELECTRA's, NEZHA's, RoFormer's) under ``prefix``, ``[out, in]``."""
    shapes = {f"{prefix}.attention.self.{p}.{w}": (h, h) if w == "weight" else (h,)
              for p in ("query", "key", "value") for w in ("weight", "bias")}
    shapes.update({f"{prefix}.attention.output.dense.weight": (h, h), f"{prefix}.intermediate.dense.weight": (inner, h),
                   f"{prefix}.intermediate.dense.bias": (inner,), f"{prefix}.output.dense.weight": (h, inner)})
    widths = ("attention.output.dense.bias", "output.dense.bias", "attention.output.LayerNorm.weight",
              "output.LayerNorm.weight", "attention.output.LayerNorm.bias", "output.LayerNorm.bias")
    shapes.update({f"{prefix}.{name}": (h,) for name in widths})
    return shapes


def embedding_shapes(prefix: str, cfg: dict, positions: bool = True) -> dict:
    v, e, p, t = cfg["vocab_size"], cfg["embedding_size"], cfg["max_position_embeddings"], cfg["type_vocab_size"]
    shapes = {f"{prefix}.embeddings.word_embeddings.weight": (v, e),
              f"{prefix}.embeddings.token_type_embeddings.weight": (t, e),
              f"{prefix}.embeddings.LayerNorm.weight": (e,), f"{prefix}.embeddings.LayerNorm.bias": (e,)}
    if positions:
        shapes[f"{prefix}.embeddings.position_embeddings.weight"] = (p, e)
    return shapes


def albert_tensors(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """AlbertForPreTraining's tensors: one layer group, the MLM back to E, the SOP classifier, the buffers."""
    v, h, e, inner = cfg["vocab_size"], cfg["hidden_size"], cfg["embedding_size"], cfg["intermediate_size"]
    layer = "albert.encoder.albert_layer_groups.0.albert_layers.0"
    shapes = {**embedding_shapes("albert", cfg), "albert.encoder.embedding_hidden_mapping_in.weight": (h, e),
              "albert.encoder.embedding_hidden_mapping_in.bias": (h,), "albert.pooler.weight": (h, h),
              "albert.pooler.bias": (h,), "predictions.dense.weight": (e, h), "predictions.dense.bias": (e,),
              "predictions.LayerNorm.weight": (e,), "predictions.LayerNorm.bias": (e,), "predictions.bias": (v,),
              "predictions.decoder.bias": (v,), "sop_classifier.classifier.weight": (2, h),
              "sop_classifier.classifier.bias": (2,), f"{layer}.ffn.weight": (inner, h), f"{layer}.ffn.bias": (inner,),
              f"{layer}.ffn_output.weight": (h, inner), f"{layer}.ffn_output.bias": (h,),
              f"{layer}.full_layer_layer_norm.weight": (h,), f"{layer}.full_layer_layer_norm.bias": (h,),
              f"{layer}.attention.LayerNorm.weight": (h,), f"{layer}.attention.LayerNorm.bias": (h,)}
    shapes.update({f"{layer}.attention.{p}.{w}": (h, h) if w == "weight" else (h,)
                   for p in ("query", "key", "value", "dense") for w in ("weight", "bias")})
    values = random_values(shapes, seed)
    values["predictions.decoder.weight"] = values["albert.embeddings.word_embeddings.weight"]
    values["albert.embeddings.position_ids"] = np.arange(cfg["max_position_embeddings"])[None]
    return values


def electra_tensors(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """ElectraForPreTraining's tensors: E-wide embeddings, embeddings_project, BERT's blocks, the discriminator."""
    h, e = cfg["hidden_size"], cfg["embedding_size"]
    shapes = {**embedding_shapes("electra", cfg), "electra.embeddings_project.weight": (h, e),
              "electra.embeddings_project.bias": (h,), "discriminator_predictions.dense.weight": (h, h),
              "discriminator_predictions.dense.bias": (h,), "discriminator_predictions.dense_prediction.weight": (1, h),
              "discriminator_predictions.dense_prediction.bias": (1,)}
    for i in range(cfg["num_hidden_layers"]):
        shapes.update(block_shapes(f"electra.encoder.layer.{i}", h, cfg["intermediate_size"]))
    return random_values(shapes, seed)


def bert_like_tensors(google: dict[str, np.ndarray], kind: str, cfg: dict) -> dict[str, np.ndarray]:
    """NezhaForPreTraining's or RoFormerForMaskedLM's tensors holding the numbers of a Google checkpoint: renamed
    by the test's rules, kernels ``[out, in]``, with the buffers transformers saves (RoFormer: no pooler, no NSP)."""
    special = {"cls/predictions/output_bias": "cls.predictions.bias",
               "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
               "cls/seq_relationship/output_bias": "cls.seq_relationship.bias"}
    out = {}
    for name, value in google.items():
        if kind == "roformer" and (name.startswith("bert/pooler") or "seq_relationship" in name):
            continue
        hf = special.get(name) or name.replace("layer_", "layer/").replace("/", ".").replace(".kernel", ".weight")
        hf = hf.replace("_embeddings", "_embeddings.weight").replace(".gamma", ".weight").replace(".beta", ".bias")
        out[kind + hf[len("bert"):] if hf.startswith("bert.") else hf] = np.ascontiguousarray(
            value.T if name.endswith("kernel") else value)
    p, d = cfg["max_position_embeddings"], cfg["hidden_size"] // cfg["num_attention_heads"]
    if kind == "nezha":
        for i in range(cfg["num_hidden_layers"]):
            out[f"nezha.encoder.layer.{i}.attention.self.relative_positions_encoding.positions_encoding"] = \
                np.zeros((p, p, d), np.float32)
    else:
        out["roformer.encoder.embed_positions.weight"] = np.zeros((p, d), np.float32)
    out["cls.predictions.decoder.weight"] = out[f"{kind}.embeddings.word_embeddings.weight"]
    return out


def write_folder(folder: str, cfg: dict, tensors: dict, model_type: str, **extra) -> str:
    os.makedirs(folder, exist_ok=True)
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": model_type, **cfg, **extra}, f)
    return folder


def predict(model, batch: dict):
    outputs = model.predict([batch["token_ids"], batch["segment_ids"]], verbose=0)
    return outputs if isinstance(outputs, list) else [outputs]


def hub_inputs(batch: dict) -> dict:
    return {"token_ids": batch["token_ids"], "segment_ids": batch["segment_ids"],
            "padding_mask": batch["token_ids"] != 0}


def hub_electra(folder: str):
    """keras-hub's ElectraBackbone with the folder's weights, ported by the test (keras-hub has no Hugging Face
    ELECTRA loader)."""
    import keras_hub

    cfg, t = json.load(open(os.path.join(folder, "config.json"))), load_file(os.path.join(folder, "model.safetensors"))
    hub = keras_hub.models.ElectraBackbone(
        vocab_size=cfg["vocab_size"], num_layers=cfg["num_hidden_layers"], num_heads=cfg["num_attention_heads"],
        hidden_dim=cfg["hidden_size"], embedding_dim=cfg["embedding_size"], intermediate_dim=cfg["intermediate_size"],
        max_sequence_length=cfg["max_position_embeddings"], num_segments=cfg["type_vocab_size"])
    pairs = [(hub.token_embedding.embeddings, "electra.embeddings.word_embeddings.weight"),
             (hub.position_embedding.position_embeddings, "electra.embeddings.position_embeddings.weight"),
             (hub.segment_embedding.embeddings, "electra.embeddings.token_type_embeddings.weight"),
             (hub.embeddings_layer_norm.gamma, "electra.embeddings.LayerNorm.weight"),
             (hub.embeddings_layer_norm.beta, "electra.embeddings.LayerNorm.bias"),
             (hub.embeddings_projection.kernel, "electra.embeddings_project.weight"),
             (hub.embeddings_projection.bias, "electra.embeddings_project.bias")]
    for i in range(cfg["num_hidden_layers"]):
        block, p = hub.get_layer(f"transformer_layer_{i}"), f"electra.encoder.layer.{i}."
        attention = block._self_attention_layer
        pairs += [(getattr(attention, f"{part}_dense").kernel, f"{p}attention.self.{part}.weight")
                  for part in ("query", "key", "value")]
        pairs += [(getattr(attention, f"{part}_dense").bias, f"{p}attention.self.{part}.bias")
                  for part in ("query", "key", "value")]
        pairs += [(attention.output_dense.kernel, f"{p}attention.output.dense.weight"),
                  (attention.output_dense.bias, f"{p}attention.output.dense.bias"),
                  (block._self_attention_layer_norm.gamma, f"{p}attention.output.LayerNorm.weight"),
                  (block._self_attention_layer_norm.beta, f"{p}attention.output.LayerNorm.bias"),
                  (block._feedforward_intermediate_dense.kernel, f"{p}intermediate.dense.weight"),
                  (block._feedforward_intermediate_dense.bias, f"{p}intermediate.dense.bias"),
                  (block._feedforward_output_dense.kernel, f"{p}output.dense.weight"),
                  (block._feedforward_output_dense.bias, f"{p}output.dense.bias"),
                  (block._feedforward_layer_norm.gamma, f"{p}output.LayerNorm.weight"),
                  (block._feedforward_layer_norm.beta, f"{p}output.LayerNorm.bias")]
    for variable, name in pairs:
        value = t[name].T if name.endswith(".weight") and "embeddings." not in name and "LayerNorm" not in name \
            else t[name]
        variable.assign(value.reshape(variable.shape))
    return hub


@pytest.mark.parametrize("kind", ["albert", "electra"])
def test_an_hf_folder_gives_keras_hub_numbers(kind, tmp_path):
    import keras
    import keras_hub

    tensors = albert_tensors(NARROW, seed=1) if kind == "albert" else electra_tensors(NARROW, seed=2)
    extra = {"num_hidden_groups": 1, "inner_group_num": 1} if kind == "albert" else {}
    folder = write_folder(str(tmp_path / kind), NARROW, tensors, kind, **extra)
    batch = helpers.random_batch(NARROW["vocab_size"], seed=4)
    model = build_transformer_model(folder, folder, verbose=False)  # the family from model_type
    assert model.family == kind
    hub = keras_hub.models.AlbertBackbone.from_preset(folder) if kind == "albert" else hub_electra(folder)
    out = hub(hub_inputs(batch))
    real = (batch["token_ids"] != 0)[..., None]  # keras-hub leaves padded positions unmasked in its output
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out["sequence_output"]) * real,
                               predict(model, batch)[0] * real, atol=ATOL)
    if kind == "albert":
        pooled = predict(build_transformer_model(folder, folder, with_pool=True, verbose=False), batch)[0]
        np.testing.assert_allclose(keras.ops.convert_to_numpy(out["pooled_output"]), pooled, atol=ATOL)


def random_model(family: str, cfg: dict, seed: int):
    """A model of ``family`` with every pre-training layer it has, its weights random."""
    model = build_transformer_model(config=cfg, model=family, verbose=False, **HEADS[family])
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        norm = variable.path.endswith("gamma")
        variable.assign((rng.normal(0.0, 0.2, variable.shape) + (1.0 if norm else 0.0)).astype(np.float32))
    return model


def google_folder(model, cfg: dict, folder: str) -> str:
    save_google_checkpoint(model, folder)
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(cfg, f)
    return folder


@pytest.mark.parametrize("family", sorted(HEADS))
def test_google_to_hf_to_google_is_bit_exact(family, tmp_path):
    import tensorflow as tf

    cfg = dict(NARROW) if family not in ("nezha", "roformer_v2") else dict(helpers.TINY)
    writer = "albert" if family == "albert_unshared" else family  # an unshared ALBERT has no one-block file
    model = random_model(writer, cfg, seed=len(family))
    first = google_folder(model, cfg, str(tmp_path / "google"))
    convert_checkpoint(first, tmp_path / "hf", model=family)
    config = json.load(open(tmp_path / "hf" / "config.json"))
    assert config["model_type"] == MODEL_TYPES[family]
    back = convert_checkpoint(tmp_path / "hf", tmp_path / "back", model="roformer_v2" if family == "roformer_v2"
                              else None)  # else the family comes from model_type
    before, after = tf.train.load_checkpoint(os.path.join(first, "bert_model.ckpt")), tf.train.load_checkpoint(back)
    names = sorted(before.get_variable_to_shape_map())
    assert names == sorted(after.get_variable_to_shape_map())
    for name in names:
        np.testing.assert_array_equal(before.get_tensor(name), after.get_tensor(name), err_msg=name)
    batch = helpers.random_batch(cfg["vocab_size"], seed=3)
    loaded = build_transformer_model(config=cfg, checkpoint_path=str(tmp_path / "hf"), model=family, verbose=False,
                                     **HEADS[family])  # an unshared ALBERT reads the one layer group in every block
    for mine, theirs in zip(predict(loaded, batch), predict(model, batch), strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)


@pytest.mark.parametrize("kind", ["nezha", "roformer"])
def test_nezha_and_roformer_folders_give_the_google_numbers(kind, tmp_path):
    cfg = dict(helpers.TINY)
    google = {name: value for name, value in helpers.random_google_weights(cfg, seed=8).items()
              if "position_embeddings" not in name}
    google_dir = str(tmp_path / "google")
    helpers.write_checkpoint(google_dir, google, cfg)
    hf = write_folder(str(tmp_path / "hf"), cfg, bert_like_tensors(google, kind, cfg), kind)
    batch = helpers.random_batch(cfg["vocab_size"], seed=5)
    builds = [{}, {"with_mlm": True}] + ([{"with_pool": True, "with_mlm": True}, {"with_nsp": True}]
                                         if kind == "nezha" else [])
    for flags in builds:
        mine = build_transformer_model(hf, hf, verbose=False, **flags)
        assert mine.family == kind
        theirs = build_transformer_model(os.path.join(google_dir, "bert_config.json"), google_dir, kind, verbose=False,
                                         **flags)
        for a, b in zip(predict(mine, batch), predict(theirs, batch), strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)
    report = load_checkpoint(build_transformer_model(hf, verbose=False, **HEADS[kind]), hf, verbose=False)
    assert report.unused == [] and report.new == []
    assert all("positions" in name or "decoder" in name for name in report.skipped)


def test_model_type_picks_the_family_and_a_contradicting_model_is_refused(tmp_path):
    folder = write_folder(str(tmp_path / "albert"), NARROW, albert_tensors(NARROW), "albert")
    assert build_transformer_model(folder, folder, verbose=False).family == "albert"
    assert build_transformer_model(folder, folder, "albert_unshared", verbose=False).family == "albert_unshared"
    with pytest.raises(ConfigError, match="model_type: expected a bert config for model='bert', found 'albert'"):
        build_transformer_model(folder, folder, "bert", verbose=False)
    with pytest.raises(ConfigError, match="build with model='albert'"):
        convert_checkpoint(folder, tmp_path / "out", model="electra")


def test_weights_of_another_family_say_which(tmp_path):
    albert = write_folder(str(tmp_path / "albert"), NARROW, albert_tensors(NARROW), "albert")
    bert = build_transformer_model(config=NARROW, verbose=False)
    with pytest.raises(CheckpointError, match="are those of model='albert', not model='bert': build the model with "
                                              "model='albert'"):
        load_checkpoint(bert, albert, verbose=False)
    google = google_folder(random_model("albert", NARROW, 0), NARROW, str(tmp_path / "google-albert"))
    with pytest.raises(CheckpointError, match="are those of model='albert', not model='bert'"):
        convert_checkpoint(google, tmp_path / "out")  # a Google folder names no family: BERT unless --model
    roformer = str(tmp_path / "roformer")
    convert_checkpoint(google_folder(random_model("roformer", NARROW, 0), NARROW, str(tmp_path / "g-roformer")),
                       roformer, model="roformer")
    with pytest.raises(CheckpointError, match="are those of model='roformer', not model='nezha'"):
        load_checkpoint(build_transformer_model(config=NARROW, model="nezha", verbose=False), roformer, verbose=False)


def test_an_albert_file_of_several_layer_groups_is_refused(tmp_path):
    tensors = albert_tensors(NARROW)
    tensors.update({name.replace("groups.0.", "groups.1."): value for name, value in tensors.items()
                    if "groups.0." in name})
    folder = write_folder(str(tmp_path / "two"), NARROW, tensors, "albert", num_hidden_groups=2)
    with pytest.raises(CheckpointError, match="albert_layer_groups.1.albert_layers.0.attention.LayerNorm.bias in "
                                              ".*expected one ALBERT layer group"):
        build_transformer_model(folder, folder, verbose=False)


@pytest.mark.parametrize("family, architecture", [("albert", "AlbertForPreTraining"),
                                                  ("electra", "ElectraForPreTraining"),
                                                  ("nezha", "NezhaForPreTraining"),
                                                  ("roformer", "RoFormerForMaskedLM")])
def test_save_hf_checkpoint_writes_the_family_config(family, architecture, tmp_path):
    cfg = NARROW if family != "nezha" else helpers.TINY
    model = random_model(family, cfg, seed=1)
    folder = save_hf_checkpoint(model, tmp_path / family)
    config = json.load(open(os.path.join(folder, "config.json")))
    assert (config["model_type"], config["architectures"]) == (family, [architecture])
    assert family == "nezha" or config["embedding_size"] == 16
    batch = helpers.random_batch(cfg["vocab_size"], seed=2)
    loaded = build_transformer_model(folder, folder, verbose=False, **HEADS[family])
    for a, b in zip(predict(loaded, batch), predict(model, batch), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    with pytest.raises(CheckpointError, match="format holds one block"):
        save_hf_checkpoint(build_transformer_model(config=NARROW, model="albert_unshared", verbose=False),
                           tmp_path / "unshared")
