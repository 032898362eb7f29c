"""Inside the extraction worker: OCR of the pages that need it, with Tesseract.

A page needs OCR when its text layer holds no letter, or almost none (fewer than `ALMOST_NO_LETTERS`) while
images cover at least half of it: a scan with a stamped page number. Both bounds were measured: across the 20
CUAD dev contracts, the sample and the bad-PDF collection, the only pages they select are the image-only CCITT
scan, and the fewest letters on a page that is mostly image but has a real text layer is 1,411 (an OCR'd scan);
the figure pages of a pipeline contract (47-83 letters) are under a third image and keep their text.

The page is rendered by pypdfium2 as the user sees it (its /Rotate applied) at ``ocr_dpi``; Tesseract's
orientation detection (``--psm 0``, the osd traineddata that Debian's tesseract-ocr depends on) says whether it
lies at 90, 180 or 270 degrees, the upright image is read, and every word's box is mapped back onto the page as
rendered. Tesseract was chosen by measurement (benchmarks/ocr_engines.py, docs/benchmarks/ocr_engines.json).
Each page gets ``ocr_page_timeout_s`` and never more than what is left of the document's time bound: the
tesseract process is killed at the limit, and the page keeps status ``no_text_layer`` with the reason. The
tesseract child inherits the worker's memory cap.
"""

from __future__ import annotations

import logging
import os
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

from docpipe.errors import DependencyError

logger = logging.getLogger(__name__)

ENGINE = "tesseract"
INSTALL = (
    "apt-get install tesseract-ocr tesseract-ocr-eng (the engine; brew install tesseract on macOS) and "
    "pip install 'docpipe-contracts[ocr]' (pytesseract)"
)
ALMOST_NO_LETTERS = 50
MIN_IMAGE_COVER = 0.5
# A rendered page larger than this is drawn at a lower resolution (a poster-sized page at 300 dpi is gigapixels).
_MAX_PIXELS = 40_000_000
_OSD_DPI = 150
# Below this, Tesseract's orientation guess is noise (it reports 25-35 on a clear page of text in any of the 4).
_MIN_OSD_CONFIDENCE = 3.0
# What orientation detection needs: a page with fewer characters than this is read as it lies.
_OSD_FAILED = re.compile(r"Too few characters|Invalid resolution|Estimating resolution", re.I)


@dataclass(frozen=True)
class OcrOptions:
    """What the worker needs to OCR pages: passed from `ExtractionSettings` as plain data (see `as_request`)."""

    dpi: int
    page_timeout_s: float
    min_confidence: float
    command: str = "tesseract"
    # time.monotonic() by which the whole document must be done (the clock is shared by the caller and worker)
    deadline: float = float("inf")

    def as_request(self) -> dict[str, Any]:
        return {
            "dpi": self.dpi,
            "page_timeout_s": self.page_timeout_s,
            "min_confidence": self.min_confidence,
            "command": self.command,
            "deadline": self.deadline,
        }


@dataclass(frozen=True)
class OcrPage:
    """One page read by OCR: its text, the mean word confidence (0-1), each word's (start, end, left, top,
    right, bottom) as in `docpipe.types.Page.words` (on the page as rendered), and how far (degrees
    counter-clockwise: 0, 90, 180 or 270) the rendered page was turned to read it upright."""

    text: str
    confidence: float | None
    words: tuple[tuple[int, int, float, float, float, float], ...]
    rotation: int


class OcrTimeout(Exception):
    """Raised when a page's OCR passes its time bound; the message is the page's detail."""


class DocumentOcr:
    """OCR for the pages of one document that need it, inside the worker. pypdfium2 (for the render and the
    image cover) and the engine are opened at the first page with too few letters, and a missing engine is
    found once: `read` then raises the same `DependencyError` for every page."""

    def __init__(self, data: bytes, password: str | None, options: OcrOptions, doc: Any = None) -> None:
        self.data, self.password, self.options = data, password, options
        self._doc = doc
        self._own_doc = doc is None
        self._reader: PageReader | None = None
        self._missing: DependencyError | None = None
        self.calls = 0

    def wanted(self, index: int, text: str) -> bool:
        """Returns whether page `index`, whose text layer is `text`, should be read by OCR."""
        count = letters(text)
        if count >= ALMOST_NO_LETTERS:
            return False
        self._open_doc()
        if count == 0:
            return _draws_anything(self._doc, index)  # a truly blank page is not worth a render
        return needs_ocr(text, _image_cover(self._doc, index))

    def read(self, index: int) -> OcrPage:
        """Returns page `index` read by OCR; raises `DependencyError` (no engine) or `OcrTimeout`."""
        if self._missing is not None:
            raise self._missing
        if self._reader is None:
            self._open_doc()
            try:
                self._reader = PageReader(self._doc, self.options)
            except DependencyError as exc:
                self._missing = exc
                raise
        self.calls += 1
        return self._reader.read(index)

    def _open_doc(self) -> None:
        if self._doc is None:
            import pypdfium2 as pdfium

            try:
                self._doc = pdfium.PdfDocument(self.data, password=self.password or None)
            except pdfium.PdfiumError:
                self._doc = pdfium.PdfDocument(self.data)  # the password was the owner's, or not needed

    def close(self) -> None:
        if self._own_doc and self._doc is not None:
            self._doc.close()


