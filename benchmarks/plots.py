"""Draws the benchmark plots (PNG) from the JSON results the benchmarks wrote.

    .venv/bin/python benchmarks/plots.py          # reads and writes benchmarks/results/
    .venv/bin/python benchmarks/plots.py --results DIR --out DIR

One function per benchmark, each taking the parsed JSON and the PNG path; `index_speed.py` and
`embed_speed.py` call theirs directly. A result that is not there (that benchmark was not run) is skipped with
a message. Needs matplotlib: pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
COLOURS = {"flat": "#444444", "hnsw": "#1f77b4", "ivf": "#d62728"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)


def _machine(result: dict) -> str:
    machine = result.get("machine", {})
    cpus = machine.get("cpus") or result.get("cpu_count")
    start = machine.get("load_average_at_start") or result.get("load_average_at_start")
    end = result.get("load_average_at_end")
    load = ""
    if start:
        load = f"load average {start[0]:.1f} at start" + (f", {end[0]:.1f} at end" if end else "")
    return ", ".join(p for p in (f"{cpus} CPU cores" if cpus else "", load) if p)


def plot_index_speed(result: dict, path: Path) -> None:
    """Draws one-query latency, build time and the recall/latency sweep against index size."""
    plt = _pyplot()
    fig, (ax_lat, ax_build, ax_sweep) = plt.subplots(1, 3, figsize=(16, 5))
    rows = result["sizes"]
    target = result.get("recall_target", 0.95)
    for kind in ("flat", "hnsw", "ivf"):
        points = [(r["n"], r["types"][kind]) for r in rows if "p50_ms" in r["types"].get(kind, {})]
        if not points:
            continue
        ns = [n for n, _ in points]
        label = {"flat": "flat (exact)", "hnsw": "HNSW", "ivf": "IVF"}[kind]
        ax_lat.plot(ns, [v["p50_ms"] for _, v in points], "o-", color=COLOURS[kind], label=label)
        # A flat "build" of a few thousand vectors rounds to 0 s, which a log axis cannot show.
        ax_build.plot(ns, [max(v["build_s"], 1e-4) for _, v in points], "o-", color=COLOURS[kind], label=label)
        if kind == "flat":
            threads = result.get("machine", {}).get("faiss_threads", "all")
            ax_lat.plot(
                ns,
                [v.get("all_threads_p50_ms") for _, v in points],
                "x--",
                color=COLOURS[kind],
                alpha=0.5,
                label=f"flat, FAISS on {threads} threads",
            )
            continue
        for n, v in points:
            ok = v["recall_at_10"] >= target
            ax_lat.annotate(
                f"{v['recall_at_10']:.3f}",
                (n, v["p50_ms"]),
                textcoords="offset points",
                xytext=(4, -12 if kind == "ivf" else 6),
                fontsize=7,
                color=COLOURS[kind],
                fontweight="normal" if ok else "bold",
            )
    crossover = result.get("crossover", {})
    auto = crossover.get("auto_flat_below")
    if auto:
        ax_lat.axvline(auto, color="green", linestyle=":", label=f"auto: flat below {auto:,}")
    ax_lat.set(
        xscale="log",
        yscale="log",
        xlabel="vectors in the index (384-dim)",
        ylabel="one query, p50 (ms)",
        title="Search latency, k=10 (labels: recall@10 vs flat)",
    )
    sizes = [r["n"] for r in rows]
    ax_lat.set_xlim(min(sizes) / 1.5, max(sizes) * 3)  # room for the recall labels of the last point
    ax_lat.legend(fontsize=8)
    ax_build.set(xscale="log", yscale="log", xlabel="vectors in the index", ylabel="seconds", title="Build time")
    ax_build.legend(fontsize=8)
    # The sweep at the largest size where both approximate types were built.
    swept = [r for r in rows if r.get("sweep")]
    if swept:
        largest = swept[-1]
        for kind, points in largest["sweep"].items():
            knob = next(k for k in points[0] if k not in ("recall_at_10", "p50_ms"))
            ax_sweep.plot(
                [p["p50_ms"] for p in points],
                [p["recall_at_10"] for p in points],
                "o-",
                color=COLOURS[kind],
                label=f"{kind.upper()} by {knob}",
            )
            for p in points:
                ax_sweep.annotate(
                    str(p[knob]),
                    (p["p50_ms"], p["recall_at_10"]),
                    textcoords="offset points",
                    xytext=(3, -10),
                    fontsize=7,
                    color=COLOURS[kind],
                )
        flat = largest["types"].get("flat", {})
        if "p50_ms" in flat:
            ax_sweep.axvline(flat["p50_ms"], color=COLOURS["flat"], linestyle="--", label="flat p50")
        ax_sweep.axhline(target, color="green", linestyle=":", label=f"recall {target}")
        ax_sweep.set(
            xscale="log",
            xlabel="one query, p50 (ms)",
            ylabel="recall@10",
            title=f"Search effort at N = {largest['n']:,}",
        )
        from matplotlib.ticker import NullFormatter

        ax_sweep.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on a short log range
        ax_sweep.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Dense index by size: {result.get('data', {}).get('kind', '')}; {_machine(result)}", fontsize=10)
    _save(fig, path)


def plot_embed_speed(result: dict, path: Path) -> None:
    """Draws passages/s per embedder and thread count (log scale: hashing is orders of magnitude faster)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(result["embedders"])
    labels = list(result["embedders"][names[0]]["threads"])
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(names))]
        cells = [result["embedders"][n]["threads"][label] for n in names]
        bars = ax.bar(
            xs,
            [c["passages_per_s"] for c in cells],
            width,
            label=f"{label} thread{'s' * (label != '1')}",
            color=["#1f77b4", "#ff7f0e"][i % 2],
        )
        for bar, cell in zip(bars, cells):
            q = cell["one_question_ms"]
            ax.annotate(
                f"{cell['passages_per_s']:,.1f}/s\n{q:.1f} ms/q"
                if q >= 1
                else f"{cell['passages_per_s']:,.1f}/s\n{q:.2f} ms/q",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks(range(len(names)), [f"{n}\n({result['embedders'][n]['passages']} passages)" for n in names])
    ax.set(
        yscale="log",
        ylabel="passages per second (ms/q: one question)",
        title=f"Embedding real contract passages ({result['model']}, batch {result['batch_size']})",
    )
    ax.margins(y=0.25)
    ax.legend(fontsize=8)
    fig.text(0.01, -0.03, _machine(result), ha="left", fontsize=7, color="grey")
    _save(fig, path)


def plot_extract_speed(result: dict, path: Path) -> None:
    """Draws pages/s per extractor overall, and seconds per document against its pages."""
    plt = _pyplot()
    fig, (ax_total, ax_docs) = plt.subplots(1, 2, figsize=(12, 4.5))
    totals = result["totals"]
    names = list(totals)
    bars = ax_total.bar(names, [totals[n]["pages_per_s"] for n in names], color=["#7f7f7f", "#2ca02c"])
    for bar, name in zip(bars, names):
        ax_total.annotate(
            f"{totals[name]['pages_per_s']:.0f} pages/s",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    pages = totals[names[0]]["pages"]
    ax_total.set(
        ylabel="pages per second",
        title=f"{len(result['files'])} contracts, {pages} pages: "
        f"{result['ratio_pypdf_over_pypdfium2_seconds']:.1f}x overall",
    )
    for name, colour in zip(names, ["#7f7f7f", "#2ca02c"]):
        done = [f[name] for f in result["files"] if "error" not in f[name]]
        ax_docs.scatter([d["pages"] for d in done], [d["seconds"] for d in done], color=colour, label=name, s=18)
    ax_docs.set(
        xscale="log",
        yscale="log",
        xlabel="pages in the contract",
        ylabel="seconds (worker process included)",
        title="Per contract",
    )
    ax_docs.legend()
    fig.suptitle(f"PDF text extraction; {_machine(result)}", fontsize=10)
    _save(fig, path)


def plot_engine_speed(result: dict, path: Path) -> None:
    """Draws the engine's speedup from batching (and from concurrent askers) against the batch size."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = {int(k): v for k, v in result["batch"]["sizes"].items() if k.isdigit()}
    xs = sorted(sizes)
    ax.plot(xs, [sizes[x]["speedup"] for x in xs], "o-", label="one batch vs one request at a time")
    for x in xs:
        ax.annotate(
            f"{sizes[x]['speedup']:.1f}x",
            (x, sizes[x]["speedup"]),
            textcoords="offset points",
            xytext=(4, -12),
            fontsize=8,
        )
    concurrency = {int(k): v for k, v in result.get("concurrency", {}).items()}
    if concurrency:
        cs = sorted(concurrency)
        ax.plot(
            cs, [concurrency[c]["speedup"] for c in cs], "s--", label="N concurrent askers (AsyncLLM) vs sequential"
        )
    ax.plot(xs, xs, ":", color="grey", label="ideal (linear)")
    ax.set(
        xlabel="batch size / concurrent requests",
        ylabel="speedup (x)",
        xticks=xs,
        title=f"Engine batch scaling: {result['model'].split(' (')[0]}",
        ylim=(0, max(xs) + 1),
    )
    ax.legend(fontsize=8)
    fig.text(0.01, -0.03, _machine(result), ha="left", fontsize=7, color="grey")
    _save(fig, path)


def plot_service_load(result: dict, path: Path) -> None:
    """Draws `docpipe serve` latency percentiles and throughput against concurrent clients, one line per engine.

    Reads service_load.json as benchmarks/service_load.py writes it: {"runs": [{"engine", "concurrency",
    "p50_s", "p95_s", "p99_s", "throughput_rps", "errors", ...}], "setup": {...}}.
    """
    plt = _pyplot()
    fig, (ax_lat, ax_rps) = plt.subplots(1, 2, figsize=(12, 4.5))
    engines: dict[str, list[dict]] = {}
    for run in result["runs"]:
        engines.setdefault(run.get("engine", "?"), []).append(run)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    for colour, (engine, runs) in zip(colours, engines.items()):
        runs.sort(key=lambda run: run["concurrency"])
        xs = [run["concurrency"] for run in runs]
        for pct, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ax_lat.plot(xs, [run[f"{pct}_s"] for run in runs], style, color=colour, label=f"{engine} {pct}")
        ax_rps.plot(xs, [run["throughput_rps"] for run in runs], "o-", color=colour, label=engine)
        for run in runs:
            ax_rps.annotate(
                f"{run['throughput_rps']:.0f}" + (f"\n{run['errors']} errors" if run["errors"] else ""),
                (run["concurrency"], run["throughput_rps"]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color="red" if run["errors"] else colour,
            )
    xs = sorted({run["concurrency"] for run in result["runs"]})
    ax_lat.set(xlabel="concurrent clients", ylabel="latency per question (s)", xticks=xs, title="Latency")
    ax_lat.legend(fontsize=7, ncol=2)
    ax_rps.set(
        xlabel="concurrent clients", ylabel="questions per second", xticks=xs, title="Throughput", ylim=(0, None)
    )
    ax_rps.legend(fontsize=8)
    setup = result.get("setup", {})
    load = setup.get("load_average_1min", {}).get("before")
    note = f"{setup.get('machine', '')}" + (f", load avg {load:.1f} before" if load is not None else "")
    fig.suptitle(f"docpipe serve under load ({setup.get('measured', '')}); {note}", fontsize=10)
    _save(fig, path)


PLOTS: dict[str, Callable[[dict, Path], None]] = {
    "extract_speed": plot_extract_speed,
    "engine_speed": plot_engine_speed,
    "embed_speed": plot_embed_speed,
    "index_speed": plot_index_speed,
    "service_load": plot_service_load,
}
HOW_TO_RUN = {name: f"python benchmarks/{name}.py" for name in PLOTS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS, help="folder holding the JSON results")
    p.add_argument("--out", type=Path, help="folder for the PNGs (default: --results)")
    args = p.parse_args(argv)
    out = args.out or args.results
    drawn = 0
    for name, plot in PLOTS.items():
        source = args.results / f"{name}.json"
        if not source.is_file():
            print(f"skipped {name}.png: {source} not found (run {HOW_TO_RUN[name]})")
            continue
        plot(json.loads(source.read_text(encoding="utf-8")), out / f"{name}.png")
        print(f"wrote {out / f'{name}.png'}")
        drawn += 1
    return 0 if drawn else 1


if __name__ == "__main__":
    sys.exit(main())
