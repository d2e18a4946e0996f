"""``kerasbert rerank`` and `rerank`: a query's passages ordered by a rerank run's (or export's) scores, best first.

A retriever's candidates for one query (`kerasbert.embed`'s nearest vectors, a search engine's hits) are scored by
the cross-encoder pair by pair, ``[CLS] query [SEP] passage [SEP]`` (`kerasbert.finetune.rerank`), and sorted by
score; a tie keeps the input's order. The model is a run folder of ``--task rerank`` or an export of one (a
SavedModel, or an OpenVINO or ONNX export, which runs without TensorFlow). Importing this module imports no
TensorFlow: the command's checks answer before it starts.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import numpy as np

from kerasbert.choices import PREDICT_BATCH_SIZE
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.serving.folder import EXPORT_INFO, read_info
from kerasbert.text.readers import file_rows, get_field, read_texts

__all__ = ["Reranker", "check_rerank", "open_reranker", "read_passages", "rerank", "rerank_arguments", "run_rerank"]

TASK = "rerank"


def _is_export(path: str) -> bool:
    return os.path.isfile(os.path.join(path, EXPORT_INFO))


def check_model(path: str) -> None:
    """A ConfigError unless ``path`` is a finished run of ``--task rerank`` or an export of one, before it loads.

    Example:
    >>> check_model("/no/run")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/run: expected a kerasbert run folder with args.json, found no args.json...
    """
    if _is_export(path):
        read_info(path, TASK)
        return
    from kerasbert.finetune.runs import finished_run

    task = finished_run(path).task
    if task != TASK:
        raise fail(ConfigError, path, f"a run of --task {TASK} (a cross-encoder) or an export of one",
                   f"a run of --task {task}", "train one with `kerasbert train --task rerank`")


def check_query(query: object, name: str = "query") -> str:
    """``query`` itself, or a ConfigError naming ``name`` unless it is a string with something to read.

    Example:
    >>> check_query(" ", "--query")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --query: expected a query to rank the passages for, found a blank one (' ')
    """
    if not isinstance(query, str) or not query.strip():
        found = ("none" if query is None else f"a blank one ({query!r})" if isinstance(query, str)
                 else f"a {type(query).__name__}")
        raise fail(ConfigError, name, "a query to rank the passages for", found)
    return query


def _checked_passages(passages: Sequence[str], where: str = "passages") -> list[str]:
    """``passages`` as a list of strings, at least one; a DataError naming the first that is not one."""
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Sequence):
        raise fail(DataError, where, "a list of passages (strings)", f"a {type(passages).__name__}",
                   "wrap one passage in a list")
    if not passages:
        raise fail(DataError, where, "at least one passage to rank", "none")
    for i, passage in enumerate(passages):
        if not isinstance(passage, str):
            raise fail(DataError, f"{where}[{i}]", "a string", f"a {type(passage).__name__} {str(passage)[:40]}")
    return list(passages)


def read_passages(path: str) -> list[str]:
    """The passages of a file: one a line of a text file, or the ``"passage"`` (else ``"text"``) of each object of a
    ``.jsonl`` file; blank lines skipped; a DataError naming the file (and line) for a file of none or a bad row.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "passages.jsonl")
    >>> _ = open(path, "w", encoding="utf-8").write('{"passage": "张伟在华为公司工作"}\\n{"text": "张伟是杭州人"}\\n')
    >>> read_passages(path)
    ['张伟在华为公司工作', '张伟是杭州人']
    """
    with open(path, encoding="utf-8", errors="replace") as f:  # in chunks: a file of one huge line is not held
        blank = not any(chunk.strip() for chunk in iter(lambda: f.read(1 << 16), ""))
    if blank:
        raise fail(DataError, path, "at least one passage to rank (a text a line, or JSONL of {\"passage\"})",
                   "an empty file" if os.path.getsize(path) == 0 else "only blank lines")
    if not path.endswith((".jsonl", ".json")):
        return [row["text"] for row in read_texts(path)]
    passages = []
    for line, row in file_rows(path, "jsonl"):
        key = "text" if isinstance(row, dict) and "passage" not in row and "text" in row else "passage"
        passages.append(get_field(row, key, f"{path}:{line}"))
    return passages


class Reranker:
    """A rerank run folder or an export of one, opened: `scores` of a query's passages.

    Args:
        path: str. the run or export folder.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        check_model(self.path)
        if _is_export(self.path):
            from kerasbert.serving.exported import open_export

            self.served, self.loaded = open_export(self.path, TASK), None
        else:
            from kerasbert.finetune.runs import open_run

            self.served, self.loaded = None, open_run(self.path)

    def scores(self, query: str, passages: Sequence[str], batch_size: int = PREDICT_BATCH_SIZE) -> np.ndarray:
        """The score of each ``(query, passage)`` pair, float64 ``[len(passages)]``, in the passages' order."""
        rows = [{"query": query, "passage": passage} for passage in passages]
        if self.served is not None:
            predictions = self.served.predict(rows, batch_size)
        else:
            from kerasbert.finetune.runs import predict_rows

            predictions = predict_rows(self.loaded, rows, batch_size, what="passages")
        return np.array([row["score"] for row in predictions], np.float64)


