"""Dense search speed and recall by index size: flat (exact) against HNSW and IVF, side by side in one run.

    .venv/bin/python benchmarks/index_speed.py        # ~5-10 min on 2 cores; writes benchmarks/results/
                                                      # index_speed.json and index_speed.png
    .venv/bin/python benchmarks/index_speed.py --sizes 1000,10000,100000   # quicker

Vectors are 384-dim float32 (MiniLM's dimension), L2-normalised, drawn from a two-level Gaussian mixture:
64 topics, 4,096 subtopics around them with Zipf-like weights, and points spread around each subtopic along
a decaying spectrum (about 26 effective dimensions, each topic on its own axes). Uniform random vectors
would be the wrong test: in 384 dimensions their nearest neighbours are barely nearer than anyone else,
which no real embedding looks like. Queries are further points from the same mixture, never in the index.
Smaller sizes are prefixes of the largest set (the points are drawn independently, so a prefix is a sample).

Per size and index type (each built through `docpipe.retrieve.dense.DenseIndex`, i.e. with docpipe's own parameters):
build time; latency of one query (`DenseIndex.search(q, k=10)`, p50 and p95, the types timed in turn for
each query so that machine noise falls on all alike); time per query in one batch of queries; recall@10
against the exact (flat) neighbours. A sweep of the search effort (HNSW efSearch, IVF nprobe) on the same
built index shows what recall costs. The crossover is the smallest size at which an approximate index
answers one query faster than flat at recall@10 >= 0.95. Near it the two differ by hundredths of a
millisecond, within machine noise, so `docpipe.retrieve.dense.AUTO_FLAT_BELOW` is the smallest measured size from
which the approximate index is at least 2x faster.

One query is timed with FAISS on one thread, as a server answering concurrent requests runs it. HNSW and IVF
search one query on one thread anyway, but a flat search of more than a few thousand vectors splits over all
threads, and on a shared 2-core machine that can be 100x slower (measured: 10,000 vectors, load average 9:
0.26 ms on one thread, 28 ms on two); flat's all-threads latency is recorded beside it. Builds and batches
use all threads.

HNSW builds grow fastest: a build projected (from the previous size) to take longer than --max-build-s is
skipped and recorded as such, so a busy machine cannot stretch the run past its budget.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from docpipe.retrieve import dense as dense_index
from docpipe.retrieve.dense import DenseIndex

DIM = 384
K = 10
TYPES = ("flat", "hnsw", "ivf")
RECALL_TARGET = 0.95
DEFAULT_SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 1_000_000)
SWEEP = {"hnsw": ("efSearch", (16, 32, 64, 128, 256)), "ivf": ("nprobe", (1, 2, 4, 8, 16, 32, 64))}
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "index_speed.json"
DEFAULT_THREADS = os.cpu_count() or 1


def mixture(
    n: int,
    rng: np.random.Generator,
    *,
    topics: int = 64,
    subtopics: int = 4096,
    alpha: float = 0.5,
    spread: float = 1.0,
    chunk: int = 100_000,
) -> tuple[np.ndarray, dict]:
    """Returns `n` unit vectors from a two-level Gaussian mixture (see the module docstring) and its description.

    The mixture itself (centres, weights, spectra) comes from a fixed seed, so data and queries drawn with
    different generators share it.
    """
    fixed = np.random.default_rng(20261130)
    topic_centres = _unit(fixed.standard_normal((topics, DIM), dtype=np.float32))
    topic_of = fixed.integers(0, topics, size=subtopics)
    centres = _unit(topic_centres[topic_of] + 0.8 * _unit(fixed.standard_normal((subtopics, DIM), dtype=np.float32)))
    weights = 1.0 / np.sqrt(np.arange(1, subtopics + 1))
    weights /= weights.sum()
    spectrum = np.arange(1, DIM + 1, dtype=np.float32) ** -alpha
    spectrum *= spread / np.sqrt((spectrum**2).sum())
    axes = np.stack([spectrum[fixed.permutation(DIM)] for _ in range(topics)])  # each topic its own axes
    labels = rng.choice(subtopics, size=n, p=weights)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, chunk):
        rows = labels[start : start + chunk]
        x = rng.standard_normal((len(rows), DIM), dtype=np.float32)
        x *= axes[topic_of[rows]]
        x += centres[rows]
        out[start : start + len(rows)] = _unit(x)
    effective_dims = float((spectrum**2).sum() ** 2 / (spectrum**4).sum())
    description = {
        "kind": "two-level Gaussian mixture, L2-normalised",
        "topics": topics,
        "subtopics": subtopics,
        "subtopic_weights": "1/sqrt(rank)",
        "subtopic_offset_from_topic": 0.8,
        "spread": spread,
        "spectrum": f"rank^-{alpha}",
        "effective_dims": round(effective_dims, 1),
    }
    return out, description


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def exact_neighbours(data: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """Returns the exact top-k ids of each query and the seconds one batched flat search took."""
    import faiss

    flat = faiss.IndexFlatIP(DIM)
    flat.add(data)
    started = time.perf_counter()
    _, ids = flat.search(queries, k)
    return ids, time.perf_counter() - started


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    """Returns mean recall@k: the share of the exact top-k each query's result holds."""
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / truth.shape[1] for a, b in zip(found, truth)]))


