"""GraphTokenizer against kerasbert's Tokenizer: ids, segments and character offsets, in and out of a SavedModel.

The reference is ``Tokenizer.encode`` (bert4keras's ids) and ``Tokenizer.rematch`` (its offsets); each
piece's span, normalized, must also be the piece. rematch indexes ``text.lower()``, one character longer than
the text for each 'İ', so its positions are mapped back to the text's.
"""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.serving.graph_text import SCALARS, GraphTokenizer
from kerasbert.text.ner_readers import read_conll
from kerasbert.text.readers import read_classification
from kerasbert.text.tokenizer import WORD_MAXLEN, Tokenizer, normalize

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CHINESE = "我爱北京天安门今天气很好们去公园吧中国人民银行发布了新的数据"
RARE_CHINESE = "龘鬱齉"  # not in the vocabulary: [UNK]
WORDS = ["hello", "world", "tokenizers", "unbelievably", "fast", "café", "naïve", "Über", "señor", "ÉCOLE", "Ñandú",
         "résumé", "Ångström", "jalapeño", "the", "quick", "BROWN", "Fox", "bert", "NER", "İstanbul", "straße",
         "ǅemal", "ﬁnance", "ＡＢＣ", "ｅｘａｍｐｌｅ", "cafe\u0301", "nai\u0308ve", "ΟΔΟΣ", "Σοφία", "ΣΣ", "ὈΔΥΣΣΕΎΣ",
         "AΣ.", "한국어", "ひらがな", "カタカナ", "مرحبا", "नमस्ते", "ภาษาไทย", "x\u0898\u0899y"]
PUNCTUATION = string.punctuation + "，。！？、“”《》：；（）…—·‘’「」"
EMOJI = ["😀", "👍", "❤️", "🇨🇳", "👨‍👩‍👧", "🥰", "🫠", "\u2764"]
ODD = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\ufffd", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad",
       "\ue000", "\U000f0000", "\u0378", "\U0001fbff", "\u0301"]  # control, zero-width, private use, unassigned
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\xa0", "\u2003", " \t "]
LETTERS = string.ascii_lowercase + "0123456789éüñ"
VOCAB = list(dict.fromkeys(
    SPECIALS + list(CHINESE + PUNCTUATION + LETTERS + string.ascii_uppercase + "ÜÉσςοδφια")
    + ["##" + c for c in LETTERS]
    + "hello world token ##izer ##s un ##believ ##ably fast cafe café naive the quick brown ##ing über straße ##ss "
      "istanbul ab ##c ner bert Hello NER BERT".split()))
ENGLISH = list(dict.fromkeys(
    SPECIALS + list(string.punctuation + string.ascii_lowercase) + ["##" + c for c in string.ascii_lowercase]
    + "the quick brown fox jump ##s ##ed over lazy dog token ##izer ##ization un ##believ ##able ##ably fast cafe "
      "naive resume play ##ing ##er it is in ##side 1 2 3 ##2 ##3 12".split()))
ENGLISH_TEXTS = ["The quick brown fox jumps over the lazy dog.", "Tokenization is unbelievably FAST!",
                 "Café naïve résumé, PLAYING; it's inside 12 3 123.", "unbelievableness", "",
                 "a" * (WORD_MAXLEN + 1), "played playing player " * 30]


