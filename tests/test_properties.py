"""Property tests (hypothesis): the tokenizer, the data readers, the CRF and padding on arbitrary inputs.

The default profile is bounded and derandomized, so the file runs in well under a minute and a failure
reproduces on every run. ``HYPOTHESIS_PROFILE=slow`` selects a profile with 20 times the examples, drawn
at random (hypothesis prints the seed of a failure)::

    HYPOTHESIS_PROFILE=slow python -m pytest tests/test_properties.py -n 0

Properties: the tokenizer never fails on any Unicode text, keeps its ids in the vocabulary, honours
``maxlen`` and maps tokens back into the text; its ids equal bert4keras's (one oracle subprocess);
every reader returns examples or raises `DataError` on any bytes; `viterbi_decode` and `log_partition`
equal brute force over every label path; `sequence_padding` and `to_dataset` pad without losing values.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kerasbert.compat.snippets import sequence_padding
from kerasbert.errors import DataError
from kerasbert.modeling.crf import log_partition, viterbi_decode
from kerasbert.text import ner_readers, readers
from kerasbert.text.pipeline import Features, to_dataset
from kerasbert.text.tokenizer import Tokenizer

import helpers

settings.register_profile("kerasbert", max_examples=100, deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", max_examples=2000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kerasbert"))
EXAMPLES = settings.default.max_examples  # per-test budgets scale with the profile


def budget(fraction: float) -> settings:
    """Settings with ``fraction`` of the profile's examples, for the tests that cost more per example."""
    return settings(max_examples=max(10, int(EXAMPLES * fraction)))


# ---------------------------------------------------------------------------- tokenizer

CJK = "我爱北京天安门今天气很好们去公园吧中国人民银行发布了新的数据"
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
         + list("，。！？（）：；、“”《》…") + sorted(set(CJK)) + list("abcdefghijklmnopqrstuvwxyz0123456789")
         + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
         + "hello world token ##izer the quick brown fox un ##believ ##ably cafe naive bert Hello The é".split())
ALPHABET = CJK + "abcxyzABCXYZ0123 \t\n.,!，。" + "éÉ\u0301\u0308Σσς\u200b\u200d\x00\ufffd\U000e0001😀❤️🇨🇳ＡＢ１"
# every general category but surrogates (which no UTF-8 text can hold): controls, format, private use,
# unassigned, combining marks, CJK, emoji...
ANY_CHAR = st.characters(exclude_categories=("Cs",))
TEXTS = st.text(st.one_of(ANY_CHAR, st.sampled_from(ALPHABET)), max_size=60)


@pytest.fixture(scope="module")
def vocab_path(tmp_path_factory) -> str:
    return helpers.write_vocab(str(tmp_path_factory.mktemp("properties")), VOCAB)


@pytest.fixture(scope="module")
def tokenizers(vocab_path) -> dict[bool, Tokenizer]:
    return {lower: Tokenizer(vocab_path, do_lower_case=lower) for lower in (True, False)}


def _check_row(tokenizer: Tokenizer, ids: list[int], segments: list[int], maxlen: int | None,
               pair: bool = False) -> None:
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert len(segments) == len(ids)
    assert maxlen is None or len(ids) <= maxlen
    assert ids[-1] == tokenizer.token_to_id("[SEP]")
    # a pair cut to 2 keeps both [SEP]s, as bert4keras cuts it: its first sequence loses [CLS] last
    assert ids[0] == tokenizer.token_to_id("[CLS]" if not pair or maxlen is None or maxlen > 2 else "[SEP]")


def _ordered(positions: list[int]) -> bool:
    """Non-decreasing: one character may normalize to several (가 -> 3 jamo under NFD), all in one token."""
    return all(a <= b for a, b in itertools.pairwise(positions))


@given(text=TEXTS, second=st.none() | TEXTS, maxlen=st.none() | st.integers(2, 40), lower=st.booleans())
def test_tokenizer_on_any_unicode(tokenizers, text, second, maxlen, lower):
    """No exception; ids in the vocabulary; maxlen kept; [CLS] first, [SEP] last; batch equals one by one."""
    tokenizer = tokenizers[lower]
    ids, segments = tokenizer.encode(text, second, maxlen=maxlen)
    _check_row(tokenizer, ids, segments, maxlen, pair=second is not None)
    assert set(segments) <= ({0} if second is None else {0, 1})
    batch = tokenizer.encode_batch([text], None if second is None else [second], maxlen=maxlen)
    assert batch == ([ids], [segments])
    assert tokenizer.truncate(*tokenizer.encode(text, second), maxlen=maxlen or 10**6) == (
        tokenizer.encode(text, second, maxlen=maxlen or 10**6))


