"""Library events: the library reports what happens through `emit` (an answer-cache hit, pages ingested, an
engine batch) to whatever listeners are registered. With none, as after ``import docpipe``, `emit` is a loop
over an empty tuple, and a failing listener never costs the caller its answer. The Prometheus metrics of
`docpipe serve` are one such listener (`docpipe.server.metrics.Metrics`). Imports only the standard library.

Events (name: values):

- ``answer_cache``: ``hits``, ``misses`` (per `DocPipe.ask_many` call that used the cache)
- ``pages_ingested``: ``pages`` (a document extracted and indexed, not one loaded from the store)
- ``engine_batch``: ``size``, ``seconds``, ``tokens`` (one batch run by the `BatchingEngine`)
- ``engine_queue``: ``depth`` (requests waiting for the `BatchingEngine`, after each change)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Listener", "add_listener", "emit", "remove_listener"]

logger = logging.getLogger(__name__)

Listener = Callable[[str, dict[str, float]], None]

_listeners: tuple[Listener, ...] = ()
_lock = threading.Lock()


def emit(event: str, **values: float) -> None:
    """Hands the event to every registered listener (none by default). Never raises."""
    for listener in _listeners:
        try:
            listener(event, values)
        except Exception:  # noqa: BLE001 - metrics must never cost the caller its answer
            logger.debug("metrics listener failed on %s", event, exc_info=True)


def add_listener(listener: Listener) -> None:
    """Calls `listener(event, values)` for every event from now on."""
    global _listeners
    with _lock:
        _listeners = (*_listeners, listener)


def remove_listener(listener: Listener) -> None:
    """Stops calling `listener` (no error when it was not registered)."""
    global _listeners
    with _lock:
        _listeners = tuple(item for item in _listeners if item is not listener)
