"""kerasbert.generate: end ids, min_length and max_length as bert4keras reads them, inputs batched in any way
giving the same ids, and one clear error for each bad model, input or option."""

from __future__ import annotations

import numpy as np
import pytest

import kerasbert
from kerasbert import DataError, ModelError, build_transformer_model, generate


def test_the_public_name_is_the_generation_rooms():
    from kerasbert.generation.generate import generate as home

    assert kerasbert.generate is home and "generate" in kerasbert.__all__


def test_sequences_end_at_their_first_end_id_unless_shorter_than_min_length(language_model, end_token, sources):
    model = language_model("albert", "unilm")
    end = end_token(model)
    free = [one.ids[0] for one in generate(model, sources, end_ids=end, max_length=8)]
    assert all(ids.index(end) == len(ids) - 1 if end in ids else len(ids) == 8 for ids in free)
    assert len({len(ids) for ids in free}) > 1
    shortest = min(len(ids) for ids in free)
    held = [one.ids[0] for one in generate(model, sources, end_ids=end, max_length=8, min_length=shortest + 1)]
    for before, after in zip(free, held, strict=True):
        assert len(after) >= shortest + 1 and after[:len(before)] == before  # greedy: the same path, decoded on
        assert after[-1] == end or len(after) == 8
    assert any(end in ids[:-1] for ids in held)  # an end id before min_length did not end its sequence


def test_any_of_several_end_ids_ends_and_min_ends_counts_them(language_model, sources):
    model = language_model("bert", "lm")
    free = [one.ids[0] for one in generate(model, sources, max_length=8)]
    ends = sorted({ids[2] for ids in free})  # every sequence's third token
    found = [one.ids[0] for one in generate(model, sources, end_ids=ends, max_length=8)]
    assert all(len(ids) <= 3 and ids[-1] in ends for ids in found)
    twice = [one.ids[0] for one in generate(model, sources, end_ids=ends, min_ends=2, max_length=8)]
    for ids in twice:
        assert len(ids) == 8 or (ids[-1] in ends and sum(t in ends for t in ids) >= 2)


def test_max_length_bounds_every_method_and_without_end_ids_is_reached(language_model, sources):
    model = language_model("roformer_v2", "unilm")
    for method, options in (("greedy", {}), ("beam", {"beams": 2}), ("sample", {"n": 3, "seed": 0})):
        for one in generate(model, sources, method, max_length=4, **options):
            assert [len(ids) for ids in one.ids] == [4] * options.get("n", 1)


def test_how_inputs_are_batched_does_not_change_the_ids(language_model, sources):
    model = language_model("nezha", "unilm")
    together = generate(model, sources, "beam", beams=3, max_length=6)
    arrays = [np.array(source, dtype="int64") for source in sources]
    for found in (generate(model, sources, "beam", beams=3, max_length=6, batch_size=1),
                  generate(model, sources[::-1], "beam", beams=3, max_length=6, batch_size=3)[::-1],
                  generate(model, arrays, "beam", beams=3, max_length=6)):
        assert [one.ids for one in found] == [one.ids for one in together]
        np.testing.assert_allclose([one.scores for one in found], [one.scores for one in together], atol=1e-5)


def test_sampled_sequences_come_ended_first_in_the_order_they_ended(language_model, end_token, sources):
    model = language_model("bert", "unilm")
    end = end_token(model)
    for one in generate(model, sources, "sample", n=6, topk=4, seed=3, end_ids=end, max_length=8):
        ended = [ids[-1] == end for ids in one.ids]
        assert ended == sorted(ended, reverse=True)  # the ended ones first
        lengths = [len(ids) for ids, done in zip(one.ids, ended, strict=True) if done]
        assert lengths == sorted(lengths)


@pytest.mark.parametrize("inputs, options, error, message", [
    ([[2] + [5] * 58 + [3]], {"max_length": 10}, ModelError,
     r"input 0: expected at most 54 tokens \(the model's 64 positions minus max_length 10\), found 60 tokens"),
    ([[2, 3]], {"method": "sample", "topk": 129}, ModelError, "topk: expected at most the vocabulary size, 128"),
    ([[2, 3]], {"method": "beam", "beams": 200}, ModelError, "beams: expected at most the vocabulary size, 128"),
    ([], {}, DataError, "inputs: expected at least one input, found an empty batch"),
    ([2, 3], {}, DataError, "a list of inputs, each a list of token ids, found one list of ids. for one input pass"),
    ([[2, 3], []], {}, DataError, r"input 1: expected token ids in \[1, 128\) \(0 is padding\), found \[\]"),
    ([[2, 0, 3]], {}, DataError, r"input 0: expected token ids in \[1, 128\)"),
    ([[2, 128]], {}, DataError, r"input 0: expected token ids in \[1, 128\)"),
    ([[2, 3]], {"method": "topk"}, DataError, "method: expected 'greedy' or 'beam' or 'sample', found 'topk'"),
    ([[2, 3]], {"method": "beam"}, DataError, 'beams: expected a whole number >= 1, found None. method="beam" needs'),
    ([[2, 3]], {"max_length": 2, "min_length": 3}, DataError, r"max_length: expected >= min_length \(3\), found 2"),
    ([[2, 3]], {"method": "sample", "temperature": 0}, DataError, "temperature > 0 and topp in"),
    ([[2, 3]], {"method": "sample", "topp": 1.5}, DataError, "found temperature=1.0, topp=1.5"),
    ([[2, 3]], {"end_ids": [3, 500]}, DataError, r"end_ids: expected token ids in \[0, 128\), found \[3, 500\]"),
    ([[2, 3]], {"method": "sample", "n": 0}, DataError, "n: expected a whole number >= 1, found 0"),
])
def test_bad_inputs_and_options_name_what_is_wrong(language_model, inputs, options, error, message):
    with pytest.raises(error, match=message):
        generate(language_model("bert", "unilm"), inputs, **options)


def test_models_that_cannot_generate_are_refused():
    with pytest.raises(ModelError, match='application: expected "lm" or "unilm" to generate, found \'encoder\''):
        generate(build_transformer_model("tiny", with_mlm=True, verbose=False), [[2, 3]])
    electra = build_transformer_model("tiny", model="electra", embedding_size=16, verbose=False)
    with pytest.raises(ModelError, match="model: expected a BERT, ALBERT, NEZHA or RoFormer language model"):
        generate(electra, [[2, 3]])
