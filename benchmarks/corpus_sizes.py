"""What one contract costs the store: pages, sections, passages and index bytes per contract of cuad-collection-dev.

Run: .venv/bin/python benchmarks/corpus_sizes.py [--room DIR] [--contracts N] [--out FILE.json]
     (all 231 contracts: 3-6 minutes on 2 cores; --contracts takes a seeded sample; --room another data room,
     any folder of PDF and Word files, to size your own; the committed figures are docs/benchmarks/corpus_sizes.json)

The contracts (../shared/eval/cuad-collection-dev, read in place) are added to one collection of an empty
temporary store with the default settings, through the API (`DocPipe(Settings(home=tmp)).collection("x").add`,
which ends by bringing the collection's pooled index up to date), then one question that names no contract
loads it. The figures are read back from the store folder, so they are what docpipe wrote, not what it was
asked to write:

- per contract, from each document's ``index-<fingerprint>/`` folder: pages and sections (``document.json``),
  passages (``passages.json``, one row per embedded passage), and the index bytes on disk: ``dense.faiss``
  (the passage vectors), ``passages.json`` and ``document.json`` (the text, pages and sections);
- per contract, the whole of its store folder too (the source file, the extraction record, the index);
- per collection, the bytes of its own index folder (routing cards, pooled FAISS and BM25 over every passage);
- what recording one more member costs as a collection grows: `CollectionStore.add` of one member (what
  `Collection.add` does as each file finishes, on either executor) into a record of 1,000, 10,000 and 100,000
  members (synthetic ids and names of a CUAD file name's length), median of 5;
- the wall time of the add, as pages and contracts per second on this machine (for the deployment page's
  scaling arithmetic; benchmarks/collection_ingest.py is the benchmark of ingestion speed itself).

Each per-contract figure is reported as mean, p50 and p95 over the contracts, with the total. docs/deployment.md
scales these to 10,000 and 100,000 contracts.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ROOM = ROOT.parent / "shared" / "eval" / "cuad-collection-dev"
INDEX_FILES = ("dense.faiss", "passages.json", "document.json")


def _files(room: Path, limit: int | None, seed: int) -> list[Path]:
    """Returns the contracts of `room`: those its manifest.csv lists (cuad-collection-dev), else every PDF and
    Word file under it; a seeded sample of `limit` of them when given."""
    if (room / "manifest.csv").is_file():
        with (room / "manifest.csv").open(encoding="utf-8", newline="") as handle:
            files = [room / row["file"] for row in csv.DictReader(handle)]
    else:
        files = sorted(f for f in room.rglob("*") if f.suffix.lower() in (".pdf", ".docx") and f.is_file())
    if not files:
        raise SystemExit(f"no contracts in {room}: give --room a folder of PDF or Word files")
    if limit and limit < len(files):
        files = sorted(random.Random(seed).sample(files, limit))
    return files


def _stats(values: list[float], digits: int = 1) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "mean": round(statistics.fmean(ordered), digits),
        "p50": round(statistics.median(ordered), digits),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], digits),
        "max": round(ordered[-1], digits),
        "total": round(sum(ordered), digits),
    }


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure_store(home: Path, fingerprint: str) -> list[dict[str, Any]]:
    """Returns one record per stored document: pages, sections, passages and the bytes of its index files."""
    out = []
    for doc_dir in sorted((home / "docs").iterdir()):
        index = doc_dir / f"index-{fingerprint}"
        if not index.is_dir():
            continue
        document = json.loads((index / "document.json").read_text(encoding="utf-8"))
        passages = json.loads((index / "passages.json").read_text(encoding="utf-8"))
        sizes = {name: (index / name).stat().st_size for name in INDEX_FILES}
        out.append(
            {
                "pages": len(document["pages"]),
                "sections": len(document["sections"]),
                "passages": len(passages),
                "index_bytes": sum(sizes.values()),
                **{f"{name}_bytes": size for name, size in sizes.items()},
                "source_bytes": sum(f.stat().st_size for f in doc_dir.glob("source.*")),
                "extraction_bytes": sum(f.stat().st_size for f in doc_dir.glob("extract-*.json")),
                "folder_bytes": _folder_bytes(doc_dir),
            }
        )
    return out


def record_cost(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), repeats: int = 5) -> dict[str, Any]:
    """Returns the median time of adding one member to a collection record of each size, and the record's size."""
    import hashlib

    from docpipe.storage.collections import CollectionStore, Member

    root = Path(tempfile.mkdtemp(prefix="docpipe-corpus-records-"))
    out: dict[str, Any] = {}
    try:
        records = CollectionStore(root)
        count = 0

        def member(i: int) -> Member:
            return Member(
                hashlib.sha256(str(i).encode()).hexdigest(), f"CONTRACT_{i:06d}_EX-10.1_SUPPLY_AGREEMENT.pdf", pages=19
            )

        for size in sizes:
            while count < size:  # filled in bulk: only the one-member adds below are timed
                step = min(5000, size - count)
                records.add("x", [member(i) for i in range(count, count + step)])
                count += step
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                records.add("x", [member(count)])
                times.append(time.perf_counter() - started)
                count += 1
            out[str(size)] = {
                "one_add_ms": round(1000 * statistics.median(times), 1),
                "record_bytes": (root / "x" / "collection.json").stat().st_size,
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--room", type=Path, default=ROOM, help="a folder of contracts (default: ../shared/eval/cuad-collection-dev)"
    )
    parser.add_argument("--contracts", type=int, help="a seeded sample of this many contracts (default: all 231)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)

    from docpipe import DocPipe, Settings

    files = _files(args.room, args.contracts, args.seed)
    home = Path(tempfile.mkdtemp(prefix="docpipe-corpus-sizes-"))
    load_start = os.getloadavg()
    try:
        dp = DocPipe(Settings(home=home))
        coll = dp.collection("x")
        started = time.perf_counter()
        report = coll.add(files)
        add_s = time.perf_counter() - started
        started = time.perf_counter()
        dp.search(coll, "Which law governs the agreement?")  # names no contract: builds the pooled index
        pooled_s = time.perf_counter() - started
        docs = measure_store(home, dp.fingerprint)
        collection_dir = next((home / "collections").glob("*/index-*"), None)
        collection_bytes = _folder_bytes(collection_dir) if collection_dir else 0
        dim = int(dp.embedder.dim) if hasattr(dp.embedder, "dim") else None
        backend = dp.settings.embedding.vector_backend()
        model = dp.settings.embedding.model
    finally:
        shutil.rmtree(home, ignore_errors=True)

    records = record_cost()
    pages = sum(d["pages"] for d in docs)
    passages = sum(d["passages"] for d in docs)
    result = {
        "benchmark": "corpus_sizes",
        "command": "python benchmarks/corpus_sizes.py"
        + (f" --contracts {args.contracts} --seed {args.seed}" if args.contracts else "")
        + " --out docs/benchmarks/corpus_sizes.json",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in load_start],
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "data": ("../shared/eval/cuad-collection-dev" if args.room == ROOM else args.room.name)
        + (f" (seeded sample, seed {args.seed})" if args.contracts else ""),
        "settings": "defaults (Settings(home=tmp))",
        "embedder": {"model": model, "backend": backend, "dim": dim},
        "contracts": len(files),
        "ingested": len(docs),
        "failed": [{"file": name, "reason": reason} for name, reason in report.failed],
        "per_contract": {
            "pages": _stats([d["pages"] for d in docs]),
            "sections": _stats([d["sections"] for d in docs]),
            "passages": _stats([d["passages"] for d in docs]),
            "passages_per_page": round(passages / pages, 2),
            "index_bytes": _stats([d["index_bytes"] for d in docs], 0),
            **{f"{name}_bytes": _stats([d[f"{name}_bytes"] for d in docs], 0) for name in INDEX_FILES},
            "source_bytes": _stats([d["source_bytes"] for d in docs], 0),
            "extraction_bytes": _stats([d["extraction_bytes"] for d in docs], 0),
            "store_folder_bytes": _stats([d["folder_bytes"] for d in docs], 0),
            "dense_faiss_bytes_per_passage": round(sum(d["dense.faiss_bytes"] for d in docs) / passages, 1),
        },
        "collection_index": {
            "what": "the collection's own index folder: routing cards, pooled FAISS and BM25 over every passage",
            "bytes": collection_bytes,
            "bytes_per_contract": round(collection_bytes / max(1, len(docs))),
            "first_question_s": round(pooled_s, 1),
        },
        "member_record": {
            "what": "CollectionStore.add of one member into a collection record of this many members (the "
            "driver does one per finished file): read, append, rewrite collection.json under its lock",
            "sizes": records,
        },
        "ingestion": {
            "seconds": round(add_s, 1),
            "pages_per_s": round(pages / add_s, 2),
            "contracts_per_s": round(len(docs) / add_s, 3),
            "note": "one Collection.add with the default settings (extraction.max_concurrent workers, one "
            "embedder); embedder load included",
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if not report.failed else 1


if __name__ == "__main__":
    sys.exit(main())
