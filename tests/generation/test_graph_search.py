"""`graph_beam_search`: the NumPy beam search's sequences and scores from one TensorFlow graph, as a SavedModel runs
it."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.generation.cache import CachedModel
from kerasbert.generation.graph_search import graph_beam_search
from kerasbert.generation.search import Rules, beam_search

CASES = [("bert", "unilm", 3, {}), ("bert", "unilm", 2, {"min_length": 3}), ("nezha", "unilm", 3, {"min_ends": 2}),
         ("roformer", "lm", 2, {}), ("roformer_v2", "unilm", 1, {"min_length": 4})]
SIGNATURE = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)]  # one trace for every batch


def padded(sources: list[list[int]]) -> tuple[tf.Tensor, tf.Tensor]:
    ids = np.zeros((len(sources), max(map(len, sources))), np.int32)
    for row, source in enumerate(sources):
        ids[row, :len(source)] = source
    return tf.constant(ids), tf.constant([len(source) for source in sources], tf.int32)


@pytest.mark.parametrize("family, application, beams, rule", CASES)
def test_the_graph_finds_what_the_numpy_search_finds(language_model, sources, end_token, family, application, beams,
                                                     rule):
    model = language_model(family, application)
    lm, end = CachedModel(model), end_token(model)
    rules = Rules((end, 5) if "min_ends" in rule else (end,), max_length=8, **rule)
    expected = beam_search(lm, sources, beams, rules)
    search = tf.function(lambda ids, lengths: graph_beam_search(lm, ids, lengths, beams, rules),
                         input_signature=SIGNATURE)
    found = search(*padded(sources))
    lengths = found.lengths.numpy()
    assert [found.ids[i, :n].numpy().tolist() for i, n in enumerate(lengths)] == [g.ids[0] for g in expected]
    np.testing.assert_allclose(found.scores.numpy(), [g.scores[0] for g in expected], rtol=1e-6)  # float32 steps
    assert not found.ids.numpy()[np.arange(8)[None] >= lengths[:, None]].any()  # zeros after each sequence
    assert len(set(lengths.tolist())) > 1  # the inputs end at different steps


def test_an_input_alone_gets_what_it_gets_in_a_batch(language_model, sources, end_token):
    model = language_model("bert", "unilm")
    lm, rules = CachedModel(model), Rules((end_token(model),), max_length=8)
    search = tf.function(lambda ids, lengths: graph_beam_search(lm, ids, lengths, 3, rules),
                         input_signature=SIGNATURE)
    together = search(*padded(sources))
    for i, source in enumerate(sources):
        alone = search(*padded([source]))
        assert alone.ids[0].numpy().tolist() == together.ids[i].numpy().tolist()


def test_a_temperature_is_refused(language_model):
    lm = CachedModel(language_model("bert", "unilm"))
    with pytest.raises(ValueError, match="temperature 1"):
        graph_beam_search(lm, *padded([[2, 5, 3]]), 2, Rules((3,), 4, temperature=0.5))
