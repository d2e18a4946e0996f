"""Readers: classification TSV/CSV/JSONL, label sets, CoNLL and span JSONL; every bad-input error."""

from __future__ import annotations

import json
import logging
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.errors import DataError
from kerasbert.text import readers
from kerasbert.text.ner_readers import read_conll, read_span_jsonl, span_example, write_conll, write_span_jsonl
from kerasbert.text.readers import ClassificationExample, LabelSet, read_classification
from kerasbert.text.schemes import spans_to_tags, tags_to_spans

CONLL_ZH = "张 B-PER\n三 I-PER\n在 O\n北 B-LOC\n京 I-LOC\n\n我 O\n爱 O\n上 B-LOC\n海 I-LOC\n"
CONLL_EN = ("-DOCSTART- -X- O O\n\nJohn NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nNew NNP B-NP B-LOC\n"
            "York NNP I-NP I-LOC\n")


def write(tmp_path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


# ---------------------------------------------------------------------------- classification


def test_tsv_by_index(tmp_path):
    path = write(tmp_path, "train.tsv", 'good "film"\tpos\n\nbad film\tneg\n')
    expected = [ClassificationExample('good "film"', "pos"), ClassificationExample("bad film", "neg")]
    assert read_classification(path) == expected
    assert [e.line for e in read_classification(path)] == [1, 3]


def test_csv_by_name_with_pairs(tmp_path):
    path = write(tmp_path, "dev.csv", 'id,q1,q2,same\n1,"how, why",what,1\n2,a,b,0\n')
    examples = read_classification(path, text="q1", text_b="q2", label="same")
    assert examples[0] == ClassificationExample("how, why", "1", "what")
    assert examples[1].line == 3


def test_jsonl_default_and_custom_keys(tmp_path):
    rows = '{"text": "好", "label": 1}\n{"sentence": "x", "text": "坏", "label": 0}\n'
    path = write(tmp_path, "train.jsonl", rows)
    assert [(e.text, e.label) for e in read_classification(path)] == [("好", "1"), ("坏", "0")]
    path = write(tmp_path, "pairs.jsonl", '{"a": "x", "b": "y", "y": 1}\n')
    assert read_classification(path, text="a", text_b="b", label="y") == [ClassificationExample("x", "1", "y")]


@pytest.mark.parametrize("inside", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c"])
def test_only_newlines_end_a_row(tmp_path, inside):
    """Breaks that str.splitlines knows but a data file's rows do not (raw U+2028 in a JSON string, a form feed in
    a text) stay inside the row, in JSONL and TSV alike; line numbers count newlines."""
    text = f"line{inside}separator"
    rows = json.dumps({"text": text, "label": "a"}, ensure_ascii=False) + "\r\n" + '{"text": "b", "label": "b"}\n'
    examples = read_classification(write(tmp_path, "train.jsonl", rows))
    assert [(e.text, e.line) for e in examples] == [(text, 1), ("b", 2)]
    examples = read_classification(write(tmp_path, "train.tsv", f"{text}\ta\nb\tb\n"))
    assert [(e.text, e.label, e.line) for e in examples] == [(text, "a", 1), ("b", "b", 2)]


def test_label_set_build_save_load(tmp_path):
    train = [ClassificationExample("a", "pos"), ClassificationExample("b", "neg"), ClassificationExample("c", "pos")]
    labels = LabelSet.from_examples(train)
    assert labels.labels == ["neg", "pos"] and len(labels) == 2 and "pos" in labels and labels.index("pos") == 1
    path = str(tmp_path / "labels.json")
    labels.save(path)
    assert json.load(open(path, encoding="utf-8")) == {"labels": ["neg", "pos"]}
    assert LabelSet.load(path) == labels
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tmp")] == []


def test_unseen_labels_at_evaluation_are_named(tmp_path):
    labels = LabelSet(["neg", "pos"])
    path = write(tmp_path, "test.tsv", "a\tpos\nb\tneutral\nc\tmixed\nd\tneutral\n")
    with pytest.raises(DataError, match=rf"^{path}:2: expected labels seen in training, \['neg', 'pos'\], found "
                       r"unseen labels 'neutral' \(line 2\), 'mixed' \(line 3\)"):
        read_classification(path, labels=labels)
    with pytest.raises(DataError, match=r"label: expected one of \['neg', 'pos'\], found 'x'"):
        labels.index("x")


def test_bad_label_file(tmp_path):
    with pytest.raises(DataError, match=r'expected JSON \{"labels": \[...\]\}'):
        LabelSet.load(write(tmp_path, "labels.json", "[1, 2]"))
    with pytest.raises(DataError, match="expected a list of distinct labels"):
        LabelSet.load(write(tmp_path, "labels.json", '{"labels": ["a", "a"]}'))


# ---------------------------------------------------------------------------- bad files


@pytest.mark.parametrize("reader", [read_classification, read_conll, read_span_jsonl, LabelSet.load])
def test_missing_file(tmp_path, reader):
    path = str(tmp_path / "nope.tsv")
    with pytest.raises(DataError, match=f"^{path}: expected an existing file, found nothing at that path$"):
        reader(path)


@pytest.mark.parametrize("reader", [read_classification, read_conll, read_span_jsonl])
def test_empty_file(tmp_path, reader):
    path = write(tmp_path, "empty.tsv", "\n  \n")
    with pytest.raises(DataError, match=f"^{path}: expected at least one example, found an empty file$"):
        reader(path)


def test_not_utf8_gives_line_and_byte_offset(tmp_path):
    path = write(tmp_path, "gbk.tsv", b"ok\tpos\n" + "好\tneg\n".encode("gbk"))
    with pytest.raises(DataError, match=f"^{path}:2: expected UTF-8 text, found byte 0xba at byte offset 7 that is "
                       "not UTF-8. convert the file"):
        read_classification(path)


def test_utf8_bom_is_dropped(tmp_path):
    path = write(tmp_path, "bom.csv", b"\xef\xbb\xbftext,label\nx,y\n")
    assert read_classification(path, text="text", label="label") == [ClassificationExample("x", "y")]


def test_missing_field(tmp_path):
    path = write(tmp_path, "train.tsv", "a\tpos\nb\n")
    with pytest.raises(DataError, match=rf"^{path}:2: expected 2 columns \(the label in column 1, counting from 0\), "
                       r"found 1 column \('b'\). check the text"):
        read_classification(path)
    path = write(tmp_path, "pairs.tsv", "a\tb\tpos\nc\td\n")
    with pytest.raises(DataError, match=rf"^{path}:2: expected 3 columns \(the label in column 2, counting from 0\), "
                       r"found 2 columns\. check"):
        read_classification(path, text_b=1)
    path = write(tmp_path, "commas.tsv", "很好,pos\n很差,neg\n")
    with pytest.raises(DataError, match=r"found 1 column \('很好,pos'\)\. the line has commas but no tab: name a "
                       r"comma-separated file \.csv$"):
        read_classification(path)
    path = write(tmp_path, "tabs.csv", "很好\tpos\n")
    with pytest.raises(DataError, match=r"the line has tabs but is read as CSV: name a tab-separated file \.tsv$"):
        read_classification(path)
    path = write(tmp_path, "train.jsonl", '{"text": "a", "label": "x"}\n\n{"text": "b"}\n')
    with pytest.raises(DataError, match=rf"^{path}:3: expected field 'label', found keys \['text'\]"):
        read_classification(path)
    path = write(tmp_path, "train.csv", "sentence,label\na,b\n")
    with pytest.raises(DataError, match=rf"^{path}:1: expected a column 'text' in the header, found columns"):
        read_classification(path, text="text", label="label")


def test_header_read_by_position_is_skipped_and_logged(tmp_path, caplog):
    path = write(tmp_path, "train.csv", "text,label\n很好,pos\n很差,neg\n还行,pos\n")
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        examples = read_classification(path)
        assert read_classification(path) == examples   # read again (training reads twice): logged once
    assert [(e.text, e.label, e.line) for e in examples] == [("很好", "pos", 2), ("很差", "neg", 3), ("还行", "pos", 4)]
    assert caplog.messages == [f"{path}:1: 'text', 'label' read as a header, not as an example: its label 'label' is "
                               "no other line's label and it names columns; name the fields to say so (--text-field "
                               "text --label-field label)"]
    path = write(tmp_path, "pairs.tsv", "问题\tQuestion 2\t标签\na\tb\t1\nc\td\t0\n")
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        pairs = read_classification(path, text_b=1)
    assert pairs == [ClassificationExample("a", "1", "b"), ClassificationExample("c", "0", "d")]
    assert caplog.messages[-1].endswith("(--text-field 问题 --text-b-field 'Question 2' --label-field 标签)")
    path = write(tmp_path, "header.tsv", "sentence\tlabel\n")
    with pytest.raises(DataError, match=f"^{path}: expected at least one example, found only a header"):
        read_classification(path)


def test_first_row_that_is_an_example_is_kept(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        path = write(tmp_path, "a.tsv", "text\tpos\nlabel\tneg\nx\tpos\n")   # its label occurs again
        assert [e.text for e in read_classification(path)] == ["text", "label", "x"]
        path = write(tmp_path, "b.tsv", "这部电影讲了什么？\t中性\n很好\tpos\n")   # not name-like: a sentence
        assert [e.label for e in read_classification(path)] == ["中性", "pos"]
        path = write(tmp_path, "c.csv", "text,label\n很好,pos\n")   # told: no header
        assert [e.label for e in read_classification(path, header=False)] == ["label", "pos"]
        assert caplog.messages == []
        path = write(tmp_path, "d.tsv", "好看\t中性\n很好\tpos\n很差\tpos\n")   # name-like, a label seen once
        assert [e.label for e in read_classification(path)] == ["中性", "pos", "pos"]
    assert caplog.messages == [f"{path}:1: '好看', '中性' read as an example, though its label '中性' is no other "
                               "line's label; if this line names the columns, name the fields (--text-field 好看 "
                               "--label-field 中性)"]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["text", "很好", "Question 2", "a,b", "label"]),
                               st.sampled_from(["label", "pos", "标签", "y", "neg"])), min_size=1, max_size=6),
       order=st.randoms(use_true_random=False))
