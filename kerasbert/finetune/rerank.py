"""The ``rerank`` task: a cross-encoder's score of each query-passage pair."""

from __future__ import annotations

from dataclasses import dataclass, field

from kerasbert.finetune.task_base import Task

__all__ = ["RerankTask"]


@dataclass
class RerankTask(Task):
    """a cross-encoder's score of each query-passage pair."""

    name: str = field(default="rerank", init=False)
