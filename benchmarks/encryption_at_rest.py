"""Encryption at rest: what sealing the store costs, plain and sealed side by side in one run.

    .venv/bin/python benchmarks/encryption_at_rest.py [--reps 3]

For the sample contract and three cuad-dev contracts (small, middle, the longest; read in place from
../shared/eval), each repetition runs both modes in alternating order (plain first on odd repetitions, sealed
first on even ones, so drift on a shared machine falls on both):

- **cold ingest**: an empty store, the default embedder (loaded once, before any timing), extract + section +
  embed + index + store;
- **first ask**: a fresh DocPipe on that store (the index read from disk), one offline (extractive) question,
  which embeds the quoted sections' sentences and stores them;
- **warm ask**: another fresh DocPipe, the same question: everything read from disk, nothing embedded.

Medians per contract and mode, and the sealed/plain ratio of the medians. Also the bytes each store holds and the
throughput of sealing and opening them alone (AES-256-GCM), to show where the overhead comes from. Writes
docs/benchmarks/encryption_at_rest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CUAD = ROOT.parent / "shared" / "eval" / "cuad-dev" / "pdf"
CONTRACTS = [
    ROOT / "samples" / "master_services_agreement.pdf",
    CUAD / "OAKTREECAPITALGROUP_LLC_03_02_2020-EX-10.8-Services_Agreement.pdf",
    CUAD / "ELANDIAINTERNATIONALINC_04_25_2007-EX-10.21-Outsourcing_Agreement.pdf",
    CUAD / "GOOSEHEADINSURANCE_INC_04_02_2018-EX-10.6-Franchise_Agreement.pdf",
]
QUESTION = "Under what conditions may either party terminate this agreement?"
OUT = ROOT / "docs" / "benchmarks" / "encryption_at_rest.json"


def _settings(home: Path, key: str | None):
    from docpipe import Settings

    return Settings(home=home, store_key=key, engine={"backend": "extractive"})


def _one(pdf: Path, key: str | None, embedder) -> dict[str, float]:
    from docpipe import DocPipe

    home = Path(tempfile.mkdtemp(prefix="docpipe-bench-seal-"))
    try:
        settings = _settings(home, key)
        started = time.perf_counter()
        doc = DocPipe(settings, embedder=embedder).ingest(pdf)
        ingest = time.perf_counter() - started
        timings = {"ingest_s": ingest}
        for name in ("first_ask_s", "warm_ask_s"):
            dp = DocPipe(settings, embedder=embedder)  # fresh: the index is read from disk
            started = time.perf_counter()
            dp.ask(doc, QUESTION)
            timings[name] = time.perf_counter() - started
        timings["store_bytes"] = float(sum(p.stat().st_size for p in home.rglob("*") if p.is_file()))
        timings["pages"] = float(len(doc.pages))
        return timings
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _throughput(embedder, key: str) -> dict[str, float]:
    """Returns MB/s of sealing and of opening the files of one plain store of the longest contract."""
    from docpipe import DocPipe
    from docpipe.storage.sealing import Sealer, parse_key

    home = Path(tempfile.mkdtemp(prefix="docpipe-bench-seal-"))
    try:
        DocPipe(_settings(home, None), embedder=embedder).ingest(CONTRACTS[-1])
        blobs = [p.read_bytes() for p in home.rglob("*") if p.is_file()]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    sealer = Sealer(parse_key(key))
    total = sum(map(len, blobs))
    rounds = 20
    started = time.perf_counter()
    for _ in range(rounds):
        sealed = [sealer.seal(b, "bench") for b in blobs]
    seal_s = (time.perf_counter() - started) / rounds
    started = time.perf_counter()
    for _ in range(rounds):
        for b in sealed:
            sealer.open(b, "bench")
    open_s = (time.perf_counter() - started) / rounds
    return {
        "bytes": total,
        "files": len(blobs),
        "seal_ms": round(seal_s * 1e3, 2),
        "open_ms": round(open_s * 1e3, 2),
        "seal_mb_per_s": round(total / seal_s / 1e6, 1),
        "open_mb_per_s": round(total / open_s / 1e6, 1),
    }


def main() -> None:
    from docpipe import Settings
    from docpipe.embed.base import load_embedder
    from docpipe.storage.sealing import new_key_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each (contract, mode)")
    args = parser.parse_args()
    missing = [p for p in CONTRACTS if not p.exists()]
    if missing:
        raise SystemExit(f"missing {missing[0]}: the benchmark reads ../shared/eval in place")
    embedder = load_embedder(Settings().embedding)
    embedder.embed(["warm-up"] * (embedder.NUMPY_BATCH_LIMIT + 1))  # load the weights before any timing
    key = new_key_text()
    runs: dict[str, dict[str, list[dict[str, float]]]] = {p.name: {"plain": [], "sealed": []} for p in CONTRACTS}
    for rep in range(args.reps):
        order = ["plain", "sealed"] if rep % 2 == 0 else ["sealed", "plain"]
        for pdf in CONTRACTS:
            for mode in order:
                result = _one(pdf, key if mode == "sealed" else None, embedder)
                runs[pdf.name][mode].append(result)
                print(
                    f"rep {rep + 1} {mode:6} {pdf.name[:40]:40} " + " ".join(f"{k}={v:.3f}" for k, v in result.items())
                )
    contracts = {}
    for name, modes in runs.items():
        row: dict[str, object] = {"pages": int(modes["plain"][0]["pages"])}
        for metric in ("ingest_s", "first_ask_s", "warm_ask_s", "store_bytes"):
            plain = statistics.median(r[metric] for r in modes["plain"])
            sealed = statistics.median(r[metric] for r in modes["sealed"])
            digits = 0 if metric == "store_bytes" else 4
            row[metric] = {
                "plain": round(plain, digits),
                "sealed": round(sealed, digits),
                "ratio": round(sealed / plain, 3),
                "all_plain": [round(r[metric], digits) for r in modes["plain"]],
                "all_sealed": [round(r[metric], digits) for r in modes["sealed"]],
            }
        contracts[name] = row
    result = {
        "benchmark": "encryption at rest: cold ingest and asks, plain vs sealed store, side by side",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "processor": platform.machine()},
        "embedder": Settings().embedding.model,
        "engine": "extractive (offline)",
        "question": QUESTION,
        "repetitions": args.reps,
        "contracts": contracts,
        "sealing_alone": _throughput(embedder, key),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        json.dumps(
            {n: {m: r[m]["ratio"] for m in ("ingest_s", "first_ask_s", "warm_ask_s")} for n, r in contracts.items()}
        )
    )
    print(json.dumps(result["sealing_alone"]))


if __name__ == "__main__":
    main()
