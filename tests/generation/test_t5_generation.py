"""Cached generation with a whole T5 (`kerasbert.generation.seq2seq_cache`): greedy and beam ids equal to bert4keras
0.11.5's ``AutoRegressiveDecoder`` driven as its mT5 title example drives it, on random checkpoints in its names and
a ragged batch of sources, from T5's start id 0 or another (T5 PEGASUS's [CLS]); the cached probabilities equal
bert4keras's along its samples and kerasbert's whole model's; what generation refuses and bounds for T5."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import DataError, ModelError, build_transformer_model, generate
from kerasbert.choices import GENERATE_LIMITS
from kerasbert.generation.cache import CachedModel
from kerasbert.generation.seq2seq_cache import CachedEncoderDecoder

import helpers

# heads 3 × d_kv 5 = 15 ≠ hidden 12, as T5's attention_head_size allows
CONFIG = {"vocab_size": 40, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
          "attention_head_size": 5, "intermediate_size": 20, "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
          "relative_attention_num_buckets": 32}
ACTIVATIONS = {"t5": "relu", "t5.1.1": ["gelu", "linear"], "mt5.1.1": ["gelu", "linear"]}  # T5.1.0's is ReLU
SOURCES = [[5, 17, 30, 22, 9, 1], [8, 1], [3, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1], [25, 26, 27, 1]]
MAXLEN, N, TOPK = 8, 2, 5
START_ID = 2  # a decoder start that is no padding id, a visible key: T5 PEGASUS's [CLS]
# each case: its family and decoder start id
CASES = {**{family: (family, 0) for family in ACTIVATIONS}, "mt5.1.1 from 2": ("mt5.1.1", START_ID)}
# checkpoints whose greedy sequences differ from source to source
SEEDS = {"t5": 7, "t5.1.1": 1, "mt5.1.1": 2, "mt5.1.1 from 2": 4}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """One bert4keras run: a random checkpoint of each case's family in its own names, then its decoding of SOURCES
    from the case's start id."""
    work = str(tmp_path_factory.mktemp("t5_decode"))
    tasks, index = [], {}
    for case, (family, start) in CASES.items():
        config, checkpoint = os.path.join(work, f"{case}.json"), os.path.join(work, case, "model.ckpt")
        os.makedirs(os.path.dirname(checkpoint))
        with open(config, "w") as f:
            json.dump({**CONFIG, "hidden_act": ACTIVATIONS[family]}, f)
        index[case] = (config, checkpoint, len(tasks) + 1)  # the decode task's
        tasks += [{"kind": "checkpoint", "config": config, "model": family, "checkpoint": checkpoint,
                   "seed": SEEDS[case], "std": 0.5},
                  {"kind": "decode", "config": config, "model": family, "checkpoint": checkpoint, "sources": SOURCES,
                   "maxlen": MAXLEN, "n": N, "topk": TOPK, "sample_seed": 3, "start_id": start}]
    out = helpers.run_bert4keras("oracle_t5_decode.py", {"tasks": tasks}, work, name="t5_decode")
    return {case: ({key.partition("/")[2]: value for key, value in out.items()
                    if key.startswith(f"{task}/")}, config, checkpoint)
            for case, (config, checkpoint, task) in index.items()}


