"""A review grid as an Excel workbook (openpyxl), the form due-diligence teams pass around.

- Sheet "Review": one row per document, one column per question; each cell shows the status, the short answer
  and the pages, is coloured by status, and links to its first row on the "Citations" sheet.
- Sheet "Citations": one row per quote (document, question, status, answer, quote, pages, section, verified,
  note), and one row for a cell without quotes, so every cell is accounted for.
- Sheet "Manifest": the grid's provenance (engine, model, settings, which cells came from the cache).

Every cell of every sheet, the header rows included, is written by `docpipe.sheets.append_row`: a string
cell, never a formula, and text that starts like one (a question "=HYPERLINK(...)", a document name, a quote)
keeps its characters with Excel's quote-prefix mark. Sheet titles go through `docpipe.sheets.sheet_title`.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

from docpipe.errors import DependencyError
from docpipe.review.cells import verified_label
from docpipe.sheets import append_row, sheet_title

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from docpipe.review.cells import Cell, Column, ReviewManifest, Row
    from docpipe.types import Citation

__all__ = ["grid_workbook"]

_FILLS = {
    "present": "C6EFCE",
    "absent": "EDEDED",
    "uncertain": "FFEB9C",
    "candidate": "DDEBF7",
    "not_found": "EDEDED",
    "failed": "FFC7CE",
}
_CITATION_FIELDS = ("document", "question", "status", "answer", "quote", "pages", "section", "verified", "note")


def grid_workbook(
    rows: Sequence[Row],
    columns: Sequence[Column],
    cells: Sequence[Sequence[Cell]],
    *,
    manifest: ReviewManifest,
    summary: dict[str, Any],
) -> bytes:
    """Returns the .xlsx bytes of a review grid's `rows` x `columns` (`ReviewGrid.to_xlsx`; see the module
    docstring)."""
    try:
        from openpyxl import Workbook
        from openpyxl.styles import Alignment, Font, PatternFill
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

    append_row(citations, [f.capitalize() for f in _CITATION_FIELDS])
    first_row: dict[tuple[int, int], int] = {}
    for r, (row, row_cells) in enumerate(zip(rows, cells)):
        for c, (column, cell) in enumerate(zip(columns, row_cells)):
            first_row[(r, c)] = citations.max_row + 1
            quotes: list[Citation | None] = list(cell.quotes) or [None]
            for quote in quotes:
                values = [
                    row.name,
                    column.key,
                    cell.status,
                    cell.answer,
                    " ".join(quote.quote.split()) if quote else "",
                    quote.pages if quote else "",
                    quote.section_id if quote else "",
                    verified_label(quote) if quote else "",
                    cell.note,
                ]
                append_row(citations, values)
    for cell in citations[1]:
        cell.font = bold
    citations.freeze_panes = "A2"

    append_row(sheet, ["Document", "Document ID", *(c.key for c in columns)])
    for cell in sheet[1]:
        cell.font = bold
        cell.alignment = Alignment(wrap_text=True, vertical="top")
    for r, (row, row_cells) in enumerate(zip(rows, cells)):
        excel_row = append_row(sheet, [row.name, row.document_id, *(cell.text for cell in row_cells)])
        for c, cell in enumerate(row_cells):
            target = sheet.cell(row=excel_row, column=c + 3)
            target.fill = PatternFill("solid", fgColor=_FILLS[cell.status])
            target.alignment = Alignment(wrap_text=True, vertical="top")
            # An internal link (a location, not a URL): Excel and LibreOffice jump to the cell's citations.
            where = f"'{citations.title}'!A{first_row[(r, c)]}"
            target.hyperlink = Hyperlink(ref=target.coordinate, location=where)
            target.font = link
    sheet.freeze_panes = "C2"
    sheet.column_dimensions["A"].width = 40
    sheet.column_dimensions["B"].width = 14
    for c in range(len(columns)):
        sheet.column_dimensions[sheet.cell(row=1, column=c + 3).column_letter].width = 28

    append_row(provenance, ["Field", "Value"])
    for key, value in [*manifest.to_dict().items(), *(("summary." + k, v) for k, v in summary.items())]:
        append_row(provenance, [key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)])
    for cell in provenance[1]:
        cell.font = bold

    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
