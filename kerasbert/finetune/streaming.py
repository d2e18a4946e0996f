"""Data larger than memory: files (a path or a glob) tokenized once into TFRecord shards, then streamed.

`prepare` reads the files with the ``iter_*`` readers of `kerasbert.text.readers` (line by line, never whole),
encodes ``chunk`` examples at a time with the task's own ``Task.encode`` and writes
``part-NNNNN.tfrecord`` shards and ``meta.json`` into a folder, atomically: the folder appears
complete or not at all. Memory is bounded by ``chunk``, not by the size of the data.
`prepared_dataset` reads the shards back as the same batches `kerasbert.text.pipeline.to_dataset` makes
of the features in memory: ``({"Input-Token", "Input-Segment"}, labels[, weights])``, int32 ids and
labels, float32 weights, each batch padded to its longest row: the token ids with the tokenizer's padding id
(``meta.json``'s ``pad_id`` where it is not 0), the rest with 0.

Shuffling is a pure function of ``(seed, epoch)``: the shard order is permuted, then each block of
``shuffle_buffer`` examples is permuted with stateless random ops. It does not depend on TensorFlow's
global seed, so a resumed run sees the same batches and ``skip_batches`` drops those already seen.

Example:
>>> import tempfile
>>> from kerasbert.finetune.demo_data import write_demo_data
>>> from kerasbert.finetune.tasks import get_task
>>> from kerasbert.text.tokenizer import Tokenizer
>>> data = write_demo_data(tempfile.mkdtemp(), n_train=10, n_dev=2, n_test=2)
>>> out = tempfile.mkdtemp() + "/prepared"
>>> meta = prepare(get_task("cls"), data["cls_train"], Tokenizer(data["vocab"]), 32, out, verbose=0)
>>> meta["count"], meta["labels"], meta["shards"][0]["file"]
(10, ['neg', 'pos'], 'part-00000.tfrecord')
>>> x, y = next(iter(prepared_dataset(out, 4)))
>>> x["Input-Token"].dtype.name, tuple(y.shape)
('int32', (4,))
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import json
import logging
import os
from collections.abc import Iterable, Iterator

import numpy as np

from kerasbert import layer_names as ln
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.files import publish_folder, write_text
from kerasbert.finetune.tasks import Task, get_task
from kerasbert.log import logger
from kerasbert.text import pipeline, readers
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.tokenizer_base import pad_id_of

__all__ = ["FORMAT", "SHARD_SIZE", "expand", "prepare", "prepared_dataset", "read_prepared"]

FORMAT = "kerasbert-prepared/1"  # the "format" of meta.json
SHARD_SIZE = 100_000  # examples per shard at most; each input file also starts a shard
META = "meta.json"


def expand(pattern: str) -> list[str]:
    """The files a path or a glob names, sorted.

    Args:
        pattern: str. a file, or a glob such as ``data/train-*.tsv``.

    Returns:
        list of str.

    Raises:
        DataError: nothing matches.

    Example:
    >>> expand("/no/such/train-*.tsv")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: /no/such/train-*.tsv: expected a file or a glob matching files, found no match
    """
    files = sorted(path for path in glob.glob(pattern) if os.path.isfile(path))
    if not files:
        raise fail(DataError, pattern, "a file or a glob matching files", "no match")
    return files


def _chunks(examples: Iterable, size: int) -> Iterator[list]:
    iterator = iter(examples)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


@contextlib.contextmanager
def _quiet():
    """Hold back the per-chunk truncation warnings of ``Task.encode``; `prepare` reports one total."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class _Shards:
    """Writes serialized examples into ``part-NNNNN.tfrecord`` files, a new one per input file or when full."""

    def __init__(self, folder: str, size: int):
        self.folder, self.size, self.shards, self.writer = folder, size, [], None

    def start(self, source: str) -> None:
        import tensorflow as tf

        self.close()
        self.shards.append({"file": f"part-{len(self.shards):05d}.tfrecord", "count": 0, "source": source})
        self.writer = tf.io.TFRecordWriter(os.path.join(self.folder, self.shards[-1]["file"]))

    def write(self, record: bytes) -> None:
        if self.shards[-1]["count"] >= self.size:
            self.start(self.shards[-1]["source"])
        self.writer.write(record)
        self.shards[-1]["count"] += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _records(features: pipeline.Features) -> Iterator[bytes]:
    """One serialized ``tf.train.Example`` per encoded example: int64 ids and labels, float weights."""
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    for i in range(len(features)):
        row = {"token_ids": ints(features.token_ids[i]), "segment_ids": ints(features.segment_ids[i])}
        if features.labels is not None:
            label = features.labels[i]
            row["labels" if isinstance(label, list) else "label"] = ints(label if isinstance(label, list) else [label])
        if features.weights is not None:
            row["weights"] = tf.train.Feature(float_list=tf.train.FloatList(value=features.weights[i]))
        yield tf.train.Example(features=tf.train.Features(feature=row)).SerializeToString()


