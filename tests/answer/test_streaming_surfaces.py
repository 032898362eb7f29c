"""Streamed answers where users meet them: `docpipe ask` on a terminal (run under a real pseudo-terminal) and
``"stream": true`` on the REST ask (server-sent events read with a real HTTP client from a real `docpipe serve`,
echo engine: it streams word by word)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.net import free_port
from support.server import QUESTION, Served, assert_error, server_env, serving, upload

from docpipe import DocPipe, Settings
from docpipe.access.log import AccessLog
from docpipe.engine.base import GenerationRequest, StreamEvent
from docpipe.engine.fake import EchoEngine

pty = pytest.importorskip("pty", reason="the pseudo-terminal tests need a POSIX system")


# -- REST: server-sent events ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("stream") / "home"
    with serving(home, "--engine", "echo", "--no-ui") as s:
        yield s


@pytest.fixture(scope="module")
def doc_id(served: Served, sample_pdf: Path) -> str:
    response = upload(served, sample_pdf.read_bytes(), name="master_services_agreement.pdf")
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def read_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """Returns the (event, data) pairs of a server-sent event stream, as they arrive."""
    events, name, data = [], "message", []
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data.append(line.partition(":")[2].strip())
        elif not line and data:
            events.append((name, json.loads("\n".join(data))))
            name, data = "message", []
    return events


def stream_ask(served: Served, doc_id: str, body: dict[str, Any]) -> tuple[httpx.Response, list]:
    url = f"{served.url}/v1/documents/{doc_id}/ask"
    with httpx.stream("POST", url, json=body, headers=served.headers, timeout=60) as response:
        if response.status_code != 200:
            response.read()
            return response, []
        return response, read_events(response)


@pytest.mark.parametrize("mode", ["think", "no_think"])
def test_the_rest_ask_streams_pieces_then_the_stored_answer(served: Served, doc_id: str, mode: str) -> None:
    response, events = stream_ask(
        served, doc_id, {"question": QUESTION, "mode": mode, "use_cache": False, "stream": True}
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    kinds = [name for name, _ in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1 and "error" not in kinds, kinds
    assert kinds.count("answer") > 5, kinds  # the echo engine streams word by word
    # Thinking (when the model thinks) comes first, then the answer, then done.
    assert kinds == sorted(kinds, key=["thinking", "answer", "done"].index), kinds
    assert ("thinking" in kinds) == (mode == "think")

    answer = events[-1][1]
    streamed = "".join(data["text"] for name, data in events if name == "answer")
    assert streamed.strip() == answer["text"] and "ninety (90) days" in answer["text"]
    thought = "".join(data["text"] for name, data in events if name == "thinking")
    assert thought.strip() == (answer["thinking"] or "")
    assert answer["citations"] and all(c["verified"] for c in answer["citations"])
    assert answer["citations"][0]["page_start"] == 9 and answer["document_id"] == doc_id

    stored = httpx.get(f"{served.url}/v1/answers/{answer['id']}", headers=served.headers, timeout=10)
    assert stored.status_code == 200 and stored.json() == answer
    # The same answer as the route without "stream" gives (but for its id).
    whole = httpx.post(
        f"{served.url}/v1/documents/{doc_id}/ask",
        json={"question": QUESTION, "mode": mode},
        headers=served.headers,
        timeout=60,
    ).json()["answers"][0]
    assert whole["text"] == answer["text"] and whole["citations"] == answer["citations"]


def test_a_cached_answer_comes_as_the_done_event_alone(served: Served, doc_id: str) -> None:
    body = {"question": "Which law governs the agreement?", "mode": "no_think", "stream": True}
    _, first = stream_ask(served, doc_id, body)
    _, again = stream_ask(served, doc_id, body)
    assert [name for name, _ in again] == ["done"]
    assert again[0][1]["text"] == first[-1][1]["text"] and again[0][1]["id"] != first[-1][1]["id"]


def test_stream_takes_one_question_and_errors_come_before_the_stream(served: Served, doc_id: str) -> None:
    two = {"questions": [QUESTION, "Which law governs the agreement?"], "stream": True}
    response, _ = stream_ask(served, doc_id, two)
    assert_error(response, 422, "invalid_request", '"stream": true answers one question, not 2')
    response, events = stream_ask(served, doc_id, {"questions": [QUESTION], "stream": True, "mode": "no_think"})
    assert response.status_code == 200 and events[-1][0] == "done"

    missing, _ = stream_ask(served, "0" * 64, {"question": QUESTION, "stream": True})
    assert_error(missing, 404, "not_found", "upload the PDF first")
    url = f"{served.url}/v1/documents/{doc_id}/ask"
    anonymous = httpx.post(url, json={"question": QUESTION, "stream": True}, timeout=10)
    assert_error(anonymous, 401, "unauthorized")
    empty, _ = stream_ask(served, doc_id, {"question": "  ", "stream": True})
    assert empty.status_code == 422, empty.text


def test_the_access_log_records_a_streamed_ask(served: Served, doc_id: str) -> None:
    question = "What are the payment terms?"
    response, events = stream_ask(served, doc_id, {"question": question, "stream": True})
    assert response.status_code == 200 and events[-1][0] == "done"
    log = (served.home / "audit" / "access.log").read_text(encoding="utf-8")
    [line] = [json.loads(line) for line in log.splitlines() if AccessLog(served.home).question_hash(question) in line]
    assert line["action"] == "ask" and line["outcome"] == "ok" and line["document"] == doc_id


class SlowEchoEngine(EchoEngine):
    """The echo engine, streaming one word every 50 ms and noting when its stream ends and how."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = threading.Event()
        self.sent = 0
        self.finished = False

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        try:
            async for event in super().stream(request):
                await asyncio.sleep(0.05)
                self.sent += 1
                yield event
            self.finished = True
        finally:
            self.closed.set()


