"""The server's micro-batching, `Batcher`: which instances share a batch and in what order clients are served, read
from the batches the model is given (the order of service, never timings)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kerasbert.serving.batcher import WINDOW, Batcher


class Model:
    """Records each batch's texts; the first batch waits for ``release`` once ``started`` is set."""

    def __init__(self, hold_first: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.started, self.release = threading.Event(), threading.Event()
        if not hold_first:
            self.release.set()

    def __call__(self, rows: list[dict]) -> list[str]:
        self.batches.append([row["text"] for row in rows])
        self.started.set()
        assert self.release.wait(30)
        return [row["text"].upper() for row in rows]


def rows(*texts: str) -> list[dict]:
    return [{"text": text} for text in texts]


def serve_at_once(model: Model, requests: list[tuple[str, list[str]]], max_batch: int = 2) -> list[list[str]]:
    """Submit every request before the worker runs (as one event-loop step); each request's answers."""
    batcher = Batcher(model, max_batch=max_batch, max_wait_ms=10_000)

    async def run():
        async with batcher.running():
            futures = [batcher.submit(rows(*texts), client) for client, texts in requests]
            return [await asyncio.gather(*one) for one in futures]

    return asyncio.run(run())


def test_one_client_keeps_its_order_sorted_by_length_within_a_window():
    texts = ["aaaa", "b", "ccc", "dd", "eeeee", "f"]
    model = Model()
    answers = serve_at_once(model, [("10.0.0.1", texts)], max_batch=2)
    assert answers == [[text.upper() for text in texts]]
    assert model.batches == [["b", "f"], ["dd", "ccc"], ["aaaa", "eeeee"]]  # one window (<= WINDOW batches), sorted


def test_clients_take_turns_so_a_small_request_is_not_behind_a_large_one():
    many = [f"a{i:02d}" for i in range(4 * WINDOW)]  # all of one length: a window sorted by length keeps them
    model = Model()
    answers = serve_at_once(model, [("10.0.0.1", many), ("10.0.0.2", ["b0"]), ("10.0.0.3", ["c0", "c1"])])
    assert answers == [[text.upper() for text in many], ["B0"], ["C0", "C1"]]
    assert model.batches[:3] == [["a00", "b0"], ["c0", "a01"], ["c1", "a02"]]  # turns: a, b, c, a, c, a
    assert [text for batch in model.batches for text in batch if text.startswith("a")] == many  # a's order kept


def test_a_newcomer_joins_the_next_batch_of_a_window_already_running():
    """One client's window of WINDOW batches is running when a second client asks: its instance is in the very
    next batch, and the first client's instances go on in the order they came."""
    many = [f"a{i:02d}" for i in range(2 * WINDOW)]
    model = Model(hold_first=True)
    batcher = Batcher(model, max_batch=2, max_wait_ms=10_000)

    async def run():
        async with batcher.running():
            first = batcher.submit(rows(*many), "10.0.0.1")
            await asyncio.to_thread(model.started.wait, 30)  # the first batch is with the model
            second = batcher.submit(rows("b"), "10.0.0.2")
            model.release.set()
            return await asyncio.gather(*first), await asyncio.gather(*second)

    answers = asyncio.run(run())
    assert answers == ([text.upper() for text in many], ["B"])
    assert model.batches[0] == ["a00", "a01"]
    assert model.batches[1] == ["a02", "b"]
    assert [text for batch in model.batches for text in batch if text != "b"] == many


def test_the_queue_bound_counts_every_clients_instances():
    batcher = Batcher(Model(), max_batch=2, max_wait_ms=10_000, max_queue=3)

    async def run():
        async with batcher.running():
            batcher.submit(rows("a", "b"), "10.0.0.1")
            with pytest.raises(asyncio.QueueFull):
                batcher.submit(rows("c", "d"), "10.0.0.2")
            return await asyncio.gather(*batcher.submit(rows("c"), "10.0.0.2"))

    assert asyncio.run(run()) == ["C"]
