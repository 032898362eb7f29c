"""`docpipe serve` under load: 16, 64 and 100 concurrent HTTP clients, each asking questions one after another
(POST /v1/documents/{id}/ask, answer cache off so every question reaches the engine). Real parts: the server
as users start it (`python -m docpipe serve`, uvicorn, 127.0.0.1), httpx clients; the engine is the echo
engine (the serving stack alone) and, with --engines echo,vllm, the real vLLM CPU engine with the tests'
tiny Qwen3 (in-process, behind docpipe's batcher). The engine batch sizes come from the server's /metrics.

Run: .venv/bin/python benchmarks/service_load.py [--engines echo,vllm] [--concurrency 16,64,100]
Writes benchmarks/results/service_load.json: {"runs": [{"concurrency", "p50_s", "p95_s", "p99_s",
"throughput_rps", "errors", "requests", "engine", ...}, ...]}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
OUT = ROOT / "benchmarks" / "results" / "service_load.json"
QUESTIONS = [
    "What is the notice period for termination for convenience?",
    "Which law governs the agreement?",
    "What insurance must the Provider carry?",
    "What is the initial term?",
]
STARTUP_S = 300
TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _engine_env(engine: str, work: Path) -> dict[str, str]:
    if engine == "echo":
        return {"DOCPIPE_ENGINE__BACKEND": "echo"}
    from docpipe.testing.models import build_tiny_qwen3

    model = build_tiny_qwen3(work / "tiny-qwen3")
    # As benchmarks/ui_load.py: short contexts and answers that fit the tiny model's window.
    return {
        "DOCPIPE_ENGINE__BACKEND": "vllm",
        "DOCPIPE_ENGINE__MODEL": str(model),
        "DOCPIPE_ENGINE__MAX_MODEL_LEN": "2048",
        "DOCPIPE_ENGINE__MAX_ANSWER_TOKENS": "16",
        "DOCPIPE_ENGINE__MAX_THINKING_TOKENS": "16",
        "DOCPIPE_ENGINE__BATCH_TIMEOUT_MS": "20",
        "DOCPIPE_RETRIEVAL__BUDGET_TOKENS": "256",
        "DOCPIPE_RETRIEVAL__K": "2",
        "VLLM_CACHE_ROOT": str(work / "vllm-cache"),
        "OMP_NUM_THREADS": "1",
    }


@contextlib.contextmanager
def _server(engine: str, work: Path) -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    env.update(_engine_env(engine, work), HF_HUB_OFFLINE="1", DOCPIPE_CACHE_URL="none")
    log = work / f"serve-{engine}.log"
    command = [
        sys.executable, "-m", "docpipe", "serve", "--preset", "test", "--home", str(work / "home"),
        "--port", str(port), "--no-ui", "--log-level", "warning",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    from docpipe.testing.models import wait_until_up

    try:
        wait_until_up(process, f"{url}/v1/health", timeout_s=STARTUP_S, log=log, what="docpipe serve", poll_s=0.3)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def _batch_histogram(url: str) -> dict[str, float]:
    """Returns the server's engine batch-size histogram: cumulative bucket counts, plus _count and _sum."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "docpipe_engine_batch_size":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                out[sample.labels["le"]] = sample.value
            elif sample.name.endswith("_count"):
                out["count"] = sample.value
            elif sample.name.endswith("_sum"):
                out["sum"] = sample.value
    return out


