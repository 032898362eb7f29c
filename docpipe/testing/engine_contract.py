"""The engine contract: one set of behaviour tests that every engine backend must pass (the haystack pattern).

A test module subclasses `EngineContract`, provides an ``engine`` fixture and sets the class attributes that
describe what the backend can do; the tests themselves are written once, here::

    from docpipe.engine.fake import EchoEngine
    from docpipe.testing.engine_contract import EngineContract

    class TestEchoEngine(EngineContract):
        exact_stream = False

        @pytest.fixture
        def engine(self):
            return EchoEngine()

What every engine guarantees (see `docpipe.engine.base`): a batch comes back as one result per request in
request order; each request's thinking flag is honoured within a mixed batch and ``<think>`` never reaches the
answer text; ``max_tokens`` bounds the completion; priorities are accepted; streamed pieces add up to the final
result; a request with a JSON schema gets JSON valid against it, whatever the model's words (thinking first when
asked); a request the engine cannot serve fails as `GenerationResult.error` (that request alone) or as an
`EngineError` (the whole batch), never as garbage or a foreign exception; leaving a stream early frees the
engine for the next request; closing twice is harmless.

The engines are driven through `EngineDriver`, so a backend whose ``generate`` is a coroutine
(``AsyncVLLMEngine``) runs the same tests as a sync one. Needs pytest; nothing in docpipe imports this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

import pytest

from docpipe.engine.base import (
    PRIORITY_ANALYSIS,
    PRIORITY_INTERACTIVE,
    AsyncEngine,
    Engine,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    StreamEvent,
)
from docpipe.errors import EngineError

__all__ = ["CONTRACT_SCHEMA", "EngineContract", "EngineDriver", "LoopThread", "contract_request", "engine_on_loop"]

T = TypeVar("T")

SYSTEM = "You answer from contracts."

# A reply schema without free text (an enum, a bounded integer, a short word of lower-case letters, a boolean, a
# short list): a reply that follows it closes within a few dozen tokens whatever a random model samples.
CONTRACT_SCHEMA: dict[str, Any] = {
    "title": "contract_check",
    "type": "object",
    "properties": {
        "finding": {"enum": ["present", "absent", "uncertain"]},
        "days": {"type": "integer", "minimum": 0, "maximum": 999},
        "law": {"type": "string", "pattern": "^[a-z ]{0,16}$"},
        "signed": {"type": "boolean"},
        "parties": {"type": "array", "items": {"enum": ["buyer", "seller"]}, "minItems": 1, "maxItems": 2},
    },
    "required": ["finding", "days", "law", "signed", "parties"],
    "additionalProperties": False,
}


def contract_request(
    user: str,
    *,
    thinking: bool = False,
    max_tokens: int = 16,
    seed: int = 0,
    priority: int = PRIORITY_INTERACTIVE,
) -> GenerationRequest:
    """Returns a chat request with seeded sampling (the tiny test models give noise, but repeatable noise)."""
    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_tokens=max_tokens, seed=seed)
    return GenerationRequest.chat(SYSTEM, user, thinking=thinking, sampling=sampling, priority=priority)


class LoopThread:
    """An event loop running in a daemon thread, for async engines that must live on one loop for their
    whole life (``AsyncLLM`` binds its output handler to the loop it first runs on).

    >>> with LoopThread() as portal:
    ...     portal.run(asyncio.sleep(0, result=3))
    3
    """

    def __init__(self, *, timeout_s: float = 600) -> None:
        self.timeout_s = timeout_s
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="docpipe-contract-loop", daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Returns the coroutine's result, run on the thread's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=self.timeout_s)


class EngineDriver:
    """Drives any engine from sync test code: a sync or async ``generate``, streams collected into lists.

    Coroutines run on `portal` when given (an engine bound to one loop), else each in a fresh `asyncio.run`.
    """

    def __init__(self, engine: Any, *, portal: LoopThread | None = None) -> None:
        self.engine = engine
        self.portal = portal

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.portal.run(coro) if self.portal is not None else asyncio.run(coro)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns the engine's results for one batch."""
        if inspect.iscoroutinefunction(self.engine.generate):
            return list(self.run(self.engine.generate(list(requests))))
        return list(self.engine.generate(list(requests)))

    def stream(self, request: GenerationRequest, *, leave_after: int | None = None) -> list[StreamEvent]:
        """Returns the streamed events; with `leave_after`, stops after that many and closes the stream."""

        async def collect() -> list[StreamEvent]:
            events: list[StreamEvent] = []
            async with contextlib.aclosing(self.engine.stream(request)) as stream:
                async for event in stream:
                    events.append(event)
                    if leave_after is not None and len(events) >= leave_after:
                        break
            return events

        return self.run(collect())

    def complete(self, request: GenerationRequest) -> GenerationResult:
        return self.run(self.engine.complete(request))

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()
        else:
            self.run(self.engine.aclose())