def letters(text: str) -> int:
    return sum(char.isalpha() for char in text)


def needs_ocr(text: str, image_cover: float | None) -> bool:
    """Returns whether a page with this text layer should be read by OCR; `image_cover` (the share of the page
    under images, 0-1) is needed only when the page has a few letters (None: not measured)."""
    count = letters(text)
    if count == 0:
        return True
    return count < ALMOST_NO_LETTERS and image_cover is not None and image_cover >= MIN_IMAGE_COVER


def missing_engine(command: str, reason: str) -> DependencyError:
    return DependencyError(
        f"OCR needs Tesseract, which is not available ({reason}): {INSTALL}",
        engine=ENGINE,
        command=command,
    )


class PageReader:
    """Reads pages of one open pypdfium2 document by OCR. Opening checks the engine (`DependencyError` with the
    install line when it is missing); `read` takes a 0-based page index."""

    def __init__(self, doc: Any, options: OcrOptions) -> None:
        try:
            import pytesseract
        except ImportError as exc:
            raise missing_engine(options.command, f"pytesseract: {exc}") from None
        self.doc = doc
        self.options = options
        self.tesseract = pytesseract
        pytesseract.pytesseract.tesseract_cmd = options.command
        try:
            languages = pytesseract.get_languages()
        except (pytesseract.TesseractNotFoundError, OSError) as exc:
            raise missing_engine(options.command, f"no program {options.command!r}: {exc}") from None
        except pytesseract.TesseractError as exc:
            raise missing_engine(options.command, f"{options.command} failed: {exc}") from None
        if "eng" not in languages:
            raise missing_engine(options.command, "its English language data (tesseract-ocr-eng) is missing")
        self.osd = "osd" in languages
        if not self.osd:
            logger.warning(
                "Tesseract's osd data is missing: rotated scans are read as they lie (install tesseract-ocr-osd)"
            )
        # One thread per tesseract process: the worker already runs beside other extractions on a shared CPU.
        os.environ.setdefault("OMP_THREAD_LIMIT", "1")

    def read(self, index: int) -> OcrPage:
        """Returns the OCR of page `index`; raises `OcrTimeout` past the page's (or the document's) time bound."""
        started = time.monotonic()
        end = min(started + self.options.page_timeout_s, self.options.deadline)
        if end - started <= 0:
            raise OcrTimeout(
                "not read by OCR: the document's time bound was reached (raise DOCPIPE_EXTRACTION__TIMEOUT_S)"
            )
        image = self._render(index)
        rotation = self._orientation(image, end) if self.osd else 0
        upright = image.rotate(rotation, expand=True) if rotation else image  # PIL turns counter-clockwise
        data = self._call(
            self.tesseract.image_to_data,
            upright,
            end,
            lang="eng",
            config="--psm 3",
            output_type=self.tesseract.Output.DICT,
        )
        text, confidence, boxes = _assemble(data, upright.width, upright.height)
        words = tuple((start, stop, *_unrotate(box, rotation)) for start, stop, box in boxes)
        logger.debug(
            "page %s read by OCR in %.2f s (rotation %s, %s words)",
            index + 1,
            time.monotonic() - started,
            rotation,
            len(words),
        )
        return OcrPage(text, confidence, words, rotation)

    def _render(self, index: int) -> Any:
        page = self.doc[index]
        try:
            width, height = page.get_size()
            scale = self.options.dpi / 72
            pixels = width * height * scale * scale
            if pixels > _MAX_PIXELS:
                scale *= (_MAX_PIXELS / pixels) ** 0.5
            return page.render(scale=scale, grayscale=True).to_pil()
        finally:
            page.close()

    def _orientation(self, image: Any, end: float) -> int:
        """Returns how far (degrees counter-clockwise: 0, 90, 180, 270) to turn `image` to read it upright; 0
        when Tesseract is unsure. Detected on a render of about 150 dpi: as sure as at 300, in half the time."""
        factor = self.options.dpi // _OSD_DPI
        small = image.reduce(factor) if factor > 1 else image
        try:
            osd = self._call(self.tesseract.image_to_osd, small, end, config="--psm 0")
        except self.tesseract.TesseractError as exc:
            if not _OSD_FAILED.search(str(exc)):
                logger.debug("orientation detection failed: %s", exc)
            return 0
        # "Rotate: 90" means turn it 90 degrees clockwise.
        match = re.search(r"Rotate:\s*(\d+)", osd)
        confidence = re.search(r"Orientation confidence:\s*([\d.]+)", osd)
        if not match or not confidence or float(confidence.group(1)) < _MIN_OSD_CONFIDENCE:
            return 0
        return (360 - int(match.group(1))) % 360

    def _call(self, function: Any, image: Any, end: float, **kwargs: Any) -> Any:
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise OcrTimeout(self._timeout_detail(end))
        # pytesseract hands the image over in a file of this format: BMP is written in a tenth of PNG's time.
        image.format = "BMP"
        try:
            return function(image, timeout=remaining, **kwargs)
        except RuntimeError as exc:
            if "timeout" in str(exc).lower():
                raise OcrTimeout(self._timeout_detail(end)) from None
            raise

    def _timeout_detail(self, end: float) -> str:
        if end < self.options.deadline:
            return (
                f"OCR stopped at the page's time bound of {self.options.page_timeout_s:g} s "
                "(raise DOCPIPE_EXTRACTION__OCR_PAGE_TIMEOUT_S)"
            )
        return "OCR stopped at the document's time bound (raise DOCPIPE_EXTRACTION__TIMEOUT_S)"