def _fragment(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.25:
        return "".join(rng.choice(CHINESE + RARE_CHINESE) for _ in range(rng.randint(1, 8)))
    if roll < 0.5:
        word, case = rng.choice(WORDS), rng.random()
        return word.upper() if case < 0.2 else word.capitalize() if case < 0.4 else word
    if roll < 0.58:
        return str(rng.randint(0, 10 ** rng.randint(1, 6))) + rng.choice(["", ".5", "%", "号"])
    for bound, pool in ((0.72, PUNCTUATION), (0.78, EMOJI), (0.86, ODD), (0.985, SPACES)):
        if roll < bound:
            return rng.choice(pool)
    return "".join(rng.choice("abcdefghéü") for _ in range(rng.randint(WORD_MAXLEN - 50, WORD_MAXLEN + 60)))


def generated(n: int, seed: int) -> list[str]:
    """``n`` seeded sentences mixing scripts, cases, accents, punctuation, emoji, control characters and spaces;
    one in five is long enough to be cut at any usual maxlen."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(n):
        count = rng.randint(0, 70) if rng.random() < 0.2 else rng.randint(0, 16)
        sentences.append("".join(_fragment(rng) + rng.choice(["", "", " "]) for _ in range(count)))
    return sentences


SENTENCES = generated(5000, seed=0)


def _ids(out: dict[str, tf.Tensor]) -> list[tuple[list[int], list[int]]]:
    """Unpadded ``(token_ids, segment_ids)`` of each row."""
    lengths = out["lengths"].numpy()
    return [(row[:n].tolist(), segments[:n].tolist()) for row, segments, n in
            zip(out["token_ids"].numpy(), out["segment_ids"].numpy(), lengths, strict=True)]


def _assert_ids(vocab: list[str], lower: bool, maxlen: int, firsts: list[str], seconds: list[str] | None = None):
    reference = Tokenizer({token: i for i, token in enumerate(vocab)}, do_lower_case=lower)
    graph = GraphTokenizer(vocab, lowercase=lower, maxlen=maxlen)
    out = graph.tokenize(tf.constant(firsts), None if seconds is None else tf.constant(seconds))
    expected = [reference.encode(first, None if seconds is None else seconds[i], maxlen=maxlen)
                for i, first in enumerate(firsts)]
    wrong = [i for i, (got, want) in enumerate(zip(_ids(out), expected, strict=True)) if got != want]
    assert not wrong, f"{len(wrong)} rows differ, the first: {firsts[wrong[0]]!r}"
    assert out["token_ids"].dtype == out["segment_ids"].dtype == tf.int32
    return reference, out


def _lowered_chars(text: str, lower: bool) -> list[str]:
    """Each character of ``text`` as Tokenizer lower-cases it (Python's lower() of the whole text, so the final
    sigma is by context), or the characters themselves."""
    lowered, out, at = text.lower() if lower else text, [], 0
    if len(lowered) == len(text):  # only 'İ' lower-cases to two characters
        return list(lowered)
    for ch in text:
        out.append(lowered[at:at + len(ch.lower())])
        at += len(ch.lower())
    return out


def _assert_offsets(reference: Tokenizer, lower: bool, texts: list[str], starts: np.ndarray, ends: np.ndarray,
                    first_piece: int = 1):
    """Each piece's span equals rematch's (in the text's positions) where rematch can place it; and each span,
    normalized, is the piece."""
    for i, text in enumerate(texts):
        tokens = reference.tokenize(text)
        lowered = _lowered_chars(text, lower)  # the final sigma by the whole text's context
        position = [k for k, ch in enumerate(lowered) for _ in ch]  # rematch's index -> the text's
        pieces = [(j, tokens[j - first_piece + 1]) for j in range(first_piece, len(starts[i]))
                  if starts[i][j] >= 0 and j - first_piece + 1 < len(tokens) - 1]
        for j, token in pieces:
            span = normalize("".join(lowered[starts[i][j]:ends[i][j]]), lower).replace(" ", "")
            assert span == token.removeprefix("##"), (text, j, token, span)
        spans = reference.rematch(text, tokens)
        for j, token in pieces:
            expected = spans[j - first_piece + 1]
            assert (starts[i][j], ends[i][j]) == (position[expected[0]], position[expected[-1]] + 1), (text, token)


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_generated_sentences(lower):
    reference, out = _assert_ids(VOCAB, lower, 32, SENTENCES)
    assert sum(n == 32 for n in out["lengths"].numpy()) > 500  # many rows are cut
    _assert_offsets(reference, lower, SENTENCES, out["starts"].numpy(), out["ends"].numpy())


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_generated_pairs(lower):
    firsts, seconds = SENTENCES[:2500], SENTENCES[2500:]
    reference, out = _assert_ids(VOCAB, lower, 48, firsts, seconds)
    starts, ends, segments = (out[name].numpy() for name in ("starts", "ends", "segment_ids"))
    for texts, segment in ((firsts, 0), (seconds, 1)):  # each segment's offsets are into its own text
        mask = (segments == segment) & (starts >= 0)
        rows = [(np.where(m, s, -1), np.where(m, e, -1)) for m, s, e in zip(mask, starts, ends, strict=True)]
        packed = [(s[s >= 0], e[e >= 0]) for s, e in rows]
        _assert_offsets(reference, lower, texts, [p[0] for p in packed], [p[1] for p in packed], first_piece=0)


@pytest.mark.parametrize("maxlen", [1, 2, 3, 4, 7])
def test_short_maxlen(maxlen):
    texts = SENTENCES[:300] + ["", "中", "中国"]
    _assert_ids(VOCAB, True, maxlen, texts)
    _assert_ids(VOCAB, False, maxlen, texts, texts[::-1])


def test_demo_data(tmp_path):
    paths = write_demo_data(str(tmp_path))
    splits = ("train", "dev", "test")
    texts = [example.text for split in splits for example in read_classification(paths[f"cls_{split}"])]
    texts += [example.text for split in splits for example in read_conll(paths[f"ner_{split}"])]
    vocab = open(paths["vocab"], encoding="utf-8").read().split()
    assert len(texts) > 1500
    for lower in (True, False):
        reference, out = _assert_ids(vocab, lower, 64, texts)
        _assert_offsets(reference, lower, texts, out["starts"].numpy(), out["ends"].numpy())
        _assert_ids(vocab, lower, 64, texts[:500], texts[-500:])


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_english_wordpiece(lower):
    rng = random.Random(1)
    words = [w for w in ENGLISH[len(SPECIALS):] if w.isalpha() and len(w) > 1] + ["jumped", "Naïve", "TOKENIZATION"]
    texts = ENGLISH_TEXTS + [" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) + rng.choice(".!?")
                             for _ in range(300)]
    reference, out = _assert_ids(ENGLISH, lower, 24, texts)
    _assert_offsets(reference, lower, texts, out["starts"].numpy(), out["ends"].numpy())
    unbelievably = _ids(out)[1][0]
    assert [ENGLISH[i] for i in unbelievably[1:-1]] == (
        ["token", "##ization", "is", "un", "##believ", "##ably", "fast", "!"] if lower else
        ["[UNK]", "is", "un", "##believ", "##ably", "[UNK]", "!"])


def test_offsets_convention():
    """Offsets are in code points of the input (not bytes, not the lower-cased text); -1 for [CLS], [SEP], padding."""
    graph = GraphTokenizer(VOCAB, lowercase=True, maxlen=16)
    out = graph.tokenize(tf.constant(["İstanbul 😀中Ü", "ab"]))
    assert out["starts"].numpy().tolist() == [[-1, 0, 9, 10, 11, -1], [-1, 0, -1, -1, -1, -1]]
    assert out["ends"].numpy().tolist() == [[-1, 8, 10, 11, 12, -1], [-1, 2, -1, -1, -1, -1]]
    assert out["lengths"].numpy().tolist() == [6, 3]


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_every_code_point(lower):
    """The tables reproduce `normalize` on each of the 1,112,064 Unicode scalar values, each between two ``x``
    (the reference's NFD would reorder adjacent combining marks: see the next test)."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = ["x".join(chars[i:i + 1000]) for i in range(0, len(chars), 1000)]
    vocab = ["x", "##x", *SPECIALS]
    graph = GraphTokenizer(vocab, lowercase=lower, maxlen=5000)
    values, source, codes = graph._normalized(tf.constant(texts))
    got = tf.RaggedTensor.from_value_rowids(values, tf.gather(codes.value_rowids(), source), len(texts)).to_list()
    assert got == [[ord(ch) for ch in normalize(text, lower)] for text in texts]
    _assert_ids(vocab, lower, 5000, texts)
    assert len(SCALARS) == len(chars)


def test_combining_marks_keep_their_order():
    """The one known difference: with lower-casing, the reference's NFD sorts adjacent combining characters that
    it does not strip (spacing marks with a combining class) by that class; the graph keeps them in input order.
    Ids only differ for a vocabulary holding such marks."""
    text = "x\U0001d16d\U0001d165"  # MUSICAL SYMBOL COMBINING AUGMENTATION DOT (226), COMBINING STEM (216)
    graph = GraphTokenizer(["x", "##x", *SPECIALS], lowercase=True, maxlen=8)
    values, _, _ = graph._normalized(tf.constant([text]))
    assert values.numpy().tolist() == [ord(ch) for ch in text]
    assert [ord(ch) for ch in normalize(text, lowercase=True)] == [ord("x"), 0x1D165, 0x1D16D]
    _assert_ids(["x", "##x", *SPECIALS], True, 8, [text])


def test_final_sigma_by_context():
    """A capital sigma lower-cases by Python's Final_Sigma rule (Tokenizer lower-cases the whole text in Python):
    every context of two characters each side, from cased, case-ignorable and other characters."""
    around = ["", "A", "1", " ", ".", "'", ":", "\u00ad", "\u02b0", "\u0301", "\u03a3"]
    texts = [f"x{a}{b}\u03a3{c}{d}y" for a in around for b in around for c in around for d in around[::3]]
    vocab = [*SPECIALS, "\u03c3", "\u03c2", "a", "1"]
    graph = GraphTokenizer(vocab, lowercase=True, maxlen=32)
    values, source, codes = graph._normalized(tf.constant(texts))
    got = tf.RaggedTensor.from_value_rowids(values, tf.gather(codes.value_rowids(), source), len(texts)).to_list()
    assert got == [[ord(ch) for ch in normalize(text, lowercase=True)] for text in texts]
    assert sum("\u03c2" in normalize(text, lowercase=True) for text in texts) > 1000  # both forms occur
    _assert_ids(vocab, True, 32, texts)


def test_vocabulary_shapes():
    """An empty suffix ("##"), "#" pieces and bracketed tokens, which the text can only spell out."""
    vocab = [*SPECIALS, "a", "##", "#", "###", "##a", "##中", "中", "[unused1]", "ab", "##b", "b", "##bb", "abc"]
    texts = ["a#", "##a", "ab", "a##b", "###", "中中", "abbb", "abcb", "[unused1]", "[UNK]", "a[SEP]"]
    for lower in (True, False):
        _assert_ids(vocab, lower, 20, texts)


def test_empty_batch_empty_texts_and_invalid_utf8():
    graph = GraphTokenizer(VOCAB, lowercase=True, maxlen=8)
    empty = graph.tokenize(tf.constant([], tf.string))
    assert empty["token_ids"].shape == (0, 0) and empty["lengths"].shape == (0,)
    out = graph.tokenize(tf.constant(["", " \t", "\x00"]), tf.constant(["", "", ""]))
    assert out["token_ids"].numpy().tolist() == [[2, 3, 3]] * 3
    out = graph.tokenize(tf.constant(["ab\xffcd".encode("latin-1")]))  # a bad byte reads as U+FFFD, dropped
    reference = Tokenizer({token: i for i, token in enumerate(VOCAB)}, do_lower_case=True)
    assert _ids(out) == [reference.encode("ab\ufffdcd", maxlen=8)]
    assert out["starts"].numpy().tolist() == [[-1, 0, 3, 4, -1]]  # "ab", "##c", "##d": the bad byte is a character


def test_tf_function_and_saved_model_without_kerasbert(tmp_path):
    texts, seconds = SENTENCES[:200], SENTENCES[200:400]
    module = tf.Module()
    module.tokenizer = GraphTokenizer(VOCAB, lowercase=True, maxlen=40)
    spec = tf.TensorSpec([None], tf.string)
    module.single = tf.function(lambda text: module.tokenizer.tokenize(text), input_signature=[spec])
    module.pair = tf.function(lambda text, text_b: module.tokenizer.tokenize(text, text_b),
                              input_signature=[spec, spec])
    eager = module.tokenizer.tokenize(tf.constant(texts))
    traced = module.single(tf.constant(texts))
    for name in eager:
        np.testing.assert_array_equal(eager[name].numpy(), traced[name].numpy())
    tf.saved_model.save(module, str(tmp_path / "model"))
    (tmp_path / "texts.json").write_text(json.dumps([texts, seconds]), encoding="utf-8")
    script = """if True:
        import json, sys
        sys.modules["kerasbert"] = None  # kerasbert cannot be imported here
        try:
            import kerasbert
        except ImportError:
            pass
        else:
            raise SystemExit("kerasbert imported")
        import tensorflow as tf
        import tensorflow_text  # registers the word-piece op
        texts, seconds = json.load(open("texts.json", encoding="utf-8"))
        model = tf.saved_model.load("model")
        out = {"single": model.single(tf.constant(texts)), "pair": model.pair(tf.constant(texts), tf.constant(seconds))}
        out = {key: {name: value.numpy().tolist() for name, value in result.items()} for key, result in out.items()}
        json.dump(out, open("out.json", "w"))
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    run = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = json.loads((tmp_path / "out.json").read_text())
    for name, value in traced.items():
        assert loaded["single"][name] == value.numpy().tolist(), name
    pair = module.tokenizer.tokenize(tf.constant(texts), tf.constant(seconds))
    for name, value in pair.items():
        assert loaded["pair"][name] == value.numpy().tolist(), name
    reference = Tokenizer({token: i for i, token in enumerate(VOCAB)}, do_lower_case=True)
    assert _ids({name: tf.constant(value) for name, value in loaded["pair"].items()}) == [
        tuple(reference.encode(a, b, maxlen=40)) for a, b in zip(texts, seconds, strict=True)]


def test_bad_arguments():
    with pytest.raises(Exception, match="maxlen"):
        GraphTokenizer(VOCAB, lowercase=True, maxlen=0)
    with pytest.raises(Exception, match=r"\[CLS\]"):
        GraphTokenizer(["[PAD]", "[UNK]", "a"], lowercase=True, maxlen=8)
    with pytest.raises(Exception, match="gaps"):
        GraphTokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 4}, lowercase=True, maxlen=8)
