"""A review grid as the Data room tab shows it: the table (finished, or filling in while the grid runs), the
key-terms table, and one cell for reading, everything escaped and clipped to what a table cell holds.

A finished table is a `gr.Dataframe` value with two layers: what each cell shows (``metadata.display_value``)
and what the table sorts and filters by (``data``). A cell of a typed column sorts by its normalized value,
written so that text order is value order (the Dataframe compares short columns' cells as plain text): a date
as ISO ``2019-05-07``, a duration as its days and an amount as its size, zero-padded (``000000365.00 days``,
``000001000000.00 USD``), a percent likewise (``000012.5000%``); the column menu's "Filter as number" reads
those numbers. A jurisdiction, the parties, a choice or a yes/no sort and filter by the value as shown, so
"Is Delaware" keeps the rows whose governing law is Delaware. A cell without a value sorts and filters by its
status (``Not found``, ``Uncertain``), after every value.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from docpipe.review.grid import CELL_LABELS

if TYPE_CHECKING:
    from docpipe import ReviewGrid
    from docpipe.review.grid import Cell

__all__ = [
    "TABLE_CELL_CHARS",
    "cell_html",
    "grid_table",
    "progress_table",
    "sort_key",
    "terms_table",
    "value_text",
]

TABLE_CELL_CHARS = 300


def _headers(grid_columns: list[str], first: str = "Document") -> list[str]:
    """Returns the table's headers: `first`, then the columns' keys (made unique for the table)."""
    seen: set[str] = {first}
    headers = [first]
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


def value_text(cell: Cell) -> str:
    """Returns what a key-terms table shows of a cell: its value as displayed (``2019-05-07``, ``New York``), a
    text column's short answer, else its status (``Not found``); a value that is not ``present`` is marked
    with its status (``Candidate - Delaware``)."""
    if cell.value is not None:
        shown = cell.value.display
    elif cell.status in ("present", "candidate") and cell.answer:
        shown = cell.answer
    else:
        return CELL_LABELS.get(cell.status, cell.status)
    return shown if cell.status == "present" else f"{CELL_LABELS.get(cell.status, cell.status)} - {shown}"


def sort_key(cell: Cell) -> str:
    """Returns what the table sorts and filters a cell by (see the module docstring)."""
    value = cell.value
    if value is None or cell.status not in ("present", "candidate"):
        return _clip(value_text(cell))
    normalized = value.normalized
    if value.kind == "date" and isinstance(normalized, str):
        return normalized
    if value.kind == "duration" and isinstance(normalized, dict) and _number(normalized.get("days")):
        return f"{float(normalized['days']):012.2f} days"
    if value.kind == "money" and isinstance(normalized, dict) and _number(normalized.get("amount")):
        return f"{float(normalized['amount']):018.2f} {normalized.get('currency') or ''}".rstrip()
    if value.kind == "percent" and _number(normalized):
        return f"{float(normalized):011.4f}%"
    return _clip(value.display)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def grid_table(grid: ReviewGrid) -> dict[str, Any]:
    """Returns the finished grid as the table shows it: one row per document, each cell's status, short answer
    (a typed column: its value) and pages; typed columns sort and filter by value."""
    shown = [[_clip(row.name), *(_clip(cell.text) for cell in cells)] for row, cells in zip(grid.rows, grid.cells)]
    data = []
    for row, cells in zip(grid.rows, grid.cells):
        keys = [_clip(cell.text) if col.kind == "text" else sort_key(cell) for col, cell in zip(grid.columns, cells)]
        data.append([_clip(row.name), *keys])
    return {
        "headers": _headers([c.key for c in grid.columns]),
        "data": data,
        "metadata": {"display_value": shown},
    }


def terms_table(grid: ReviewGrid) -> dict[str, Any]:
    """Returns the key-terms table: one row per contract, one column per key term, each cell its value
    (`value_text`), sorted and filtered by value (`sort_key`)."""
    shown = [
        [_clip(row.name), *(_clip(value_text(cell)) for cell in cells)] for row, cells in zip(grid.rows, grid.cells)
    ]
    data = [[_clip(row.name), *(sort_key(cell) for cell in cells)] for row, cells in zip(grid.rows, grid.cells)]
    return {
        "headers": _headers([c.key for c in grid.columns], first="Contract"),
        "data": data,
        "metadata": {"display_value": shown},
    }


def progress_table(
    names: list[str], columns: list[str], cells: dict[tuple[int, int], str], *, first: str = "Document"
) -> dict[str, Any]:
    """Returns the table while the grid runs: each finished cell as the finished grid shows it, the others
    "..."."""
    rows = [
        [_clip(name), *(_clip(cells.get((r, c), "...")) for c in range(len(columns)))] for r, name in enumerate(names)
    ]
    return {"headers": _headers(columns, first), "data": rows}


def cell_html(grid: ReviewGrid, r: int, c: int) -> str:
    """Returns one cell for reading: document and question, status and short answer, a typed value (as shown,
    as written, and a computed value's derivation), note, each quote with its pages and whether it was found
    verbatim; everything escaped."""
    row, column, cell = grid.rows[r], grid.columns[c], grid.cells[r][c]
    parts = [
        f"<p><b>{html.escape(row.name)}</b> &mdash; {html.escape(column.key)}</p>",
        f"<p><b>{html.escape(CELL_LABELS.get(cell.status, cell.status))}</b>"
        + (f": {html.escape(cell.answer)}" if cell.answer else "")
        + "</p>",
    ]
    if cell.value is not None:
        parts.append(
            f'<p class="dp-value">Value ({html.escape(cell.value.kind.replace("_", " "))}): '
            f"<b>{html.escape(cell.value.display)}</b>"
            + (
                f" &mdash; as written: &ldquo;{html.escape(cell.value.as_written)}&rdquo;"
                if cell.value.as_written
                else ""
            )
            + "</p>"
        )
    if cell.derivation:
        parts.append(f'<p class="dp-derivation">Computed: {html.escape(cell.derivation)}</p>')
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
