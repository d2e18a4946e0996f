"""A long text word-pieced part by part (`kerasbert.text.cuts`): the same ids as the whole text, read only as far as
``maxlen`` needs, in bounded memory."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kerasbert.text import cuts
from kerasbert.text.tokenizer import Tokenizer, normalize, normalize_character

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "##s", "cafe", "ο", "##δ", "##ο", "##ς", "##σ", "σ",
         "中", "国", "e", ",", ".", "'", "##e", "a", "##a", "ab", "##b"]
# texts whose parts are cut next to what could join across a cut: CJK, words, accents (composed and combining),
# whitespace runs, control and zero-width characters, a capital sigma (final or not by its neighbours), dotted İ
SAMPLES = ["中国中国 hello worlds中国", "helloworld hellos worlds hello", "café cafe\u0301 CAFÉ e\u0301\u0300a",
           "a \t\n\r  \u3000 b\u00a0ab  \u2028 hello", "hel\x00lo\u200b wor\x07ld \ufffd中\u00ad国",
           "ΟΔΟΣ ΟΔΟΣ. ΟΔΟΣ'Α ΣΑ Σ.Σ σς", "İİ ab\u0130 hello", "...,,,'''", "abababababababababab" * 3, ""]
ALPHABET = [*"ab .,'\t\n中国ΣΟΔ\u0301\u0300é\u0130\u00ad\u200b\x00 \u3000", "hello", "worlds", "ΟΔΟΣ"]


def _tokenizer(lowercase: bool) -> Tokenizer:
    return Tokenizer({token: i for i, token in enumerate(VOCAB)}, do_lower_case=lowercase)


def _whole_and_parted(monkeypatch, tokenizer: Tokenizer, call, size: int):
    """``call(tokenizer)`` with every text one part, then with parts of ``size`` characters."""
    monkeypatch.setattr(cuts, "PART_CHARS", 10**9)
    whole = call(tokenizer)
    monkeypatch.setattr(cuts, "PART_CHARS", size)
    return whole, call(tokenizer)


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_parts_give_the_ids_and_tokens_of_the_whole_text(monkeypatch, lowercase, size):
    tokenizer = _tokenizer(lowercase)
    rng = random.Random(size)
    texts = SAMPLES + ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    for text in texts:
        call = lambda t, text=text: (t.encode(text), t.tokenize(text))  # noqa: E731
        whole, parted = _whole_and_parted(monkeypatch, tokenizer, call, size)
        assert parted == whole, repr(text)
    whole, parted = _whole_and_parted(monkeypatch, tokenizer, lambda t: t.encode_batch(texts, texts[::-1]), size)
    assert parted == whole


@pytest.mark.parametrize("maxlen", [2, 3, 5, 9])
def test_a_long_text_is_read_as_far_as_maxlen_needs_and_cut_as_the_whole(monkeypatch, maxlen):
    tokenizer = _tokenizer(True)
    text = " ".join(SAMPLES) * 3
    for call in (lambda t: t.encode(text, maxlen=maxlen), lambda t: t.tokenize(text, maxlen=maxlen),
                 lambda t: t.encode(text, "hello " * 40, maxlen=maxlen),
                 lambda t: t.encode_batch([text, "hello"], [text[::-1], text], maxlen=maxlen)):
        whole, parted = _whole_and_parted(monkeypatch, tokenizer, call, 4)
        assert parted == whole
    monkeypatch.setattr(cuts, "PART_CHARS", 4)
    read = []
    monkeypatch.setattr(tokenizer, "_normalized", lambda part: read.append(part) or normalize(part, True))
    tokenizer.encode("中" * 100, maxlen=maxlen)
    assert read == ["中" * 4] * -(-(maxlen + 2) // 4)  # parts of 4 characters until more than maxlen + 1 pieces


def test_parts_join_into_the_text_and_are_cut_where_allowed():
    text = "ab cd,ef.gh中ij"
    assert list(cuts.parts(text, normalize_character, True, size=2)) == ["ab", " cd", ",ef", ".gh", "中ij"]
    sigma = "Σb cd,ef.gh中ij"  # a capital sigma: no cut before the case-ignorable "."
    assert list(cuts.parts(sigma, normalize_character, True, size=2)) == ["Σb", " cd", ",ef.gh", "中ij"]
    assert list(cuts.parts(sigma, normalize_character, False, size=2)) == ["Σb", " cd", ",ef", ".gh", "中ij"]
    assert list(cuts.parts("abc", normalize_character, True, size=1)) == ["abc"]  # no place to cut: one part
    assert list(cuts.parts("", normalize_character, True)) == [""]


def test_cut_before_follows_the_three_rules():
    def allowed(ch: str, lowercase: bool = True, sigma: bool = True) -> bool:
        return cuts.cut_before(ch, normalize_character, lowercase, sigma)

    assert [allowed(ch) for ch in (" ", "\t", "\u3000", "中", ",", "!")] == [True] * 6  # start a word
    assert [allowed(ch) for ch in ("a", "\u0301", "\x00", "\u200b")] == [False] * 4  # letters, marks, dropped
    # "." and "'" are case-ignorable: a sigma before them is final or not by the letter after them
    assert [allowed("."), allowed("'"), allowed(".", sigma=False), allowed(".", lowercase=False)] == [
        False, False, True, True]


def test_a_ten_megabyte_line_is_embedded_in_bounded_memory(tmp_path):
    # the address space the process may use: far below the 5 GB word-piecing such a line whole takes
    limit = 1536 << 20
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
        from kerasbert.text.tokenizer import Tokenizer
        tokenizer = Tokenizer({dict(zip(VOCAB, range(len(VOCAB)), strict=True))!r})
        text = ("hellos 中 worlds " * 700_000)[:10_000_000]
        ids, _ = tokenizer.encode_batch([text], maxlen=512)
        print(len(ids[0]), len(tokenizer.tokenize(text, maxlen=512)), len(tokenizer.encode(text, maxlen=512)[0]))
    """)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "MALLOC_ARENA_MAX": "2"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["512", "512", "512"]


def test_a_long_text_read_whole_in_parts_of_the_default_size_has_the_whole_texts_ids(monkeypatch):
    tokenizer = _tokenizer(True)  # read whole: windows (--stride) and pre-training rows use all of a text
    text = ("hellos 中国 ΟΔΟΣ cafe\u0301. " * 10_000)[:200_000]
    whole, parted = _whole_and_parted(monkeypatch, tokenizer, lambda t: t.encode(text)[0], cuts.PART_CHARS)
    assert len(parted) > 50_000 and np.array_equal(parted, whole)
