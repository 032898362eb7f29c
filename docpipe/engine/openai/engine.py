"""`OpenAIEngine`: the engine protocol over an OpenAI-compatible server. It owns a private event loop
(`BackgroundLoop`) on which its `Transport` runs, so the sync `generate` works from plain scripts and from
inside a running loop alike, and the async `complete` and `stream` hand their work to that loop. Request
bodies and parsing live in `completion`, the streamed protocol in `streaming`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from docpipe.engine.base import GenerationRequest, GenerationResult, StreamEvent
from docpipe.engine.loop import BackgroundLoop
from docpipe.engine.openai.completion import (
    Rejected,
    Round,
    continuation_params,
    merge,
    parse_completion,
    request_params,
)
from docpipe.engine.openai.streaming import stream_events
from docpipe.engine.openai.transport import Transport
from docpipe.errors import ConfigError, EngineError

logger = logging.getLogger(__name__)

T = TypeVar("T")


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

    Requests are sent as they come (no batcher in front: the server batches continuously), at most
    `max_concurrency` at a time. A freed slot goes to the most urgent waiting request
    (`GenerationRequest.priority`), and bulk work keeps one slot free when there are two or more, so a
    question starts at once while a review grid fills the rest; the server orders what it holds by the
    same priority under ``vllm serve --scheduling-policy priority``.
    """

    name = "openai"
    # The server schedules requests itself (continuous batching, priority): DocPipe puts no batcher in front.
    continuous_batching = True

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
        self._closed = False
        # Not restarted in a forked child: the client's connections and the request slots belong to the first loop.
        self._background = BackgroundLoop("docpipe-openai-engine", restart=False)
        self._finalizer = weakref.finalize(self, self._background.stop)
        self._transport = Transport(
            self.base_url,
            api_key=api_key,
            max_concurrency=max_concurrency,
            timeout_s=self.timeout_s,
            connect_timeout_s=self.connect_timeout_s,
            retries=retries,
            backoff_s=self.backoff_s,
        )
        try:
            self._run(self._transport.open())
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
        """Returns one result per request, in request order; at most `max_concurrency` are in flight, the most
        urgent first.

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
                async for event in stream_events(self._transport, request, model=self.model):
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
        """Closes the connections and stops the engine's thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._background.is_running():
                self._background.submit(self._shutdown()).result(timeout=10)
        except Exception:  # noqa: BLE001 - closing must not fail; the thread is stopped regardless
            logger.debug("engine shutdown did not finish cleanly", exc_info=True)
        finally:
            self._finalizer()

    async def aclose(self) -> None:
        """`close` without blocking the caller's event loop."""
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

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        if self._closed:
            coro.close()
            raise EngineError("this OpenAIEngine is closed: create a new one")
        return self._background.submit(coro)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._background.is_current():
            coro.close()
            raise RuntimeError("OpenAIEngine's sync methods cannot be called from its own event loop")
        future = self._submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the requests running
            raise

    async def _shutdown(self) -> None:
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self._transport.aclose()

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
            entries = await self._transport.models()
        except Rejected as exc:
            raise ConfigError(f"{exc}: pass model= or set DOCPIPE_ENGINE__MODEL", url=self.base_url) from exc
        ids = [str(entry["id"]) for entry in entries if entry.get("id")]
        if not ids:
            raise ConfigError(
                f"the server at {self.base_url} lists no models: pass model= or set DOCPIPE_ENGINE__MODEL",
                url=self.base_url,
            )
        logger.info("server at %s serves %s; using %s", self.base_url, ids, ids[0])
        window = next(entry for entry in entries if entry.get("id")).get("max_model_len")
        return ids[0], (int(window) if isinstance(window, int) and window > 0 else None)

    async def _complete(self, request: GenerationRequest) -> GenerationResult:
        start = time.perf_counter()
        budget = request.max_thinking_tokens if request.thinking else None
        rounds: list[Round] = []
        error: str | None = None
        try:
            params = request_params(request, model=self.model, max_tokens=request.sampling.max_tokens + (budget or 0))
            rounds.append(await self._post(params, request))
            first = rounds[0]
            if budget is not None and first.finish == "length" and first.thinking and not first.answer:
                logger.debug("thinking budget of %d tokens cut the thought: asking for the answer", budget)
                rounds.append(await self._post(continuation_params(request, first.thinking, model=self.model), request))
        except Rejected as exc:
            error = str(exc)
        answer = rounds[-1].answer if rounds else ""
        thinking = rounds[0].thinking if rounds else None
        return merge(rounds, answer, thinking, time.perf_counter() - start, None, error)

    async def _post(self, params: dict[str, Any], request: GenerationRequest) -> Round:
        return parse_completion(await self._transport.complete(params, request))