def test_no_example_is_dropped_when_each_label_occurs_twice(rows, order):
    rows = rows * 2
    order.shuffle(rows)
    folder = tempfile.mkdtemp()
    for name, line in (("train.tsv", "{}\t{}\n"), ("train.csv", '"{}",{}\n')):
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line.format(text, label) for text, label in rows))
        assert [(e.text, e.label) for e in read_classification(path)] == rows


def test_header_by_name_or_told(tmp_path):
    path = write(tmp_path, "train.tsv", "review\tpolarity\n好\t1\n坏\t0\n")
    assert [e.label for e in read_classification(path, text="review", label="polarity")] == ["1", "0"]
    assert [e.label for e in read_classification(path, header=True)] == ["1", "0"]


@pytest.mark.parametrize("row, found", [
    ('{"text": "好", "label": ["pos"]}', r"expected field 'label' to be one label \(a string or a number\), found a "
                                        r"list \['pos'\]\. one label a line"),
    ('{"text": "好", "label": {"name": "pos"}}',
     r"expected field 'label' to be one label .*, found an object \{'name': 'pos'\}"),
    ('{"text": "好", "label": null}', r"expected field 'label' to be one label .*, found null\. write the label"),
    ('{"text": "好", "label": ""}', r"expected a label in field 'label', found an empty label\. give the example"),
    ('{"text": null, "label": "pos"}', r"expected field 'text' to be a string, found null\. write the text as a "
                                       r"JSON string$"),
    ('{"text": 7, "label": "pos"}', r"expected field 'text' to be a string, found a number 7"),
    ('["好", "pos"]', r"expected field 'text', found a row of 2 values without names"),
])
def test_jsonl_field_of_the_wrong_type(tmp_path, row, found):
    path = write(tmp_path, "train.jsonl", '{"text": "很好", "label": "pos"}\n' + row + "\n")
    with pytest.raises(DataError, match=f"^{path}:2: {found}"):
        read_classification(path)


