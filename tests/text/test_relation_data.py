"""The relation task's data without TensorFlow models: DuIE-style lines read (string and ``@value`` objects, offsets
given or found), pair codes that invert, in Python and in the loss's graph, triples cut by maxlen or off the word
pieces counted, and the pointers' logits decoded as the example's ``extract_spoes`` loops over them."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from keras import ops

from kerasbert import DataError
from kerasbert.modeling.global_pointer import unpair
from kerasbert.text.readers import LabelSet
from kerasbert.text.relation_data import (
    RelationExample,
    code_pair,
    encode_relations,
    found_triples,
    iter_relation_examples,
    pair_code,
    pointer_labels,
    triple_row,
)
from kerasbert.text.tokenizer import Tokenizer


def write(path, rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n"
                            for row in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##s", *"张伟在北京大学工作位于"]) + "\n",
                    encoding="utf-8")
    return Tokenizer(str(path))


def test_lines_read_with_string_or_value_objects_offsets_given_or_found(tmp_path):
    path = write(tmp_path / "train.jsonl", [
        {"text": "北京大学位于北京", "spo_list": [{"subject": "北京大学", "predicate": "位于", "object": "北京"}]},
        {"text": "北京大学位于北京", "spo_list": [{"subject": "北京大学", "predicate": "位于", "object": "北京",
                                             "object_start": 6}]},
        {"text": "张伟在北京", "spo_list": [{"subject": "张伟", "predicate": "工作地", "object": {"@value": "北京"},
                                        "object_type": {"@value": "地点"}}] * 2},
        {"text": "今天"}])
    assert [(e.triples, e.line) for e in iter_relation_examples(path)] == [
        ([(0, 4, "位于", 0, 2)], 1), ([(0, 4, "位于", 6, 8)], 2), ([(0, 2, "工作地", 3, 5)], 3), ([], 4)]


@pytest.mark.parametrize("spo, words", [
    ({"subject": "王芳", "predicate": "位于", "object": "北京"}, r"train.jsonl:1 subject: expected an entity the text "
                                                              r"holds, '张伟在北京', found '王芳'. give subject_start"),
    (["张伟", "位于", "北京"], r"train.jsonl:1: expected an spo \{\"subject\", \"predicate\", \"object\"\}, found \["),
    ({"subject": "张伟", "object": "北京"}, r"train.jsonl:1: expected an spo .* found \{'subject'"),
    ({"subject": "张伟", "predicate": "位于", "object": "北京", "object_start": 4},
     r"train.jsonl:1 object_start: expected an offset from 0 to 3 \(the text has 5 characters, the object 2\), "
     r"found 4"),
    ({"subject": "张伟", "predicate": "位于", "object": "北京", "subject_start": 1},
     r"train.jsonl:1 subject_start: expected the offset of '张伟' in the text, found 1, where the text holds '伟在'"),
    ({"subject": "张伟", "predicate": "", "object": "北京"}, r"train.jsonl:1 predicate: expected a non-empty string"),
    ({"subject": "张伟", "predicate": "位于", "object": {"value": "北京"}},
     r"train.jsonl:1 object: expected a non-empty string \(or \{\"@value\": string\}\), found \{'value'"),
])
def test_a_bad_spo_names_file_line_and_field(tmp_path, spo, words):
    path = write(tmp_path / "train.jsonl", [{"text": "张伟在北京", "spo_list": [spo]}])
    with pytest.raises(DataError, match=words):
        list(iter_relation_examples(path))


def test_pair_codes_invert_in_python_and_in_the_graph():
    pairs = [(kind, i, j) for kind in range(3) for i in range(40) for j in range(40)]
    codes = [pair_code(kind, i, j, 3) for kind, i, j in pairs]
    assert [code_pair(code, 3) for code in codes] == pairs and len(set(codes)) == len(codes)
    index = np.array([(code - 1) // 3 for code in codes])
    assert [tuple(ops.convert_to_numpy(v).tolist()) for v in unpair(index)] == [
        tuple(i for _, i, _ in pairs), tuple(j for *_, j in pairs)]


def test_the_codes_hold_each_pointers_targets_and_dropped_triples_are_counted(tokenizer, caplog):
    examples = [RelationExample("张伟在北京大学工作", [(0, 2, "工作", 3, 7), (3, 7, "位于", 3, 5)]),
                RelationExample("hellos在北京", [(0, 4, "位于", 7, 9), (0, 6, "位于", 7, 9)]),
                RelationExample("张伟在北京大学工作", [(0, 2, "工作", 7, 9)])]
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        features = encode_relations(tokenizer, examples, LabelSet(["位于", "工作"]), maxlen=9, what="train.jsonl")
    assert [len(codes) for codes in features.labels] == [len(ids) for ids in features.token_ids]
    entity, head, tail = pointer_labels(features.labels[0], 2)
    assert entity == [{(1, 2), (4, 7)}, {(4, 7), (4, 5)}]  # subjects 张伟, 北京大学; objects 北京大学, 北京
    assert head == [{(4, 4)}, {(1, 4)}] and tail == [{(7, 5)}, {(2, 7)}]
    assert pointer_labels(features.labels[1], 2)[1] == [{(1, 4)}, set()]  # hellos: "hello" ends no piece
    assert features.dropped == {"maxlen": 1, "boundaries": 1} and features.triples == 5
    assert "train.jsonl: 1 of 5 triples have an entity past maxlen=9 word pieces and were dropped" in caplog.text


def extract_spoes(logits: np.ndarray, count: int) -> set:
    """The example's loops: every subject and object span scored > 0, every predicate where both pointers agree."""
    predicates = (len(logits) - 2) // 2
    spans = [[(h, t) for h in range(1, count + 1) for t in range(h, count + 1) if logits[k, h, t] > 0] for k in (0, 1)]
    return {(sh, st, p, oh, ot) for sh, st in spans[0] for oh, ot in spans[1] for p in range(predicates)
            if logits[2 + p, sh, oh] > 0 and logits[2 + predicates + p, st, ot] > 0}


def test_found_triples_are_the_examples_loops_over_random_logits():
    rng = np.random.default_rng(0)
    for count in (0, 1, 5, 9):
        logits = rng.normal(-0.5, 1, (2 + 2 * 3, 12, 12))
        found = found_triples(logits, count)
        assert found == sorted(extract_spoes(logits, count)) and (count < 5 or found)


def test_a_triple_row_is_sorted_and_each_triple_once():
    offsets = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    row = triple_row("张伟在北京", [(4, 5, 0, 1, 2), (1, 2, 1, 4, 5), (1, 2, 0, 4, 5), (1, 2, 0, 4, 5)], offsets,
                     ["位于", "工作"])["spo_list"]
    assert [(s["subject"], s["predicate"], s["object"]) for s in row] == [
        ("张伟", "位于", "北京"), ("张伟", "工作", "北京"), ("北京", "位于", "张伟")]
    assert row[0] == {"subject": "张伟", "subject_start": 0, "subject_end": 2, "predicate": "位于", "object": "北京",
                          "object_start": 3, "object_end": 5}
