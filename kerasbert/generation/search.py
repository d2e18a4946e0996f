"""Beam search (greedy: one beam) and sampling over a `CachedModel` (or an exported `PortableDecoder`), in NumPy,
batched over inputs, beams and samples; the rules are `kerasbert.generation.rules`' (bert4keras's), input by input,
so a batch decodes each input as bert4keras decodes it alone.

Greedy search is beam search with one beam. Sampling draws from ``np.random.default_rng(seed)``, not NumPy's
global generator: the same seed gives the same ids, not bert4keras's draws. Nothing here imports TensorFlow or Keras.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from kerasbert.generation.rules import NUMPY, Rules, extend, first_state, outcome, top_candidates

if TYPE_CHECKING:
    from kerasbert.generation.cache import CachedModel

__all__ = ["Generated", "Rules", "beam_search", "draw", "sample"]


@dataclasses.dataclass(frozen=True)
class Generated:
    """What `kerasbert.generate` gives for one input.

    Args:
        ids: list of list of int. the sequences: the one found (greedy, beam), or the ``n`` drawn (sampling), the
            ended ones first in the order they ended.
        scores: list of float. each sequence's sum of log-probabilities at the temperature.
    """

    ids: list[list[int]]
    scores: list[float]


def beam_search(lm: CachedModel, sources: list[list[int]], beams: int, rules: Rules) -> list[Generated]:
    """The best sequence per source that ``beams`` beams find (``beams=1``: greedy search), bert4keras's rules.

    Input b's beams are rows ``b·beams ..`` of one batch; a row whose beam was dropped, or whose input is done,
    is fed a padding token and scores ``NEVER`` (the shapes stay fixed, so the step compiles once).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.generation.cache import CachedModel
    >>> lm = CachedModel(build_transformer_model("tiny", application="unilm", verbose=False))
    >>> found = beam_search(lm, [[2, 7, 3], [2, 9, 9, 3]], beams=2, rules=Rules(end_ids=(3,), max_length=4))
    >>> [len(g.ids) for g in found], all(1 <= len(g.ids[0]) <= 4 for g in found)
    ([1, 1], True)
    """
    cache, logp = lm.start(sources, rules.max_length)
    state = first_state(NUMPY, len(sources), beams, rules.max_length)
    logp = np.repeat(logp, beams, axis=0)  # the first extension reads beam 0 of each input
    for step in range(rules.max_length):
        state, tokens, parents = extend(NUMPY, state, rules.at_temperature(logp), rules)
        if step == rules.max_length - 1 or state.done.all():
            break
        if step == 0 and beams > 1:
            cache = cache.take(np.repeat(np.arange(len(sources)), beams))  # one row per beam
        cache, logp = lm.step(cache, tokens, parents if step > 0 and beams > 1 else None)
    return [Generated([ids[:n].tolist()], [float(score)]) for ids, n, score in zip(*outcome(NUMPY, state),
                                                                                   strict=True)]


def sample(lm: CachedModel, sources: list[list[int]], n: int, topk: int | None, topp: float | None, rules: Rules,
           rng: np.random.Generator) -> list[Generated]:
    """``n`` sequences per source, each token drawn from the model's probabilities at the temperature.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.generation.cache import CachedModel
    >>> lm = CachedModel(build_transformer_model("tiny", application="lm", verbose=False))
    >>> drawn = sample(lm, [[2, 7]], 3, 5, None, Rules((), max_length=4), np.random.default_rng(0))
    >>> [len(ids) for ids in drawn[0].ids]
    [4, 4, 4]
    """
    cache, logp = lm.start(sources, rules.max_length)
    rows = np.repeat(np.arange(len(sources)), n)  # sample i of input b is row b·n + i
    logp, cache = logp[rows], cache.take(rows) if n > 1 else cache
    ids, scores, alive = np.zeros((len(rows), 0), dtype=int), np.zeros(len(rows)), np.ones(len(rows), dtype=bool)
    results: list[list[tuple]] = [[] for _ in sources]
    for step in range(rules.max_length):
        logp = rules.at_temperature(logp)
        tokens = draw(np.exp(logp), topk, topp, rng)
        ids, scores = np.concatenate([ids, tokens[:, None]], axis=1), scores + logp[np.arange(len(rows)), tokens]
        ended = alive & rules.finished(ids)
        for row in np.flatnonzero(ended):
            results[rows[row]].append((ids[row], scores[row]))
        alive &= ~ended
        if step == rules.max_length - 1 or not alive.any():
            break
        cache, logp = lm.step(cache, tokens)
    for row in np.flatnonzero(alive):
        results[rows[row]].append((ids[row], scores[row]))
    return [Generated([s.tolist() for s, _ in found], [float(score) for _, score in found]) for found in results]


def draw(probas: np.ndarray, topk: int | None, topp: float | None, rng: np.random.Generator) -> np.ndarray:
    """One token per row of ``probas`` ``[rows, V]``, among the ``topk`` likeliest, then the likeliest whose
    probabilities first reach ``topp`` (the first always kept), renormalized.

    Example:
    >>> p = np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]])
    >>> rng = np.random.default_rng(0)
    >>> draw(p, topk=1, topp=None, rng=rng).tolist(), draw(p, topk=None, topp=1e-9, rng=rng).tolist()
    ([1, 0], [1, 0])
    """
    probas, token_ids = top_candidates(probas, topk, topp)
    cumulative = np.cumsum(probas, axis=1)  # a draw u lands on the first token whose cumulative sum passes u
    picks = (cumulative <= rng.random((len(probas), 1)) * cumulative[:, -1:]).sum(axis=1)
    return token_ids[np.arange(len(probas)), np.minimum(picks, probas.shape[1] - 1)]