def single_query_ms(indexes: dict[str, tuple[DenseIndex, int]], queries: np.ndarray) -> dict[str, list[float]]:
    """Returns per-query latencies in ms for each (index, FAISS threads), timing them in turn for every query."""
    import faiss

    times: dict[str, list[float]] = {name: [] for name in indexes}
    names = list(indexes)
    try:
        for i, query in enumerate(queries):
            for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate who goes first
                index, threads = indexes[name]
                faiss.omp_set_num_threads(threads)
                started = time.perf_counter()
                index.search(query, k=K)
                times[name].append(1000 * (time.perf_counter() - started))
    finally:
        faiss.omp_set_num_threads(DEFAULT_THREADS)
    return times


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def sweep(index: DenseIndex, queries: np.ndarray, truth: np.ndarray, latency_queries: np.ndarray) -> list[dict]:
    """Returns recall@10 and single-query p50 for each search effort of the index's type, restoring its own."""
    knob, values = SWEEP[index.index_type]
    raw = index.faiss_index
    holder = raw.hnsw if index.index_type == "hnsw" else raw
    own = getattr(holder, knob)
    rows = []
    try:
        for value in values:
            if index.index_type == "ivf" and value > raw.nlist:
                continue
            setattr(holder, knob, value)
            _, ids = index.search_batch(queries, K)
            lat = single_query_ms({"x": (index, 1)}, latency_queries)["x"]
            rows.append(
                {knob: value, "recall_at_10": round(recall(ids, truth), 4), "p50_ms": round(statistics.median(lat), 4)}
            )
    finally:
        setattr(holder, knob, own)
    return rows


