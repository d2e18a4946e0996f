"""The ``relation`` task: (subject, predicate, object) triples, GPLinker."""

from __future__ import annotations

from dataclasses import dataclass, field

from kerasbert.finetune.task_base import Task

__all__ = ["RelationTask"]


@dataclass
class RelationTask(Task):
    """(subject, predicate, object) triples, GPLinker."""

    name: str = field(default="relation", init=False)
