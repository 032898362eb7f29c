"""Data-room ingestion and cross-collection question latency on cuad-collection-dev (read in place).

Run: .venv/bin/python benchmarks/collection_ingest.py [--compare 20] [--contracts 231] [--questions 300]
     (writes docs/benchmarks/collection_ingest.json; about 15-25 minutes on 2 cores)

1. Side by side in one run, on the first `--compare` contracts, each in an empty store: the old way (one
   `dp.ingest` per file, torch embedder), `Collection.add` with torch (parallel extraction, embedding batched
   across documents), and `Collection.add` with the default backend (`embedding.backend=auto`: OpenVINO when
   installed). Embedder load time is kept apart from ingestion time.
2. The whole collection (`--contracts`) with the default backend into an empty store: wall time, pages/s,
   passages/s, peak RSS, failures.
3. Question latency over that collection: `dp.context` and an offline `dp.ask` for a sample of the data
   room's questions (each names its contract) and for the plain questions of natural_questions_dev.json
   (naming none: ranked across every contract), p50/p95 after one warm-up question.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"
ROOM = EVAL / "cuad-collection-dev"


def _files(limit: int | None) -> list[Path]:
    with (ROOM / "manifest.csv").open(encoding="utf-8", newline="") as handle:
        files = [ROOM / row["file"] for row in csv.DictReader(handle)]
    return files[:limit] if limit else files


def _pages(files: list[Path]) -> int:
    with (ROOM / "manifest.csv").open(encoding="utf-8", newline="") as handle:
        pages = {row["file"]: int(row["pdf_pages"]) for row in csv.DictReader(handle)}
    return sum(pages[str(f.relative_to(ROOM))] for f in files)


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(1000 * statistics.median(ordered), 1),
        "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "n": len(ordered),
    }


def _settings(home: Path, backend: str):
    from docpipe import Settings

    return Settings(home=home, embedding={"backend": backend})


def _embedder(backend: str):
    from docpipe.embed.base import load_embedder

    started = time.perf_counter()
    embedder = load_embedder(_settings(Path(tempfile.mkdtemp()), backend).embedding)
    embedder.embed(["warm-up " * 40] * 128)  # bulk path loaded (torch or the compiled model)
    return embedder, round(time.perf_counter() - started, 2)


def compare(files: list[Path]) -> dict:
    from docpipe import DocPipe

    pages = _pages(files)
    out: dict = {"contracts": len(files), "pages": pages, "runs": {}}
    for label, backend, one_by_one in (
        ("one dp.ingest per file, torch", "torch", True),
        ("Collection.add, torch", "torch", False),
        ("Collection.add, default backend", "auto", False),
    ):
        embedder, load_s = _embedder(backend)
        home = Path(tempfile.mkdtemp(prefix="docpipe-coll-bench-"))
        dp = DocPipe(_settings(home, backend), embedder=embedder)
        started = time.perf_counter()
        if one_by_one:
            for file in files:
                dp.ingest(file)
        else:
            report = dp.collection("bench").add(files)
            assert report.ok, report.summary()
        seconds = time.perf_counter() - started
        out["runs"][label] = {
            "backend": dp.settings.embedding.vector_backend(),
            "embedder_load_s": load_s,
            "seconds": round(seconds, 1),
            "pages_per_s": round(pages / seconds, 2),
        }
        print(label, out["runs"][label], flush=True)
    base = out["runs"]["one dp.ingest per file, torch"]["seconds"]
    for run in out["runs"].values():
        run["speedup"] = round(base / run["seconds"], 2)
    return out


def whole(files: list[Path], questions: int, home: Path | None) -> dict:
    from docpipe import DocPipe
    from docpipe.collection.handle import AddProgress

    home = home or Path(tempfile.mkdtemp(prefix="docpipe-coll-whole-"))
    embedder, load_s = _embedder("auto")
    dp = DocPipe(_settings(home, "auto"), embedder=embedder)
    passages = 0

    def tell(event: AddProgress) -> None:
        nonlocal passages
        if event.kind == "embed":
            passages = event.done
        elif event.done % 25 == 0:
            print(f"  {event.done}/{event.total} files", flush=True)

    started = time.perf_counter()
    coll = dp.collection("dataroom")
    report = coll.add(files, progress=tell)
    seconds = time.perf_counter() - started
    pages = _pages(files)
    out: dict = {
        "contracts": len(files),
        "pages": pages,
        "backend": dp.settings.embedding.vector_backend(),
        "embedder_load_s": load_s,
        "seconds": round(seconds, 1),
        "minutes": round(seconds / 60, 2),
        "pages_per_s": round(pages / seconds, 2),
        "passages_embedded": passages,
        "passages_per_s": round(passages / seconds, 1),
        "failed": report.failed,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "workers": dp.settings.extraction.max_concurrent,
    }
    print("whole collection", out, flush=True)
    index = dp.collection_service.sync(coll)
    out["pooled_index"] = {"vectors": index.size, "type": index.pooled_type}

    # Question latency: a warm store and process, as a server or a notebook has it.
    records = [json.loads(line) for line in (ROOM / "annotations.jsonl").read_text(encoding="utf-8").splitlines()]
    random.Random(0).shuffle(records)
    named = [r["question"] for r in records[:questions]]
    plain = list(json.loads((EVAL / "natural_questions_dev.json").read_text(encoding="utf-8")).values())
    dp.ask(coll, plain[0])  # warm-up: loads the pooled BM25 index and a first document
    latency: dict = {}
    for label, asked in (("names its contract", named), ("names none (plain question)", plain)):
        context_s, ask_s = [], []
        for question in asked:
            t = time.perf_counter()
            dp.context(coll, question)
            context_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            dp.ask(coll, question)
            ask_s.append(time.perf_counter() - t)
        latency[label] = {"context": _percentiles(context_s), "offline_ask": _percentiles(ask_s)}
        print(label, latency[label], flush=True)
    out["question_latency"] = latency
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=int, default=20, help="contracts for the side-by-side runs (0: skip)")
    parser.add_argument("--contracts", type=int, default=231, help="contracts for the whole-collection run (0: skip)")
    parser.add_argument("--questions", type=int, default=300, help="data-room questions timed")
    parser.add_argument("--home", type=Path, help="store for the whole-collection run (default: a new temporary one)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "collection_ingest.json")
    args = parser.parse_args()
    if not ROOM.is_dir():
        sys.exit(f"missing {ROOM}: the benchmark reads ../shared/eval in place")
    import torch

    results: dict = {
        "benchmark": "collection_ingest",
        "command": "python benchmarks/collection_ingest.py " + " ".join(sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
    }
    started = time.perf_counter()
    if args.compare:
        results["side_by_side"] = compare(_files(args.compare))
    if args.contracts:
        results["whole_collection"] = whole(_files(args.contracts), args.questions, args.home)
    results["runtime_s"] = round(time.perf_counter() - started, 1)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
