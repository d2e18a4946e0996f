"""Ctrl-C and ``kill`` during training: finish the step, save a resume point, stop with one line.

`StopRequest` turns the first SIGINT or SIGTERM into a request that training reads after each step: the step
under way ends, the resume state of that step is saved (`kerasbert.finetune.runs.Run.save_state`: weights,
optimizer, epoch, the step within the epoch; the data order follows from the seed and the epoch), and
`TrainingInterrupted` ends `kerasbert.finetune.training.train`. A second signal aborts at once, as a plain
``KeyboardInterrupt``; the run folder then holds the last state saved before it, whole. Nothing here imports
TensorFlow.

Example:
>>> import signal
>>> stop = TrainingInterrupted("runs/cls", epoch=2, step=17, signal=signal.SIGINT)
>>> print(stop.line())
interrupted at epoch 2 step 17; kerasbert train --out runs/cls --resume goes on from there
>>> stop.exit_status
130
"""

from __future__ import annotations

import shlex
import signal
import threading
from types import FrameType

__all__ = ["SIGNALS", "StopRequest", "TrainingInterrupted"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)  # the signals that ask training to stop at the next step


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after saving its resume state at ``epoch`` (1-based) and ``step`` (batches of
    that epoch done).

    Args:
        run: str. the run folder.
        epoch: int. the epoch it stopped in, counting from 1.
        step: int. the batches of that epoch already trained.
        signal: int. the signal that asked it to stop.
    """

    def __init__(self, run: str, epoch: int, step: int, signal: int) -> None:
        super().__init__(run, epoch, step, signal)
        self.run, self.epoch, self.step, self.signal = run, epoch, step, signal

    @property
    def exit_status(self) -> int:
        """The shell's status of a process ended by the signal: 128 + its number (130 for SIGINT)."""
        return 128 + int(self.signal)

    def line(self, command: str = "kerasbert train") -> str:
        """The one line the CLI prints: where training stopped and the ``command`` that goes on from there."""
        return (f"interrupted at epoch {self.epoch} step {self.step}; {command} --out {shlex.quote(self.run)} --resume "
                "goes on from there")

    def __str__(self) -> str:
        return self.line()


class StopRequest:
    """A context in which SIGINT and SIGTERM ask to stop instead of stopping: the first sets `signal`, a second
    restores the previous handlers and raises ``KeyboardInterrupt``. Outside the main thread, where Python
    cannot install handlers, it does nothing and signals act as usual."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal = number
            return
        self._restore()
        raise KeyboardInterrupt
