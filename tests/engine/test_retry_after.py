"""The remote engine waits as long as a busy server's ``Retry-After`` asks (docpipe's own server sends it with
its 503s) before trying again, instead of its own short backoff; never longer than the backoff's cap."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from docpipe.engine.base import GenerationRequest, SamplingParams
from docpipe.engine.openai import OpenAIEngine
from docpipe.engine.openai.transport import retry_after_s


class Busy:
    """A chat-completions server that answers its first `busy` requests 503 with ``Retry-After: wait``."""

    def __init__(self, busy: int, wait: str) -> None:
        self.busy, self.wait = busy, wait
        self.arrivals: list[float] = []
        self.lock = threading.Lock()


def _handler(state: Busy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            with state.lock:
                state.arrivals.append(time.monotonic())
                refuse = len(state.arrivals) <= state.busy
            if refuse:
                data = json.dumps({"error": {"message": "busy, try again"}}).encode()
                self.send_response(503)
                self.send_header("Retry-After", state.wait)
            else:
                answer = {"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}], "usage": {}}
                data = json.dumps(answer).encode()
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(state: Busy) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _ask(url: str) -> str:
    engine = OpenAIEngine(url, model="m", retries=2, backoff_s=0.01, timeout_s=30)
    try:
        request = GenerationRequest.chat("s", "q", sampling=SamplingParams(max_tokens=4))
        return engine.generate([request])[0].text
    finally:
        engine.close()


def test_a_retry_waits_as_long_as_retry_after_asks(serve) -> None:
    state = Busy(busy=1, wait="1")
    assert _ask(serve(state)) == "fine"
    first, second = state.arrivals
    assert second - first >= 0.95  # the backoff alone (0.01 s) would have come back at once


def test_without_retry_after_the_backoff_decides_and_a_huge_one_is_capped() -> None:
    assert retry_after_s("120") == 120.0 and retry_after_s("soon") is None and retry_after_s("") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


def test_a_busy_server_without_retry_after_is_retried_at_the_backoff(serve) -> None:
    state = Busy(busy=1, wait="")
    assert _ask(serve(state)) == "fine"
    first, second = state.arrivals
    assert second - first < 0.9
