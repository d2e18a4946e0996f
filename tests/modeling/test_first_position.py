"""Id 0 is padding except in the first position, as in bert4keras 0.11.5 (its ``Embedding.compute_mask`` keeps
position 0): rows that start with id 0 (the chess language model's rows), a row of padding alone and a row with an
inner 0 give bert4keras's outputs for BERT as an encoder, ``"lm"`` and ``"unilm"``, and for GPT and GPT-2, with no
NaN; the cached decoder continues a source that starts with id 0 as bert4keras's model scores it. One oracle run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert.generation.generate import cached_decoder

import helpers

CONFIG = dict(helpers.TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TOKEN_IDS = np.array([[0, 9, 10, 11, 0, 0],  # starts with 0, as the chess rows do
                      [0, 0, 0, 0, 0, 0],  # padding alone
                      [2, 5, 0, 7, 3, 0],  # an inner 0: padding, as in bert4keras
                      [0, 9, 10, 11, 15, 16]], np.int32)  # row 0 continued: the cached decoder's steps
SEGMENT_IDS = np.array([[0, 0, 1, 1, 0, 0], [0] * 6, [0, 0, 0, 1, 1, 0], [0] * 6], np.int32)
BERT = {"encoder": {}, "lm": {"application": "lm"}, "unilm": {"application": "unilm"}}
GPT = ("gpt", "gpt2")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """bert4keras's outputs on the batch: BERT from a random Google checkpoint under each application, and each GPT
    family from a random checkpoint bert4keras writes in its names."""
    work = str(tmp_path_factory.mktemp("first_position"))
    folders = {"bert": os.path.join(work, "bert"), **{family: os.path.join(work, family) for family in GPT}}
    helpers.write_checkpoint(folders["bert"], helpers.random_google_weights(CONFIG, seed=7), CONFIG)
    inputs = os.path.join(work, "inputs.npz")
    np.savez(inputs, token_ids=TOKEN_IDS, segment_ids=SEGMENT_IDS)
    tasks = [helpers.predict_task(folders["bert"], inputs, **kwargs) for kwargs in BERT.values()]
    for seed, family in enumerate(GPT):
        os.makedirs(folders[family])
        with open(os.path.join(folders[family], "bert_config.json"), "w") as f:
            json.dump(CONFIG, f)
        source = {"config": os.path.join(folders[family], "bert_config.json"), "model": family,
                  "checkpoint": os.path.join(folders[family], "bert_model.ckpt")}
        tasks += [{"kind": "gpt_checkpoint", **source, "seed": seed, "std": 0.2},
                  {"kind": "gpt_predict", **source, "inputs": inputs}]
    out = helpers.run_bert4keras("oracle_first_position.py", {"tasks": tasks}, work)
    theirs = {name: out[f"{i}/0"] for i, name in enumerate(BERT)}
    theirs.update({family: out[f"{len(BERT) + 2 * i + 1}/output"] for i, family in enumerate(GPT)})
    return folders, theirs


def _model(folders: dict, name: str):
    if name in BERT:
        return helpers.build_from(folders["bert"], "bert", **BERT[name])
    return helpers.build_from(folders[name], name)


@pytest.mark.parametrize("name", [*BERT, *GPT])
def test_outputs_equal_bert4keras(oracle, name):
    """Every row, the padding-only one included, is finite and within 1e-5 of bert4keras's."""
    folders, theirs = oracle
    model = _model(folders, name)
    ours = model.predict([TOKEN_IDS, np.zeros_like(SEGMENT_IDS) if name in GPT else SEGMENT_IDS][:len(model.inputs)],
                         verbose=0)
    assert np.isfinite(ours).all() and np.isfinite(theirs[name]).all()
    np.testing.assert_allclose(ours, theirs[name], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["lm", "gpt2"])
def test_cached_decoder_continues_a_row_starting_with_0(oracle, name):
    """The cached decoder's prefill over ``[0, 9, 10, 11]`` and its step on 15 give bert4keras's next-token
    probabilities at positions 3 and 4 of the row that continues it."""
    folders, theirs = oracle
    model = _model(folders, name)
    decoder = cached_decoder(model)
    cache, first = decoder.start([TOKEN_IDS[3, :4].tolist()], max_length=2)
    _, second = decoder.step(cache, np.array([TOKEN_IDS[3, 4]]))
    np.testing.assert_allclose(np.exp(first[0]), theirs[name][3, 3], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.exp(second[0]), theirs[name][3, 4], atol=1e-5, rtol=0)