def _draws_anything(doc: Any, index: int) -> bool:
    """Returns whether page `index` has any page object (image, path, text, shading or form) to render."""
    page = doc[index]
    try:
        return any(True for _ in page.get_objects(max_depth=1))
    finally:
        page.close()


def _image_cover(doc: Any, index: int) -> float:
    """Returns the share of page `index` covered by image objects (0-1; overlapping images count twice)."""
    import pypdfium2.raw as pdfium_c

    page = doc[index]
    try:
        width, height = page.get_size()
        if width <= 0 or height <= 0:
            return 0.0
        covered = 0.0
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=4):
            left, bottom, right, top = obj.get_bounds()
            covered += max(0.0, min(right, width) - max(left, 0.0)) * max(0.0, min(top, height) - max(bottom, 0.0))
        return min(1.0, covered / (width * height))
    finally:
        page.close()


def _assemble(
    data: dict[str, list[Any]], width: int, height: int
) -> tuple[str, float | None, list[tuple[int, int, tuple[float, float, float, float]]]]:
    """Returns the text (a line per Tesseract line, words joined by spaces), the mean word confidence (0-1) and
    each word's offsets and box (fractions of the image) from ``image_to_data`` output, in reading order."""
    parts: list[str] = []
    length = 0
    boxes: list[tuple[int, int, tuple[float, float, float, float]]] = []
    confidences: list[float] = []
    line_key = None
    for index, raw in enumerate(data["text"]):
        word = "".join(char for char in " ".join(str(raw).split()) if char.isprintable())
        if not word.strip():
            continue
        key = (data["block_num"][index], data["par_num"][index], data["line_num"][index])
        if parts:
            separator = " " if key == line_key else "\n"
            parts.append(separator)
            length += 1
        line_key = key
        left, top = data["left"][index], data["top"][index]
        right, bottom = left + data["width"][index], top + data["height"][index]
        boxes.append((length, length + len(word), (left / width, top / height, right / width, bottom / height)))
        parts.append(word)
        length += len(word)
        confidence = float(data["conf"][index])
        if confidence >= 0:
            confidences.append(confidence / 100)
    mean = round(statistics.fmean(confidences), 4) if confidences else None
    return "".join(parts), mean, boxes


def _unrotate(box: tuple[float, float, float, float], rotation: int) -> tuple[float, float, float, float]:
    """Returns a box (fractions) found on the upright image as a box on the page as rendered, the upright image
    being the rendered one turned `rotation` degrees counter-clockwise."""
    left, top, right, bottom = box
    if rotation == 90:
        left, top, right, bottom = 1 - bottom, left, 1 - top, right
    elif rotation == 180:
        left, top, right, bottom = 1 - right, 1 - bottom, 1 - left, 1 - top
    elif rotation == 270:
        left, top, right, bottom = top, 1 - right, bottom, 1 - left
    return (round(left, 5), round(top, 5), round(right, 5), round(bottom, 5))
