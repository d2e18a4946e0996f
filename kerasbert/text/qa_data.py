"""The qa task's data, without TensorFlow: questions and contexts read from SQuAD JSON or JSONL, encoded as
``[CLS] question [SEP] context window [SEP]`` rows, and the model's start and end logits read back to an answer.

Files: SQuAD-format JSON (``{"data": [{"paragraphs": [{"context", "qas": [{"id", "question", "answers":
[{"text", "answer_start"}], "is_impossible"}]}]}]}``: SQuAD v1.1, v2.0 and CMRC 2018), or JSONL, one ``{"id",
"question", "context", "answers"}`` a line, ``answers`` a list of ``{"text", "answer_start"}`` or Hugging Face
datasets' ``{"text": [...], "answer_start": [...]}``; no answer (``[]``, or ``"is_impossible": true``) is an
unanswerable question (SQuAD 2.0). An answer whose text is not at its ``answer_start`` is moved to the nearest place
its text is in the context, with a warning (CMRC 2018 has a few such); with ``strict`` that is a DataError, as is an
answer whose text is nowhere in its context.

A question keeps its first `question_room` word pieces; its context is split into windows that fill the rest of the
row, consecutive windows sharing ``stride`` pieces (`qa_stride`: ``--stride``, else ``maxlen // 4``), so every
context piece is in some window (`kerasbert.text.windows.piece_ranges`). The training target of a window is the
start and end piece of the example's first answer when the window holds it whole, else ``[CLS]`` (position 0) for
both, as Hugging Face's ``run_qa.py`` trains; it is written as one int per position (`pointer_labels`) so that the
labels pad and bucket with the tokens. An answer is read back (`best_answer`) as the span of the highest start plus
end logit over every window, ``start <= end``, at most ``max_answer_length`` pieces, inside the context; with null
answers (SQuAD 2.0) no answer is given where the null score (``[CLS]``'s start plus end logit, the lowest over the
windows) is higher than that span's score.

Example:
>>> from kerasbert.text.tokenizer import Tokenizer
>>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"谁在杭州工作张伟"])})
>>> example = QaExample("谁在杭州？", "张伟在杭州工作", [(0, 2)])
>>> features = encode_qa(tokenizer, [example], maxlen=16, labels=True)
>>> features.token_ids[0], features.labels[0]
([2, 4, 5, 6, 7, 1, 3, 10, 11, 5, 6, 7, 8, 9, 3], [1, 1, 1, 1, 1, 1, 1, 2, 3, 1, 1, 1, 1, 1, 1])
>>> logits = np.zeros((15, 2), np.float32)
>>> logits[7, 0] = logits[8, 1] = 5.0
>>> answer_row(example.context, best_answer([logits], features, 0, max_answer_length=30, null_answers=False))
{'answer': '张伟', 'start': 0, 'end': 2, 'score': 10.0}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.log import logger
from kerasbert.text.coverage import warn_unknown
from kerasbert.text.pipeline import Features
from kerasbert.text.readers import file_rows, get_field
from kerasbert.text.span_data import piece_offsets
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.windows import Window, check_stride, piece_ranges

__all__ = ["NO_ANSWER", "QaExample", "QaFeatures", "answer_row", "answer_rows", "best_answer", "encode_qa",
           "examples_of_rows", "export_info", "iter_qa_examples", "pointer_labels", "portable_predict",
           "qa_predictions", "qa_stride", "question_room"]

NO_ANSWER = (-1, -1)  # the start and end of no answer
PADDING, REAL, START, END, BOTH = 0, 1, 2, 3, 4  # `pointer_labels`: what each position of a row is
Answer = tuple[int, int]  # character offsets into the context, end exclusive


@dataclass
class QaExample:
    """A question, its context and its answers.

    Args:
        question: str. the question.
        context: str. the text that holds the answer.
        answers: list of ``(start, end)``. each answer's character offsets into ``context`` (end exclusive); empty:
            no answer (an unanswerable question, or an unlabelled one).
        id: str. the question's id in its file, or "".
        line: int. the file line (1-based) of the question, for messages.
    """

    question: str
    context: str
    answers: list[Answer] = field(default_factory=list)
    id: str = ""
    line: int = field(default=0, compare=False)

    @property
    def texts(self) -> list[str]:
        """The answers' texts."""
        return [self.context[a:b] for a, b in self.answers]


# ---------------------------------------------------------------------------- reading


