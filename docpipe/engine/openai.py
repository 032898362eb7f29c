"""The remote engine: any OpenAI-compatible chat-completions server, such as ``vllm serve Qwen/Qwen3-14B
--reasoning-parser qwen3`` (how users scale past one machine) or Ollama's ``/v1`` endpoint.

One `OpenAIEngine` serves both protocols. The sync `generate` and the async `complete`/`stream` all run on
one private event loop in a background thread, so the batch call works from plain scripts and from inside a
running loop (Jupyter, Gradio) alike, and `max_concurrency` bounds every caller's requests together.

Thinking: switched per request through ``chat_template_kwargs={"enable_thinking": ...}``. The thinking
comes back in ``message.reasoning`` (vLLM >= 0.3x with a reasoning parser) or ``reasoning_content`` (older
servers); a server that does not split it leaves ``<think>`` in the content, which is split here, so the
answer text never holds a ``<think>`` block.

Thinking budget: a remote server cannot stop at ``</think>`` for us, so a request with
``max_thinking_tokens`` asks for ``max_thinking_tokens + max_tokens`` tokens. When the length limit cut the
thought (thinking, no answer), a second request continues the assistant turn from the cut thought, closed
with Qwen's "Considering the limited time..." line (``continue_final_message``, a vLLM extension), and
`GenerationResult.thinking_truncated` is set.

Failures:

- Server unreachable (refused, DNS, timeouts) or failing (5xx, 408, 429): retried with exponential
  backoff and full jitter, then `EngineUnavailableError` is raised - for a batch, the whole batch fails,
  because every other request would fail the same way.
- HTTP 401/403/404 (API key, model name, URL): `ConfigError`, no retry - the engine's settings are wrong,
  not one request.
- Any other 4xx (prompt too long, bad sampling value): no retry; that request's result gets ``error`` (the
  server's message) and ``finish_reason="error"``, and the rest of the batch goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from docpipe.engine.base import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    StreamEvent,
    StreamTrim,
    split_thinking,
)
from docpipe.errors import ConfigError, DependencyError, EngineError, EngineUnavailableError

try:
    import httpx
except ImportError:  # pragma: no cover - httpx comes with the server-side extras
    httpx = None  # type: ignore[assignment]

__all__ = ["OpenAIEngine"]

logger = logging.getLogger(__name__)

BUDGET_CLOSE = "\n\nConsidering the limited time, I have to give the answer now.\n</think>\n\n"
_HOW_TO_FIX = "start it (e.g. `vllm serve Qwen/Qwen3-14B --reasoning-parser qwen3`) or fix DOCPIPE_ENGINE__URL"
_RETRY_STATUS = frozenset({408, 429})
_MAX_BACKOFF_S = 30.0
_TAGS = ("<think>", "</think>")

T = TypeVar("T")


class _ServerFailure(Exception):
    """A retryable answer from the server (5xx, 408, 429)."""


class _Rejected(Exception):
    """A 4xx that concerns one request: it becomes that result's error."""


@dataclass(slots=True)
class _Round:
    """One HTTP completion: what the server said, before the thinking budget's second round is merged."""

    answer: str = ""
    thinking: str | None = None
    finish: FinishReason = "stop"
    raw_finish: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    id: str = ""


