"""The extraction stage's public functions, run in the caller's process: check the input, start a worker
(`docpipe.ingest.extract.worker`) and turn its reply into `Page` objects, an `EncryptionStatus`, or the
`DocpipeError` that says how to fix the document.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe.errors import (
    ConfigError,
    DependencyError,
    EmptyFileError,
    EncryptionCheckError,
    ExtractionError,
    NotAPDFError,
)
from docpipe.ingest.extract.encryption import EncryptionStatus, check_failed, check_reason
from docpipe.ingest.extract.ocr import OcrOptions
from docpipe.ingest.extract.worker import raise_worker_error, replay_worker_log, run_worker, worker_request
from docpipe.types import Page, PageStatus

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings

logger = logging.getLogger(__name__)

EXTRACTORS = ("pypdf", "pypdfium2")

# Readers (Acrobat included) accept a header anywhere in the first 1024 bytes; junk before it is common.
_HEADER_WINDOW = 1024

_KNOWN_FORMATS = (
    (b"PK\x03\x04", "a ZIP archive: a .docx, .xlsx or .odt?"),
    (b"\xd0\xcf\x11\xe0", "an old Office file: a .doc or .xls?"),
    (b"{\\rtf", "an RTF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"%!PS", "a PostScript file"),
)


@dataclass(frozen=True)
class Extraction:
    """The pages of a PDF and what opening it showed about its encryption (see `extract_document`)."""

    pages: list[Page]
    encryption: EncryptionStatus


def extract_pages(
    data: bytes,
    *,
    password: str | None = None,
    settings: ExtractionSettings | None = None,
    name: str = "document",
) -> list[Page]:
    """Returns the pages of the PDF in `data`, numbered from 1, each with its text and status.

    A page whose extraction fails is kept with status ``ERROR`` and the reason in ``detail``; a page
    without a usable text layer is read by OCR when ``settings.ocr`` allows and Tesseract is installed
    (status ``OCR``, with its confidence and word boxes), else it gets ``NO_TEXT`` with the reason. Filled form-field values are appended to the text of the page that
    shows them, as ``[form field] Name: value`` lines. `name` (usually the file name) is used in
    messages. Raises an `InputError` for empty or non-PDF bytes, and an `ExtractionError` subclass for
    encrypted, malformed, text-less, too-slow or too-large documents; the message always says how to fix it.
    """
    return extract_document(data, password=password, settings=settings, name=name).pages


def extract_document(
    data: bytes,
    *,
    password: str | None = None,
    settings: ExtractionSettings | None = None,
    name: str = "document",
) -> Extraction:
    """Returns the pages of the PDF in `data` (as `extract_pages` does) with its `EncryptionStatus`.

    The status comes from the same worker and the same parse that read the text: whether the PDF needed
    the password that opened it (``encryption.needs_password``) is known without parsing it again.
    Raises as `extract_pages` does; `TooMuchTextError` when the text passes ``max_page_chars`` on one
    page or ``max_chars`` in all.
    """
    settings = _checked_settings(settings)
    data = _checked_bytes(data, name, "extract_document")
    request = worker_request(data, password, name, settings, op="extract")
    started = time.monotonic()
    request["ocr"] = _ocr_request(settings, started)
    reply = run_worker(request, name=name, extractor=settings.extractor, timeout_s=settings.timeout_s)
    replay_worker_log(reply.get("log", []), reply.get("dropped", 0), name)
    if "error" in reply:
        raise_worker_error(reply["error"])

    pages = [_page(*row) for row in reply["pages"]]
    no_text = [page.number for page in pages if page.status is PageStatus.NO_TEXT]
    read_by_ocr = [page.number for page in pages if page.status is PageStatus.OCR]
    failed = [page for page in pages if page.status is PageStatus.ERROR]
    for page in failed:
        logger.warning("%s: %s", name, page.describe())
    logger.info(
        "extracted %s with %s: %s pages (%s read by OCR, %s without text, %s failed) in %.2f s",
        name,
        settings.extractor,
        len(pages),
        len(read_by_ocr),
        len(no_text),
        len(failed),
        time.monotonic() - started,
    )
    return Extraction(pages, EncryptionStatus(*reply["encryption"]))


# The part of the document's time bound OCR leaves for the pages after it and the reply: a document whose OCR
# runs out of time keeps the pages read so far instead of failing whole.
_OCR_TIME_RESERVE = 0.1


def _ocr_request(settings: ExtractionSettings, started: float) -> dict[str, Any] | None:
    """Returns the worker's OCR options (`OcrOptions` as data), or None when OCR is off."""
    if settings.ocr == "off":
        return None
    deadline = started + settings.timeout_s * (1 - _OCR_TIME_RESERVE)
    return OcrOptions(
        dpi=settings.ocr_dpi,
        page_timeout_s=settings.ocr_page_timeout_s,
        min_confidence=settings.ocr_min_confidence,
        command=settings.ocr_command,
        deadline=deadline,
    ).as_request()


