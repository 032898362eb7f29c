"""A review grid as the Data room tab shows it: the table (finished, or filling in while the grid runs) and one
cell for reading, everything escaped and clipped to what a table cell holds."""

from __future__ import annotations

import html
from typing import Any

from docpipe import ReviewGrid
from docpipe.review.grid import CELL_LABELS

__all__ = ["TABLE_CELL_CHARS", "cell_html", "grid_table", "progress_table"]

TABLE_CELL_CHARS = 300


def _headers(grid_columns: list[str]) -> list[str]:
    """Returns the table's headers: Document, then the columns' keys (made unique for the table)."""
    seen: set[str] = {"Document"}
    headers = ["Document"]
    for key in grid_columns:
        label, n = key, 2
        while label in seen:
            label, n = f"{key} ({n})", n + 1
        seen.add(label)
        headers.append(label)
    return headers


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TABLE_CELL_CHARS else text[: TABLE_CELL_CHARS - 3] + "..."


def grid_table(grid: ReviewGrid) -> dict[str, Any]:
    """Returns the finished grid as the table shows it: one row per document, each cell's status, short answer
    and pages."""
    rows = [[_clip(row.name), *(_clip(cell.text) for cell in cells)] for row, cells in zip(grid.rows, grid.cells)]
    return {"headers": _headers([c.key for c in grid.columns]), "data": rows}


def progress_table(names: list[str], columns: list[str], cells: dict[tuple[int, int], str]) -> dict[str, Any]:
    """Returns the table while the grid runs: each finished cell as the finished grid shows it, the others
    "..."."""
    rows = [
        [_clip(name), *(_clip(cells.get((r, c), "...")) for c in range(len(columns)))] for r, name in enumerate(names)
    ]
    return {"headers": _headers(columns), "data": rows}


def cell_html(grid: ReviewGrid, r: int, c: int) -> str:
    """Returns one cell for reading: document and question, status and short answer, note, each quote with its
    pages and whether it was found verbatim; everything escaped."""
    row, column, cell = grid.rows[r], grid.columns[c], grid.cells[r][c]
    parts = [
        f"<p><b>{html.escape(row.name)}</b> &mdash; {html.escape(column.key)}</p>",
        f"<p><b>{html.escape(CELL_LABELS.get(cell.status, cell.status))}</b>"
        + (f": {html.escape(cell.answer)}" if cell.answer else "")
        + "</p>",
    ]
    if cell.note:
        parts.append(f"<p><small>{html.escape(cell.note)}</small></p>")
    if cell.quotes:
        items = "".join(
            f"<li>{html.escape(q.pages if q.page_start else '?')} {'&#10003;' if q.verified else '&#10007; not verified'}"
            f"<pre>{html.escape(q.quote)}</pre></li>"
            for q in cell.quotes
        )
        parts.append(f'<ol class="dp-quotes">{items}</ol>')
    else:
        parts.append("<p><i>No quote for this cell.</i></p>")
    return "".join(parts)
