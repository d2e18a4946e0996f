"""`parallel_apply` and `parallel_apply_generator`: bert4keras's ``snippets`` functions, same arguments and results.

Workers are threads (``dummy=True``) or forked processes, so that ``func`` may be a lambda or a closure, as
bert4keras allows; items and results cross to processes by pickling. Workers stop on a sentinel, and an
exception in ``func`` is raised in the caller instead of leaving it waiting.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading

import numpy as np

from kerasbert.errors import DataError, fail

_STOP = None  # the sentinel a worker stops on


def _work(func, seed, inbox, outbox, reseed):
    if reseed:
        np.random.seed(seed)
    while (job := inbox.get()) is not _STOP:
        index, item = job
        try:
            outbox.put((index, True, func(item)))
        except Exception as error:  # handed to the caller, which raises it
            outbox.put((index, False, error))


def _results(func, iterable, workers, max_queue_size, dummy, random_seeds):
    """Yield ``(index, result)`` as workers finish them; at most ``max_queue_size`` items wait for a worker."""
    if random_seeds is True:
        random_seeds = [None] * workers
    seeds = list(random_seeds or [])
    if dummy:
        inbox, outbox, start = queue.Queue(max_queue_size), queue.Queue(), threading.Thread
    else:
        context = multiprocessing.get_context("fork")
        inbox, outbox, start = context.Queue(max_queue_size), context.Queue(), context.Process
    pool = [start(target=_work, args=(func, seeds[w] if w < len(seeds) else None, inbox, outbox, w < len(seeds)),
                  daemon=True) for w in range(workers)]
    for worker in pool:
        worker.start()
    sent = received = 0
    try:
        for job in enumerate(iterable):
            while True:
                try:
                    inbox.put(job, timeout=0.05)
                    break
                except queue.Full:
                    while not outbox.empty():
                        received += 1
                        yield _checked(outbox.get())
            sent += 1
        while received < sent:
            received += 1
            yield _checked(outbox.get())
    finally:
        for _ in pool:
            inbox.put(_STOP)
        for worker in pool:
            worker.join(timeout=1)


def _checked(message):
    index, ok, value = message
    if not ok:
        raise value
    return index, value


def parallel_apply_generator(func, iterable, workers, max_queue_size, dummy=False, random_seeds=True):
    """Yield ``(index, func(item))`` for every item of ``iterable`` as ``workers`` threads (``dummy``) or processes
    finish them, in no set order; arguments as `parallel_apply`'s.

    Example:
    >>> sorted(parallel_apply_generator(lambda x: x * x, range(3), 2, 4, dummy=True))
    [(0, 0), (1, 1), (2, 4)]
    """
    if workers < 1 or max_queue_size < 1:
        raise fail(DataError, "parallel_apply", "workers >= 1 and max_queue_size >= 1",
                   f"workers={workers}, max_queue_size={max_queue_size}")
    return _results(func, iterable, workers, max_queue_size, dummy, random_seeds)


def parallel_apply(func, iterable, workers, max_queue_size, callback=None, dummy=False, random_seeds=True,
                   unordered=True):
    """Apply ``func`` to every item of ``iterable`` in ``workers`` threads (``dummy``) or processes.

    Args:
        func: callable. applied to each item.
        iterable: the items.
        workers: int. how many threads or processes.
        max_queue_size: int. how many items may wait for a worker.
        callback: callable. if given, called on each result as it comes, and nothing is returned.
        dummy: bool. threads instead of processes.
        random_seeds: True (each worker reseeds NumPy from the OS), a list (one seed per worker), or
            False/None (workers keep the parent's NumPy state).
        unordered: bool. results in the order they finish; False: in the order of the items.

    Returns:
        The list of results, or None with a callback.

    Example:
    >>> parallel_apply(lambda x: x * x, range(5), 2, 4, dummy=True, unordered=False)
    [0, 1, 4, 9, 16]
    """
    results = parallel_apply_generator(func, iterable, workers, max_queue_size, dummy, random_seeds)
    if callback is not None:
        for _, value in results:
            callback(value)
        return None
    if unordered:
        return [value for _, value in results]
    return [value for _, value in sorted(results, key=lambda pair: pair[0])]
