"""The files bert4keras's example scripts read, written small in each dataset's own format for the ported examples'
tests (tests/compat/test_examples_*.py)."""

from __future__ import annotations

import json
import os

import numpy as np


def writer(folder: str):
    """``write(name, content)``: a UTF-8 file ``name`` under ``folder`` (its folders made), its path."""

    def write(name: str, content: str) -> str:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        return path

    return write


def _qa_entry(rng: np.random.Generator, chars: list[str], index: int, answered: int, unanswered: int) -> dict:
    """A WebQA / SogouQA question: passages (of at most 20 characters, some with ``、`` and ``，``) whose answer
    is a span of the passage, or ``""`` for a passage without it; one answer in two parts (``"a b"``). Answers
    are spelled with two characters, so that a few steps teach the model to start one."""
    def text(low, high, spelling=chars[2:]):
        return "".join(rng.choice(spelling, int(rng.integers(low, high))))

    passages = []
    for k in range(answered):
        before, answer, after = text(2, 6), text(3, 6, chars[:2]), text(2, 6)
        if k == 1 and index % 2:
            second = text(2, 3, chars[:2])
            passages.append({"passage": f"{before}{answer}、{second}，{after}", "answer": f"{answer} {second}"})
        else:
            passages.append({"passage": f"{before}{answer}，{after}。", "answer": answer})
    passages += [{"passage": text(8, 16) + "。", "answer": ""} for _ in range(unanswered)]
    order = rng.permutation(len(passages))
    return {"id": index, "question": text(3, 7) + "？", "passages": [passages[i] for i in order]}


def write_qa(folder: str, rng: np.random.Generator, chars: list[str]) -> dict:
    """WebQA.json (4 questions, 2 answered passages each) and SogouQA.json (6 questions, one or two answered
    passages and one without): 14 (passage, question, answer) triples for question generation (the two answers in
    two parts are no span of a passage; 12 to train), and 4 SogouQA questions twice plus WebQA's, 12, to train
    reading comprehension."""
    write = writer(folder)
    webqa = [_qa_entry(rng, chars, i, 2, 0) for i in range(4)]
    sogou = [_qa_entry(rng, chars, 100 + i, 1 + (i < 3), 1) for i in range(6)]
    return {"webqa": write("qa/WebQA.json", json.dumps(webqa, ensure_ascii=False)),
            "sogou": write("qa/SogouQA.json", json.dumps(sogou, ensure_ascii=False))}
