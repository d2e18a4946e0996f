"""`Batcher`: the micro-batching of ``kerasbert serve``, instances of many requests sharing the model's batches, and
clients sharing the batches in turns.

Instances wait in one queue per client (the server names a client by its connection's peer address). One worker
takes what came within ``max_wait_ms`` of the oldest waiting instance (or ``max_batch`` of them) and runs the model
in a thread while the event loop reads requests. It takes a window of up to ``WINDOW`` batches:

- with one client waiting, its instances in the order they came, sorted by length so that a batch pads little;
- with several, one instance of each client a turn, run in that order: a client that sends many instances holds
  a batch's worth of another client's wait, not its whole backlog. The clients take turns across windows too.

A window still running goes back to the queues, each instance in its place, as soon as a client it does not hold
is waiting: that client's instances then join the next batch.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import time
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor

from kerasbert.choices import SERVE_DEFAULTS
from kerasbert.log import logger

__all__ = ["WINDOW", "Batcher"]

WINDOW = 4  # the worker sorts up to this many batches of waiting instances by length at once


def _length(row: dict) -> int:
    """An input row's length in characters, its texts' together."""
    return sum(len(value) for value in row.values() if isinstance(value, str))


@dataclasses.dataclass
class _Item:
    """One instance waiting: its row, its length in characters, when it came (and its place in line), its client
    and its request's future."""

    row: dict
    size: int
    arrived: float
    order: int
    client: Hashable
    future: asyncio.Future


class Batcher:
    """Dynamic micro-batching: instances of many requests share the model's batches, clients in turns.

    Args:
        predict: callable. a list of rows -> a list of predictions, one per row, in order; it runs in a thread.
        max_batch: int. the most instances the model runs at once.
        max_wait_ms: float. how long the oldest waiting instance waits for others before its batch runs.
        max_queue: int. the most instances waiting, all clients together; `submit` raises `asyncio.QueueFull`
            beyond.

    Example:
    >>> import asyncio
    >>> batcher = Batcher(lambda rows: [row["text"].upper() for row in rows], max_batch=8, max_wait_ms=5)
    >>> async def ask(texts):
    ...     async with batcher.running():
    ...         return await asyncio.gather(*batcher.submit([{"text": text} for text in texts], client="10.0.0.7"))
    >>> asyncio.run(ask(["a", "bb"]))
    ['A', 'BB']
    """

    def __init__(self, predict: Callable[[list[dict]], list], max_batch: int = SERVE_DEFAULTS["max_batch"],
                 max_wait_ms: float = SERVE_DEFAULTS["max_wait_ms"],
                 max_queue: int = SERVE_DEFAULTS["max_queue"]) -> None:
        self.predict, self.max_batch, self.max_queue = predict, max_batch, max_queue
        self.max_wait = max_wait_ms / 1000
        self._queues: dict[Hashable, collections.deque[_Item]] = {}  # in the order of the clients' turns
        self._waiting, self._order = 0, itertools.count()
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._thread: ThreadPoolExecutor | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the worker (and the model's thread) on the running event loop while the block runs."""
        self._arrived = asyncio.Event()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="kerasbert-model")
        self._worker = asyncio.get_running_loop().create_task(self._run())
        try:
            yield
        finally:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._thread.shutdown(wait=True)
            for item in itertools.chain.from_iterable(self._queues.values()):
                item.future.cancel()
            self._queues.clear()
            self._waiting, self._worker = 0, None

    def submit(self, rows: Sequence[dict], client: Hashable = None) -> list[asyncio.Future]:
        """Queue ``rows`` (all or none) of ``client`` (any hashable name: one queue each), on the worker's event
        loop; returns one future per row."""
        if self._worker is None or self._worker.done():
            raise RuntimeError("the batcher is not running: use it inside `async with batcher.running()`")
        if self._waiting + len(rows) > self.max_queue:
            raise asyncio.QueueFull
        loop = asyncio.get_running_loop()
        items = [_Item(row, _length(row), loop.time(), next(self._order), client,
                       loop.create_future()) for row in rows]
        self._queues.setdefault(client, collections.deque()).extend(items)
        self._waiting += len(items)
        self._arrived.set()
        return [item.future for item in items]

    async def _run(self) -> None:
        while True:
            batches = self._batches(await self._next())
            clients = {item.client for batch in batches for item in batch}
            for i, batch in enumerate(batches):
                await self._run_batch(batch)
                if i + 1 < len(batches) and any(client not in clients for client in self._queues):
                    self._give_back([item for rest in batches[i + 1:] for item in rest])  # a newcomer is waiting
                    break

    def _batches(self, items: list[_Item]) -> list[list[_Item]]:
        """A window cut into batches: one client's sorted by length, several clients' in the order of their turns."""
        if len({item.client for item in items}) == 1:
            items = sorted(items, key=lambda item: item.size)
        return [items[begin:begin + self.max_batch] for begin in range(0, len(items), self.max_batch)]

    async def _next(self) -> list[_Item]:
        """Wait for an instance, then up to ``max_wait`` after the oldest for ``max_batch``; take a window in turns."""
        while not self._waiting:
            self._arrived.clear()
            await self._arrived.wait()
        loop = asyncio.get_running_loop()
        deadline = min(queue[0].arrived for queue in self._queues.values()) + self.max_wait
        while self._waiting < self.max_batch and loop.time() < deadline:
            self._arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), deadline - loop.time())
        taken = self._take(self.max_batch * WINDOW)
        return [item for item in taken if not item.future.done()]  # a timed-out request's instances are skipped

    def _take(self, limit: int) -> list[_Item]:
        """Up to ``limit`` waiting instances, one of each client a turn; a client served goes to the end of the
        turns, so the next window starts with the clients this one did not reach."""
        taken: list[_Item] = []
        while self._queues and len(taken) < limit:
            for client in list(self._queues)[:limit - len(taken)]:
                queue = self._queues.pop(client)
                taken.append(queue.popleft())
                if queue:
                    self._queues[client] = queue
        self._waiting -= len(taken)
        return taken

    def _give_back(self, items: list[_Item]) -> None:
        """Put ``items`` back at the head of their clients' queues in the order they came; their clients' turns
        come first."""
        back: dict[Hashable, collections.deque[_Item]] = {}
        for item in sorted(items, key=lambda item: item.order):
            back.setdefault(item.client, collections.deque()).append(item)
        for client, queue in back.items():
            queue.extend(self._queues.pop(client, ()))
        self._queues = {**back, **self._queues}
        self._waiting += len(items)

    async def _run_batch(self, items: list[_Item]) -> None:
        items = [item for item in items if not item.future.done()]
        if not items:
            return
        start = time.perf_counter()
        try:
            results = await asyncio.get_running_loop().run_in_executor(self._thread, self.predict,
                                                                       [item.row for item in items])
            if len(results) != len(items):
                raise RuntimeError(f"{len(items)} rows gave {len(results)} predictions")
        except Exception as error:  # noqa: BLE001 - its requests answer 500 and the worker goes on
            logger.error("the model failed on a batch of %d: %s: %s", len(items), type(error).__name__, error)
            results = [error] * len(items)
        logger.debug("batch of %d in %.1f ms (%d waiting)", len(items), (time.perf_counter() - start) * 1000,
                     self._waiting)
        for item, result in zip(items, results, strict=True):
            if not item.future.done():  # done: cancelled, its request timed out
                (item.future.set_exception if isinstance(result, Exception) else item.future.set_result)(result)
