"""kerasbert.compat.snippets.AutoRegressiveDecoder: bert4keras 0.11.5's ids on a toy scorer, and its errors.

Both decoders wrap the same NumPy scorer (tests/toy_decoder.py); beam search must give the same ids, and
sampling the same ids after the same ``np.random.seed``. bert4keras runs once per module, all cases in one task.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from kerasbert import DataError, ModelError
from kerasbert.compat.snippets import AutoRegressiveDecoder

import helpers
import toy_decoder

INPUTS = [[[3, 4, 5]], [[9, 9], [1, 0]]]  # one input; two (token and segment ids, as bert4keras's examples pass)
BEAM = [(topk, min_ends, temperature) for topk, min_ends, temperature in
        [(1, 1, 1), (3, 1, 1), (5, 1, 1), (4, 2, 1), (3, 1, 0.6), (3, 1, 1.7), (20, 1, 1)]]
SAMPLE = [{}, {"topk": 4}, {"topp": 0.7}, {"topk": 6, "topp": 0.8}, {"temperature": 0.6}, {"temperature": 1.5},
          {"topk": 5, "temperature": 0.8, "min_ends": 2}, {"topk": 20}, {"topp": 0.0}]
SETTINGS = [  # decoder settings beyond the default (start 1, end 2, maxlen 12), each tried with both methods
    {}, {"start_id": None}, {"minlen": 7}, {"maxlen": 3}, {"end_id": None, "maxlen": 5}, {"use_states": True},
]


def _cases() -> dict[str, dict]:
    cases = {}
    for rtype in ("logits", "probas"):
        for i, inputs in enumerate(INPUTS):
            for topk, min_ends, temperature in BEAM:
                cases[f"beam-{rtype}-in{i}-k{topk}-e{min_ends}-t{temperature}"] = {
                    "method": "beam", "rtype": rtype, "inputs": inputs, "maxlen": 12,
                    "kwargs": {"topk": topk, "min_ends": min_ends, "temperature": temperature}}
            for n in (1, 3):
                for j, kwargs in enumerate(SAMPLE):
                    cases[f"sample-{rtype}-in{i}-n{n}-{j}"] = {
                        "method": "sample", "rtype": rtype, "inputs": inputs, "maxlen": 12, "seed": 10 * j + n,
                        "kwargs": {"n": n, **kwargs}}
        for j, setting in enumerate(SETTINGS):
            cases[f"beam-{rtype}-setting{j}"] = {"method": "beam", "rtype": rtype, "inputs": INPUTS[0], "maxlen": 12,
                                                 "kwargs": {"topk": 3}, **setting}
            cases[f"sample-{rtype}-setting{j}"] = {"method": "sample", "rtype": rtype, "inputs": INPUTS[0],
                                                   "maxlen": 12, "seed": j, "kwargs": {"n": 4, "topk": 8}, **setting}
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def theirs(tmp_path_factory) -> dict[str, list[list[int]]]:
    task = {"kind": "decode", "cases": list(CASES.values())}
    out = helpers.run_oracle([task], str(tmp_path_factory.mktemp("oracle")))
    return dict(zip(CASES, json.loads(str(out["0/json"])), strict=True))


@pytest.fixture(scope="module")
def ours() -> dict[str, list[list[int]]]:
    return {name: toy_decoder.decode(AutoRegressiveDecoder, case) for name, case in CASES.items()}


def test_beam_search_equals_bert4keras(theirs, ours):
    beams = [name for name in CASES if name.startswith("beam")]
    assert {name: ours[name] for name in beams} == {name: theirs[name] for name in beams}
    assert len({tuple(ours[name][0]) for name in beams}) > 5  # the cases find different sequences


def test_random_sample_equals_bert4keras_under_one_seed(theirs, ours):
    samples = [name for name in CASES if name.startswith("sample")]
    assert {name: ours[name] for name in samples} == {name: theirs[name] for name in samples}
    lengths = {len(ids) for name in samples for ids in ours[name]}
    assert len(lengths) > 5  # sequences end at many steps, so the cases exercise ending and dropping


def test_random_sample_returns_n_sequences_and_a_new_seed_changes_them(ours):
    case = dict(CASES["sample-logits-in0-n3-0"], seed=99)
    assert all(len(ours[name]) == CASES[name]["kwargs"]["n"] for name in CASES if name.startswith("sample"))
    assert toy_decoder.decode(AutoRegressiveDecoder, case) != ours["sample-logits-in0-n3-0"]


def test_minlen_maxlen_start_id_and_states_shape_the_sequences(ours):
    for method in ("beam", "sample"):
        assert all(ids[0] == toy_decoder.START for ids in ours[f"{method}-logits-setting0"])
        assert all(len(ids) >= 7 for ids in ours[f"{method}-logits-setting2"])  # minlen counts start_id
        assert all(len(ids) <= 4 for ids in ours[f"{method}-logits-setting3"])  # maxlen tokens after start_id
        assert all(len(ids) == 6 for ids in ours[f"{method}-logits-setting4"])  # no end_id: maxlen always
    assert all(1 <= len(ids) <= 12 for ids in ours["sample-logits-setting1"])  # no start_id: maxlen ids at most
    assert ours["beam-logits-setting0"][0][-1] == toy_decoder.END
    assert ours["beam-logits-setting5"] != ours["beam-logits-setting0"]  # with use_states, the states reach predict


def test_wraps_applies_temperature_and_rtype():
    inputs, output_ids = [np.array([[3, 4]])], np.array([[1, 5]])
    logits = toy_decoder.toy_logits(inputs, output_ids)
    for rtype in ("logits", "probas"):
        decoder = toy_decoder.decoder_class(AutoRegressiveDecoder, rtype)(1, 2, 5)
        probas, states = decoder.predict(inputs, output_ids, None, 0.5, "probas")
        expected = np.exp(logits / 0.5) / np.exp(logits / 0.5).sum()
        np.testing.assert_allclose(probas, expected, rtol=1e-4)
        log_probas, _ = decoder.predict(inputs, output_ids, None, 0.5, "logits")
        np.testing.assert_allclose(log_probas, np.log(probas + 1e-12), rtol=1e-6)
        assert states is None
    stateful = toy_decoder.decoder_class(AutoRegressiveDecoder, "logits", use_states=True)(1, 2, 5)
    assert stateful.predict(inputs, output_ids, 4)[1] == 5


def test_a_tiny_temperature_is_greedy_and_finite():
    inputs, output_ids = [np.array([[3, 4]])], np.array([[1, 5]])
    best = int(np.argmax(toy_decoder.toy_logits(inputs, output_ids)))
    for rtype in ("logits", "probas"):
        decoder = toy_decoder.decoder_class(AutoRegressiveDecoder, rtype)(1, 2, 5)
        for temperature in (1e-300, 5e-324):
            probas, _ = decoder.predict(inputs, output_ids, None, temperature, "probas")
            assert np.isfinite(probas).all() and probas.ravel().tolist() == [float(i == best) for i in
                                                                             range(probas.size)]
        ids = decoder.beam_search([np.array([3, 4])], topk=2, temperature=1e-300)
        assert np.isfinite(ids).all() and ids.size > 0


def _tiny_lm(vocab: int = 11) -> keras.Model:
    token_ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(vocab, 8, mask_zero=True)(token_ids)  # the output carries a Keras mask
    return keras.Model(token_ids, keras.layers.Dense(vocab)(hidden))


def test_last_token_returns_the_last_position_and_is_built_once():
    model = _tiny_lm()
    decoder = AutoRegressiveDecoder(start_id=1, end_id=2, maxlen=5)
    x = np.array([[1, 5, 7, 3], [1, 4, 0, 0]])
    last = decoder.last_token(model)
    np.testing.assert_allclose(last.predict(x, verbose=0), model.predict(x, verbose=0)[:, -1], rtol=1e-6)
    assert decoder.last_token(model) is last and decoder.models == {model: last}


def test_last_token_on_a_kerasbert_model(tmp_path):
    with open(tmp_path / "bert_config.json", "w") as f:
        json.dump(helpers.TINY, f)
    from kerasbert.compat.models import build_transformer_model

    bert = build_transformer_model(str(tmp_path / "bert_config.json"), with_mlm=True, verbose=False)
    token_ids, segment_ids = np.array([[2, 9, 17, 3, 5]]), np.zeros((1, 5), int)
    last = AutoRegressiveDecoder(None, 3, 4).last_token(bert)
    np.testing.assert_allclose(last.predict([token_ids, segment_ids], verbose=0),
                               bert.predict([token_ids, segment_ids], verbose=0)[:, -1], rtol=1e-5, atol=1e-7)


def test_decoding_with_a_keras_model_through_last_token():
    model = _tiny_lm()

    class Decoder(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="logits")
        def predict(self, inputs, output_ids, states):
            return self.last_token(model)(np.concatenate([inputs[0], output_ids], 1))  # a tensor: taken as NumPy

    ids = Decoder(start_id=1, end_id=2, maxlen=4).beam_search([[5, 6]], topk=3)
    assert ids[0] == 1 and 2 <= len(ids) <= 5


@pytest.mark.parametrize("method", ["beam", "sample"])
def test_topk_above_the_vocabulary_names_both(method):
    decoder = toy_decoder.decoder_class(AutoRegressiveDecoder)(1, 2, 5)
    with pytest.raises(ModelError, match=r"topk: expected at most the vocabulary size, 20 .*topk=21.*topk <= 20"):
        if method == "beam":
            decoder.beam_search([[3]], topk=21)
        else:
            decoder.random_sample([[3]], n=2, topk=21)


def test_bad_arguments_raise_data_errors():
    decoder = toy_decoder.decoder_class(AutoRegressiveDecoder)(1, 2, 5)
    for call, match in [(lambda: decoder.beam_search([[3]], topk=0), "beam_search: topk: expected a whole number"),
                        (lambda: decoder.random_sample([[3]], n=0), "random_sample: n: expected a whole number"),
                        (lambda: decoder.random_sample([[3]], n=2, topk=0), "random_sample: topk"),
                        (lambda: decoder.beam_search([[3]], topk=2, temperature=0), "temperature: expected a number"),
                        (lambda: decoder.predict([[3]], np.array([[1]]), None, 1, "scores"), "rtype"),
                        (lambda: AutoRegressiveDecoder(1, 2, maxlen=3, minlen=5), "maxlen: expected >= minlen"),
                        (lambda: AutoRegressiveDecoder.wraps("probs"), "default_rtype"),
                        (lambda: AutoRegressiveDecoder(1, [2, 5], maxlen=3), "end_id: expected one token id")]:
        with pytest.raises(DataError, match=match):
            call()


def test_predict_scores_of_the_wrong_shape_or_form_raise_model_errors():
    class Flat(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="logits")
        def predict(self, inputs, output_ids, states):
            return np.zeros(5)  # one row's scores, without the row axis

    class Stateless(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="logits", use_states=True)
        def predict(self, inputs, output_ids, states):
            return np.zeros((1, 5))

    with pytest.raises(ModelError, match=r"shape \(rows, vocab_size\)"):
        Flat(1, 2, 5).beam_search([[3]], topk=2)
    with pytest.raises(ModelError, match=r"\(scores, states\)"):
        Stateless(1, 2, 5).random_sample([[3]], n=2)
    with pytest.raises(NotImplementedError, match="wraps"):
        AutoRegressiveDecoder(1, 2, 5).beam_search([[3]], topk=2)


def test_beam_search_hands_predict_the_same_arrays_at_every_step():
    """As in bert4keras, the inputs become arrays once (one row, then one per beam from the second step), so a
    predict that marks them in place (task_reading_comprehension_by_seq2seq.py's -1 on a passage without an
    answer) finds its marks at the next steps."""
    seen = []

    class Marking(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="probas", use_states=True)
        def predict(self, inputs, output_ids, states):
            seen.append([x[:, 0].tolist() for x in inputs])
            if states == 0:
                inputs[1][:, 0] = -1
            return np.tile([0.1, 0.2, 0.3, 0.35, 0.05], (len(output_ids), 1)), states + 1

    ids = Marking(start_id=None, end_id=4, maxlen=3).beam_search([[7, 8], [9, 9]], topk=2, states=0)
    assert ids.tolist() == [3, 3, 3]
    assert seen == [[[7], [9]], [[7, 7], [-1, -1]], [[7, 7], [-1, -1]]]