def _line_finder(raw: str):
    """A function ``(id) -> line`` giving the line of the next occurrence of each id (as JSON writes it) after the
    previous one found, for the messages of a SQuAD JSON file; the line of the last one found where an id is not."""
    at = [0]

    def line_of(key: object) -> int:
        for form in (json.dumps(key, ensure_ascii=False), json.dumps(key)):
            position = raw.find(form, at[0])
            if position >= 0:
                at[0] = position
                break
        return raw.count("\n", 0, at[0]) + 1

    return line_of


def _squad_rows(path: str, raw: str, value: dict) -> Iterator[tuple[int, dict]]:
    """``(line, row)`` of each question of a SQuAD JSON file, a row as one JSONL line is."""
    line_of = _line_finder(raw)
    data = value.get("data")
    if not isinstance(data, list):
        raise fail(DataError, path, '"data": a list of articles', repr(data)[:60])
    for article in data:
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise fail(DataError, path, 'each article with "paragraphs": a list', repr(article)[:60])
        for paragraph in paragraphs:
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise fail(DataError, path, 'each paragraph with "context" and "qas": a list', repr(paragraph)[:60])
            for qa in qas:
                row = dict(qa) if isinstance(qa, dict) else {"question": qa}
                yield line_of(row.get("id", row.get("question"))), {**row, "context": paragraph.get("context")}


def _rows(path: str) -> Iterator[tuple[int, dict]]:
    """``(line, row)`` of each question of a SQuAD JSON file or a JSONL file."""
    if not path.endswith((".json", ".jsonl")):
        raise fail(DataError, path, "a SQuAD .json file or a .jsonl file of questions",
                   f"extension {os.path.splitext(path)[1]!r}")
    if path.endswith(".json"):
        try:
            with open(path, encoding="utf-8") as handle:
                raw = handle.read()
        except UnicodeDecodeError as e:
            raise fail(DataError, path, "UTF-8 text", f"{type(e).__name__}: {e}") from None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = None  # JSONL in a .json file
        if isinstance(value, dict) and "data" in value:
            yield from _squad_rows(path, raw, value)
            return
    yield from file_rows(path, "jsonl")


def _answer_list(row: dict, where: str) -> list[tuple[str, int]]:
    """``(text, answer_start)`` of a row's answers, in either layout; none for ``"is_impossible": true``."""
    if row.get("is_impossible") is True:
        return []
    answers = row.get("answers")
    if isinstance(answers, dict):  # Hugging Face datasets: {"text": [...], "answer_start": [...]}
        texts, starts = answers.get("text"), answers.get("answer_start")
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise fail(DataError, where, '"answers": {"text": [...], "answer_start": [...]} of equal lengths',
                       repr(answers)[:80])
        answers = [{"text": text, "answer_start": start} for text, start in zip(texts, starts, strict=True)]
    if not isinstance(answers, list):
        raise fail(DataError, where, '"answers": a list of {"text", "answer_start"} ([] for no answer)',
                   repr(answers)[:80])
    out = []
    for answer in answers:
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str) or isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise fail(DataError, where, 'each answer {"text": a string, "answer_start": an int >= 0}',
                       repr(answer)[:80])
        if not text.strip():
            raise fail(DataError, where, "an answer text", "an empty one",
                       'an unanswerable question has "answers": [] (or "is_impossible": true)')
        out.append((text, start))
    return out


def _placed(context: str, text: str, start: int, where: str, strict: bool) -> tuple[Answer, bool]:
    """An answer's offsets, and whether it was moved: at ``start`` where its text is there; else, unless ``strict``,
    where its text is nearest in the context. A DataError for offsets past the context, or a text not in place."""
    end = start + len(text)
    if end > len(context):
        raise fail(DataError, where, f"an answer within its context of {len(context)} characters",
                   f"{text[:40]!r} at answer_start {start}, ending at {end}", "check answer_start")
    if context[start:end] == text:
        return (start, end), False
    places = [i for i in range(len(context) - len(text) + 1) if context.startswith(text, i)]
    if strict or not places:
        elsewhere = f"; the text is at {places[0]}" if places else ", and the text is nowhere in the context"
        raise fail(DataError, where, f"an answer that is in its context: {text[:40]!r} at answer_start {start}",
                   f"{context[start:end][:40]!r} there{elsewhere}", "fix answer_start or the answer's text")
    nearest = min(places, key=lambda i: abs(i - start))
    return (nearest, nearest + len(text)), True


