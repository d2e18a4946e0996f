"""How the exports of the tasks ``qa``, ``multilabel``, ``relation`` and ``rerank`` are written and read: one
`TaskExport` per task, each part a function named by its module path and imported when used, so this table imports
neither TensorFlow nor a runtime and an OpenVINO or ONNX export is read without TensorFlow.

A `TaskExport`'s parts:

- ``saved_model(loaded, vocab, maxlen, info) -> (module, signatures)``: the ``tf.Module`` and signatures of the
  run's raw-text SavedModel (`kerasbert.serving.export`); ``serving_default`` takes one string tensor per input
  field of the task (`kerasbert.choices.input_fields`) and may record what its graph holds in ``info``.
- ``saved_rows(info, rows, outputs) -> predictions``: the prediction of each input row from the numpy outputs of
  ``serving_default`` on a batch of them (`kerasbert.serving.exported.Export`).
- ``portable_examples(tokenizer, rows) -> examples``: the task's examples of input rows, as its ``read`` gives them
  from a file (without TensorFlow).
- ``portable_predict(export, examples, batch_size) -> predictions``: an OpenVINO or ONNX export's predictions of
  examples (`kerasbert.serving.runtime.PortableExport`, whose ``run_model`` answers one array a batch and whose
  ``_run`` runs rows of token and segment ids in chunks); they score as the run's do.
- ``portable_model(loaded) -> keras.Model`` (optional): the model an OpenVINO or ONNX export converts, with one
  output (the run's model where the task has none).
- ``export_info(loaded) -> dict`` (optional): what the task's exports read beside the labels (a threshold, a
  stride), recorded in ``kerasbert-export.json`` for every format.
- ``width(shape) -> int`` (optional): how many labels a portable model's output of ``shape`` (one row) answers, held
  against ``kerasbert-export.json``'s labels when the export is opened; None: not checked.

Example:
>>> sorted(TASK_EXPORTS)
['multilabel', 'qa', 'relation', 'rerank']
>>> TASK_EXPORTS["qa"].saved_model
'kerasbert.serving.qa_export:served_qa'
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

__all__ = ["TASK_EXPORTS", "TaskExport", "part"]


@dataclasses.dataclass(frozen=True)
class TaskExport:
    """The parts of one task's exports, each ``"module:function"`` (see the module's docstring)."""

    saved_model: str
    saved_rows: str
    portable_examples: str
    portable_predict: str
    width: str | None = None
    portable_model: str | None = None
    export_info: str | None = None


def part(task: str, name: str) -> Callable | None:
    """The function ``name`` (a `TaskExport` field) of ``task``'s exports, imported; None where the task has none.

    Example:
    >>> part("cls", "saved_model") is None
    True
    """
    spec = TASK_EXPORTS.get(task)
    reference = getattr(spec, name) if spec is not None else None
    if reference is None:
        return None
    module, function = reference.split(":")
    return getattr(importlib.import_module(module), function)


def _parts(export_module: str, served: str, data_module: str, rows: str, *optional: str) -> dict:
    """A task's parts by field: its SavedModel from ``export_module``, the rest from ``data_module``, which imports no
    TensorFlow; ``optional`` names the optional parts ``data_module`` has."""
    data = f"kerasbert.text.{data_module}"
    return {"saved_model": f"kerasbert.serving.{export_module}:{served}", "saved_rows": f"{data}:{rows}",
            "portable_examples": f"{data}:examples_of_rows", "portable_predict": f"{data}:portable_predict",
            **{name: f"{data}:{name}" for name in optional}}


TASK_EXPORTS: dict[str, TaskExport] = {
    "qa": TaskExport(**_parts("qa_export", "served_qa", "qa_data", "answer_rows", "export_info")),
    "multilabel": TaskExport(**_parts("multilabel_export", "served_multilabel", "multilabel_data", "score_rows",
                                      "width", "export_info")),
    "relation": TaskExport(**_parts("relation_export", "served_relations", "relation_data", "triple_rows", "width"),
                           portable_model="kerasbert.serving.relation_export:portable_model"),
    "rerank": TaskExport(**_parts("rerank_export", "served_rerank", "rerank_data", "score_rows")),
}
