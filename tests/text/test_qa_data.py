"""The qa task's data: SQuAD JSON and JSONL read with their lines, contexts split into windows that hold every piece,
each window's target, and the answer read back over the windows wherever it lies (crafted logits, in NumPy and in the
SavedModel's graph)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from kerasbert.errors import ConfigError, DataError
from kerasbert.text.qa_data import (
    BOTH,
    END,
    START,
    QaExample,
    best_answer,
    encode_qa,
    iter_qa_examples,
    qa_predictions,
    question_room,
)
from kerasbert.text.tokenizer import Tokenizer

CHARS = [chr(0x4E00 + i) for i in range(160)]  # one word piece each
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *CHARS, "hello", "##s", "world"]
TOKENIZER = Tokenizer({token: i for i, token in enumerate(VOCAB)})


def _squad(path, version2: bool = False) -> str:
    qas = [{"id": "q1", "question": "谁?", "answers": [{"text": "张伟", "answer_start": 0}]},
           {"id": "q2", "question": "哪里?", "answers": [{"text": "杭州", "answer_start": 3},
                                                        {"text": "杭州", "answer_start": 3}]}]
    if version2:
        qas.append({"id": "q3", "question": "何时?", "answers": [], "is_impossible": True,
                    "plausible_answers": [{"text": "张伟", "answer_start": 0}]})
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "张伟在杭州工作", "qas": qas}]}]}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return str(path)


def test_squad_json_is_read_with_the_line_of_each_question(tmp_path):
    examples = list(iter_qa_examples(_squad(tmp_path / "dev.json", version2=True)))
    assert [(e.id, e.answers, e.texts) for e in examples] == [("q1", [(0, 2)], ["张伟"]),
                                                             ("q2", [(3, 5), (3, 5)], ["杭州", "杭州"]),
                                                             ("q3", [], [])]
    text = (tmp_path / "dev.json").read_text(encoding="utf-8").splitlines()
    assert all(f'"id": "{e.id}"' in text[e.line - 1] for e in examples)


def test_jsonl_takes_both_answer_layouts(tmp_path):
    rows = [{"question": "谁?", "context": "张伟在杭州", "answers": [{"text": "杭州", "answer_start": 3}]},
            {"id": 7, "question": "谁?", "context": "张伟在杭州", "answers": {"text": ["张伟"], "answer_start": [0]}},
            {"question": "谁?", "context": "张伟在杭州", "answers": {"text": [], "answer_start": []}}]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n", encoding="utf-8")
    examples = list(iter_qa_examples(str(path)))
    assert [(e.id, e.answers, e.line) for e in examples] == [("", [(3, 5)], 1), ("7", [(0, 2)], 2), ("", [], 3)]


def test_an_answer_off_its_start_is_moved_to_its_nearest_place_unless_strict(tmp_path, caplog):
    row = {"question": "谁?", "context": "杭州人在杭州", "answers": [{"text": "杭州", "answer_start": 3}]}
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    logging.getLogger("kerasbert").addHandler(caplog.handler)  # the logger does not propagate
    try:
        assert [e.answers for e in iter_qa_examples(str(path))] == [[(4, 6)]]
    finally:
        logging.getLogger("kerasbert").removeHandler(caplog.handler)
    assert "1 answers were not at their answer_start" in caplog.text
    with pytest.raises(DataError, match=r"train.jsonl:1: expected an answer that is in its context: '杭州' at "
                                        r"answer_start 3, found '在杭' there; the text is at 0"):
        list(iter_qa_examples(str(path), strict=True))


def test_windows_hold_every_context_piece_and_the_answer_only_where_whole():
    context = "".join(CHARS[:100])
    example = QaExample(CHARS[150] * 3, context, [(40, 43)])
    features = encode_qa(TOKENIZER, [example], maxlen=32, stride=8, labels=True)
    covered = sorted({p for w in features.windows for p in range(w.start, w.end)})
    assert covered == list(range(100)) and all(len(row) <= 32 for row in features.token_ids)
    assert all(b.start == a.end - 8 for a, b in zip(features.windows, features.windows[1:], strict=False))
    for window, row, labels, first in zip(features.windows, features.token_ids, features.labels,
                                          features.context_starts, strict=True):
        assert row[:first] == [2, *[VOCAB.index(CHARS[150])] * 3, 3] and row[-1] == 3
        assert row[first:-1] == [VOCAB.index(c) for c in context[window.start:window.end]]
        whole = window.start <= 40 and 42 < window.end
        where = {k: i for i, k in enumerate(labels) if k in (START, END, BOTH)}
        assert where == ({START: first + 40 - window.start, END: first + 42 - window.start} if whole else {BOTH: 0})


def test_the_question_gives_way_to_the_stride():
    assert question_room(64, 16, 64) == 44
    with pytest.raises(ConfigError, match="--stride: expected at most maxlen - 5 = 27"):
        encode_qa(TOKENIZER, [QaExample("一", "二")], maxlen=32, stride=28)


def _crafted(rows, answer: tuple[str, str]) -> list[np.ndarray]:
    """A model that knows the answer: start logit 5 on its first character's id, end logit 5 on its last's, and
    [CLS]'s null score 3 (a span held whole scores 10, one held in part at most 5)."""
    ids = [VOCAB.index(c) for c in answer]
    out = []
    for row in rows:
        row = np.asarray(row)
        logits = np.zeros((len(row), 2), np.float32)
        logits[:, 0] += 5 * (row == ids[0])
        logits[:, 1] += 5 * (row == ids[1])
        logits[0] = 1.5
        out.append(logits)
    return out


