"""A review grid as an Excel workbook (openpyxl), the form due-diligence teams pass around.

- Sheet "Review": one row per document, its name first, one column per question, the document's SHA-256
  last, hidden; the header row and the name column frozen, an autofilter over the whole table, columns as wide as
  their content (within bounds), text wrapped. Each cell is coloured by status and links to its first row on
  the "Citations" sheet.
- Sheet "Citations": one row per quote (document, question, status, answer, value, as written, derivation,
  quote with its PDF line breaks folded and the marked sentence in bold, pages, the section's heading, verified,
  note), and one row for a cell without quotes, so every cell is accounted for.
- Sheet "Manifest": the grid's provenance (engine, model, settings, which cells came from the cache).
- Sheet "Marks" (a grid with reviewers' marks): one row per marked cell (document, column, mark, corrected
  value, comment, by, when in UTC), its column linking to the cell; the cell itself has a note with the mark
  and a coloured border (green accepted, amber corrected, red flagged).

With `pdfs` (the documents copied beside the workbook, `docpipe.review.pdfs.copy_pdfs`), each citation's
pages link to its file at its first page (``<folder>/<name>.pdf#page=N``, a relative link set as the cell's
hyperlink, never a formula); without it nothing links outside the workbook.

A ``present`` cell of a typed column holds its value as Excel types it (`excel_value`), so a reviewer sorts
and filters the column ("expires before 2026", "notice under 60 days"):

- ``date``: a date (format ``yyyy-mm-dd``). ``2019-05`` / ``2019`` and ``perpetual`` stay text: a partial date
  made a day would sort as a day the contract does not name.
- ``money``: the amount, formatted with its currency (``"$"#,##0.00`` for USD, ``€`` EUR, ``£`` GBP, the ISO
  code for another, no sign when the words name none). A column may mix currencies: each cell shows its own.
- ``percent``: the fraction (12.5 becomes 0.125, format ``0.0##%``, shown ``12.5%``).
- ``duration``: the number of days (years count 365, months 30), format ``0 "days"`` (``0 "business days"``
  for business days), so the header stays the question; ``perpetual`` stays text.
- ``yes_no``: a boolean, TRUE / FALSE, distinct from the status texts "Yes" / "No" (clause present / absent).
- ``jurisdiction``, ``parties``, ``choice``: the value's display text alone, pages on the linked citations, so
  the autofilter lists each value once.

Any other cell (a ``text`` column, a cell not found, uncertain or failed, a value of an unexpected shape) shows
its text as before: status, short answer, pages.

Every string of every sheet, the header rows included, goes through `docpipe.sheets` (`append_row`,
`append_typed_row`): a string cell, never a formula, and text that starts like one (a question
"=HYPERLINK(...)", a document name, a quote) keeps its characters with Excel's quote-prefix mark. A typed
cell is a number, a boolean or a date made from a normalized value, never text. Sheet titles go through
`docpipe.sheets.sheet_title`.
"""

from __future__ import annotations

import io
import json
import math
import re
from typing import TYPE_CHECKING, Any, TypeGuard

from docpipe.errors import DependencyError
from docpipe.review.cells import verified_label
from docpipe.review.marks import MARK_FIELDS
from docpipe.review.pdfs import pdf_target
from docpipe.sheets import append_row, append_typed_row, sheet_title, xml_text
from docpipe.terms.calendar import calendar_date

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from datetime import date

    from docpipe.review.cells import Cell, Column, ReviewManifest, Row
    from docpipe.review.marks import Mark
    from docpipe.types import Citation

__all__ = ["DATE_FORMAT", "PERCENT_FORMAT", "excel_value", "grid_workbook", "money_format"]

DATE_FORMAT = "yyyy-mm-dd"
PERCENT_FORMAT = "0.0##%"
_SYMBOLS = {"USD": "$", "EUR": "\u20ac", "GBP": "\u00a3"}
_CURRENCY = re.compile(r"[A-Z]{3}")
_FILLS = {
    "present": "C6EFCE",
    "absent": "EDEDED",
    "uncertain": "FFEB9C",
    "candidate": "DDEBF7",
    "not_found": "EDEDED",
    "failed": "FFC7CE",
}
_CITATION_FIELDS = (
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
)
_ID_HEADER = "Document ID (SHA-256)"
_MARK_BORDERS = {"accepted": "00B050", "corrected": "FFC000", "flagged": "FF0000"}


def money_format(currency: str) -> str:
    """Returns the number format of an amount in `currency` (ISO 4217, "" for none): ``"$"#,##0.00``."""
    sign = _SYMBOLS.get(currency, f"{currency} " if currency else "")
    return f'"{sign}"#,##0.00' if sign else "#,##0.00"


