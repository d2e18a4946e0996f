"""Evaluation metrics: sentence classification, entity-level NER, generated text and sentence-pair similarity,
plus a printable table.

Entity metrics compare sets of ``(start, end, label)`` spans per sentence; a predicted entity
counts only when start, end and label all match a gold entity (the CoNLL rule, as in seqeval).
Every ratio with a zero denominator is 0, like scikit-learn's and seqeval's ``zero_division=0``.

Example:
>>> m = entity_metrics([[(0, 2, "PER")]], [[(0, 2, "PER"), (3, 4, "LOC")]])
>>> m["precision"], m["recall"]
(0.5, 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail

Span = tuple[int, int, str]


def _ratio(num: float, den: float) -> float:
    """``num / den``, or 0.0 when ``den`` is 0."""
    return float(num) / den if den else 0.0


def _prf(correct: int, n_pred: int, n_gold: int) -> dict:
    """Precision, recall and F1 from counts; every zero division gives 0."""
    precision, recall = _ratio(correct, n_pred), _ratio(correct, n_gold)
    return {"precision": precision, "recall": recall, "f1": _ratio(2 * precision * recall, precision + recall),
            "support": int(n_gold)}


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int], labels: Sequence[str]) -> dict:
    """Accuracy, macro-F1, per-label scores and the confusion matrix of a classifier.

    Macro-F1 is the plain mean of the per-label F1 over *every* label in ``labels``. A label
    with no gold example and no prediction has precision, recall and F1 of 0 (scikit-learn's
    ``zero_division=0``), so it pulls the mean down.

    Args:
        y_true: sequence of int. gold label ids, each in ``range(len(labels))``.
        y_pred: sequence of int. predicted label ids, same length as ``y_true``.
        labels: sequence of str. the label names, indexed by id.

    Returns:
        dict. ``accuracy`` (float), ``macro_f1`` (float), ``per_label`` (label name to a dict of
        ``precision``, ``recall``, ``f1``, ``support``) and ``confusion`` (list of lists of int,
        rows are gold labels, columns predicted labels).

    Raises:
        DataError: the two sequences differ in length, or an id is outside the label range.

    Example:
    >>> m = classification_metrics([0, 0, 1, 2], [0, 1, 1, 2], ["neg", "neu", "pos"])
    >>> m["accuracy"], m["confusion"]
    (0.75, [[1, 1, 0], [0, 1, 0], [0, 0, 1]])
    >>> round(m["macro_f1"], 4)
    0.7778
    """
    true, pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    if true.shape != pred.shape or true.ndim != 1:
        raise fail(DataError, "y_pred", f"one id per gold label ({true.size})", f"{pred.size} ids")
    n = len(labels)
    for name, ids in (("y_true", true), ("y_pred", pred)):
        bad = ids[(ids < 0) | (ids >= n)]
        if bad.size:
            raise fail(DataError, name, f"label ids in 0..{n - 1}", f"id {int(bad[0])}")
    confusion = np.zeros((n, n), dtype=np.int64)  # (true, predicted)
    np.add.at(confusion, (true, pred), 1)
    diag, n_gold, n_pred = np.diag(confusion), confusion.sum(axis=1), confusion.sum(axis=0)
    per_label = {label: _prf(diag[i], n_pred[i], n_gold[i]) for i, label in enumerate(labels)}
    return {
        "accuracy": _ratio(diag.sum(), true.size),
        "macro_f1": float(np.mean([s["f1"] for s in per_label.values()])) if n else 0.0,
        "per_label": per_label,
        "confusion": confusion.tolist(),
    }


def entity_metrics(gold: Sequence[Sequence[Span]], pred: Sequence[Sequence[Span]]) -> dict:
    """Entity-level precision, recall and F1 (micro, macro and per type) on exact span matches.

    Each sentence's gold and predicted spans are compared as sets; a prediction is correct
    only when ``(start, end, label)`` equals a gold span. Types are the sorted union of the gold
    and predicted labels; macro scores are plain means over them. Zero divisions give 0.

    Args:
        gold: sequence of sequences of ``(start, end, label)``. gold spans, one list per sentence.
        pred: sequence of sequences of ``(start, end, label)``. predicted spans, same sentences.

    Returns:
        dict. micro ``precision``, ``recall``, ``f1``; ``macro_precision``, ``macro_recall``,
        ``macro_f1``; ``per_type`` (type to ``precision``, ``recall``, ``f1``, ``support``, the
        support being the number of gold entities of that type).

    Raises:
        DataError: ``gold`` and ``pred`` hold different numbers of sentences.

    Example:
    >>> m = entity_metrics([[(0, 2, "PER"), (5, 7, "LOC")]], [[(0, 2, "PER"), (5, 6, "LOC")]])
    >>> m["f1"], m["per_type"]["LOC"]["f1"], m["macro_f1"]
    (0.5, 0.0, 0.5)
    """
    if len(gold) != len(pred):
        raise fail(DataError, "pred", f"one span list per gold sentence ({len(gold)})", f"{len(pred)} sentences")
    counts: dict[str, list[int]] = {}  # type -> [correct, predicted, gold]
    for gold_spans, pred_spans in zip(gold, pred, strict=True):
        gold_set, pred_set = {tuple(s) for s in gold_spans}, {tuple(s) for s in pred_spans}
        for column, spans in ((0, gold_set & pred_set), (1, pred_set), (2, gold_set)):
            for _, _, label in spans:
                counts.setdefault(label, [0, 0, 0])[column] += 1
    per_type = {label: _prf(*counts[label]) for label in sorted(counts)}
    micro = _prf(*(sum(c[i] for c in counts.values()) for i in range(3)))

    def mean(key: str) -> float:
        return float(np.mean([s[key] for s in per_type.values()])) if per_type else 0.0

    return {"precision": micro["precision"], "recall": micro["recall"], "f1": micro["f1"],
            "macro_precision": mean("precision"), "macro_recall": mean("recall"), "macro_f1": mean("f1"),
            "per_type": per_type}


def per_type_table(metrics: dict) -> str:
    """Format :func:`entity_metrics` output as an aligned plain-text table.

    One row per type, then ``micro`` and ``macro`` rows (their support is the total number of
    gold entities); scores have 4 decimals.

    Args:
        metrics: dict. the result of :func:`entity_metrics`.

    Returns:
        str. the table, lines joined by ``\\n``, with no trailing newline.

    Example:
    >>> print(per_type_table(entity_metrics([[(0, 2, "PER")]], [[(0, 2, "PER"), (3, 4, "LOC")]])))
    type   precision  recall      f1  support
    LOC       0.0000  0.0000  0.0000        0
    PER       1.0000  1.0000  1.0000        1
    micro     0.5000  1.0000  0.6667        1
    macro     0.5000  0.5000  0.5000        1
    """
    per_type = metrics["per_type"]
    total = sum(s["support"] for s in per_type.values())
    rows = [(name, s["precision"], s["recall"], s["f1"], s["support"]) for name, s in per_type.items()]
    rows.append(("micro", metrics["precision"], metrics["recall"], metrics["f1"], total))
    rows.append(("macro", metrics["macro_precision"], metrics["macro_recall"], metrics["macro_f1"], total))
    width = max(len("type"), *(len(str(row[0])) for row in rows))
    lines = [f"{'type':<{width}}  precision  recall      f1  support"]
    lines += [f"{name:<{width}}  {p:9.4f}  {r:6.4f}  {f:6.4f}  {n:7d}" for name, p, r, f, n in rows]
    return "\n".join(lines)


def generation_metrics(references: Sequence[str], hypotheses: Sequence[str]) -> dict:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 on characters, each the mean over the examples, and corpus BLEU on
    characters: the scores of a generated text against its reference, for Chinese as bert4keras's seq2seq
    examples score them (every character a token).

    ROUGE is Google's ``rouge-score`` fed characters (its own tokenizer keeps only ASCII letters and digits);
    BLEU is ``sacrebleu``'s corpus BLEU with its ``zh`` tokenization (each Chinese character a word, other text
    split as in 13a), as a ratio in [0, 1]. Spaces are not tokens.

    Example:
    >>> m = generation_metrics(["我爱北京天安门"], ["我爱北京"])
    >>> round(m["rouge_1"], 4), round(m["rouge_2"], 4), round(m["rouge_l"], 4), round(m["bleu"], 4)
    (0.7273, 0.6667, 0.7273, 0.4724)
    """
    if len(references) != len(hypotheses) or not references:
        raise fail(DataError, "generation_metrics", "one hypothesis per reference, at least one",
                   f"{len(hypotheses)} hypotheses for {len(references)} references")
    rouge_scorer, sacrebleu = seq2seq_libraries()
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=_Characters())
    scores = [scorer.score(reference, hypothesis) for reference, hypothesis in zip(references, hypotheses,
                                                                                   strict=True)]
    result = {f"rouge_{key[5:].lower()}": float(np.mean([s[key].fmeasure for s in scores]))
              for key in ("rouge1", "rouge2", "rougeL")}
    bleu = sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize="zh")
    return {**result, "bleu": bleu.score / 100, "count": len(references)}


