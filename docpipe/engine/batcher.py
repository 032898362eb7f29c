"""Dynamic batching for engines that run one batch at a time (`VLLMEngine`, vLLM's ``LLM``, which returns a
batch whole; the echo engine stands in for it in tests): requests from callers that arrive one by one (CLI
loops, API users in threads, the UI) that come within `batch_timeout_ms` of each other, up to `max_batch_size`,
go to the engine as one batch. `batch_sizes` records the batches actually formed. An engine that takes
requests as they come (``continuous_batching = True``: the OpenAI-compatible engine to a model server) is not
wrapped (`DocPipe` sends to it directly): it batches continuously and schedules by priority itself, and a
batcher would hold a question behind a running batch.

Priority: waiting callers are served lowest `GenerationRequest.priority` first (vLLM's convention), so an
interactive question (`PRIORITY_INTERACTIVE`) queued behind bulk work (`PRIORITY_ANALYSIS`,
`PRIORITY_BULK`) runs in the next batch. A batch started for urgent work takes no less urgent work along:
an offline engine returns a batch only when all of it is done, and a question must not wait for a long
analysis. Bulk work started first may take urgent callers along, which only brings their answers forward.
No batch holds more than `max_batch_size` requests: a caller with more (a review grid's thousands of
prompts) is split into batches of that size, so an urgent caller waits for one batch at most.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from docpipe.engine.base import Engine, GenerationRequest, GenerationResult
from docpipe.errors import EngineError
from docpipe.events import emit

__all__ = ["BatchingEngine"]

logger = logging.getLogger(__name__)

# A part of one caller's requests, at most max_batch_size: (priority, arrival number, requests, its future).
_Item = tuple[int, int, list[GenerationRequest], "Future[list[GenerationResult]]"]


class BatchingEngine:
    """Returns results like the wrapped engine, gathering concurrent callers' requests into shared batches.

    >>> from docpipe.engine.fake import EchoEngine
    >>> engine = BatchingEngine(EchoEngine(), max_batch_size=8, batch_timeout_ms=20)
    >>> len(engine.generate([GenerationRequest.chat("s", "q")] * 3))
    3
    >>> engine.close()
    """

    def __init__(self, engine: Engine, *, max_batch_size: int = 16, batch_timeout_ms: float = 10.0) -> None:
        if max_batch_size < 1:
            raise ValueError("BatchingEngine needs max_batch_size >= 1")
        self.engine = engine
        self.name = engine.name
        self.model = engine.model
        self.max_model_len = getattr(engine, "max_model_len", None)
        self.max_batch_size = max_batch_size
        self.batch_timeout_s = batch_timeout_ms / 1000.0
        self.batch_sizes: list[int] = []
        self._heap: list[_Item] = []
        self._arrivals = itertools.count()
        self._waiting = 0  # requests in the heap
        self._cond = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="docpipe-batcher", daemon=True)
        self._worker.start()

    @property
    def queue_depth(self) -> int:
        """Returns how many requests wait for a batch (not counting the batch running now)."""
        return self._waiting

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns one result per request, in order, once the batches holding them have run.

        More than `max_batch_size` requests queue as several parts (in order, each its own batch or part of
        one), so a more urgent caller arriving meanwhile runs after the part running now, not after all.
        """
        if not requests:
            return []
        size = self.max_batch_size
        parts = [list(requests[start : start + size]) for start in range(0, len(requests), size)]
        futures: list[Future[list[GenerationResult]]] = [Future() for _ in parts]
        with self._cond:
            if self._closed:
                raise EngineError("this engine is closed: create a new DocPipe (or engine) to answer again")
            for items, future in zip(parts, futures, strict=True):
                heapq.heappush(self._heap, (min(r.priority for r in items), next(self._arrivals), items, future))
            self._waiting += len(requests)
            depth = self._waiting
            self._cond.notify()
        emit("engine_queue", depth=depth)
        results: list[GenerationResult] = []
        try:
            for future in futures:
                results.extend(future.result())
        except BaseException:
            # A failed part (or an interrupted caller): the parts not started yet are dropped, not run.
            for future in futures:
                future.cancel()
            raise
        return results

    def _take(self, limit: int, room: int) -> _Item | None:
        """Returns the most urgent waiting part no less urgent than `limit` that fits in `room`, or None
        (lock held). A part whose caller has given up is dropped."""
        while self._heap and self._heap[0][0] <= limit and len(self._heap[0][2]) <= room:
            item = heapq.heappop(self._heap)
            self._waiting -= len(item[2])
            if item[3].set_running_or_notify_cancel():
                return item
        return None

    def _next_batch(self) -> list[_Item] | None:
        with self._cond:
            first = None
            while first is None:
                while not self._heap:
                    if self._closed:
                        return None
                    self._cond.wait()
                first = self._take(self._heap[0][0], self.max_batch_size)
            pending, size, limit = [first], len(first[2]), first[0]
            # Wait a moment for other callers, but never past the batch limit.
            while size < self.max_batch_size:
                item = self._take(limit, self.max_batch_size - size)
                if item is None:
                    if self._closed or (self._heap and self._heap[0][0] <= limit):
                        break  # closing, or the next part in line does not fit: run what we have
                    deadline = time.monotonic() + self.batch_timeout_s
                    while item is None and not self._closed:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self._cond.wait(remaining)
                        item = self._take(limit, self.max_batch_size - size)
                    if item is None:
                        break
                pending.append(item)
                size += len(item[2])
            depth = self._waiting
        emit("engine_queue", depth=depth)
        return pending

    def _run(self) -> None:
        while True:
            pending = self._next_batch()
            if pending is None:
                return
            batch = [request for _, _, requests, _ in pending for request in requests]
            self.batch_sizes.append(len(batch))
            started = time.perf_counter()
            try:
                results = self.engine.generate(batch)
            except BaseException as exc:  # noqa: BLE001 - every waiting caller gets the engine's error
                for *_, future in pending:
                    future.set_exception(exc)
                continue
            emit(
                "engine_batch",
                size=len(batch),
                seconds=time.perf_counter() - started,
                tokens=sum(r.completion_tokens for r in results),
            )
            start = 0
            for _, _, requests, future in pending:
                future.set_result(results[start : start + len(requests)])
                start += len(requests)

    def close(self) -> None:
        """Stops the batching thread (after the waiting batches have run) and closes the wrapped engine."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.join(timeout=60)
        self.engine.close()
