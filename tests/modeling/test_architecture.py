"""One architecture wires each model: the builder, the heads and the cached decoder run their blocks through it."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from kerasbert import build_transformer_model, heads
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


def test_no_module_but_the_architecture_spells_a_blocks_wiring():
    """The pieces of a block run by hand (its residual's ``finish``, attention's ``qkv``/``attend``/``merge``) are
    called only by the architecture, and by the attention layer over its own parts."""
    pieces, allowed = {"finish", "qkv", "attend", "merge"}, {"modeling/encoder.py", "modeling/blocks.py"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in pieces
                    and where not in allowed):
                found.append(f"{where}:{node.lineno} .{node.func.attr}()")
            if isinstance(node, ast.Attribute) and node.attr == "residual" and where != "modeling/encoder.py":
                found.append(f"{where}:{node.lineno} names.residual")
    assert not found, found
