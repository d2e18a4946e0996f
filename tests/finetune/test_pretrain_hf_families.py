"""Continued pretraining (`kerasbert.finetune.pretrain.pretrain`, the ``mlm`` task) with a Hugging Face
``tokenizer.json``: whole words by the tokenizer's own marks (byte-level BPE's ``Ġ``, SentencePiece's ``▁``), its
mask and padding ids, random pieces drawn from its ids that are not special; a tiny RoBERTa and ModernBERT trained an
epoch, their Hugging Face folders reloaded and filled."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from kerasbert import build_transformer_model, fill_mask
from kerasbert.finetune.mlm import _special_ids
from kerasbert.text import masking
from kerasbert.text.hf_tokenizer import HfTokenizer

import hf_tokenizer_files
import mlm_family_folders as mlm

WRITERS = {"bpe": lambda folder: hf_tokenizer_files.write_bpe(folder, vocab_size=400),
           "unigram": lambda folder: hf_tokenizer_files.write_unigram(folder, "xlm_roberta", 200),
           "bert_bpe": mlm.write_bert_bpe}


def _words_by_marks(tokenizer: HfTokenizer, ids: list[int]) -> list[list[int]]:
    """The pieces' indices grouped into words by the marks alone (a space-marked piece begins a word)."""
    words: list[list[int]] = []
    for i, token in enumerate(tokenizer.ids_to_tokens(ids)):
        if not words or token.startswith(("Ġ", "▁")):
            words.append([])
        words[-1].append(i)
    return words


@pytest.mark.parametrize("kind", list(WRITERS))
def test_whole_words_are_masked_together_and_no_special_id_is_masked_or_drawn(tmp_path, kind):
    tokenizer = HfTokenizer(WRITERS[kind](str(tmp_path)))
    specials = sorted(set(_special_ids(tokenizer).values()))
    assert {tokenizer.token_to_id(t) for t in ("[PAD]", "[MASK]", "[CLS]", "[SEP]", "[UNK]")} <= set(specials)
    text = "hello world the quick Brown café naïve résumé hello"
    ids, word_ids = masking.hf_word_pieces(tokenizer, text)
    assert tokenizer.decode(ids) == text
    words = _words_by_marks(tokenizer, ids)
    assert [[word_ids[i] for i in word] for word in words] == [[n] * len(word) for n, word in enumerate(words)]
    assert any(len(word) > 1 for word in words)  # some word is more than one piece
    pad, mask_id = tokenizer.token_to_id("[PAD]"), tokenizer.token_to_id("[MASK]")
    row = np.array([tokenizer.token_to_id("[CLS]"), *ids, tokenizer.token_to_id("[SEP]"), pad, pad])
    row_words = np.array([-1, *word_ids, -1, 0, 0])
    batch_ids, batch_words = np.repeat(row[None], 200, 0), np.repeat(row_words[None], 200, 0)
    rule = masking.MaskingRule(rate=0.3, mask=0.2, random=0.7)
    inputs, labels = masking.mask_batch(batch_ids, batch_words, rule, seed=(5, 0, 0), mask_id=mask_id,
                                        vocab_size=tokenizer.vocab_size, special_ids=specials)
    chosen = labels != 0
    assert chosen.any() and not np.isin(batch_ids[chosen], specials).any()  # no special or padding id masked
    changed = inputs != batch_ids
    assert not np.isin(inputs[changed & (inputs != mask_id)], specials).any()  # none drawn
    assert not changed[:, [0, len(ids) + 1, -2, -1]].any()
    for word in words:  # a word is all chosen or not at all
        columns = chosen[:, [1 + i for i in word]]
        assert (columns.all(1) | ~columns.any(1)).all()


def test_each_piece_alone_without_whole_words(tmp_path):
    tokenizer = HfTokenizer(hf_tokenizer_files.write_bpe(str(tmp_path)))
    ids, word_ids = masking.hf_word_pieces(tokenizer, "hello world naïve", whole_word=False)
    assert word_ids == list(range(len(ids)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    documents = ["\n".join(hf_tokenizer_files.mixed_sentences(3, seed=i)) for i in range(16)]
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.slow  # trains
@pytest.mark.parametrize("family", ["roberta_en", "modernbert"])
def test_pretraining_with_a_tokenizer_json_writes_a_folder_that_fills(tmp_path, corpus, family):
    from kerasbert.finetune.pretrain import pretrain

    start, _ = mlm.folder(tmp_path / "start", family, seed=2)
    result = pretrain(corpus, str(tmp_path / "run"), checkpoint=start, dev=corpus, model=family,
                      vocab=os.path.join(start, "tokenizer.json"), epochs=1, batch_size=4, maxlen=32, lr=1e-3,
                      verbose=0)
    [epoch] = result["history"] if isinstance(result["history"], list) else [result["history"]]
    assert math.isfinite(epoch["loss"]) and math.isfinite(result["dev"]["loss"]) and result["dev"]["count"] > 0
    assert "google" not in result  # no Google TF1 form for these families
    with open(os.path.join(result["hf"], "config.json")) as f:
        assert json.load(f)["model_type"] == {"roberta_en": "roberta", "modernbert": "modernbert"}[family]
    assert os.path.isfile(os.path.join(result["hf"], "tokenizer.json"))
    trained = build_transformer_model(result["hf"], result["hf"], with_mlm=True, verbose=False)
    started = build_transformer_model(start, start, with_mlm=True, verbose=False)
    assert any(not np.array_equal(a, b) for a, b in zip(trained.get_weights(), started.get_weights(), strict=True))
    [row] = fill_mask(result["hf"], f"hello {mlm.MASKS[family]} world", top_k=3)
    assert len(row["masks"][0]["candidates"]) == 3
