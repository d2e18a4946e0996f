"""kerasbert.generation.search: greedy and beam search give the ids of kerasbert.compat.snippets.AutoRegressiveDecoder
(bert4keras's decoder, which reruns the whole model every step) on the same model; sampling is seeded, restricted
to its candidates and at its temperature."""

from __future__ import annotations

import numpy as np
import pytest

from kerasbert import generate
from kerasbert.compat.snippets import AutoRegressiveDecoder
from kerasbert.generation.search import Rules, draw

# (family, application, decoder settings): each family once, both applications, the ending rules varied
CASES = [("bert", "unilm", {}), ("albert", "lm", {"minlen": 3}), ("nezha", "unilm", {"minlen": 2}),
         ("roformer", "lm", {}), ("roformer_v2", "unilm", {"min_ends": 2}), ("bert", "lm", {"minlen": 4})]


class FullModelDecoder(AutoRegressiveDecoder):
    """bert4keras's seq2seq examples' decoder: the whole model on the source and the ids so far, every step."""

    def __init__(self, model, target_segment: int, **kwargs):
        super().__init__(start_id=None, **kwargs)
        self.model, self.target_segment = _compiled(model), target_segment

    @AutoRegressiveDecoder.wraps(default_rtype="probas")
    def predict(self, inputs, output_ids, states):
        token_ids, segment_ids = inputs
        token_ids = np.concatenate([token_ids, output_ids], axis=1).astype("int32")
        segment_ids = np.concatenate([segment_ids, np.full_like(output_ids, self.target_segment)], axis=1)
        return np.asarray(self.model(token_ids, segment_ids.astype("int32")))[:, -1]


def _compiled(model):
    """``model([token_ids, segment_ids])`` as one tf.function (the test's time goes to the full model's calls)."""
    import tensorflow as tf

    return tf.function(lambda token_ids, segment_ids: model([token_ids, segment_ids]), reduce_retracing=True)


@pytest.mark.parametrize("family, application, settings", CASES, ids=[f"{f}-{a}" for f, a, _ in CASES])
def test_greedy_and_beam_search_give_the_full_model_decoders_ids(language_model, end_token, sources, family,
                                                                 application, settings):
    model = language_model(family, application)
    end, min_ends = end_token(model), settings.get("min_ends", 1)
    decoder = FullModelDecoder(model, int(application == "unilm"), end_id=end, maxlen=8,
                               minlen=settings.get("minlen", 1))
    lengths = set()
    for beams in (1, 3):
        theirs = [decoder.beam_search([source, [0] * len(source)], topk=beams, min_ends=min_ends).tolist()
                  for source in sources]
        found = generate(model, sources, "beam", beams=beams, end_ids=end, max_length=8,
                         min_length=settings.get("minlen", 1), min_ends=min_ends)
        assert [one.ids[0] for one in found] == theirs
        lengths |= {len(ids) for ids in theirs}
    greedy = generate(model, sources, end_ids=end, max_length=8, min_length=settings.get("minlen", 1),
                      min_ends=min_ends)
    assert [one.ids for one in greedy] == [one.ids for one in generate(model, sources, "beam", beams=1, end_ids=end,
                                           max_length=8, min_length=settings.get("minlen", 1), min_ends=min_ends)]
    assert len(lengths) > 1  # sequences end at different steps: the ending rules are exercised


def test_beam_scores_are_the_summed_log_probabilities_and_beams_part_from_greedy(language_model, sources):
    model = language_model("nezha", "lm")
    greedy, beam = (generate(model, sources, "beam", beams=k, max_length=6) for k in (1, 4))
    for source, one in zip([*sources, *sources], [*greedy, *beam], strict=True):
        assert one.scores[0] == pytest.approx(_log_probability(model, source, one.ids[0]), abs=1e-4)
    assert any(b.ids != g.ids for g, b in zip(greedy, beam, strict=True))


def _log_probability(model, source: list[int], ids: list[int], temperature: float = 1.0) -> float:
    """Σ log softmax(logits / T) of ``ids`` after ``source``, from the full model of an "lm" (segment 0)."""
    tokens = np.array([source + ids[:-1]])
    logits = np.log(np.asarray(model([tokens, np.zeros_like(tokens)]), "float64")[0, len(source) - 1:]) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(logp[np.arange(len(ids)), ids].sum())


