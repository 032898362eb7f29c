"""OCR engines compared on our pages: Tesseract (Debian's tesseract-ocr 5 through pytesseract) against RapidOCR
(PyPI's rapidocr, PP-OCR ONNX models bundled in the wheel, on onnxruntime), side by side in one run.

    .venv/bin/pip install rapidocr onnxruntime      # the candidate not chosen: not in any extra
    .venv/bin/python benchmarks/ocr_engines.py      # writes benchmarks/results/ocr_engines.json

The pages: every page of samples/master_services_agreement.pdf and 10 pages of the CUAD dev contracts (the
second page of the first 10 contracts, by name, whose second page has a text layer of at least 1,000 characters;
read in place). Each page is rendered with pypdfium2 at 150 and 300 dpi and read by each engine with one
thread (OMP_THREAD_LIMIT=1 for tesseract, one intra/inter-op thread for onnxruntime). Accuracy is the character
error rate (Levenshtein distance / reference length) of the OCR text against the page's own text layer
(pypdfium2), both with runs of whitespace collapsed to one space; seconds per page are wall-clock for the
engine call alone (the render is the same for both). Engines run in alternating order from page to page so that
machine noise falls on both alike.
The committed copy (docs/benchmarks/) adds the conclusions drawn from the numbers as "notes".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # tesseract's own OpenMP threads: one, as in the comparison

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

import numpy as np

SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
DEFAULT_PDF_DIR = ROOT.parent / "shared" / "eval" / "cuad-dev" / "pdf"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "ocr_engines.json"
DPIS = (150, 300)
ENGINES = ("tesseract", "rapidocr")


def normalise(text: str) -> str:
    return " ".join(text.split())


def levenshtein(a: str, b: str) -> int:
    """Returns the edit distance of `a` and `b` (one NumPy row at a time: insertions by a running minimum)."""
    if not a or not b:
        return max(len(a), len(b))
    bb = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    offsets = np.arange(len(b) + 1, dtype=np.int64)
    row = offsets.copy()
    for i, char in enumerate(a, 1):
        cost = (bb != ord(char)).astype(np.int64)
        new = np.empty_like(row)
        new[0] = i
        new[1:] = np.minimum(row[1:] + 1, row[:-1] + cost)
        # new[j] = min(new[j], new[j-1] + 1) for all j: a running minimum of new[k] - k, plus j
        new = np.minimum.accumulate(new - offsets) + offsets
        row = new
    return int(row[-1])


def cer(ocr: str, reference: str) -> float:
    reference, ocr = normalise(reference), normalise(ocr)
    return levenshtein(ocr, reference) / max(1, len(reference))


def pick_pages(pdf_dir: Path, count: int) -> list[tuple[Path, int]]:
    """Returns (file, 0-based page) for the second page of the first `count` contracts with enough text there."""
    import pypdfium2 as pdfium

    picked = []
    for path in sorted(pdf_dir.glob("*.pdf")):
        doc = pdfium.PdfDocument(path)
        try:
            if len(doc) < 2:
                continue
            textpage = doc[1].get_textpage()
            if len(normalise(textpage.get_text_range())) >= 1000:
                picked.append((path, 1))
        finally:
            doc.close()
        if len(picked) == count:
            break
    return picked


def render(path: Path, index: int, dpi: int) -> tuple[Any, str]:
    """Returns the page rendered to a greyscale PIL image at `dpi`, and its text layer."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(path)
    try:
        page = doc[index]
        text = page.get_textpage().get_text_range().replace("\ufffe", "-")
        image = page.render(scale=dpi / 72, grayscale=True).to_pil()
        return image, text
    finally:
        doc.close()


class Tesseract:
    name = "tesseract"

    def __init__(self) -> None:
        import pytesseract

        self.pytesseract = pytesseract
        out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, check=True)
        self.version = out.stdout.splitlines()[0]

    def read(self, image: Any) -> tuple[str, float]:
        data = self.pytesseract.image_to_data(image, lang="eng", output_type=self.pytesseract.Output.DICT)
        lines: dict[tuple[int, int, int], list[str]] = {}
        confidences = []
        for text, conf, block, par, line in zip(
            data["text"], data["conf"], data["block_num"], data["par_num"], data["line_num"]
        ):
            if text.strip():
                lines.setdefault((block, par, line), []).append(text)
                confidences.append(float(conf) / 100)
        text = "\n".join(" ".join(words) for words in lines.values())
        return text, statistics.fmean(confidences) if confidences else 0.0