def test_jsonl_numbers_and_bools_are_labels(tmp_path):
    path = write(tmp_path, "train.jsonl", '{"text": "好", "label": 1}\n{"text": "坏", "label": 0}\n')
    assert [e.label for e in read_classification(path)] == ["1", "0"]
    path = write(tmp_path, "flags.jsonl", '{"text": "好", "label": true}\n{"text": "坏", "label": false}\n')
    assert [e.label for e in read_classification(path)] == ["True", "False"]


@pytest.mark.parametrize("content, line", [("很好\tpos\n很差\t\n", 2), ("很好\t \n很差\tneg\n", 1),
                                           ("很好,pos\n很差,\n", 2)])
def test_empty_label_is_an_error(tmp_path, content, line):
    path = write(tmp_path, "train.csv" if "," in content else "train.tsv", content)
    with pytest.raises(DataError, match=f"^{path}:{line}: expected a label in column 1, found an empty label"):
        read_classification(path)


def test_bad_json_line_and_header_only(tmp_path):
    path = write(tmp_path, "train.jsonl", '{"text": "a", "label": "x"}\n{"text": \n')
    with pytest.raises(DataError, match=f"^{path}:2: expected one JSON object, found invalid JSON"):
        read_classification(path)
    path = write(tmp_path, "train.csv", "text,label\n")
    with pytest.raises(DataError, match="expected at least one example, found only a header"):
        read_classification(path, text="text", label="label")
    with pytest.raises(DataError, match=r"expected a .tsv, .csv or .jsonl file, found extension '.xml'"):
        read_classification(write(tmp_path, "train.xml", "a"))