@given(text=TEXTS, lower=st.booleans())
def test_rematch_and_split_words_point_into_the_text(tokenizers, text, lower):
    """Every token maps to valid, increasing character indices of the text; words are ordered spans of it."""
    tokenizer = tokenizers[lower]
    tokens = tokenizer.tokenize(text)
    mapping = tokenizer.rematch(text, tokens)
    assert len(mapping) == len(tokens)
    flat = [i for positions in mapping for i in positions]
    assert all(0 <= i < len(text) for i in flat)
    assert _ordered(flat)
    assert all(positions for token, positions in zip(tokens, mapping, strict=True) if token not in ("[CLS]", "[SEP]"))
    words = tokenizer.split_words(text)
    assert all(0 <= start < end <= len(text) for start, end in words)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(words))


def _char_pools(everything: bool) -> dict[str, list[str]]:
    """Code points by general category: every one but surrogates (``everything``, unassigned and private-use
    ones sampled), or the common text of BERT's inputs (Latin, Greek, Cyrillic, CJK, Hangul, full-width
    forms, general punctuation, emoji, zero-width and control characters; combining marks only as
    ``ALPHABET`` has them)."""
    common = itertools.chain(range(0x250), range(0x370, 0x530), range(0x2000, 0x2070), range(0x3000, 0x3040),
                             range(0x4E00, 0x9FA6), range(0xAC00, 0xD7A4), range(0xFF00, 0xFFF0),
                             range(0x1F300, 0x1F650))
    codes = itertools.chain(range(0x30000), range(0xE0000, 0xE0080), range(0xF0000, 0xF0100)) if everything \
        else common
    pools: dict[str, list[str]] = {}
    for code in codes:
        category = unicodedata.category(chr(code))
        if category != "Cs" and (everything or category[0] != "M" and category not in ("Co", "Cn")):
            pools.setdefault(category, []).append(chr(code))
    return pools


def _oracle_cases(n: int, everything: bool, seed: int = 0) -> list[list]:
    """``n`` [first, second, maxlen] cases of seeded random text: characters of each category in turn, mixed
    with vocabulary characters so that words are found as well as missed."""
    rng, pools = random.Random(seed), _char_pools(everything)
    categories = sorted(pools)

    def text() -> str:
        chars = []
        for _ in range(rng.randint(0, 40)):
            pool = ALPHABET if rng.random() < 0.5 else pools[rng.choice(categories)]
            chars.append(rng.choice(pool))
        return "".join(chars)

    maxlens = [None, 2, 3, 5, 8, 16, 64]
    return [[text(), text() if i % 3 == 0 else None, maxlens[i % len(maxlens)]] for i in range(n)]


ORACLE_CASES = {"common": _oracle_cases(300, everything=False), "every-category": _oracle_cases(200, everything=True)}


@pytest.fixture(scope="module")
def oracle_results(vocab_path, tmp_path_factory) -> dict[tuple[str, bool], list[dict]]:
    """bert4keras's results on every oracle case, cased and uncased: one subprocess."""
    keys = [(name, lower) for name in ORACLE_CASES for lower in (True, False)]
    tasks = [{"kind": "tokenizer", "vocab": vocab_path, "do_lower_case": lower, "cases": ORACLE_CASES[name]}
             for name, lower in keys]
    out = helpers.run_oracle(tasks, str(tmp_path_factory.mktemp("properties_oracle")))
    return {key: json.loads(str(out[f"{i}/json"])) for i, key in enumerate(keys)}


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
@pytest.mark.parametrize("name", ["common", "every-category"])
def test_ids_equal_bert4keras_on_random_unicode(tokenizers, oracle_results, name, lower):
    tokenizer = tokenizers[lower]
    for (first, second, maxlen), expected in zip(ORACLE_CASES[name], oracle_results[name, lower], strict=True):
        where = ascii([first, second, maxlen])
        assert list(tokenizer.encode(first, second, maxlen=maxlen)) == [expected["ids"], expected["segments"]], where
        assert tokenizer.tokenize(first) == expected["tokens"], where
        assert tokenizer.rematch(first, expected["tokens"]) == expected["rematch"], where


