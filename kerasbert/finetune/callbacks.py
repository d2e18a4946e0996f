"""The callbacks `kerasbert.finetune.training.train` runs in Keras ``fit``: `EpochKeeper`, which keeps the run folder
(resume state, best model, history, curves) step by step and epoch by epoch and stops on a signal, and `OneEpoch`.
"""

from __future__ import annotations

import keras

from kerasbert.finetune import plots
from kerasbert.finetune.args import TrainArgs
from kerasbert.finetune.interrupt import StopRequest, TrainingInterrupted
from kerasbert.finetune.runs import Run, State

__all__ = ["EpochKeeper", "OneEpoch"]


class EpochKeeper(keras.callbacks.Callback):
    """Counts steps, saves resume state every ``save_every`` steps and at each epoch's end, scores dev,
    keeps the best model, and writes history and curves; stops at ``max_steps``. When ``stop`` has a signal,
    saves the state of the step just done and raises `TrainingInterrupted` (after the epoch's end on its last
    step, so a resumed run never starts an epoch with no batch left)."""

    def __init__(self, run: Run, state: State, score_dev, monitor: str, args: TrainArgs, steps_per_epoch: int,
                 stop: StopRequest | None = None):
        super().__init__()
        self.run, self.state, self.score_dev, self.monitor = run, state, score_dev, monitor
        self.save_every, self.max_steps, self.steps_per_epoch = args.save_every, args.max_steps, steps_per_epoch
        self.stop = stop

    def on_train_batch_end(self, batch, logs=None):
        self.state.step += 1
        self.state.global_step += 1
        if self.max_steps and self.state.global_step >= self.max_steps:
            self.model.stop_training = True
        if self._stopping() and self.state.step < self.steps_per_epoch and not self.model.stop_training:
            self.run.save_state(self.state, self.model, self.model.optimizer)
            self._interrupt()
        if self.save_every and self.state.global_step % self.save_every == 0:
            self.run.save_state(self.state, self.model, self.model.optimizer)

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.signal is not None

    def _interrupt(self):
        raise TrainingInterrupted(self.run.path, self.state.epoch + 1, self.state.step, self.stop.signal)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs.update(self.score_dev())
        row = {"epoch": epoch + 1, **{key: round(float(value), 6) for key, value in logs.items()}}
        self.state.history.append(row)
        value = logs.get(self.monitor)
        lower = self.monitor.endswith("loss")
        if value is None or self.state.best is None or (value < self.state.best if lower else value > self.state.best):
            self.state.best, self.state.best_epoch = (None if value is None else float(value)), epoch + 1
            self.run.save_model(self.model)
        self.run.write_history(self.state.history)
        plots.plot_curves(self.state.history, self.run.file("curves.png"))
        self.state.epoch, self.state.step = epoch + 1, 0
        self.run.save_state(self.state, self.model, self.model.optimizer)
        if self._stopping() and self.state.epoch < self.params.get("epochs", 0) and not self.model.stop_training:
            self._interrupt()


class OneEpoch(keras.callbacks.Callback):
    """Ends ``fit`` after the epoch it started, so ``fit(epochs=N, initial_epoch=k)`` trains epoch k alone."""

    def on_epoch_end(self, epoch, logs=None):
        self.model.stop_training = True