def _ids(padded: np.ndarray) -> list[list[int]]:
    return [row[row >= 0].tolist() for row in padded]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_greedy_and_beam_ids_equal_bert4keras(oracle, case):
    out, config, checkpoint = oracle[case]
    family, start = CASES[case]
    model = build_transformer_model(config, checkpoint, model=family, verbose=False)
    end, started = int(out["end_id"]), {"start_id": start} if start else {}  # T5's 0 by default
    for beams in (1, 3):
        method = {"method": "greedy"} if beams == 1 else {"method": "beam", "beams": beams}
        ours = generate(model, SOURCES, **method, end_ids=end, max_length=MAXLEN, batch_size=3, **started)
        assert [found.ids[0] for found in ours] == _ids(out[f"beam{beams}"]), beams
    greedy = _ids(out["beam1"])
    assert min(map(len, greedy)) < MAXLEN and len({tuple(ids) for ids in greedy}) > 1  # ended, and not alike
    assert _ids(out["beam3"]) != greedy  # three beams find other sequences than one
    if start:  # the start is read: from T5's 0 the same checkpoint writes other sequences
        assert [found.ids[0] for found in generate(model, SOURCES, end_ids=end, max_length=MAXLEN)] != greedy


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_cached_probabilities_along_bert4keras_samples_equal_its_decoders(oracle, case):
    """Each row of one batch follows one of bert4keras's sampled sequences (a source repeated per sample): the
    cached step's probabilities at every written token are the ones its decoder gave."""
    out, config, checkpoint = oracle[case]
    family, start = CASES[case]
    t5 = CachedEncoderDecoder(build_transformer_model(config, checkpoint, model=family, verbose=False))
    t5 = t5.starting_with(start)
    samples = out["samples"]
    cache, logp = t5.start([SOURCES[row // N] for row in range(len(samples))], MAXLEN)
    got = [logp]
    for column in range(MAXLEN - 1):
        cache, logp = t5.step(cache, np.maximum(samples[:, column], 0))  # rows already ended are fed padding
        got.append(logp)
    written = samples >= 0  # the probabilities of each sampled token, at the position before it
    assert len(samples) == N * len(SOURCES) and written.sum() > len(samples)
    np.testing.assert_allclose(np.exp(np.stack(got, axis=1))[written], out["sample_probas"][written], atol=1e-5)


# ------------------------------------------------------------------------------------ without bert4keras
# a Hugging Face config: transformers' T5 (no cross-attention bias, no output scale, no id-0 key hidden)
HUGGING_FACE = {"model_type": "t5", "vocab_size": 40, "d_model": 12, "num_layers": 2, "num_heads": 3, "d_kv": 5,
                "d_ff": 20, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}


def _random_t5(family: str, seed: int = 0):
    config = HUGGING_FACE if family == "hugging_face" else {**CONFIG, "hidden_act": ACTIVATIONS[family]}
    model = build_transformer_model(config=config, model="t5.1.1" if family == "hugging_face" else family,
                                    verbose=False)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") + ("gamma" in w.path) for w in model.weights])
    return model


@pytest.mark.parametrize(("family", "start"), [*((family, 0) for family in ACTIVATIONS), ("mt5.1.1", START_ID),
                                               ("hugging_face", 0)])
def test_cached_log_probabilities_equal_the_whole_models(family, start):
    """A ragged batch, decoder inputs holding id 0 after the start (bert4keras's padding, hidden as a key;
    transformers' hides none), fed one token a step and reordered by parents as beam search does: the whole
    model's predict on the same decoder inputs, whose first id is the start (0, or T5 PEGASUS's [CLS])."""
    model = _random_t5(family)
    decoder = np.array([[0, 5, 0, 7, 9, 3], [0, 11, 12, 0, 0, 4], [0, 1, 2, 3, 4, 5], [0, 0, 6, 6, 0, 1]])
    decoder[:, 0] = start
    sources = SOURCES[:3] + [SOURCES[0]]
    t5 = CachedEncoderDecoder(model).starting_with(start)
    cache, logp = t5.start(sources, max_length=6)
    got = [logp]
    for column in range(1, 6):  # from column 2 on, row 3 continues row 0 (the same source), as a beam would
        cache, logp = t5.step(cache, decoder[:, column], parents=np.array([0, 1, 2, 0]) if column == 2 else None)
        got.append(logp)
    encoder = np.zeros((5, 11), "int32")
    for row, source in enumerate(sources + [SOURCES[0]]):
        encoder[row, :len(source)] = source
    continued = np.concatenate([decoder[0, :2], decoder[3, 2:]])  # row 0's first tokens, then row 3's own
    whole = model.predict([encoder, np.concatenate([decoder, continued[None]])], verbose=0)
    whole[3, 2:] = whole[4, 2:]
    np.testing.assert_allclose(np.exp(np.stack(got, axis=1)), whole[:4], atol=1e-5, rtol=1e-4)
    assert cache.written == 5 and tuple(cache.context_keys[0].shape) == (4, 3, 11, 5)


def test_sampling_is_seeded_and_bounded():
    model = _random_t5("mt5.1.1", seed=1)
    drawn = generate(model, SOURCES, "sample", n=3, topk=TOPK, seed=5, end_ids=1, max_length=MAXLEN)
    again = generate(model, SOURCES, "sample", n=3, topk=TOPK, seed=5, end_ids=1, max_length=MAXLEN)
    assert [one.ids for one in drawn] == [one.ids for one in again]
    assert all(len(one.ids) == 3 and all(1 <= len(ids) <= MAXLEN for ids in one.ids) for one in drawn)
    other = generate(model, SOURCES, "sample", n=3, topk=TOPK, seed=6, end_ids=1, max_length=MAXLEN)
    assert [one.ids for one in other] != [one.ids for one in drawn]


@pytest.mark.parametrize("part", ["_encoder", "_decoder"])
def test_a_t5_part_alone_is_refused(part):
    model = build_transformer_model(config={**CONFIG, "hidden_act": "relu"}, model="t5.1.1" + part, verbose=False)
    with pytest.raises(ModelError, match=rf"model: expected a whole encoder-decoder \(its encoder and decoder\) to "
                                         rf"generate, found model='t5.1.1{part}', its {part[1:]} alone\. build it "
                                         r"with build_transformer_model\(\.\.\., model='t5.1.1'\)"):
        generate(model, [[5, 1]])


def test_a_start_id_is_refused_for_a_language_model_and_outside_the_vocabulary():
    unilm = build_transformer_model("tiny", application="unilm", verbose=False)
    with pytest.raises(ModelError, match=r"generate: start_id: expected None for a language model or UniLM \(it "
                                         r"continues each input: no decoder start\), found start_id=2\. put the "
                                         r"first token at the end of each input"):
        generate(unilm, [[2, 7, 3]], start_id=2)
    for start in (40, -1, True):
        with pytest.raises(DataError, match=rf"generate: start_id: expected a token id in \[0, 40\), found "
                                            rf"{start!r}\. pass the decoder's first id"):
            generate(_random_t5("mt5.1.1"), [[5, 1]], start_id=start)


def test_the_language_models_decoder_refuses_t5_and_names_generate():
    with pytest.raises(ModelError, match=r"model: expected a language model or UniLM \(one stack\) for CachedModel, "
                                         r"found the encoder-decoder model='t5'\. generate with kerasbert\.generate"):
        CachedModel(_random_t5("t5"))


def test_the_cache_bound_counts_the_sources_the_start_and_the_targets(monkeypatch):
    """rows × layers × (S + 1 + T) × heads·d_kv × 4 bytes × 2: the self- and cross-attention keys and values."""
    model = _random_t5("t5.1.1")
    sources, beams, max_length = [SOURCES[0], SOURCES[2]], 3, 5
    size = 2 * (2 * beams) * 2 * (11 + 1 + max_length) * 15 * 4
    monkeypatch.setitem(GENERATE_LIMITS, "cache_bytes", size)
    assert len(generate(model, sources, "beam", beams=beams, max_length=max_length)) == 2
    monkeypatch.setitem(GENERATE_LIMITS, "cache_bytes", size - 1)
    with pytest.raises(ModelError, match=rf"generate: expected a cache of keys and values of at most {size - 1:,} "
                                         rf"bytes, found 6 rows x 2 layers x 17 positions x 15 hidden x 4 bytes x 2 "
                                         rf"= {size:,} bytes"):
        generate(model, sources, "beam", beams=beams, max_length=max_length)
