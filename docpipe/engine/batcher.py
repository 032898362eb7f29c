"""Dynamic batching for callers that arrive one by one (CLI loops, API users in threads, the UI): requests
that come within `batch_timeout_ms` of each other, up to `max_batch_size`, go to the engine as one batch.
`batch_sizes` records the batches actually formed."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from docpipe.engine.base import Engine, GenerationRequest, GenerationResult

__all__ = ["BatchingEngine"]

logger = logging.getLogger(__name__)


class BatchingEngine:
    """Returns results like the wrapped engine, gathering concurrent callers' requests into shared batches.

    >>> from docpipe.engine.fake import EchoEngine
    >>> engine = BatchingEngine(EchoEngine(), max_batch_size=8, batch_timeout_ms=20)
    >>> len(engine.generate([GenerationRequest.chat("s", "q")] * 3))
    3
    >>> engine.close()
    """

    def __init__(self, engine: Engine, *, max_batch_size: int = 16, batch_timeout_ms: float = 10.0) -> None:
        self.engine = engine
        self.name = engine.name
        self.model = engine.model
        self.max_model_len = getattr(engine, "max_model_len", None)
        self.max_batch_size = max_batch_size
        self.batch_timeout_s = batch_timeout_ms / 1000.0
        self.batch_sizes: list[int] = []
        self._queue: queue.Queue[tuple[list[GenerationRequest], Future] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="docpipe-batcher", daemon=True)
        self._worker.start()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns one result per request, in order, once the batch holding them has run."""
        if not requests:
            return []
        future: Future[list[GenerationResult]] = Future()
        self._queue.put((list(requests), future))
        return future.result()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            pending = [item]
            size = len(item[0])
            # Wait a moment for other callers, but never past the batch limit.
            while size < self.max_batch_size:
                try:
                    nxt = self._queue.get(timeout=self.batch_timeout_s)
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                pending.append(nxt)
                size += len(nxt[0])
            batch = [request for requests, _ in pending for request in requests]
            self.batch_sizes.append(len(batch))
            try:
                results = self.engine.generate(batch)
            except BaseException as exc:  # noqa: BLE001 - every waiting caller gets the engine's error
                for _, future in pending:
                    future.set_exception(exc)
                continue
            start = 0
            for requests, future in pending:
                future.set_result(results[start : start + len(requests)])
                start += len(requests)

    def close(self) -> None:
        """Stops the batching thread (after the batches in flight) and closes the wrapped engine."""
        self._queue.put(None)
        self._worker.join(timeout=60)
        self.engine.close()