def excel_value(cell: Cell) -> tuple[bool | int | float | date, str] | None:
    """Returns a ``present`` typed cell's value as Excel holds it and its number format (see the module
    docstring); None for a cell shown as text."""
    value = cell.value
    if cell.status != "present" or value is None:
        return None
    normalized = value.normalized
    if value.kind == "date":
        day = calendar_date(value)
        return (day, DATE_FORMAT) if day is not None else None
    if value.kind == "money" and isinstance(normalized, dict):
        amount, currency = normalized.get("amount"), normalized.get("currency", "")
        if _number(amount) and isinstance(currency, str) and (not currency or _CURRENCY.fullmatch(currency)):
            return float(amount), money_format(currency)
    if value.kind == "percent" and _number(normalized):
        return round(normalized / 100, 12), PERCENT_FORMAT  # round: 7.1 / 100 is 0.07100000000000001
    if value.kind == "duration" and isinstance(normalized, dict) and not normalized.get("perpetual"):
        days = normalized.get("days")
        if _number(days):
            unit = "business days" if "business" in str(normalized.get("unit", "")) else "days"
            if float(days).is_integer():
                return int(days), f'0 "{unit}"'
            return float(days), f'0.0 "{unit}"'
    if value.kind == "yes_no" and isinstance(normalized, bool):
        return normalized, "General"
    return None


def _number(x: object) -> TypeGuard[int | float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _shown(cell: Cell) -> str:
    """Returns the text of a cell not written as an Excel type."""
    if cell.status == "present" and cell.value is not None:
        return cell.value.display
    return cell.text


def grid_workbook(
    rows: Sequence[Row],
    columns: Sequence[Column],
    cells: Sequence[Sequence[Cell]],
    *,
    manifest: ReviewManifest,
    summary: dict[str, Any],
    marks: Mapping[tuple[str, str], Mark] | None = None,
    pdfs: Mapping[str, str] | None = None,
) -> bytes:
    """Returns the .xlsx bytes of a review grid's `rows` x `columns` (`ReviewGrid.to_xlsx`; see the module
    docstring), with the reviewers' `marks` by (document id, column key) and links into the `pdfs` copied
    beside it (document id: relative path)."""
    marks, pdfs = marks or {}, pdfs or {}
    try:
        from openpyxl import Workbook
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
        from openpyxl.utils import get_column_letter
        from openpyxl.worksheet.hyperlink import Hyperlink
    except ImportError as exc:  # a dependency of docpipe: missing only in a broken install
        raise DependencyError("openpyxl is missing: pip install openpyxl (a dependency of docpipe)") from exc

    book = Workbook()
    sheet = book.active
    sheet.title = sheet_title("Review")
    citations = book.create_sheet(sheet_title("Citations"))
    provenance = book.create_sheet(sheet_title("Manifest"))
    bold = Font(bold=True)
    link = Font(color="0563C1", underline="single")
    wrap = Alignment(wrap_text=True, vertical="top")

    append_row(citations, _CITATION_FIELDS)
    first_row: dict[tuple[int, int], int] = {}
    for r, (row, row_cells) in enumerate(zip(rows, cells)):
        for c, (column, cell) in enumerate(zip(columns, row_cells)):
            first_row[(r, c)] = citations.max_row + 1
            value = cell.value
            quotes: list[Citation | None] = list(cell.quotes) or [None]
            for quote in quotes:
                values = [
                    row.name,
                    column.key,
                    cell.status,
                    cell.answer,
                    value.display if value is not None else "",
                    value.as_written if value is not None else "",
                    cell.derivation,
                    " ".join(quote.quote.split()) if quote else "",
                    quote.pages if quote else "",
                    (quote.heading or quote.section_id) if quote else "",
                    verified_label(quote) if quote else "",
                    cell.note,
                ]
                number = append_row(citations, values)
                if quote is not None and quote.highlight:
                    _bold_within(citations.cell(row=number, column=_QUOTE_COLUMN), quote.highlight)
                if quote is not None and row.document_id in pdfs:
                    pages = citations.cell(row=number, column=_PAGES_COLUMN)
                    page = quote.page_start if quote.unit == "page" else None
                    pages.hyperlink = pdf_target(pdfs[row.document_id], page)  # relative: beside the workbook
                    pages.font = link
    _table(citations, bold=bold, wrap=wrap, freeze="B2", bounds=(8, 60))

    marked: list[tuple[Row, Column, Mark, str]] = []
    append_row(sheet, ["Document", *(c.key for c in columns), _ID_HEADER])
    for r, (row, row_cells) in enumerate(zip(rows, cells)):
        typed = [excel_value(cell) for cell in row_cells]
        shown = [t[0] if t is not None else _shown(cell) for t, cell in zip(typed, row_cells)]
        excel_row = append_typed_row(sheet, [row.name, *shown, row.document_id])
        for c, (cell, excel) in enumerate(zip(row_cells, typed)):
            target = sheet.cell(row=excel_row, column=c + 2)
            if excel is not None:
                target.number_format = excel[1]
            target.fill = PatternFill("solid", fgColor=_FILLS[cell.status])
            # An internal link (a location, not a URL): Excel and LibreOffice jump to the cell's citations.
            where = f"'{citations.title}'!A{first_row[(r, c)]}"
            target.hyperlink = Hyperlink(ref=target.coordinate, location=where)
            target.font = link
            mark = marks.get((row.document_id, columns[c].key))
            if mark is not None:
                target.comment = Comment(xml_text(f"{mark.text}, {mark.when}"), xml_text(mark.user)[:60])
                side = Side(style="medium", color=_MARK_BORDERS.get(mark.status, "000000"))
                target.border = Border(left=side, right=side, top=side, bottom=side)
                marked.append((row, columns[c], mark, target.coordinate))
    _table(sheet, bold=bold, wrap=wrap, freeze="B2", bounds=(10, 48))
    # The hash is for matching files, not for reading: a hidden last column (unhide it to match files).
    last = get_column_letter(sheet.max_column)
    sheet.column_dimensions[last].width = 18
    sheet.column_dimensions[last].hidden = True
    for cell in sheet[last][1:]:
        cell.alignment = Alignment(vertical="top")

    append_row(provenance, ["Field", "Value"])
    for key, value in [*manifest.to_dict().items(), *(("summary." + k, v) for k, v in summary.items())]:
        append_row(provenance, [key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)])
    for cell in provenance[1]:
        cell.font = bold

    if marked:
        _marks_sheet(book.create_sheet(sheet_title("Marks")), marked, review=sheet.title, link=link)
        _table(book["Marks"], bold=bold, wrap=wrap, freeze="C2", bounds=(10, 60))

    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


