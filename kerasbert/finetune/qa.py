"""The ``qa`` task: extractive question answering: a start and an end pointer over a context's word pieces."""

from __future__ import annotations

from dataclasses import dataclass, field

from kerasbert.finetune.task_base import Task

__all__ = ["QaTask"]


@dataclass
class QaTask(Task):
    """extractive question answering: a start and an end pointer over a context's word pieces."""

    name: str = field(default="qa", init=False)
