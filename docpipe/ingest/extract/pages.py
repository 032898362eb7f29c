"""Inside the extraction worker: reads every page of a document with the chosen reader into plain
``(number, text, status, detail, confidence, words)`` tuples (one failed page never loses the others), reads
the pages without a usable text layer by OCR when it is on (`docpipe.ingest.extract.ocr`), normalises line ends
and control characters, appends filled form-field values, and decides the document-level error when no page
gives text. Also answers the encryption check with the same readers.
"""

from __future__ import annotations

import re
from typing import Any

from docpipe.errors import (
    DependencyError,
    DocpipeError,
    EncryptionCheckError,
    InputError,
    NoTextError,
    TooMuchTextError,
)
from docpipe.ingest.extract.budget import TextBudget
from docpipe.ingest.extract.common import describe_error, malformed, other_extractor, out_of_memory
from docpipe.ingest.extract.encryption import check_failed
from docpipe.ingest.extract.ocr import INSTALL, DocumentOcr, OcrOptions, OcrTimeout
from docpipe.ingest.extract.pdfium_reader import PdfiumReader
from docpipe.ingest.extract.pypdf_reader import PypdfReader
from docpipe.types import PageStatus

_FORM_FIELD_PREFIX = "[form field]"

_DROPPED_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")

_SURROGATES = re.compile(r"[\ud800-\udfff]")

# (number, text, status, detail, confidence, words): see `docpipe.types.Page`.
PageRow = tuple[int, str, str, str, float | None, tuple[tuple[int, int, float, float, float, float], ...]]


def read_pages(
    data: bytes,
    *,
    password: str | None,
    name: str,
    extractor: str,
    max_pages: int,
    memory_limit_mb: int,
    budget: TextBudget,
    ocr: dict[str, Any] | None = None,
) -> tuple[list[tuple[Any, ...]], tuple[bool, bool, bool | None]]:
    """Returns a `PageRow` for every page (the worker's reply also carries a Word file's 4-tuples, hence the
    loose type) and the encryption status as a tuple, or raises the document-level error. `ocr` (`OcrOptions` as data; None: off) reads the pages without a usable text layer by OCR."""
    reader: PypdfReader | PdfiumReader
    reader = PypdfReader(data, password, name) if extractor == "pypdf" else PdfiumReader(data, password, name)
    count = reader.page_count()
    if count > max_pages:
        raise InputError(
            f"{name} has {count} pages, more than the limit of {max_pages}: split it, or raise "
            "DOCPIPE_EXTRACTION__MAX_PAGES",
            path=name,
            pages=count,
            max_pages=max_pages,
        )
    document_ocr = None
    if ocr is not None:
        document_ocr = DocumentOcr(
            data, password, OcrOptions(**ocr), doc=reader.doc if isinstance(reader, PdfiumReader) else None
        )
    pages: list[PageRow] = []
    failures: list[tuple[int, BaseException]] = []
    seen_fields: set[str] = set()
    for index in range(count):
        number = index + 1
        budget.start_page(number)
        try:
            text, fields = reader.page(index, budget)
            text = normalise_text(text)
        except TooMuchTextError:
            raise
        except Exception as exc:  # one bad page must not lose the others
            failures.append((number, exc))
            pages.append((number, "", PageStatus.ERROR.value, _failure(exc, memory_limit_mb), None, ()))
            continue
        row: PageRow = (number, text, PageStatus.OK.value, "", None, ())
        if document_ocr is not None and document_ocr.wanted(index, text):
            row = _read_by_ocr(document_ocr, index, memory_limit_mb)
            if row[2] != PageStatus.OCR.value and text.strip():  # keep the few characters it had
                row = (number, text, PageStatus.OK.value, "", None, ())
        elif not text.strip():
            row = (number, "", PageStatus.NO_TEXT.value, "", None, ())
        text = with_form_fields(row[1], fields, seen_fields)
        budget.close_page(len(text))
        if text.strip() and row[2] == PageStatus.NO_TEXT.value:  # a filled form on a blank page
            row = (number, text, PageStatus.OK.value, "", None, ())
        pages.append((number, text if text.strip() else "", *row[2:]))
    if document_ocr is not None:
        document_ocr.close()
    reader.close()
    if not any(status in (PageStatus.OK.value, PageStatus.OCR.value) for _, _, status, *_ in pages):
        details = [detail for _, _, status, detail, *_ in pages if status == PageStatus.NO_TEXT.value and detail]
        raise no_usable_page(
            name,
            extractor,
            count,
            failures,
            memory_limit_mb,
            ocr_note=details[0] if details else "",
            ocr=ocr is not None,
        )
    return pages, reader.status