class Rapid:
    name = "rapidocr"

    def __init__(self) -> None:
        from rapidocr import RapidOCR

        self.engine = RapidOCR(
            params={
                "Global.log_level": "error",
                "EngineConfig.onnxruntime.intra_op_num_threads": 1,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )
        self.version = f"rapidocr {version('rapidocr')}, onnxruntime {version('onnxruntime')}"

    def read(self, image: Any) -> tuple[str, float]:
        result = self.engine(np.array(image.convert("RGB")))
        texts = list(result.txts or ())
        scores = list(result.scores or ())
        return "\n".join(texts), statistics.fmean(scores) if scores else 0.0


def install_weight(distributions: list[str]) -> float:
    """Returns the installed size in MB of the given distributions' files."""
    from importlib.metadata import distribution

    total = 0
    for name in distributions:
        for file in distribution(name).files or ():
            located = Path(str(file.locate()))
            if located.is_file():
                total += located.stat().st_size
    return round(total / 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdf-dir", type=Path, default=DEFAULT_PDF_DIR)
    parser.add_argument("--cuad-pages", type=int, default=10)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    engines = {"tesseract": Tesseract(), "rapidocr": Rapid()}
    pages = [(SAMPLE, index) for index in range(15)] + pick_pages(args.pdf_dir, args.cuad_pages)
    rows = []
    for number, (path, index) in enumerate(pages):
        for dpi in DPIS:
            image, reference = render(path, index, dpi)
            order = ENGINES if number % 2 == 0 else tuple(reversed(ENGINES))
            for name in order:
                started = time.perf_counter()
                text, confidence = engines[name].read(image)
                seconds = time.perf_counter() - started
                row = {
                    "source": "sample" if path == SAMPLE else "cuad-dev",
                    "file": path.name,
                    "page": index + 1,
                    "dpi": dpi,
                    "engine": name,
                    "reference_chars": len(normalise(reference)),
                    "cer": round(cer(text, reference), 4),
                    "confidence": round(confidence, 3),
                    "seconds": round(seconds, 2),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)

    summary: dict[str, Any] = {}
    for name in ENGINES:
        for dpi in DPIS:
            for source in ("sample", "cuad-dev", "all"):
                chosen = [r for r in rows if r["engine"] == name and r["dpi"] == dpi and source in ("all", r["source"])]
                errors = sum(r["cer"] * r["reference_chars"] for r in chosen)
                summary[f"{name} {dpi}dpi {source}"] = {
                    "pages": len(chosen),
                    "cer": round(errors / sum(r["reference_chars"] for r in chosen), 4),
                    "median_page_cer": round(statistics.median(r["cer"] for r in chosen), 4),
                    "seconds_per_page": round(statistics.fmean(r["seconds"] for r in chosen), 2),
                    "mean_confidence": round(statistics.fmean(r["confidence"] for r in chosen), 3),
                }
    result = {
        "benchmark": "ocr_engines",
        "what": "character error rate of OCR text against the text layer of the same pages, and seconds per page",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "threads": "one per engine: OMP_THREAD_LIMIT=1 (tesseract), onnxruntime intra/inter-op 1 (rapidocr)",
        "versions": {name: engine.version for name, engine in engines.items()},
        "install_mb": {
            "tesseract": "pytesseract "
            f"{install_weight(['pytesseract'])} MB + Debian tesseract-ocr, tesseract-ocr-eng (about 35 MB installed)",
            "rapidocr": f"{install_weight(['rapidocr', 'onnxruntime', 'shapely', 'pyclipper', 'omegaconf'])} MB "
            "(rapidocr with its ONNX models, onnxruntime, shapely, pyclipper, omegaconf)",
        },
        "pages": [f"{'sample' if p == SAMPLE else p.name} p.{i + 1}" for p, i in pages],
        "summary": summary,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
