"""Beam search (greedy: one beam) as TensorFlow ops: `kerasbert.generation.search.beam_search` inside one graph, so
that a SavedModel generates without Python between its steps.

Each step is `kerasbert.generation.rules.extend`, the NumPy search's step, run over `TfOps` in a ``tf.while_loop``:
the same rules, the same tie order and the same result, input by input. Input b's beams are rows ``b·beams ..`` of
the cache, scores ``[batch, beams]`` in float64 as the NumPy search sums them. The decoder's graphs are called by the
names its ``io`` gives (`kerasbert.generation.state.DecoderIO`), so a language model's cache and an
encoder-decoder's (T5's, its cross-attention's keys and values computed once) search alike.
"""

from __future__ import annotations

import tensorflow as tf

from kerasbert.generation.rules import Found, Rules, extend, first_state, outcome

__all__ = ["Found", "TfOps", "graph_beam_search"]


class TfOps:
    """The array operations `kerasbert.generation.rules.extend` needs, as TensorFlow ops (shapes may be dynamic)."""

    reshape, arange, any = staticmethod(tf.reshape), staticmethod(tf.range), staticmethod(tf.reduce_any)

    @staticmethod
    def shape(x: tf.Tensor) -> list[tf.Tensor]:
        return tf.unstack(tf.shape(x))

    @staticmethod
    def zeros(shape: list, dtype: str) -> tf.Tensor:
        return tf.zeros(tf.stack(shape), dtype)

    @staticmethod
    def float64(x) -> tf.Tensor:
        return tf.cast(x, tf.float64)

    @staticmethod
    def where(condition, x, y) -> tf.Tensor:
        """``tf.where``, a Python number taking the other branch's dtype."""
        x = tf.convert_to_tensor(x, dtype_hint=getattr(y, "dtype", None))
        return tf.where(condition, x, tf.convert_to_tensor(y, dtype_hint=x.dtype))

    @staticmethod
    def argmax(x: tf.Tensor, axis: int) -> tf.Tensor:
        return tf.argmax(x, axis=axis, output_type=tf.int32)

    @staticmethod
    def count(x: tf.Tensor, axis: int) -> tf.Tensor:
        return tf.reduce_sum(tf.cast(x, tf.int32), axis=axis)

    @staticmethod
    def isin(x: tf.Tensor, values: tuple[int, ...]) -> tf.Tensor:
        return tf.reduce_any(tf.equal(x[..., None], tf.constant(values or (-1,), x.dtype)), axis=-1)

    @staticmethod
    def gather_beams(x: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        return tf.gather(x, index, batch_dims=1)

    @staticmethod
    def top_k(x: tf.Tensor, k) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.math.top_k(x, k)  # best first, equal values in column order


TF = TfOps()


@tf.autograph.experimental.do_not_convert
def graph_beam_search(lm, token_ids: tf.Tensor, lengths: tf.Tensor, beams: int, rules: Rules) -> Found:
    """The best sequence per source that ``beams`` beams find, as `kerasbert.generation.search.beam_search` finds it.

    Args:
        lm: a cached decoder (`kerasbert.generation.cache.CachedModel`, `CachedEncoderDecoder`): its ``functions()``
            (the prefill and the reordered step), called by the names of its ``io``
            (`kerasbert.generation.state.DecoderIO`).
        token_ids: tf.Tensor. int32 ``[batch, S]``, the sources, padded with 0.
        lengths: tf.Tensor. int32 ``[batch]``, each source's length.
        beams: int. the beam count (1: greedy search).
        rules: Rules. the end ids, lengths and ``min_ends``; the temperature must be 1.

    Returns:
        Found. each input's sequence, its length and its score.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.generation.cache import CachedModel
    >>> lm = CachedModel(build_transformer_model("tiny", application="unilm", verbose=False))
    >>> found = graph_beam_search(lm, tf.constant([[2, 7, 3, 0], [2, 9, 9, 3]]), tf.constant([3, 4]), beams=2,
    ...                           rules=Rules(end_ids=(3,), max_length=4))
    >>> found.ids.shape.as_list(), all(1 <= n <= 4 for n in found.lengths.numpy())
    ([2, 4], True)
    """
    if rules.temperature != 1:
        raise ValueError("graph_beam_search scores at temperature 1")
    batch, steps, io = tf.shape(token_ids)[0], rules.max_length, lm.io
    prefill, reordered_step = lm.functions()
    given = {"token_ids": token_ids, "lengths": lengths, "max_length": tf.constant(steps, tf.int32),
             **{name: tf.constant(value, tf.int32) for name, value in io.constants.items()}}
    *state, logp = prefill(*(given[name] for name in io.prefill))
    row_of = tf.repeat(tf.range(batch), beams)  # one row per beam
    state = {name: tf.nest.map_structure(lambda x: tf.gather(x, row_of), _tupled(value))
             for name, value in zip(io.state, state, strict=True)}
    fixed = {**{name: value for name, value in state.items() if name not in io.carried},
             "lengths": tf.gather(lengths, row_of), "source_width": tf.shape(token_ids)[1]}
    search, tokens, parents = extend(TF, first_state(TF, batch, beams, steps), tf.gather(logp, row_of), rules)

    def more(search, carried, tokens, parents) -> tf.Tensor:
        return (search.written < steps) & ~tf.reduce_all(search.done)

    def step(search, carried, tokens, parents) -> tuple:
        values = {**fixed, **carried, "tokens": tokens, "written": search.written - 1, "parents": parents}
        *new, logp = reordered_step(*(values[name] for name in io.step))
        search, tokens, parents = extend(TF, search, logp, rules)
        return search, dict(zip(io.carried, map(_tupled, new), strict=True)), tokens, parents

    carried = {name: state[name] for name in io.carried}
    return outcome(TF, tf.while_loop(more, step, (search, carried, tokens, parents))[0])


def _tupled(value):
    """A graph's list of per-layer tensors as a tuple (a loop variable keeps one structure), a tensor as it is."""
    return tuple(value) if isinstance(value, list) else value
