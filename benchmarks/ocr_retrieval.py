"""Retrieval on scans against the same contracts' text PDFs, and OCR's pages per second, side by side in one run.

    .venv/bin/python benchmarks/ocr_retrieval.py      # writes benchmarks/results/ocr_retrieval.json

Five CUAD dev contracts (the five with the fewest pages among those holding more than 35,000 characters, so a
4k-token context is a real choice) are rendered page by page to greyscale images at 200 dpi, as a scanner would,
and saved as image-only PDFs in a temporary CUAD-format folder (annotations.jsonl filtered to those contracts);
a second folder links the original text PDFs (read in place). `docpipe.eval.retrieval.evaluate_retrieval` runs
on both with the default settings (OCR auto, the offline MiniLM embedder) and reports recall within 4k tokens.

Throughput: the image-only PDFs are extracted with `extract_document` (the sandboxed worker, as ingestion does),
one at a time and then two at once (the machine's 2 cores), and OCR'd pages are divided by wall-clock seconds.
The committed copy (docs/benchmarks/) adds the conclusions drawn from the numbers as "notes".
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from docpipe import DocPipe, Settings
from docpipe.eval.retrieval import evaluate_retrieval
from docpipe.ingest.extract import extract_document
from docpipe.types import PageStatus

DEFAULT_CUAD = ROOT.parent / "shared" / "eval" / "cuad-dev"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "ocr_retrieval.json"
SCAN_DPI = 200
MIN_CHARS = 35_000
BUDGET = 4096


def pick_contracts(cuad: Path, count: int) -> list[str]:
    """Returns the `file` (pdf/...) of the `count` contracts with the fewest pages among those over MIN_CHARS."""
    with (cuad / "manifest.csv").open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["txt_chars"]) > MIN_CHARS]
    rows.sort(key=lambda row: (int(row["pdf_pages"]), row["file"]))
    return [row["file"] for row in rows[:count]]


def image_only(pdf: Path) -> bytes:
    """Returns `pdf` as a scan: every page rendered to a greyscale image at SCAN_DPI, saved as an image-only PDF."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        images = [doc[i].render(scale=SCAN_DPI / 72, grayscale=True).to_pil() for i in range(len(doc))]
    finally:
        doc.close()
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=SCAN_DPI)
    return out.getvalue()


def cuad_folder(folder: Path, cuad: Path, files: list[str], pdfs: dict[str, bytes] | None) -> Path:
    """Writes a CUAD-format folder: the annotations of `files`, and their PDFs (`pdfs`, else links to the originals)."""
    (folder / "pdf").mkdir(parents=True)
    wanted = set(files)
    with (cuad / "annotations.jsonl").open(encoding="utf-8") as source, (folder / "annotations.jsonl").open("w") as out:
        for line in source:
            if line.strip() and json.loads(line)["file"] in wanted:
                out.write(line)
    for file in files:
        if pdfs is None:
            (folder / file).symlink_to(cuad / file)
        else:
            (folder / file).write_bytes(pdfs[file])
    return folder


def throughput(pdfs: dict[str, bytes], workers: int) -> dict[str, Any]:
    """Returns OCR'd pages per wall-clock second extracting every PDF with `workers` extractions at once."""
    settings = Settings().extraction.model_copy(update={"timeout_s": 1800.0})

    def one(item: tuple[str, bytes]) -> tuple[int, int, list[float]]:
        pages = extract_document(item[1], settings=settings, name=Path(item[0]).name).pages
        ocr = [p for p in pages if p.status is PageStatus.OCR]
        return len(pages), len(ocr), [p.confidence or 0.0 for p in ocr]

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, sorted(pdfs.items())))
    seconds = time.perf_counter() - started
    pages = sum(r[0] for r in results)
    ocr = sum(r[1] for r in results)
    confidences = [c for r in results for c in r[2]]
    return {
        "extractions_at_once": workers,
        "pages": pages,
        "pages_read_by_ocr": ocr,
        "seconds": round(seconds, 1),
        "pages_per_second": round(ocr / seconds, 3),
        "mean_confidence": round(sum(confidences) / len(confidences), 3) if confidences else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuad", type=Path, default=DEFAULT_CUAD)
    parser.add_argument("--contracts", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    files = pick_contracts(args.cuad, args.contracts)
    started = time.perf_counter()
    scans = {file: image_only(args.cuad / file) for file in files}
    render_s = time.perf_counter() - started
    speed = [throughput(scans, 1), throughput(scans, 2)]

    with tempfile.TemporaryDirectory(prefix="ocr-retrieval-") as tmp:
        base = Path(tmp)
        reports = {}
        for label, pdfs in (("text_pdf", None), ("image_only", scans)):
            folder = cuad_folder(base / label, args.cuad, files, pdfs)
            settings = Settings(home=base / f"home-{label}", extraction={"timeout_s": 1800.0})
            dp = DocPipe(settings)
            report = evaluate_retrieval(dp, folder, budgets=[BUDGET], baseline=False)
            reports[label] = {
                "recall_within_4k_tokens": report["recall_at_budget"][str(BUDGET)],
                "pairs": report["pairs"],
                "findable_in_extracted_text": report["findable_in_extracted_text"],
                "contracts": [
                    {key: row[key] for key in ("file", "pages", "tokens", "sections", "ingest_s")}
                    for row in report["contract_stats"]
                ],
                "fingerprint": report["settings"]["fingerprint"],
            }
            print(label, json.dumps(reports[label]["recall_within_4k_tokens"]), flush=True)

    result = {
        "benchmark": "ocr_retrieval",
        "what": "recall within 4k tokens (eval-retrieval) on image-only renderings of CUAD contracts vs their text "
        "PDFs; OCR pages per second on this machine",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "contracts": [Path(file).name for file in files],
        "scan_dpi": SCAN_DPI,
        "render_seconds": round(render_s, 1),
        "ocr_settings": Settings().extraction.model_dump(include={"ocr", "ocr_dpi", "ocr_page_timeout_s"}),
        "throughput": speed,
        "retrieval": reports,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("throughput", "contracts")}, indent=2))


if __name__ == "__main__":
    main()
