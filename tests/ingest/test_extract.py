"""Extraction on real files: the third-party bad PDFs in ../shared/eval and PDFs built here.

Every bad PDF must give pages with text or a specific `DocpipeError`, within the time bound, with both
extractors. Nothing is mocked: each call starts a real worker process.
"""

from __future__ import annotations

import io
import json
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader, PdfWriter
from reportlab.pdfgen import canvas

from docpipe.errors import (
    DocpipeError,
    EmptyFileError,
    ExtractionError,
    ExtractionTimeoutError,
    InputError,
    MalformedPDFError,
    NotAPDFError,
    NoTextError,
    PasswordRequiredError,
    WrongPasswordError,
)
from docpipe.ingest.extract import EXTRACTORS, extract_pages
from docpipe.settings import ExtractionSettings
from docpipe.types import Page, PageStatus

EVAL = Path(__file__).resolve().parents[2].parent / "shared" / "eval"
BAD = EVAL / "bad-pdfs"
CUAD_PDF = EVAL / "cuad-dev" / "pdf"
NO_EVAL = f"evaluation data not found at {EVAL} (../shared/eval beside the project root)"

TIMEOUT_S = 60.0
SLACK_S = 5.0  # worker start-up and teardown on a loaded machine
SLOW_S = 2.0  # pypdf took longer than this in the index: the case is marked integration
SLOW_ID = "cuad-CERES-slow-extraction"  # has its own two tests below


def _index() -> list[dict[str, Any]]:
    path = BAD / "index.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


ENTRIES = _index()


def _cases(keep: Any = lambda entry: True) -> list[Any]:
    """Returns one pytest param per (index entry, extractor), marking cases pypdf is slow on."""
    if not ENTRIES:
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=NO_EVAL), id="no-eval-data")]
    cases = []
    for entry in ENTRIES:
        if not keep(entry):
            continue
        for extractor in EXTRACTORS:
            slow = extractor == "pypdf" and (entry["observed_pypdf_7_1_1"].get("secs") or 0) > SLOW_S
            marks = [pytest.mark.integration] if slow else []
            cases.append(pytest.param(entry, extractor, marks=marks, id=f"{entry['id']}-{extractor}"))
    return cases


def _entry(entry_id: str) -> dict[str, Any]:
    for entry in ENTRIES:
        if entry["id"] == entry_id:
            return entry
    pytest.skip(f"{entry_id} is not in {BAD / 'index.jsonl'}" if ENTRIES else NO_EVAL)


def _settings(extractor: str, **overrides: Any) -> ExtractionSettings:
    return ExtractionSettings(extractor=extractor, **{"timeout_s": TIMEOUT_S, **overrides})


def _assert_well_formed(pages: list[Page]) -> None:
    assert pages, "an empty page list must never be returned"
    assert [page.number for page in pages] == list(range(1, len(pages) + 1))
    for page in pages:
        if page.status is PageStatus.OK:
            assert page.text.strip()
            assert "\r" not in page.text and "\x00" not in page.text and "\ufffe" not in page.text
        elif page.status is PageStatus.NO_TEXT:
            assert page.text == ""
        else:
            assert page.text == "" and page.detail


def _expected(entry: dict[str, Any], extractor: str) -> type[DocpipeError] | str:
    """Returns the error class the entry must raise, "text", or "either" (text or any specific error)."""
    category, observed = entry["category"], entry["observed_pypdf_7_1_1"]
    by_category: dict[str, type[DocpipeError] | str] = {
        "encrypted": PasswordRequiredError,
        "encrypted-broken": MalformedPDFError,
        "no-text-image-only": NoTextError,
        "encrypted-readable": "text",
        "malformed-recoverable": "text",
        "scanned-with-ocr-layer": "text",
        "form": "text",
        "large": "text",
    }
    if category in by_category:
        return by_category[category]
    # Whatever pypdf 7.1.1 read in full when the index was made, our pypdf backend must read too.
    read_in_full = observed.get("open") == "ok" and observed.get("chars") and not observed.get("empty_pages")
    if extractor == "pypdf" and read_in_full:
        return "text"
    return "either"


