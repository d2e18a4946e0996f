"""Beam search (greedy: one beam) and sampling over a `CachedModel`, batched over inputs, beams and samples.

The rules are bert4keras 0.11.5's ``AutoRegressiveDecoder`` with ``start_id=None`` (its seq2seq and language-model
examples), kept input by input so that a batch decodes each input as bert4keras decodes it alone:

- a sequence's score is the sum of its tokens' log-probabilities at ``temperature`` (``log_softmax(logits / T)``,
  which is bert4keras's ``log(p^(1/T) / Σ p^(1/T))``, without its ``+1e-12`` inside the log);
- beam search keeps the ``beams`` best extensions of the live beams (``np.argpartition`` over all of them, as
  bert4keras); once a sequence holds ``min_length`` tokens it may end: it ends when its last token is an end id
  and it holds ``min_ends`` end ids (any of ``end_ids``, where bert4keras takes one). The best beam ending
  returns it; other beams that end are dropped and the beam count shrinks with them. A token that is an end id
  before ``min_length`` does not end its sequence, which decodes on past it. After ``max_length`` tokens the
  best beam is returned;
- sampling draws each live row's token among the ``topk`` likeliest, then among the likeliest whose
  probabilities first reach ``topp``, renormalized; ended sequences come first, in the order they ended.

Greedy search is beam search with one beam. Sampling draws from ``np.random.default_rng(seed)``, not NumPy's
global generator: the same seed gives the same ids, not bert4keras's draws.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kerasbert.generation.cache import CachedModel


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


@dataclasses.dataclass(frozen=True)
class Rules:
    """When a sequence ends, and how the scores read the log-probabilities.

    Args:
        end_ids: tuple of int. the tokens that end a sequence (none: every sequence runs ``max_length`` tokens).
        max_length: int. the most tokens generated.
        min_length: int. the fewest tokens a sequence holds before it may end.
        min_ends: int. the end ids a sequence holds when it ends.
        temperature: float. the log-probabilities of ``softmax(logits / temperature)``.

    Example:
    >>> Rules(end_ids=(3,), max_length=5, min_ends=2).finished(np.array([[3, 4, 3], [5, 4, 3]])).tolist()
    [True, False]
    """

    end_ids: tuple[int, ...]
    max_length: int
    min_length: int = 1
    min_ends: int = 1
    temperature: float = 1.0

    def finished(self, ids: np.ndarray) -> np.ndarray:
        """Per row of ``ids`` ``[rows, t]``, whether it ends here: its last token an end id, ``min_ends`` of them."""
        ends = np.isin(ids, self.end_ids)
        return ends[:, -1] & (ends.sum(axis=1) >= self.min_ends)

    def may_end(self, ids: np.ndarray) -> bool:
        return ids.shape[1] >= self.min_length

    def at_temperature(self, logp: np.ndarray) -> np.ndarray:
        """The log-probabilities at the temperature (``logp`` at temperature 1, ``[rows, V]``), in float64; a tiny
        temperature keeps each row's likeliest tokens only."""
        return logp if self.temperature == 1 else log_softmax_at(logp, self.temperature)


def log_softmax_at(scores: np.ndarray, temperature: float) -> np.ndarray:
    """``log_softmax(scores / temperature)`` over the last axis, in float64, finite for any temperature > 0.

    The largest score is subtracted before dividing: each row's best scores 0 at any temperature, so a tiny one
    gives -inf to the others (greedy) and never inf - inf. ``scores`` may hold -inf (a probability of 0, logged).

    Example:
    >>> np.exp(log_softmax_at(np.array([[1.0, 3.0, 2.0]]), 1e-300)).tolist()
    [[0.0, 1.0, 0.0]]
    >>> np.exp(log_softmax_at(np.log([[0.2, 0.8]]), 0.5)).round(4).tolist()  # p ** 2, normalized
    [[0.0588, 0.9412]]
    """
    scores = np.asarray(scores, "float64")
    with np.errstate(over="ignore", invalid="ignore"):  # overflowing to -inf is the intended limit
        scaled = (scores - scores.max(axis=-1, keepdims=True)) / temperature
    return scaled - np.log(np.exp(scaled).sum(axis=-1, keepdims=True))


