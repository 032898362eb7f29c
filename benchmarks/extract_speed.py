"""Extraction speed, pypdf against pypdfium2, on the CUAD dev contracts, side by side in one run.

    .venv/bin/python benchmarks/extract_speed.py      # writes benchmarks/results/extract_speed.json

Each contract goes through both extractors, in alternating order from one contract to the next, so that
warm caches and machine noise fall on both alike. Times are wall-clock per `extract_pages` call, the
worker process included, because that is what ingestion pays. The fixed cost of one call (worker start,
imports, reply) is measured separately on a one-page PDF.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from docpipe.errors import DocpipeError
from docpipe.ingest.extract import EXTRACTORS, extract_pages
from docpipe.settings import ExtractionSettings

DEFAULT_PDF_DIR = ROOT.parent / "shared" / "eval" / "cuad-dev" / "pdf"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "extract_speed.json"


def one_page_pdf() -> bytes:
    """Returns a minimal one-page PDF with one line of text, built by hand (no extra dependency)."""
    content = b"BT /F1 12 Tf 72 720 Td (Overhead probe) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        + b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer << /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def timed(data: bytes, extractor: str, timeout_s: float, name: str) -> dict[str, Any]:
    """Returns pages, characters and seconds of one extraction (or the error it raised)."""
    settings = ExtractionSettings(extractor=extractor, timeout_s=timeout_s)
    started = time.perf_counter()
    try:
        pages = extract_pages(data, settings=settings, name=name)
    except DocpipeError as exc:
        return {"seconds": time.perf_counter() - started, "error": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "pages": len(pages),
        "ok_pages": sum(page.ok for page in pages),
        "chars": sum(len(page.text) for page in pages),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf-dir", type=Path, default=DEFAULT_PDF_DIR)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=600.0, help="per-document bound, seconds")
    parser.add_argument("--overhead-runs", type=int, default=7)
    args = parser.parse_args()

    pdfs = sorted(args.pdf_dir.glob("*.pdf"))
    if not pdfs:
        print(f"no PDFs in {args.pdf_dir}: the CUAD dev set lives in ../shared/eval/cuad-dev/pdf", file=sys.stderr)
        return 2

    probe = one_page_pdf()
    overhead: dict[str, list[float]] = {extractor: [] for extractor in EXTRACTORS}
    for run in range(args.overhead_runs):
        for extractor in EXTRACTORS if run % 2 == 0 else EXTRACTORS[::-1]:
            overhead[extractor].append(timed(probe, extractor, args.timeout, "probe.pdf")["seconds"])

    rows = []
    for index, pdf in enumerate(pdfs):
        data = pdf.read_bytes()
        row: dict[str, Any] = {"file": pdf.name, "bytes": len(data)}
        for extractor in EXTRACTORS if index % 2 == 0 else EXTRACTORS[::-1]:
            row[extractor] = timed(data, extractor, args.timeout, pdf.name)
        rows.append(row)
        cells = "  ".join(f"{extractor} {row[extractor]['seconds']:6.2f} s" for extractor in EXTRACTORS)
        print(f"[{index + 1:2d}/{len(pdfs)}] {pdf.name[:60]:60s} {cells}", flush=True)

    totals = {}
    for extractor in EXTRACTORS:
        done = [row[extractor] for row in rows if "error" not in row[extractor]]
        seconds = sum(result["seconds"] for result in done)
        pages = sum(result["pages"] for result in done)
        totals[extractor] = {
            "documents": len(done),
            "errors": len(rows) - len(done),
            "pages": pages,
            "chars": sum(result["chars"] for result in done),
            "seconds": seconds,
            "pages_per_s": pages / seconds if seconds else 0.0,
            "overhead_s_median": statistics.median(overhead[extractor]),
        }
    slow, fast = EXTRACTORS
    ratio = totals[slow]["seconds"] / totals[fast]["seconds"] if totals[fast]["seconds"] else float("nan")
    per_doc = [
        row[slow]["seconds"] / row[fast]["seconds"]
        for row in rows
        if "error" not in row[slow] and "error" not in row[fast] and row[fast]["seconds"]
    ]

    print()
    print(f"{'file':52s} {'pages':>5s} {'pypdf s':>8s} {'pdfium s':>8s} {'ratio':>6s}")
    for row in rows:
        a, b = row[slow], row[fast]
        pages = a.get("pages", b.get("pages", 0))
        print(
            f"{row['file'][:52]:52s} {pages:5d} {a['seconds']:8.2f} {b['seconds']:8.2f} "
            f"{a['seconds'] / b['seconds']:6.1f}"
        )
    print()
    header = ("extractor", "docs", "errors", "pages", "seconds", "pages/s", "per-call overhead")
    print("{:10s} {:>4s} {:>6s} {:>6s} {:>8s} {:>8s} {:>18s}".format(*header))
    for extractor in EXTRACTORS:
        t = totals[extractor]
        print(
            f"{extractor:10s} {t['documents']:4d} {t['errors']:6d} {t['pages']:6d} {t['seconds']:8.2f} "
            f"{t['pages_per_s']:8.1f} {t['overhead_s_median']:16.3f} s"
        )
    median = statistics.median(per_doc) if per_doc else float("nan")
    print(f"\n{fast} is {ratio:.1f}x faster than {slow} overall (median per document {median:.1f}x)")

    result = {
        "benchmark": "extract_speed",
        "command": "python benchmarks/extract_speed.py",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "pypdf": version("pypdf"),
            "pypdfium2": version("pypdfium2"),
        },
        # Relative to the repository where possible: results must not carry this machine's paths.
        "pdf_dir": os.path.relpath(args.pdf_dir, ROOT),
        "timeout_s": args.timeout,
        "overhead_s": overhead,
        "totals": totals,
        "ratio_pypdf_over_pypdfium2_seconds": ratio,
        "ratio_median_per_document": median,
        "files": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
