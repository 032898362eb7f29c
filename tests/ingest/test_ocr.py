"""OCR of the pages that need it, with the real engine (Debian's tesseract through pytesseract) on real files.

The scanned fixtures are made here from the project's own sample: its pages rendered by pypdfium2 at 200 dpi,
given noise and a slight skew, one turned 90 and one 180 degrees, saved by PIL as an image-only PDF. Without
tesseract these tests skip, naming the packages; under `make test` (DOCPIPE_REQUIRE_SYSTEM_TOOLS=1) they fail.
"""

from __future__ import annotations

import io
import json
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import EVAL, require_tool

from docpipe import DocPipe, NoTextError, Settings
from docpipe.ingest.extract import extract_pages
from docpipe.settings import ExtractionSettings
from docpipe.types import Page, PageStatus

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
BAD = EVAL / "bad-pdfs"
KEY_QUESTION = "What is the notice period for termination for convenience?"
DPI = 200
# Pages of the sample turned in the scan (degrees counter-clockwise, as PIL turns them).
TURNED = {2: 90, 12: 180}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def tesseract() -> str:
    """Returns the tesseract program; skips (fails under make test) without it, its English data or pytesseract."""
    install = "sudo apt-get install -y tesseract-ocr tesseract-ocr-eng; pip install 'docpipe-contracts[ocr]'"
    program = shutil.which("tesseract")
    if program is None:
        require_tool("tesseract", install=install)
    try:
        import pytesseract
    except ImportError:
        require_tool("pytesseract", install=install)
    if "eng" not in pytesseract.get_languages():
        require_tool("tesseract's English data", install=install)
    return program


def scanned_page(number: int, *, seed: int, turn: int = 0, skew: float = 0.4) -> Any:
    """Returns page `number` of the sample as a scan: rendered at DPI, skewed, noisy, turned `turn` degrees."""
    import numpy as np
    import pypdfium2 as pdfium
    from PIL import Image

    doc = pdfium.PdfDocument(SAMPLE)
    try:
        image = doc[number - 1].render(scale=DPI / 72, grayscale=True).to_pil()
    finally:
        doc.close()
    image = image.rotate(skew, resample=Image.Resampling.BILINEAR, fillcolor=255)
    pixels = np.asarray(image, dtype=np.float32)
    rng = np.random.default_rng(seed)
    pixels += rng.normal(0, 12, pixels.shape)
    speckles = rng.random(pixels.shape) < 0.0005
    pixels[speckles] = 0
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    return image.rotate(turn, expand=True) if turn else image


def image_pdf(images: list[Any]) -> bytes:
    """Returns an image-only PDF of `images`, one page each (no text layer)."""
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=DPI)
    return out.getvalue()


def mixed_pdf(scans: dict[int, bytes]) -> bytes:
    """Returns the sample's first four pages with text layers, the pages in `scans` replaced by those image PDFs."""
    import pypdf

    writer = pypdf.PdfWriter()
    sample = pypdf.PdfReader(SAMPLE)
    for number in range(1, 5):
        source = pypdf.PdfReader(io.BytesIO(scans[number])) if number in scans else None
        writer.add_page(source.pages[0] if source else sample.pages[number - 1])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def counting_tesseract(tmp_path: Path, program: str) -> tuple[str, Path]:
    """Returns a tesseract program that appends a line to a log per run, and the log."""
    log = tmp_path / "tesseract-calls.log"
    script = tmp_path / "tesseract"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{program}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


def calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture(scope="module")
def scan() -> bytes:
    images = [scanned_page(n, seed=n, turn=TURNED.get(n, 0)) for n in range(1, 16)]
    return image_pdf(images)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory, scan: bytes, tesseract: str) -> tuple[DocPipe, Any, Path]:
    """Returns a DocPipe whose tesseract counts its runs, the scanned sample ingested by it, and the count's log."""
    home = tmp_path_factory.mktemp("ocr-home")
    program, log = counting_tesseract(tmp_path_factory.mktemp("ocr-bin"), tesseract)
    path = home / "scanned_msa.pdf"
    path.write_bytes(scan)
    dp = DocPipe(Settings.preset("test", home=home, extraction={"ocr_command": program, "timeout_s": 900}))
    return dp, dp.ingest(path), log