@pytest.mark.parametrize(("entry", "extractor"), _cases(lambda entry: entry["id"] != SLOW_ID))
def test_bad_pdf_gives_text_or_a_specific_error(entry: dict[str, Any], extractor: str) -> None:
    data = (BAD / entry["file"]).read_bytes()
    expected = _expected(entry, extractor)
    started = time.monotonic()
    try:
        pages = extract_pages(data, settings=_settings(extractor), name=entry["file"])
    except DocpipeError as exc:
        assert type(exc) not in (DocpipeError, ExtractionError), f"too generic: {type(exc).__name__}: {exc}"
        assert entry["file"] in str(exc), "the message must name the file"
        if isinstance(expected, type):
            assert isinstance(exc, expected), f"expected {expected.__name__}, got {type(exc).__name__}: {exc}"
        else:
            assert expected == "either", f"expected text, got {type(exc).__name__}: {exc}"
    else:
        _assert_well_formed(pages)
        assert any(page.ok for page in pages), "pages without a single ok page must be an error instead"
        assert expected in ("text", "either"), f"expected {getattr(expected, '__name__', expected)}, got pages"
    assert time.monotonic() - started < TIMEOUT_S + SLACK_S


@pytest.mark.parametrize(("entry", "extractor"), _cases(lambda entry: entry["category"] == "encrypted"))
def test_encrypted_pdf_opens_with_its_password(entry: dict[str, Any], extractor: str) -> None:
    data = (BAD / entry["file"]).read_bytes()
    pages = extract_pages(data, password=entry["password"], settings=_settings(extractor), name=entry["file"])
    _assert_well_formed(pages)
    assert any(page.ok for page in pages)


@pytest.mark.parametrize(("entry", "extractor"), _cases(lambda entry: entry["category"] == "encrypted"))
def test_encrypted_pdf_refuses_a_wrong_password(entry: dict[str, Any], extractor: str) -> None:
    data = (BAD / entry["file"]).read_bytes()
    with pytest.raises(WrongPasswordError) as caught:
        extract_pages(data, password=f"not-{entry['password']}", settings=_settings(extractor), name=entry["file"])
    assert entry["file"] in str(caught.value)
    assert caught.value.path == entry["file"]


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_encrypted_pdf_without_password_says_how_to_pass_one(extractor: str) -> None:
    entry = _entry("pypdf-r6-both-passwords")
    with pytest.raises(PasswordRequiredError) as caught:
        extract_pages((BAD / entry["file"]).read_bytes(), settings=_settings(extractor), name=entry["file"])
    assert str(caught.value) == (
        "pypdf-r6-both-passwords.pdf is encrypted: pass the password "
        "(--password on the command line, password= in Python)"
    )


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("password", [None, "asdfzxcv", "not-the-password"])
def test_pdf_readable_with_the_empty_user_password_opens_whatever_password_is_given(
    extractor: str, password: str | None
) -> None:
    entry = _entry("pypdf-r6-owner-password")
    pages = extract_pages((BAD / entry["file"]).read_bytes(), password=password, settings=_settings(extractor))
    assert "pdf encryption test" in pages[0].text


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_broken_encryption_dictionary_is_reported_as_such(extractor: str) -> None:
    entry = _entry("qpdf-short-O-U")
    for password in (None, "anything"):
        with pytest.raises(MalformedPDFError, match="encryption dictionary is broken") as caught:
            extract_pages((BAD / entry["file"]).read_bytes(), password=password, settings=_settings(extractor))
        assert "/U is 16 bytes, expected 32" in str(caught.value)


@pytest.mark.integration
def test_slow_contract_times_out_quickly_with_pypdf() -> None:
    entry = _entry(SLOW_ID)
    started = time.monotonic()
    with pytest.raises(ExtractionTimeoutError) as caught:
        extract_pages((BAD / entry["file"]).read_bytes(), settings=_settings("pypdf", timeout_s=5), name="ceres.pdf")
    assert time.monotonic() - started < 5 + SLACK_S
    assert str(caught.value) == (
        "extracting ceres.pdf with pypdf took longer than 5 s: use --extractor pypdfium2 (much faster) "
        "or raise DOCPIPE_EXTRACTION__TIMEOUT_S"
    )
    assert isinstance(caught.value, TimeoutError)


