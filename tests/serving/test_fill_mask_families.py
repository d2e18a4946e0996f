"""`kerasbert.fill_mask` and ``kerasbert fill-mask`` on Hugging Face folders of RoBERTa, XLM-R, DeBERTa-v3, ModernBERT
(their ``tokenizer.json``) and DistilBERT (``vocab.txt``): the guesses are the top-k of the family's masked LM
(``build_transformer_model(..., with_mlm=True)``) on the ids the tokenizers library gives the text, read as it
decodes them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tokenizers import Tokenizer as RustTokenizer

from kerasbert import build_transformer_model, fill_mask
from kerasbert.cli import main
from kerasbert.text.tokenizer_files import load_tokenizer

import mlm_family_folders as mlm

TEXTS = ["hello {} world", "the {}{} quick"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("mlm-families")
    return {family: mlm.folder(root / family, family, seed=3)[0] for family in mlm.FAMILIES}


def _ids(folder: str, family: str, text: str) -> list[int]:
    """The text's ids as the tokenizers library (a tokenizer.json) or BERT's word pieces give them."""
    if family == "distilbert":
        tokenizer = load_tokenizer(os.path.join(folder, "vocab.txt"))
        pieces = [tokenizer.encode(part)[0][1:-1] for part in text.split("[MASK]")]
        return [2, *pieces[0], *[i for piece in pieces[1:] for i in (4, *piece)], 3]
    return RustTokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(text).ids


def _decoded(folder: str, family: str, index: int) -> str:
    if family == "distilbert":
        return load_tokenizer(os.path.join(folder, "vocab.txt")).id_to_token(index)
    return RustTokenizer.from_file(os.path.join(folder, "tokenizer.json")).decode([index], skip_special_tokens=False)


@pytest.mark.parametrize("family", mlm.FAMILIES)
def test_guesses_are_the_masked_lm_top_k_on_the_tokenizer_ids(folders, family):
    folder, mask, top_k = folders[family], mlm.MASKS[family], 4
    texts = [text.format(mask, mask) for text in TEXTS]
    answers = fill_mask(folder, texts, top_k=top_k)
    model = build_transformer_model(folder, folder, with_mlm=True, verbose=False)
    vocab = load_tokenizer(folder).vocab_size
    for text, answer in zip(texts, answers, strict=True):
        ids = np.array([_ids(folder, family, text)])
        inputs = [ids, np.zeros_like(ids)][:len(model.inputs)]
        probs = model.predict(inputs, verbose=0)[0][:, :vocab]
        positions = [i for i, index in enumerate(ids[0]) if index == load_tokenizer(folder).token_to_id("[MASK]")]
        assert len(positions) == len(answer["masks"]) == text.count(mask)
        for position, found in zip(positions, answer["masks"], strict=True):
            best = np.argsort(-probs[position], kind="stable")[:top_k]
            assert [c["token_id"] for c in found["candidates"]] == best.tolist()
            np.testing.assert_allclose([c["score"] for c in found["candidates"]], probs[position][best], atol=1e-5)
            assert [c["token"] for c in found["candidates"]] == [_decoded(folder, family, i) for i in best]
        assert len(answer["words"]) == (mask * 2 in text)


@pytest.mark.parametrize("family", ["roberta_en", "xlm_roberta"])
def test_bert_s_mask_stands_for_the_folder_s_own(folders, family):
    own, bert = fill_mask(folders[family], ["a <mask> b"]), fill_mask(folders[family], ["a [MASK] b"])
    assert [row["masks"] for row in own] == [row["masks"] for row in bert]


def test_a_byte_level_guess_reads_with_its_space(folders):
    rust = RustTokenizer.from_file(os.path.join(folders["roberta_en"], "tokenizer.json"))
    words = {index: rust.decode([index]) for token, index in rust.get_vocab().items() if token.startswith("Ġ")}
    words = {index: word for index, word in words.items() if len(word) > 1 and "\ufffd" not in word}  # whole letters
    [answer] = fill_mask(folders["roberta_en"], "hello <mask> world", top_k=rust.get_vocab_size())
    guesses = {c["token_id"]: c["token"] for c in answer["masks"][0]["candidates"]}
    assert words and all(guesses[index] == word and word[0] == " " for index, word in words.items())
    assert "سلام" in {word.strip() for word in words.values()}


@pytest.mark.parametrize("family", ["modernbert", "deberta_v3"])
def test_cli_fills_a_folder_of_an_architecture_of_its_own(folders, family, capsys):
    text = "hello [MASK] world"
    assert main(["fill-mask", folders[family], "--text", text, "--top-k", "2"]) == 0
    [line] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert line == fill_mask(folders[family], text, top_k=2)[0]