def test_every_scanned_page_is_read_by_ocr_with_its_confidence_and_word_boxes(scanned) -> None:
    _dp, doc, _log = scanned
    assert [page.status for page in doc.pages] == [PageStatus.OCR] * 15
    for page in doc.pages:
        assert page.confidence is not None and 0.8 <= page.confidence <= 1, page.describe()
        assert page.words and all(page.text[start:end].strip() for start, end, *_ in page.words)
        assert all(0 <= edge <= 1 for *_, left, top, right, bottom in page.words for edge in (left, top, right, bottom))
        starts = [start for start, *_ in page.words]
        assert starts == sorted(starts)  # reading order
    assert "ninety (90) days' prior written notice" in " ".join(doc.pages[8].text.split())
    assert doc.warnings[8].startswith("page 9: read by OCR, confidence 0.9")
    assert doc.sections and any("Termination for Convenience" in s.heading for s in doc.sections)


def test_the_termination_clause_is_cited_on_page_9_and_marked_as_read_by_ocr(scanned) -> None:
    dp, doc, _log = scanned
    answer = dp.ask(doc, KEY_QUESTION)
    # The test preset's hashing embedder scores 12.3 and 12.4 (both termination, both on page 9) within a hair
    # of each other on OCR text, so the clause is looked for among the quotes, not only first.
    quoted = [c for c in answer.citations if "ninety (90) days" in " ".join(c.quote.split())]
    assert quoted, [c.heading for c in answer.citations]
    best = quoted[0]
    assert best.verified and best.page_start == 9 and best.ocr
    assert "ninety (90) days" in answer.text and "p. 9" in answer.text


def test_the_page_view_marks_the_quote_on_the_scan_from_the_ocr_word_boxes(scanned) -> None:
    pytest.importorskip(
        "gradio", reason="the workbench's page view needs the ui extra: pip install 'docpipe-contracts[ui]'"
    )
    from docpipe.ui.pageview import show_citation

    dp, doc, _log = scanned
    best = dp.ask(doc, KEY_QUESTION).citations[0]
    view = show_citation(dp, doc, best)
    assert view.page == 9 and view.matched in ("quote", "highlight") and view.boxes
    assert "read by OCR" in view.caption
    # The marks sit on the words OCR placed: each box is one of the page's word boxes, in pixels.
    words = {(int(left * view.width), int(top * view.height)) for *_, left, top, _right, _bottom in doc.pages[8].words}
    assert all(any(abs(box[0] + 2 - x) <= 1 and abs(box[1] + 2 - y) <= 1 for x, y in words) for box in view.boxes)