def iter_qa_examples(path: str, strict: bool = False) -> Iterator[QaExample]:
    """The questions of a SQuAD JSON or a JSONL file (see the module), one at a time.

    Raises:
        DataError: naming the file and line: no question or context, an answer that is not in its context or
            whose offsets pass it, an empty answer, a file without questions.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> row = {"question": "谁?", "context": "张伟在杭州", "answers": {"text": ["张伟"], "answer_start": [0]}}
    >>> _ = open(path, "w").write(json.dumps(row) + "\\n")
    >>> next(iter_qa_examples(path)).answers
    [(0, 2)]
    """
    count = moved = 0
    for line, row in _rows(path):
        where = f"{path}:{line}"
        question, context = (get_field(row, name, where) for name in ("question", "context"))
        for name, value in (("question", question), ("context", context)):
            if not value.strip():
                raise fail(DataError, where, f"a {name}", "an empty one", "drop the question or fill it in")
        answers = []
        for text, start in _answer_list(row, where):
            answer, was_moved = _placed(context, text, start, where, strict)
            answers.append(answer)
            moved += was_moved
        count += 1
        yield QaExample(question, context, answers, str(row.get("id", "")), line)
    if moved:
        logger.warning("%s: %d answers were not at their answer_start and were moved to where their text is nearest "
                       "in the context (--strict: an error)", path, moved)
    if not count:
        raise fail(DataError, path, "at least one question", "an empty file" if not os.path.getsize(path) else "none")


def examples_of_rows(tokenizer: Tokenizer | None, rows: Sequence[dict]) -> list[QaExample]:
    """Unlabelled examples of ``{"question", "context"}`` rows (an ``"id"`` kept), for prediction.

    Example:
    >>> examples_of_rows(None, [{"question": "谁?", "context": "张伟"}])[0].context
    '张伟'
    """
    out = []
    for i, row in enumerate(rows):
        question, context = (get_field(row, name, f"row {i}") for name in ("question", "context"))
        out.append(QaExample(question, context, [], str(row.get("id", "")), i + 1))
    return out


# ---------------------------------------------------------------------------- encoding


def qa_stride(maxlen: int, stride: int | None) -> int:
    """The context pieces consecutive windows share: ``stride``, or ``maxlen // 4`` when None.

    Example:
    >>> qa_stride(384, None), qa_stride(384, 128)
    (96, 128)
    """
    return maxlen // 4 if stride is None else stride


def question_room(maxlen: int, stride: int, max_query_length: int) -> int:
    """The most word pieces a question keeps: ``max_query_length``, and fewer where a row would not hold
    ``[CLS]``, the question, two ``[SEP]`` and a window of ``stride + 1`` context pieces.

    Example:
    >>> question_room(384, 96, 64), question_room(32, 8, 64)
    (64, 20)
    >>> question_room(16, 12, 64)
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --stride: expected at most maxlen - 5 = 11 for qa (a row holds [CLS], a question \
piece, two [SEP] and a window of stride + 1 context pieces), found 12. lower --stride or raise --maxlen
    """
    check_stride(stride)
    if stride > maxlen - 5:
        raise fail(ConfigError, "--stride", f"at most maxlen - 5 = {maxlen - 5} for qa (a row holds [CLS], a question "
                   "piece, two [SEP] and a window of stride + 1 context pieces)", str(stride),
                   "lower --stride or raise --maxlen")
    return min(max_query_length, maxlen - 4 - stride)


def pointer_labels(length: int, start: int, end: int) -> list[int]:
    """One int per position of a row of ``length`` tokens: ``REAL`` (1), ``START`` (2) at ``start``, ``END`` (3) at
    ``end``, ``BOTH`` (4) where they meet; the padding of a batch is ``PADDING`` (0).

    Example:
    >>> pointer_labels(5, 2, 3), pointer_labels(3, 0, 0)
    ([1, 1, 2, 3, 1], [4, 1, 1])
    """
    row = [REAL] * length
    row[start], row[end] = START, END
    if start == end:
        row[start] = BOTH
    return row


@dataclass
class QaFeatures(Features):
    """`Features` of the qa task: one row per window of a context (``windows``, a `Window` each, its ``document``
    the example), ``labels`` `pointer_labels` rows.

    Args:
        offsets: list of list of ``(start, end)``. per example, each context piece's character span.
        context_starts: list of int. per row, the position of its first context piece (after the question).
        unplaced: int. answers not on word pieces (made only of characters the tokenizer drops).
    """

    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    context_starts: list[int] = field(default_factory=list)
    unplaced: int = 0


