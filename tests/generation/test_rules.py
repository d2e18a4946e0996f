"""kerasbert.generation.rules: the beam step by hand, and the same step, ties included, in NumPy and TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.generation.graph_search import TF
from kerasbert.generation.rules import NEVER, NUMPY, Rules, extend, first_state, outcome, top_candidates


def test_top_k_orders_as_tf_top_k_ties_and_minus_infinity_included():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (50, 30)).astype("float64")  # many ties, at the k-th value too
    x[rng.random(x.shape) < 0.2] = NEVER
    for k in (1, 3, 7, 30):
        values, columns = NUMPY.top_k(x, k)
        expected = tf.math.top_k(x, k)
        np.testing.assert_array_equal(values, expected.values.numpy())
        np.testing.assert_array_equal(columns, expected.indices.numpy())


def test_a_step_keeps_the_best_ends_the_leader_and_drops_beams_that_end_behind_it():
    rules = Rules(end_ids=(2,), max_length=3)
    log = np.log
    state, tokens, parents = extend(NUMPY, first_state(NUMPY, 1, 2, 3), np.repeat(log([[0.5, 0.3, 0.2]]), 2, 0),
                                    rules)
    assert state.ids[0, :, 0].tolist() == [0, 1] and state.scores[0].tolist() == [log(0.5), log(0.3)]
    assert tokens.tolist() == [0, 1] and parents.tolist() == [0, 0] and state.width.tolist() == [2]
    # beam 0 (0.5) extends to 0.5·0.1 by 0, 0.5·0.6 by the end id 2; beam 1 (0.3) to 0.3·0.9 by 1
    state, tokens, parents = extend(NUMPY, state, log([[0.1, 0.3, 0.6], [0.05, 0.9, 0.05]]), rules)
    assert state.done.tolist() == [True] and state.found.ids[0, :2].tolist() == [0, 2]
    assert state.found.lengths.tolist() == [2] and state.found.scores[0] == pytest.approx(log(0.5 * 0.6))
    assert state.scores[0].tolist() == [NEVER, NEVER] and tokens.tolist() == [0, 0]
    second = extend(NUMPY, first_state(NUMPY, 1, 2, 3), np.repeat(log([[0.3, 0.5, 0.2]]), 2, 0), rules)[0]
    second = extend(NUMPY, second, log([[0.05, 0.9, 0.05], [0.1, 0.3, 0.6]]), rules)[0]  # 0.3·0.6 ends, behind
    assert not second.done[0] and second.width.tolist() == [1] and second.scores[0, 1] == NEVER
    assert second.ids[0, 0, :2].tolist() == [1, 1]
    found = outcome(NUMPY, second)
    assert found.ids[0, :2].tolist() == [1, 1] and found.lengths.tolist() == [2]


def test_an_end_id_before_min_length_does_not_end_and_min_ends_counts_them():
    state = first_state(NUMPY, 1, 1, 4)
    logp = np.log([[0.1, 0.1, 0.8]])  # the end id 2 is always the likeliest
    for rules, length in ((Rules((2,), 4, min_length=3), 3), (Rules((2,), 4, min_ends=2), 2)):
        ended = state
        for _ in range(4):
            ended = extend(NUMPY, ended, logp, rules)[0]
        assert ended.found.lengths.tolist() == [length] and ended.found.ids[0, :length].tolist() == [2] * length


def test_numpy_and_tensorflow_run_the_same_steps():
    """Several inputs, scores full of ties and ends at different steps: every state, token and parent equal."""
    rng = np.random.default_rng(3)
    batch, beams, vocab, steps = 4, 3, 6, 5
    rules = Rules(end_ids=(2, 4), max_length=steps, min_length=2, min_ends=1)
    ours, theirs = first_state(NUMPY, batch, beams, steps), first_state(TF, tf.constant(batch), beams, steps)
    for _ in range(steps):
        logp = np.log(rng.integers(1, 4, (batch * beams, vocab)) / 4.0).astype("float32")  # ties everywhere
        ours, tokens, parents = extend(NUMPY, ours, logp, rules)
        theirs, graph_tokens, graph_parents = extend(TF, theirs, tf.constant(logp), rules)
        assert tokens.tolist() == graph_tokens.numpy().tolist() and parents.tolist() == graph_parents.numpy().tolist()
        for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs), strict=True):
            np.testing.assert_allclose(np.asarray(a, "float64"), np.asarray(b, "float64"), rtol=1e-6)
    assert 0 < ours.done.sum() < batch  # some inputs ended, some ran out of steps
    for a, b in zip(outcome(NUMPY, ours), outcome(TF, theirs), strict=True):
        np.testing.assert_allclose(np.asarray(a, "float64"), np.asarray(b, "float64"), rtol=1e-6)


def test_top_candidates_keep_topk_then_the_head_reaching_topp_renormalized():
    probas = np.array([[0.05, 0.5, 0.15, 0.3]])
    kept, token_ids = top_candidates(probas, topk=3, topp=0.7)  # 0.5, 0.3, 0.15 over 0.95: 0.526 + 0.316 reach it
    order = np.argsort(token_ids[0])
    assert token_ids[0][order].tolist() == [1, 2, 3]
    np.testing.assert_allclose(kept[0][order], [0.625, 0.0, 0.375])
