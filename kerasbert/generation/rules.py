"""The rules of every search, written once: bert4keras 0.11.5's ``AutoRegressiveDecoder`` rules, kept input by input.

- A sequence's score is the sum of its tokens' log-probabilities at ``temperature`` (`log_softmax_at`).
- Beam search (`extend`) keeps each input's ``width`` best extensions of its live beams, best first, equal scores
  in the order of (beam, token), as ``tf.math.top_k`` orders them. The first extension reads one beam an input
  and keeps ``beams`` of them; later ones keep as many as are live. Once a sequence holds ``min_length`` tokens it
  may end (`ends_at`): its last token is an end id and it holds ``min_ends`` of them. When the best beam ends, the
  input's sequence is found; other beams that end are dropped and the input keeps fewer beams. A token that is an
  end id before ``min_length`` does not end its sequence. After ``max_length`` tokens the best live beam is
  the result (`outcome`).
- Sampling draws each token among `top_candidates`: the ``topk`` likeliest, then the likeliest whose
  probabilities first reach ``topp``, in bert4keras's column order.

The beam step is written against an array namespace (`NumpyOps` here; `kerasbert.generation.graph_search` gives the
TensorFlow one), so the NumPy searches, bert4keras's port and the SavedModel's graph run the same step. Shapes stay
fixed: input b's beams are ``ids[b]`` ``[beams, T]``, and a dropped beam scores ``NEVER``. Nothing here imports
TensorFlow or Keras.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

__all__ = ["NEVER", "NUMPY", "BeamState", "Found", "NumpyOps", "Rules", "ends_at", "extend", "first_state",
           "log_softmax_at", "outcome", "top_candidates"]

NEVER = -np.inf  # the score of a dropped beam: never chosen again, since a live beam offers `beams` extensions


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
        """Per row of ``ids`` ``[rows, t]``, whether it ends with its last token (`ends_at`)."""
        return ends_at(NUMPY, ids, ids.shape[-1] - 1, self)

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


def top_candidates(probas: np.ndarray, topk: int | None, topp: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The probabilities a sampler draws from, renormalized, and per row the token id of each column.

    ``topk`` keeps each row's ``topk`` likeliest tokens, in ``np.argpartition``'s order; ``topp`` then sorts them
    from the likeliest down (``np.argsort``, reversed) and keeps the shortest head whose probabilities reach
    ``topp`` (the first always kept), zeroing the rest. The column order fixes which token a uniform draw picks,
    so it is bert4keras's: `kerasbert.compat.snippets.AutoRegressiveDecoder` then draws bert4keras's tokens.

    Example:
    >>> probas, token_ids = top_candidates(np.array([[0.1, 0.6, 0.3]]), topk=2, topp=0.6)
    >>> probas.tolist(), token_ids.tolist()
    ([[1.0, 0.0]], [[1, 2]])
    """
    token_ids = np.broadcast_to(np.arange(probas.shape[1]), probas.shape)
    if topk is not None:
        columns = np.argpartition(probas, -topk, axis=1)[:, -topk:]
        probas = np.take_along_axis(probas, columns, axis=1)
        probas, token_ids = probas / probas.sum(axis=1, keepdims=True), np.take_along_axis(token_ids, columns, 1)
    if topp is not None:
        columns = np.argsort(probas, axis=1)[:, ::-1]  # from the likeliest down
        probas = np.take_along_axis(probas, columns, axis=1)
        reached = np.cumsum(probas, axis=1) >= topp
        cut = np.zeros_like(reached)
        cut[:, 1:] = reached[:, :-1]  # a token is cut once the tokens before it reach topp
        probas = probas * ~cut
        probas, token_ids = probas / probas.sum(axis=1, keepdims=True), np.take_along_axis(token_ids, columns, 1)
    return probas, token_ids


class Found(NamedTuple):
    """The sequence found per input: ``ids`` ``[batch, T]`` (zeros after ``lengths``), ``lengths`` ``[batch]``, and
    ``scores`` ``[batch]``, the sum of its tokens' log-probabilities."""

    ids: Any
    lengths: Any
    scores: Any


class BeamState(NamedTuple):
    """A beam search between steps, NumPy arrays or tensors."""

    written: Any  # scalar: tokens in each beam, the column the next one lands in
    width: Any  # (batch,): the extensions each input keeps at the next step
    ids: Any  # (batch, beams, T)
    scores: Any  # (batch, beams) float64, NEVER where a beam is dropped
    done: Any  # (batch,): the input's sequence is found
    found: Found


