"""Beam search (greedy: one beam) as TensorFlow ops: `kerasbert.generation.search.beam_search` inside one graph, so
that a SavedModel generates without Python between its steps.

The rules and the result are those of `kerasbert.generation.search` (bert4keras's), input by input; the shapes stay
fixed instead of the beam count shrinking. Input b's beams are rows ``b·beams ..`` of the cache, scores
``[batch, beams]`` in float64 as the NumPy search sums them, sorted best first after each extension. A beam that
is dropped (it ended behind the best one, or the input is done) scores ``-inf``: it is fed a padding token and
never chosen again, since each live beam offers more extensions than there are beams. The first extension
reads one beam per input: the others start at ``-inf``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from kerasbert.generation.cache import CachedModel
from kerasbert.generation.search import Rules

__all__ = ["Found", "graph_beam_search"]

NEVER = -np.inf  # the score of a dropped beam


class Found(NamedTuple):
    """The sequence found per input: ``ids`` ``[batch, max_length]`` (zeros after ``lengths``), ``lengths``
    ``[batch]``, and ``scores`` ``[batch]``, the sum of its tokens' log-probabilities."""

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor


class _Beams(NamedTuple):
    """The search's state between steps."""

    written: tf.Tensor  # scalar: tokens in each live beam
    ids: tf.Tensor  # (batch, beams, T)
    scores: tf.Tensor  # (batch, beams), -inf where a beam is dropped
    done: tf.Tensor  # (batch,): the input's sequence is found
    found: Found


@tf.autograph.experimental.do_not_convert
def graph_beam_search(lm: CachedModel, token_ids: tf.Tensor, lengths: tf.Tensor, beams: int, rules: Rules) -> Found:
    """The best sequence per source that ``beams`` beams find, as `kerasbert.generation.search.beam_search` finds it.

    Args:
        lm: CachedModel. the model's prefill and step graphs.
        token_ids: tf.Tensor. int32 ``[batch, S]``, the sources, padded with 0.
        lengths: tf.Tensor. int32 ``[batch]``, each source's length.
        beams: int. the beam count (1: greedy search).
        rules: Rules. the end ids, lengths and ``min_ends``; the temperature must be 1.

    Returns:
        Found. each input's sequence, its length and its score.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> lm = CachedModel(build_transformer_model("tiny", application="unilm", verbose=False))
    >>> found = graph_beam_search(lm, tf.constant([[2, 7, 3, 0], [2, 9, 9, 3]]), tf.constant([3, 4]), beams=2,
    ...                           rules=Rules(end_ids=(3,), max_length=4))
    >>> found.ids.shape.as_list(), all(1 <= n <= 4 for n in found.lengths.numpy())
    ([2, 4], True)
    """
    if rules.temperature != 1:
        raise ValueError("graph_beam_search scores at temperature 1")
    batch, steps = tf.shape(token_ids)[0], rules.max_length
    prefill, reordered_step = lm.functions()
    keys, values, logp = prefill(token_ids, lengths, tf.constant(steps, tf.int32))
    row_of = tf.repeat(tf.range(batch), beams)  # one row per beam
    keys, values = tuple(tf.gather(k, row_of) for k in keys), tuple(tf.gather(v, row_of) for v in values)
    lengths, logp = tf.gather(lengths, row_of), tf.gather(logp, row_of)
    first = tf.constant([[0.0] + [-np.inf] * (beams - 1)], tf.float64)
    state = _Beams(tf.constant(0), tf.zeros([batch, beams, steps], tf.int32), tf.tile(first, [batch, 1]),
                   tf.zeros([batch], tf.bool), Found(tf.zeros([batch, steps], tf.int32), tf.zeros([batch], tf.int32),
                                                     tf.zeros([batch], tf.float64)))
    state, tokens, parents = _extend(state, logp, rules)
    source_width = tf.shape(token_ids)[1]

    def more(state, keys, values, tokens, parents) -> tf.Tensor:
        return (state.written < steps) & ~tf.reduce_all(state.done)

    def step(state, keys, values, tokens, parents) -> tuple:
        keys, values, logp = reordered_step(keys, values, tokens, lengths, source_width, state.written - 1, parents)
        state, tokens, parents = _extend(state, logp, rules)
        return state, tuple(keys), tuple(values), tokens, parents

    state = tf.while_loop(more, step, (state, keys, values, tokens, parents))[0]
    best = tf.argmax(state.scores, axis=1, output_type=tf.int32)  # inputs still searching: their best live beam
    unfinished = ~state.done
    return Found(tf.where(unfinished[:, None], tf.gather(state.ids, best, batch_dims=1), state.found.ids),
                 tf.where(unfinished, state.written, state.found.lengths),
                 tf.where(unfinished, tf.gather(state.scores, best, batch_dims=1), state.found.scores))


@tf.autograph.experimental.do_not_convert
def _extend(state: _Beams, logp: tf.Tensor, rules: Rules) -> tuple[_Beams, tf.Tensor, tf.Tensor]:
    """Keep each input's best extensions of its live beams by ``logp`` ``[batch·beams, V]``, end what ends; the
    next step's token and parent row of each row."""
    batch, beams, steps = tf.unstack(tf.shape(state.ids))
    vocab, never = tf.shape(logp)[1], tf.constant(NEVER, tf.float64)
    width = tf.reduce_sum(tf.cast(state.scores > never, tf.int32), axis=1)  # live beams of each input
    width = tf.where(tf.equal(state.written, 0), beams, width)  # the first extension fills every beam
    totals = state.scores[:, :, None] + tf.cast(tf.reshape(logp, [batch, beams, vocab]), tf.float64)
    scores, best = tf.math.top_k(tf.reshape(totals, [batch, beams * vocab]), beams)  # best first
    parents, tokens = best // vocab, best % vocab
    kept = tf.range(beams)[None] < width[:, None]
    scores = tf.where(kept, scores, never)
    here = tf.range(steps) == state.written  # (T,): this token's column
    ids = tf.where(here[None, None], tokens[:, :, None], tf.gather(state.ids, parents, batch_dims=1))
    ends = tf.reduce_any(tf.equal(ids[..., None], tf.constant(rules.end_ids or (-1,), tf.int32)), axis=-1)
    ends &= (tf.range(steps) <= state.written)[None, None]
    finished = tf.reduce_any(ends & here[None, None], axis=-1) & kept  # its last token is an end id
    finished &= (tf.reduce_sum(tf.cast(ends, tf.int32), axis=-1) >= rules.min_ends)
    finished &= state.written + 1 >= rules.min_length
    ending = finished[:, 0] & ~state.done  # the best beam ends: the input's sequence is found
    found = Found(tf.where(ending[:, None], ids[:, 0], state.found.ids),
                  tf.where(ending, state.written + 1, state.found.lengths),
                  tf.where(ending, scores[:, 0], state.found.scores))
    done = state.done | ending
    scores = tf.where(finished | done[:, None], never, scores)  # beams that ended behind the best are dropped
    tokens = tf.where(scores > never, tokens, 0)  # a dropped beam is fed padding
    parents += tf.range(batch)[:, None] * beams  # rows of the cache
    return _Beams(state.written + 1, ids, scores, done, found), tf.reshape(tokens, [-1]), tf.reshape(parents, [-1])