def open_reranker(path: str | os.PathLike) -> Reranker:
    """A `Reranker` of a rerank run folder or an export of one; a ConfigError naming the folder for another."""
    return Reranker(path)


def rerank(model: str | os.PathLike | Reranker, query: str, passages: Sequence[str], top_k: int | None = None,
           batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
    """The passages ordered by the cross-encoder's score for ``query``, best first (a tie keeps their order).

    Args:
        model: str or Reranker. a run folder of ``--task rerank``, an export of one, or a `Reranker` already open.
        query: str. the query.
        passages: list of str. the candidates.
        top_k: int or None. keep the best ``top_k`` (None: all).
        batch_size: int. pairs the model runs at once.

    Returns:
        list of dict. ``{"passage", "score", "index"}``, ``index`` the passage's place in ``passages``.

    Example:
    >>> rerank("/no/run", "张伟在哪里工作", ["张伟在华为公司工作"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/run: expected a kerasbert run folder with args.json, found no args.json...
    """
    from kerasbert.serving.embed import check_batch_size

    query, passages = check_query(query), _checked_passages(passages)
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise fail(ConfigError, "top_k", "an integer >= 1 (or None: every passage)", repr(top_k))
    check_batch_size(batch_size, "batch_size")
    reranker = model if isinstance(model, Reranker) else open_reranker(model)
    scores = reranker.scores(query, passages, batch_size)
    order = np.argsort(-scores, kind="stable")[:top_k]
    return [{"passage": passages[i], "score": float(scores[i]), "index": int(i)} for i in order]


# ------------------------------------------------------------------------------------------- the command
def rerank_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="MODEL", help="a run folder of --task rerank, or an export of one")
    parser.add_argument("--query", help="the query to rank the passages for")
    parser.add_argument("--input", required=True,
                        help='the candidate passages: a text file, one a line, or a .jsonl file of {"passage": ...}')
    parser.add_argument("--top-k", type=int, help="print the best K passages (default: all)")
    parser.add_argument("--output", help='write the ranking here as JSONL, {"rank", "score", "passage", "index"} a '
                                         "line (default: print it)")
    parser.add_argument("--batch-size", type=int, default=PREDICT_BATCH_SIZE,
                        help="pairs the model runs at once (default: %(default)s)")


def check_rerank(args: argparse.Namespace) -> None:
    """``kerasbert rerank``'s checks that need no TensorFlow: the query, the model folder, ``--input`` and its
    passages, ``--top-k``, ``--batch-size`` and ``--output``."""
    from kerasbert.files import check_existing
    from kerasbert.finetune.runs import check_writable
    from kerasbert.serving.embed import check_batch_size

    check_query(args.query, "--query")
    check_model(args.path)
    check_existing(args.input, "--input")
    read_passages(args.input)
    if args.top_k is not None and args.top_k < 1:
        raise fail(ConfigError, "--top-k", "an integer >= 1", repr(args.top_k))
    check_batch_size(args.batch_size)
    if args.output is not None:
        if os.path.isdir(args.output):
            raise fail(ConfigError, f"--output {args.output}", "a file to write the ranking to", "a folder")
        check_writable(args.output, "--output")


def run_rerank(args: argparse.Namespace) -> int:
    from kerasbert.files import output_rows

    ranked = rerank(args.path, args.query, read_passages(args.input), args.top_k, args.batch_size)
    output_rows([{"rank": rank, **row} for rank, row in enumerate(ranked, 1)], args.output,
                "passages ranked, written")
    return 0