def _joined(text: str) -> str:
    return " ".join(text.split())


class EngineContract:
    """The behaviour every engine backend guarantees, written once: subclass it in a test module, provide an
    ``engine`` fixture (any scope) and describe the backend with the class attributes below.

    `test_close_is_idempotent` closes the engine, so it must run last; the ``engine`` fixture's own teardown
    may close it again. pytest runs inherited tests before a subclass's own, so a subclass that adds tests on
    the same engine re-binds it after them: ``test_close_is_idempotent = EngineContract.test_close_is_idempotent``.
    """

    # Has ``stream``/``complete`` (the AsyncEngine protocol).
    streams: ClassVar[bool] = True
    # Streamed answer pieces join to exactly the final text (else: equal up to whitespace).
    exact_stream: ClassVar[bool] = True
    # A thinking request always comes back with thinking text, a plain one never (an engine that splits the
    # thought itself or behind a reasoning parser; a random model without a parser may not think at all).
    reports_thinking: ClassVar[bool] = True
    # Qwen3's chat template closes an empty think block for a plain request: more prompt tokens than thinking.
    template_thinking_switch: ClassVar[bool] = True
    # Streams report time to the first token.
    reports_first_token: ClassVar[bool] = True
    # A user message this many words long does not fit the model's window (None: the engine has no window).
    overlong_words: ClassVar[int | None] = None
    # How long leaving a stream early and completing another request may take, in seconds.
    leave_early_s: ClassVar[float] = 30.0
    # A thinking request's thought cut at max_thinking_tokens is closed and the answer asked for after it (the
    # async vLLM engine has no thinking budget: a random model's thought runs to max_tokens, no JSON after it).
    thinking_budget: ClassVar[bool] = True

    @pytest.fixture
    def driver(self, engine: Any) -> EngineDriver:
        return EngineDriver(engine)

    # -- the protocol -------------------------------------------------------------------------------------

    def test_engine_implements_the_protocol(self, engine: Any) -> None:
        assert isinstance(engine.name, str) and engine.name
        assert isinstance(engine.model, str) and engine.model
        if not inspect.iscoroutinefunction(engine.generate):
            assert isinstance(engine, Engine)
        if self.streams:
            assert isinstance(engine, AsyncEngine)

    def test_empty_batch_gives_no_results(self, driver: EngineDriver) -> None:
        assert driver.generate([]) == []

    # -- batches ------------------------------------------------------------------------------------------

    def test_batch_results_come_back_in_request_order(self, driver: EngineDriver) -> None:
        # Distinguishable: request i has a longer prompt than request i - 1 and its own max_tokens; thinking
        # alternates, so each result must also follow its own request's flag within one batch.
        requests = [
            contract_request("What is the notice period?" + " Section 12.3" * i, thinking=i % 2 == 1,
                             max_tokens=3 + 2 * i, seed=i)
            for i in range(8)
        ]  # fmt: skip
        results = driver.generate(requests)

        assert len(results) == len(requests)
        for request, result in zip(requests, results, strict=True):
            assert isinstance(result, GenerationResult)
            assert result.error is None, result.error
            assert result.finish_reason in ("stop", "length")
            assert 1 <= result.completion_tokens <= request.sampling.max_tokens
            assert "<think>" not in result.text and "</think>" not in result.text
            if self.reports_thinking:
                assert bool(result.thinking) == request.thinking, (request.thinking, result.thinking)
        for flag in (False, True):
            tokens = [r.prompt_tokens for q, r in zip(requests, results, strict=True) if q.thinking == flag]
            assert tokens == sorted(set(tokens)), tokens  # a longer prompt came back later: order was kept
        if hasattr(driver.engine, "batch_sizes"):
            assert driver.engine.batch_sizes[-1] == len(requests)  # one engine batch, not one call per request

    def test_single_request_batch(self, driver: EngineDriver) -> None:
        [result] = driver.generate([contract_request("Which law governs?", max_tokens=4)])
        assert result.error is None and 1 <= result.completion_tokens <= 4

    def test_max_tokens_bounds_the_completion(self, driver: EngineDriver) -> None:
        results = driver.generate([contract_request("Notice period?", max_tokens=n, seed=n) for n in (1, 2, 5)])
        assert [1 <= r.completion_tokens <= n for r, n in zip(results, (1, 2, 5), strict=True)] == [True] * 3
        assert all(r.finish_reason in ("stop", "length") for r in results)

    def test_priorities_are_accepted(self, driver: EngineDriver) -> None:
        requests = [
            contract_request("Bulk analysis: indemnity?", priority=PRIORITY_ANALYSIS, max_tokens=4),
            contract_request("A person waits: notice period?", priority=PRIORITY_INTERACTIVE, max_tokens=4),
            contract_request("Bulk analysis: governing law?", priority=PRIORITY_ANALYSIS, max_tokens=4),
        ]
        results = driver.generate(requests)
        assert len(results) == 3
        assert all(r.error is None and 1 <= r.completion_tokens <= 4 for r in results), results

    # -- thinking -----------------------------------------------------------------------------------------

    def test_thinking_switch_is_per_request_and_stays_out_of_the_answer(self, driver: EngineDriver) -> None:
        on, off = driver.generate(
            [contract_request("Notice period?", thinking=True), contract_request("Notice period?", thinking=False)]
        )
        for result in (on, off):
            assert "<think>" not in result.text and "</think>" not in result.text
            if result.thinking:
                assert "<think>" not in result.thinking and "</think>" not in result.thinking
        if self.template_thinking_switch:
            # thinking=False renders the closed empty block `<think>\n\n</think>\n\n` after the generation prompt.
            assert off.prompt_tokens > on.prompt_tokens
        if self.reports_thinking:
            assert on.thinking and off.thinking is None
            assert on.thinking not in on.text
        # A thought cut by max_tokens is all thinking: never half a thought shown as the answer.
        if on.finish_reason == "length" and not on.text:
            assert on.thinking_truncated

    # -- streaming ----------------------------------------------------------------------------------------

    def _require_streaming(self) -> None:
        if not self.streams:
            pytest.skip(f"{type(self).__name__}: this engine does not stream (the async engine does)")

    @pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
    def test_stream_pieces_add_up_to_the_result(self, driver: EngineDriver, thinking: bool) -> None:
        self._require_streaming()
        events = driver.stream(contract_request("What is the notice period?", thinking=thinking, max_tokens=12, seed=3))

        *pieces, done = events
        assert done.kind == "done" and done.result is not None
        assert all(e.kind in ("thinking", "answer") and e.text and e.result is None for e in pieces)
        result = done.result
        assert result.error is None
        assert "<think>" not in result.text and "</think>" not in result.text
        answer = "".join(e.text for e in pieces if e.kind == "answer")
        thought = "".join(e.text for e in pieces if e.kind == "thinking")
        if self.exact_stream:
            assert (answer, thought) == (result.text, result.thinking or "")
        else:
            assert (_joined(answer), _joined(thought)) == (_joined(result.text), _joined(result.thinking or ""))
        if self.reports_thinking:
            assert pieces and pieces[0].kind == ("thinking" if thinking else "answer")
        if self.reports_first_token:
            assert result.first_token_s is not None and 0 < result.first_token_s <= result.latency_s
        assert 1 <= result.completion_tokens <= 12

    def test_complete_gives_one_finished_result(self, driver: EngineDriver) -> None:
        self._require_streaming()
        result = driver.complete(contract_request("Governing law?", max_tokens=5))
        assert isinstance(result, GenerationResult)
        assert result.error is None and 1 <= result.completion_tokens <= 5 and "<think>" not in result.text

    def test_leaving_a_stream_early_frees_the_engine(self, driver: EngineDriver) -> None:
        self._require_streaming()
        started = time.perf_counter()
        events = driver.stream(contract_request("Summarise the whole contract.", max_tokens=1500), leave_after=3)
        assert 1 <= len(events) <= 3 and events[0].kind in ("thinking", "answer", "done")
        after = driver.complete(contract_request("And after leaving?", max_tokens=4))  # would hang on a leak
        assert after.error is None and after.completion_tokens >= 1
        assert time.perf_counter() - started < self.leave_early_s

    # -- structured outputs -------------------------------------------------------------------------------

    @pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
    def test_a_reply_with_a_schema_is_json_valid_against_it(self, driver: EngineDriver, thinking: bool) -> None:
        if thinking and not self.thinking_budget:
            pytest.skip(f"{type(self).__name__}: no thinking budget closes a random model's thought")
        jsonschema = pytest.importorskip("jsonschema")
        requests = [
            replace(
                contract_request("Which law governs? Reply in JSON.", thinking=thinking, max_tokens=128, seed=i),
                json_schema=CONTRACT_SCHEMA,
                max_thinking_tokens=8 if thinking else None,
            )
            for i in range(3)
        ]
        results = driver.generate(requests)
        if self.streams and not thinking:
            results.append(driver.complete(requests[0]))
        for result in results:
            assert result.error is None, result.error
            assert "<think>" not in result.text and "</think>" not in result.text
            # xgrammar lets raw control characters into JSON strings: read them, as docpipe does (strict=False).
            reply = json.loads(result.text, strict=False)
            jsonschema.validate(reply, CONTRACT_SCHEMA)

    # -- failures -----------------------------------------------------------------------------------------

    def test_a_request_that_cannot_be_served_fails_cleanly(self, driver: EngineDriver) -> None:
        if self.overlong_words is None:
            pytest.skip(f"{type(self).__name__}: the engine has no context window to overflow")
        good = contract_request("Term?", max_tokens=4)
        bad = contract_request("notice " * self.overlong_words + "?", max_tokens=4)
        try:
            good_result, bad_result = driver.generate([good, bad])
        except EngineError as exc:  # the whole batch refused: allowed, and the message says how to fix it
            assert str(exc)
            return
        # Or that request alone: no text, the reason in `error`, and the rest of the batch goes on.
        assert bad_result.finish_reason == "error" and bad_result.text == "" and bad_result.error
        assert good_result.error is None and good_result.completion_tokens > 0

    # -- last: closing --------------------------------------------------------------------------------------

    def test_close_is_idempotent(self, driver: EngineDriver) -> None:
        driver.close()
        driver.close()


@contextlib.contextmanager
def engine_on_loop(factory: Any) -> Iterator[tuple[Any, LoopThread]]:
    """Yields ``(engine, portal)``: an async engine built by `factory()` on its own loop thread, closed after."""
    with LoopThread() as portal:

        async def build() -> Any:
            return factory()

        engine = portal.run(build())
        try:
            yield engine, portal
        finally:
            with contextlib.suppress(Exception):
                portal.run(engine.aclose())
