"""bert4keras 0.11.5's Chinese-chess language model example, ported by renaming imports, gives bert4keras's numbers:
the game records read, the rows (each starting with id 0, from a tokenizer whose dict has no [UNK], [CLS] or [SEP]),
the losses and the moves the machine plays.

The script is run by tests/oracle_examples.py under both packages, from the same random Google checkpoint (dropout
0, its vocab.txt holding the moves' characters) and the same game records written here as the example reads them
(JSON lines of ``fen``, ``items`` and ``iccs``), with NumPy's global generator seeded the same way before it. The
training set is three full batches, so ``fit``'s epoch loss means the same in tf-keras and Keras 3; the game after
it is scripted (the legal moves of each turn and the human's moves), so that ``ChessPlayer.new_game`` runs whole.
"""

from __future__ import annotations

import json

import numpy as np
import oracle_examples
import pytest
from example_files import writer
from oracle_examples import CFG, PUNCTUATION, SPECIAL, close, same

pytestmark = pytest.mark.slow

MOVE_CHARS = list("0123456789abcdefghi")
TOKENS = [*SPECIAL, *PUNCTUATION, *MOVE_CHARS]
TOKENS += oracle_examples.CHARS[:CFG["vocab_size"] - len(TOKENS)]
# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1


def random_move(rng: np.random.Generator) -> str:
    """One ICCS move: a file (a to i) and a rank (0 to 9), from and to."""
    return "".join(f"{'abcdefghi'[rng.integers(9)]}{rng.integers(10)}" for _ in range(2))


def write_qipu(folder: str, rng: np.random.Generator) -> str:
    """qipu.json: 14 games of 6 to 20 moves (the first of 20, past the 64 ids a row keeps), 12 from the starting
    position (an empty ``fen``; some without ``棋局结果``) and 2 from another position, which the example skips."""
    lines = []
    for i in range(14):
        items = {} if i % 5 == 4 else {"棋局结果": str(i % 3)}
        fen = "4k4/9/9/9/9/9/9/9/9/4K4 w" if i in (3, 9) else ""
        iccs = "".join(random_move(rng) for _ in range(20 if i == 0 else int(rng.integers(6, 21))))
        lines.append(json.dumps({"fen": fen, "items": items, "iccs": iccs}, ensure_ascii=False))
    return writer(folder)("qipu.json", "\n".join(lines) + "\n")


def scripted_game(rng: np.random.Generator) -> dict:
    """Five turns, the human first: the legal moves of each turn (six distinct ones) and the human's three moves."""
    turns = []
    for _ in range(5):
        moves = []
        while len(moves) < 6:
            move = random_move(rng)
            moves += [move] * (move not in moves)
        turns.append(moves)
    return {"turns": turns, "human": [turns[t][int(rng.integers(6))] for t in (0, 2, 4)]}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(kerasbert's results, bert4keras's results); bert4keras runs alongside in a subprocess."""
    work = str(tmp_path_factory.mktemp("examples_chess"))
    paths = oracle_examples.write_bert(work, tokens=TOKENS)
    rng = np.random.default_rng(2)
    data = {"task_language_model_chinese_chess": {"qipu": write_qipu(work, rng), "game": scripted_game(rng)}}
    ours, theirs = oracle_examples.run_examples(data, paths, work, STEPS)
    return ours["task_language_model_chinese_chess"], theirs["task_language_model_chinese_chess"], data


def test_records_rows_and_vocabulary(results):
    """The same 12 records and results, keep_tokens (the moves' characters' rows), and rows that start with id 0
    and hold at most ``512 // 8 + 1 - 1`` ids."""
    ours, theirs, _ = results
    for key in ("samples", "results", "keep_tokens", "token_ids", "segment_ids"):
        same(ours[key], theirs[key])
    assert len(ours["samples"]) == 12 and set(ours["results"]) == {-1, 0, 1, 2}
    same(ours["keep_tokens"], [TOKENS.index(c) for c in ["[PAD]", *MOVE_CHARS]])
    assert (ours["token_ids"][:, 0] == 0).all() and ours["token_ids"].shape[1] == 64


def test_losses(results):
    """The training steps' and the epoch's losses within 1e-4."""
    ours, theirs, _ = results
    assert len(ours["step_losses"]) == STEPS and np.isfinite(ours["step_losses"]).all()
    for key in ("step_losses", "epoch_loss"):
        close(ours[key], theirs[key])


def test_machine_plays_the_same_moves(results):
    """The machine's scores of its candidates within 1e-4 and the same game: the human's moves and the machine's
    choices (each the best of its turn's scores by more than the tolerance)."""
    ours, theirs, data = results
    close(ours["scores"], theirs["scores"])
    same(ours["history"], theirs["history"])
    turns = data["task_language_model_chinese_chess"]["game"]["turns"]
    history = str(ours["history"])
    assert [history[4 * t:4 * t + 4] for t in (0, 2, 4)] == data["task_language_model_chinese_chess"]["game"]["human"]
    for turn, scores in zip((1, 3), ours["scores"].reshape(2, 6), strict=True):
        assert history[4 * turn:4 * turn + 4] == turns[turn][int(scores.argmax())]
        assert np.sort(scores)[-1] - np.sort(scores)[-2] > 1e-3
