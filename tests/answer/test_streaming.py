"""Streamed answers (`DocPipe.ask_stream`): pieces as the engine writes them, then the same `Answer` as `ask`;
engines that cannot stream, the answer cache, a consumer that stops early, and engine failures.

The engines are the packaged EchoEngine and small real engines of our own built on it; the remote engine
streams against a real vLLM server in test_engine_remote.py.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from support.net import free_port

from docpipe import (
    Answer,
    AnswerEvent,
    ConfigError,
    DocPipe,
    DocpipeError,
    Document,
    EngineError,
    EngineUnavailableError,
    Settings,
)
from docpipe.engine.base import GenerationRequest, GenerationResult, StreamEvent
from docpipe.engine.batcher import BatchingEngine
from docpipe.engine.fake import EchoEngine

KEY = "What is the notice period for termination for convenience?"
ANALYSIS = "What are the risks for the Customer if Provider terminates for convenience?"
THREAD = "docpipe-answer-stream"


class SlowStreamEngine(EchoEngine):
    """The echo engine, streaming one answer word every `delay_s`; counts streams started, finished, closed."""

    name = "slow-echo"

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.started = self.finished = self.closed = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        self.started += 1
        try:
            async for event in super().stream(request):
                if event.kind == "answer":
                    await asyncio.sleep(self.delay_s)
                yield event
            self.finished += 1
        finally:
            self.closed += 1


class BrokenStreamEngine(EchoEngine):
    """Streams one piece, then fails the way a crashing engine does."""

    name = "broken"

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        yield StreamEvent("answer", "Either ")
        raise RuntimeError("the engine core died")


class RejectingEngine(EchoEngine):
    """Answers every request with what a server's 4xx becomes: an empty result carrying the error."""

    name = "rejecting"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.calls += 1
        return [GenerationResult(text="", finish_reason="error", error="HTTP 400: prompt too long") for _ in requests]


class BatchOnlyEngine(EchoEngine):
    """A batch engine without `stream` (like the in-process VLLMEngine)."""

    name = "batch-only"
    stream = None  # type: ignore[assignment]


def _stream_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


def _assert_nothing_left_running() -> None:
    """One loop thread serves every stream; no stream's task is left on it."""
    from docpipe.answer.streaming import _LOOP

    async def others() -> int:
        return len(asyncio.all_tasks() - {asyncio.current_task()})

    assert len(_stream_threads()) <= 1
    deadline = time.monotonic() + 5
    while asyncio.run_coroutine_threadsafe(others(), _LOOP.get()).result(timeout=5) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert asyncio.run_coroutine_threadsafe(others(), _LOOP.get()).result(timeout=5) == 0


def _comparable(answer: Answer) -> dict:
    """The answer without its times: two asks a second apart differ in them only."""
    data = answer.to_dict()
    data.pop("created")
    data["manifest"].pop("created")
    return data


def _split(events: list[AnswerEvent]) -> tuple[str, str, Answer]:
    assert events and events[-1].kind == "done" and events[-1].answer is not None
    assert all(e.kind != "done" for e in events[:-1]) and all(e.answer is None for e in events[:-1])
    answer = "".join(e.text for e in events if e.kind == "answer")
    thinking = "".join(e.text for e in events if e.kind == "thinking")
    return answer, thinking, events[-1].answer


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> tuple[DocPipe, Document]:
    """The echo engine chosen by settings (so wrapped in the batching engine), over the sample contract."""
    dp = DocPipe(Settings.preset("test", home=tmp_path_factory.mktemp("stream-home"), engine={"backend": "echo"}))
    return dp, dp.ingest(sample_pdf)


def _pipe(tmp_path: Path, sample_pdf: Path, engine=None) -> tuple[DocPipe, Document]:
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=engine)
    return dp, dp.ingest(sample_pdf)


def test_answer_arrives_in_pieces_that_add_up_to_the_answer_ask_gives(echo) -> None:
    dp, doc = echo
    assert isinstance(dp.engine, BatchingEngine)  # the stream goes to the engine it wraps
    events = list(dp.ask_stream(doc, KEY, use_cache=False))
    text, thinking, answer = _split(events)
    pieces = [e for e in events if e.kind == "answer"]
    assert len(pieces) > 5
    assert text == answer.text and "ninety (90) days" in text
    assert thinking == "" and answer.thinking is None
    assert answer.citations and answer.citations[0].verified and answer.citations[0].pages == "p. 9"
    assert _comparable(answer) == _comparable(dp.ask(doc, KEY, use_cache=False))


