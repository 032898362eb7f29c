"""The remote engine's wire on the ``openai`` SDK, against a small real chat-completions server of ours on
127.0.0.1 that records what reaches it: vLLM's extensions (the thinking switch, ``top_k``, ``priority``, the
budget continuation's fields) arrive as top-level fields of the JSON body, the thinking comes back split, a 503's
``Retry-After`` is honoured on the streamed path too, no OpenAI credential from the environment leaks to the
server, and a server that is not OpenAI-compatible, a broken stream or refused credentials fail clearly.
The same engine against a real ``vllm serve``: tests/engine/test_engine_remote.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from docpipe.engine.base import PRIORITY_BULK, GenerationRequest, GenerationResult, SamplingParams
from docpipe.engine.openai import OpenAIEngine
from docpipe.errors import ConfigError

# What the JSON body held before the SDK (the hand-written transport sent these, and nothing else).
SENT = {"model", "messages", "temperature", "top_p", "max_tokens", "presence_penalty", "top_k", "min_p"}
SENT |= {"chat_template_kwargs"}


@dataclass
class Recorder:
    """What a chat-completions server of ours answers (`mode`), and what reached it."""

    mode: str = "ok"  # ok | html | malformed | not-an-object | error-event | auth
    busy: int = 0  # how many first POSTs get 503 with Retry-After: `retry_after`
    retry_after: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _answer(body: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """Returns (reasoning, content, finish): a thinking request's first round is cut by the budget."""
    thinking = body.get("chat_template_kwargs", {}).get("enable_thinking")
    if thinking and not body.get("continue_final_message"):
        return "Clause 12.3 says", None, "length"
    return None, "Ninety days.", "stop"


