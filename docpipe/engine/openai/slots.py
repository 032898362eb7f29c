"""Request slots for `Transport`: at most ``capacity`` requests in flight to the server, handed out by
priority instead of first come, first served.

A review grid puts hundreds of bulk requests on the engine at once; with a plain semaphore they hold every
slot and a person's question queues behind all of them. Here a freed slot goes to the most urgent waiter
(lowest `GenerationRequest.priority`, vLLM's convention; ties by arrival), and bulk work
(priority above `PRIORITY_INTERACTIVE`) never takes the last ``reserved`` free slots, so a question starts at
once even while a grid keeps the rest busy. The server then orders what it holds by the same priority
(``vllm serve --scheduling-policy priority``). Event-loop only: create and use on one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator

from docpipe.engine.base import PRIORITY_INTERACTIVE

__all__ = ["PrioritySlots"]

# A waiter: (priority, arrival number, the future its slot is handed over on).
_Waiter = tuple[int, int, "asyncio.Future[None]"]


class PrioritySlots:
    """Returns request slots, most urgent waiter first; bulk requests leave `reserved` slots to questions.

    >>> async def demo() -> tuple[int, int]:
    ...     slots = PrioritySlots(2)  # one slot kept for questions
    ...     async with slots.hold(20):  # bulk: takes the one slot bulk may have
    ...         bulk_waits = not slots.available(20)
    ...         async with slots.hold(0):  # a question still starts at once
    ...             return slots.in_use, int(bulk_waits)
    >>> asyncio.run(demo())
    (2, 1)

    `reserved` defaults to one slot when there are two or more (none with a single slot, which bulk work
    must be able to use). A cancelled waiter leaves the queue; a slot handed to a waiter cancelled before it
    resumed goes on to the next one, so cancellation and timeouts never lose a slot.
    """

    def __init__(self, capacity: int, *, reserved: int | None = None) -> None:
        if capacity < 1:
            raise ValueError("PrioritySlots needs capacity >= 1")
        self.capacity = capacity
        self.reserved = (1 if capacity > 1 else 0) if reserved is None else reserved
        if not 0 <= self.reserved < capacity:
            raise ValueError("PrioritySlots needs 0 <= reserved < capacity")
        self.in_use = 0
        self._waiters: list[_Waiter] = []
        self._arrivals = itertools.count()

    @property
    def waiting(self) -> int:
        """Returns how many requests wait for a slot."""
        return len(self._waiters)

    def available(self, priority: int) -> bool:
        """Returns whether a request of `priority` would get a slot now, ahead of no one."""
        return self.in_use < self._limit(priority) and not (self._waiters and self._waiters[0][0] <= priority)

    def _limit(self, priority: int) -> int:
        return self.capacity if priority <= PRIORITY_INTERACTIVE else self.capacity - self.reserved

    async def acquire(self, priority: int = PRIORITY_INTERACTIVE) -> None:
        """Returns once a slot is held for a request of `priority`; release it with `release`."""
        waiter: _Waiter = (priority, next(self._arrivals), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiters, waiter)
        self._hand_over()
        future = waiter[2]
        if future.done():
            return
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # handed a slot, then cancelled before it resumed: pass the slot on
            elif waiter in self._waiters:  # (a hand-over may have dropped it already)
                self._waiters.remove(waiter)
                heapq.heapify(self._waiters)
            raise

    def release(self) -> None:
        """Gives a held slot back; the most urgent waiter that may take it gets it."""
        if self.in_use <= 0:
            raise RuntimeError("PrioritySlots.release() without a slot held")
        self.in_use -= 1
        self._hand_over()

    @contextlib.asynccontextmanager
    async def hold(self, priority: int = PRIORITY_INTERACTIVE) -> AsyncIterator[None]:
        """Holds a slot for the block's duration."""
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    def _hand_over(self) -> None:
        # The queue is ordered most urgent first, and less urgent work may take no more slots than more
        # urgent work: once the first waiter cannot have a slot, no waiter behind it can.
        while self._waiters and self.in_use < self._limit(self._waiters[0][0]):
            _, _, future = heapq.heappop(self._waiters)
            if future.done():  # cancelled, its task not yet resumed to leave the queue
                continue
            self.in_use += 1
            future.set_result(None)