def test_a_client_that_leaves_stops_the_generation(tmp_path: Path, sample_pdf: Path) -> None:
    uvicorn = pytest.importorskip(
        "uvicorn", reason="docpipe serve needs the serve extra: pip install 'docpipe-contracts[serve]'"
    )
    from docpipe.server import ServeOptions, create_app

    engine = SlowEchoEngine()
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=engine)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(dp, ServeOptions(ui=False)), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        headers = {"Content-Type": "application/pdf"}
        uploaded = httpx.post(f"{url}/v1/documents", content=sample_pdf.read_bytes(), headers=headers, timeout=60)
        doc_id = uploaded.json()["id"]
        body = {"question": QUESTION, "stream": True, "mode": "no_think"}
        with httpx.stream("POST", f"{url}/v1/documents/{doc_id}/ask", json=body, timeout=60) as response:
            lines = response.iter_lines()
            assert next(lines) == "event: answer"  # the first piece, then the client hangs up
        assert engine.closed.wait(10), "the engine's stream was not closed"
        assert not engine.finished and engine.sent < 10, engine.sent
        log = (dp.store.root / "audit" / "access.log").read_text(encoding="utf-8")
        asked = [json.loads(line) for line in log.splitlines() if '"action": "ask"' in line]
        deadline = time.monotonic() + 10
        while not asked and time.monotonic() < deadline:  # written as the stream's generator closes
            time.sleep(0.05)
            log = (dp.store.root / "audit" / "access.log").read_text(encoding="utf-8")
            asked = [json.loads(line) for line in log.splitlines() if '"action": "ask"' in line]
        assert [a["outcome"] for a in asked] == ["GeneratorExit"]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        dp.close()


# -- CLI: a terminal gets the answer as it is written ---------------------------------------------------------
def run_in_pty(*args: str, cwd: Path) -> str:
    """Returns what `python -m docpipe ARGS` writes to a pseudo-terminal (its stdout and stderr)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdout is the terminal
        try:
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "docpipe", *args], {**server_env(), "NO_COLOR": "1"})
        finally:
            os._exit(127)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    output = b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
    assert os.waitstatus_to_exitcode(status) == 0, output
    return output


def ask_args(home: Path, sample_pdf: Path, *extra: str) -> list[str]:
    return ["ask", "--preset", "test", "--engine", "echo", "--home", str(home), str(sample_pdf), QUESTION, *extra]


def test_the_cli_streams_the_answer_to_a_terminal_then_prints_the_sources(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    # Ingested first, so the pty run shows the ask alone.
    subprocess.run(
        [sys.executable, "-m", "docpipe", "ingest", "--preset", "test", "--home", str(home), str(sample_pdf)],
        check=True,
        capture_output=True,
        env=server_env(),
    )
    shown = run_in_pty(*ask_args(home, sample_pdf, "--no-cache", "--mode", "think", "--show-thinking"), cwd=tmp_path)
    assert shown.startswith(f"Q: {QUESTION}\n\nThinking:\n  The question is answered"), shown
    assert shown.index("Thinking:") < shown.index("ninety (90) days") < shown.index("\nSources:\n"), shown
    # The section id follows the sectioner (one section per numbered clause); the heading and page name the clause.
    assert re.search(
        r"  1\. section s\d+ \(12\.3 Termination for Convenience\), p\. 9: quote verified on the page", shown
    )
    assert shown.count("The question is answered by the first section given.") == 1, shown

    # Without a terminal (or with --no-stream on one) the output is what it always was.
    piped = subprocess.run(
        [sys.executable, "-m", "docpipe", *ask_args(home, sample_pdf, "--no-cache", "--mode", "think")],
        capture_output=True,
        text=True,
        env=server_env(),
        cwd=tmp_path,
        check=True,
    ).stdout
    assert piped.startswith(f'Q: {QUESTION}\n\n"Either Party may terminate')
    assert re.search(r"\nSources:\n  1\. section s\d+ \(12\.3 Termination for Convenience\)", piped), piped
    assert piped.rstrip().endswith("characters; --show-thinking prints them.)"), piped
    terminal = run_in_pty(*ask_args(home, sample_pdf, "--no-cache", "--mode", "think"), cwd=tmp_path)
    assert terminal == piped, (terminal, piped)  # streamed, without thinking: the same text
    whole = run_in_pty(*ask_args(home, sample_pdf, "--no-stream", "--mode", "think", "--show-thinking"), cwd=tmp_path)
    assert whole.index("\nSources:\n") < whole.index("\nThinking:\n"), whole  # the finished answer, as before

    # --json and several questions never stream.
    as_json = run_in_pty(*ask_args(home, sample_pdf, "--json", "--mode", "no_think"), cwd=tmp_path)
    assert json.loads(as_json)[0]["citations"][0]["verified"] is True
    several = run_in_pty(*ask_args(home, sample_pdf, "-q", "Which law governs the agreement?"), cwd=tmp_path)
    assert several.count("\nSources:\n") == 2 and "-" * 80 in several