@pytest.mark.parametrize("length", [1, 2, 3])
def test_an_answer_is_found_at_every_position_of_a_long_context(length):
    context = "".join(CHARS[:90])
    examples = [QaExample(CHARS[150], context, [(p, p + length)]) for p in range(90 - length + 1)]
    features = encode_qa(TOKENIZER, examples, maxlen=24, stride=6)
    assert len(features) > 5 * len(examples)  # every context is split into several windows
    found = []
    for d, example in enumerate(examples):
        rows = [i for i, w in enumerate(features.windows) if w.document == d]
        start, end = example.answers[0]
        logits = _crafted([features.token_ids[i] for i in rows], (context[start], context[end - 1]))
        found.append(best_answer(logits, features, d, max_answer_length=5, null_answers=True, rows=rows)[:2])
    assert found == [tuple(example.answers[0]) for example in examples]


def test_null_answers_and_the_longest_answer():
    features = encode_qa(TOKENIZER, [QaExample("一", "二三四五")], maxlen=16)
    logits = np.zeros((8, 2), np.float32)  # [CLS] 一 [SEP] 二 三 四 五 [SEP]
    logits[3, 0], logits[6, 1] = 2.0, 2.0  # the span 二..五: four pieces, score 4
    logits[0] = [2.5, 2.5]  # null score 5
    assert qa_predictions([QaExample("一", "二三四五")], features, [logits], 30, null_answers=False) == [
        {"answer": "二三四五", "start": 0, "end": 4, "score": 4.0}]
    assert qa_predictions([QaExample("一", "二三四五")], features, [logits], 30, null_answers=True) == [
        {"answer": "", "start": -1, "end": -1, "score": 5.0}]
    answer = qa_predictions([QaExample("一", "二三四五")], features, [logits], 3, null_answers=False)[0]
    assert (answer["answer"], answer["score"]) == ("二", 2.0)  # four pieces are too long; 二 is the first of 2


def test_the_graph_windows_and_reads_answers_as_numpy_does():
    import tensorflow as tf

    from kerasbert.serving.graph_text import GraphTokenizer
    from kerasbert.serving.qa_export import qa_windows, window_answers

    context = "".join(CHARS[:60])
    rows = [QaExample(CHARS[150] * q, context[:n], [(p, p + length)]) for q, n, p, length in
            [(1, 60, 0, 1), (2, 60, 17, 2), (3, 60, 57, 3), (1, 5, 4, 1), (4, 60, 30, 2)]] + [QaExample("", "")]
    features = encode_qa(TOKENIZER, rows, maxlen=24, stride=6, max_query_length=3)
    graph = GraphTokenizer(VOCAB, lowercase=True, maxlen=24)
    questions, contexts = (tf.constant([getattr(e, name) for e in rows]) for name in ("question", "context"))
    pieces = graph.pieces(contexts)
    windows = qa_windows(graph.pieces(questions), pieces, 24, 6, 3, 2, 3)
    ids = windows["token_ids"].numpy()
    assert [list(row[:len(want)]) for row, want in zip(ids, features.token_ids, strict=True)] == features.token_ids
    answers = [e.answers[0] if e.answers else (0, 1) for e in rows]
    logits = np.stack([_crafted([row], (rows[d].context[a:b][:1] or CHARS[0], rows[d].context[a:b][-1:] or CHARS[0]))[0]
                       for row, d, (a, b) in zip(ids, windows["document"].numpy(), [answers[d] for d in
                                                                                    windows["document"].numpy()],
                                                 strict=True)])
    out = window_answers(contexts, tf.constant(logits), windows, pieces, 5, True)
    want = qa_predictions(rows, features, [logits[i, :len(row)] for i, row in enumerate(features.token_ids)], 5, True)
    got = [{"answer": a.decode(), "start": int(s), "end": int(e), "score": float(c)} for a, s, e, c in
           zip(*(out[k].numpy() for k in ("answer", "start", "end", "score")), strict=True)]
    assert got == want and [row["answer"] for row in want[:-1]] == [e.texts[0] for e in rows[:-1]]
    assert want[-1] == {"answer": "", "start": -1, "end": -1, "score": 3.0}
