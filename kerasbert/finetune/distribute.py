"""Training on several devices or machines with TensorFlow's own ``tf.distribute``.

``--strategy``: ``one`` (the default device), ``mirrored`` (``MirroredStrategy`` over every GPU, or
every logical CPU device when there are no GPUs), ``multiworker`` (``MultiWorkerMirroredStrategy``,
the cluster read from ``TF_CONFIG`` as TensorFlow documents), ``auto`` (``multiworker`` when
``TF_CONFIG`` names more than one task, ``mirrored`` with more than one GPU, else ``one``).

The batch size a user gives is per replica; the global batch is that times the replicas. Under
``one`` and ``mirrored``, training is Keras ``fit``. Under ``multiworker`` it is `fit_epoch`, a short
custom loop: Keras 3.15's ``fit`` fails there before its first step (it reduces the first distributed
batch eagerly and cannot convert the ``PerReplica`` value: keras-team/keras#20585 and #20329). The
loop uses the same model, compiled loss, optimizer and callbacks as ``fit``.

Example:
>>> strategy = make_strategy("one")
>>> strategy.num_replicas_in_sync, is_chief(strategy)
(1, True)
"""

from __future__ import annotations

import json
import os

from kerasbert.choices import STRATEGIES
from kerasbert.errors import ConfigError, fail

__all__ = ["describe", "fit_epoch", "is_chief", "make_strategy"]


def _cluster_tasks() -> int:
    """How many tasks ``TF_CONFIG`` names (0 without it)."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except (ValueError, AttributeError):
        raise fail(ConfigError, "TF_CONFIG", 'JSON {"cluster": {...}, "task": {...}}', repr(raw[:80])) from None
    return sum(len(addresses) for name, addresses in cluster.items() if name != "evaluator")


def is_multiworker_name(name: str) -> bool:
    """Whether ``--strategy name`` makes a multi-worker strategy (``auto`` does when ``TF_CONFIG`` names more than
    one task), told without TensorFlow."""
    return name == "multiworker" or (name == "auto" and _cluster_tasks() > 1)


def make_strategy(name: str = "auto"):
    """The ``tf.distribute`` strategy called ``name`` (see the module docstring).

    Create it before any other TensorFlow work: ``MultiWorkerMirroredStrategy`` configures the runtime.
    """
    import tensorflow as tf

    if name not in STRATEGIES:
        raise fail(ConfigError, "--strategy", " or ".join(STRATEGIES), repr(name))
    if name == "auto":
        gpus = tf.config.list_physical_devices("GPU")
        name = "multiworker" if _cluster_tasks() > 1 else "mirrored" if len(gpus) > 1 else "one"
    if name == "one":
        return tf.distribute.get_strategy()
    if name == "multiworker":
        if not _cluster_tasks():
            raise fail(ConfigError, "--strategy multiworker", "TF_CONFIG naming the cluster and this task",
                       "no TF_CONFIG in the environment")
        return tf.distribute.MultiWorkerMirroredStrategy()
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([device.name for device in devices])


def is_multiworker(strategy) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def describe(strategy) -> str:
    """The strategy's public class name (TensorFlow's classes behind them are called otherwise)."""
    import tensorflow as tf

    if is_multiworker(strategy):
        return "MultiWorkerMirroredStrategy"
    return "MirroredStrategy" if isinstance(strategy, tf.distribute.MirroredStrategy) else "one device"


def is_chief(strategy) -> bool:
    """Whether this process writes the run folder: always, except on a multi-worker cluster's non-chief
    workers (the ``chief`` task, or worker 0 when the cluster has no chief, as the TF guide prescribes)."""
    if not is_multiworker(strategy):
        return True
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (task_type == "worker" and task_id == 0
                                    and "chief" not in resolver.cluster_spec().as_dict())


def distribute(strategy, dataset):
    """``dataset`` of global batches -> the per-replica batches of ``strategy`` (each worker its slice of
    every batch: DATA sharding, so the result does not depend on how many workers there are)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return strategy.experimental_distribute_dataset(dataset.with_options(options))


def make_train_step(model, strategy):
    """A ``tf.function`` running one step on every replica; returns the global mean loss.

    Each replica's loss is its mean weighted by its share of the global batch (replicas may get
    unequal slices of the last batch), so the summed gradients are those of the global mean.
    """
    import tensorflow as tf

    optimizer = model.optimizer

    def replica_step(batch):
        x, y, *weights = batch
        rows = tf.cast(tf.shape(tf.nest.flatten(x)[0])[0], tf.float32)  # y may be several targets (NSP, MLM)
        total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, rows)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x, y, y_pred, weights[0] if weights else None, training=True)
            # Keras losses already divide by the replicas (assuming equal slices): weigh by rows instead
            loss = loss * strategy.num_replicas_in_sync * rows / total
            scaled = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(batch):
        losses = strategy.run(replica_step, args=(batch,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    return train_step


def fit_epoch(model, strategy, dataset, callbacks, epoch: int, train_step=None) -> dict:
    """One epoch of the multi-worker loop: what ``model.fit(dataset, epochs=epoch + 1,
    initial_epoch=epoch, callbacks=callbacks)`` does, for ``MultiWorkerMirroredStrategy``.

    Returns:
        dict. the epoch's logs: ``loss``, the mean over its batches, and what the callbacks added.
    """
    train_step = train_step or make_train_step(model, strategy)
    callbacks.on_epoch_begin(epoch)
    total, count = 0.0, 0
    for batch in distribute(strategy, dataset):
        callbacks.on_train_batch_begin(count)
        total += float(train_step(batch))
        count += 1
        callbacks.on_train_batch_end(count - 1, {"loss": total / count})
        if model.stop_training:
            break
    logs = {"loss": total / max(count, 1)}
    callbacks.on_epoch_end(epoch, logs)
    return logs
