"""Streamed answers: `DocPipe.ask_stream` yields the thinking and the answer as the engine writes them, then
the finished `Answer`, the same one `DocPipe.ask` returns (checked citations, notice, cache).

`stream_answer` plans the question as `ask_many` does (`docpipe.answer.core.plan_answers`: retrieval, request,
cache key) and finishes the result as it does (`finish_answer`). Engines with an async ``stream`` (the
`AsyncEngine` protocol: `EchoEngine`, `OpenAIEngine`, `AsyncVLLMEngine`) stream; a `BatchingEngine` is
looked through to the engine it wraps (`streaming_engine`). For anything else (no model: the extractive
answer; the in-process batch `VLLMEngine`) `DocPipe.ask_stream` gives one ``done`` event holding `ask`'s answer.

The engine's async iterator runs on a private event loop (`docpipe.engine.loop.BackgroundLoop`), in one
background thread that all streams share, so the sync generator works from plain code, from Gradio's worker
threads and from inside a running loop (Jupyter) alike. One loop, not one per stream: an engine such as vLLM's
``AsyncLLM`` keeps working on the loop it started on. Closing the generator early (``break``, ``close()``, garbage collection) closes the
engine's stream, which cancels the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from docpipe.answer.core import CacheOpener, cache_call, cache_put, cached_answer, finish_answer, plan_answers
from docpipe.engine.base import StreamTrim
from docpipe.engine.loop import BackgroundLoop
from docpipe.errors import DocpipeError, EngineError
from docpipe.events import emit as emit_metric
from docpipe.types import Answer

if TYPE_CHECKING:
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import AsyncEngine, Engine, GenerationResult
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings

__all__ = ["AnswerEvent", "stream_answer", "streaming_engine"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How long closing an abandoned stream may take (the engine aborts the request) before the consumer moves on.
_CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    """One piece of a streamed answer.

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


def stream_answer(
    index: SearchIndex,
    question: str,
    *,
    engine: Engine,
    embedder: Embedder,
    settings: Settings,
    fingerprint: str,
    cache: CacheOpener | None,
    k: int | None = None,
    mode: ThinkingMode | None = None,
) -> Iterator[AnswerEvent]:
    """Returns an iterator of `AnswerEvent`: thinking and answer pieces as `engine` streams them (it must have
    a `streaming_engine`), then one ``done`` event with the `Answer` that `ask` gives for the same arguments,
    cached as `ask` caches it; a cached answer comes as the ``done`` event alone."""
    streamer = streaming_engine(engine)
    if streamer is None:
        raise TypeError(f"the {getattr(engine, 'name', engine)!r} engine cannot stream: ask() instead")
    plan = plan_answers(
        index,
        [question],
        engine=engine,
        embedder=embedder,
        settings=settings,
        fingerprint=fingerprint,
        k=k,
        mode=mode,
    )
    hits, request, key = plan.contexts[0], plan.requests[0], plan.keys[0]
    if cache is not None:
        stored = cache_call(cache, "get", key)
        emit_metric("answer_cache", hits=int(stored is not None), misses=int(stored is None))
        if stored is not None:
            yield AnswerEvent("done", answer=cached_answer(stored, index.doc))
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
    answer = finish_answer(
        question, result, hits, request, index.doc, engine=engine, settings=settings, fingerprint=fingerprint
    )
    if cache is not None and not result.error:
        cache_put(cache, key, answer.to_dict(), index.doc)
    yield AnswerEvent("done", answer=answer)


# One loop for every stream (see the module docstring), started on first use and again in a forked child.
_LOOP = BackgroundLoop("docpipe-answer-stream")


def _run_async_iterator(iterator: AsyncIterator[T]) -> Generator[T, None, None]:
    """Yields the items of an async iterator run on the shared private event loop.

    Errors raised by the iterator are raised here. When the consumer stops (``close()``, an exception,
    garbage collection), a step in flight is cancelled and the iterator is closed on the loop.
    """
    loop = _LOOP.get()
    try:
        while True:
            step = asyncio.run_coroutine_threadsafe(_next(iterator), loop)
            try:
                result = step.result()
            except BaseException:
                step.cancel()  # e.g. KeyboardInterrupt while waiting: do not leave the request running
                raise
            if result[0]:
                return
            yield result[1]
    finally:
        closing = asyncio.run_coroutine_threadsafe(_close(iterator), loop)
        # Collected as garbage on the loop's own thread, it closes on its own: waiting would block the loop.
        if not _LOOP.is_current():
            try:
                closing.result(timeout=_CLOSE_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - closing must not hide the consumer's own exit or error
                closing.cancel()
                logger.warning("an answer stream did not close within %s s", _CLOSE_TIMEOUT_S, exc_info=True)


async def _next(iterator: AsyncIterator[T]) -> tuple[Literal[False], T] | tuple[Literal[True], None]:
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
