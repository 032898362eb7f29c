"""Word (.docx) bytes in, numbered paragraphs out: the extraction stage for Word files.

A Word file has no pages, so its "pages" are its paragraphs and table rows, numbered from 1 in document order
(empty ones skipped), each as docpipe shows it: the list number Word draws in front of it rendered from
``numbering.xml`` ("12.3 Termination for Convenience. ...", "(a) ..."), a table row as its cells joined with
``" | "``. Citations then give the section heading and paragraph number (``¶ 7``, see `Document.unit`).

`document_kind` tells a PDF from a Word file by its bytes (a ZIP holding ``word/document.xml``) or its
``.docx`` name, and refuses everything else with `NotAPDFError`; an encrypted Word file (an OLE compound file
holding an ``EncryptedPackage`` stream) is refused at once with `EncryptedWordFileError`. `extract_docx` reads
a Word file in the same sandboxed worker as PDFs (time bound, memory cap, lower priority), where
`docpipe.ingest.extract.docx_reader` reads it. Imports only docpipe.errors, docpipe.types and this package.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from docpipe.errors import EmptyFileError, ExtractionError, ExtractionTimeoutError, NotAPDFError
from docpipe.ingest.extract.api import Extraction
from docpipe.ingest.extract.docx_reader import MAIN_PART, OLE_MAGIC, READER, encrypted, is_encrypted
from docpipe.ingest.extract.encryption import EncryptionStatus
from docpipe.ingest.extract.worker import raise_worker_error, replay_worker_log, run_worker, worker_request
from docpipe.types import Page, PageStatus

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings

__all__ = ["DOCX_MEDIA_TYPE", "READER", "document_kind", "extract_docx"]

logger = logging.getLogger(__name__)

DOCX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_ZIP_MAGIC = b"PK\x03\x04"
_PDF_HEADER_WINDOW = 1024  # as the PDF check: readers accept a header anywhere in the first 1024 bytes


def document_kind(data: bytes, name: str) -> str:
    """Returns ``"pdf"`` or ``"docx"`` for the document in `data` called `name`: a PDF by its header, a Word
    file by its bytes (a ZIP holding ``word/document.xml``) or its ``.docx`` name (a broken one is then
    refused as a broken Word file, not as "not a PDF"). Raises `EmptyFileError`, `EncryptedWordFileError` for an
    encrypted Word file, and `NotAPDFError` for anything else, saying what the bytes look like."""
    if not data:
        raise EmptyFileError(f"{name} is empty (0 bytes): check that the file was written completely", path=name)
    if b"%PDF-" in data[:_PDF_HEADER_WINDOW]:
        return "pdf"
    if is_encrypted(data):
        raise encrypted(name)
    word_name = name.lower().endswith(".docx")
    if data.startswith(_ZIP_MAGIC) and (MAIN_PART.encode() in data or word_name):
        return "docx"
    if word_name and not data.startswith(OLE_MAGIC):
        return "docx"
    raise NotAPDFError(
        f"{name} is not a PDF or a Word (.docx) file (it starts with {_described(data)}): convert it to PDF "
        "(or save it as .docx) first",
        path=name,
    )


def _described(data: bytes) -> str:
    head = repr(data[:16])
    if data.startswith(_ZIP_MAGIC):
        return f"{head}, a ZIP archive but not a Word document: an .xlsx, .pptx or .odt?"
    if data.startswith(OLE_MAGIC):
        return f"{head}, an old Office file: a .doc (save it as .docx) or .xls?"
    if data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return f"{head}, an HTML page"
    if data.startswith(b"{\\rtf"):
        return f"{head}, an RTF document (save it as .docx)"
    return head


def extract_docx(
    data: bytes,
    *,
    settings: ExtractionSettings | None = None,
    name: str = "document.docx",
) -> Extraction:
    """Returns the paragraphs of the Word file in `data` as pages (numbered from 1, see the module docstring)
    and an `EncryptionStatus` of "not encrypted", read in a sandboxed extraction worker with the time and
    memory bounds of `settings`, as `extract_document` reads a PDF.

    Raises `EncryptedWordFileError` for an encrypted Word file, `MalformedPDFError` for a broken one (not a ZIP,
    no ``word/document.xml``, an XML part declaring a DTD), `ExtractionError` for a zip bomb, `NoTextError`
    when no paragraph holds text and `TooMuchTextError` past ``max_page_chars`` in one paragraph or
    ``max_chars`` in all; the message says how to fix it.
    """
    if settings is None:
        from docpipe.settings import ExtractionSettings  # pydantic is heavy: imported only when needed

        settings = ExtractionSettings()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"extract_docx takes the file's bytes, not {type(data).__name__}: pass path.read_bytes()")
    data = bytes(data)
    if not data:
        raise EmptyFileError(f"{name} is empty (0 bytes): check that the file was written completely", path=name)
    if is_encrypted(data):
        raise encrypted(name)
    request = worker_request(data, None, name, settings, op="docx")
    started = time.monotonic()
    try:
        reply = run_worker(request, name=name, extractor=READER, timeout_s=settings.timeout_s)
    except ExtractionTimeoutError:
        raise
    except ExtractionError as exc:
        if "returncode" not in exc.context:
            raise
        raise ExtractionError(
            f"the extraction worker for {name} ended without an answer ({exc.context['returncode']}): it most likely "
            f"ran out of memory (limit {settings.memory_limit_mb} MB). Save the file again as .docx, or raise "
            "DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB for a genuinely large document",
            path=name,
            extractor=READER,
            returncode=exc.context["returncode"],
        ) from exc
    replay_worker_log(reply.get("log", []), reply.get("dropped", 0), name)
    if "error" in reply:
        raise_worker_error(reply["error"])
    pages = [Page(number, text, PageStatus(status), detail) for number, text, status, detail in reply["pages"]]
    logger.info("extracted %s with %s: %s paragraphs in %.2f s", name, READER, len(pages), time.monotonic() - started)
    return Extraction(pages, EncryptionStatus(False, False, None))