# ---------------------------------------------------------------------------- NER


def test_conll_chinese_chars(tmp_path):
    examples = read_conll(write(tmp_path, "train.txt", CONLL_ZH))
    assert [e.text for e in examples] == ["张三在北京", "我爱上海"]
    assert examples[0].spans == [(0, 2, "PER"), (3, 5, "LOC")]
    assert examples[0].entities() == [("张三", "PER"), ("北京", "LOC")]
    assert examples[1].tags == ["O", "O", "B-LOC", "I-LOC"] and examples[1].line == 7


def test_conll_words_tabs_and_four_columns(tmp_path):
    example = read_conll(write(tmp_path, "en.txt", CONLL_EN.replace(" ", "\t")), scheme="BMES")[0]
    assert example.text == "John lives in New York"
    assert example.tokens == ["John", "lives", "in", "New", "York"]
    assert example.tags == ["S-PER", "O", "O", "B-LOC", "E-LOC"]
    assert example.entities() == [("John", "PER"), ("New York", "LOC")]
    assert example.offsets[3] == (14, 17)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "BMES"])
def test_conll_round_trip(tmp_path, scheme):
    """CoNLL -> examples -> character spans -> tags gives back the gold, through every scheme and format."""
    gold = read_conll(write(tmp_path, "gold.txt", CONLL_ZH))
    converted = str(tmp_path / f"{scheme}.txt")
    write_conll(converted, read_conll(write(tmp_path, "in.txt", CONLL_ZH), scheme=scheme), delimiter="\t")
    back = read_conll(converted, scheme="BIO")
    assert back == gold
    for example in back:
        assert spans_to_tags(example.token_spans(), len(example.tokens), "BIO") == example.tags
        assert tags_to_spans(example.tags) == example.token_spans()
    jsonl = str(tmp_path / "spans.jsonl")
    write_span_jsonl(jsonl, back)
    assert read_span_jsonl(jsonl) == gold
    assert open(str(tmp_path / "gold.txt"), encoding="utf-8").read() == CONLL_ZH
    write_conll(str(tmp_path / "again.txt"), read_span_jsonl(jsonl))
    assert open(str(tmp_path / "again.txt"), encoding="utf-8").read() == CONLL_ZH


