"""The SavedModel of a qa run: the tokenizer, the context's windows, the model and the answer in one graph.

``serving_default`` takes ``question`` and ``context`` (batches of strings) and answers ``answer`` (a string, ``""``
for none), ``start`` and ``end`` (character offsets into the context, ``end`` exclusive; -1 for none) and ``score``
(the answer's start plus end logit; the null score for none). In the graph, as `kerasbert.text.qa_data` does it in
NumPy for ``kerasbert predict``: the question is cut to its room (`kerasbert.text.qa_data.question_room`), the
context split into windows sharing the run's stride (`kerasbert.text.qa_data.qa_stride`), each row ``[CLS] question
[SEP] window [SEP]`` (`qa_windows`); the model runs on every window of the batch at once, and the answer is the span
of the highest start plus end logit over a context's windows, at most ``max_answer_length`` pieces, the first on a
tie, and none where the run has null answers and the null score beats it (`window_answers`). ``ids`` takes
``token_ids`` and ``segment_ids`` and answers ``logits`` ``[batch, seq, 2]`` (each position's start and end logit).
"""

from __future__ import annotations

import tensorflow as tf

from kerasbert.serving.graph_text import GraphTokenizer
from kerasbert.text.qa_data import qa_stride, question_room

__all__ = ["qa_windows", "served_qa", "window_answers"]


def _pick(values: tf.Tensor, at: tf.Tensor, valid: tf.Tensor, otherwise) -> tf.Tensor:
    """``values[at]`` where ``valid``, else ``otherwise`` (``at`` may be out of range there)."""
    padded = tf.concat([values, tf.constant([otherwise], values.dtype)], 0)
    return tf.gather(padded, tf.where(valid, at, tf.size(values, tf.int64)))