def test_thinking_streams_as_thinking_never_as_answer_text(echo) -> None:
    dp, doc = echo
    events = list(dp.ask_stream(doc, ANALYSIS, use_cache=False))
    text, thinking, answer = _split(events)
    assert answer.thinking_enabled and answer.thinking == "The question is answered by the first section given."
    assert thinking == answer.thinking
    assert text == answer.text and "first section given" not in text and "<think>" not in text
    # Thinking comes first, then the answer.
    kinds = [e.kind for e in events[:-1]]
    assert kinds[0] == "thinking" and "thinking" not in kinds[kinds.index("answer") :]
    assert _comparable(answer) == _comparable(dp.ask(doc, ANALYSIS, use_cache=False))


def test_mode_and_k_reach_the_request_as_in_ask(echo) -> None:
    dp, doc = echo
    streamed = list(dp.ask_stream(doc, KEY, mode="think", k=2, use_cache=False))[-1].answer
    asked = dp.ask(doc, KEY, mode="think", k=2, use_cache=False)
    assert streamed.thinking_enabled and streamed.thinking
    assert _comparable(streamed) == _comparable(asked)


def test_streamed_answers_share_the_answer_cache_with_ask(tmp_path: Path, sample_pdf: Path) -> None:
    engine = SlowStreamEngine(0.0)
    dp, doc = _pipe(tmp_path, sample_pdf, engine)
    first = list(dp.ask_stream(doc, KEY))
    assert engine.started == 1 and len(first) > 2
    again = list(dp.ask_stream(doc, KEY))
    assert [e.kind for e in again] == ["done"] and engine.started == 1  # a cache hit: no engine call
    assert _comparable(again[0].answer) == _comparable(first[-1].answer)
    assert _comparable(dp.ask(doc, KEY)) == _comparable(first[-1].answer) and engine.batch_sizes == [1]
    # ask() first: the stream is a cache hit too; use_cache=False streams again.
    dp.ask(doc, "Which law governs the agreement?")
    assert [e.kind for e in dp.ask_stream(doc, "Which law governs the agreement?")] == ["done"]
    assert len(list(dp.ask_stream(doc, KEY, use_cache=False))) > 2 and engine.started == 2


def test_without_a_model_the_extractive_answer_comes_as_one_event(tmp_path: Path, sample_pdf: Path) -> None:
    dp, doc = _pipe(tmp_path, sample_pdf)
    events = list(dp.ask_stream(doc, KEY))
    assert [e.kind for e in events] == ["done"] and events[0].answer.mode == "extractive"
    assert _comparable(events[0].answer) == _comparable(dp.ask(doc, KEY))


def test_an_engine_that_cannot_stream_gives_asks_answer(tmp_path: Path, sample_pdf: Path) -> None:
    engine = BatchOnlyEngine()
    dp, doc = _pipe(tmp_path, sample_pdf, engine)
    events = list(dp.ask_stream(doc, KEY, use_cache=False))
    assert [e.kind for e in events] == ["done"] and engine.batch_sizes == [1]
    assert _comparable(events[0].answer) == _comparable(dp.ask(doc, KEY, use_cache=False))


def test_stopping_early_closes_the_engine_stream(tmp_path: Path, sample_pdf: Path) -> None:
    engine = SlowStreamEngine(0.5)  # about 15 s for the whole answer
    dp, doc = _pipe(tmp_path, sample_pdf, engine)
    started = time.monotonic()
    for event in dp.ask_stream(doc, KEY):
        assert event.kind == "answer"
        break
    assert time.monotonic() - started < 5
    assert (engine.started, engine.finished, engine.closed) == (1, 0, 1)
    _assert_nothing_left_running()
    # A stream dropped without close() ends the same way once it is collected; the stopped answer was
    # not cached (a cache hit would come as one "done" event).
    stream = dp.ask_stream(doc, KEY)
    assert next(stream).kind == "answer"
    del stream
    gc.collect()
    assert (engine.started, engine.finished, engine.closed) == (2, 0, 2)
    _assert_nothing_left_running()


def test_streams_share_one_loop_thread_and_leave_nothing_running(echo) -> None:
    dp, doc = echo
    for number in range(6):
        for event in dp.ask_stream(doc, KEY, use_cache=False):
            if number % 2 and event.kind == "answer":
                break
    assert len(_stream_threads()) == 1
    _assert_nothing_left_running()


def test_concurrent_streams_from_threads(echo) -> None:
    dp, doc = echo
    expected = dp.ask(doc, KEY, use_cache=False).text
    texts: list[str] = []

    def consume() -> None:
        events = list(dp.ask_stream(doc, KEY, use_cache=False))
        texts.append("".join(e.text for e in events if e.kind == "answer"))

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert texts == [expected] * 4


