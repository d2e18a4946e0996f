"""Prompts of a sentence-transformers folder (``config_sentence_transformers.json``), as
``SentenceTransformer.encode(prompt_name=..., prompt=...)`` applies them: the vectors of a prompt equal NumPy's pooling
of the encoder's sequence output on the prefixed texts; the default prompt and ``prompt=""``; ``max_seq_length``
counting the prompt's word pieces; the names refused, by file and name; ``include_prompt``; ``kerasbert embed
--prompt-name`` and an export that keeps the prompts."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from test_sentence_transformers import OFF, TEXTS, _write, encoded, numpy_vectors, st_folder

from kerasbert import ConfigError, build_transformer_model, embed
from kerasbert.cli import main
from kerasbert.serving.embed import open_embedder
from kerasbert.weights.sentence_transformers import read_prompts, read_sentence_transformers

ATOL = 1e-5
# the tiny vocabulary has no "query" or ":": prompts of its own words, so no piece is [UNK]
PROMPTS = {"query": "w5 w6 ", "passage": "c "}


def prompted(folder: str, default: str | None = None, prompts: dict | None = None, **settings) -> str:
    """``st_folder`` with a ``config_sentence_transformers.json`` of ``prompts`` and ``default_prompt_name``."""
    st_folder(folder, **settings)
    _write(os.path.join(folder, "config_sentence_transformers.json"),
           {"__version__": {"sentence_transformers": "3.0.1"}, "prompts": PROMPTS if prompts is None else prompts,
            "default_prompt_name": default, "similarity_fn_name": "cosine"})
    return folder


def oracle(folder: str, texts: list[str], maxlen: int = 32, pooling: str = "mean") -> np.ndarray:
    """NumPy's pooling of the encoder's sequence output on ``texts`` as they are, unit length."""
    token_ids, segment_ids = encoded(folder, texts, maxlen)
    sequence = build_transformer_model(folder, folder, verbose=False).predict([token_ids, segment_ids], verbose=0)
    return numpy_vectors(sequence, token_ids, pooling, True)


def test_a_prompt_name_gives_the_vectors_of_the_prefixed_texts(tmp_path):
    folder = prompted(str(tmp_path / "st"))
    embedder = open_embedder(folder)
    assert (embedder.prompts, embedder.default_prompt_name) == (PROMPTS, None)
    for name, prefix in PROMPTS.items():
        expected = oracle(folder, [prefix + text for text in TEXTS])
        np.testing.assert_allclose(embed(embedder, TEXTS, prompt_name=name), expected, atol=ATOL)
        np.testing.assert_allclose(embed(embedder, TEXTS, prompt=prefix), expected, atol=ATOL)
        np.testing.assert_allclose(embed(embedder, [prefix + text for text in TEXTS]), expected, atol=ATOL)
    np.testing.assert_allclose(embed(embedder, TEXTS), oracle(folder, TEXTS), atol=ATOL)  # no default: none


def test_the_default_prompt_applies_unless_another_or_none_is_asked_for(tmp_path):
    folder = prompted(str(tmp_path / "st"), default="passage")
    embedder = open_embedder(folder)
    assert read_sentence_transformers(folder).default_prompt_name == "passage"
    np.testing.assert_allclose(embed(folder, TEXTS), oracle(folder, ["c " + text for text in TEXTS]), atol=ATOL)
    np.testing.assert_allclose(embed(embedder, TEXTS, prompt_name="query"),
                               oracle(folder, ["w5 w6 " + text for text in TEXTS]), atol=ATOL)
    np.testing.assert_allclose(embed(embedder, TEXTS, prompt=""), oracle(folder, TEXTS), atol=ATOL)


def test_max_seq_length_counts_the_prompts_word_pieces(tmp_path):
    folder = prompted(str(tmp_path / "st"), settings={"max_seq_length": 5, "do_lower_case": False})
    long = TEXTS[:1]  # 13 word pieces: after [CLS] w5 w6, only "a" fits before [SEP]
    token_ids, _ = encoded(folder, ["w5 w6 " + long[0]], 5)
    assert token_ids.shape == (1, 5)
    expected = oracle(folder, ["w5 w6 a"], maxlen=5)
    np.testing.assert_allclose(embed(folder, long, prompt_name="query"), expected, atol=ATOL)
    assert not np.allclose(expected, oracle(folder, ["w5 w6 a b c"], maxlen=32), atol=1e-3)


def test_a_prompt_name_the_folder_lacks_is_named_with_the_file_and_its_names(tmp_path, capsys):
    folder = prompted(str(tmp_path / "st"))
    where = os.path.join(folder, "config_sentence_transformers.json")
    with pytest.raises(ConfigError) as caught:
        embed(folder, TEXTS, prompt_name="document")
    message = str(caught.value)
    for word in (where, "'document'", "'query', 'passage'", "--prompt"):
        assert word in message, (word, message)
    bare = st_folder(str(tmp_path / "bare"))
    with pytest.raises(ConfigError, match="no prompts declared"):
        embed(bare, TEXTS, prompt_name="query")
    np.testing.assert_allclose(embed(bare, TEXTS[:2], prompt="w5 w6 "), embed(folder, TEXTS[:2], prompt_name="query"),
                               atol=ATOL)  # the same weights: a prompt's text works with any folder
    with pytest.raises(ConfigError, match="prompt_name and prompt: expected one of them, found both"):
        embed(folder, TEXTS, prompt_name="query", prompt="w5 ")
    _write(where, {"prompts": PROMPTS, "default_prompt_name": "doc"})
    with pytest.raises(ConfigError, match="default_prompt_name: expected one of its prompts: query, passage, found "
                                          "'doc'"):
        read_prompts(folder)
    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    _write(where, {"prompts": PROMPTS})
    argv = ["embed", folder, "--input", str(source), "--output", str(tmp_path / "v.npy")]
    assert main([*argv, "--prompt-name", "document"]) == 2
    assert "'query', 'passage'" in capsys.readouterr().err and not os.path.exists(tmp_path / "v.npy")
    assert main([*argv, "--prompt-name", "query", "--quiet"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), oracle(folder, ["w5 w6 a b"]), atol=ATOL)
    assert main([*argv, "--prompt", "c ", "--quiet"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), oracle(folder, ["c a b"]), atol=ATOL)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_a_pooling_that_leaves_the_prompt_out(tmp_path, pooling):
    """``include_prompt: false``: sentence-transformers masks the prompt's tokens out of the pooling; kerasbert has
    no such mask, so a mean pooling refuses a prompt, while the ``[CLS]`` vector does not depend on it."""
    mode = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens"}[pooling]
    folder = prompted(str(tmp_path / "st"), pooling=pooling,
                      pooling_config={"word_embedding_dimension": 32, **OFF, mode: True, "include_prompt": False})
    assert read_sentence_transformers(folder).include_prompt is False
    if pooling == "cls":
        np.testing.assert_allclose(embed(folder, TEXTS, prompt_name="query"),
                                   oracle(folder, ["w5 w6 " + text for text in TEXTS], pooling="cls"), atol=ATOL)
        return
    with pytest.raises(ConfigError, match="include_prompt: expected true .*, found false, with mean pooling and the "
                                          "prompt 'w5 w6 '"):
        embed(folder, TEXTS, prompt_name="query")
    np.testing.assert_allclose(embed(folder, TEXTS), oracle(folder, TEXTS), atol=ATOL)  # no prompt: as before


def test_an_export_keeps_the_prompts(tmp_path):
    from kerasbert.serving.export import export
    from kerasbert.serving.vector_export import describe

    folder = prompted(str(tmp_path / "st"), default="query")
    out = str(tmp_path / "export")
    info = export(folder, out, "onnx")
    with open(os.path.join(out, "kerasbert-export.json"), encoding="utf-8") as f:
        recorded = json.load(f)
    assert (recorded["prompts"], recorded["default_prompt_name"], recorded["include_prompt"]) == (PROMPTS, "query",
                                                                                               True)
    assert "prompts query, passage (default query)" in describe(info)
    np.testing.assert_allclose(embed(out, TEXTS), embed(folder, TEXTS), atol=ATOL)  # the default prompt
    np.testing.assert_allclose(embed(out, TEXTS, prompt_name="passage"),
                               oracle(folder, ["c " + text for text in TEXTS]), atol=ATOL)
    with pytest.raises(ConfigError, match="kerasbert-export.json: expected a prompt named 'doc' among its prompts "
                                          "'query', 'passage'"):
        embed(out, TEXTS, prompt_name="doc")