def test_slow_contract_extracts_fully_with_pypdfium2() -> None:
    entry = _entry(SLOW_ID)
    started = time.monotonic()
    pages = extract_pages((BAD / entry["file"]).read_bytes(), settings=_settings("pypdfium2", timeout_s=30))
    assert time.monotonic() - started < 30
    _assert_well_formed(pages)
    assert len(pages) == entry["observed_pypdf_7_1_1"]["pages"] == 154
    assert all(page.ok for page in pages)


FORM_LINES = {
    "qpdf-form-filled-by-acrobat": {
        1: ["Where’s my form?", "[form field] Text Box 1: abc potato", "[form field] Check Box 2: Yes"],
        3: ["[form field] Text Box 2: salad πʬ xyz"],
    },
    "sf-libreoffice-form": {
        1: ["Example for a Form", "[form field] First Name: Alice", "[form field] First Name_2: Bob"],
    },
}


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("entry_id", sorted(FORM_LINES))
def test_filled_form_field_values_are_kept(entry_id: str, extractor: str) -> None:
    entry = _entry(entry_id)
    pages = extract_pages((BAD / entry["file"]).read_bytes(), settings=_settings(extractor))
    for number, lines in FORM_LINES[entry_id].items():
        for line in lines:
            assert line in pages[number - 1].text
    text = "\n".join(page.text for page in pages)
    assert "Check Box 1" not in text, "unchecked boxes are not values"
    assert text.count("[form field] Text Box 1:") <= 1


def _text_pdf(*page_texts: str) -> bytes:
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=(612, 792))
    for text in page_texts:
        for line_number, line in enumerate(text.splitlines()):
            pdf.drawString(72, 720 - 14 * line_number, line)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def _with_blank_second_page(data: bytes) -> bytes:
    reader = PdfReader(io.BytesIO(data))
    writer = PdfWriter()
    writer.add_page(reader.pages[0])
    writer.add_blank_page(width=612, height=792)
    for page in reader.pages[1:]:
        writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_blank_page_gets_no_text_status_while_the_others_keep_their_text(extractor: str) -> None:
    data = _with_blank_second_page(_text_pdf("ARTICLE 1. Term\nThis Agreement starts today.", "ARTICLE 2. Fees"))
    pages = extract_pages(data, settings=_settings(extractor), name="blank.pdf")
    _assert_well_formed(pages)
    assert [page.status for page in pages] == [PageStatus.OK, PageStatus.NO_TEXT, PageStatus.OK]
    assert "This Agreement starts today." in pages[0].text
    assert "ARTICLE 2. Fees" in pages[2].text
    assert extract_pages(data, settings=_settings(extractor), name="blank.pdf") == pages, "not deterministic"


def test_both_extractors_give_the_same_pages_for_a_simple_pdf() -> None:
    data = _text_pdf("Section 1.1 Definitions", "Section 2.1 Payment terms", "Section 3.1 Termination")
    by_extractor = [extract_pages(data, settings=_settings(extractor)) for extractor in EXTRACTORS]
    assert [[(p.number, p.text.strip(), p.status) for p in pages] for pages in by_extractor] == [
        [
            (1, "Section 1.1 Definitions", PageStatus.OK),
            (2, "Section 2.1 Payment terms", PageStatus.OK),
            (3, "Section 3.1 Termination", PageStatus.OK),
        ]
    ] * 2


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_junk_before_the_header_is_accepted(extractor: str) -> None:
    pages = extract_pages(b"leading junk\n" * 20 + _text_pdf("Still a contract"), settings=_settings(extractor))
    assert pages[0].text.strip() == "Still a contract"