def _batches_between(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Returns the batches formed between two scrapes: how many, their mean size, and sizes by bucket."""
    count = after.get("count", 0) - before.get("count", 0)
    total = after.get("sum", 0) - before.get("sum", 0)
    bounds = sorted((k for k in after if k not in ("count", "sum")), key=lambda k: float(k))
    by_bucket, previous = {}, 0.0
    for bound in bounds:
        cumulative = after[bound] - before.get(bound, 0)
        if cumulative - previous:
            by_bucket[f"<={bound}" if bound != "+Inf" else ">128"] = int(cumulative - previous)
        previous = cumulative
    return {"batches": int(count), "mean_size": round(total / count, 2) if count else 0.0, "sizes": by_bucket}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _load(url: str, doc_id: str, concurrency: int, per_client: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []

    async def client_loop(number: int) -> None:
        # One client, one connection, like separate users (and no shared pool to contend on in this process).
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S) as client:
            await asks(client, number)

    async def asks(client: httpx.AsyncClient, number: int) -> None:
        for turn in range(per_client):
            question = f"{QUESTIONS[(number + turn) % len(QUESTIONS)]} (client {number}, turn {turn})"
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"/v1/documents/{doc_id}/ask",
                    json={"question": question, "mode": "no_think", "use_cache": False},
                )
                if response.status_code != 200:
                    errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
                    continue
            except httpx.HTTPError as exc:  # a lost or timed-out request is a measured outcome
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client_loop(n) for n in range(concurrency)))
    wall = time.perf_counter() - started
    requests = concurrency * per_client
    return {
        "requests": requests,
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": round(wall, 3),
        "throughput_rps": round(len(latencies) / wall, 2),
        "p50_s": round(_quantile(latencies, 0.50), 4) if latencies else None,
        "p95_s": round(_quantile(latencies, 0.95), 4) if latencies else None,
        "p99_s": round(_quantile(latencies, 0.99), 4) if latencies else None,
        "max_s": round(max(latencies), 4) if latencies else None,
    }


def run_engine(engine: str, levels: list[int], per_client: int) -> list[dict[str, Any]]:
    runs = []
    with tempfile.TemporaryDirectory(prefix=f"docpipe-service-load-{engine}-") as tmp, \
            _server(engine, Path(tmp)) as url:  # fmt: skip
        data = SAMPLE.read_bytes()
        doc = httpx.post(
            f"{url}/v1/documents",
            content=data,
            params={"name": SAMPLE.name},
            headers={"Content-Type": "application/pdf"},
            timeout=STARTUP_S,
        ).json()
        assert doc["id"] == hashlib.sha256(data).hexdigest(), doc
        warm = httpx.post(
            f"{url}/v1/documents/{doc['id']}/ask",
            json={"question": QUESTIONS[0], "use_cache": False},
            timeout=STARTUP_S,
        )  # the engine and the index are loaded before timing
        warm.raise_for_status()
        for concurrency in levels:
            before = _batch_histogram(url)
            result = asyncio.run(_load(url, doc["id"], concurrency, per_client))
            batches = _batches_between(before, _batch_histogram(url))
            run = {
                "concurrency": concurrency,
                **result,
                "engine": engine,
                "per_client": per_client,
                "engine_batches": batches,
            }
            runs.append(run)
            print(
                f"{engine:<5} {concurrency:>3} clients: {run['requests']} requests, {run['errors']} errors, "
                f"p50 {run['p50_s']} s, p95 {run['p95_s']} s, p99 {run['p99_s']} s, "
                f"{run['throughput_rps']} req/s; engine batches {batches['batches']}, "
                f"mean size {batches['mean_size']}, sizes {batches['sizes']}",
                flush=True,
            )
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="echo,vllm", help="comma-separated: echo, vllm (default both)")
    parser.add_argument("--concurrency", default="16,64,100", help="client counts (default 16,64,100)")
    parser.add_argument("--per-client", type=int, default=3, help="questions each client asks in turn (default 3)")
    args = parser.parse_args(argv)
    levels = [int(n) for n in args.concurrency.split(",")]
    load_before = os.getloadavg()[0]
    runs: list[dict[str, Any]] = []
    for engine in args.engines.split(","):
        if engine == "vllm":
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                print(
                    "vllm not installed (pip install 'docpipe-contracts[cpu]'): skipping the vllm runs", file=sys.stderr
                )
                continue
        runs += run_engine(engine, levels, args.per_client)
    report = {
        "runs": runs,
        "setup": {
            "server": "python -m docpipe serve --preset test --no-ui (uvicorn, 127.0.0.1), answer cache off",
            "clients": "one httpx.AsyncClient (one connection) per client, all in one process on the same "
            "machine; each client asks its questions in turn",
            "vllm": "tiny random Qwen3 (docpipe.testing.models), in-process vLLM CPU, 16-token answers, 256-token contexts",
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "measured": time.strftime("%Y-%m-%d %H:%M"),
            # The clients share the machine with the server (and whatever else runs): say how busy it was.
            "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
