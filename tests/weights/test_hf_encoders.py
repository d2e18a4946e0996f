"""Hugging Face RoBERTa, XLM-R and DistilBERT folders: keras-hub's numbers on the same folder, ``pytorch_model.bin``
as ``model.safetensors``, bare models' names, folders saved back bit for bit, the masked LM against transformers'
head in NumPy, and what is refused (a Google checkpoint of them, a position table too short)."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from scipy.special import softmax
from test_hf_generative import write_folder as write_pickled

from kerasbert import CheckpointError, ConfigError, build_transformer_model, save_google_checkpoint
from kerasbert.weights.checkpoint import load_checkpoint
from kerasbert.weights.convert import convert_checkpoint
from kerasbert.weights.hf import save_hf_checkpoint

import hf_encoder_folders as hf

ATOL = 1e-5
FAMILIES = ("roberta_en", "xlm_roberta", "distilbert")
HUB = {"roberta_en": "RobertaBackbone", "xlm_roberta": "XLMRobertaBackbone", "distilbert": "DistilBertBackbone"}
HEADS = {"roberta_en": {"with_pool": True, "with_mlm": True}, "xlm_roberta": {"with_mlm": True},
         "distilbert": {"with_mlm": True}}


def _folder(tmp_path, family: str, seed: int = 0) -> str:
    """The family's folder: RoBERTa's with a pooler and a zero token type row (keras-hub's RoBERTa reads none),
    XLM-R's without a pooler and a random token type row (keras-hub adds it to its positions)."""
    options = {} if family == "distilbert" else {"pooler": family == "roberta_en",
                                                   "token_types": family == "xlm_roberta"}
    return hf.folder(tmp_path / family, family, seed, **options)


def _predict(model, data: dict) -> list[np.ndarray]:
    out = model.predict(hf.inputs(model, data), verbose=0)
    return out if isinstance(out, list) else [out]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_folder_gives_keras_hubs_numbers(family, tmp_path):
    import keras_hub

    folder = _folder(tmp_path, family, seed=len(family))
    model = build_transformer_model(folder, folder, verbose=False)  # the family from model_type
    assert model.family == family
    data = hf.batch(family, seed=1)
    hub = getattr(keras_hub.models, HUB[family]).from_preset(folder)
    theirs = keras.ops.convert_to_numpy(hub({"token_ids": data["token_ids"], "padding_mask": data["real"]}))
    real = data["real"][..., None]  # keras-hub leaves padded positions unmasked in its output
    np.testing.assert_allclose(_predict(model, data)[0] * real, theirs * real, atol=ATOL)


def test_roberta_pooler_and_masked_lm_are_transformers_heads(tmp_path):
    folder = _folder(tmp_path, "roberta_en", seed=3)
    values = load_file(os.path.join(folder, "model.safetensors"))
    data = hf.batch("roberta_en", seed=2)
    sequence = _predict(build_transformer_model(folder, folder, verbose=False), data)[0]
    pooled, probs = _predict(build_transformer_model(folder, folder, with_pool=True, with_mlm=True, verbose=False),
                             data)
    expected = np.tanh(sequence[:, 0] @ values["roberta.pooler.dense.weight"].T + values["roberta.pooler.dense.bias"])
    np.testing.assert_allclose(pooled, expected, atol=ATOL)
    np.testing.assert_allclose(probs, softmax(hf.mlm_logits("roberta_en", values, sequence), -1), atol=ATOL)


@pytest.mark.parametrize("family", ["xlm_roberta", "distilbert"])
def test_masked_lm_logits_are_transformers_head(family, tmp_path):
    folder = _folder(tmp_path, family, seed=4)
    values = load_file(os.path.join(folder, "model.safetensors"))
    data = hf.batch(family, seed=3)
    sequence = _predict(build_transformer_model(folder, folder, verbose=False), data)[0]
    logits = _predict(build_transformer_model(folder, folder, with_mlm="linear", verbose=False), data)[0]
    real = data["real"][..., None]
    np.testing.assert_allclose(logits * real, hf.mlm_logits(family, values, sequence) * real, atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_pytorch_bin_and_bare_names_give_the_safetensors_numbers(family, tmp_path):
    folder = _folder(tmp_path, family, seed=5)
    values = {name: value for name, value in load_file(os.path.join(folder, "model.safetensors")).items()
              if value.dtype == np.float32}
    pickled = write_pickled(tmp_path / "bin", hf.config(family), values, pickle=True)
    prefix = hf.PREFIX[family] + "."
    encoder = {name[len(prefix):]: value for name, value in values.items() if name.startswith(prefix)}
    bare = hf.write(tmp_path / "bare", hf.config(family), encoder)  # a bare model, as sentence-transformers saves it
    data = hf.batch(family, seed=4)
    bare_heads = {"with_pool": True} if family == "roberta_en" else {}  # a bare model keeps its pooler alone
    for other, flags in ((pickled, HEADS[family]), (bare, bare_heads)):
        model = build_transformer_model(other, verbose=False, **flags)
        report = load_checkpoint(model, other, verbose=False)
        assert report.new == [] and report.unused == []
        expected = _predict(build_transformer_model(folder, folder, verbose=False, **flags), data)
        for mine, theirs in zip(_predict(model, data), expected, strict=True):
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_loaded_folder_saves_back_bit_for_bit(family, tmp_path):
    folder = _folder(tmp_path, family, seed=6)
    model = build_transformer_model(folder, folder, verbose=False, **HEADS[family])
    back = save_hf_checkpoint(model, tmp_path / "back")
    before, after = load_file(os.path.join(folder, "model.safetensors")), load_file(os.path.join(back,
                                                                                              "model.safetensors"))
    kept = sorted(name for name in before if name not in hf.TIED and not name.endswith("position_ids"))
    assert sorted(after) == kept
    for name in kept:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    config, source = json.load(open(os.path.join(back, "config.json"))), hf.config(family)
    architecture = {"roberta_en": "RobertaForMaskedLM", "xlm_roberta": "XLMRobertaForMaskedLM",
                    "distilbert": "DistilBertForMaskedLM"}[family]
    assert config["architectures"] == [architecture]
    assert {key: config[key] for key in source} == source  # every key of transformers' config, as it was
    data = hf.batch(family, seed=5)
    again = build_transformer_model(back, back, verbose=False, **HEADS[family])
    for mine, theirs in zip(_predict(again, data), _predict(model, data), strict=True):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("family", FAMILIES)
def test_no_google_checkpoint_of_them(family, tmp_path):
    folder = _folder(tmp_path, family)
    model = build_transformer_model(folder, verbose=False)
    route = f"model='{family}', whose checkpoints are Hugging Face folders alone. save it with " \
            "kerasbert.save_hf_checkpoint"
    with pytest.raises(CheckpointError, match=route):
        save_google_checkpoint(model, tmp_path / "google")
    with pytest.raises(CheckpointError, match=route):
        convert_checkpoint(folder, tmp_path / "converted")
    assert not os.path.exists(tmp_path / "google") and not os.path.exists(tmp_path / "converted")


def test_a_position_table_shorter_than_its_offset_is_refused(tmp_path):
    values = hf.tensors("roberta_en")
    short = hf.write(tmp_path / "short", {**hf.config("roberta_en"), "max_position_embeddings": 2}, values)
    with pytest.raises(ConfigError, match=r"short/config.json: max_position_embeddings: expected more than 2 rows: a "
                                          r"roberta_en position table reads its positions from row pad_token_id \+ 1 "
                                          r"= 2 on, found 2"):
        build_transformer_model(short, short, verbose=False)
    values["roberta.embeddings.position_embeddings.weight"] = values["roberta.embeddings.position_embeddings.weight"][
        :12]
    fewer = hf.write(tmp_path / "fewer", hf.config("roberta_en"), values)
    with pytest.raises(CheckpointError, match=r"Embedding-Position expects \[22, 16\], checkpoint has \[12, 16\] .*"
                                              "max_position_embeddings"):
        build_transformer_model(fewer, fewer, verbose=False)


def test_a_distilbert_with_segments_has_no_folder_and_roberta_weights_are_named(tmp_path):
    segments = build_transformer_model(config={**hf.config("distilbert"), "type_vocab_size": 2}, verbose=False)
    with pytest.raises(CheckpointError, match="expected a DistilBERT without segments .* found type_vocab_size 2"):
        save_hf_checkpoint(segments, tmp_path / "out")
    roberta = _folder(tmp_path, "roberta_en")
    bert = build_transformer_model(config={**hf.ROBERTA}, verbose=False)
    with pytest.raises(CheckpointError, match="are those of model='roberta_en' or model='xlm_roberta', not "
                                              "model='bert'"):
        load_checkpoint(bert, roberta, verbose=False)


@pytest.mark.parametrize("family", FAMILIES)
def test_fill_mask_probabilities_are_transformers_head_at_the_masks(family, tmp_path):
    from kerasbert.modeling import heads
    from kerasbert.serving.fill_mask import MaskedText, MaskFiller

    folder = _folder(tmp_path, family, seed=8)
    values = load_file(os.path.join(folder, "model.safetensors"))
    backbone = build_transformer_model(folder, folder, with_mlm=True, verbose=False)
    filler = MaskFiller(folder, "checkpoint", family, 20, None, heads.pretraining(backbone))
    data = hf.batch(family, seed=9)  # rows of 12, 9 and 4 tokens: the shorter padded with the family's padding id
    rows = [MaskedText("", [int(t) for t in ids[real]], positions, [0] * len(positions))
            for ids, real, positions in zip(data["token_ids"], data["real"], ([3, 10], [1], [2, 3]), strict=True)]
    sequence = build_transformer_model(folder, folder, verbose=False).predict(hf.inputs(backbone, data), verbose=0)
    for row, found, states in zip(rows, filler.probabilities(rows, batch_size=3), sequence, strict=True):
        expected = softmax(hf.mlm_logits(family, values, states[row.positions]), -1)
        np.testing.assert_allclose(found, expected, atol=1e-5)


def test_fill_mask_on_a_distilbert_folder(tmp_path):
    from kerasbert import fill_mask

    folder = _folder(tmp_path, "distilbert", seed=10)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(chr(ord("a") + i) for i in range(26))]
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    [answer] = fill_mask(folder, "b c [MASK] d", top_k=3)
    ids = np.array([[2, vocab.index("b"), vocab.index("c"), 4, vocab.index("d"), 3]])
    sequence = build_transformer_model(folder, folder, verbose=False).predict(ids, verbose=0)[0]
    values = load_file(os.path.join(folder, "model.safetensors"))
    expected = softmax(hf.mlm_logits("distilbert", values, sequence[3]), -1)[:len(vocab)]
    best = np.argsort(-expected)[:3]
    assert [c["token_id"] for c in answer["masks"][0]["candidates"]] == best.tolist()
    np.testing.assert_allclose([c["score"] for c in answer["masks"][0]["candidates"]], expected[best], atol=1e-5)
