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
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import BertConfig, config_from_layers

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
    assert config_from_layers(flat) == config_of(bert)


def test_the_config_survives_a_keras_file_get_config_and_clone(bert, tmp_path):
    model = heads.tagging(build_transformer_model("tiny", num_hidden_layers=3, verbose=False), 4, crf=True)
    path = os.fspath(tmp_path / "tagger.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert type(loaded) is TransformerModel and config_of(loaded) == config_of(model)
    np.testing.assert_allclose(loaded.predict(BATCH, verbose=0), model.predict(BATCH, verbose=0), atol=1e-6)
    assert config_of(TransformerModel.from_config(model.get_config())).num_hidden_layers == 3
    assert config_of(keras.models.clone_model(bert)) == config_of(bert)
    assert config_of(keras.models.clone_model(bert, clone_function=lambda layer: layer)) == config_of(bert)


def test_a_model_that_holds_the_backbone_as_a_layer_gives_its_config(bert):
    outer = keras.Model(bert.inputs, keras.layers.Dense(2)(bert(bert.inputs)))
    assert config_of(outer) is config_of(bert)


@pytest.mark.parametrize("name", ["cls", "tagging", "tagging-crf"])
def test_a_keras_file_without_a_stored_config_has_it_read_off_its_layers(name):
    model = keras.saving.load_model(FIXTURES / f"{name}.keras", compile=False)
    assert not isinstance(model, TransformerModel)
    assert config_of(model) == TINY
    sequence = model.get_layer(layer_names.block(TINY.num_hidden_layers - 1, layer_names.FEED_FORWARD_NORM)).output
    head = heads.cls(keras.Model(model.inputs, sequence), 2)  # a head on the legacy layers stores the config read
    assert isinstance(head, TransformerModel) and config_of(head) == TINY


def test_a_model_without_bert_layers_has_no_config():
    inputs = keras.Input((4,))
    with pytest.raises(ModelError, match="expected a model from build_transformer_model"):
        config_of(keras.Model(inputs, keras.layers.Dense(2, name="Embedding-X")(inputs)))


def test_an_unknown_family_is_refused(bert):
    with pytest.raises(ModelError, match="family: expected 'bert'"):
        TransformerModel(bert.inputs, bert.outputs, family="gpt")


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
