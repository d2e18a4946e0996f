"""bert4keras 0.11.5's UniLM sequence-to-sequence examples, ported by renaming imports, give bert4keras's losses,
texts and scores: CSL titles, question-answer generation, reading comprehension by seq2seq and Ape210k's math
word problems.

The scripts are run by tests/oracle_examples.py under both packages, from the same random Google checkpoint
(dropout 0) over a vocabulary with digits, number pieces and operators, and the same files written here in each
dataset's own format (CSL's TSV, WebQA's and SogouQA's JSON, Ape210k's JSON lines and a competition CSV), with
NumPy's global generator seeded the same way before each script. Each training set is three full batches, so
``fit``'s epoch loss means the same in tf-keras and Keras 3.
"""

from __future__ import annotations

import json

import numpy as np
import oracle_examples
import pytest
from example_files import write_qa, writer
from oracle_examples import CFG, PUNCTUATION, SPECIAL, close, same

pytestmark = pytest.mark.slow

DIGITS = list("0123456789")
TOKENS = [*SPECIAL, *PUNCTUATION, *DIGITS, *("##" + d for d in DIGITS), *"+-*/().,%"]
CHARS = oracle_examples.CHARS[:CFG["vocab_size"] - len(TOKENS)]
TOKENS += CHARS
# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1


def write_csl(folder: str, rng: np.random.Generator) -> dict:
    """CSL's ``title<TAB>content`` rows: titles of a few characters that their content repeats (as a paper's
    title words recur in its abstract), 12 for training, 2 each for validation and test."""
    write, topics = writer(folder), CHARS[:3]
    files = {}
    for name, rows in (("train", 12), ("val", 2), ("test", 2)):
        lines = []
        for _ in range(rows):
            title = "".join(rng.choice(topics, int(rng.integers(3, 6))))
            content = "".join(rng.choice(CHARS, int(rng.integers(6, 12)))) + title + "，" + "".join(
                rng.choice(CHARS, int(rng.integers(3, 8)))) + "。"
            lines.append(f"{title}\t{content}\n")
        files["valid" if name == "val" else name] = write(f"csl/{name}.tsv", "".join(lines))
    return files


def _problem(rng: np.random.Generator, kind: int) -> dict:
    """One Ape210k row; ``kind`` picks the form ``load_data`` rewrites (a mixed number, a percentage, a ratio, a
    redundant bracket, a wrong answer it drops)."""
    a, b, c = (int(n) for n in rng.integers(2, 10, 3))
    words = "".join(rng.choice(CHARS, int(rng.integers(3, 7))))
    rows = [
        (f"{words}{a}{words[:2]}{b}", f"x=({a}+{b})*{c}", str((a + b) * c)),
        (f"{words}{a}(1/2){words[:2]}", f"x={a}(1/2)*{2 * b}", str((2 * a + 1) * b)),
        (f"{words}{a * 10}{words[:1]}{b * 10}%", f"x={a * 10}*{b * 10}%", str(a * b)),
        (f"{words}{a * c}{words[:2]}{c}", f"x={a * c}:{c}", str(a)),
        (f"{words}{a}{words[:1]}{b}", f"x=({a}*{b})", str(a * b)),
        (f"{words}{a}{words[:1]}{b}", f"x={a}-{b}", str(a + b + 1)),  # its answer is wrong: dropped
    ]
    question, equation, answer = rows[kind % len(rows)]
    return {"id": str(kind), "original_text": question, "segmented_text": " ".join(question), "equation": equation,
            "ans": answer}