def bench_size(
    n: int, data: np.ndarray, queries: np.ndarray, args: argparse.Namespace, hnsw_last: tuple[int, float] | None
) -> dict[str, Any]:
    """Returns the measurements of every index type over the first `n` vectors."""
    subset = data[:n]
    truth, flat_batch_s = exact_neighbours(subset, queries, K)
    row: dict[str, Any] = {"n": n, "types": {}, "sweep": {}}
    indexes: dict[str, DenseIndex] = {}
    for kind in args.types:
        if kind == "hnsw" and hnsw_last is not None:
            last_n, last_s = hnsw_last
            projected = last_s * (n / last_n) * math.log(n) / math.log(last_n)
            if projected > args.max_build_s:
                row["types"][kind] = {
                    "skipped": f"build projected at {projected:.0f} s > --max-build-s "
                    f"{args.max_build_s:.0f} (from {last_s:.1f} s at {last_n})"
                }
                print(f"  {kind:4s} skipped: {row['types'][kind]['skipped']}", flush=True)
                continue
        started = time.perf_counter()
        index = DenseIndex(subset, index_type=kind)
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        _, ids = index.search_batch(queries, K)
        batch_s = time.perf_counter() - started
        entry: dict[str, Any] = {
            "build_s": round(build_s, 4),
            "batch_ms_per_query": round(1000 * batch_s / len(queries), 4),
            "recall_at_10": round(recall(ids, truth), 4),
        }
        raw = index.faiss_index
        if kind == "hnsw":
            entry["params"] = {
                "M": dense_index.HNSW_M,
                "efConstruction": raw.hnsw.efConstruction,
                "efSearch": raw.hnsw.efSearch,
            }
        elif kind == "ivf":
            entry["params"] = {"nlist": raw.nlist, "nprobe": raw.nprobe}
        row["types"][kind] = entry
        indexes[kind] = index
        print(f"  {kind:4s} built in {build_s:7.2f} s, recall@10 {entry['recall_at_10']:.3f}", flush=True)
    # Flat costs ~0.1 s a query at 1e6 on this CPU: fewer single queries there, still a stable median.
    n_latency = args.latency_queries if n <= 100_000 else max(20, args.latency_queries // 4)
    latency_queries = queries[:n_latency]
    timed = {kind: (index, 1) for kind, index in indexes.items()}
    if "flat" in indexes:
        timed["flat_all_threads"] = (indexes["flat"], DEFAULT_THREADS)
    single_query_ms(timed, latency_queries[:5])  # warm-up: first touches of the memory
    times = single_query_ms(timed, latency_queries)
    for kind, values in times.items():
        stats = {"p50_ms": round(statistics.median(values), 4), "p95_ms": round(percentile(values, 95), 4)}
        if kind == "flat_all_threads":
            row["types"]["flat"].update({f"all_threads_{name}": value for name, value in stats.items()})
        else:
            row["types"][kind].update(stats, latency_queries=len(values))
    if "flat" in row["types"]:
        row["types"]["flat"]["exact_batch_ms_per_query"] = round(1000 * flat_batch_s / len(queries), 4)
    if args.sweep:
        sweep_queries = latency_queries[: max(20, len(latency_queries) // 2)]
        for kind in ("hnsw", "ivf"):
            if kind in indexes:
                row["sweep"][kind] = sweep(indexes[kind], queries, truth, sweep_queries)
    cells = "  ".join(
        f"{k} {v['p50_ms']:.3f} ms r={v['recall_at_10']:.3f}" for k, v in row["types"].items() if "p50_ms" in v
    )
    print(f"  p50 one query: {cells}", flush=True)
    return row


def crossovers(rows: list[dict]) -> dict[str, Any]:
    """Returns, per approximate type, the smallest measured size from which it answers one query faster than
    flat at recall@10 >= 0.95 (at that size and every larger one), the same for at least 2x faster (a margin
    above machine noise), and a log-log interpolation of where its speedup over flat crosses 1."""
    out: dict[str, Any] = {}
    for kind in ("hnsw", "ivf"):
        points = []  # (n, recall ok, speedup over flat)
        for row in rows:
            flat, approx = row["types"].get("flat", {}), row["types"].get(kind, {})
            if "p50_ms" in flat and "p50_ms" in approx:
                points.append((row["n"], approx["recall_at_10"] >= RECALL_TARGET, flat["p50_ms"] / approx["p50_ms"]))

        entry: dict[str, Any] = {
            "first_faster_size": _first_from(points, 1.0),
            "first_2x_faster_size": _first_from(points, 2.0),
            "speedup_over_flat": {str(n): round(r, 2) for n, _, r in points},
            "recall_at_10": {
                str(row["n"]): row["types"][kind]["recall_at_10"]
                for row in rows
                if "recall_at_10" in row["types"].get(kind, {})
            },
        }
        for (n0, _, r0), (n1, _, r1) in itertools.pairwise(points):
            if r0 < 1 <= r1:  # the last crossing wins: the speedup only grows from there
                t = -math.log(r0) / (math.log(r1) - math.log(r0))
                entry["interpolated_size"] = int(round(math.exp(math.log(n0) + t * math.log(n1 / n0)), -2))
        out[kind] = entry
    out["auto_flat_below"] = dense_index.AUTO_FLAT_BELOW
    out["auto_approximate"] = dense_index.AUTO_APPROXIMATE
    return out


def _first_from(points: list[tuple[int, bool, float]], factor: float) -> int | None:
    """Returns the smallest size from which every (size, recall ok, speedup) point is ok and faster than `factor`."""
    for i, (n, _, _) in enumerate(points):
        if all(ok and speedup > factor for _, ok, speedup in points[i:]):
            return n
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="comma-separated")
    p.add_argument("--types", default=",".join(TYPES), help="comma-separated subset of flat,hnsw,ivf")
    p.add_argument("--queries", type=int, default=200, help="queries for recall and batch timing")
    p.add_argument("--latency-queries", type=int, default=200, help="single queries timed per size (1/4 above 1e5)")
    p.add_argument("--max-build-s", type=float, default=300.0, help="skip an HNSW build projected to take longer")
    p.add_argument("--no-sweep", dest="sweep", action="store_false", help="skip the search-effort sweep")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--no-plot", dest="plot", action="store_false")
    args = p.parse_args(argv)
    args.sizes = sorted(int(float(s)) for s in args.sizes.split(","))
    args.types = [t for t in TYPES if t in args.types.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    import faiss

    args = parse_args(argv)
    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    rng = np.random.default_rng(args.seed)
    data, description = mixture(max(args.sizes), rng)
    queries, _ = mixture(args.queries, np.random.default_rng(args.seed + 1))
    print(
        f"data: {len(data)} x {DIM} ({description['kind']}) in {time.perf_counter() - started:.1f} s; "
        f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads",
        flush=True,
    )
    rows: list[dict] = []
    hnsw_last: tuple[int, float] | None = None
    for n in args.sizes:
        print(f"N = {n:,}", flush=True)
        row = bench_size(n, data, queries, args, hnsw_last)
        rows.append(row)
        if "build_s" in row["types"].get("hnsw", {}):
            hnsw_last = (n, row["types"]["hnsw"]["build_s"])
    result = {
        "benchmark": "index_speed",
        "command": "python benchmarks/index_speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "faiss": version("faiss-cpu"),
            "faiss_threads": faiss.omp_get_max_threads(),
            "load_average_at_start": load_at_start,
        },
        "dim": DIM,
        "k": K,
        "recall_target": RECALL_TARGET,
        "data": description,
        "queries": args.queries,
        "docpipe_defaults": {
            "hnsw": {
                "M": dense_index.HNSW_M,
                "efConstruction": dense_index.HNSW_EF_CONSTRUCTION,
                "efSearch": dense_index.HNSW_EF_SEARCH,
            },
            "ivf": {"nlist": "4 sqrt(N), at most N/39", "nprobe": dense_index.IVF_NPROBE},
        },
        "sizes": rows,
        "crossover": crossovers(rows),
        "runtime_s": round(time.perf_counter() - started, 1),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    if args.plot:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from plots import plot_index_speed

        png = args.out.with_suffix(".png")
        plot_index_speed(result, png)
        print(f"wrote {png}")
    return 0


def report(result: dict) -> None:
    print(f"\n{'N':>9} {'type':>5} {'build s':>8} {'p50 ms':>8} {'p95 ms':>8} {'batch ms/q':>10} {'recall@10':>9}")
    for row in result["sizes"]:
        for kind, v in row["types"].items():
            if "skipped" in v:
                print(f"{row['n']:>9,} {kind:>5} skipped ({v['skipped']})")
                continue
            print(
                f"{row['n']:>9,} {kind:>5} {v['build_s']:>8.2f} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} "
                f"{v['batch_ms_per_query']:>10.4f} {v['recall_at_10']:>9.3f}"
            )
    c = result["crossover"]
    for kind in ("hnsw", "ivf"):
        e = c[kind]
        print(
            f"{kind}: faster than flat at recall >= {RECALL_TARGET} from N = {e['first_faster_size']} "
            f"(speedup crosses 1 near {e.get('interpolated_size')}), 2x faster from {e['first_2x_faster_size']}; "
            f"speedup by N: {e['speedup_over_flat']}"
        )
    print(
        f"docpipe auto: flat below {c['auto_flat_below']:,}, then {c['auto_approximate']}; "
        f"whole run {result['runtime_s']} s"
    )


if __name__ == "__main__":
    sys.exit(main())