@pytest.mark.parametrize(("text", "lower", "tokens"), [
    ("0\U000f0000\xb8", False, ["0\U000f0000\xb8"]),  # a private-use character stays in its word
    ("\U00011a01", True, []),  # a nonspacing mark assigned in Unicode 10: stripped when lower-casing
    ("a\U000e0001b", False, ["a", "##b"]),  # a format character (language tag) dropped
    ("x\u2028y", True, ["x", "y"]),  # a line separator breaks words, as str.split() does
])
def test_rare_characters_tokenize_as_pythons_tables_say(tokenizers, text, lower, tokens):
    tokenizer = tokenizers[lower]
    got = tokenizer.tokenize(text)
    assert got[1:-1] == tokens
    assert len(tokenizer.rematch(text, got)) == len(got)


# ---------------------------------------------------------------------------- readers

LINE_PIECES = st.sampled_from(["\t", ",", " ", "\n", "\r\n", '"', "{", "}", "[", "]", ":", "text", "label",
                               "B-PER", "I-PER", "E-LOC", "S-LOC", "M-X", "O", "-DOCSTART-", "\ufeff", "0", "1"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
ENTITY = st.one_of(JSON_VALUES, st.fixed_dictionaries({"start": JSON_VALUES, "end": JSON_VALUES,
                                                       "label": JSON_VALUES}),
                   st.tuples(st.integers(-1, 12), st.integers(-1, 12), st.sampled_from(["PER", "", "LOC"])))
JSON_ROW = st.one_of(JSON_VALUES, st.fixed_dictionaries(
    {"text": st.text(max_size=12) | JSON_VALUES}, optional={
        "label": JSON_VALUES, "text_b": JSON_VALUES, "entities": st.lists(ENTITY, max_size=3) | JSON_VALUES}))
FILE_BYTES = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.lists(st.one_of(LINE_PIECES, st.text(max_size=5)), max_size=40).map(lambda parts: "".join(parts).encode()),
    st.lists(JSON_ROW.map(lambda row: json.dumps(row, ensure_ascii=False)), min_size=1, max_size=5).map(
        lambda rows: "\n".join(rows).encode("utf-8", "surrogatepass")),
)
READERS = {
    "classification.tsv": lambda path: readers.read_classification(path),
    "classification.csv": lambda path: readers.read_classification(path),
    "classification.jsonl": lambda path: readers.read_classification(path),
    "pair.tsv": lambda path: readers.read_classification(path, text_b=1),
    "named.csv": lambda path: readers.read_classification(path, text="text", label="label"),
    "pair.jsonl": lambda path: readers.read_classification(path, text_b="text_b"),
    "texts.txt": readers.read_texts,
    "texts.jsonl": readers.read_texts,
    "labels.json": readers.LabelSet.load,
    "conll.txt": lambda path: ner_readers.read_conll(path),
    "conll-strict.txt": lambda path: ner_readers.read_conll(path, scheme="BIOES", strict=True),
    "spans.jsonl": lambda path: ner_readers.read_span_jsonl(path),
    "words.jsonl": lambda path: ner_readers.read_span_jsonl(path, scheme="BMES", tokens="word"),
}


@pytest.mark.parametrize("name", list(READERS))
def test_readers_on_any_bytes_return_examples_or_raise_data_error(tmp_path, name):
    path = str(tmp_path / name)

    @budget(0.5)
    @given(data=FILE_BYTES)
    def check(data):
        with open(path, "wb") as f:
            f.write(data)
        try:
            result = READERS[name](path)
        except DataError:
            return
        assert isinstance(result, list | readers.LabelSet)  # the read_* readers are list(iter_*): consumed

    check()


# ---------------------------------------------------------------------------- CRF


@st.composite
def crf_inputs(draw):
    """Emissions [B, S, K], transitions [K, K] and a right-padded mask with every length >= 1."""
    batch, seq, labels = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    values = st.floats(-8, 8, allow_nan=False, width=32)
    emissions = draw(hnp.arrays(np.float32, (batch, seq, labels), elements=values))
    trans = draw(hnp.arrays(np.float32, (labels, labels), elements=values))
    lengths = draw(st.lists(st.integers(1, seq), min_size=batch, max_size=batch))
    mask = np.arange(seq)[None] < np.array(lengths)[:, None]
    return emissions, trans, mask


def _path_scores(emissions: np.ndarray, trans: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Every label path of the first ``length`` steps ``[K^length, length]`` and its score (float64)."""
    labels = emissions.shape[-1]
    paths = np.array(list(itertools.product(range(labels), repeat=length)))
    e, t = emissions.astype(np.float64), trans.astype(np.float64)
    scores = e[np.arange(length), paths].sum(1) + t[paths[:, :-1], paths[:, 1:]].sum(1)
    return paths, scores


@budget(1.0)
@given(inputs=crf_inputs())
def test_viterbi_decode_is_the_best_path(inputs):
    emissions, trans, mask = inputs
    decoded = np.asarray(viterbi_decode(emissions, trans, mask))
    for row, length in enumerate(mask.sum(1)):
        assert (decoded[row, length:] == -1).all()
        paths, scores = _path_scores(emissions[row], trans, length)
        path = decoded[row, :length]
        assert ((path >= 0) & (path < trans.shape[0])).all()
        score = scores[np.flatnonzero((paths == path).all(1))[0]]
        assert score >= scores.max() - 1e-4 * (1 + abs(scores.max()))
        best = np.sort(scores)[::-1]
        if len(best) == 1 or best[0] - best[1] > 1e-3:  # one best path: it is that one
            assert (path == paths[scores.argmax()]).all()


@budget(1.0)
@given(inputs=crf_inputs())
def test_log_partition_is_logsumexp_of_path_scores(inputs):
    emissions, trans, mask = inputs
    log_z = np.asarray(log_partition(emissions, trans, mask))
    for row, length in enumerate(mask.sum(1)):
        _, scores = _path_scores(emissions[row], trans, length)
        top = scores.max()
        expected = top + np.log(np.exp(scores - top).sum())
        assert log_z[row] >= top - 1e-4
        assert abs(log_z[row] - expected) <= 1e-4 * (1 + abs(expected))


# ---------------------------------------------------------------------------- padding

RAGGED = st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=12), min_size=1, max_size=8)


@given(rows=RAGGED, length=st.none() | st.integers(0, 15), value=st.integers(-5, 5),
       mode=st.sampled_from(["post", "pre"]))
def test_sequence_padding_keeps_values_and_pads_the_rest(rows, length, value, mode):
    padded = sequence_padding(rows, length=length, value=value, mode=mode)
    width = max(map(len, rows)) if length is None else length
    assert padded.shape == (len(rows), width)
    for row, out in zip(rows, padded.tolist(), strict=True):
        kept = row[:width]
        gap = [value] * (width - len(kept))
        assert out == (kept + gap if mode == "post" else gap + kept)


@st.composite
def features(draw):
    """Unpadded token rows (ids >= 1) with segments, and classification or per-token labels (and weights)."""
    lengths = draw(st.lists(st.integers(1, 10), min_size=1, max_size=9))
    # the first id names the row (10^6 + its index), so a padded row is traced back to its example
    token_ids = [[10**6 + i] + draw(st.lists(st.integers(1, 30000), min_size=n - 1, max_size=n - 1))
                 for i, n in enumerate(lengths)]
    segment_ids = [draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)) for n in lengths]
    kind = draw(st.sampled_from(["none", "class", "ner", "ner-weights"]))
    labels = weights = None
    if kind == "class":
        labels = draw(st.lists(st.integers(0, 5), min_size=len(lengths), max_size=len(lengths)))
    elif kind.startswith("ner"):
        labels = [draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) for n in lengths]
        if kind == "ner-weights":
            weights = [draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)) for n in lengths]
    return Features(token_ids, segment_ids, labels, weights)


def _padded(rows: list[list], width: int) -> list[list]:
    return [list(row) + [0] * (width - len(row)) for row in rows]


@budget(0.3)
@given(features=features(), batch_size=st.integers(1, 4), seed=st.none() | st.integers(0, 3))
def test_to_dataset_pads_each_batch_to_its_longest_row(features, batch_size, seed):
    batches = list(to_dataset(features, batch_size, seed=seed, prefetch=False))
    assert len(batches) == -(-len(features) // batch_size)
    seen = []
    for batch in batches:
        parts = batch if isinstance(batch, tuple) else (batch,)
        tokens = parts[0]["Input-Token"].numpy().tolist()
        segments = parts[0]["Input-Segment"].numpy().tolist()
        index = [row[0] - 10**6 for row in tokens]
        seen += index
        width = max(len(features.token_ids[i]) for i in index)
        assert tokens == _padded([features.token_ids[i] for i in index], width)
        assert segments == _padded([features.segment_ids[i] for i in index], width)
        if features.labels is not None:
            labels = parts[1].numpy().tolist()
            if isinstance(features.labels[0], list):
                assert labels == _padded([features.labels[i] for i in index], width)
            else:
                assert labels == [features.labels[i] for i in index]
        if features.weights is not None:
            assert parts[2].numpy().tolist() == _padded([features.weights[i] for i in index], width)
    assert sorted(seen) == list(range(len(features)))
    if seed is None:
        assert seen == list(range(len(features)))
