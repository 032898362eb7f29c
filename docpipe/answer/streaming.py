"""Streamed answers: `DocPipe.ask_stream` yields the thinking and the answer as the engine writes them, then
the finished `Answer`, the same one `DocPipe.ask` returns (checked citations, notice, cache).

Retrieval, the request and the cache key are `ask`'s own. Engines with an async ``stream`` (the
`AsyncEngine` protocol: `EchoEngine`, `OpenAIEngine`, `AsyncVLLMEngine`) stream; a `BatchingEngine` is
looked through to the engine it wraps. Anything else (no model: the extractive answer; the in-process
batch `VLLMEngine`) gives one ``done`` event holding `ask`'s answer.

The engine's async iterator runs on docpipe's private event loop, in one background thread that all streams
share, so the sync generator works from plain code, from Gradio's worker threads and from inside a running
loop (Jupyter) alike. One loop, not one per stream: an engine such as vLLM's ``AsyncLLM`` keeps working on
the loop it started on. Closing the generator early (``break``, ``close()``, garbage collection) closes the
engine's stream, which cancels the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from docpipe.answer.compose import Answer
from docpipe.engine.base import StreamTrim
from docpipe.errors import ConfigError, DocpipeError, EngineError

if TYPE_CHECKING:
    from docpipe.engine.base import AsyncEngine, GenerationResult
    from docpipe.pipeline import DocLike, DocPipe
    from docpipe.answer.prompts import ThinkingMode

__all__ = ["AnswerEvent", "ask_stream", "streaming_engine"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How long closing an abandoned stream may take (the engine aborts the request) before the consumer moves on.
_CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    """Returns nothing; holds one piece of a streamed answer.

    ``kind`` is ``thinking`` or ``answer`` for a piece of text (`text`), and ``done`` for the last event,
    which carries the finished `answer`. The ``answer`` pieces join to ``answer.text`` (whitespace at either
    end is dropped, as in the final text); where an engine's final text differs from what it streamed, the
    ``done`` answer is the one to keep. Thinking pieces never hold answer text.

    >>> from docpipe import DocPipe, Settings                               # doctest: +SKIP
    >>> dp = DocPipe(Settings.preset("test", engine={"backend": "echo"}))   # doctest: +SKIP
    >>> for event in dp.ask_stream("contract.pdf", "What is the notice period?"):  # doctest: +SKIP
    ...     if event.kind == "answer":
    ...         print(event.text, end="")
    ...     elif event.kind == "done":
    ...         print([c.pages for c in event.answer.citations])
    """

    kind: Literal["thinking", "answer", "done"]
    text: str = ""
    answer: Answer | None = None


def streaming_engine(engine: Any) -> AsyncEngine | None:
    """Returns the engine that streams behind `engine` (looking through wrappers such as `BatchingEngine`,
    which keep the wrapped one as ``.engine``), or None when none does."""
    from docpipe.engine.base import AsyncEngine

    for _ in range(4):  # wrappers of wrappers, but never a cycle
        if engine is None:
            return None
        if isinstance(engine, AsyncEngine):
            return engine
        engine = getattr(engine, "engine", None)
    return None


def ask_stream(
    dp: DocPipe,
    doc: DocLike,
    question: str,
    *,
    k: int | None = None,
    mode: ThinkingMode | None = None,
    password: str | None = None,
    use_cache: bool = True,
) -> Iterator[AnswerEvent]:
    """Returns an iterator of `AnswerEvent`: thinking and answer pieces as the engine streams them, then one
    ``done`` event with the `Answer` that `dp.ask` gives for the same arguments (see `DocPipe.ask_stream`)."""
    engine = dp.engine
    streamer = streaming_engine(engine)
    if engine is None or streamer is None:
        yield AnswerEvent("done", answer=dp.ask(doc, question, k=k, mode=mode, password=password, use_cache=use_cache))
        return
    # Retrieval, request, cache key and the finished answer exactly as ask_many makes them for one question.
    index = dp._index_for(doc, password)
    budget = dp._context_budget(engine)
    if not question or not question.strip():
        raise ConfigError("a question is empty: ask something about the document")
    vector = dp.embedder.embed([question])[0]
    hits = dp.context(index.doc, question, k=k, budget_tokens=budget, _query=vector)
    request = dp._request(question, hits, index.doc, mode or dp.settings.engine.thinking, False)
    key = dp._cache_key(index.doc, request, question, hits)
    if use_cache:
        stored = dp._cache_call("get", key)
        if stored is not None:
            yield AnswerEvent("done", answer=Answer.from_dict(stored))
            return

    logger.debug("streaming an answer from %s (%s)", streamer.name, streamer.model)
    result: GenerationResult | None = None
    trims = {"thinking": StreamTrim(), "answer": StreamTrim()}
    events = _run_async_iterator(streamer.stream(request))
    try:
        for event in events:
            if event.kind == "done":
                result = event.result
                break
            piece = trims[event.kind].push(event.text)
            if piece:
                yield AnswerEvent(event.kind, piece)
    except DocpipeError:
        raise
    except Exception as exc:  # an engine's own failure (vLLM's, a custom engine's): say which engine and what next
        raise EngineError(
            f"the {streamer.name} engine failed while streaming the answer: {type(exc).__name__}: {exc}. "
            "Check the engine's log; if the prompt is too long for the model, lower "
            "DOCPIPE_RETRIEVAL__BUDGET_TOKENS or raise DOCPIPE_ENGINE__MAX_MODEL_LEN",
            engine=streamer.name,
            model=streamer.model,
        ) from exc
    finally:
        events.close()
    if result is None:
        raise EngineError(
            f"the {streamer.name} engine's stream ended without a result: ask again, or use ask() instead",
            engine=streamer.name,
            model=streamer.model,
        )
    yield AnswerEvent("done", answer=dp._finish(question, result, hits, request, key, index.doc, use_cache=use_cache))


class _SharedLoop:
    """Returns docpipe's private event loop for streams, running in a daemon thread started on first use
    (and again in a forked child, where the thread does not exist)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="docpipe-answer-stream", daemon=True
                )
                self._thread.start()
            return self._loop

    def is_current(self) -> bool:
        return self._thread is threading.current_thread()