class _Characters:
    """rouge-score's tokenizer interface: every character but spaces a token."""

    def tokenize(self, text: str) -> list[str]:
        return [char for char in text if not char.isspace()]


def seq2seq_libraries():
    """``(rouge_score.rouge_scorer, sacrebleu)``; a ConfigError naming the extra that installs them."""
    try:
        import sacrebleu
        from rouge_score import rouge_scorer
    except ImportError as error:
        raise fail(ConfigError, "--task seq2seq", "rouge-score and sacrebleu to score generated text",
                   f"{error.name} is not installed", "pip install 'kerasbert[seq2seq]'") from None
    return rouge_scorer, sacrebleu


def ranks(values: Sequence[float]) -> np.ndarray:
    """The 1-based rank of each value, tied values each given the mean of the ranks they share (scipy's
    ``rankdata(method="average")``).

    Example:
    >>> ranks([0.3, 0.1, 0.3, 0.2]).tolist()
    [3.5, 1.0, 3.5, 2.0]
    """
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # where each run of equal values starts
    ends = np.r_[starts[1:], len(values)]
    found = np.empty(len(values))
    found[order] = np.repeat((starts + 1 + ends) / 2, ends - starts)  # the mean of ranks start + 1 .. end
    return found


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the two `ranks` (ties averaged); NaN when either
    is constant, as scipy's ``spearmanr``.

    Example:
    >>> spearman([1, 2, 3, 4], [0.1, 0.4, 0.2, 0.9])
    0.8
    """
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    scale = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / scale) if scale else float("nan")


def best_threshold_accuracy(similarities: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """The best accuracy a threshold gives on these pairs, and that threshold: ``similar`` when the similarity is
    at least the threshold, the threshold halfway between the two similarities it separates (the lowest when every
    pair is called similar, just above the highest when none is); the lowest threshold of equal accuracy.

    Example:
    >>> best_threshold_accuracy([0.875, 0.25, 0.75, 0.5], [1, 0, 1, 1])
    (1.0, 0.375)
    """
    s = np.asarray(similarities, np.float64)
    order = np.argsort(s, kind="stable")
    s, similar = s[order], np.asarray(labels)[order] == 1
    # calling the k lowest dissimilar and the rest similar is right for the dissimilar among the k lowest and the
    # similar after them; k may only fall between two different similarities
    right = np.r_[0, np.cumsum(~similar)] + np.r_[np.cumsum(similar[::-1])[::-1], 0]
    k = int(np.argmax(np.where(np.r_[True, s[1:] > s[:-1], True], right, -1)))
    threshold = s[0] if k == 0 else np.nextafter(s[-1], np.inf) if k == len(s) else (s[k - 1] + s[k]) / 2
    return float(right[k] / len(s)), float(threshold)


def similarity_metrics(labels: Sequence[float], similarities: Sequence[float]) -> dict:
    """The scores of sentence-pair similarities against their labels: ``spearman`` (`spearman`), ``count``, and,
    where every label is 0 or 1, ``accuracy`` and ``threshold`` (`best_threshold_accuracy`).

    Example:
    >>> scores = similarity_metrics([1, 0, 1, 1], [0.875, 0.25, 0.75, 0.5])
    >>> round(scores["spearman"], 4), scores["accuracy"], scores["threshold"]
    (0.7746, 1.0, 0.375)
    """
    if len(labels) != len(similarities) or not len(labels):
        raise fail(DataError, "similarity_metrics", "one similarity per label, at least one",
                   f"{len(similarities)} similarities for {len(labels)} labels")
    scores = {"spearman": spearman(similarities, labels), "count": len(labels)}
    if set(np.unique(np.asarray(labels, np.float64)).tolist()) <= {0.0, 1.0}:
        scores["accuracy"], scores["threshold"] = best_threshold_accuracy(similarities, labels)
    return scores


def score_text(scores: dict) -> str:
    """A run's scores as ``kerasbert train``, ``evaluate`` and ``demo`` print them: each task's own line (the
    per-type table of entities; ROUGE and BLEU; perplexity; ...), else each number by its key.

    Example:
    >>> score_text({"accuracy": 0.5, "macro_f1": 0.25})
    'accuracy 0.5000  macro-F1 0.2500'
    >>> score_text({"exact": 0.5, "f1": 0.75, "metric": "squad"})
    'exact 0.5000  f1 0.7500'
    """
    if "per_type" in scores:
        return per_type_table(scores)
    if "rouge_l" in scores:
        return "  ".join(f"{key.replace('_', '-').upper()} {scores[key]:.4f}"
                         for key in ("rouge_1", "rouge_2", "rouge_l", "bleu"))
    if "perplexity" in scores:  # a language model's held-out next tokens
        return (f"loss {scores['loss']:.4f}  perplexity {scores['perplexity']:.4f}  accuracy {scores['accuracy']:.4f}"
                f"  ({scores['count']} tokens)")
    if "count" in scores and "loss" in scores:  # a pretraining run's held-out masked LM
        nsp = f"  next sentence accuracy {scores['nsp_accuracy']:.4f}" if "nsp_accuracy" in scores else ""
        return (f"masked-LM loss {scores.get('mlm_loss', scores['loss']):.4f}  accuracy {scores['accuracy']:.4f}  "
                f"({scores['count']} pieces){nsp}")
    if "spearman" in scores:
        return f"Spearman {scores['spearman']:.4f}" + (f"  accuracy {scores['accuracy']:.4f} at threshold "
                                                        f"{scores['threshold']:.4f}" if "accuracy" in scores else "")
    if "mrr_at_10" in scores:  # a reranker's, per query
        left_out = f"; {scores['no_relevant']} without a relevant passage left out" if scores["no_relevant"] else ""
        return (f"MRR@10 {scores['mrr_at_10']:.4f}  nDCG@10 {scores['ndcg_at_10']:.4f}  ({scores['count']} queries"
                f"{left_out})")
    if "macro_f1" in scores and "accuracy" in scores:
        return f"accuracy {scores['accuracy']:.4f}  macro-F1 {scores['macro_f1']:.4f}"
    return "  ".join(f"{key} {value:.4f}" for key, value in scores.items()  # a task's own scores, each a number
                     if isinstance(value, (int, float)) and not isinstance(value, bool))
