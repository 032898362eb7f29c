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

What a cell shows is HTML (the tables' datatype): its status as a symbol and a word on a background colour
(`STATUS_STYLES`, explained by `legend_html`; never colour alone), its answer or typed value, the decisive
sentence (the sentence of the verified quote that decided the cell) and the reviewer's mark, if any. A long
document name is shortened (`short_name`) with the full name in its ``title``, so the columns stay on screen.
Rows are in document-name order (`by_name`), the same on every run.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from docpipe.review.grid import CELL_LABELS
from docpipe.review.marks import MARK_LABELS

if TYPE_CHECKING:
    from docpipe import ReviewGrid
    from docpipe.review.grid import Cell, Column
    from docpipe.review.marks import Mark

__all__ = [
    "MARK_STYLES",
    "NAME_CHARS",
    "STATUS_STYLES",
    "TABLE_CELL_CHARS",
    "by_name",
    "cell_display",
    "cell_html",
    "decisive_sentence",
    "grid_table",
    "legend_html",
    "name_order",
    "progress_table",
    "short_name",
    "sort_key",
    "terms_table",
    "value_text",
]

TABLE_CELL_CHARS = 300
NAME_CHARS = 36  # a longer document name is shortened in the tables (the full name on hover)
SENTENCE_CHARS = 240  # the decisive sentence, as a table cell shows it

# Status -> (symbol, what the legend says, background): the symbol and the word carry the meaning, the colour
# helps the eye. Statuses that mean the same to a reviewer share a colour.
STATUS_STYLES: dict[str, tuple[str, str, str]] = {
    "present": ("\u2713", "Found: a verified quote decides it", "#d3f2dc"),
    "candidate": ("?", "Candidate: to check", "#fdf0c4"),
    "uncertain": ("?", "Uncertain: to check", "#fdf0c4"),
    "absent": ("\u2013", "No: the contract has no such clause", "#e8ebef"),
    "not_found": ("\u2013", "Not found", "#e8ebef"),
    "failed": ("!", "Failed: the cell says why", "#fbd9d6"),
}
# A reviewer's mark (`docpipe.review.marks.MARK_STATUSES`) -> its symbol in a cell's badge.
MARK_STYLES = {"accepted": "\u2714", "corrected": "\u270e", "flagged": "\u2691"}
_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+(?=[\"'(\[A-Z0-9])")


def by_name(grid: ReviewGrid) -> ReviewGrid:
    """Returns `grid` with its rows (and their cells) in document-name order, case folded, then by id: the
    same order on every run, whatever order the documents were added in."""
    order = name_order([row.name for row in grid.rows], [row.document_id for row in grid.rows])
    return replace(grid, rows=[grid.rows[i] for i in order], cells=[grid.cells[i] for i in order])


def name_order(names: list[str], ids: list[str] | None = None) -> list[int]:
    """Returns the indexes of `names` in the order the tables show them (see `by_name`)."""
    keys = ids if ids is not None else [""] * len(names)
    return sorted(range(len(names)), key=lambda i: (names[i].casefold(), names[i], keys[i]))


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    """Returns `name` on one line, at most `limit` characters: a longer one keeps its start and its end (the
    extension, a date or a number there tells similar names apart) around an ellipsis.

    >>> short_name("LIMEENERGYCO_09_09_1999-EX-10-DISTRIBUTOR AGREEMENT.pdf")
    'LIMEENERGYCO_09_09_1999…GREEMENT.pdf'
    """
    flat = " ".join(name.split())
    if len(flat) <= limit:
        return flat
    tail = max(limit // 3, 1)
    return flat[: limit - tail - 1] + "\u2026" + flat[-tail:]


def _name_html(name: str) -> str:
    shown = short_name(name)
    title = f' title="{html.escape(" ".join(name.split()))}"' if shown != " ".join(name.split()) else ""
    return f'<span class="dp-name"{title}>{html.escape(shown)}</span>'


def _status_html(status: str) -> str:
    symbol, meaning, _colour = STATUS_STYLES.get(status, ("", status, ""))
    return f'<span class="dp-sym" title="{html.escape(meaning)}">{symbol}</span> '


def _styling(status: str) -> str:
    colour = STATUS_STYLES.get(status, ("", "", ""))[2]
    return f"background-color: {colour}; color: #1f2328;" if colour else ""


def legend_html() -> str:
    """Returns the grid's legend: each status's colour, symbol and meaning, and the reviewer's marks."""
    seen: set[tuple[str, str]] = set()
    items = []
    for status, (symbol, meaning, colour) in STATUS_STYLES.items():
        if (symbol, colour) in seen and status in ("uncertain", "absent"):
            meaning = f"{CELL_LABELS[status]} (with a model)"
        seen.add((symbol, colour))
        items.append(
            f'<li class="dp-legend-{status}"><span class="dp-swatch" style="background-color: {colour}">'
            f"{symbol}</span> {html.escape(meaning)}</li>"
        )
    marks = " ".join(
        f'<span class="dp-mark dp-mark-{m}">{symbol} {MARK_LABELS[m]}</span>' for m, symbol in MARK_STYLES.items()
    )
    return f'<ul class="dp-legend" aria-label="What the colours mean">{"".join(items)}</ul>' + (
        f'<p class="dp-legend-marks">Reviewer marks: {marks}</p>'
    )


def decisive_sentence(cell: Cell) -> str:
    """Returns the sentence that decided `cell`: the highlight of its first verified quote, widened to the
    whole sentence of the quote that holds it when it is only a value's words (``State of Delaware``); ""
    when no verified quote has one."""
    for quote in cell.verified:
        highlight = " ".join((quote.highlight or "").split())
        text = " ".join(quote.quote.split())
        if not highlight:
            continue
        for sentence in _SENTENCE_END.split(text):
            if highlight in sentence:
                return sentence if len(sentence) >= len(highlight) else highlight
        return highlight
    return ""


def _clip_to(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "\u2026"


def _mark_html(mark: Mark | None) -> str:
    if mark is None:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(mark.time))
    title = f"{mark.text}, {when}"
    value = f": {_clip_to(mark.value, 80)}" if mark.value is not None else ""
    return (
        f'<span class="dp-mark dp-mark-{html.escape(mark.status)}" title="{html.escape(title)}">'
        f"{MARK_STYLES.get(mark.status, '')} {html.escape(mark.label + value)}</span>"
    )


def cell_display(column: Column, cell: Cell, mark: Mark | None = None) -> str:
    """Returns a grid cell as the table shows it (HTML, escaped): the status's symbol, the cell's text (a
    typed value, else the status and short answer; the pages), the decisive sentence when the text does not
    hold it already, and the reviewer's mark."""
    text = _clip(cell.text)
    parts = [_status_html(cell.status), html.escape(text)]
    sentence = decisive_sentence(cell) if cell.status != "failed" else ""
    if sentence and sentence[:60] not in " ".join(cell.answer.split()):
        parts.append(
            f'<br><span class="dp-decisive">\u201c{html.escape(_clip_to(sentence, SENTENCE_CHARS))}\u201d</span>'
        )
    if mark is not None:
        parts.append(_mark_html(mark))
    return "".join(parts)


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


def grid_table(grid: ReviewGrid, marks: Mapping[tuple[str, str], Mark] | None = None) -> dict[str, Any]:
    """Returns the finished grid as the table shows it: one row per document (in the grid's order: see
    `by_name`), each cell coloured by status (`cell_display`), with its reviewer's mark from `marks` (by
    document id and column key; None: the grid's own, `ReviewGrid.marks`); typed columns sort and filter by
    value."""
    marks = marks if marks is not None else grid.marks
    shown, styles, data = [], [], []
    for row, cells in zip(grid.rows, grid.cells):
        shown.append(
            [
                _name_html(row.name),
                *(
                    cell_display(col, cell, marks.get((row.document_id, col.key)))
                    for col, cell in zip(grid.columns, cells)
                ),
            ]
        )
        styles.append(["", *(_styling(cell.status) for cell in cells)])
        keys = [_clip(cell.text) if col.kind == "text" else sort_key(cell) for col, cell in zip(grid.columns, cells)]
        data.append([_clip(row.name), *keys])
    return {
        "headers": _headers([c.key for c in grid.columns]),
        "data": data,
        "metadata": {"display_value": shown, "styling": styles},
    }


def terms_table(grid: ReviewGrid) -> dict[str, Any]:
    """Returns the key-terms table: one row per contract, one column per key term, each cell its value
    (`value_text`), sorted and filtered by value (`sort_key`)."""
    shown = [
        [_name_html(row.name), *(html.escape(_clip(value_text(cell))) for cell in cells)]
        for row, cells in zip(grid.rows, grid.cells)
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
    shown = [[_name_html(name), *(html.escape(cell) for cell in row[1:])] for name, row in zip(names, rows)]
    return {"headers": _headers(columns, first), "data": rows, "metadata": {"display_value": shown}}


def cell_html(grid: ReviewGrid, r: int, c: int, mark: Mark | None = None) -> str:
    """Returns one cell for reading: document and question, status and short answer, a typed value (as shown,
    as written, and a computed value's derivation), the decisive sentence, note, the reviewer's `mark`, each
    quote with its pages and whether it was found verbatim; everything escaped."""
    row, column, cell = grid.rows[r], grid.columns[c], grid.cells[r][c]
    parts = [
        f"<p><b>{html.escape(row.name)}</b> &mdash; {html.escape(column.key)}</p>",
        f"<p>{_status_html(cell.status)}<b>{html.escape(CELL_LABELS.get(cell.status, cell.status))}</b>"
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
    sentence = decisive_sentence(cell)
    if sentence:
        parts.append(f'<p class="dp-decisive">Decided by: &ldquo;{html.escape(sentence)}&rdquo;</p>')
    if mark is not None:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(mark.time))
        comment = f" &mdash; {html.escape(mark.comment)}" if mark.comment else ""
        parts.append(
            f'<p class="dp-cell-mark">Reviewer mark: {_mark_html(mark)}{comment} '
            f"<small>({html.escape(mark.user)}, {when})</small></p>"
        )
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
