"""kerasbert.compat.snippets: equal to bert4keras 0.11.5's snippets on the same inputs."""

from __future__ import annotations

import builtins
import itertools
import json

import numpy as np
import pytest

from kerasbert import DataError
from kerasbert.compat import snippets
from kerasbert.compat.snippets import (
    DataGenerator,
    parallel_apply,
    sequence_padding,
    text_segmentate,
    to_array,
    truncate_sequences,
)

import helpers

PADDING = [
    ([[1, 2, 3], [4], []], {}),
    ([[1, 2, 3], [4], [5, 6]], {"mode": "pre", "value": -1}),
    ([[1, 2, 3, 4, 5], [4]], {"length": 3}),
    ([[1, 2, 3, 4, 5], [4]], {"length": 3, "mode": "pre"}),  # cut at the end even in "pre" mode
    ([[1.5, 2.5], [4.0]], {"value": 0.25}),
    ([[1, 2], [4]], {"value": 0.5}),  # a float value in int rows: cast to int
    ([[[1, 2], [3, 4], [5, 6]], [[7, 8]]], {}),  # [S, 2] rows: pad S only
    ([[[1, 2], [3, 4], [5, 6]], [[7, 8]]], {"mode": "pre", "length": 2}),
    ([[[1, 2, 3], [4, 5, 6]], [[7]]], {"seq_dims": 2}),
    ([[[1, 2, 3], [4, 5, 6]], [[7]]], {"seq_dims": 2, "mode": "pre", "value": 9}),
    ([[[1, 2, 3], [4, 5, 6]], [[7, 8]]], {"seq_dims": 2, "length": [1, 4]}),
]
TRUNCATE = [
    [5, -1, [[1, 2, 3, 4], [5, 6, 7]]],
    [5, 0, [[1, 2, 3, 4], [5, 6, 7]]],
    [4, [-1, 0], [[1, 2, 3], [4, 5, 6]]],  # ties: the first list loses first
    [3, -1, [[1, 2], [], [3, 4, 5]]],  # the empty list is left out of the result
    [10, -1, [[1, 2], [3]]],
    [0, -1, [[1, 2], [3]]],
]
SEGMENTATE = [
    ["今天天气很好。我们去公园吧！你说呢？好的。", 8, "。！？"],
    ["今天天气很好。我们去公园吧！你说呢？好的。", 12, "。！？"],
    ["一二三四五六七八九十，一二三四五六七八九十。短句。", 6, "。，"],
    ["  short text \n", 20, "\n"],
    ["aaaa\nbbbb\ncccc\n\ndddd", 9, "\n"],
    ["a,b;c,d;e,f", 3, ";,", None],
    ["xxa,b;c,d;e,fxx", 3, ";,", "x"],
    ["abcdefghijkl", 4, ""],
]
ARRAYS = [[[1, 2, 3]], [[1, 2], [[1.5], [2.5]]], [[[1, 2], [3, 4]], 7, "ab"]]
GENERATORS = [
    {"n": 10, "batch_size": 3, "buffer_size": None, "sized": True, "random": False, "seed": 0, "forfit": None},
    {"n": 10, "batch_size": 3, "buffer_size": None, "sized": True, "random": True, "seed": 7, "forfit": None},
    {"n": 9, "batch_size": 3, "buffer_size": None, "sized": True, "random": True, "seed": 1, "forfit": 8},
    {"n": 7, "batch_size": 2, "buffer_size": None, "sized": True, "random": False, "seed": 0, "forfit": 9},
    {"n": 20, "batch_size": 4, "buffer_size": 5, "sized": False, "random": True, "seed": 3, "forfit": None},
    {"n": 20, "batch_size": 4, "buffer_size": None, "sized": False, "random": False, "seed": 0, "forfit": None},
    {"n": 1, "batch_size": 4, "buffer_size": None, "sized": True, "random": True, "seed": 0, "forfit": None},
]


class Batches(DataGenerator):
    """The usual bert4keras subclass: items in `sample` order, cut into batches (the last one partial)."""

    def __iter__(self, random=False):
        batch = []
        for is_end, item in self.sample(random):
            batch.append(item)
            if len(batch) == self.batch_size or is_end:
                yield self.batch_of(batch)
                batch = []

    @staticmethod
    def batch_of(items: list) -> list:
        return items


class ArrayBatches(Batches):
    """Batches as arrays, as `forfit`'s callers hand them to ``fit``."""

    @staticmethod
    def batch_of(items: list) -> np.ndarray:
        return np.asarray(items)


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    task = {"kind": "snippets", "padding": PADDING, "truncate": TRUNCATE, "segmentate": SEGMENTATE,
            "arrays": ARRAYS, "generators": GENERATORS}
    out = helpers.run_oracle([task], str(tmp_path_factory.mktemp("oracle")))
    return json.loads(str(out["0/json"]))


