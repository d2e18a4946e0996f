"""A model carries its config (`kerasbert.config_of`), and `kerasbert.layer_names` alone spells the layer names."""

from __future__ import annotations

import ast
import os
import pathlib

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model, config_of, heads, layer_names
from kerasbert.errors import ModelError
from kerasbert.modeling.backbone import TransformerModel, clone
from kerasbert.modeling.config import BertConfig

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "kerasbert"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
TINY = BertConfig.from_preset("tiny")
BATCH = [np.array([[2, 9, 17, 3, 0]]), np.zeros((1, 5), "int32")]
HEADS = {
    "cls": lambda b: heads.cls(b, 3, dropout=0.1),
    "cls-mean": lambda b: heads.cls(b, 2, pooling="mean"),
    "tagging": lambda b: heads.tagging(b, 5),
    "tagging-crf": lambda b: heads.tagging(b, 5, crf=True),
    "crf-decoder": lambda b: heads.crf_decoder(heads.tagging(b, 5, crf=True)),
    "mlm": heads.mlm,
    "nsp": heads.nsp,
    "spans": lambda b: heads.spans(b, 2, head_size=8),
}


@pytest.fixture(scope="module")
def bert():
    return build_transformer_model("tiny", verbose=False)


def test_the_built_model_carries_the_config_it_was_built_from(bert):
    assert isinstance(bert, TransformerModel)
    assert config_of(bert) == TINY and (bert.family, bert.application) == ("bert", "encoder")
    changed = build_transformer_model("tiny", num_hidden_layers=3, max_position=32, dropout_rate=0.3, verbose=False)
    assert config_of(changed) == TINY.replace(num_hidden_layers=3, max_position_embeddings=32, hidden_dropout_prob=0.3)
    kept = build_transformer_model("tiny", keep_tokens=[0, 1, 2, 3, 5], with_mlm=True, verbose=False)
    assert config_of(kept).vocab_size == 5


@pytest.mark.parametrize("head", sorted(HEADS))
def test_every_head_model_carries_its_backbones_config(bert, head):
    model = HEADS[head](bert)
    assert isinstance(model, TransformerModel) and config_of(model) is config_of(bert)
    assert [t.name for t in model.inputs] == [layer_names.TOKEN_INPUT, layer_names.SEGMENT_INPUT]
    flat = keras.Model(model.inputs, model.outputs)  # bert4keras's way: the same graph, the same layer list
    assert [layer.name for layer in model.layers] == [layer.name for layer in flat.layers]
    with pytest.raises(ModelError, match=r"a keras.Model without one\. build it with .*backbone\.clone"):
        config_of(flat)  # a config is never guessed from the layers


def test_the_config_survives_a_keras_file_get_config_and_clone(bert, tmp_path):
    model = heads.tagging(build_transformer_model("tiny", num_hidden_layers=3, verbose=False), 4, crf=True)
    path = os.fspath(tmp_path / "tagger.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert type(loaded) is TransformerModel and config_of(loaded) == config_of(model)
    np.testing.assert_allclose(loaded.predict(BATCH, verbose=0), model.predict(BATCH, verbose=0), atol=1e-6)
    assert config_of(TransformerModel.from_config(model.get_config())).num_hidden_layers == 3
    copy = clone(bert)
    assert config_of(copy) == config_of(bert) and (copy.family, copy.application) == (bert.family, bert.application)
    assert not {id(layer) for layer in copy.layers} & {id(layer) for layer in bert.layers}
    assert config_of(clone(bert, clone_function=lambda layer: layer)) == config_of(bert)
    with pytest.raises(ModelError, match=r"a copy made without one\. .*kerasbert\.modeling\.backbone\.clone"):
        config_of(keras.models.clone_model(bert))  # Keras makes its copy from tensors alone


def test_a_model_that_holds_the_backbone_as_a_layer_gives_its_config(bert):
    outer = keras.Model(bert.inputs, keras.layers.Dense(2)(bert(bert.inputs)))
    assert config_of(outer) is config_of(bert)


@pytest.mark.parametrize("name", ["cls", "tagging", "tagging-crf"])
def test_a_keras_file_without_a_stored_config_loads_and_says_how_to_get_one(name):
    model = keras.saving.load_model(FIXTURES / f"{name}.keras", compile=False)
    assert not isinstance(model, TransformerModel)
    with pytest.raises(ModelError, match=r"found a keras.Model without one\. build it with kerasbert\."):
        config_of(model)
    rebuilt = TransformerModel(model.inputs, model.outputs, bert_config=TINY, family="bert")  # its graph, told
    assert config_of(heads.crf_decoder(rebuilt) if "crf" in name else rebuilt) == TINY


def test_an_unknown_family_is_refused(bert):
    with pytest.raises(ModelError, match="family: expected 'bert'"):
        TransformerModel(bert.inputs, bert.outputs, family="gpt3")


def _strings(path: pathlib.Path) -> list[tuple[int, str]]:
    """The string constants of a module (f-string parts included), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_module_but_layer_names_spells_a_block_or_embedding_name():
    spelled = [f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
               for path in sorted(PACKAGE.rglob("*.py")) if path.name != "layer_names.py" or path.parent != PACKAGE
               for line, text in _strings(path)
               if layer_names.BLOCK_PREFIX in text or layer_names.EMBEDDING_PREFIX in text]
    assert not spelled, "\n".join(spelled)


def test_the_names_parse_back():
    name = layer_names.block(7, layer_names.ATTENTION_NORM)
    assert layer_names.parse_block(name) == (7, layer_names.ATTENTION_NORM)
    assert layer_names.part_of(name) == ("encoder", 7)
    parts = [layer_names.part_of(n)[0] for n in (layer_names.ATTENTION_MASK, layer_names.EMBEDDING_NORM,
                                                  layer_names.POOLER, layer_names.NSP_PROBA, layer_names.MLM_NORM,
                                                  layer_names.TAGGING_CRF)]
    assert parts == ["inputs", "embeddings", "pooler", "nsp", "mlm", "head"]
