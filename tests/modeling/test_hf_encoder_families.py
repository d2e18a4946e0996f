"""RoBERTa, XLM-R and DistilBERT built from their Hugging Face ``config.json``: the family from ``model_type``, the
config's keys and ε, the padding id the model masks, the position table read from the row after the padding id,
their final layers, the cached decoder's positions, the annotated summary, and what is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kerasbert import BertConfig, ConfigError, ModelError, build_transformer_model, heads, summary
from kerasbert.generation.cache import CachedModel
from kerasbert.modeling import families

import hf_encoder_folders as hf

FAMILIES = ("roberta_en", "xlm_roberta", "distilbert")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_config_json_gives_the_family_its_sizes_and_padding(family):
    config = BertConfig.from_dict(hf.config(family))
    found = families.resolve(None, config)
    assert found.name == family and families.resolve(family, config) is found
    model = build_transformer_model(config=hf.config(family), verbose=False)
    assert model.family == family
    roberta = family != "distilbert"
    assert [i.name for i in model.inputs] == (["Input-Token", "Input-Segment"] if roberta else ["Input-Token"])
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (16, 2, 32)
    assert model.get_layer("Embedding-Norm").epsilon == (1e-5 if roberta else 1e-12)
    pad = 1 if roberta else 0
    assert model.get_layer("Embedding-Token").pad_id == model.get_layer("Attention-Mask").pad_id == pad
    assert families.max_length(found, config) == 20  # RoBERTa's 22 rows less the first two; DistilBERT's 20
    position = model.get_layer("Embedding-Position")
    assert (position.input_dim, position.max_length) == ((22, 20) if roberta else (20, 20))
    with pytest.raises(ConfigError, match=f"model_type: expected a bert config for model='bert', found "
                                          f"'{hf.MODEL_TYPES[family]}'"):
        build_transformer_model(config=hf.config(family), model="bert", verbose=False)


def test_a_published_roberta_config_takes_512_tokens():
    config = BertConfig.from_dict({**hf.config("xlm_roberta"), "max_position_embeddings": 514})
    assert families.max_length("xlm_roberta", config) == 512
    with pytest.raises(ModelError, match="sequence_length: expected 1 to 512"):
        build_transformer_model(config=config, sequence_length=513, verbose=False)
    assert build_transformer_model(config=config, sequence_length=512, verbose=False).output.shape[1] == 512


@pytest.mark.parametrize("family", FAMILIES)
def test_padding_with_the_pad_id_changes_no_real_position(family):
    model = build_transformer_model(config=hf.config(family), verbose=False)
    data = hf.batch(family, seed=7)
    short = {key: value[:, :4] for key, value in data.items()}  # the rows' first four tokens: no padding
    padded = {**data, "token_ids": np.where(np.arange(12) < 4, data["token_ids"], 0 if family == "distilbert" else 1)}
    np.testing.assert_allclose(model.predict(hf.inputs(model, padded), verbose=0)[:, :4],
                               model.predict(hf.inputs(model, short), verbose=0), atol=1e-5)


def test_roberta_reads_its_positions_from_the_row_after_the_padding_id():
    model = build_transformer_model(config=hf.config("roberta_en"), verbose=False)
    table = np.asarray(model.get_layer("Embedding-Position").embeddings)
    x = np.zeros((1, 5, 16), np.float32)
    np.testing.assert_array_equal(np.asarray(model.get_layer("Embedding-Position")(x))[0], table[2:7])


@pytest.mark.parametrize("family, flag", [("roberta_en", "with_nsp"), ("xlm_roberta", "with_nsp"),
                                          ("distilbert", "with_nsp"), ("distilbert", "with_pool")])
def test_final_layers_transformers_lacks_are_refused(family, flag):
    with pytest.raises(ModelError, match=f"{flag}: expected one of .* for model='{family}'"):
        build_transformer_model(config=hf.config(family), verbose=False, **{flag: True})
    backbone = build_transformer_model(config=hf.config(family), verbose=False)
    with pytest.raises(ModelError, match="heads.nsp: expected a backbone of a family with NSP layers"):
        heads.nsp(backbone)
    assert heads.mlm(backbone).output.shape[-1] == 60


@pytest.mark.parametrize("family", ["roberta_en", "xlm_roberta"])
def test_the_cached_decoder_reads_the_positions_the_graph_reads(family):
    model = build_transformer_model(config=hf.config(family), application="lm", with_mlm="linear", verbose=False)
    lm = CachedModel(model)
    sources = [[0, 7, 9, 12, 2], [0, 5, 2]]
    cache, first = lm.start(sources, max_length=2)
    cache, second = lm.step(cache, np.array([11, 13]))
    for row, source in enumerate(sources):
        for tokens, logp in ((source, first), (source + [[11, 13][row]], second)):
            logits = model.predict([np.array([tokens]), np.zeros((1, len(tokens)), "int32")], verbose=0)[0, -1]
            expected = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
            np.testing.assert_allclose(logp[row], expected, atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_annotated_summary_adds_up(family):
    flags = {"with_pool": True, "with_mlm": True} if family == "roberta_en" else {"with_mlm": True}
    model = build_transformer_model(config=hf.config(family), verbose=False, **flags)
    s = summary(model, print_fn=lambda *args, **kwargs: None)
    assert s.mismatches == [] and s.params == model.count_params() == s.formula_params
    rows = {row.name: row for row in s.rows}
    assert str(rows["Embedding-Position"].formula) == ("P·H = 22·16" if family != "distilbert" else "P·H = 20·16")
    assert ("Embedding-Segment" in rows) == (family != "distilbert")


def test_a_config_of_another_model_type_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**hf.ROBERTA, "model_type": "bart"}))
    with pytest.raises(ConfigError, match=r"config.json: model_type: expected one of .*'roberta', 'xlm-roberta', "
                                          r"'distilbert'.*, found 'bart'"):
        build_transformer_model(str(path), verbose=False)
