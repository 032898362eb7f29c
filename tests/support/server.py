"""`docpipe serve` as users run it, for the tests that call it over HTTP: a real server process on 127.0.0.1
(fast `test` preset), stopped by the block that started it; the calls, the keys and the error checks they share.

`serving` runs the command line (`docpipe serve ...`); `serving_options` runs `serve()` with `ServeOptions`
given directly, for limits the command line does not expose. Raw-socket helpers (`connect`, `head`,
`read_until_closed`) play the slow or malicious client, every wait bounded by SOCKET_S.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from docpipe.testing.models import wait_until_up

from .cli import run_cli
from .net import free_port

QUESTION = "What is the notice period for termination for convenience?"
TOKEN = "test-token-0123456789abcdef"
STARTUP_S = 90
SOCKET_S = 30  # a protection that works answers well within this; one that is missing never does
ENCRYPTED = "pypdf-r2-user-password.pdf"  # in ../shared/eval/bad-pdfs
ENCRYPTED_PASSWORD = "asdfzxcv"
SERVE_EXTRA = "docpipe serve needs the serve extra: pip install 'docpipe-contracts[serve]'"


# -- a real server process ----------------------------------------------------------------------------------
@dataclass
class Served:
    """A running server: its URL, store, process (its own process group) and log."""

    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path
    token: str | None = None
    args: list[str] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole process group (the server and any extraction worker)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM (graceful shutdown), then SIGKILL after 15 s; then SIGKILL to what is left of the group."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        # Stray children (an extraction worker) in the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Returns this process's environment without DOCPIPE_ variables, offline and unbuffered, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    env.update(
        HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false"
    )
    env.update(extra or {})
    return env


def _need_serve_extra() -> None:
    for module in ("fastapi", "uvicorn", "prometheus_client"):
        pytest.importorskip(module, reason=SERVE_EXTRA)


@contextlib.contextmanager
def _running(
    command: list[str], home: Path, *, env: dict[str, str], port: int, log_name: str, what: str, **popen: Any
) -> Iterator[Served]:
    home.mkdir(parents=True, exist_ok=True)
    log = home.parent / log_name
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env(env),
            cwd=home.parent,
            start_new_session=True,
            **popen,
        )
    served = Served(f"http://127.0.0.1:{port}", home, process, log)
    try:
        wait_until_up(process, f"{served.url}/v1/health", timeout_s=STARTUP_S, log=log, what=what, poll_s=0.2)
        yield served
    finally:
        served.stop()


@contextlib.contextmanager
def serving(
    home: Path,
    *args: str,
    token: str | None = TOKEN,
    env: dict[str, str] | None = None,
    port: int | None = None,
    log_name: str = "serve.log",
) -> Iterator[Served]:
    """Runs `docpipe serve --preset test --home HOME ARGS` on 127.0.0.1 until the block ends (or fails)."""
    _need_serve_extra()
    port = port or free_port()
    command = [
        sys.executable, "-m", "docpipe", "serve", "--preset", "test", "--home", str(home),
        "--port", str(port), "--log-level", "warning", *args,
    ]  # fmt: skip
    extra = {**(env or {}), **({"DOCPIPE_SERVE_TOKEN": token} if token else {})}
    with _running(command, home, env=extra, port=port, log_name=log_name, what="docpipe serve") as served:
        served.token, served.args = token, list(args)
        yield served


# The process of `serving_options`: the `test` preset, the echo engine, ServeOptions from JSON.
_RUNNER = """
import json, logging, sys
from docpipe import DocPipe, Settings
from docpipe.server import ServeOptions, serve
logging.basicConfig(level=logging.WARNING)
home, options = sys.argv[1], json.loads(sys.argv[2])
dp = DocPipe(Settings.preset("test", home=home, engine={"backend": "echo"}))
sys.exit(serve(dp, ServeOptions(**options)))
"""


@contextlib.contextmanager
def serving_options(
    home: Path, *, preexec: Callable[[], None] | None = None, log_name: str = "serve.log", **options: Any
) -> Iterator[Served]:
    """Runs `serve()` with ``ServeOptions(**options)`` (127.0.0.1, no workbench by default) until the block ends."""
    _need_serve_extra()
    port = free_port()
    options = {"host": "127.0.0.1", "port": port, "ui": False, "log_level": "warning", **options}
    command = [sys.executable, "-c", _RUNNER, str(home), json.dumps(options)]
    with _running(command, home, env={}, port=port, log_name=log_name, what="serve()", preexec_fn=preexec) as served:
        yield served


# -- calls ----------------------------------------------------------------------------------------------------
def upload(served: Served, data: bytes, *, name: str = "contract.pdf", password: str | None = None) -> httpx.Response:
    headers = {**served.headers, "Content-Type": "application/pdf"}
    if password is not None:
        headers["X-Document-Password"] = password
    return httpx.post(f"{served.url}/v1/documents", params={"name": name}, content=data, headers=headers, timeout=120)


def ask(served: Served, doc_id: str, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{served.url}/v1/documents/{doc_id}/ask", json=body, headers=served.headers, timeout=timeout)


def metric_samples(served: Served) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Returns {(sample name, sorted labels): value} from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{served.url}/metrics", timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def assert_error(response: httpx.Response, status: int, kind: str, *fragments: str) -> str:
    """Asserts the response is docpipe's error body of `status` and `kind` naming each fragment; returns the message."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    assert body["error"]["type"] == kind, body
    message = body["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message
    return message


# -- per-user keys and their calls ------------------------------------------------------------------------------
def new_key(home: Path, user: str, *grants: str) -> str:
    """Returns a new API key of `user` with `grants` ("deal-x:write" ...), made with `docpipe keys create`."""
    done = run_cli(home, "keys", "create", "--user", user, *[f"--matter={g}" for g in grants], "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["key"])


class Client:
    """One caller of the REST API: a key ("" for the local user of a server without keys or token), optionally a
    matter (X-Matter)."""

    def __init__(self, served: Served, key: str, matter: str | None = None) -> None:
        self.url = served.url
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        if matter:
            self.headers["X-Matter"] = matter

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers={**self.headers, **kw.pop("headers", {})}, timeout=60, **kw)

    def delete(self, path: str) -> httpx.Response:
        return httpx.delete(self.url + path, headers=self.headers, timeout=60)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.post(self.url + path, headers={**self.headers, **kw.pop("headers", {})}, timeout=120, **kw)

    def upload(self, data: bytes, name: str, password: str | None = None) -> httpx.Response:
        headers = {"Content-Type": "application/pdf"}
        if password:
            headers["X-Document-Password"] = password
        return self.post("/v1/documents", params={"name": name}, content=data, headers=headers)

    def ask(self, doc_id: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/documents/{doc_id}/ask", json=body, headers=self.headers, timeout=60)

    def create(self, name: str) -> httpx.Response:
        return self.post("/v1/collections", json={"name": name})

    def add_files(self, name: str, files: dict[str, bytes], **data: str | list[str]) -> httpx.Response:
        parts = [("file", (file, content, "application/pdf")) for file, content in files.items()]
        return self.post(f"/v1/collections/{name}/documents", files=parts, data=data)

    def add_ids(self, name: str, ids: list[Any]) -> httpx.Response:
        return self.post(f"/v1/collections/{name}/documents", json={"ids": ids})

    def collection(self, name: str, files: dict[str, bytes], password: str | None = None) -> None:
        """Creates collection `name` holding `files`, asserting every file was added."""
        assert self.create(name).status_code in (200, 201)
        added = self.add_files(name, files, password=password or "")
        assert added.status_code == 200 and not added.json()["failed"], added.text
        assert len(added.json()["added"]) == len(files)

    def review(self, name: str, **body: Any) -> httpx.Response:
        return self.post(f"/v1/collections/{name}/review", json=body)

    def terms(self, name: str, **body: Any) -> httpx.Response:
        return self.post(f"/v1/collections/{name}/terms", json=body)

    def wait(self, job_id: str, *states: str, timeout_s: float = 120) -> dict[str, Any]:
        """Returns the job once its state is one of `states` (default: any finished state)."""
        states = states or ("done", "failed", "cancelled")
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.get(f"/v1/jobs/{job_id}")
            assert got.status_code == 200, got.text
            job: dict[str, Any] = got.json()
            if job["state"] in states:
                return job
            assert time.monotonic() < deadline, job
            time.sleep(0.05)


# -- raw sockets ----------------------------------------------------------------------------------------------
def connect(served: Served) -> socket.socket:
    """Returns a raw connection to the server whose every wait ends after SOCKET_S."""
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=SOCKET_S)
    sock.settimeout(SOCKET_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Returns everything the server sends until it closes the connection (socket.timeout if it never does)."""
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    return reply


def head(host: str = "127.0.0.1", extra: str = "") -> bytes:
    return f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()