_QUOTE_COLUMN = _CITATION_FIELDS.index("Quote") + 1
_PAGES_COLUMN = _CITATION_FIELDS.index("Pages") + 1


def _marks_sheet(sheet: Any, marked: list[tuple[Row, Column, Mark, str]], *, review: str, link: Any) -> None:
    """Fills the "Marks" sheet: one row per marked cell, its column linking to the cell on the grid."""
    from openpyxl.worksheet.hyperlink import Hyperlink

    append_row(sheet, MARK_FIELDS)
    for row, column, mark, coordinate in marked:
        number = append_row(
            sheet, [row.name, column.key, mark.label, mark.value or "", mark.comment, mark.user, mark.when]
        )
        where = sheet.cell(row=number, column=2)
        where.hyperlink = Hyperlink(ref=where.coordinate, location=f"'{review}'!{coordinate}")
        where.font = link


def _bold_within(cell: Any, part: str) -> None:
    """Makes `part` (the marked sentence) bold inside `cell`'s text, as rich text; a cell quote-prefixed against
    formulas, or that does not hold `part`, stays as it is."""
    from openpyxl.cell.rich_text import CellRichText, TextBlock
    from openpyxl.cell.text import InlineFont

    text, part = str(cell.value or ""), " ".join(part.split())
    at = text.find(part) if part else -1
    if at < 0 or cell.quotePrefix:
        return
    runs: list[Any] = [text[:at], TextBlock(InlineFont(b=True), part), text[at + len(part) :]]
    cell.value = CellRichText([run for run in runs if run])


def _table(sheet: Any, *, bold: Any, wrap: Any, freeze: str, bounds: tuple[int, int]) -> None:
    """Makes `sheet` a table a reviewer works in: bold header, autofilter over all of it, frozen header row and
    first column, text wrapped at the top of its cell, columns sized to their content within `bounds`."""
    from openpyxl.utils import get_column_letter

    for cell in sheet[1]:
        cell.font = bold
    for row in sheet.iter_rows():
        for cell in row:
            cell.alignment = wrap
    sheet.auto_filter.ref = f"A1:{get_column_letter(sheet.max_column)}{sheet.max_row}"
    sheet.freeze_panes = freeze
    for n, column in enumerate(sheet.iter_cols(values_only=True)):
        texts = [str(column[0])[:24], *map(_chars, column[1:])]  # a long header wraps rather than widens
        sheet.column_dimensions[get_column_letter(n + 1)].width = _width(texts, low=bounds[0], high=bounds[1])


def _chars(value: Any) -> str:
    """Returns about what a cell of `value` shows: an amount its digits, separators and sign."""
    if isinstance(value, float):
        return f"$ {value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,} days"
    return "" if value is None else str(value)


def _width(texts: Iterable[str], *, low: int, high: int) -> int:
    """Returns a column width (in characters) for `texts`: their longest line and a margin, within bounds;
    longer text wraps."""
    longest = max((len(line) for text in texts for line in text.splitlines()), default=0)
    return min(high, max(low, longest + 2))
