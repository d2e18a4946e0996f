"""Tiny Hugging Face ``tokenizer.json`` files for tests, trained by the ``tokenizers`` library on generated text:
RoBERTa's byte-level BPE, XLM-R's and DeBERTa-v3's Unigram, BERT's WordPiece; and mixed-script sentences."""

from __future__ import annotations

import json
import os
import random

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LATIN = ["café", "naïve", "résumé", "Ångström", "straße", "Ærø", "hello", "world", "the", "quick", "Brown",
         "fox", "señor", "über", "garçon", "déjà", "vu", "Łódź", "İstanbul", "ΟΔΟΣ"]
CJK = list("我爱北京天安门今天气很好们去公园中国人民银行発表東京") + ["こんにちは", "한국어"]
CYRILLIC = ["привет", "мир", "Москва", "ёлка", "съешь", "щи"]
ARABIC = ["مرحبا", "بالعالم", "العربية", "سلام"]
EMOJI = ["😀", "👍", "❤️", "🇨🇳", "👩‍💻", "🙂"]
DIGITS = ["0", "42", "2024", "3.14", "1,000", "٣"]
PUNCT = [",", ".", "!", "?", "，", "。", "(", ")", "-", "'"]
SPACES = [" ", " ", " ", "  ", "\t", "\n", "   ", "\u3000"]
POOLS = [LATIN, LATIN, CJK, CYRILLIC, ARABIC, EMOJI, DIGITS, PUNCT]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
DEBERTA_SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]


def mixed_sentences(count: int, seed: int) -> list[str]:
    """``count`` sentences of words from every script, digits, emoji and whitespace runs, drawn from ``seed``."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        words = [rng.choice(rng.choice(POOLS)) for _ in range(rng.randint(1, 14))]
        text = "".join(word + rng.choice(SPACES) for word in words)
        sentences.append(text if rng.random() < 0.3 else text.strip())
    return sentences


def _corpus() -> list[str]:
    return mixed_sentences(600, seed=123)


def _save(rust: Tokenizer, folder: str, special_map: dict | None = None) -> str:
    os.makedirs(folder, exist_ok=True)
    rust.save(os.path.join(folder, "tokenizer.json"))
    if special_map is not None:
        with open(os.path.join(folder, "special_tokens_map.json"), "w", encoding="utf-8") as f:
            json.dump(special_map, f)
    return folder


def roberta_template(start: str, end: str, ids: dict) -> processors.TemplateProcessing:
    """RoBERTa's and XLM-R's layout: ``<s> A </s>`` and ``<s> A </s> </s> B </s>``, every type id 0."""
    return processors.TemplateProcessing(single=f"{start} $A {end}", pair=f"{start} $A {end} {end} $B {end}",
                                         special_tokens=[(start, ids[start]), (end, ids[end])])


def write_bpe(folder: str, vocab_size: int = 400, roberta_processing: bool = False) -> str:
    """A byte-level BPE ``tokenizer.json`` with RoBERTa's specials (``<pad>`` id 1) and layout (its template, or
    ``RobertaProcessing`` with trimmed offsets)."""
    rust = Tokenizer(models.BPE())
    rust.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    rust.decoder = decoders.ByteLevel()
    rust.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=ROBERTA_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    ids = {token: rust.token_to_id(token) for token in ROBERTA_SPECIALS}
    rust.post_processor = (processors.RobertaProcessing(("</s>", ids["</s>"]), ("<s>", ids["<s>"]), trim_offsets=True)
                           if roberta_processing else roberta_template("<s>", "</s>", ids))
    return _save(rust, folder, {"pad_token": "<pad>", "mask_token": "<mask>", "unk_token": "<unk>"})


def write_unigram(folder: str, layout: str = "xlm_roberta", vocab_size: int = 300) -> str:
    """A Unigram ``tokenizer.json`` (Metaspace, NFKC) with XLM-R's specials and layout, or DeBERTa-v3's
    (``[CLS] A [SEP] B [SEP]``, the second text type 1)."""
    specials = ROBERTA_SPECIALS if layout == "xlm_roberta" else DEBERTA_SPECIALS
    rust = Tokenizer(models.Unigram())
    rust.normalizer = normalizers.NFKC()
    rust.pre_tokenizer = pre_tokenizers.Metaspace()
    rust.decoder = decoders.Metaspace()
    rust.train_from_iterator(_corpus(), trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=specials, unk_token=specials[3], show_progress=False))
    ids = {token: rust.token_to_id(token) for token in specials}
    if layout == "xlm_roberta":
        rust.post_processor = roberta_template("<s>", "</s>", ids)
    else:
        rust.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    return _save(rust, folder)


def write_wordpiece(folder: str, vocab: list[str]) -> str:
    """BERT's WordPiece ``tokenizer.json`` over ``vocab`` (uncased), with BERT's normalizer and layout."""
    ids = {token: i for i, token in enumerate(vocab)}
    rust = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    rust.normalizer = normalizers.BertNormalizer(lowercase=True)
    rust.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    rust.decoder = decoders.WordPiece()
    rust.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    rust.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return _save(rust, folder)
