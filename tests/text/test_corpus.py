"""Pre-training corpora: documents read from plain text and JSONL, packed into rows; every bad input's error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.errors import ConfigError, DataError
from kerasbert.text.corpus import Document, PackedRow, iter_documents, pack, split_sentences
from kerasbert.text.tokenizer import Tokenizer


def write(folder, name: str, content: str | bytes) -> str:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


def letters(text: str) -> tuple[list[int], list[int]]:
    """A stand-in encoder: each letter is a word piece (its code point), words are between spaces."""
    words = text.split()
    return [ord(ch) for word in words for ch in word], [i for i, word in enumerate(words) for _ in word]


def rows_of(documents, maxlen: int = 8) -> list[tuple[str, list[int]]]:
    """Each row as its letters and word ids, [CLS] (id 1) and [SEP] (id 2) checked and dropped."""
    result = []
    for row in pack(documents, letters, maxlen, cls_id=1, sep_id=2):
        assert row.token_ids[0] == 1 and row.token_ids[-1] == 2
        assert row.word_ids[0] == row.word_ids[-1] == -1
        result.append(("".join(map(chr, row.token_ids[1:-1])), row.word_ids[1:-1]))
    return result


# ---------------------------------------------------------------------------- reading


def test_plain_text_documents_are_split_on_blank_lines(tmp_path):
    content = "\ufeffFirst one.  \r\n  Second one.\r\n\r\n \t \n\nThird\n\n\n  \nFourth\nFifth \n"
    path = write(tmp_path, "a.txt", content)
    documents = list(iter_documents(path))
    assert documents == [Document(["First one.", "Second one."], f"{path}:1"),
                         Document(["Third"], f"{path}:6"), Document(["Fourth", "Fifth"], f"{path}:10")]


def test_a_file_ends_its_last_document(tmp_path):
    write(tmp_path, "a.txt", "one\ntwo")
    write(tmp_path, "b.txt", "three\n")
    assert [d.sentences for d in iter_documents(str(tmp_path / "*.txt"))] == [["one", "two"], ["three"]]


def test_jsonl_documents_are_split_into_sentences(tmp_path):
    lines = [{"body": "第一句。第二句！\r\n第三句？”他问"}, {"body": "   "}, {"body": "One. Two?\nThree"}]
    content = "\ufeff" + json.dumps(lines[0], ensure_ascii=False) + "\r\n\n" + json.dumps(lines[1]) + "\n" + (
        json.dumps(lines[2]) + "  \n")
    path = write(tmp_path, "wiki.jsonl", content)
    documents = list(iter_documents(path, text_field="body"))
    assert documents == [Document(["第一句。", "第二句！", "第三句？”", "他问"], f"{path}:1"),
                         Document(["One.", "Two?", "Three"], f"{path}:4")]


@pytest.mark.parametrize(("text", "sentences"), [
    ("没有句号", ["没有句号"]),
    ("好！！真的吗？？是的。", ["好！！", "真的吗？？", "是的。"]),
    ("“走吧。”他说", ["“走吧。”", "他说"]),
    ("Pi is 3.14 (about). See e.g. Euler", ["Pi is 3.14 (about).", "See e.g.", "Euler"]),
    ('He said "stop." Then left', ['He said "stop."', "Then left"]),
    ("a\u2028b\n\n  c  ", ["a", "b", "c"]),
])
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_a_glob_reads_its_files_sorted_and_a_list_in_its_order(tmp_path):
    for name in ("b.txt", "a.txt", "c.txt", "a.jsonl"):
        write(tmp_path, name, json.dumps({"text": name}) if name.endswith(".jsonl") else name + "\n")
    names = [d.sentences[0] for d in iter_documents(str(tmp_path / "*.txt"))]
    assert names == ["a.txt", "b.txt", "c.txt"]
    listed = [str(tmp_path / "c.txt"), str(tmp_path / "a.jsonl"), str(tmp_path / "[ab].txt")]
    assert [d.sentences[0] for d in iter_documents(listed)] == ["c.txt", "a.jsonl", "a.txt", "b.txt"]


def test_documents_are_read_lazily(tmp_path):
    write(tmp_path, "a.txt", "one\n\ntwo\n")
    write(tmp_path, "b.txt", b"\xb1\xb1 not UTF-8, replaced before it is read\n")
    documents = iter_documents(str(tmp_path / "*.txt"))
    assert next(documents).sentences == ["one"]
    with open(tmp_path / "a.txt", "a", encoding="utf-8") as handle:  # the open file is still being read
        handle.write("\nthree\n")
    write(tmp_path, "b.txt", "four\n")
    assert [d.sentences for d in documents] == [["two"], ["three"], ["four"]]


# ---------------------------------------------------------------------------- packing


def test_sentences_are_packed_greedily_within_a_document():
    documents = [Document(["ab c", "de", "fgh ij", "k"], "a.txt:1"), Document(["l", "mn"], "a.txt:6")]
    rows = list(pack(documents, letters, 8, cls_id=1, sep_id=2))
    assert rows[0] == PackedRow([1, *map(ord, "abcde"), 2], [-1, 0, 0, 1, 2, 2, -1], "a.txt:1")
    assert rows_of(documents) == [("abcde", [0, 0, 1, 2, 2]), ("fghijk", [0, 0, 0, 1, 1, 2]),
                                  ("lmn", [0, 1, 1])]  # the second document fits in row 2, yet starts its own
    assert [row.source for row in rows] == ["a.txt:1", "a.txt:1", "a.txt:6"]


def test_a_sentence_longer_than_a_row_is_cut_before_words_and_counted():
    # window 6: "abc" (the next word would cross), "defg hi", "jklmno" (a word of 8 cut), "pq r" joined by "s"
    documents = [Document(["xy", "abc defg hi jklmnopq r", "s"], "a.txt:1")]
    rows = pack(documents, letters, 8, cls_id=1, sep_id=2)
    assert [("".join(map(chr, r.token_ids[1:-1])), r.word_ids[1:-1]) for r in rows] == [
        ("xyabc", [0, 0, 1, 1, 1]), ("defghi", [0, 0, 0, 0, 1, 1]), ("jklmno", [0] * 6),
        ("pqrs", [0, 0, 1, 2])]
    assert (rows.cut, rows.sentences, rows.rows) == (1, 3, 4)


def test_a_word_exactly_a_row_long_is_never_cut():
    assert rows_of([Document(["a bcdefg h"], "a.txt:1")]) == [("a", [0]), ("bcdefg", [0] * 6), ("h", [0])]


def test_packing_is_lazy():
    def documents():
        yield Document(["ab"], "a.txt:1")
        raise AssertionError("the second document is read only when its rows are")

    assert next(pack(documents(), letters, 8, cls_id=1, sep_id=2)).token_ids == [1, 97, 98, 2]


@pytest.mark.parametrize("maxlen", [0, 3, 7])
def test_maxlen_below_eight_is_a_config_error(maxlen):
    with pytest.raises(ConfigError, match=rf"--maxlen: expected at least 8 .*found {maxlen}\b"):
        pack([], letters, maxlen, cls_id=1, sep_id=2)


def test_corpus_to_rows_with_the_tokenizer(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"我爱北京天安门。你好", "hello", "world", "##s", "."]
    tokenizer = Tokenizer({token: i for i, token in enumerate(tokens)})

    def encode(text):  # pieces and whole words as `kerasbert.text.masking.word_pieces` gives them
        words = [text[a:b] for a, b in tokenizer.split_words(text)]
        pieces = tokenizer.encode_words([words])[0]
        return [p for word in pieces for p in word], [i for i, word in enumerate(pieces) for _ in word]

    path = write(tmp_path, "zh.txt", "我爱北京天安门。\n你好。\n\nHello worlds.\n")
    rows = list(pack(iter_documents(path), encode, 10, cls_id=2, sep_id=3))
    assert [tokenizer.ids_to_tokens(row.token_ids) for row in rows] == [
        ["[CLS]", *"我爱北京天安门。", "[SEP]"], ["[CLS]", *"你好。", "[SEP]"],
        ["[CLS]", "hello", "world", "##s", ".", "[SEP]"]]
    assert rows[2].word_ids == [-1, 0, 1, 1, 2, -1]
    assert [row.source for row in rows] == [f"{path}:1", f"{path}:1", f"{path}:4"]


# sentences as lists of words, a word as its number of pieces; each piece gets its own id across the corpus
corpora = st.lists(st.lists(st.lists(st.integers(1, 9), max_size=6), min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=50, deadline=None)
@given(corpus=corpora, maxlen=st.integers(8, 14))
def test_rows_hold_every_piece_in_order_within_maxlen_and_one_document(corpus, maxlen):
    pieces = iter(range(10, 10_000))
    texts = [[json.dumps([[next(pieces) for _ in range(n)] for n in sentence]) for sentence in document]
             for document in corpus]

    def encode(text):
        words = json.loads(text)
        return [p for word in words for p in word], [i for i, word in enumerate(words) for _ in word]

    documents = [Document(sentences, f"d.txt:{i}") for i, sentences in enumerate(texts)]
    rows = pack(documents, encode, maxlen, cls_id=1, sep_id=2)
    row_of = {}
    for number, row in enumerate(rows):
        assert len(row.token_ids) <= maxlen and row.token_ids[0] == 1 and row.token_ids[-1] == 2
        words = row.word_ids[1:-1]
        assert row.word_ids[0] == row.word_ids[-1] == -1 and words[0] == 0
        assert all(b - a in (0, 1) for a, b in zip(words, words[1:], strict=False))
        row_of.update({piece: (number, row.source) for piece in row.token_ids[1:-1]})
    assert list(row_of) == list(range(10, next(pieces)))  # every piece once, in order
    window = maxlen - 2
    for i, document in enumerate(texts):
        for sentence in map(json.loads, document):
            sentence_rows = {row_of[p] for word in sentence for p in word}
            assert {source for _, source in sentence_rows} <= {f"d.txt:{i}"}
            assert len(sentence_rows) <= 1 or sum(map(len, sentence)) > window  # cut only when too long
            assert all(len({row_of[p] for p in word}) == 1 for word in sentence if len(word) <= window)
    assert rows.cut == sum(sum(map(len, json.loads(sentence))) > window for d in texts for sentence in d)


# ---------------------------------------------------------------------------- bad inputs


def _error(pattern, *words: str, error=DataError, text_field: str = "text") -> str:
    with pytest.raises(error) as raised:
        list(iter_documents(pattern, text_field))
    message = str(raised.value)
    assert all(word in message for word in words), message
    return message


def test_a_glob_that_matches_nothing(tmp_path):
    pattern = str(tmp_path / "corpus" / "*.txt")
    with pytest.raises(DataError, match=r"corpus/\*\.txt: expected a file or a glob matching files, found no match"):
        iter_documents(pattern)  # at once, before any document is asked for


def test_a_missing_file_and_a_folder(tmp_path):
    _error(str(tmp_path / "none.txt"), "none.txt", "an existing file", "nothing at that path")
    _error(str(tmp_path), str(tmp_path), "a folder", "*.txt")
    _error([], "corpus", "an empty list")


def test_a_corpus_of_blank_lines_is_empty(tmp_path):
    write(tmp_path, "a.txt", "\n  \n\t\n")
    write(tmp_path, "b.jsonl", '{"text": " \\n "}\n\n')
    pattern = str(tmp_path / "*")
    _error(pattern, pattern, "expected text to pre-train on", "found no text in its 2 files")


@pytest.mark.parametrize(("content", "line", "found", "encoding"), [
    (b"good line\n" + "中文语料\n".encode("gbk"), 2, "byte 0xd6 at byte offset 10", "GBK"),
    ("中文语料\n".encode("utf-16"), 1, "byte 0xff at byte offset 0", "UTF-16"),
    ("plain text\n".encode("utf-16-le"), 1, "byte 0x00 at byte offset 1", "UTF-16"),
    ("ok\ncafé au lait\n".encode("latin-1"), 2, "byte 0xe9 at byte offset 6", "LATIN1"),
])
def test_a_file_not_in_utf8_names_its_line_byte_and_likely_encoding(tmp_path, content, line, found, encoding):
    path = write(tmp_path, "zh.txt", content)
    _error(path, f"zh.txt:{line}: expected UTF-8 text", f"found {found} ({encoding}?)",
           f"iconv -f {encoding} -t UTF-8 {path} > zh.utf8.txt")


def test_a_jsonl_line_that_is_not_json(tmp_path):
    path = write(tmp_path, "c.jsonl", '{"text": "ok"}\n{"text": "cut\n')
    _error(path, "c.jsonl:2", "one JSON object", "invalid JSON")


@pytest.mark.parametrize(("line", "found"), [
    ('["a list"]', "a row of 1 values without names"),
    ('"a string"', "a JSON str"),
    ('{"body": "x"}', "keys ['body']"),
])
def test_a_jsonl_line_that_is_not_an_object_with_a_text(tmp_path, line, found):
    path = write(tmp_path, "c.jsonl", '{"text": "ok"}\n' + line + "\n")
    _error(path, "c.jsonl:2", "field 'text'", found)


@pytest.mark.parametrize(("value", "found"), [(7, "a number 7"), (None, "null"), (["a"], "a list ['a']")])
def test_a_jsonl_text_that_is_not_a_string(tmp_path, value, found):
    path = write(tmp_path, "c.jsonl", "\n" + json.dumps({"text": value}) + "\n")
    _error(path, "c.jsonl:2", "field 'text' to be a string", found)


def test_an_encoder_giving_fewer_word_ids_than_pieces():
    with pytest.raises(DataError, match=r"a\.txt:1: expected a word id for each word piece, found 2 pieces and 1"):
        list(pack([Document(["ab"], "a.txt:1")], lambda text: ([5, 6], [0]), 8, cls_id=1, sep_id=2))