def _counted(examples: Iterable, counter: list) -> Iterator:
    for example in examples:
        counter[0] += 1
        yield example


def _write(task: Task, files: list[str], tokenizer: Tokenizer, maxlen: int, labels: LabelSet, given: bool,
           shards: _Shards, chunk: int, bar) -> dict:
    """Pass 2: stream, encode and write every file; returns the counts (``count``: the rows written, which are
    the examples but for pretraining, whose documents pack into rows)."""
    count = truncated = read = 0
    try:
        for path in files:
            shards.start(path)
            for examples in _chunks(task.stream(path), chunk):
                if given:
                    task.check(examples, labels, path)
                with _quiet():
                    features = task.encode(tokenizer, examples, labels, maxlen, path)
                for record in _records(features):
                    shards.write(record)
                count, truncated, read = count + len(features), truncated + features.truncated, read + len(examples)
                if bar is not None:
                    bar.update(read)
    finally:
        shards.close()
    return {"count": count, "truncated": truncated}


def _check_out(out: str) -> None:
    """Fail unless ``out`` is new or empty."""
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise fail(ConfigError, out, "a new or empty folder for the prepared data", "a file or a folder with files",
                   "choose another --out or remove it")


def _task_options(task: Task) -> dict:
    return {name: getattr(task, name) for name in ("text", "text_b", "label", "scheme", "strict", "crf", "whole_word",
                                                   "nsp", "pre_tokenize")}


def prepare(task: Task, pattern: str, tokenizer: Tokenizer, maxlen: int, out: str, labels: LabelSet | None = None,
            chunk: int = 10_000, verbose: int = 1, shard_size: int = SHARD_SIZE) -> dict:
    """Tokenize the files of ``pattern`` once into TFRecord shards in ``out``, streaming them.

    Pass 1 (only when ``labels`` is None) reads the files for the label set, the one
    ``task.label_set`` gives in memory. Pass 2 encodes ``chunk`` examples at a time and writes them.

    Args:
        task: Task. from `kerasbert.finetune.tasks.get_task`; its field options say how to read the files.
        pattern: str. a file or a glob (`expand`); files are read in sorted order.
        tokenizer: Tokenizer. the checkpoint's tokenizer.
        maxlen: int. the most word pieces an example keeps.
        out: str. the folder to write; it must be new or empty. Written atomically.
        labels: LabelSet or None. the label set to use (e.g. a run's labels.json); a label outside it
            is a `DataError`. None reads it from the data.
        chunk: int. examples encoded at once: memory is bounded by this.
        verbose: int. 1 shows a progress bar; 2 a line when it ends (`kerasbert.log.progress_verbosity`).
        shard_size: int. examples per shard at most.

    Returns:
        dict. the ``meta.json`` written (see `read_prepared`).
    """
    for name, value, low in (("maxlen", maxlen, 3), ("chunk", chunk, 1), ("shard_size", shard_size, 1)):
        if not isinstance(value, int) or value < low:
            raise fail(ConfigError, name, f"an int >= {low}", repr(value))
    if task.group > 1:  # shards are shuffled row by row (`_shuffled`)
        raise fail(ConfigError, f"--task {task.name}", "a task of one row per example to stream",
                   f"examples of {task.group} rows that must stay together", "train on one file, read in memory")
    import keras

    files = expand(pattern)
    _check_out(out)
    with publish_folder(out, last=META) as staging:
        given, total = labels is not None, [0]
        if labels is None:
            labels = task.label_set(_counted((e for path in files for e in task.stream(path)), total))
        bar = keras.utils.Progbar(total[0] or None, verbose=verbose, unit_name="example") if verbose else None
        shards = _Shards(staging, shard_size)
        counts = _write(task, files, tokenizer, maxlen, labels, given, shards, chunk, bar)
        pipeline.report_truncation(counts["truncated"], counts["count"], maxlen, pattern)
        meta = {"format": FORMAT, "task": task.name, "options": _task_options(task), "maxlen": maxlen,
                "vocab_size": tokenizer.vocab_size, "labels": labels.labels, **counts, "files": files,
                "shards": shards.shards, **({"pad_id": pad_id_of(tokenizer)} if pad_id_of(tokenizer) else {})}
        write_text(os.path.join(staging, META), json.dumps(meta, ensure_ascii=False, indent=1) + "\n")
    return meta