@dataclasses.dataclass
class _Beams:
    """One input's live beams: their ids ``[width, t]`` and scores ``[width]``; its result once found."""

    ids: np.ndarray
    scores: np.ndarray
    result: tuple[np.ndarray, float] | None = None

    def extend(self, logp: np.ndarray, width: int, rules: Rules) -> tuple[np.ndarray, np.ndarray]:
        """Keep the ``width`` best extensions of the beams by ``logp`` ``[beams, V]``; the parent beam and the token
        of each beam kept (none once the input is done)."""
        totals = self.scores[:, None] + logp  # (beams, V): every beam extended by every token
        best = np.argpartition(totals, -width, axis=None)[-width:]  # bert4keras's order, ties included
        parents, tokens = np.divmod(best, totals.shape[1])
        self.ids, self.scores = np.concatenate([self.ids[parents], tokens[:, None]], axis=1), totals.ravel()[best]
        if not rules.may_end(self.ids):
            return parents, tokens
        finished, leader = rules.finished(self.ids), self.scores.argmax()
        if finished[leader]:
            self.result = (self.ids[leader], float(self.scores[leader]))
            return parents[:0], tokens[:0]
        keep = ~finished  # the other finished beams are dropped; the beam count shrinks with them
        self.ids, self.scores = self.ids[keep], self.scores[keep]
        return parents[keep], tokens[keep]

    def best(self) -> tuple[np.ndarray, float]:
        leader = self.scores.argmax()
        return self.ids[leader], float(self.scores[leader])


def beam_search(lm: CachedModel, sources: list[list[int]], beams: int, rules: Rules) -> list[Generated]:
    """The best sequence per source that ``beams`` beams find (``beams=1``: greedy search), bert4keras's rules.

    Input b's beams are rows ``b·beams ..`` of one batch; a row whose beam was dropped, or whose input is done,
    is fed a padding token and not read (the shapes stay fixed, so the step compiles once).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.generation.cache import CachedModel
    >>> lm = CachedModel(build_transformer_model("tiny", application="unilm", verbose=False))
    >>> found = beam_search(lm, [[2, 7, 3], [2, 9, 9, 3]], beams=2, rules=Rules(end_ids=(3,), max_length=4))
    >>> [len(g.ids) for g in found], all(1 <= len(g.ids[0]) <= 4 for g in found)
    ([1, 1], True)
    """
    cache, logp = lm.start(sources, rules.max_length)
    states = [_Beams(np.zeros((1, 0), dtype=int), np.zeros(1)) for _ in sources]
    rows = len(sources) * beams
    for step in range(rules.max_length):
        logp = rules.at_temperature(logp)
        tokens, parents = np.zeros(rows, dtype=int), np.arange(rows)
        for b, state in enumerate(states):
            if state.result is None:
                first = b if step == 0 else b * beams  # the prefill has one row an input
                chosen, next_tokens = state.extend(logp[first:first + len(state.scores)], beams if step == 0 else
                                                   len(state.scores), rules)
                tokens[b * beams:b * beams + len(next_tokens)] = next_tokens
                parents[b * beams:b * beams + len(chosen)] = b * beams + chosen
        if step == rules.max_length - 1 or all(state.result is not None for state in states):
            break
        if step == 0 and beams > 1:
            cache = cache.take(np.repeat(np.arange(len(sources)), beams))  # one row per beam
        cache, logp = lm.step(cache, tokens, parents if step > 0 and beams > 1 else None)
    found = [state.result or state.best() for state in states]
    return [Generated([ids.tolist()], [score]) for ids, score in found]


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
        ended = alive & rules.finished(ids) if rules.may_end(ids) else np.zeros_like(alive)
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
    token_ids = np.broadcast_to(np.arange(probas.shape[1]), probas.shape)
    if topk is not None:
        columns = np.argpartition(probas, -topk, axis=1)[:, -topk:]
        probas, token_ids = np.take_along_axis(probas, columns, 1), np.take_along_axis(token_ids, columns, 1)
    if topp is not None:
        columns = np.argsort(-probas, axis=1, kind="stable")  # from the likeliest down
        probas, token_ids = np.take_along_axis(probas, columns, 1), np.take_along_axis(token_ids, columns, 1)
        reached = np.cumsum(probas, axis=1) >= topp * probas.sum(axis=1, keepdims=True)
        probas = probas * ~np.concatenate([np.zeros_like(reached[:, :1]), reached[:, :-1]], axis=1)
    cumulative = np.cumsum(probas, axis=1)  # a draw u lands on the first token whose cumulative sum passes u
    picks = (cumulative <= rng.random((len(probas), 1)) * cumulative[:, -1:]).sum(axis=1)
    return token_ids[np.arange(len(probas)), np.minimum(picks, probas.shape[1] - 1)]