@pytest.mark.parametrize("case", range(len(PADDING)))
def test_sequence_padding_equals_bert4keras(theirs, case):
    rows, kwargs = PADDING[case]
    ours = sequence_padding([np.array(row) for row in rows], **kwargs)
    assert ours.tolist() == theirs["padding"][case]["values"]
    assert str(ours.dtype) == theirs["padding"][case]["dtype"]
    assert sequence_padding(rows, **kwargs).tolist() == ours.tolist()  # lists of lists too


def test_truncate_sequences_equals_bert4keras(theirs):
    for (maxlen, indices, lists), expected in zip(TRUNCATE, theirs["truncate"], strict=True):
        lists = [list(s) for s in lists]
        result = truncate_sequences(maxlen, indices, *lists)
        assert result == expected
        assert all(any(r is s for s in lists) for r in result)  # cut in place, as bert4keras


def test_text_segmentate_equals_bert4keras(theirs):
    assert [text_segmentate(*args) for args in SEGMENTATE] == theirs["segmentate"]


def test_to_array_equals_bert4keras(theirs):
    for args, expected in zip(ARRAYS, theirs["arrays"], strict=True):
        ours = to_array(*args)
        assert isinstance(ours, np.ndarray) == (len(args) == 1)
        assert [a.tolist() for a in (ours if isinstance(ours, list) else [ours])] == expected


@pytest.mark.parametrize("case", range(len(GENERATORS)))
def test_data_generator_order_equals_bert4keras(theirs, case):
    spec = GENERATORS[case]
    np.random.seed(spec["seed"])
    data = list(range(spec["n"])) if spec["sized"] else iter(range(spec["n"]))
    gen = (ArrayBatches if spec["forfit"] else Batches)(data, spec["batch_size"], spec["buffer_size"])
    if spec["forfit"]:  # a tf.data.Dataset of the arrays
        batches = [batch.numpy().tolist() for batch in itertools.islice(iter(gen.forfit(spec["random"])),
                                                                         spec["forfit"])]
    else:
        batches = list(gen.__iter__(spec["random"]))
    assert batches == theirs["generators"][case]["batches"]
    if spec["sized"]:
        assert len(gen) == theirs["generators"][case]["len"]


def test_data_generator_edges():
    with pytest.raises(NotImplementedError):
        next(iter(DataGenerator([1, 2])))
    with pytest.raises(DataError, match="DataGenerator: expected data with a length, found generator"):
        len(DataGenerator(x for x in range(3)))
    assert list(Batches([], 2).sample()) == []
    assert DataGenerator([1], batch_size=4).buffer_size == 4000