def test_sampling_is_seeded_and_topk_1_tiny_topp_and_a_cold_temperature_are_greedy(language_model, sources):
    model = language_model("roformer", "unilm")
    greedy = [one.ids[0] for one in generate(model, sources, max_length=7)]
    drawn = generate(model, sources, "sample", n=3, seed=4, max_length=7)
    assert [one.ids for one in drawn] == [one.ids for one in generate(model, sources, "sample", n=3, seed=4,
                                                                      max_length=7)]
    assert [one.ids for one in drawn] != [one.ids for one in generate(model, sources, "sample", n=3, seed=5,
                                                                      max_length=7)]
    for options in ({"topk": 1}, {"topp": 1e-9}, {"temperature": 1e-4}):
        found = generate(model, sources, "sample", n=2, seed=0, max_length=7, **options)
        assert [one.ids for one in found] == [[ids, ids] for ids in greedy], options


@pytest.mark.parametrize("temperature", [1e-300, 5e-324])
def test_a_tiny_temperature_is_greedy_with_finite_scores(language_model, sources, temperature):
    """Dividing the log-probabilities by 1e-300 overflows float32 and float64 alike; the best token of each step
    scores 0 at any temperature, so the sequence is greedy's and its score 0, for sampling and beam search."""
    model = language_model("nezha", "lm")
    greedy = [one.ids[0] for one in generate(model, sources, max_length=6)]
    drawn = generate(model, sources, "sample", n=2, seed=0, max_length=6, temperature=temperature)
    beam = generate(model, sources, "beam", beams=3, max_length=6, temperature=temperature)
    assert [one.ids for one in drawn] == [[ids, ids] for ids in greedy]
    assert [one.ids[0] for one in beam] == greedy
    assert [one.scores for one in drawn] == [[0.0, 0.0]] * len(sources)
    assert [one.scores for one in beam] == [[0.0]] * len(sources)


def test_rules_at_a_tiny_temperature_keep_the_likeliest_tokens_only():
    logp = np.log(np.array([[0.1, 0.2, 0.7], [0.4, 0.4, 0.2]], "float32"))
    for temperature in (1e-300, 5e-324):
        cold = Rules((), 5, temperature=temperature).at_temperature(logp)
        assert np.exp(cold).tolist() == [[0.0, 0.0, 1.0], [0.5, 0.5, 0.0]]  # a tie shares the probability


@pytest.mark.parametrize("options", [{"topk": 3}, {"topp": 0.5}, {"topk": 5, "topp": 0.6, "temperature": 2.0}])
def test_each_drawn_token_is_among_its_steps_candidates(language_model, sources, options):
    """Every drawn token, checked against the full model's distribution at its position: among the ``topk``
    likeliest, and within the shortest head reaching ``topp`` (at the temperature)."""
    model = language_model("bert", "lm")
    temperature = options.get("temperature", 1.0)
    for source, one in zip(sources, generate(model, sources, "sample", n=4, seed=1, max_length=6, **options),
                           strict=True):
        for ids, score in zip(one.ids, one.scores, strict=True):
            tokens = np.array([source + ids[:-1]])
            probs = np.asarray(model([tokens, np.zeros_like(tokens)]), "float64")[0, len(source) - 1:] ** (
                1 / temperature)
            probs /= probs.sum(1, keepdims=True)
            for step, token in enumerate(ids):
                order = np.argsort(-probs[step])
                head = order[:options.get("topk", len(order))]
                if "topp" in options:
                    reached = np.cumsum(probs[step, head]) / probs[step, head].sum() >= options["topp"]
                    head = head[:int(np.argmax(reached)) + 1]
                assert token in head, (source, ids, step)
            assert score == pytest.approx(_log_probability(model, source, ids, temperature), abs=1e-4)


def test_draw_follows_the_probabilities_within_its_candidates():
    probas = np.tile([[0.05, 0.5, 0.15, 0.3]], (20000, 1))
    rng = np.random.default_rng(0)
    counts = np.bincount(draw(probas, None, None, rng), minlength=4) / 20000
    np.testing.assert_allclose(counts, [0.05, 0.5, 0.15, 0.3], atol=0.015)
    counts = np.bincount(draw(probas, 2, None, rng), minlength=4) / 20000  # 0.5 and 0.3, renormalized
    np.testing.assert_allclose(counts, [0, 0.625, 0, 0.375], atol=0.015)
    counts = np.bincount(draw(probas, None, 0.7, rng), minlength=4) / 20000  # 0.5 + 0.3 reach 0.7
    np.testing.assert_allclose(counts, [0, 0.625, 0, 0.375], atol=0.015)


def test_rules_read_the_temperature_and_end_on_any_end_id():
    logits = np.log(np.array([[0.1, 0.2, 0.7]]))
    cold = Rules((), 5, temperature=0.5).at_temperature(logits)
    np.testing.assert_allclose(np.exp(cold), [[0.01, 0.04, 0.49]] / np.float64(0.54), rtol=1e-12)
    assert Rules((3, 4), 5).finished(np.array([[1, 4], [1, 3], [3, 1]])).tolist() == [True, True, False]
