"""Tiny Hugging Face masked-LM folders of the families beside BERT, each with its own tokenizer: RoBERTa's byte-level
BPE (``<mask>``), XLM-R's Unigram (``<mask>``), DeBERTa-v3's Unigram (``[MASK]``), ModernBERT's byte-level BPE with
BERT's special tokens (``[MASK]``), DistilBERT's ``vocab.txt``; random weights in the published names, the config's
``vocab_size`` and ``pad_token_id`` those of the tokenizer."""

from __future__ import annotations

import os

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

import deberta_folders
import hf_encoder_folders
import hf_tokenizer_files
import modernbert_folders

FAMILIES = ("roberta_en", "xlm_roberta", "deberta_v3", "modernbert", "distilbert")
MASKS = {"roberta_en": "<mask>", "xlm_roberta": "<mask>", "deberta_v3": "[MASK]", "modernbert": "[MASK]",
         "distilbert": "[MASK]"}
WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *hf_tokenizer_files.LATIN, *"abcdefghijklmnopqrstuvwxyz",
              *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"], ",", ".", "!", "?"]


def write_bert_bpe(folder: str, vocab_size: int = 120) -> str:
    """ModernBERT's kind of tokenizer: byte-level BPE with ``[PAD] [CLS] [SEP] [UNK] [MASK]``, rows
    ``[CLS] A [SEP]``."""
    specials = hf_tokenizer_files.DEBERTA_SPECIALS
    rust = Tokenizer(models.BPE())
    rust.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    rust.decoder = decoders.ByteLevel()
    rust.train_from_iterator(hf_tokenizer_files._corpus(), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    ids = {token: rust.token_to_id(token) for token in specials}
    rust.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    return hf_tokenizer_files._save(rust, folder, {"pad_token": "[PAD]", "mask_token": "[MASK]"})


def _tokenizer(folder: str, family: str) -> tuple[int, int]:
    """Write ``family``'s tokenizer; its vocabulary size and padding id."""
    if family == "distilbert":
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(WORDPIECES) + "\n")
        return len(WORDPIECES), 0
    if family == "roberta_en":
        hf_tokenizer_files.write_bpe(folder, vocab_size=400)
    elif family == "modernbert":
        write_bert_bpe(folder, vocab_size=400)
    else:
        hf_tokenizer_files.write_unigram(folder, "xlm_roberta" if family == "xlm_roberta" else "deberta", 200)
    rust = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    return rust.get_vocab_size(), rust.token_to_id("<pad>" if family in ("roberta_en", "xlm_roberta") else "[PAD]")


def _weights(family: str, cfg: dict, seed: int) -> dict[str, np.ndarray]:
    if family == "deberta_v3":
        return deberta_folders.deberta_tensors(cfg, seed, head="lm_predictions")
    if family == "modernbert":
        return modernbert_folders.modernbert_tensors(cfg, seed)
    if family == "distilbert":
        return hf_encoder_folders.distilbert_tensors(cfg, seed)
    return hf_encoder_folders.roberta_tensors(cfg, seed)


def config(family: str, vocab_size: int, pad: int) -> dict:
    """The family's tiny test config with the tokenizer's vocabulary size and padding id."""
    if family == "deberta_v3":
        base = deberta_folders.CONFIG
    elif family == "modernbert":
        base = {**modernbert_folders.CONFIG, "max_position_embeddings": 64}
        base = {key: value for key, value in base.items() if not key.endswith(("bos_token_id", "eos_token_id",
                                                                               "cls_token_id", "sep_token_id"))}
    else:
        base = hf_encoder_folders.config(family)
        if family != "distilbert":
            base = {**base, "max_position_embeddings": 66}
    return {**base, "vocab_size": vocab_size, "pad_token_id": pad}


def folder(path, family: str, seed: int = 0) -> tuple[str, dict[str, np.ndarray]]:
    """A masked-LM folder of ``family`` in ``path``; the folder and its weights."""
    path = str(path)
    os.makedirs(path, exist_ok=True)
    cfg = config(family, *_tokenizer(path, family))
    values = _weights(family, cfg, seed)
    hf_encoder_folders.write(path, cfg, values)
    return path, values