def _handler(state: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the connection closes after each answer, a stream's end included

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, data: bytes, kind: str = "application/json", **extra: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if state.mode == "html":
                self._send(200, b"<html><body>Welcome to nginx!</body></html>", "text/html")
            else:
                models = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}
                self._send(200, json.dumps(models).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.bodies.append(body)
                state.headers.append({name.lower(): value for name, value in self.headers.items()})
                state.arrivals.append(time.monotonic())
                refuse = len(state.arrivals) <= state.busy
            if refuse:
                error = json.dumps({"error": {"message": "busy, try again"}}).encode()
                self._send(503, error, Retry_After=state.retry_after)
            elif state.mode == "auth":
                self._send(401, json.dumps({"error": {"message": "invalid API key"}}).encode())
            elif state.mode == "html":
                self._send(200, b"<html><body>Welcome to nginx!</body></html>", "text/html")
            elif body.get("stream"):
                self._stream(body)
            else:
                reasoning, content, finish = _answer(body)
                message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
                choice = {"index": 0, "message": message, "finish_reason": finish}
                usage = {"prompt_tokens": 5, "completion_tokens": 3}
                self._send(200, json.dumps({"id": "c-1", "choices": [choice], "usage": usage}).encode())

        def _stream(self, body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            reasoning, content, finish = _answer(body)
            events: list[Any] = []
            if reasoning:  # older servers' field name, in two pieces
                events += [{"reasoning_content": reasoning[:7]}, {"reasoning_content": reasoning[7:]}]
            if content:
                events += [{"content": content[:5]}, {"content": content[5:]}]
            lines = [{"id": "c-2", "choices": [{"index": 0, "delta": delta}]} for delta in events]
            if state.mode == "malformed":
                lines.insert(1, "{not json")
            elif state.mode == "not-an-object":
                lines.insert(1, [1, 2])
            elif state.mode == "error-event":
                lines.insert(1, {"error": {"message": "the engine core died", "code": 500}})
            lines.append({"id": "c-2", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            lines.append({"id": "c-2", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
            for line in lines:
                text = line if isinstance(line, str) else json.dumps(line)
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(state: Recorder) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _thinking_request(**kwargs: Any) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.6, top_p=0.95, top_k=7, min_p=0.05, max_tokens=16, seed=3)
    return GenerationRequest.chat("s", "Notice?", thinking=True, sampling=sampling, max_thinking_tokens=8, **kwargs)


def _streamed(engine: OpenAIEngine, request: GenerationRequest) -> GenerationResult:
    async def run() -> GenerationResult:
        events = [event async for event in engine.stream(request)]
        assert events[-1].kind == "done" and events[-1].result is not None
        return events[-1].result

    return asyncio.run(run())


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
def test_vllm_fields_reach_the_server_as_top_level_body_fields(serve, streamed: bool) -> None:
    state = Recorder()
    request = _thinking_request(priority=PRIORITY_BULK, request_id="req-7")
    with OpenAIEngine(serve(state), model="m", retries=0) as engine:
        result = _streamed(engine, request) if streamed else engine.generate([request])[0]

    # Budget continuation: the thought was cut, a second request asked for the answer.
    assert (result.error, result.text, result.thinking) == (None, "Ninety days.", "Clause 12.3 says")
    assert result.thinking_truncated and result.completion_tokens == 6
    first, second = state.bodies
    stream_fields = {"stream", "stream_options"} if streamed else set()
    assert set(first) == SENT | {"seed", "priority"} | stream_fields  # exactly what docpipe sent before the SDK
    assert first["chat_template_kwargs"] == {"enable_thinking": True}
    assert (first["top_k"], first["min_p"], first["priority"], first["seed"]) == (7, 0.05, PRIORITY_BULK, 3)
    assert first["max_tokens"] == 16 + 8  # the answer's tokens and the thinking budget
    if streamed:
        assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert set(second) == set(first) | {"continue_final_message", "add_generation_prompt"}
    assert (second["continue_final_message"], second["add_generation_prompt"]) == (True, False)
    assert second["chat_template_kwargs"] == {"enable_thinking": False}
    assert second["messages"][-1]["content"].startswith("<think>\nClause 12.3 says")
    assert second["max_tokens"] == 16
    assert [headers.get("x-request-id") for headers in state.headers] == ["req-7", "req-7"]


def test_a_question_at_the_default_priority_sends_no_priority_field(serve) -> None:
    state = Recorder()
    with OpenAIEngine(serve(state), model="m", retries=0) as engine:
        result = engine.generate([GenerationRequest.chat("s", "Term?", sampling=SamplingParams(max_tokens=4))])[0]
    assert result.text == "Ninety days."
    [body] = state.bodies
    assert set(body) == SENT and body["chat_template_kwargs"] == {"enable_thinking": False}


def test_a_streamed_request_waits_as_long_as_retry_after_asks(serve) -> None:
    state = Recorder(busy=1, retry_after="1")
    with OpenAIEngine(serve(state), model="m", retries=2, backoff_s=0.01) as engine:
        result = _streamed(engine, GenerationRequest.chat("s", "q", sampling=SamplingParams(max_tokens=4)))
    assert result.error is None and result.text == "Ninety days."
    first, second = state.arrivals
    assert second - first >= 0.95  # the backoff alone (0.01 s) would have come back at once


def test_a_retry_after_given_as_an_http_date_is_honoured(serve) -> None:
    state = Recorder(busy=1, retry_after=formatdate(time.time() + 2, usegmt=True))  # 1 to 2 s away: whole seconds
    with OpenAIEngine(serve(state), model="m", retries=1, backoff_s=0.01) as engine:
        assert engine.generate([GenerationRequest.chat("s", "q")])[0].text == "Ninety days."
    first, second = state.arrivals
    assert second - first >= 0.9


def test_no_openai_credential_from_the_environment_reaches_the_server(serve, monkeypatch) -> None:
    # The SDK reads these for api.openai.com; the engine's server is someone else's (or the user's own).
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-the-environment")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-the-environment")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "Authorization: Bearer sk-custom-from-the-environment")
    state = Recorder()
    url = serve(state)
    with OpenAIEngine(url, model="m", retries=0) as engine:
        engine.generate([GenerationRequest.chat("s", "q")])
    with OpenAIEngine(url, model="m", api_key="the-servers-key", retries=0) as engine:
        engine.generate([GenerationRequest.chat("s", "q")])

    without_key, with_key = state.headers
    assert "from-the-environment" not in json.dumps(state.headers)
    assert "openai-organization" not in without_key and "openai-project" not in without_key
    assert with_key["authorization"] == "Bearer the-servers-key"


def test_a_server_that_is_not_openai_compatible_is_a_config_error_that_says_so(serve) -> None:
    url = serve(Recorder(mode="html"))  # e.g. the URL of a web server, not of the model server
    with pytest.raises(ConfigError, match="did not answer as an OpenAI-compatible server") as listed:
        OpenAIEngine(url, retries=0)  # model=None asks the model list first
    with OpenAIEngine(url, model="m", retries=0) as engine:
        with pytest.raises(ConfigError, match="did not answer as an OpenAI-compatible server") as asked:
            engine.generate([GenerationRequest.chat("s", "q")])
    assert "its model list is not JSON" in str(listed.value)
    assert "not JSON: '<html><body>Welcome to nginx!" in str(asked.value)  # what came back instead
    for caught in (listed, asked):
        assert "DOCPIPE_ENGINE__URL" in str(caught.value)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("malformed", "the server sent a malformed stream chunk: '{not json'"),
        ("not-an-object", "the server sent a malformed stream chunk: '[1, 2]'"),
        ("error-event", "the server stopped the stream: the engine core died"),
    ],
)
def test_a_broken_stream_ends_with_the_error_on_its_result(serve, mode: str, expected: str) -> None:
    with OpenAIEngine(serve(Recorder(mode=mode)), model="m", retries=0) as engine:
        result = _streamed(engine, GenerationRequest.chat("s", "q", sampling=SamplingParams(max_tokens=4)))
    assert result.finish_reason == "error" and result.error == expected
    assert result.text == "Ninet"  # what was streamed before the break, and nothing else


def test_refused_credentials_are_a_config_error_without_retries(serve) -> None:
    state = Recorder(mode="auth")
    with OpenAIEngine(serve(state), model="m", api_key="wrong", retries=3, backoff_s=0.5) as engine:
        with pytest.raises(ConfigError, match="refused the credentials") as caught:
            engine.generate([GenerationRequest.chat("s", "q")])
    assert "HTTP 401: invalid API key" in str(caught.value) and "check the API key" in str(caught.value)
    assert len(state.arrivals) == 1  # asked once
