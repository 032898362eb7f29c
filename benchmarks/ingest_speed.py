"""Ingest and ask timings on the longest cuad-dev contract (115 pages), pypdf and pypdfium2 side by side.

Run: .venv/bin/python benchmarks/ingest_speed.py   (writes benchmarks/results/ingest_speed.json)

Cold = empty store (extract + section + embed + index); warm = a new DocPipe on the same store (nothing
re-extracted or re-embedded); re-ask = the same question again in the same process; CLI = a whole
`docpipe ask` process on a warm store (dominated by importing torch and loading the embedder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PDF = (
    ROOT.parent
    / "shared"
    / "eval"
    / "cuad-dev"
    / "pdf"
    / "GOOSEHEADINSURANCE_INC_04_02_2018-EX-10.6-Franchise_Agreement.pdf"
)
QUESTION = "Under what conditions may the franchisor terminate this agreement?"


def main() -> None:
    from docpipe import DocPipe, Settings
    from docpipe.embed.base import load_embedder
    from docpipe.ingest.extract import extract_pages

    if not PDF.exists():
        sys.exit(f"missing {PDF}: the benchmark reads ../shared/eval in place")
    t0 = time.perf_counter()
    embedder = load_embedder(Settings().embedding)
    # Bulk embedding runs on torch; load it up front so neither extractor's cold run pays for it.
    embedder.embed(["warm-up"] * (embedder.NUMPY_BATCH_LIMIT + 1))
    load_s = time.perf_counter() - t0
    results: dict = {"pdf": PDF.name, "embedder_load_s": round(load_s, 2), "runs": {}}
    for extractor in ("pypdf", "pypdfium2"):
        home = Path(tempfile.mkdtemp(prefix=f"docpipe-bench-{extractor}-"))
        settings = Settings(home=home, extraction={"extractor": extractor})
        dp = DocPipe(settings, embedder=embedder)
        t = time.perf_counter()
        doc = dp.ingest(PDF)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        extract_pages(PDF.read_bytes(), settings=settings.extraction, name=PDF.name)
        extract_only = time.perf_counter() - t
        t = time.perf_counter()
        DocPipe(settings, embedder=embedder).ingest(PDF)
        warm = time.perf_counter() - t
        dp2 = DocPipe(settings, embedder=embedder)
        t = time.perf_counter()
        dp2.ask(PDF, QUESTION)
        first_ask = time.perf_counter() - t
        t = time.perf_counter()
        dp2.ask(PDF, QUESTION)
        reask = time.perf_counter() - t
        env = {**os.environ, "DOCPIPE_HOME": str(home)}
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "docpipe", "ask", str(PDF), QUESTION, "--extractor", extractor],
            check=True,
            capture_output=True,
            env=env,
        )
        cli = time.perf_counter() - t
        results["runs"][extractor] = {
            "pages": len(doc.pages),
            "sections": len(doc.sections),
            "cold_ingest_s": round(cold, 2),
            "extraction_alone_s": round(extract_only, 2),
            "warm_ingest_s": round(warm, 3),
            "first_ask_warm_store_s": round(first_ask, 3),
            "reask_s": round(reask, 3),
            "cli_ask_process_warm_store_s": round(cli, 2),
        }
    runs = results["runs"]
    results["cold_ratio_pypdf_over_pypdfium2"] = round(
        runs["pypdf"]["cold_ingest_s"] / runs["pypdfium2"]["cold_ingest_s"], 2
    )
    out = ROOT / "benchmarks" / "results" / "ingest_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"embedder load {load_s:.1f} s")
    print(f"{'extractor':<11}{'cold':>8}{'extract':>9}{'warm':>8}{'1st ask':>9}{'re-ask':>8}{'CLI ask':>9}")
    for name, r in runs.items():
        print(
            f"{name:<11}{r['cold_ingest_s']:>7.2f}s{r['extraction_alone_s']:>8.2f}s{r['warm_ingest_s']:>7.3f}s"
            f"{r['first_ask_warm_store_s']:>8.3f}s{r['reask_s']:>7.3f}s{r['cli_ask_process_warm_store_s']:>8.2f}s"
        )
    print(f"cold ingest pypdf / pypdfium2: {results['cold_ratio_pypdf_over_pypdfium2']}x")


if __name__ == "__main__":
    main()
