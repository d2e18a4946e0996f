"""The ``multilabel`` task: several labels a text, a sigmoid a label."""

from __future__ import annotations

from dataclasses import dataclass, field

from kerasbert.finetune.task_base import Task

__all__ = ["MultiLabelTask"]


@dataclass
class MultiLabelTask(Task):
    """several labels a text, a sigmoid a label."""

    name: str = field(default="multilabel", init=False)