def _answer_pieces(answer: Answer, offsets: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The first and last context piece an answer's characters touch, None where none does."""
    a, b = answer
    touched = [i for i, (start, end) in enumerate(offsets) if start < b and end > a]
    return (touched[0], touched[-1]) if touched else None


def encode_qa(tokenizer: Tokenizer, examples: Sequence[QaExample], maxlen: int, stride: int | None = None,
              max_query_length: int = 64, labels: bool = False, what: str = "data") -> QaFeatures:
    """Each example as the rows ``[CLS] question [SEP] window [SEP]`` of its context's windows (see the module), or
    the tokenizer's own pair layout (`kerasbert.text.tokenizer_base.BaseTokenizer.pair_row`: RoBERTa's
    ``<s> question </s></s> window </s>``).

    Args:
        tokenizer: Tokenizer. the run's tokenizer.
        examples: sequence of QaExample. the questions.
        maxlen: int. the most tokens of a row.
        stride: int or None. the context pieces consecutive windows share (`qa_stride`).
        max_query_length: int. the most pieces of a question (`question_room`).
        labels: bool. add each row's target, the first answer's pieces or ``[CLS]`` (`pointer_labels`).
        what: str. the data named in the logs.
    """
    stride = qa_stride(maxlen, stride)
    extra = len(tokenizer.pair_row([], [])[0]) - 3  # special tokens beyond BERT's three (RoBERTa's </s></s>)
    room = question_room(maxlen - extra, stride, max_query_length)
    questions = piece_offsets(tokenizer, [example.question for example in examples])
    contexts = piece_offsets(tokenizer, [example.context for example in examples])
    warn_unknown(tokenizer, [ids for ids, _ in contexts], [example.context for example in examples], what)
    features = QaFeatures([], [], [] if labels else None, windows=[], offsets=[offsets for _, offsets in contexts])
    for d, (example, (question, _), (context, offsets)) in enumerate(zip(examples, questions, contexts, strict=True)):
        question = question[:room]
        empty, _, first = tokenizer.pair_row(question, [])  # the row without context; where the context starts
        target = _answer_pieces(example.answers[0], offsets) if labels and example.answers else None
        features.unplaced += bool(labels and example.answers and target is None)
        for start, end in piece_ranges(len(context), maxlen - len(empty), stride):
            ids, segments, _ = tokenizer.pair_row(question, context[start:end])  # the tokenizer's pair layout
            features.token_ids.append(ids)
            features.segment_ids.append(segments)
            features.windows.append(Window(d, start, end))
            features.context_starts.append(first)
            if labels:
                inside = target is not None and start <= target[0] and target[1] < end
                at = (first + target[0] - start, first + target[1] - start) if inside else (0, 0)
                features.labels.append(pointer_labels(len(ids), *at))
    if features.unplaced:
        logger.warning("%s: %d answers lie on no word piece and are trained as no answer", what, features.unplaced)
    if len(features) > len(examples):
        logger.info("%s: %d questions in %d rows: contexts split into windows sharing %d word pieces", what,
                    len(examples), len(features), stride)
    return features


# ---------------------------------------------------------------------------- decoding


def _window_best(logits: np.ndarray, first: int, count: int, most: int) -> tuple[int, int, float]:
    """The best span ``(start, end, score)`` of one row's logits ``[S, 2]`` over its ``count`` context pieces from
    position ``first``: the highest start plus end logit (float32) with ``start <= end < start + most``, the first
    in (start, end) order on a tie; ``(-1, -1, -inf)`` without context."""
    starts = np.asarray(logits[first:first + count, 0], np.float32)
    ends = np.concatenate([np.asarray(logits[first:first + count, 1], np.float32),
                           np.full(most - 1, -np.inf, np.float32)])
    if not count:
        return -1, -1, -np.inf
    scores = starts[:, None] + np.lib.stride_tricks.sliding_window_view(ends, most)  # [i, k]: span i .. i + k
    best = int(np.argmax(scores))
    i, k = divmod(best, most)
    return first + i, first + i + k, float(scores[i, k])


def best_answer(logits: Sequence[np.ndarray], features: QaFeatures, document: int, max_answer_length: int,
                null_answers: bool, rows: Sequence[int] | None = None) -> tuple[int, int, float]:
    """One example's answer ``(start, end, score)`` in characters of its context (`NO_ANSWER` and the null score for
    none) from the logits ``[S, 2]`` of its rows (``rows``: their indices in ``features``, default all): the best
    span over the windows, the earliest window on a tie (`_window_best`); with ``null_answers``, none where the null
    score (the lowest ``[CLS]`` start plus end logit of the windows) is higher."""
    rows = [i for i, window in enumerate(features.windows) if window.document == document] if rows is None else rows
    best, null = (-1, -1, -np.inf), np.inf
    for row, values in zip(rows, logits, strict=True):
        window, first = features.windows[row], features.context_starts[row]
        null = min(null, float(np.float32(values[0, 0]) + np.float32(values[0, 1])))
        start, end, score = _window_best(values, first, window.end - window.start, max_answer_length)
        if score > best[2]:
            best = window.start + start - first, window.start + end - first, score
    if best[2] == -np.inf or (null_answers and null > best[2]):
        return (*NO_ANSWER, null)
    offsets = features.offsets[document]
    return offsets[best[0]][0], offsets[best[1]][1], best[2]


def answer_row(context: str, answer: tuple[int, int, float]) -> dict:
    """A prediction row ``{"answer", "start", "end", "score"}`` of a `best_answer`.

    Example:
    >>> answer_row("张伟在杭州", (3, 5, 2.5)), answer_row("张伟在杭州", (-1, -1, 0.5))["answer"]
    ({'answer': '杭州', 'start': 3, 'end': 5, 'score': 2.5}, '')
    """
    start, end, score = answer
    return {"answer": context[start:end] if start >= 0 else "", "start": int(start), "end": int(end),
            "score": float(score)}


def qa_predictions(examples: Sequence[QaExample], features: QaFeatures, logits: Sequence[np.ndarray],
                   max_answer_length: int, null_answers: bool) -> list[dict]:
    """One `answer_row` per example from the logits ``[S, 2]`` of every row of ``features``."""
    by_document: list[list[int]] = [[] for _ in examples]
    for row, window in enumerate(features.windows):
        by_document[window.document].append(row)
    return [answer_row(example.context, best_answer([logits[i] for i in rows], features, d, max_answer_length,
                                                    null_answers, rows))
            for d, (example, rows) in enumerate(zip(examples, by_document, strict=True))]


# ---------------------------------------------------------------------------- exports


def export_info(loaded) -> dict:
    """What a qa export reads beside the labels (`kerasbert.serving.task_exports`): the question's and answer's
    lengths, whether a question may have no answer, and the stride its contexts' windows share (`qa_stride`)."""
    args = loaded.args
    return {"max_query_length": args.max_query_length, "max_answer_length": args.max_answer_length,
            "null_answers": bool(args.null_answers), "qa_stride": qa_stride(args.maxlen, args.stride)}


def answer_rows(info: dict, rows: Sequence[dict], outputs: dict) -> list[dict]:
    """The prediction of each row from a qa SavedModel's ``serving_default`` outputs (numpy).

    Example:
    >>> outputs = {"answer": np.array([b"\\xe6\\x9d\\xad\\xe5\\xb7\\x9e"]), "start": np.array([3]),
    ...            "end": np.array([5]), "score": np.array([2.5], np.float32)}
    >>> answer_rows({}, [{"question": "在哪?", "context": "张伟在杭州"}], outputs)
    [{'answer': '杭州', 'start': 3, 'end': 5, 'score': 2.5}]
    """
    return [{"answer": outputs["answer"][i].decode(), "start": int(outputs["start"][i]),
             "end": int(outputs["end"][i]), "score": float(outputs["score"][i])} for i in range(len(rows))]


def portable_predict(export, examples: Sequence[QaExample], batch_size: int) -> list[dict]:
    """An OpenVINO or ONNX export's answers (`kerasbert.serving.runtime.PortableExport`): its rows run in batches of
    similar length (`PortableExport.run_features`), their logits decoded as `qa_predictions` decodes a run's."""
    info = export.info
    features = encode_qa(export.tokenizer, examples, info["maxlen"], info.get("stride"), info["max_query_length"],
                         what="input")
    logits = export.run_features(features, batch_size)
    return qa_predictions(examples, features, logits, info["max_answer_length"], info["null_answers"])
