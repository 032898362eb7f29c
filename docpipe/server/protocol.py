"""The HTTP/1.1 protocol `docpipe serve` runs: uvicorn's h11 protocol plus a deadline and a size limit for
each request's line and headers (uvicorn has neither), so half-sent requests cannot hold connections."""

from __future__ import annotations

import asyncio
import json

from docpipe.server.errors import error_body

__all__ = ["head_deadline_protocol"]


def _raw_reply(status: bytes, kind: str, message: str) -> bytes:
    body = json.dumps(error_body(kind, message)).encode()
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\nconnection: close\r\n\r\n"
        + body
    )


def head_deadline_protocol(header_timeout_s: float, max_head_bytes: int) -> type:
    """Returns uvicorn's h11 protocol with a deadline and a size limit for each request's line and headers.

    uvicorn arms no timer until a first response is sent, so a client that connects and sends nothing, or
    half a header, holds a connection (and a `limit_concurrency` slot) forever. Here a connection waiting
    for a request head gets `header_timeout_s` from its first byte (or from connecting); then 408 and close.
    h11 bounds only a head that arrives in pieces (`max_incomplete_event_size`); one sent whole is checked
    here, so a head over `max_head_bytes` gets 431 either way."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    timed_out = _raw_reply(
        b"408 Request Timeout",
        "header_timeout",
        f"the request line and headers did not arrive within {header_timeout_s:g} s: send the whole request",
    )
    too_large = _raw_reply(
        b"431 Request Header Fields Too Large",
        "headers_too_large",
        f"the request line and headers are over {max_head_bytes // 1024} KB: send fewer or shorter headers",
    )

    class HeadDeadlineH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_timed_out)

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE and self._head_too_large(data):
                self._cancel_head_timer()
                self.transport.write(too_large)
                self.transport.close()
                return
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                if self._head_timer is None:  # the first bytes of a head: its deadline starts now
                    self._head_timer = self.loop.call_later(header_timeout_s, self._head_timed_out)
            else:
                self._cancel_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _head_too_large(self, data: bytes) -> bool:
            pending = self.conn.trailing_data[0] + data
            return pending.find(b"\r\n\r\n", 0, max_head_bytes + 4) == -1 and len(pending) > max_head_bytes

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.write(timed_out)
                self.transport.close()

    return HeadDeadlineH11Protocol
