"""Interactive questions ahead of a review grid's bulk work (issue 14), with real parts: a small
OpenAI-compatible server on 127.0.0.1 whose completions take a set time and which records the order requests
reach it, the remote engine's priority request slots, the batcher in front of an offline engine, and which
engines `DocPipe` puts a batcher in front of.

Each protection is checked by what it prevents: a plain semaphore would let a grid hold every slot and send
a question to the back of the queue; a batcher that runs one caller's list as one batch would make a question
wait for the whole grid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from docpipe import DocPipe, Settings
from docpipe.engine.base import (
    PRIORITY_ANALYSIS,
    PRIORITY_BULK,
    PRIORITY_INTERACTIVE,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
)
from docpipe.engine.batcher import BatchingEngine
from docpipe.engine.fake import EchoEngine
from docpipe.engine.openai import OpenAIEngine
from docpipe.engine.openai.slots import PrioritySlots
from docpipe.errors import EngineUnavailableError

pytestmark = pytest.mark.timeout(60)

MODEL = "slow-model"
_SLEEP = re.compile(r"\bsleep=([0-9.]+)")


# -- a small OpenAI-compatible server whose completions take time ---------------------------------------------
@dataclass
class SlowServer:
    """Answers chat completions after ``sleep=SECONDS`` (read from the user message, default `delay_s`) and
    records the order they arrive in, with the priority each was sent with."""

    url: str = ""
    delay_s: float = 0.0
    arrivals: list[tuple[str, int]] = field(default_factory=list)
    in_flight: dict[int, int] = field(default_factory=dict)  # priority -> requests being answered now
    most_in_flight: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, delay_s: float) -> None:
        with self.lock:
            self.delay_s = delay_s
            self.arrivals.clear()
            self.most_in_flight.clear()

    def arrived(self) -> list[str]:
        with self.lock:
            return [user for user, _ in self.arrivals]

    def wait_for_arrivals(self, count: int, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.arrived()) < count:
            assert time.monotonic() < deadline, f"only {self.arrived()} reached the server"
            time.sleep(0.005)


def _handler(state: SlowServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up (a cancelled request)
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"data": [{"id": MODEL, "max_model_len": 4096}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            user = body["messages"][-1]["content"]
            priority = int(body.get("priority", 0))
            with state.lock:
                state.arrivals.append((user, priority))
                state.in_flight[priority] = state.in_flight.get(priority, 0) + 1
                state.most_in_flight[priority] = max(state.most_in_flight.get(priority, 0), state.in_flight[priority])
                delay = state.delay_s
            match = _SLEEP.search(user)
            time.sleep(float(match.group(1)) if match else delay)
            with state.lock:
                state.in_flight[priority] -= 1
            self._send(
                {
                    "id": "cmpl-1",
                    "choices": [{"message": {"content": f"answer to {user}"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                }
            )

    return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[SlowServer]:
    state = SlowServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, name="slow-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _request(user: str, priority: int) -> GenerationRequest:
    return GenerationRequest.chat("s", user, sampling=SamplingParams(max_tokens=4), priority=priority)


def _in_thread(target: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(target(*args)), daemon=True)
    thread.start()
    return thread, out


# -- the remote engine's request slots ------------------------------------------------------------------------
def test_a_question_starts_at_once_while_a_grids_bulk_requests_fill_every_other_slot(server: SlowServer) -> None:
    server.reset(delay_s=0.3)
    with OpenAIEngine(server.url, MODEL, max_concurrency=4) as engine:
        grid = [_request(f"cell {n}", PRIORITY_BULK) for n in range(16)]
        grid_thread, grid_out = _in_thread(engine.generate, grid)
        server.wait_for_arrivals(3)
        time.sleep(0.05)  # a plain semaphore would let the grid take the fourth slot now
        started = time.perf_counter()
        [answer] = engine.generate([_request("question", PRIORITY_INTERACTIVE)])
        latency = time.perf_counter() - started
        grid_thread.join(timeout=20)

    assert answer.text == "answer to question"
    # The question reached the server beside the grid's first requests, not after the 16 cells.
    assert server.arrived().index("question") == 3, server.arrived()
    assert latency < 0.3 * 1.8, latency
    assert server.most_in_flight[PRIORITY_BULK] == 3  # bulk never took the slot kept for questions
    assert [r.text for r in grid_out[0]] == [f"answer to cell {n}" for n in range(16)]  # in order


def test_a_freed_slot_goes_to_the_most_urgent_waiter_then_by_arrival(server: SlowServer) -> None:
    server.reset(delay_s=0.25)
    with OpenAIEngine(server.url, MODEL, max_concurrency=1) as engine:  # one slot: none kept back
        threads = [_in_thread(engine.generate, [_request(f"cell {n}", PRIORITY_BULK) for n in range(4)])[0]]
        server.wait_for_arrivals(1)
        for user, priority in [("analysis", PRIORITY_ANALYSIS), ("question 1", 0), ("question 2", 0)]:
            threads.append(_in_thread(engine.generate, [_request(user, priority)])[0])
            time.sleep(0.03)  # arrival order: analysis, then the two questions
        for thread in threads:
            thread.join(timeout=20)

    assert server.arrived() == ["cell 0", "question 1", "question 2", "analysis", "cell 1", "cell 2", "cell 3"]
    assert [priority for user, priority in server.arrivals if user == "analysis"] == [PRIORITY_ANALYSIS]


def test_timed_out_and_cancelled_requests_give_their_slots_back(server: SlowServer) -> None:
    server.reset(delay_s=0.0)
    # Two slots: bulk may hold one, so a single lost slot would leave bulk work waiting forever.
    with OpenAIEngine(server.url, MODEL, max_concurrency=2, timeout_s=0.2, retries=0) as engine:
        for n in range(3):  # the server does not answer within timeout_s
            with pytest.raises(EngineUnavailableError, match="no response within"):
                engine.generate([_request(f"sleep=1 timeout {n}", PRIORITY_BULK)])
        assert engine.generate([_request("after timeouts", PRIORITY_BULK)])[0].text == "answer to after timeouts"

    with OpenAIEngine(server.url, MODEL, max_concurrency=2, timeout_s=10, retries=0) as engine:

        async def cancelled_then_served() -> GenerationResult:
            holding = asyncio.ensure_future(engine.complete(_request("sleep=1 held", PRIORITY_BULK)))
            await asyncio.sleep(0.1)
            waiting = asyncio.ensure_future(engine.complete(_request("sleep=1 waiting", PRIORITY_BULK)))
            await asyncio.sleep(0.05)
            for task in (waiting, holding):  # one waits for the bulk slot, one holds it
                task.cancel()
            await asyncio.gather(holding, waiting, return_exceptions=True)
            return await asyncio.wait_for(engine.complete(_request("after", PRIORITY_BULK)), timeout=5)

        assert asyncio.run(cancelled_then_served()).text == "answer to after"
        assert "sleep=1 waiting" not in server.arrived()  # cancelled before it had a slot


def test_slots_survive_cancellation_at_every_point() -> None:
    async def scenario() -> None:
        slots = PrioritySlots(2)
        assert slots.reserved == 1
        await slots.acquire(PRIORITY_BULK)  # the one slot bulk may take

        # A waiter that times out leaves the queue.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await slots.acquire(PRIORITY_BULK)
        assert (slots.in_use, slots.waiting) == (1, 0)

        # A waiter handed the slot, then cancelled before it resumed, passes it on to the next waiter.
        handed = asyncio.ensure_future(slots.acquire(PRIORITY_BULK))
        behind = asyncio.ensure_future(slots.acquire(PRIORITY_BULK))
        await asyncio.sleep(0)
        assert slots.waiting == 2
        slots.release()  # hands the slot to `handed` ...
        handed.cancel()  # ... which is cancelled before it runs again
        await asyncio.gather(handed, return_exceptions=True)
        await asyncio.wait_for(behind, timeout=1)
        assert handed.cancelled() and (slots.in_use, slots.waiting) == (1, 0)

        # A holder cancelled inside its block gives the slot back.
        async def hold_forever() -> None:
            async with slots.hold(PRIORITY_INTERACTIVE):
                await asyncio.sleep(60)

        holder = asyncio.ensure_future(hold_forever())
        await asyncio.sleep(0)
        assert slots.in_use == 2
        holder.cancel()
        await asyncio.gather(holder, return_exceptions=True)
        assert slots.in_use == 1
        slots.release()
        assert (slots.in_use, slots.waiting) == (0, 0)
        with pytest.raises(RuntimeError):
            slots.release()

    asyncio.run(scenario())


# -- the batcher in front of an offline engine ----------------------------------------------------------------
class OfflineEngine:
    """An offline engine as vLLM's ``LLM`` is one: `generate` only (no stream/complete), a batch returned when
    all of it is done, taking `batch_s` per batch."""

    name = "offline"
    model = "offline"

    def __init__(self, batch_s: float = 0.0) -> None:
        self.batch_s = batch_s
        self.batches: list[list[str]] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.batches.append([r.messages[-1]["content"] for r in requests])
        time.sleep(self.batch_s)
        return [GenerationResult(text=r.messages[-1]["content"], completion_tokens=1) for r in requests]

    def close(self) -> None:
        pass


def test_a_big_bulk_caller_is_split_so_an_urgent_one_waits_one_batch_at_most() -> None:
    engine = OfflineEngine(batch_s=0.3)
    batcher = BatchingEngine(engine, max_batch_size=4, batch_timeout_ms=5)
    try:
        grid = [_request(f"cell {n}", PRIORITY_BULK) for n in range(12)]
        grid_thread, grid_out = _in_thread(batcher.generate, grid)
        deadline = time.monotonic() + 5
        while not engine.batches and time.monotonic() < deadline:
            time.sleep(0.005)
        started = time.perf_counter()
        [answer] = batcher.generate([_request("question", PRIORITY_INTERACTIVE)])
        latency = time.perf_counter() - started
        grid_thread.join(timeout=10)
    finally:
        batcher.close()

    assert answer.text == "question"
    cells = [f"cell {n}" for n in range(12)]
    assert engine.batches == [cells[:4], ["question"], cells[4:8], cells[8:]]
    assert latency < 0.3 * 2.5, latency  # the running batch and its own, not the whole grid
    assert [r.text for r in grid_out[0]] == cells  # one caller's results, in order, across its batches


def test_a_failed_part_fails_its_caller_and_drops_the_parts_not_started() -> None:
    class FailsOnce(OfflineEngine):
        """Fails its first batch; holds every later one until the caller has been told (`told`), so the batcher
        can start at most one more part before the caller drops the rest, however the threads are scheduled."""

        def __init__(self) -> None:
            super().__init__()
            self.told = threading.Event()

        def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
            if not self.batches:
                self.batches.append([r.messages[-1]["content"] for r in requests])
                raise RuntimeError("engine core died")
            self.told.wait()
            return super().generate(requests)

    engine = FailsOnce()
    batcher = BatchingEngine(engine, max_batch_size=2, batch_timeout_ms=5)
    try:
        with pytest.raises(RuntimeError, match="engine core died"):
            batcher.generate([_request(f"cell {n}", PRIORITY_BULK) for n in range(6)])
        engine.told.set()  # generate() has raised: the parts it had not seen started are cancelled
        assert batcher.generate([_request("question", 0)])[0].text == "question"  # still serving
    finally:
        engine.told.set()
        batcher.close()
    ran = [label for batch in engine.batches for label in batch]
    # The failed part, perhaps the part the batcher took while the caller was being told, never the last one.
    assert ran[:2] == ["cell 0", "cell 1"] and ran[-1] == "question", engine.batches
    assert ran[2:-1] in ([], ["cell 2", "cell 3"]), engine.batches


# -- where DocPipe puts a batcher ---------------------------------------------------------------------------
def test_docpipe_sends_straight_to_engines_that_schedule_requests_themselves(
    tmp_path: Path, server: SlowServer
) -> None:
    # The echo engine runs a batch at a time, like vllm.LLM, which it stands in for: it keeps the batcher.
    echo = DocPipe(Settings.preset("test", home=tmp_path / "echo", engine={"backend": "echo"}))
    assert isinstance(echo.engine, BatchingEngine) and type(echo.engine.engine) is EchoEngine
    remote = DocPipe(Settings.preset("test", home=tmp_path / "remote", engine={"backend": "openai", "url": server.url}))
    try:
        assert type(remote.engine) is OpenAIEngine
    finally:
        remote.close()


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_docpipe_keeps_the_batcher_for_the_offline_vllm_engine(tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="needs vllm: pip install 'docpipe-contracts[cpu]'")
    from docpipe.engine.vllm import VLLMEngine
    from docpipe.testing.models import build_tiny_qwen3

    model = build_tiny_qwen3(tmp_path / "model")
    settings = Settings.preset(
        "test", home=tmp_path / "home", engine={"backend": "vllm", "model": str(model), "max_model_len": 512}
    )
    with DocPipe(settings) as dp:
        engine = dp.engine
        assert isinstance(engine, BatchingEngine) and isinstance(engine.engine, VLLMEngine)
        assert engine.max_batch_size == settings.engine.max_batch_size
