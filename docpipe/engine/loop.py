"""A private asyncio event loop in one daemon thread, so that sync code can drive async code from anywhere:
plain scripts, Gradio's worker threads, and inside a running loop (Jupyter), where ``asyncio.run`` cannot.
`OpenAIEngine` runs its HTTP client on one of its own; one shared loop can serve many callers, as the answer
streams need (an engine such as vLLM's ``AsyncLLM`` keeps working on the loop it started on). Imports only the
standard library.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop"]

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running in a daemon thread named `name`, started on first use.

    `submit` schedules a coroutine on it and returns a `concurrent.futures.Future`; `run` waits for the
    result and cancels the coroutine when the wait is interrupted (KeyboardInterrupt, a timeout); `stop`
    ends the thread and closes the loop, after which any use raises `RuntimeError`. When the thread is gone
    without `stop` (in a forked child, which inherits no threads), ``restart=True`` starts a new loop on next
    use; ``restart=False`` raises `RuntimeError` instead, for owners whose state is bound to the first loop.

    >>> async def answer() -> int:
    ...     return 42
    >>> background = BackgroundLoop("docpipe-example")
    >>> background.run(answer())
    42
    >>> background.stop()
    """

    def __init__(self, name: str, *, restart: bool = True) -> None:
        self.name = name
        self._restart = restart
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running" if self.is_running() else "idle"
        return f"BackgroundLoop({self.name!r}, {state})"

    def get(self) -> asyncio.AbstractEventLoop:
        """Returns the running loop, starting its thread first if needed."""
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"the {self.name} event loop is stopped")
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                if self._thread is not None and not self._restart:
                    raise RuntimeError(
                        f"the {self.name} event loop's thread is gone (in a forked child?): create a new one here"
                    )
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True)
                self._thread.start()
            return self._loop

    def is_running(self) -> bool:
        """Returns True while the loop's thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def is_current(self) -> bool:
        """Returns True when called from the loop's own thread (where waiting on it would deadlock)."""
        return self._thread is not None and self._thread is threading.current_thread()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Returns the future of `coro`, scheduled on the loop."""
        try:
            loop = self.get()
        except BaseException:
            coro.close()  # never awaited otherwise, and Python would warn about it
            raise
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Returns the result of `coro` run on the loop, waiting up to `timeout` seconds (None: no limit)."""
        if self.is_current():
            coro.close()
            raise RuntimeError(f"cannot wait for the {self.name} event loop from its own thread")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the work running
            raise

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stops the loop, waits up to `timeout` seconds for its thread, and closes it (idempotent)."""
        with self._lock:
            self._stopped = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join(timeout=timeout)
        if not thread.is_alive() and not loop.is_closed():
            loop.close()