def _read_by_ocr(document_ocr: DocumentOcr, index: int, memory_limit_mb: int) -> PageRow:
    """Returns the row of page `index` read by OCR, or a ``no_text_layer`` row that says why it was not."""
    number = index + 1
    try:
        result = document_ocr.read(index)
    except DependencyError as exc:
        return (number, "", PageStatus.NO_TEXT.value, f"not read by OCR: {exc.message}", None, ())
    except OcrTimeout as exc:
        return (number, "", PageStatus.NO_TEXT.value, str(exc), None, ())
    except Exception as exc:  # a page OCR cannot read keeps its place, like any failed page
        return (number, "", PageStatus.NO_TEXT.value, f"OCR failed: {_failure(exc, memory_limit_mb)}", None, ())
    text = result.text  # already clean: normalising it could move the words' offsets
    if not text.strip():
        return (number, "", PageStatus.NO_TEXT.value, "OCR found no text on it", None, ())
    low = result.confidence is not None and result.confidence < document_ocr.options.min_confidence
    detail = "low confidence: check the scan" if low else ""
    if result.rotation:
        turned = f"turned {(360 - result.rotation) % 360} degrees clockwise to read"
        detail = f"{detail}; {turned}" if detail else turned
    return (number, text, PageStatus.OCR.value, detail, result.confidence, result.words)


def _failure(exc: BaseException, memory_limit_mb: int) -> str:
    return f"out of memory (limit {memory_limit_mb} MB)" if isinstance(exc, MemoryError) else describe_error(exc)


def read_encryption(data: bytes, password: str | None, name: str, extractor: str) -> tuple[bool, bool, bool | None]:
    """Returns (encrypted, needs_password, password_opens) as the extractor sees them, or raises.

    Any failure to decide is an error (`EncryptionCheckError` unless a more specific one applies), never
    a guess: the caller holds the PDF's text and must not hand it out on a guess.
    """
    try:
        if extractor == "pypdf":
            return PypdfReader.check(data, password, name)
        return PdfiumReader.check(data, password, name)
    except (EncryptionCheckError, DependencyError):
        raise
    except DocpipeError as exc:
        raise check_failed(name, extractor, str(exc.context.get("reason") or exc.message)) from None
    except Exception as exc:
        raise check_failed(name, extractor, describe_error(exc)) from None


def no_usable_page(
    name: str,
    extractor: str,
    count: int,
    failures: list[tuple[int, BaseException]],
    memory_limit_mb: int,
    *,
    ocr_note: str = "",
    ocr: bool = False,
) -> DocpipeError:
    """Returns the error for a document where no page yielded text; `ocr_note` is why OCR did not give any
    (a page's detail), `ocr` whether it was on."""
    if count == 0:
        return malformed(name, extractor, "it has no pages")
    if not failures:
        if ocr and ocr_note:
            how = f"and OCR gave none ({ocr_note})"
        elif ocr:
            how = "and OCR found none"
        else:
            how = f"(scanned or image-only?), and OCR is off: set DOCPIPE_EXTRACTION__OCR=auto with {INSTALL}"
        return NoTextError(
            f"no page of {name} has a text layer {how}; or run OCR first, e.g. `ocrmypdf in.pdf out.pdf`",
            path=name,
            extractor=extractor,
            pages=count,
        )
    number, exc = failures[0]
    if isinstance(exc, MemoryError):
        return out_of_memory(name, extractor, memory_limit_mb)
    if type(exc).__name__ == "DependencyError":
        return DependencyError(
            f"{extractor} needs a missing program or package to decode page {number} of {name} ({describe_error(exc)}): "
            f"install it, or try --extractor {other_extractor(extractor)}",
            path=name,
            extractor=extractor,
            page=number,
        )
    return malformed(name, extractor, f"no page could be extracted (page {number}: {describe_error(exc)})", page=number)


def normalise_text(text: str) -> str:
    """Returns `text` with uniform line ends and without control characters; nothing is reflowed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0b", "\n").replace("\x0c", "\n")
    text = _DROPPED_CONTROLS.sub("", text)
    # Lone surrogates (broken font maps) would make the text impossible to write as UTF-8 later.
    return _SURROGATES.sub("\ufffd", text)


def with_form_fields(text: str, fields: list[tuple[str, str]], seen: set[str]) -> str:
    """Returns `text` with a ``[form field] name: value`` line for each field value it does not show yet."""
    lines = []
    for field_name, value in fields:
        if field_name in seen:  # radio buttons: one field, several widgets
            continue
        seen.add(field_name)
        if value not in text:
            lines.append(f"{_FORM_FIELD_PREFIX} {field_name}: {value}")
    if not lines:
        return text
    separator = "" if not text or text.endswith("\n") else "\n"
    return text + separator + "\n".join(lines)