def write_ape210k(folder: str, rng: np.random.Generator) -> dict:
    """Ape210k's JSON lines (12 training rows kept of 14, 2 each for validation and test) and a competition CSV
    of (id, question) with a mixed number ``1_1/2`` and the wordings ``predict`` formats by."""
    write = writer(folder)
    files = {}
    for name, kinds in (("train", [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1]), ("valid", [0, 2]), ("test", [3, 4])):
        files[name] = write(f"ape210k/{name}.ape.json", "".join(
            json.dumps(_problem(rng, k), ensure_ascii=False) + "\n" for k in kinds))
    questions = [f"{CHARS[0]}1_1/2{CHARS[1]}3{CHARS[2]}", f"{CHARS[3]}50{CHARS[4]}百分之几", f"{CHARS[5]}7至少多少个"]
    files["competition"] = write("ape210k/test.csv", "".join(f"{i},{q}\n" for i, q in enumerate(questions)))
    return files


def write_all(work: str) -> tuple[list[str], dict]:
    """The checkpoint's paths and each script's ``data``, its files written under ``work``."""
    paths = oracle_examples.write_bert(work, tokens=TOKENS)
    rng = np.random.default_rng(0)
    qa = write_qa(work, rng, CHARS)
    return paths, {
        "task_seq2seq_autotitle_csl": write_csl(work, rng),
        "task_question_answer_generation_by_seq2seq": {**qa, "seed": 1},
        "task_reading_comprehension_by_seq2seq": qa,
        "task_seq2seq_ape210k_math_word_problem": {**write_ape210k(work, rng), "seed": 2},
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(kerasbert's results, bert4keras's results) per script; bert4keras runs alongside in a subprocess."""
    work = str(tmp_path_factory.mktemp("examples_seq2seq"))
    paths, data = write_all(work)
    return oracle_examples.run_examples(data, paths, work, STEPS)


def _pair(results, name):
    return results[0][name], results[1][name]


def _losses(ours, theirs, *keys):
    assert len(ours["step_losses"]) == STEPS
    for key in ("step_losses", "epoch_loss", *keys):
        close(ours[key], theirs[key])


def test_autotitle_csl(results):
    """CSL titles by UniLM: the same losses, the Evaluator's ROUGE and BLEU each epoch (BLEU above 0, so it saved
    the weights reloaded), and the test rows' scores by beam search (topk 2)."""
    ours, theirs = _pair(results, "task_seq2seq_autotitle_csl")
    for key in ("keep_tokens", "token_ids", "segment_ids"):
        same(ours[key], theirs[key])
    _losses(ours, theirs, "printed", "test_metrics")
    assert ours["printed"][0, -1] > 0


def test_question_answer_generation(results):
    """Answers sampled (top-p) then questions by beam search: the same triples cut by ``text_segmentate``, random
    order, losses, and the rows ``predict_to_file`` writes."""
    ours, theirs = _pair(results, "task_question_answer_generation_by_seq2seq")
    for key in ("samples", "random_order", "keep_tokens", "token_ids", "segment_ids", "rows", "topk2"):
        same(ours[key], theirs[key])
    assert len(ours["samples"]) == 14 and len(ours["rows"]) == 2 + 1  # the 2 validation rows, then ""
    _losses(ours, theirs, "lowest")


def test_reading_comprehension_by_seq2seq(results):
    """Extractive answers voted over every passage of a question by beam search (topk 2) with states: the same
    losses and answers as bert4keras."""
    ours, theirs = _pair(results, "task_reading_comprehension_by_seq2seq")
    for key in ("random_order", "keep_tokens", "token_ids", "segment_ids", "answers"):
        same(ours[key], theirs[key])
    _losses(ours, theirs, "lowest")


def test_ape210k_math_word_problem(results):
    """Equations by beam search: the same rows ``load_data`` keeps and rewrites, losses, the Evaluator's
    accuracy and the competition answers ``predict`` formats (beam topk 2)."""
    ours, theirs = _pair(results, "task_seq2seq_ape210k_math_word_problem")
    for key in ("train_data", "valid_data", "test_data", "keep_tokens", "token_ids", "segment_ids", "predicted"):
        same(ours[key], theirs[key])
    assert len(ours["train_data"]) == 12 and not any(c in e for e in ours["train_data"][:, 1] for c in "x:%")
    _losses(ours, theirs, "printed")