def read_prepared(folder: str) -> dict:
    """The ``meta.json`` of a folder written by `prepare`, checked.

    It holds ``format``, ``task``, ``options`` (the task's field options), ``maxlen``, ``vocab_size``,
    ``labels`` (the label list, id order), ``count``, ``truncated``, ``files`` (the inputs) and
    ``shards`` (``{"file", "count", "source"}`` each, in order).

    Args:
        folder: str. the folder.

    Returns:
        dict.

    Raises:
        DataError: no such folder, no or a bad ``meta.json``, or a shard missing.

    Example:
    >>> read_prepared("/no/dir")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: /no/dir: expected a folder written by `kerasbert prepare`, found nothing at that path
    """
    if not os.path.isdir(folder):
        raise fail(DataError, folder, "a folder written by `kerasbert prepare`", "nothing at that path")
    path = os.path.join(folder, META)
    if not os.path.isfile(path):
        raise fail(DataError, path, "the meta.json that `kerasbert prepare` writes", "no such file",
                   "prepare the data again")
    try:
        meta = json.loads(readers.read_text(path))
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise fail(DataError, path, f'JSON with "format": "{FORMAT}"', "something else", "prepare the data again")
    for shard in meta["shards"]:
        if not os.path.isfile(os.path.join(folder, shard["file"])):
            raise fail(DataError, os.path.join(folder, shard["file"]), f"a shard listed in {META}", "no such file",
                       "prepare the data again")
    return meta


def _parser(meta: dict, labels: bool):
    """A function from a batch of serialized examples to ``to_dataset``'s padded batch structure."""
    import tensorflow as tf

    kinds = {"int": tf.io.FixedLenFeature([], tf.int64), "ints": tf.io.RaggedFeature(tf.int64),
             "floats": tf.io.RaggedFeature(tf.float32)}
    columns = get_task(meta["task"], **meta["options"]).label_columns() if labels else {}
    spec = {"token_ids": kinds["ints"], "segment_ids": kinds["ints"], **{name: kinds[kind] for name, kind in
                                                                         columns.items()}}

    def parse(serialized):
        rows = tf.io.parse_example(serialized, spec)
        dense = {name: value.to_tensor(meta.get("pad_id", 0) if name == "token_ids" else 0)
                 if isinstance(value, tf.RaggedTensor) else value
                 for name, value in rows.items()}  # padded to the batch's longest row: token ids with the padding id
        inputs = {ln.TOKEN_INPUT: tf.cast(dense["token_ids"], tf.int32),
                  ln.SEGMENT_INPUT: tf.cast(dense["segment_ids"], tf.int32)}
        parts = [tf.cast(dense[name], tf.int32) if kind != "floats" else dense[name] for name, kind in columns.items()]
        return (inputs, *parts) if parts else inputs

    return parse


def _shuffled(records, seed: int, epoch: int, buffer: int):
    """``records`` with each block of ``buffer`` permuted by stateless ops seeded from ``(seed, epoch)``."""
    import tensorflow as tf

    key = int(np.random.default_rng([seed, epoch, 1]).integers(2**31 - 1))

    def permute(index, block):
        noise = tf.random.stateless_uniform(tf.shape(block), seed=tf.stack([tf.constant(key, tf.int64), index]))
        return tf.gather(block, tf.argsort(noise))

    return records.batch(buffer).enumerate().map(permute).unbatch()


def prepared_dataset(folder: str, batch_size: int, *, seed: int | None = None, epoch: int = 0,
                     skip_batches: int = 0, shuffle_buffer: int = 10_000, labels: bool = True, prefetch: bool = True):
    """A ``tf.data.Dataset`` of the batches `kerasbert.text.pipeline.to_dataset` makes, read from `prepare`'s shards.

    Args:
        folder: str. a folder written by `prepare`.
        batch_size: int. rows per batch.
        seed: int or None. shuffle seed; None keeps the file order.
        epoch: int. which epoch's order to draw (with ``seed``): the same ``(seed, epoch)`` gives the
            same order, whatever TensorFlow's global seed.
        skip_batches: int. batches to drop from the start (not parsed).
        shuffle_buffer: int. examples permuted together; the shard order is permuted too.
        labels: bool. include labels (and weights).
        prefetch: bool. prefetch batches while the model runs.

    Example:
    >>> prepared_dataset("/no/dir", 8)
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: /no/dir: expected a folder written by `kerasbert prepare`, found nothing at that path
    """
    import tensorflow as tf

    for name, value in (("batch_size", batch_size), ("shuffle_buffer", shuffle_buffer)):
        if not isinstance(value, int) or value < 1:
            raise fail(ConfigError, name, "an int >= 1", repr(value))
    meta = read_prepared(folder)
    shards = [os.path.join(folder, shard["file"]) for shard in meta["shards"]]
    if seed is not None:
        shards = [shards[i] for i in np.random.default_rng([seed, epoch]).permutation(len(shards))]
    records = tf.data.TFRecordDataset(shards)
    if seed is not None:
        records = _shuffled(records, seed, epoch, shuffle_buffer)
    records = records.apply(tf.data.experimental.assert_cardinality(meta["count"]))
    dataset = records.batch(batch_size)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    dataset = dataset.map(_parser(meta, labels), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE) if prefetch else dataset