_LOOP = _SharedLoop()


def _run_async_iterator(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Yields the items of an async iterator run on the shared private event loop.

    Errors raised by the iterator are raised here. When the consumer stops (``close()``, an exception,
    garbage collection), a step in flight is cancelled and the iterator is closed on the loop.
    """
    loop = _LOOP.get()
    try:
        while True:
            step = asyncio.run_coroutine_threadsafe(_next(iterator), loop)
            try:
                done, item = step.result()
            except BaseException:
                step.cancel()  # e.g. KeyboardInterrupt while waiting: do not leave the request running
                raise
            if done:
                return
            yield item
    finally:
        closing = asyncio.run_coroutine_threadsafe(_close(iterator), loop)
        # Collected as garbage on the loop's own thread, it closes on its own: waiting would block the loop.
        if not _LOOP.is_current():
            try:
                closing.result(timeout=_CLOSE_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - closing must not hide the consumer's own exit or error
                closing.cancel()
                logger.warning("an answer stream did not close within %s s", _CLOSE_TIMEOUT_S, exc_info=True)


async def _next(iterator: AsyncIterator[T]) -> tuple[bool, T | None]:
    # run_coroutine_threadsafe takes a coroutine, not the awaitable __anext__ returns; the end becomes a flag.
    try:
        return False, await iterator.__anext__()
    except StopAsyncIteration:
        return True, None


async def _close(iterator: AsyncIterator[Any]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(RuntimeError):  # a cancelled step is still unwinding it: it closes itself
            await aclose()