def test_forfit_batches_of_their_own_length_fit_and_predict():
    """Each batch padded to its own longest row, the first two of one length: Keras 3 fits and predicts them all."""
    import keras

    class Padded(DataGenerator):
        def __iter__(self, random=False):
            for start in range(0, len(self.data), self.batch_size):
                rows = self.data[start:start + self.batch_size]
                yield sequence_padding(rows), np.array([len(row) % 2 for row in rows])

    rows = [[1] * n for n in (5, 5, 5, 5, 3, 2, 7, 4)]  # batches of 2: lengths 5, 5, 3, 7
    gen = Padded(rows, batch_size=2)
    inputs = keras.Input((None,))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(8, 4)(inputs))))
    model.compile("adam", "sparse_categorical_crossentropy")
    history = model.fit(gen.forfit(random=False), steps_per_epoch=len(gen), epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert model.predict(gen.fortest(), steps=len(gen), verbose=0).shape == (8, 2)
    first = next(iter(gen.forfit(random=False)))
    assert first[0].shape == (2, 5) and first[1].numpy().tolist() == [1, 1]


def test_to_dataset_batches_and_names():
    class Pairs(DataGenerator):
        def __iter__(self, random=False):
            for _, n in self.sample(random):
                yield list(range(1, n + 1)), n

    pairs = Pairs([1, 3, 2, 4], batch_size=2)  # forfit: shuffled, endless
    dataset = pairs.to_dataset(("int32", "int32"), ([None], []), names=("ids", "n"), padded_batch=True)
    batches = [{k: v.numpy().tolist() for k, v in batch.items()} for batch in dataset.take(4)]
    for batch in batches:
        width = max(batch["n"])
        assert batch["ids"] == [list(range(1, n + 1)) + [0] * (width - n) for n in batch["n"]]
    assert sorted(batches[0]["n"] + batches[1]["n"]) == [1, 2, 3, 4]  # one epoch, then the next
    fixed = Pairs([2, 2, 2], batch_size=2).to_dataset(("int32", "int32"), ([2], []))
    ids, n = next(iter(fixed))
    assert ids.numpy().tolist() == [[1, 2], [1, 2]] and n.numpy().tolist() == [2, 2]


def test_sequence_padding_errors():
    with pytest.raises(DataError, match=r"sequence_padding: inputs: expected rows whose axes after the first 1 agree, "
                                        r"found shapes \(2,\) and \(3,\) there"):
        sequence_padding([np.zeros((4, 2)), np.zeros((1, 3))])
    with pytest.raises(DataError, match="expected rows of at least seq_dims=2 axes, found a row of 1 axes"):
        sequence_padding([[1, 2], [3]], seq_dims=2)
    with pytest.raises(DataError, match="expected rows of at least seq_dims=1 axes, found no rows"):
        sequence_padding([])
    with pytest.raises(DataError, match='mode: expected "post" or "pre", found \'middle\''):
        sequence_padding([[1]], mode="middle")
    assert sequence_padding([np.ones((2, 3)), np.ones((1, 1))], length=2, seq_dims=2).shape == (2, 2, 2)


def test_truncate_sequences_errors():
    with pytest.raises(DataError, match="expected lists \\(cut in place\\), found tuple"):
        truncate_sequences(1, -1, (1, 2, 3))
    with pytest.raises(DataError, match="expected maxlen >= 0 and one index per sequence"):
        truncate_sequences(3, [-1], [1], [2])


def test_open_is_the_builtin_unless_indexable(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("第一行\nsecond\n第三\n", encoding="utf-8")
    assert builtins.open is not snippets.open and "open" not in vars(DataGenerator)
    with snippets.open(str(path), encoding="utf-8") as f:
        assert type(f) is type(builtins.open(__file__, encoding="utf-8")) and list(f)[1] == "second\n"
    cache = tmp_path / "offsets.json"
    with snippets.open(str(path), encoding="utf-8", indexable=str(cache)) as f:
        assert len(f) == 3 and f[2] == "第三\n" and f[0] == "第一行\n"
    assert json.loads(cache.read_text()) == [0, 10, 17]
    with snippets.open(str(path), encoding="utf-8", indexable=str(cache)) as f:  # offsets read back
        assert f[1] == "second\n" and f.readline() == "第三\n"


def _square(x):
    return x * x


@pytest.mark.parametrize("dummy", [True, False], ids=["threads", "processes"])
def test_parallel_apply_order_and_results(dummy):
    items = list(range(40))
    ordered = parallel_apply(_square, items, workers=3, max_queue_size=4, dummy=dummy, unordered=False)
    assert ordered == [x * x for x in items]
    assert sorted(parallel_apply(lambda x: x + 1, items, 2, 2, dummy=dummy)) == [x + 1 for x in items]
    seen = []
    assert parallel_apply(_square, items, 2, 3, callback=seen.append, dummy=dummy) is None
    assert sorted(seen) == sorted(x * x for x in items)
    draws = parallel_apply(lambda _: np.random.randint(1 << 30), range(2), 1, 2, dummy=dummy, random_seeds=[5])
    np.random.seed(5)
    assert draws == list(np.random.randint(1 << 30, size=2))


def test_parallel_apply_raises_the_workers_error():
    with pytest.raises(ZeroDivisionError):
        parallel_apply(lambda x: 1 / x, [1, 0, 2], 2, 2, dummy=True)
    with pytest.raises(DataError, match="expected workers >= 1"):
        parallel_apply(_square, [1], 0, 1)


def test_forfit_without_labels_fits_a_loss_layer_model():
    """``yield [token_ids, segment_ids], None`` (the labels are inputs of a loss layer): ``fit`` gets the inputs
    alone, as the 1-tuple ``(inputs,)``."""
    import keras

    from kerasbert.compat.layers import Loss

    class Ids(DataGenerator):
        def __iter__(self, random=False):
            for _, n in self.sample(random):
                yield [np.full((2, n), n, "int32"), np.zeros((2, n), "int32")], None

    class MeanSquare(Loss):
        def compute_loss(self, inputs, mask=None):
            return keras.ops.mean(keras.ops.square(inputs[1]))

    token_ids, segment_ids = keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")
    output = MeanSquare(1)([segment_ids, keras.layers.Embedding(8, 4)(token_ids)])
    model = keras.Model([token_ids, segment_ids], output)
    model.compile(optimizer="sgd")
    gen = Ids([3, 5, 4], batch_size=1)
    first = next(iter(gen.forfit(random=False)))
    assert len(first) == 1 and first[0][0].shape == (2, 3)
    history = model.fit(gen.forfit(), steps_per_epoch=len(gen), epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1
