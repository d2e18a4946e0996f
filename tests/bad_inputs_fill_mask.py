"""Bad inputs of fill-mask (`kerasbert.fill_mask`, ``kerasbert fill-mask``), rows of ``tests/test_bad_inputs.py``'s
table: texts without a mask or with too many, a mask past maxlen, top_k out of range, a checkpoint without its
masked-LM head or vocabulary, a family without a masked LM, and a fine-tuned run."""

from __future__ import annotations

import functools
from pathlib import Path

from kerasbert.errors import ConfigError, DataError, ModelError

import helpers
from bad_input_kit import Case, fake_run, google, vocab


def _checkpoint(tmp: Path, _shared, heads: bool = True) -> None:
    """A tiny Google checkpoint folder, with its masked-LM head unless not ``heads``, and a vocab.txt."""
    vocab(google(tmp, values=helpers.random_google_weights(helpers.TINY, heads=heads)))


def _call(text: str = "很[MASK]", folder: str = "ckpt", **options):
    def call(tmp: Path):
        from kerasbert.serving.fill_mask import fill_mask

        return fill_mask(str(tmp / folder), [text], **options)

    return call


def _cli(text: str = "很[MASK]", folder: str = "ckpt", *extra: str):
    return lambda tmp: ["fill-mask", str(tmp / folder), "--text", text, *extra]


def rows() -> list[Case]:
    masks = "[MASK]" * 21
    long = "好" * 70 + "[MASK]"
    return [
        Case("fill-mask-text-without-mask", _checkpoint, _call("很好"), DataError,
             ("texts[0]", "a text with [MASK]", "'很好'"), cli=_cli("很好")),
        Case("fill-mask-mask-in-lowercase", _checkpoint, _call("很[mask]"), DataError,
             ("texts[0]", "[MASK], in capitals"), cli=_cli("很[mask]")),
        Case("fill-mask-too-many-masks", _checkpoint, _call(masks), DataError, ("texts[0]", "at most 20", "21"),
             cli=_cli(masks)),
        Case("fill-mask-mask-past-maxlen", _checkpoint, _call(long, maxlen=32), DataError,
             ("texts[0]", "within the first 30 word pieces", "character 70"), cli=_cli(long, "ckpt", "--maxlen", "32")),
        Case("fill-mask-top-k-zero", _checkpoint, _call(top_k=0), ConfigError, ("top_k", ">= 1", "0"),
             cli=_cli("很[MASK]", "ckpt", "--top-k", "0")),
        Case("fill-mask-top-k-above-the-vocabulary", _checkpoint, _call(top_k=1000), ConfigError,
             ("top_k", "at most 14", "1000"), cli=_cli("很[MASK]", "ckpt", "--top-k", "1000")),
        Case("fill-mask-checkpoint-without-its-masked-lm",
             functools.partial(_checkpoint, heads=False), _call(), ModelError,
             ("masked-LM head", "5 missing", "cls/predictions/output_bias"), cli=_cli()),
        Case("fill-mask-checkpoint-without-vocab", lambda tmp, _: google(tmp), _call(), ConfigError,
             ("ckpt", "no vocab.txt"), cli=_cli()),
        Case("fill-mask-electra", _checkpoint, _call(family="electra"), ModelError,
             ("a family with a masked-LM head", "'electra'"), cli=_cli("很[MASK]", "ckpt", "--model", "electra")),
        Case("fill-mask-a-fine-tuned-run", lambda tmp, _: fake_run(tmp, model=b"not read"), _call(folder="run"),
             ConfigError, ("a pretraining run", "a cls run"), cli=_cli("很[MASK]", "run")),
    ]