def test_span_jsonl_words_and_chars(tmp_path):
    rows = [{"text": "Bob  met Ann", "entities": [{"start": 9, "end": 12, "label": "PER"}, {"start": 0, "end": 3,
                                                                                          "label": "PER"}]},
            {"text": "没有实体"}]
    path = write(tmp_path, "ner.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    words = read_span_jsonl(path, scheme="BIOES", tokens="word")
    assert words[0].tokens == ["Bob", "met", "Ann"] and words[0].tags == ["S-PER", "O", "S-PER"]
    assert words[0].spans == [(0, 3, "PER"), (9, 12, "PER")] and words[1].spans == []
    chars = read_span_jsonl(path)
    assert chars[0].tokens[:3] == ["B", "o", "b"] and chars[0].tags[:4] == ["B-PER", "I-PER", "I-PER", "O"]
    assert len(chars[1].tokens) == 4


def test_conll_line_with_no_tag(tmp_path):
    path = write(tmp_path, "train.txt", "张 B-PER\n三\n")
    with pytest.raises(DataError, match=f"^{path}:2: expected a token and its tag, separated by a space or tab, "
                       "found '三' with no tag$"):
        read_conll(path)


def test_conll_orphan_tag_strict_and_repaired(tmp_path, caplog):
    path = write(tmp_path, "train.txt", "我 O\n爱 O\n\n北 I-LOC\n京 I-LOC\n")
    with pytest.raises(DataError, match=f"^{path}:4: expected B-LOC or S-LOC before I-LOC, found I-LOC with no "
                       "entity before it. fix the tag, or read with strict=False"):
        read_conll(path, strict=True)
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        examples = read_conll(path)
    assert f"{path}:4: I-LOC with no entity before it" in caplog.text
    assert examples[1].tags == ["B-LOC", "I-LOC"] and examples[1].entities() == [("北京", "LOC")]


@pytest.mark.parametrize("row, found", [
    ('{"text": "abc", "entities": [{"start": 1, "end": 9, "label": "X"}]}', "expected an entity"),
    ('{"text": "abc", "entities": [{"start": 1, "end": 2}]}', "expected an entity"),
    ('{"text": "abc", "entities": {"start": 1}}', 'expected "entities": a list'),
    ('{"text": "ab cd", "entities": [{"start": 1, "end": 4, "label": "X"}]}', "a span that cuts a token"),
    ('{"text": "abc", "entities": [{"start": 0, "end": 2, "label": "X"}, {"start": 1, "end": 3, "label": "Y"}]}',
     "expected entities that do not overlap"),
    ('{"entities": []}', "expected field 'text'"),
])
def test_bad_span_jsonl(tmp_path, row, found):
    path = write(tmp_path, "ner.jsonl", '{"text": "ok"}\n' + row + "\n")
    with pytest.raises(DataError, match=f"^{path}:2: .*{found}"):
        read_span_jsonl(path, tokens="word" if "cuts" in found else "char")


# ---------------------------------------------------------------------------- no partial output


def test_failed_write_leaves_no_file(tmp_path):
    path = str(tmp_path / "out.jsonl")
    broken = span_example("ab", [(0, 1, "X")])
    broken.spans = [(0, 1, object())]  # not JSON-serializable: fails while building the text
    with pytest.raises(TypeError):
        write_span_jsonl(path, [span_example("cd", []), broken])
    assert os.listdir(tmp_path) == []


def test_failed_rename_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    path = str(tmp_path / "labels.json")
    LabelSet(["a"]).save(path)

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(readers.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        LabelSet(["a", "b"]).save(path)
    assert os.listdir(tmp_path) == ["labels.json"]
    assert LabelSet.load(path).labels == ["a"]


def test_read_texts_for_prediction(tmp_path):
    assert readers.read_texts(write(tmp_path, "in.jsonl", '{"text": "a", "id": 1}\n\n')) == [{"text": "a", "id": 1}]
    with pytest.raises(DataError, match=r"in\.jsonl:2: expected field 'text', found keys \['id'\]"):
        readers.read_texts(write(tmp_path, "in.jsonl", '{"text": "a"}\n{"id": 2}\n'))
    with pytest.raises(DataError, match=r"in\.jsonl:1: expected one JSON object, found invalid JSON"):
        readers.read_texts(write(tmp_path, "in.jsonl", "not json\n"))
    assert readers.read_texts(write(tmp_path, "in.txt", "first\n\nsecond\n")) == [{"text": "first"}, {"text": "second"}]
