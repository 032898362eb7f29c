"""Limits of the extraction worker on a shared server: text caps, encryption checks that fail closed, and
the worker's CPU priority.

Every test runs real worker processes on real PDFs: crafted ones built here, and the encrypted third-party
PDFs in ../shared/eval/bad-pdfs.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from reportlab.pdfgen import canvas

from docpipe.errors import EncryptionCheckError, ExtractionError, InputError, TooMuchTextError
from docpipe.ingest.extract import EXTRACTORS, EncryptionStatus, encryption_status, extract_document, extract_pages
from docpipe.settings import ExtractionSettings

BAD = Path(__file__).resolve().parents[2].parent / "shared" / "eval" / "bad-pdfs"
NO_EVAL = f"evaluation data not found at {BAD} (../shared/eval beside the project root)"
TIMEOUT_S = 60.0
# Passwords the index does not spell out as "password": the owner password of the PDF that opens without one.
OWNER_PASSWORDS = {"pypdf-r6-owner-password": "asdfzxcv"}
LINE = b"(The Supplier shall indemnify the Customer against all losses arising from any breach.) Tj\n"


def _settings(extractor: str, **overrides: Any) -> ExtractionSettings:
    return ExtractionSettings(extractor=extractor, **{"timeout_s": TIMEOUT_S, **overrides})


def _expansion_pdf(repeats: int, *, pages: int = 1, line_moves: bool = False) -> bytes:
    """Returns a PDF of `pages` pages that all show one deflated content stream repeating a text-show
    operator `repeats` times: a few kilobytes that expand to ``repeats * 84`` characters per page."""
    show = LINE + (b"0 -12 Td\n" if line_moves else b"")
    body = zlib.compress(b"BT /F1 10 Tf 72 720 Td\n" + show * repeats + b"ET\n", 9)
    content, font = 3 + pages, 4 + pages
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (3 + i) for i in range(pages)), pages),
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content, font)
    ] * pages
    objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, obj))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer << /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def _xref_bomb() -> bytes:
    """Returns a 300 KB PDF whose cross-reference stream, read on opening, inflates to 300 MB."""
    out = io.BytesIO()
    out.write(b"%PDF-1.5\n")
    offsets = []
    for number, obj in enumerate([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"], 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, obj))
    xref = out.tell()
    rows = b"\x00\x00\x00\x00\x00\xff\xff"  # object 0, free
    rows += b"".join(b"\x01" + offset.to_bytes(4, "big") + b"\x00\x00" for offset in [*offsets, xref])
    packer = zlib.compressobj(9)
    body = packer.compress(rows) + b"".join(packer.compress(b"\0" * (1 << 20)) for _ in range(300)) + packer.flush()
    out.write(
        b"3 0 obj\n<< /Type /XRef /Size 4 /W [1 4 2] /Root 1 0 R /Length %d /Filter /FlateDecode >>\nstream\n"
        % len(body)
        + body
        + b"\nendstream\nendobj\n"
    )
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def _text_pdf(*pages: str) -> bytes:
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    for text in pages:
        pdf.drawString(72, 720, text)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def _encrypted_entries() -> list[Any]:
    path = BAD / "index.jsonl"
    if not path.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_EVAL), id="no-eval-data")]
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        pytest.param(entry, id=entry["id"])
        for entry in entries
        if entry["category"] == "encrypted" or entry["id"] in OWNER_PASSWORDS
    ]


# -- text caps ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("line_moves", [False, True], ids=["one-line", "many-lines"])
@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_small_pdf_expanding_to_megabytes_of_text_is_refused(extractor: str, line_moves: bool) -> None:
    data = _expansion_pdf(30_000, line_moves=line_moves)  # ~2.5 million characters on one page
    assert len(data) < 16_000
    # Inside the time bound: a timeout would raise ExtractionTimeoutError instead.
    with pytest.raises(TooMuchTextError) as caught:
        extract_pages(data, settings=_settings(extractor), name="expands.pdf")
    message = str(caught.value)
    assert message.startswith("page 1 of expands.pdf holds more than 50,000 characters of text")
    assert message.endswith("raise DOCPIPE_EXTRACTION__MAX_PAGE_CHARS")
    assert isinstance(caught.value, ExtractionError)
    assert caught.value.page == 1 and caught.value.max_page_chars == 50_000


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_text_spread_over_pages_stops_at_the_page_that_passes_the_document_cap(extractor: str) -> None:
    # 60 pages of ~42,000 characters each: every page is under the page cap, the document is not.
    data = _expansion_pdf(500, pages=60)
    with pytest.raises(TooMuchTextError, match=r"exceeds 2,000,000 characters .*EXTRACTION__MAX_CHARS") as caught:
        extract_pages(data, settings=_settings(extractor), name="spread.pdf")
    page_chars = len(extract_pages(_expansion_pdf(500), settings=_settings(extractor))[0].text)
    # The worker stopped at the first page past the cap instead of reading all 60.
    assert caught.value.page == 2_000_000 // page_chars + 1 < 60
    assert caught.value.max_chars == 2_000_000


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_caps_count_the_text_that_would_be_returned(extractor: str) -> None:
    data = _text_pdf("Notice period: ninety (90) days.", "Governing law: New York.")
    lengths = [len(page.text) for page in extract_pages(data, settings=_settings(extractor))]
    exact = _settings(extractor, max_page_chars=max(lengths), max_chars=sum(lengths))
    assert [len(page.text) for page in extract_pages(data, settings=exact)] == lengths
    with pytest.raises(TooMuchTextError, match="page 1 of"):
        extract_pages(data, settings=_settings(extractor, max_page_chars=lengths[0] - 1))
    with pytest.raises(TooMuchTextError, match=r"reached on page 2"):
        extract_pages(data, settings=_settings(extractor, max_chars=sum(lengths) - 1))


def test_cap_settings_have_descriptions_and_reject_nonsense() -> None:
    fields = ExtractionSettings.model_fields
    for name in ("max_chars", "max_page_chars", "worker_nice"):
        assert fields[name].description
    with pytest.raises(ValueError):
        ExtractionSettings(max_chars=0)
    with pytest.raises(ValueError):
        ExtractionSettings(worker_nice=20)


# -- encryption checks --------------------------------------------------------------------------------


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("entry", _encrypted_entries())
def test_encryption_status_with_no_right_and_wrong_password(entry: dict[str, Any], extractor: str) -> None:
    data = (BAD / entry["file"]).read_bytes()
    right = OWNER_PASSWORDS.get(entry["id"], entry["password"])
    needs = entry["category"] == "encrypted"
    settings = _settings(extractor)
    assert encryption_status(data, settings=settings) == EncryptionStatus(True, needs, None)
    assert encryption_status(data, right, settings=settings) == EncryptionStatus(True, needs, True)
    assert encryption_status(data, f"not-{right}", settings=settings) == EncryptionStatus(True, needs, False)


@pytest.mark.parametrize("entry", _encrypted_entries())
def test_both_extractors_report_what_opening_needed_while_extracting(entry: dict[str, Any]) -> None:
    data = (BAD / entry["file"]).read_bytes()
    right = OWNER_PASSWORDS.get(entry["id"], entry["password"])
    needs = entry["category"] == "encrypted"
    reports = [extract_document(data, password=right, settings=_settings(x)).encryption for x in EXTRACTORS]
    assert reports == [EncryptionStatus(True, needs, True)] * len(EXTRACTORS)


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_a_pdf_without_encryption_is_reported_as_such(extractor: str) -> None:
    data = _text_pdf("Plain contract")
    assert encryption_status(data, settings=_settings(extractor)) == EncryptionStatus(False, False, None)
    # A password proves nothing about a PDF that has none.
    assert encryption_status(data, "guess", settings=_settings(extractor)) == EncryptionStatus(False, False, False)
    assert extract_document(data, settings=_settings(extractor)).encryption == EncryptionStatus(False, False, None)


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_encryption_check_that_times_out_raises_instead_of_answering(extractor: str) -> None:
    entry_pdf = _text_pdf("Plain contract")  # even an unencrypted PDF: an unfinished check learned nothing
    with pytest.raises(EncryptionCheckError) as caught:
        encryption_status(entry_pdf, "pw", settings=_settings(extractor, timeout_s=0.01), name="slow.pdf")
    message = str(caught.value)
    assert message.startswith("could not check whether slow.pdf is encrypted, so it is treated as locked")
    assert "qpdf --decrypt" in message


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_encryption_check_that_runs_out_of_memory_raises_instead_of_answering(extractor: str) -> None:
    # pypdf's allocation fails under the cap; pdfium aborts the worker (SIGABRT): neither may read as "open".
    with pytest.raises(EncryptionCheckError, match="treated as locked"):
        encryption_status(_xref_bomb(), "pw", settings=_settings(extractor, memory_limit_mb=64), name="bomb.pdf")


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_encryption_check_of_a_pdf_the_parser_cannot_read_raises(extractor: str) -> None:
    path = BAD / "pdfjs-REDHAT-1531897-0.pdf"  # an xref stream with bogus /W entries
    if not path.is_file():
        pytest.skip(NO_EVAL)
    with pytest.raises(EncryptionCheckError, match="treated as locked") as caught:
        encryption_status(path.read_bytes(), "anything", settings=_settings(extractor), name="odd.pdf")
    assert caught.value.path == "odd.pdf" and caught.value.reason


def test_encryption_check_refuses_bytes_that_are_not_a_pdf() -> None:
    with pytest.raises(InputError):
        encryption_status(b"", "pw")
    with pytest.raises(InputError):
        encryption_status(b"PK\x03\x04 a zip", "pw")


# -- priority -----------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "nice"), reason="no nice values on this platform")
@pytest.mark.parametrize("worker_nice", [10, 0])
@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_worker_runs_below_the_callers_priority(
    extractor: str, worker_nice: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="docpipe.ingest.extract")
    extract_pages(_text_pdf("Plain contract"), settings=_settings(extractor, worker_nice=worker_nice))
    # The worker reads its own nice value after lowering it; the parent re-logs what it said.
    said = [re.search(r"runs at nice (-?\d+)$", record.getMessage()) for record in caplog.records]
    values = [int(match.group(1)) for match in said if match]
    assert values == [min(19, os.getpriority(os.PRIO_PROCESS, 0) + worker_nice)]
