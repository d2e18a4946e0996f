"""kerasbert.generation.cache: one cached step a token gives the full model's next-token probabilities, for every
family and both applications, on ragged rows; and the attention refactor it shares stays the layer's."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model
from kerasbert.generation.cache import CachedModel

FAMILIES = ("bert", "albert", "nezha", "roformer", "roformer_v2")
STEPS = 5


def full_next_token(model, rows: list[list[int]], sources: list[list[int]], application: str) -> np.ndarray:
    """The full model's probabilities after each row (source + its target so far), ``[rows, V]``: one call on the
    rows right-padded, read at each row's last token."""
    length = max(map(len, rows))
    tokens, segments = np.zeros((len(rows), length), "int32"), np.zeros((len(rows), length), "int32")
    for i, (row, source) in enumerate(zip(rows, sources, strict=True)):
        tokens[i, :len(row)] = row
        segments[i, len(source):len(row)] = application == "unilm"
    out = np.asarray(model([tokens, segments]))
    last = out[np.arange(len(rows)), [len(row) - 1 for row in rows]]
    return last if np.allclose(last.sum(axis=1), 1, atol=1e-4) else np.exp(last) / np.exp(last).sum(1, keepdims=True)


def cached_against_full(model, sources: list[list[int]], application: str, seed: int = 0) -> float:
    """The largest gap between the cached steps' probabilities and the full model's over `STEPS` random tokens."""
    lm, rng = CachedModel(model), np.random.default_rng(seed)
    cache, logp = lm.start(sources, STEPS + 1)
    rows, gap = [list(source) for source in sources], 0.0
    for _ in range(STEPS):
        gap = max(gap, float(np.abs(np.exp(logp) - full_next_token(model, rows, sources, application)).max()))
        tokens = rng.integers(1, lm.vocab_size, len(rows))
        rows = [row + [int(t)] for row, t in zip(rows, tokens, strict=True)]
        cache, logp = lm.step(cache, tokens)
    return gap


@pytest.mark.parametrize("application", ["unilm", "lm"])
@pytest.mark.parametrize("family", FAMILIES)
def test_each_cached_step_gives_the_full_models_probabilities(language_model, sources, family, application):
    model = language_model(family, application)
    assert cached_against_full(model, sources[:3], application) <= 1e-5


def test_logits_outputs_and_hierarchical_positions_past_the_table(language_model):
    """A ``with_mlm="linear"`` model (logits), and positions beyond P from a hierarchical table: the last rows start
    at 60 of P = 64 and run past it."""
    assert cached_against_full(language_model("bert", "lm", with_mlm="linear"), [[5, 6, 7], [8, 9]], "lm") <= 1e-5
    model = language_model("bert", "unilm", hierarchical_position=True)
    sources = [[2, *range(4, 62), 3], [2, 5, 3]]
    assert cached_against_full(model, sources, "unilm") <= 1e-5


def test_the_cache_keeps_one_slot_a_target_token(language_model, sources):
    lm = CachedModel(language_model("nezha", "unilm"))
    cache, logp = lm.start(sources, max_length=2)
    assert logp.shape == (4, 128) and np.allclose(np.exp(logp).sum(1), 1, atol=1e-5)
    assert len(cache.keys) == 2 and tuple(cache.keys[0].shape) == (4, 2, 8 + 2, 16)
    cache, _ = lm.step(cache.take(np.array([0, 0, 1])), np.array([5, 6, 7]))
    assert cache.rows == 3 and cache.written == 1
    cache, _ = lm.step(cache, np.array([5, 6, 7]), parents=np.array([2, 1, 0]))
    with pytest.raises(ModelError, match=r"at most 2 target tokens \(start's max_length\), found token 3"):
        lm.step(cache, np.array([5, 6, 7]))


def test_albert_runs_its_shared_block_once_per_layer_with_a_cache_each(language_model):
    lm = CachedModel(language_model("albert", "lm"))
    assert len(lm.encoder.blocks) == 2 and lm.encoder.blocks[0][0].layer is lm.encoder.blocks[1][0].layer
    cache, _ = lm.start([[5, 6]], 3)
    assert len(cache.keys) == 2 and not np.allclose(np.asarray(cache.keys[0]), np.asarray(cache.keys[1]))


@pytest.mark.parametrize("dtype", ["mixed_float16", "mixed_bfloat16"])
def test_a_half_precision_model_steps_near_its_float32_twin(language_model, sources, dtype):
    """The same weights in half precision: its cached steps' probabilities within half precision's rounding of
    the float32 model's (which are the full model's); its caches in the compute dtype."""
    half, full = CachedModel(language_model("roformer", "unilm", dtype=dtype)), CachedModel(
        language_model("roformer", "unilm"))
    (half_cache, half_logp), (full_cache, full_logp) = half.start(sources, 3), full.start(sources, 3)
    assert keras.backend.standardize_dtype(half_cache.keys[0].dtype) == dtype.split("_")[1]
    assert half_logp.dtype == np.float32
    for tokens in ([5, 6, 7, 8], [9, 10, 11, 12]):
        np.testing.assert_allclose(np.exp(half_logp), np.exp(full_logp), atol=0.03)
        (half_cache, half_logp), (full_cache, full_logp) = (half.step(half_cache, np.array(tokens)),
                                                            full.step(full_cache, np.array(tokens)))


def test_the_prefill_and_the_steps_trace_once_for_every_batch_and_length(language_model, sources):
    from kerasbert import generate
    from kerasbert.generation.generate import _CACHED

    model = language_model("bert", "lm", with_mlm="linear")
    for batch, beams, length in ((1, 2, 3), (4, 3, 6), (3, 1, 4)):
        generate(model, sources[:batch], "beam", beams=beams, max_length=length)
    lm = _CACHED[model]
    assert [f.experimental_get_tracing_count() for f in (lm._prefill, lm._step, lm._reordered_step)] == [1, 1, 1]


def test_an_encoder_an_electra_and_a_sigmoid_output_are_refused():
    with pytest.raises(ModelError, match='model.application: expected "lm" or "unilm" to generate, found \'encoder\''):
        CachedModel(build_transformer_model("tiny", verbose=False))
    electra = build_transformer_model("tiny", model="electra", embedding_size=16, verbose=False)
    with pytest.raises(ModelError, match="found an ELECTRA. ELECTRA's discriminator has no next-token output"):
        CachedModel(electra)
    sigmoid = build_transformer_model("tiny", application="lm", with_mlm="sigmoid", verbose=False)
    with pytest.raises(ModelError, match="MLM-Activation: expected a softmax or linear output .* found 'sigmoid'"):
        CachedModel(sigmoid)
