"""One architecture wires each model: the builder, the heads and the cached decoder run their blocks through it."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model, heads
from kerasbert.generation.cache import CachedModel
from kerasbert.modeling import architecture, families
from kerasbert.modeling.encoder import Encoder

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "kerasbert"
GENERATIVE = [name for name in families.ENCODER_NAMES if families.get(name).heads != "electra"]
SIZES = {"embedding_size": 16}  # ALBERT's and ELECTRA's E; the other families' configs take it as H's own width


@pytest.fixture()
def blocks_run(monkeypatch):
    """The ``(index, how)`` of every `Encoder.block` call: ``graph``, ``first`` (for [CLS] alone) or ``cache``."""
    calls, block = [], Encoder.block

    def spy(self, index, x, mask, positions=None, *, cache=None, first=None):
        calls.append((index, "cache" if cache is not None else "first" if first is not None else "graph"))
        return block(self, index, x, mask, positions, cache=cache, first=first)

    monkeypatch.setattr(Encoder, "block", spy)
    return calls


def _build(family: str, **options):
    sizes = SIZES if family in ("albert", "albert_unshared", "electra") else {}
    return build_transformer_model("tiny", model=family, verbose=False, **sizes, **options)


@pytest.mark.parametrize("family", families.ENCODER_NAMES)
def test_builder_and_first_token_head_run_the_architectures_blocks(family, blocks_run):
    backbone = _build(family)
    assert blocks_run == [(0, "graph"), (1, "graph")]
    encoder = architecture.of(backbone)
    assert type(encoder) is Encoder and encoder.family is families.get(family)
    assert encoder.config == backbone.bert_config and len(encoder.blocks) == backbone.bert_config.num_hidden_layers
    model = heads.cls(backbone, 2)
    # ALBERT's shared block has no last call of its own to run again: the head takes x[:, 0] of its output
    assert blocks_run[2:] == ([] if families.get(family).shared_block else [(1, "first")])
    ids = np.array([[2, 9, 17, 3, 0]], "int32")
    inputs = [ids, np.zeros_like(ids)][:len(model.inputs)]
    full = heads.cls(backbone, 2, first_token_only=False)
    full.set_weights(model.get_weights())
    np.testing.assert_allclose(model.predict(inputs, verbose=0), full.predict(inputs, verbose=0), atol=1e-6)


@pytest.mark.parametrize("family", GENERATIVE)
def test_the_cached_decoder_runs_the_same_blocks_over_its_cache(family, blocks_run):
    model = _build(family, application="lm")
    lm = CachedModel(model)
    assert all(lm.encoder.layers[layer.name] is layer for layer in model.layers)  # the model's own layers
    del blocks_run[:]
    cache, _ = lm.start([[2, 7, 9, 3]], max_length=2)
    cache, _ = lm.step(cache, np.array([11]))
    assert blocks_run == [(0, "cache"), (1, "cache")] * 2  # one trace of the prefill, one of the step


@pytest.mark.parametrize("family", [name for name in families.FAMILY_NAMES if families.get(name).architecture == "gpt"])
def test_gpt_builder_and_cached_decoder_run_its_blocks(family, monkeypatch):
    """The builder runs GPT's blocks in a graph, the cached decoder the same blocks over its cache, both through
    `GPT.block` over the model's own layers."""
    from kerasbert.modeling.gpt import GPT

    calls, block = [], GPT.block

    def spy(self, index, x, mask, positions=None, *, cache=None, first=None):
        calls.append((index, "cache" if cache is not None else "graph"))
        return block(self, index, x, mask, positions, cache=cache, first=first)

    monkeypatch.setattr(GPT, "block", spy)
    model = _build(family)
    assert calls == [(0, "graph"), (1, "graph")] and model.application == "lm"
    lm = CachedModel(model)
    assert type(lm.encoder) is GPT and all(lm.encoder.layers[layer.name] is layer for layer in model.layers)
    del calls[:]
    cache, logp = lm.start([[2, 7, 9, 3], [5, 6]], max_length=2)
    cache, logp = lm.step(cache, np.array([11, 12]))
    assert calls == [(0, "cache"), (1, "cache")] * 2  # one trace of the prefill, one of the step
    ids = np.array([[2, 7, 9, 3, 11], [5, 6, 12, 0, 0]], "int32")
    full = model.predict([ids, np.zeros_like(ids)][:len(model.inputs)], verbose=0)
    np.testing.assert_allclose(np.exp(logp), full[[0, 1], [4, 2]], atol=1e-6)