def test_empty_bytes_are_refused() -> None:
    with pytest.raises(EmptyFileError, match=r"^contract\.pdf is empty \(0 bytes\)") as caught:
        extract_pages(b"", name="contract.pdf")
    assert caught.value.path == "contract.pdf"


@pytest.mark.parametrize(
    ("data", "described"),
    [
        (b"Meeting notes, 3 May\nAttendees: ...", "b'Meeting notes, 3'"),
        (b"PK\x03\x04\x14\x00\x06\x00" + bytes(100), "a .docx, .xlsx or .odt?"),
        (b" " * 2000 + b"%PDF-1.7\n", "b'                '"),  # a header past the first KiB does not count
    ],
    ids=["text", "zip", "late-header"],
)
def test_bytes_that_are_not_a_pdf_are_refused_with_a_fix(data: bytes, described: str) -> None:
    with pytest.raises(NotAPDFError) as caught:
        extract_pages(data, name="notes.txt")
    message = str(caught.value)
    assert message.startswith("notes.txt is not a PDF (it starts with ")
    assert described in message
    assert message.endswith(": convert it to PDF first")
    assert isinstance(caught.value, InputError) and caught.value.path == "notes.txt"


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_more_pages_than_allowed_is_an_input_error(extractor: str) -> None:
    data = _text_pdf("one", "two", "three")
    with pytest.raises(InputError, match="has 3 pages, more than the limit of 2") as caught:
        extract_pages(data, settings=_settings(extractor, max_pages=2), name="long.pdf")
    assert "DOCPIPE_EXTRACTION__MAX_PAGES" in str(caught.value)
    assert caught.value.pages == 3 and caught.value.max_pages == 2  # context survives the process boundary


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_worker_is_killed_at_the_time_bound(extractor: str) -> None:
    psutil = pytest.importorskip("psutil")
    # Other tests may leave long-lived helpers (e.g. multiprocessing's resource tracker): only new ones count.
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    with pytest.raises(ExtractionTimeoutError, match=r"took longer than 0\.01 s: .*DOCPIPE_EXTRACTION__TIMEOUT_S"):
        extract_pages(_text_pdf("quick"), settings=_settings(extractor, timeout_s=0.01), name="quick.pdf")
    assert time.monotonic() - started < SLACK_S
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert left == [], "the worker outlived its time bound"


@pytest.fixture(scope="module")
def decompression_bomb() -> bytes:
    """Returns a one-page PDF whose 200 KB content stream inflates to 200 MB of spaces."""
    packer = zlib.compressobj(6)
    body = packer.compress(b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET\n")
    spaces = b" " * (1 << 20)
    body += b"".join(packer.compress(spaces) for _ in range(200)) + packer.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        + b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
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


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_decompression_bomb_hits_the_memory_limit(decompression_bomb: bytes, extractor: str) -> None:
    # pypdf raises MemoryError in the worker; pdfium aborts it (SIGABRT): both must become a clear error.
    with pytest.raises(ExtractionError) as caught:
        extract_pages(decompression_bomb, settings=_settings(extractor, memory_limit_mb=128), name="bomb.pdf")
    assert type(caught.value) is ExtractionError
    message = str(caught.value)
    assert "bomb.pdf" in message and "memory" in message and "128 MB" in message
    assert "DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB" in message
    # The same limit is plenty for an ordinary document.
    assert extract_pages(_text_pdf("fine"), settings=_settings(extractor, memory_limit_mb=128))[0].ok


def test_pypdfium2_text_has_plain_line_ends_and_real_hyphens() -> None:
    path = CUAD_PDF / "ARMSTRONGFLOORING_INC_01_07_2019-EX-10.2-INTELLECTUAL_PROPERTY_AGREEMENT.pdf"
    if not path.is_file():
        pytest.skip(NO_EVAL if not EVAL.is_dir() else f"{path.name} is missing")
    pages = extract_pages(path.read_bytes(), settings=_settings("pypdfium2"), name=path.name)
    _assert_well_formed(pages)
    text = "\n".join(page.text for page in pages)
    assert "Arizona Assigned Know-How" in text  # pdfium reports this hyphen as U+FFFE
