"""Long documents as windows (`kerasbert.text.windows`): the split's arithmetic, the rows of the windows, and the
merges, each against a plain reference written here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.errors import ConfigError
from kerasbert.text.ner_readers import span_example
from kerasbert.text.pipeline import Features, encode_classification, encode_ner, ner_tag_set
from kerasbert.text.readers import ClassificationExample, LabelSet
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.windows import (
    Window,
    best_windows,
    check_stride,
    cut,
    encode_split,
    mean_by_document,
    merge_pieces,
    merge_spans,
    piece_ranges,
    split,
    windowed,
)

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"张三李四去北京上海和了"]
TOKENIZER = Tokenizer({token: i for i, token in enumerate(TOKENS)})


@st.composite
def layouts(draw, most: int = 120):
    """``(lengths, maxlen, stride)``: documents of 0..``most`` pieces and a stride a window can hold."""
    maxlen = draw(st.integers(3, 40))
    return draw(st.lists(st.integers(0, most), min_size=1, max_size=4)), maxlen, draw(st.integers(0, maxlen - 3))


@settings(max_examples=200, deadline=None)
@given(layout=layouts(most=300))
def test_windows_cover_every_piece_overlap_by_the_stride_and_fit_maxlen(layout):
    lengths, maxlen, stride = layout
    for length in lengths:
        ranges = piece_ranges(length, maxlen - 2, stride)
        assert ranges[0][0] == 0 and ranges[-1][1] == length
        covered = sorted({p for start, end in ranges for p in range(start, end)})
        assert covered == list(range(length))
        assert all(end - start <= maxlen - 2 for start, end in ranges)
        assert all(end - start == maxlen - 2 for start, end in ranges[:-1])  # only the last may be shorter
        for (_, end), (next_start, next_end) in zip(ranges, ranges[1:], strict=False):
            assert end - next_start == stride and next_end > end  # exactly N shared, and new pieces each time
        if length <= maxlen - 2:
            assert ranges == [(0, length)]
    windows = split(lengths, maxlen, stride)
    assert [w.document for w in windows] == sorted(w.document for w in windows)
    assert {w.document for w in windows} == set(range(len(lengths)))


def test_the_edges_of_the_split():
    assert piece_ranges(0, 4, 0) == [(0, 0)]  # an empty text is one (empty) window
    assert piece_ranges(4, 4, 3) == [(0, 4)]  # a text that fits exactly is one window
    assert piece_ranges(5, 4, 3) == [(0, 4), (1, 5)]  # a step of one piece
    assert piece_ranges(9, 4, 0) == [(0, 4), (4, 8), (8, 9)]  # no overlap: the last holds what is left
    assert split([3], maxlen=3, stride=0) == [Window(0, 0, 1), Window(0, 1, 2), Window(0, 2, 3)]


@pytest.mark.parametrize("stride, maxlen, found", [(126, 128, "found 126"), (200, 128, "found 200"),
                                                   (-1, 128, "found -1"), (True, 128, "found True"),
                                                   (1.5, 128, "found 1.5"), (1, 3, "found 1")])
def test_a_stride_a_window_cannot_hold_is_refused(stride, maxlen, found):
    with pytest.raises(ConfigError, match="--stride: expected") as error:
        check_stride(stride, maxlen)
    assert found in str(error.value)
    if isinstance(stride, int) and stride >= 0 and not isinstance(stride, bool):
        assert f"less than maxlen - 2 = {maxlen - 2}" in str(error.value)


@settings(max_examples=100, deadline=None)
@given(layout=layouts())
def test_window_rows_are_cls_their_pieces_sep(layout):
    lengths, maxlen, stride = layout
    rows = [[2, *range(100, 100 + n), 3] for n in lengths]
    features = windowed(Features(rows, [[0] * len(row) for row in rows], list(range(len(rows)))), maxlen, stride)
    assert len(features) == len(features.windows)
    for ids, segments, label, window in zip(features.token_ids, features.segment_ids, features.labels,
                                            features.windows, strict=True):
        assert len(ids) <= maxlen and ids[0] == 2 and ids[-1] == 3 and segments == [0] * len(ids)
        assert ids[1:-1] == list(range(100 + window.start, 100 + window.end))
        assert label == window.document  # a document's label goes to each of its windows


def test_a_text_that_fits_is_encoded_as_without_a_stride():
    rows = [ClassificationExample("张三去北京", "x"), ClassificationExample("李四", "y")]
    cut_rows = encode_classification(TOKENIZER, rows, LabelSet(["x", "y"]), maxlen=8)
    split_rows = encode_split(lambda n: encode_classification(TOKENIZER, rows, LabelSet(["x", "y"]), maxlen=n), 8, 2)
    assert (split_rows.token_ids, split_rows.segment_ids, split_rows.labels) == (
        cut_rows.token_ids, cut_rows.segment_ids, cut_rows.labels)
    assert split_rows.windows == [Window(0, 0, 5), Window(1, 0, 2)] and cut_rows.windows is None
    examples = [span_example("张三去北京", [(0, 2, "PER"), (3, 5, "LOC")])]
    tags = ner_tag_set(examples)
    for crf in (False, True):
        whole = encode_ner(TOKENIZER, examples, tags, maxlen=8, crf=crf)
        windows = encode_split(lambda n, crf=crf: encode_ner(TOKENIZER, examples, tags, n, crf=crf), 8, 2)
        assert (windows.token_ids, windows.labels, windows.weights, windows.first_pieces) == (
            whole.token_ids, whole.labels, whole.weights, whole.first_pieces)


def test_a_long_ner_text_keeps_every_tag_and_its_first_pieces():
    text = "张三去北京和李四去上海了"
    example = span_example(text, [(0, 2, "PER"), (3, 5, "LOC"), (6, 8, "PER"), (9, 11, "LOC")])
    tags = ner_tag_set([example])
    whole = encode_ner(TOKENIZER, [example], tags)
    windows = windowed(whole, maxlen=6, stride=1)  # 4 pieces a window, 3 new each
    assert [tuple(w)[1:] for w in windows.windows] == [(0, 4), (3, 7), (6, 10), (9, 12)]
    for row, labels, weights, window in zip(windows.token_ids, windows.labels, windows.weights, windows.windows,
                                            strict=True):
        assert labels == cut(whole.labels[0], window) and weights == cut(whole.weights[0], window)
        assert row == cut(whole.token_ids[0], window) and labels[0] == labels[-1] == 0
    assert windows.first_pieces == whole.first_pieces  # one row per document, numbered in its uncut row


def test_pairs_are_not_windowed():
    rows = [ClassificationExample("张三去北京", "x", text_b="李四")]
    with pytest.raises(ConfigError, match=r"--stride: expected single texts, found text pairs"):
        windowed(encode_classification(TOKENIZER, rows), maxlen=5, stride=1)


def _best_reference(windows: list[Window], piece: int) -> int:
    """The window a piece is read from, by the rule in words: of the windows holding it, the one where it is
    furthest from an edge; the earliest of those."""
    holding = [k for k, w in enumerate(windows) if w.start <= piece < w.end]
    distance = {k: min(piece - windows[k].start, windows[k].end - 1 - piece) for k in holding}
    return min(k for k in holding if distance[k] == max(distance.values()))


@settings(max_examples=200, deadline=None)
@given(layout=layouts())
def test_each_piece_is_read_from_the_window_where_it_is_furthest_from_an_edge(layout):
    lengths, maxlen, stride = layout
    windows = split(lengths, maxlen, stride)
    # a window's row: position i holds 1000 * (row index + 1) + i, so a merged value says where it came from
    rows = [np.arange(w.end - w.start + 2) + 1000 * (i + 1) for i, w in enumerate(windows)]
    merged = merge_pieces(windows, rows)
    assert len(merged) == len(lengths)
    first = 0
    for document, length in enumerate(lengths):
        group = [w for w in windows if w.document == document]
        best = best_windows(group)
        assert best.tolist() == [_best_reference(group, p) for p in range(length)]
        expected = [1000 * (first + 1)]  # [CLS]: the first window's
        expected += [1000 * (first + k + 1) + 1 + p - group[k].start for p, k in enumerate(best.tolist())]
        expected += [1000 * (first + len(group)) + group[-1].end - group[-1].start + 1]  # [SEP]: the last window's
        assert merged[document].tolist() == expected
        first += len(group)


def test_one_window_merges_to_its_own_row():
    rows = [np.array([[0.5, 0.25], [0.125, 0.75], [1.0, 0.0]], np.float32)]
    assert np.array_equal(merge_pieces(split([1], 8, 2), rows)[0], rows[0])
    assert merge_pieces(None, [[1, 2, 3]])[0].tolist() == [1, 2, 3]


@settings(max_examples=100, deadline=None)
@given(layout=layouts(), seed=st.integers(0, 2 ** 16))
def test_a_documents_probabilities_are_the_mean_of_its_windows(layout, seed):
    lengths, maxlen, stride = layout
    windows = split(lengths, maxlen, stride)
    rows = np.random.default_rng(seed).dirichlet(np.ones(3), len(windows)).astype(np.float32)
    mean = mean_by_document(windows, rows)
    assert mean.dtype == np.float32 and mean.shape == (len(lengths), 3)
    for document in range(len(lengths)):
        mine = rows[[i for i, w in enumerate(windows) if w.document == document]]
        np.testing.assert_allclose(mean[document], mine.mean(axis=0), rtol=1e-6, atol=1e-7)
        if len(mine) == 1:
            assert np.array_equal(mean[document], mine[0])  # a text that fits keeps its numbers exactly
    assert mean_by_document(None, rows) is not None and np.array_equal(mean_by_document(None, rows), rows)


@settings(max_examples=150, deadline=None)
@given(layout=layouts(most=40), data=st.data())
def test_a_span_is_kept_once_from_the_window_where_it_is_furthest_from_an_edge(layout, data):
    lengths, maxlen, stride = layout
    windows = split(lengths, maxlen, stride)
    spans = []  # each window finds some spans of its pieces (row positions 1.., end inclusive)
    for w in windows:
        size = w.end - w.start
        pairs = data.draw(st.lists(st.tuples(st.integers(1, max(size, 1)), st.integers(0, 3)), max_size=4))
        spans.append(sorted({(a, min(a + extra, size), "X") for a, extra in pairs if size}))
    merged = merge_spans(windows, spans)
    first = 0
    for document in range(len(lengths)):
        group = [w for w in windows if w.document == document]
        expected = set()
        for k, w in enumerate(group):
            for a, b, label in spans[first + k]:
                start, end = w.start + a - 1, w.start + b - 1
                holding = [j for j, v in enumerate(group) if v.start <= start and end < v.end]
                distance = {j: min(start - group[j].start, group[j].end - 1 - end) for j in holding}
                if k == min(j for j in holding if distance[j] == max(distance.values())):
                    expected.add((start + 1, end + 1, label))
        assert merged[document] == sorted(expected)
        first += len(group)


def test_a_span_found_by_two_windows_is_kept_once_and_one_at_an_edge_gives_way():
    windows = split([10], maxlen=8, stride=4)  # pieces 0..5 and 2..7, then 4..9
    assert [tuple(w)[1:] for w in windows] == [(0, 6), (2, 8), (4, 10)]
    # pieces 4..5: at the first window's edge, centred in the second (rows 3..4), at the third's start
    found = [[(5, 6, "LOC")], [(3, 4, "LOC")], [(1, 2, "LOC")]]
    assert merge_spans(windows, found) == [[(5, 6, "LOC")]]
    assert merge_spans(windows, [[(5, 6, "LOC")], [], []]) == [[]]  # the second window decides, and found none