def test_no_module_but_the_architecture_spells_a_blocks_wiring():
    """The pieces of a block run by hand (its residual's ``finish``, attention's ``qkv``/``attend``/``merge``) are
    called only by the architecture, and by the attention layer over its own parts."""
    pieces, allowed = {"finish", "qkv", "attend", "merge"}, {"modeling/encoder.py", "modeling/blocks.py",
                                                              "modeling/t5.py", "modeling/t5_layers.py",
                                                              "modeling/gpt.py", "modeling/modernbert_layers.py",
                                                              "modeling/deberta_layers.py"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in pieces
                    and where not in allowed):
                found.append(f"{where}:{node.lineno} .{node.func.attr}()")
            if isinstance(node, ast.Attribute) and node.attr == "residual" and where not in (
                    "modeling/encoder.py", "modeling/t5.py", "modeling/gpt.py", "modeling/modernbert.py",
                    "modeling/deberta.py"):
                found.append(f"{where}:{node.lineno} names.residual")
    assert not found, found


T5_CONFIG = {"vocab_size": 50, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
             "attention_head_size": 5, "intermediate_size": 20, "hidden_act": ["gelu", "linear"],
             "relative_attention_num_buckets": 32}


@pytest.mark.parametrize("part, calls", [("", ["encoder", "encoder", "decoder", "decoder"]),
                                         ("_encoder", ["encoder", "encoder"]), ("_decoder", ["decoder", "decoder"])])
def test_t5_builds_each_part_through_its_architecture(part, calls, monkeypatch):
    """The builder runs T5's blocks through `T5.block` (the decoder's where a context is given); the built model
    records its part, and `architecture.of` gives the same architecture over the model's own layers."""
    from kerasbert.modeling.t5 import T5

    seen, block = [], T5.block

    def spy(self, index, x, mask, positions=None, *, context=None, **options):
        seen.append("encoder" if context is None else "decoder")
        return block(self, index, x, mask, positions, context=context, **options)

    monkeypatch.setattr(T5, "block", spy)
    model = build_transformer_model(config=T5_CONFIG, model="t5.1.1" + part, verbose=False)
    assert seen == calls
    t5 = architecture.of(model)
    assert type(t5) is T5 and t5.family.part == part[1:] and t5.config == model.bert_config
    assert all(t5.layers[layer.name] is layer for layer in model.layers)
    with pytest.raises(ModelError, match="expected an encoder block run over its whole input, found cache=. T5's "
                                         "encoder blocks run in a graph only"):
        t5.block(0, None, None, cache=lambda k, v: (k, v))


def test_t5_cached_decoder_runs_its_blocks_over_its_cache(monkeypatch):
    """`generate`'s decoder for T5 (chosen by its architecture) runs the encoder's blocks in a graph once, then the
    decoder's over their kept keys and values, through `T5.block` over the model's own layers."""
    from kerasbert.generation.generate import cached_decoder
    from kerasbert.generation.seq2seq_cache import CachedEncoderDecoder
    from kerasbert.modeling.t5 import T5

    seen, block = [], T5.block

    def spy(self, index, x, mask, positions=None, *, cache=None, context=None, **options):
        seen.append(("encoder" if context is None else "decoder", "cache" if cache is not None else "graph"))
        return block(self, index, x, mask, positions, cache=cache, context=context, **options)

    model = build_transformer_model(config=T5_CONFIG, model="t5.1.1", verbose=False)
    monkeypatch.setattr(T5, "block", spy)
    t5 = cached_decoder(model)
    assert type(t5) is CachedEncoderDecoder and all(t5.t5.layers[layer.name] is layer for layer in model.layers)
    cache, logp = t5.start([[5, 7, 9], [6]], max_length=2)
    cache, logp = t5.step(cache, np.array([11, 12]))
    # one trace of the prefill (the encoder, then the decoder at the start token), one of the step
    assert seen == [("encoder", "graph")] * 2 + [("decoder", "cache")] * 2 * 2
    full = model.predict([np.array([[5, 7, 9], [6, 0, 0]]), np.array([[0, 11], [0, 12]])], verbose=0)
    np.testing.assert_allclose(np.exp(logp), full[:, 1], atol=1e-6)