class OpenAIEngine:
    """An engine over an OpenAI-compatible server; `generate` returns one result per request, in order.

    >>> engine = OpenAIEngine("http://127.0.0.1:8000", model="Qwen/Qwen3-14B")  # doctest: +SKIP
    >>> request = GenerationRequest.chat("Answer from the contract.", "What is the notice period?")
    >>> [result] = engine.generate([request])  # doctest: +SKIP
    >>> result.text, result.finish_reason  # doctest: +SKIP
    ('Ninety (90) days.', 'stop')
    >>> engine.close()  # doctest: +SKIP

    `base_url` may end in ``/v1`` or not. `model=None` asks ``/v1/models`` and takes the first id.
    `timeout_s` bounds each wait for the server (for a stream: between two chunks), `connect_timeout_s`
    each connection attempt. `retries` counts attempts after the first.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        max_concurrency: int = 16,
        timeout_s: float = 120,
        connect_timeout_s: float = 5,
        retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        if httpx is None:
            raise DependencyError("httpx is not installed: pip install httpx")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"the engine URL must start with http:// or https://: got {base_url!r}", url=base_url)
        if max_concurrency < 1 or retries < 0 or timeout_s <= 0 or connect_timeout_s <= 0 or backoff_s < 0:
            raise ConfigError(
                "OpenAIEngine needs max_concurrency >= 1, retries >= 0, positive timeouts and backoff_s >= 0"
            )
        root = base_url.rstrip("/")
        self.base_url = root if root.endswith("/v1") else root + "/v1"
        self.max_concurrency = max_concurrency
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self._api_key = api_key
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="docpipe-openai-engine", daemon=True)
        self._thread.start()
        self._finalizer = weakref.finalize(self, _stop_loop, self._loop, self._thread)
        self._slots = asyncio.Semaphore(max_concurrency)
        try:
            self._client: httpx.AsyncClient = self._run(self._open_client())
            # vLLM lists each model's context window; when we ask the server anyway, keep it, so the
            # context budget shrinks to fit a small window (None: unknown, the settings decide).
            self.max_model_len: int | None = None
            if model:
                self.model: str = model
            else:
                self.model, self.max_model_len = self._run(self._first_model())
        except BaseException:
            self.close()
            raise
        logger.info("engine %s at %s, model %s", self.name, self.base_url, self.model)

    def __repr__(self) -> str:
        return f"OpenAIEngine({self.base_url!r}, model={self.model!r})"

    # -- public API -------------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns one result per request, in request order; at most `max_concurrency` are in flight.

        Raises `EngineUnavailableError` when the server cannot be reached and `ConfigError` on 401/403/404;
        any other 4xx lands on that request's result (``error``, ``finish_reason="error"``).
        """
        if not requests:
            return []
        return self._run(self._generate(list(requests)))

    async def complete(self, request: GenerationRequest) -> GenerationResult:
        """Returns the result of one request (same failure rules as `generate`); cancellable."""
        return await asyncio.wrap_future(self._submit(self._complete(request)))

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Returns an async iterator of ``thinking``/``answer`` pieces, then one ``done`` event with the result.

        The result's text is exactly the concatenated answer pieces (and its thinking the thinking pieces).
        Stopping the iteration early cancels the request on the server side (the connection is closed).
        """
        caller = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def put(item: tuple[str, Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is already closed
                caller.call_soon_threadsafe(queue.put_nowait, item)

        async def produce() -> None:
            # Every way out puts something on the queue: the caller must never wait for a producer that is gone.
            try:
                async for event in self._stream(request):
                    put(("event", event))
            except asyncio.CancelledError:
                put(("error", EngineError("the engine was closed during the stream", url=self.base_url)))
                raise
            except BaseException as exc:  # handed over to the caller's loop and raised there
                put(("error", exc))
                return
            put(("end", None))

        future = self._submit(produce())
        try:
            while True:
                tag, item = await queue.get()
                if tag == "event":
                    yield item
                elif tag == "error":
                    raise item
                else:
                    return
        finally:
            future.cancel()

    def close(self) -> None:
        """Returns None; closes the connections and stops the engine's thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._thread.is_alive():
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        except Exception:  # noqa: BLE001 - closing must not fail; the thread is stopped regardless
            logger.debug("engine shutdown did not finish cleanly", exc_info=True)
        finally:
            self._finalizer()

    async def aclose(self) -> None:
        """Returns None; `close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> OpenAIEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAIEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the private loop -------------------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Any:
        if self._closed:
            coro.close()
            raise EngineError("this OpenAIEngine is closed: create a new one")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("OpenAIEngine's sync methods cannot be called from its own event loop")
        future = self._submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the requests running
            raise

    async def _open_client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s),
            # A few connections beyond the request slots, for /models and for streams being closed.
            # No pool cap: the request slots bound the load, and httpcore 1.0.9 leaks a pool entry when a
            # request is cancelled while connecting (encode/httpcore#1093): a cap would fill up and block.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=self.max_concurrency),
        )

    async def _shutdown(self) -> None:
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        client = getattr(self, "_client", None)
        if client is not None:
            await client.aclose()

    # -- requests ---------------------------------------------------------------------------------------

    async def _generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        tasks = [asyncio.ensure_future(self._complete(request)) for request in requests]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _first_model(self) -> tuple[str, int | None]:
        try:
            data = await self._retrying(lambda: self._send("GET", "models"))
        except _Rejected as exc:
            raise ConfigError(f"{exc}: pass model= or set DOCPIPE_ENGINE__MODEL", url=self.base_url) from exc
        ids = [entry.get("id") for entry in data.get("data") or [] if isinstance(entry, dict) and entry.get("id")]
        if not ids:
            raise ConfigError(
                f"the server at {self.base_url} lists no models: pass model= or set DOCPIPE_ENGINE__MODEL",
                url=self.base_url,
            )
        logger.info("server at %s serves %s; using %s", self.base_url, ids, ids[0])
        first = next(entry for entry in data["data"] if isinstance(entry, dict) and entry.get("id") == ids[0])
        window = first.get("max_model_len")
        return str(ids[0]), (int(window) if isinstance(window, int) and window > 0 else None)

    async def _complete(self, request: GenerationRequest) -> GenerationResult:
        start = time.perf_counter()
        budget = request.max_thinking_tokens if request.thinking else None
        rounds: list[_Round] = []
        error: str | None = None
        try:
            body = self._body(request, max_tokens=request.sampling.max_tokens + (budget or 0))
            rounds.append(await self._post(body, request))
            first = rounds[0]
            if budget is not None and first.finish == "length" and first.thinking and not first.answer:
                logger.debug("thinking budget of %d tokens cut the thought: asking for the answer", budget)
                rounds.append(await self._post(self._continuation(request, first.thinking), request))
        except _Rejected as exc:
            error = str(exc)
        answer = rounds[-1].answer if rounds else ""
        thinking = rounds[0].thinking if rounds else None
        return _merge(rounds, answer, thinking, time.perf_counter() - start, None, error)

    async def _post(self, body: dict[str, Any], request: GenerationRequest) -> _Round:
        return _parse_completion(await self._retrying(lambda: self._send("POST", "chat/completions", body, request)))

    async def _stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        start = time.perf_counter()
        budget = request.max_thinking_tokens if request.thinking else None
        trims = {"thinking": StreamTrim(), "answer": StreamTrim()}
        pieces: dict[str, list[str]] = {"thinking": [], "answer": []}
        first_token_s: float | None = None
        rounds: list[_Round] = []
        error: str | None = None
        bodies = [self._body(request, max_tokens=request.sampling.max_tokens + (budget or 0))]
        try:
            while bodies:
                current = _Round()
                rounds.append(current)
                splitter = _ThinkSplitter(hold=request.thinking and len(rounds) == 1)
                async for kind, raw in self._stream_round(bodies.pop(), request, splitter, current):
                    piece = trims[kind].push(raw)
                    if piece:
                        first_token_s = first_token_s if first_token_s is not None else time.perf_counter() - start
                        pieces[kind].append(piece)
                        yield StreamEvent(kind, piece)  # type: ignore[arg-type]
                current.answer, current.thinking = "".join(pieces["answer"]), "".join(pieces["thinking"]) or None
                if len(rounds) == 1 and budget is not None and current.finish == "length":
                    if current.thinking and not current.answer:
                        logger.debug("thinking budget of %d tokens cut the thought: asking for the answer", budget)
                        bodies.append(self._continuation(request, current.thinking))
        except _Rejected as exc:
            error = str(exc)
        # The result holds exactly what was streamed, piece for piece.
        answer, thinking = "".join(pieces["answer"]), "".join(pieces["thinking"]) or None
        result = _merge(rounds, answer, thinking, time.perf_counter() - start, first_token_s, error)
        yield StreamEvent("done", result=result)

    async def _stream_round(
        self, body: dict[str, Any], request: GenerationRequest, splitter: _ThinkSplitter, out: _Round
    ) -> AsyncIterator[tuple[str, str]]:
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        async with self._open_stream(body, request) as response:
            try:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[len("data:") :].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError as exc:
                        raise _Rejected(f"the server sent a malformed stream chunk: {payload[:200]!r}") from exc
                    if chunk.get("error"):
                        raise _Rejected(f"the server stopped the stream: {_error_message(chunk)}")
                    out.id = out.id or str(chunk.get("id") or "")
                    _read_usage(chunk.get("usage"), out)
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        reasoning = delta.get("reasoning") or delta.get("reasoning_content")
                        if reasoning:
                            for item in splitter.reasoning(reasoning):
                                yield item
                        if delta.get("content"):
                            for item in splitter.feed(delta["content"]):
                                yield item
                        if choice.get("finish_reason"):
                            out.raw_finish = choice["finish_reason"]
                            out.finish = _finish(out.raw_finish)
            except httpx.TransportError as exc:
                raise self._unavailable(f"{_describe(exc, self)} while streaming", 1) from exc
        for item in splitter.flush():
            yield item

    # -- HTTP with retries ------------------------------------------------------------------------------

    async def _send(
        self, method: str, path: str, body: dict[str, Any] | None = None, request: GenerationRequest | None = None
    ) -> dict[str, Any]:
        async with self._slots:
            response = await self._client.request(method, path, json=body, headers=_headers(request))
        self._check(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise ConfigError(
                f"the server at {self.base_url} did not answer as an OpenAI-compatible server "
                f"(not JSON: {response.text[:200]!r}): fix DOCPIPE_ENGINE__URL",
                url=self.base_url,
            ) from exc
        return data if isinstance(data, dict) else {}

    @contextlib.asynccontextmanager
    async def _open_stream(self, body: dict[str, Any], request: GenerationRequest) -> AsyncIterator[httpx.Response]:
        async def attempt() -> httpx.Response:
            await self._slots.acquire()
            response: httpx.Response | None = None
            try:
                built = self._client.build_request("POST", "chat/completions", json=body, headers=_headers(request))
                response = await self._client.send(built, stream=True)
                if response.status_code >= 400:
                    await response.aread()
                    self._check(response)  # raises
                return response  # the slot goes with it
            except BaseException:
                try:
                    if response is not None:
                        await response.aclose()
                finally:
                    self._slots.release()
                raise

        response = await self._retrying(attempt)
        try:
            yield response
        finally:
            # Release first: a close interrupted by a second cancellation must not keep the slot forever.
            self._slots.release()
            await response.aclose()

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        attempts = self.retries + 1
        reachable = False
        for number in range(1, attempts + 1):
            try:
                return await attempt()
            except httpx.TransportError as exc:
                reason, reachable = _describe(exc, self), False
            except _ServerFailure as exc:
                reason, reachable = str(exc), True
            if number < attempts:
                delay = random.uniform(0, min(_MAX_BACKOFF_S, self.backoff_s * 2 ** (number - 1)))
                logger.warning(
                    "language model server at %s: %s; retry %d of %d in %.2f s",
                    self.base_url,
                    reason,
                    number,
                    self.retries,
                    delay,
                )
                await asyncio.sleep(delay)
        if reachable:
            raise EngineUnavailableError(
                f"the language model server at {self.base_url} keeps failing ({reason}, {attempts} attempts): "
                "check the server's log",
                url=self.base_url,
                reason=reason,
                attempts=attempts,
            )
        raise self._unavailable(reason, attempts)

    def _unavailable(self, reason: str, attempts: int) -> EngineUnavailableError:
        return EngineUnavailableError(
            f"cannot reach the language model server at {self.base_url} ({reason}): {_HOW_TO_FIX}",
            url=self.base_url,
            reason=reason,
            attempts=attempts,
        )

    def _check(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        message = _error_message(_json_or_text(response))
        if status >= 500 or status in _RETRY_STATUS:
            raise _ServerFailure(f"HTTP {status}: {message}")
        if status in (401, 403):
            raise ConfigError(
                f"the language model server at {self.base_url} refused the credentials (HTTP {status}: "
                f"{message}): check the API key",
                url=self.base_url,
                status=status,
            )
        if status == 404:
            raise ConfigError(
                f"the language model server at {self.base_url} answered HTTP 404 ({message}): check the model "
                "name (DOCPIPE_ENGINE__MODEL) and the URL (DOCPIPE_ENGINE__URL)",
                url=self.base_url,
                status=status,
            )
        raise _Rejected(f"the language model server rejected the request (HTTP {status}): {message}")

    # -- request bodies ---------------------------------------------------------------------------------

    def _body(
        self,
        request: GenerationRequest,
        *,
        max_tokens: int,
        messages: list[dict[str, str]] | None = None,
        thinking: bool | None = None,
    ) -> dict[str, Any]:
        sampling = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages if messages is not None else [dict(m) for m in request.messages],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": max_tokens,
            "presence_penalty": sampling.presence_penalty,
            # vLLM's extra sampling fields: its server takes them as top-level keys; others ignore them.
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
            "chat_template_kwargs": {"enable_thinking": request.thinking if thinking is None else thinking},
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        # Only when not the default: vLLM orders by it with --scheduling-policy priority (and ignores it under
        # its default fcfs); servers without the extension (OpenAI itself) may refuse an unknown field.
        if request.priority:
            body["priority"] = request.priority
        return body

    def _continuation(self, request: GenerationRequest, thinking: str) -> dict[str, Any]:
        """Returns the body that continues the assistant turn from a budget-cut thought, closed by us."""
        messages = [dict(m) for m in request.messages]
        messages.append({"role": "assistant", "content": "<think>\n" + thinking + BUDGET_CLOSE})
        # enable_thinking=False: the template adds nothing without a generation prompt, and it tells vLLM's
        # reasoning parser that the completion is answer, not more thinking (the </think> is in the prompt).
        body = self._body(request, max_tokens=request.sampling.max_tokens, messages=messages, thinking=False)
        body.update(continue_final_message=True, add_generation_prompt=False)
        return body


# -- parsing ----------------------------------------------------------------------------------------------


def _parse_completion(data: dict[str, Any]) -> _Round:
    choices = data.get("choices") or []
    if not choices:
        raise _Rejected(f"the server returned no completion: {str(data)[:200]}")
    choice = choices[0]
    message = choice.get("message") or {}
    answer, inline, _ = split_thinking(message.get("content") or "")
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    thinking = "\n\n".join(part for part in ((reasoning or "").strip(), inline or "") if part) or None
    out = _Round(answer=answer, thinking=thinking, raw_finish=choice.get("finish_reason"), id=str(data.get("id", "")))
    out.finish = _finish(out.raw_finish)
    _read_usage(data.get("usage"), out)
    return out


def _merge(
    rounds: list[_Round],
    answer: str,
    thinking: str | None,
    latency_s: float,
    first_token_s: float | None,
    error: str | None,
) -> GenerationResult:
    """Returns the result of one request from its rounds (two when the budget cut the thought)."""
    if not rounds:
        return GenerationResult(text="", finish_reason="error", latency_s=latency_s, error=error)
    first, last = rounds[0], rounds[-1]
    extra: dict[str, Any] = {"id": last.id, "server_finish_reason": last.raw_finish}
    if len(rounds) > 1:
        extra["continuation_prompt_tokens"] = last.prompt_tokens
    return GenerationResult(
        text=answer,
        thinking=thinking,
        finish_reason="error" if error else last.finish,
        prompt_tokens=first.prompt_tokens,
        completion_tokens=sum(r.completion_tokens for r in rounds),
        latency_s=latency_s,
        first_token_s=first_token_s,
        # The thought never closed: cut by the budget (two rounds) or by max_tokens (one round, no answer).
        thinking_truncated=len(rounds) > 1 or (first.finish == "length" and bool(first.thinking) and not first.answer),
        error=error,
        extra=extra,
    )


def _finish(raw: str | None) -> FinishReason:
    return {"length": "length", "abort": "abort"}.get(raw or "stop", "stop")  # type: ignore[return-value]


def _read_usage(usage: Any, out: _Round) -> None:
    if isinstance(usage, dict):
        out.prompt_tokens = int(usage.get("prompt_tokens") or out.prompt_tokens)
        out.completion_tokens = int(usage.get("completion_tokens") or out.completion_tokens)


def _headers(request: GenerationRequest | None) -> dict[str, str]:
    return {"X-Request-Id": request.request_id} if request is not None and request.request_id else {}


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def _error_message(payload: Any) -> str:
    """Returns the server's own error message from vLLM's, OpenAI's or Ollama's error shapes."""
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or error)
        if payload.get("message"):
            return str(payload["message"])
        return str(error)
    return str(payload).strip() or "no message"


def _describe(exc: Exception, engine: OpenAIEngine) -> str:
    """Returns a short reason for a transport failure: 'connection refused', 'host not found', ..."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {engine.connect_timeout_s:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"no response within {engine.timeout_s:g} s"
    causes = list(_causes(exc))
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return "connection refused"
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        return "host not found"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection"
    root = causes[-1]
    return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """Yields `exc` and what caused it (httpx wraps the OSError; anyio groups one per address tried)."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        if current.__cause__ is not None or current.__context__ is not None:
            stack.append(current.__cause__ or current.__context__)  # type: ignore[arg-type]


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if thread.is_alive():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
    if not thread.is_alive() and not loop.is_closed():
        loop.close()


# -- streaming helpers ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _ThinkSplitter:
    """Splits streamed content into ``thinking`` and ``answer`` pieces the way `split_thinking` splits a whole
    text, for servers that leave ``<think>`` in the content. A tag cut between two chunks is held back.

    `hold`: a thinking request whose template may have opened ``<think>`` in the prompt: content before any
    tag is held until a tag (or the end) says whether it was thinking or answer.
    """

    hold: bool = False
    thinking: bool = False
    held: str = ""
    tail: str = ""
    out: list[tuple[str, str]] = field(default_factory=list)

    def reasoning(self, text: str) -> list[tuple[str, str]]:
        """The server splits the thinking itself: nothing needs holding."""
        out = self._release("answer")
        out.append(("thinking", text))
        return out

    def feed(self, text: str) -> list[tuple[str, str]]:
        text, self.tail = self.tail + text, ""
        while text:
            found = [(text.find(tag), tag) for tag in (("</think>",) if self.thinking else _TAGS)]
            hits = [(index, tag) for index, tag in found if index >= 0]
            if not hits:
                keep = _partial_tag(text)
                self._emit(text[: len(text) - keep])
                self.tail = text[len(text) - keep :]
                break
            index, tag = min(hits)
            self._emit(text[:index])
            text = text[index + len(tag) :]
            if tag == "<think>":
                self.out.extend(self._release("answer"))  # text before <think> is answer, as split_thinking has it
                self.thinking = True
            elif self.thinking:
                self.thinking = False
            else:
                self.out.extend(self._release("thinking"))  # a stray </think>: the template opened the block
        out, self.out = self.out, []
        return out

    def flush(self) -> list[tuple[str, str]]:
        self._emit(self.tail)
        self.tail = ""
        out, self.out = self.out + self._release("answer"), []
        return out

    def _emit(self, text: str) -> None:
        if not text:
            return
        if self.thinking:
            self.out.append(("thinking", text))
        elif self.hold:
            self.held += text
        else:
            self.out.append(("answer", text))

    def _release(self, kind: str) -> list[tuple[str, str]]:
        held, self.held, self.hold = self.held, "", False
        return [(kind, held)] if held else []


def _partial_tag(text: str) -> int:
    """Returns how many trailing characters of `text` could start a think tag."""
    for size in range(min(len(text), len("</think>") - 1), 0, -1):
        if any(tag.startswith(text[-size:]) for tag in _TAGS):
            return size
    return 0