class NumpyOps:
    """The array operations `extend` needs, on NumPy arrays."""

    where, reshape, arange = staticmethod(np.where), staticmethod(np.reshape), staticmethod(np.arange)
    argmax, any = staticmethod(np.argmax), staticmethod(np.any)

    @staticmethod
    def shape(x: np.ndarray) -> tuple[int, ...]:
        return x.shape

    @staticmethod
    def zeros(shape: list, dtype: str) -> np.ndarray:
        return np.zeros(shape, dtype)

    @staticmethod
    def float64(x) -> np.ndarray:
        return np.asarray(x, "float64")

    @staticmethod
    def count(x: np.ndarray, axis: int) -> np.ndarray:
        return x.sum(axis=axis, dtype="int32")

    @staticmethod
    def isin(x: np.ndarray, values: tuple[int, ...]) -> np.ndarray:
        return np.isin(x, values)

    @staticmethod
    def gather_beams(x: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``x[b, index[b, k]]``: ``x`` ``[batch, beams, ...]``, ``index`` ``[batch, k]``."""
        return x[np.arange(len(x))[:, None], index]

    @staticmethod
    def top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` largest of each row of ``x`` ``[rows, n]`` and their columns, best first, equal values in
        column order (``tf.math.top_k``'s), found by partition rather than a full sort.

        Example:
        >>> [a.tolist() for a in NumpyOps.top_k(np.array([[1.0, 3.0, 1.0, 3.0, 2.0, 1.0]]), 4)]
        [[[3.0, 3.0, 2.0, 1.0]], [[1, 3, 4, 0]]]
        """
        kth = -np.partition(-x, k - 1, axis=1)[:, k - 1:k]  # each row's k-th largest
        above, tied = x > kth, x == kth
        chosen = above | (tied & (np.cumsum(tied, axis=1) <= k - above.sum(axis=1, keepdims=True)))
        columns = np.nonzero(chosen)[1].reshape(len(x), k)  # exactly k a row, in column order
        order = np.argsort(-np.take_along_axis(x, columns, 1), axis=1, kind="stable")
        columns = np.take_along_axis(columns, order, 1)
        return np.take_along_axis(x, columns, 1), columns


NUMPY = NumpyOps()


def first_state(ops, batch, beams: int, columns: int) -> BeamState:
    """The state before the first extension: one live beam an input (score 0), ``beams`` extensions to keep, ids
    ``[batch, beams, columns]`` of zeros (a prefix may be written into them, with ``written`` after it)."""
    lengths, none = ops.zeros([batch], "int32"), ops.zeros([batch], "bool")
    scores = ops.zeros([batch, beams], "float64") + ops.float64(ops.where(ops.arange(beams) == 0, 0.0, NEVER))
    return BeamState(0, lengths + beams, ops.zeros([batch, beams, columns], "int32"), scores, none,
                     Found(ops.zeros([batch, columns], "int32"), lengths, ops.zeros([batch], "float64")))


def ends_at(ops, ids, last, rules: Rules):
    """Per sequence of ``ids`` ``[..., T]``, whether it ends with its token in column ``last`` (the columns after
    it unwritten): that token is an end id, ``min_ends`` of them are written, and ``last + 1 >= min_length``."""
    columns = ops.arange(ops.shape(ids)[-1])
    ends = ops.isin(ids, rules.end_ids) & (columns <= last)
    return ops.any(ends & (columns == last), -1) & (ops.count(ends, -1) >= rules.min_ends) & (
        last + 1 >= rules.min_length)


def extend(ops, state: BeamState, logp, rules: Rules) -> tuple[BeamState, Any, Any]:
    """One step of beam search: each input's best extensions of its live beams by ``logp`` ``[batch·beams, V]``
    (rows of dropped beams are not read), what ends ended; and per row of the next step, the token it is fed
    (0 for a dropped beam) and its parent row, both ``[batch·beams]``."""
    batch, beams, steps = ops.shape(state.ids)
    vocab = ops.shape(logp)[1]
    totals = state.scores[:, :, None] + ops.reshape(ops.float64(logp), [batch, beams, vocab])
    scores, best = ops.top_k(ops.reshape(totals, [batch, beams * vocab]), beams)  # best first
    parents, tokens = best // vocab, best % vocab
    kept = ops.arange(beams)[None] < state.width[:, None]
    scores = ops.where(kept, scores, NEVER)
    ids = ops.where((ops.arange(steps) == state.written)[None, None], tokens[:, :, None],
                    ops.gather_beams(state.ids, parents))
    finished = ends_at(ops, ids, state.written, rules) & kept
    ending = finished[:, 0] & ~state.done  # the best beam ends: the input's sequence is found
    found = Found(ops.where(ending[:, None], ids[:, 0], state.found.ids),
                  ops.where(ending, state.written + 1, state.found.lengths),
                  ops.where(ending, scores[:, 0], state.found.scores))
    done = state.done | ending
    scores = ops.where(finished | done[:, None], NEVER, scores)  # beams that ended behind the best are dropped
    live = scores > NEVER
    tokens = ops.where(live, tokens, 0)
    parents = parents + ops.arange(batch)[:, None] * beams  # rows of the cache
    return (BeamState(state.written + 1, ops.count(live, 1), ids, scores, done, found),
            ops.reshape(tokens, [-1]), ops.reshape(parents, [-1]))


def outcome(ops, state: BeamState) -> Found:
    """Each input's sequence: the one found, or (still searching at ``max_length``) its best live beam."""
    best = ops.argmax(state.scores, 1)[:, None]
    searching = ~state.done
    return Found(ops.where(searching[:, None], ops.gather_beams(state.ids, best)[:, 0], state.found.ids),
                 ops.where(searching, state.written, state.found.lengths),
                 ops.where(searching, ops.gather_beams(state.scores, best)[:, 0], state.found.scores))
