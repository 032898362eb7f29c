"""Server-sent events for a streamed ask: one event as bytes (`sse`), the ``error`` event of a stream that
failed after it started (`sse_error`), and the response that runs the events' generator (`EventStream`)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Generator
from typing import Any

from starlette.responses import StreamingResponse

from docpipe.errors import DocpipeError
from docpipe.server.errors import error_status, http_message

__all__ = ["EventStream", "sse", "sse_error"]

logger = logging.getLogger(__name__)


def sse(event: str, data: dict[str, Any]) -> bytes:
    """Returns one server-sent event (JSON data on one line).

    >>> sse("answer", {"text": "90 days"})
    b'event: answer\\ndata: {"text": "90 days"}\\n\\n'
    """
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def sse_error(exc: BaseException) -> bytes:
    """Returns the ``error`` event for a stream that failed after it started: the body an HTTP error would
    have had (`docpipe.server.errors`); an unexpected error's details go to the log, not to the client."""
    if isinstance(exc, DocpipeError):
        status, kind = error_status(exc)
        if status >= 500:
            logger.warning("a streamed ask failed: %s: %s", type(exc).__name__, exc)
        return sse("error", {"error": {"type": kind, "message": http_message(exc)}})
    reference = uuid.uuid4().hex[:12]
    logger.error("unexpected error %s in a streamed ask", reference, exc_info=(type(exc), exc, exc.__traceback__))
    message = f"unexpected server error (reference {reference}): see the server log"
    return sse("error", {"error": {"type": "internal_error", "message": message}})


class EventStream(StreamingResponse):
    """A text/event-stream response of `events` (server-sent events from a generator run in worker threads).
    When the client disconnects the generator is closed at once (which cancels the engine's request), not when
    the next piece fails to send; a failure on the way becomes an ``error`` event."""

    def __init__(self, events: Generator[bytes, None, None]) -> None:
        # A proxy in front must pass each event on as it comes (nginx buffers unless told not to).
        super().__init__(
            (), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )
        self.events = events

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import anyio
        from starlette.concurrency import run_in_threadpool

        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})

        async def pump() -> None:
            end = object()
            try:
                try:
                    while (chunk := await run_in_threadpool(next, self.events, end)) is not end:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except OSError:  # the client is gone (uvicorn's ClientDisconnected)
                    return
                except Exception as exc:  # noqa: BLE001 - the status is sent: the error goes in the stream
                    await send({"type": "http.response.body", "body": sse_error(exc), "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                tasks.cancel_scope.cancel()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(pump)
                tasks.start_soon(watch)
        finally:
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(self.events.close)