def _text_layer_box(number: int, word: str) -> tuple[float, float, float, float]:
    """Returns the box of the first `word` on page `number` of the sample's text layer, as fractions from the top left."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(SAMPLE)
    try:
        page = doc[number - 1]
        width, height = page.get_size()
        textpage = page.get_textpage()
        found = textpage.search(word, match_case=True, match_whole_word=True).get_next()
        assert found, word
        boxes = [textpage.get_charbox(found[0] + i) for i in range(found[1])]
    finally:
        doc.close()
    left, bottom = min(b[0] for b in boxes), min(b[1] for b in boxes)
    right, top = max(b[2] for b in boxes), max(b[3] for b in boxes)
    return left / width, 1 - top / height, right / width, 1 - bottom / height


def _turned(box: tuple[float, float, float, float], turn: int) -> tuple[float, float, float, float]:
    """Returns where a box lands when its page is turned `turn` degrees counter-clockwise."""
    left, top, right, bottom = box
    if turn == 90:
        return top, 1 - right, bottom, 1 - left
    if turn == 180:
        return 1 - right, 1 - bottom, 1 - left, 1 - top
    return box


def _ocr_box(page: Page, word: str) -> tuple[float, float, float, float]:
    for start, end, *box in page.words:
        if page.text[start:end] == word:
            return tuple(box)  # type: ignore[return-value]
    raise AssertionError(f"{word!r} not read on page {page.number}")


@pytest.mark.parametrize(("number", "word"), [(2, "Agreement"), (12, "Precedence."), (9, "ninety")])
def test_turned_pages_are_read_upright_and_their_word_boxes_sit_on_the_page_as_shown(scanned, number, word) -> None:
    _dp, doc, _log = scanned
    page = doc.pages[number - 1]
    turn = TURNED.get(number, 0)
    assert (f"turned {turn} degrees clockwise to read" in page.detail) == bool(turn), page.detail
    expected = _turned(_text_layer_box(number, word), turn)
    found = _ocr_box(page, word)
    assert all(abs(a - b) < 0.02 for a, b in zip(found, expected)), (found, expected)


def test_a_second_ingest_of_the_same_bytes_does_not_run_ocr_again(scanned, scan: bytes, tmp_path: Path) -> None:
    dp, doc, log = scanned
    before = calls(log)
    assert before >= 15  # at least one tesseract run per page
    # Another DocPipe on the same store (a new process would be the same), the same bytes under another name.
    again = DocPipe(dp.settings)
    path = tmp_path / "same-bytes-other-name.pdf"
    path.write_bytes(scan)
    reloaded = again.ingest(path)
    assert calls(log) == before
    assert reloaded.id == doc.id and reloaded.pages == doc.pages


def test_a_mixed_pdf_reads_only_its_scanned_page_by_ocr(tesseract: str) -> None:
    data = mixed_pdf({3: image_pdf([scanned_page(3, seed=3)])})
    pages = extract_pages(data, settings=ExtractionSettings(), name="mixed.pdf")
    assert [page.status for page in pages] == [PageStatus.OK, PageStatus.OK, PageStatus.OCR, PageStatus.OK]
    assert pages[2].confidence and pages[2].words and '"Statement of Work"' in pages[2].text
    assert pages[0].confidence is None and not pages[0].words


def test_a_page_past_its_ocr_time_bound_keeps_no_text_and_says_why(tesseract: str) -> None:
    data = mixed_pdf({2: image_pdf([scanned_page(2, seed=2)])})
    started = time.monotonic()
    pages = extract_pages(data, settings=ExtractionSettings(ocr_page_timeout_s=0.05), name="slow.pdf")
    assert time.monotonic() - started < 30
    assert pages[1].status is PageStatus.NO_TEXT and pages[1].text == ""
    assert "OCR stopped at the page's time bound of 0.05 s" in pages[1].detail
    assert "DOCPIPE_EXTRACTION__OCR_PAGE_TIMEOUT_S" in pages[1].detail
    assert [page.status for page in pages if page.number != 2] == [PageStatus.OK] * 3


def test_without_the_engine_a_scan_says_exactly_what_to_install(tmp_path: Path) -> None:
    absent = str(tmp_path / "no-such-tesseract")
    settings = ExtractionSettings(ocr_command=absent)
    with pytest.raises(NoTextError) as raised:
        extract_pages(image_pdf([scanned_page(9, seed=9)]), settings=settings, name="scan.pdf")
    message = str(raised.value)
    assert "scan.pdf" in message and "apt-get install tesseract-ocr tesseract-ocr-eng" in message
    assert "pip install 'docpipe-contracts[ocr]'" in message
    # A mixed PDF still ingests: the scanned page is kept without text, its detail says how to read it.
    pages = extract_pages(mixed_pdf({2: image_pdf([scanned_page(2, seed=2)])}), settings=settings, name="m.pdf")
    assert pages[1].status is PageStatus.NO_TEXT and "apt-get install tesseract-ocr" in pages[1].detail
    assert [page.status for page in pages if page.number != 2] == [PageStatus.OK] * 3


def test_with_ocr_off_a_scan_raises_no_text_naming_the_ocr_install() -> None:
    with pytest.raises(NoTextError) as raised:
        extract_pages(image_pdf([scanned_page(1, seed=1)]), settings=ExtractionSettings(ocr="off"), name="s.pdf")
    assert "DOCPIPE_EXTRACTION__OCR=auto" in str(raised.value) and "tesseract-ocr" in str(raised.value)


def test_the_index_fingerprint_changes_only_when_ocr_can_change_the_text(tmp_path: Path) -> None:
    on = Settings.preset("test", home=tmp_path).index_fingerprint()
    off = Settings.preset("test", home=tmp_path, extraction={"ocr": "off"}).index_fingerprint()
    missing = Settings.preset("test", home=tmp_path, extraction={"ocr_command": str(tmp_path / "none")})
    other_dpi = Settings.preset("test", home=tmp_path, extraction={"ocr_dpi": 300}).index_fingerprint()
    assert on != off and missing.index_fingerprint() == off and other_dpi not in (on, off)
    # Settings that do not change the text leave it alone.
    same = Settings.preset("test", home=tmp_path, extraction={"ocr_page_timeout_s": 5, "ocr_min_confidence": 0.5})
    assert same.index_fingerprint() == on


def _bad_pdf_entries(category: str) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in (BAD / "index.jsonl").read_text().splitlines() if line.strip()]
    return [entry for entry in entries if entry["category"] == category]


def test_the_ccitt_image_only_file_is_read_by_ocr_and_says_it_holds_no_text() -> None:
    # Its one page is a 16 x 16-pixel bilevel picture (a smiley), 0.05 inch wide: OCR reads it and finds no text.
    (entry,) = _bad_pdf_entries("no-text-image-only")
    for extractor in ("pypdf", "pypdfium2"):
        with pytest.raises(NoTextError) as raised:
            extract_pages(
                (BAD / entry["file"]).read_bytes(), settings=ExtractionSettings(extractor=extractor), name=entry["file"]
            )
        assert "OCR gave none (OCR found no text on it)" in str(raised.value)


def test_a_scan_with_an_ocr_layer_keeps_its_layer_and_is_not_read_again() -> None:
    (entry,) = _bad_pdf_entries("scanned-with-ocr-layer")
    pages = extract_pages((BAD / entry["file"]).read_bytes(), settings=ExtractionSettings(), name=entry["file"])
    assert pages and all(page.status is PageStatus.OK and page.confidence is None for page in pages)


def test_a_document_stored_before_ocr_is_read_again_once_ocr_is_there(tmp_path: Path, tesseract: str) -> None:
    """Extraction records are kept by document and extractor: one made without OCR (its scanned page empty) is
    extracted again when OCR can now read that page, and kept after that."""
    data = mixed_pdf({3: image_pdf([scanned_page(3, seed=5)])})
    home = tmp_path / "home"
    before = DocPipe(Settings.preset("test", home=home, extraction={"ocr": "off"})).ingest(data, name="mixed.pdf")
    assert before.pages[2].status is PageStatus.NO_TEXT
    after = DocPipe(Settings.preset("test", home=home)).ingest(data, name="mixed.pdf")
    assert after.id == before.id and after.pages[2].status is PageStatus.OCR and after.pages[2].words
    log_program, log = counting_tesseract(tmp_path, tesseract)
    again = DocPipe(Settings.preset("test", home=home, extraction={"ocr_command": log_program})).ingest(data)
    assert again.pages[2].status is PageStatus.OCR and calls(log) == 0  # the new record is kept