def _page(
    number: int,
    text: str,
    status: str,
    detail: str,
    confidence: float | None = None,
    words: tuple[tuple[int, int, float, float, float, float], ...] = (),
) -> Page:
    return Page(number, text, PageStatus(status), detail, confidence=confidence, words=tuple(words))


def encryption_status(
    data: bytes,
    password: str | None = None,
    *,
    settings: ExtractionSettings | None = None,
    name: str = "document",
) -> EncryptionStatus:
    """Returns whether the PDF in `data` is encrypted, opens without a password, and opens with `password`.

    The PDF is parsed only inside an extraction worker (the configured extractor, with the same time
    bound, memory cap and priority as extraction), never in the caller. It fails closed: when the check
    cannot finish (the parser fails, the worker crashes, runs out of memory or time) it raises
    `EncryptionCheckError` (also for a broken encryption dictionary), never a status that would let a
    locked PDF's text out. A missing crypto package raises `DependencyError`, and bytes that are not a
    PDF an `InputError`. A caller holding text of the PDF must treat every exception as "locked".
    """
    settings = _checked_settings(settings)
    data = _checked_bytes(data, name, "encryption_status")
    request = worker_request(data, password, name, settings, op="encryption")
    try:
        reply = run_worker(request, name=name, extractor=settings.extractor, timeout_s=settings.timeout_s)
        replay_worker_log(reply.get("log", []), reply.get("dropped", 0), name)
        if "error" in reply:
            raise_worker_error(reply["error"])
    except (EncryptionCheckError, DependencyError):
        raise
    except ExtractionError as exc:  # timed out, died or out of memory: nothing was learned, nothing may be assumed
        raise check_failed(name, settings.extractor, check_reason(exc, settings)) from exc
    return EncryptionStatus(*reply["encryption"])


def _checked_settings(settings: ExtractionSettings | None) -> ExtractionSettings:
    if settings is None:
        # Imported here: pydantic is heavy, and the worker imports this module too.
        from docpipe.settings import ExtractionSettings

        settings = ExtractionSettings()
    if settings.extractor not in EXTRACTORS:
        raise ConfigError(
            f"unknown extractor {settings.extractor!r}: choose one of {', '.join(EXTRACTORS)}",
            extractor=settings.extractor,
        )
    return settings


def _checked_bytes(data: Any, name: str, function: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{function} takes the PDF's bytes, not {type(data).__name__}: pass path.read_bytes()")
    data = bytes(data)
    _check_pdf_bytes(data, name)
    return data


def _check_pdf_bytes(data: bytes, name: str) -> None:
    """Raises `EmptyFileError` or `NotAPDFError` for input no extractor should see."""
    if not data:
        raise EmptyFileError(f"{name} is empty (0 bytes): check that the file was written completely", path=name)
    if b"%PDF-" not in data[:_HEADER_WINDOW]:
        head = data[:16]
        kind = next((label for magic, label in _KNOWN_FORMATS if data.startswith(magic)), "")
        if not kind and data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
            kind = "an HTML page"
        described = f"{head!r}, {kind}" if kind else f"{head!r}"
        raise NotAPDFError(f"{name} is not a PDF (it starts with {described}): convert it to PDF first", path=name)