def qa_windows(question: dict, context: dict, maxlen: int, stride: int, room: int, cls: int, sep: int) -> dict:
    """The rows ``[CLS] question [SEP] window [SEP]`` of a batch's questions and contexts.

    Args:
        question: dict of tensors. `GraphTokenizer.pieces` of the questions (``token_ids``, ``count``).
        context: dict of tensors. `GraphTokenizer.pieces` of the contexts.
        maxlen: int. the most tokens of a row.
        stride: int. the context pieces consecutive windows share.
        room: int. the most pieces of a question.
        cls: int. the id of [CLS].
        sep: int. the id of [SEP].

    Returns:
        dict of tensors: ``token_ids`` and ``segment_ids`` ``[windows, longest]``; per window (int64) its
        ``document``, the context pieces ``start:end`` it holds and ``first``, its first context piece's position;
        ``context_first`` ``[texts]``, each context's first piece in ``context``'s flat pieces.
    """
    kept = tf.minimum(tf.cast(question["count"], tf.int64), room)
    first = kept + 2
    size = maxlen - 1 - first  # the context pieces of a window
    step = size - stride
    count = tf.cast(context["count"], tf.int64)
    index = tf.ragged.range(1 + (tf.maximum(count - size, 0) + step - 1) // step)  # as `piece_ranges`
    document = index.value_rowids()
    start = index.flat_values * tf.gather(step, document)
    end = tf.minimum(start + tf.gather(size, document), tf.gather(count, document))
    window_first = tf.gather(first, document)
    items = tf.ragged.range(window_first + end - start + 1)
    row, position = items.value_rowids(), items.flat_values
    at_first, owner = tf.gather(window_first, row), tf.gather(document, row)
    in_question = (position >= 1) & (position < at_first - 1)
    in_context = (position >= at_first) & (position < tf.gather(window_first + end - start, row))
    question_at = tf.gather(tf.cumsum(tf.cast(question["count"], tf.int64), exclusive=True), owner) + position - 1
    context_first = tf.cumsum(count, exclusive=True)
    context_at = tf.gather(context_first, owner) + tf.gather(start, row) + position - at_first
    ids = tf.where(in_question, _pick(question["token_ids"], question_at, in_question, sep),
                   _pick(context["token_ids"], context_at, in_context, sep))
    ids = tf.where(tf.equal(position, 0), tf.constant(cls, ids.dtype), ids)
    segments = tf.cast(position >= at_first, tf.int32)
    nrows = tf.size(document, tf.int64)
    return {"token_ids": tf.RaggedTensor.from_value_rowids(ids, row, nrows, validate=False).to_tensor(0),
            "segment_ids": tf.RaggedTensor.from_value_rowids(segments, row, nrows, validate=False).to_tensor(0),
            "document": document, "start": start, "end": end, "first": window_first, "context_first": context_first}


def window_answers(context_text: tf.Tensor, logits: tf.Tensor, windows: dict, context: dict, most: int,
                   null_answers: bool) -> dict:
    """The answer of each context from the logits ``[windows, seq, 2]`` of its windows (`qa_windows`'), as
    `kerasbert.text.qa_data.best_answer` reads them: ``answer``, ``start``, ``end``, ``score``."""
    logits = tf.cast(logits, tf.float32)
    starts, ends = logits[..., 0], logits[..., 1]
    length = tf.shape(logits, tf.int64)[1]
    position = tf.range(length)[:, None] + tf.range(most, dtype=tf.int64)[None]  # [seq, most]: span i .. i + k
    last = (windows["first"] + windows["end"] - windows["start"])[:, None, None]  # past the window's context
    valid = (position[None, :, :1] >= windows["first"][:, None, None]) & (position[None] < last)
    padded = tf.concat([ends, tf.fill([tf.shape(ends)[0], most - 1], float("-inf"))], 1)
    scores = tf.where(valid, starts[:, :, None] + tf.gather(padded, position, axis=1), float("-inf"))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    lowest = tf.float32.min  # no span: the segment ops' own start, which -inf would not reach
    best, at = tf.maximum(tf.reduce_max(flat, 1), lowest), tf.argmax(flat, 1)
    texts = tf.size(context_text, tf.int64)
    top = tf.math.unsorted_segment_max(best, windows["document"], texts)
    mine = tf.equal(best, tf.gather(top, windows["document"]))
    chosen = tf.math.unsorted_segment_min(tf.where(mine, tf.range(tf.size(best, tf.int64)), tf.size(best, tf.int64)),
                                          windows["document"], texts)  # the earliest window of the best score
    null = tf.math.unsorted_segment_min(starts[:, 0] + ends[:, 0], windows["document"], texts)
    none = tf.equal(top, lowest) | ((null > top) if null_answers else tf.zeros_like(top, tf.bool))
    chosen = tf.where(none, tf.zeros_like(chosen), chosen)
    span_at = tf.gather(at, chosen)
    piece = windows["context_first"] + tf.gather(windows["start"] - windows["first"], chosen) + span_at // most
    start = _pick(context["starts"], piece, ~none, -1)
    end = _pick(context["ends"], piece + span_at % most, ~none, -1)
    answer = tf.strings.substr(context_text, tf.maximum(start, 0), tf.maximum(end - start, 0), unit="UTF8_CHAR")
    return {"answer": tf.where(none, "", answer), "start": start, "end": end, "score": tf.where(none, null, top)}


def served_qa(loaded, vocab: list[str], maxlen: int, info: dict):
    """The tf.Module to save for a qa run (`kerasbert.finetune.runs.LoadedRun`) and its two signatures
    (`kerasbert.serving.task_exports`)."""
    args = loaded.args
    stride = qa_stride(maxlen, args.stride)
    room = question_room(maxlen, stride, args.max_query_length)
    module = tf.Module()
    module.model = loaded.model
    module.tokenizer = GraphTokenizer(vocab, lowercase=bool(args.lowercase), maxlen=maxlen)
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")

    def ids(token_ids, segment_ids) -> dict:
        return {"logits": tf.cast(module.model([token_ids, segment_ids], training=False), tf.float32)}

    def on_text(question, context) -> dict:
        pieces = module.tokenizer.pieces(context)
        windows = qa_windows(module.tokenizer.pieces(question), pieces, maxlen, stride, room, cls, sep)
        logits = ids(windows["token_ids"], windows["segment_ids"])["logits"]
        return window_answers(context, logits, windows, pieces, args.max_answer_length, bool(args.null_answers))

    texts = [tf.TensorSpec([None], tf.string, name=name) for name in ("question", "context")]
    module.serve_text = tf.function(on_text, input_signature=texts)
    module.serve_ids = tf.function(ids, input_signature=[tf.TensorSpec([None, None], tf.int32, name=name)
                                                         for name in ("token_ids", "segment_ids")])
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