def test_streaming_works_inside_a_running_event_loop(echo) -> None:
    dp, doc = echo

    async def caller() -> list[AnswerEvent]:
        return list(dp.ask_stream(doc, KEY, use_cache=False))

    text, _, answer = _split(asyncio.run(caller()))
    assert text == answer.text and "ninety (90) days" in text


def test_an_engine_failing_mid_stream_is_an_engine_error(tmp_path: Path, sample_pdf: Path) -> None:
    dp, doc = _pipe(tmp_path, sample_pdf, BrokenStreamEngine())
    stream = dp.ask_stream(doc, KEY)
    assert next(stream) == AnswerEvent("answer", "Either")
    with pytest.raises(EngineError, match="broken engine failed while streaming.*the engine core died"):
        next(stream)
    _assert_nothing_left_running()


def test_a_rejected_request_is_a_notice_on_the_answer_as_with_ask(tmp_path: Path, sample_pdf: Path) -> None:
    engine = RejectingEngine()
    dp, doc = _pipe(tmp_path, sample_pdf, engine)
    answer = list(dp.ask_stream(doc, KEY))[-1].answer
    assert answer.notice == "The engine failed on this question: HTTP 400: prompt too long"
    assert _comparable(answer) == _comparable(dp.ask(doc, KEY))
    list(dp.ask_stream(doc, KEY))
    assert engine.calls == 3  # a failed answer is not cached


def test_an_unreachable_server_is_engine_unavailable_as_with_ask(tmp_path: Path, sample_pdf: Path) -> None:
    from docpipe.engine.openai import OpenAIEngine

    port = free_port()  # nothing listens there
    with OpenAIEngine(f"http://127.0.0.1:{port}", model="m", retries=0, connect_timeout_s=2) as engine:
        dp, doc = _pipe(tmp_path, sample_pdf, engine)
        with pytest.raises(EngineUnavailableError, match="cannot reach the language model server") as asked:
            dp.ask(doc, KEY)
        with pytest.raises(EngineUnavailableError, match="cannot reach the language model server") as streamed:
            list(dp.ask_stream(doc, KEY))
        assert isinstance(streamed.value, DocpipeError) and streamed.value.url == asked.value.url
    _assert_nothing_left_running()


def test_bad_arguments_fail_as_with_ask(echo) -> None:
    dp, doc = echo
    with pytest.raises(ConfigError, match="empty"):
        list(dp.ask_stream(doc, "  "))
    with pytest.raises(ConfigError, match="k must be at least 1"):
        list(dp.ask_stream(doc, KEY, k=0))


@pytest.mark.integration
def test_the_real_async_vllm_engine_streams_ask_after_ask(tmp_path: Path, sample_pdf: Path) -> None:
    """vLLM's AsyncLLM stays on the event loop it started on: every stream, including one stopped early
    (the request is aborted), must run on that same loop. The tiny random model writes noise."""
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install 'docpipe-contracts[cpu]'")
    from docpipe.answer.streaming import _LOOP
    from docpipe.engine.vllm import AsyncVLLMEngine
    from docpipe.testing.models import build_tiny_qwen3

    engine = AsyncVLLMEngine(
        str(build_tiny_qwen3(tmp_path / "model")), max_model_len=2048, cache_root=tmp_path / "vllm-cache"
    )
    try:
        # The tiny model's window is 2048 tokens of its own (character-level) tokenizer: keep the context small.
        settings = Settings.preset(
            "test", home=tmp_path / "home", retrieval={"budget_tokens": 120}, engine={"max_answer_tokens": 24}
        )
        dp = DocPipe(settings, engine=engine)
        doc = dp.ingest(sample_pdf)
        for number in range(3):
            events = []
            for event in dp.ask_stream(doc, KEY, mode="no_think", use_cache=False):
                events.append(event)
                if number == 1 and len(events) == 3:
                    break  # aborts the request in the engine
            if number == 1:
                assert [e.kind for e in events] == ["answer"] * 3
                continue
            text, _, answer = _split(events)
            assert len(events) > 3 and answer.engine == "vllm-async" and answer.mode == "generative"
            assert " ".join(text.split()) == " ".join(answer.text.split())
        assert len(_stream_threads()) == 1  # (the engine's own tasks stay on the loop with it)
    finally:
        asyncio.run_coroutine_threadsafe(engine.aclose(), _LOOP.get()).result(timeout=60)
