"""16 concurrent users on the workbench, side by side: the queue as docpipe configures it (16 at once)
vs Gradio's default (one request per event at a time). Real parts: the Gradio app over HTTP on 127.0.0.1
(gradio_client), the real vLLM CPU engine with the tests' tiny Qwen3, docpipe's dynamic batching.

Run: .venv/bin/python benchmarks/ui_load.py   (writes benchmarks/results/ui_load.json)
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
USERS = 16
QUESTIONS = [
    "What is the notice period for termination for convenience?",
    "Which law governs the agreement?",
    "What insurance must the Provider carry?",
    "What is the initial term?",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _user(url: str, number: int, doc_id: str) -> dict:
    from gradio_client import Client, handle_file

    client = Client(url, verbose=False)
    client.predict([handle_file(str(SAMPLE))], "", api_name="/ingest")
    started = time.perf_counter()
    try:
        result = client.predict(doc_id, QUESTIONS[number % len(QUESTIONS)], "no_think", api_name="/ask")
        ok = "p. " in json.dumps(result, default=str) or bool(result)
        error = None
    except Exception as exc:  # noqa: BLE001 - a lost or refused request is a measured outcome
        ok, error = False, str(exc)[:200]
    return {"latency_s": time.perf_counter() - started, "ok": ok, "error": error}


def _run(dp, concurrency: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from docpipe.ui.app import build_app, launch_kwargs

    demo = build_app(dp, concurrency=concurrency, max_queue=64)
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_kwargs())
    url = f"http://127.0.0.1:{port}/"
    doc_id = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    before = len(dp.engine.batch_sizes)
    try:
        with ThreadPoolExecutor(max_workers=USERS) as pool:
            started = time.perf_counter()
            rows = list(pool.map(lambda n: _user(url, n, doc_id), range(USERS)))
            wall = time.perf_counter() - started
    finally:
        demo.close()
    latencies = sorted(r["latency_s"] for r in rows)
    batches = dp.engine.batch_sizes[before:]
    return {
        "concurrency_limit": concurrency,
        "users": USERS,
        "served": sum(r["ok"] for r in rows),
        "errors": [r["error"] for r in rows if r["error"]],
        "wall_s": round(wall, 2),
        "ask_latency_p50_s": round(statistics.median(latencies), 3),
        "ask_latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 3),
        "engine_batches": batches,
        "max_batch": max(batches) if batches else 0,
    }


def main() -> None:
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="docpipe-vllm-"))
    from docpipe import DocPipe, Settings
    from docpipe.testing.models import build_tiny_qwen3

    model = build_tiny_qwen3(Path(tempfile.mkdtemp(prefix="tiny-qwen3-")))
    settings = Settings.preset(
        "test",
        home=Path(tempfile.mkdtemp(prefix="docpipe-ui-load-")),
        retrieval={"budget_tokens": 256, "k": 2},
        engine={
            "backend": "vllm",
            "model": str(model),
            "max_answer_tokens": 16,
            "max_thinking_tokens": 16,
            "max_model_len": 2048,
            "batch_timeout_ms": 20,
        },
        cache_url="none",
    )
    dp = DocPipe(settings)
    dp.ingest(SAMPLE)
    dp.ask(SAMPLE, QUESTIONS[0], use_cache=False)  # start the engine before timing
    results = {"configured": _run(dp, 16), "gradio_default": _run(dp, 1)}
    out = ROOT / "benchmarks" / "results" / "ui_load.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    for name, r in results.items():
        print(
            f"{name:<15} served {r['served']}/{r['users']}  wall {r['wall_s']} s  p50 {r['ask_latency_p50_s']} s  "
            f"p95 {r['ask_latency_p95_s']} s  max engine batch {r['max_batch']}  batches {r['engine_batches']}"
        )
    ratio = results["gradio_default"]["wall_s"] / results["configured"]["wall_s"]
    print(f"wall time, default / configured: {ratio:.2f}x")


if __name__ == "__main__":
    main()
