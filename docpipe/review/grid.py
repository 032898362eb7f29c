"""The review grid: one row per document, one column per question, each cell an answer a reviewer can verify.

A `Cell` has a status as the checklist has them (``present`` / ``absent`` / ``uncertain`` with a language model;
``candidate`` / ``not_found`` without one) or ``failed`` (the document could not be read, or the engine failed
on the cell: the note says why). A cell is ``present`` only with a quote found verbatim in the sections the
model was given. Every (document, column) pair has a cell: nothing is silently missing.

Data and rendering only (the parts in `docpipe.review.cells`; JSON, CSV, Markdown here; XLSX in
`docpipe.review.xlsx`); `docpipe.review.run` fills the grids.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from docpipe.review.cells import CELL_LABELS, CELL_STATUSES, Cell, Column, ReviewManifest, Row, verified_label
from docpipe.sheets import csv_text
from docpipe.storage.store import atomic_write

__all__ = [
    "CELL_LABELS",
    "CELL_STATUSES",
    "CITATION_FIELDS",
    "Cell",
    "Column",
    "ReviewGrid",
    "ReviewManifest",
    "Row",
    "verified_label",
]

#: The columns of `ReviewGrid.citations_csv`, in order (the "Citations" sheet's, with the document's id).
CITATION_FIELDS: tuple[str, ...] = (
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
)


@dataclass(slots=True)
class ReviewGrid:
    """Documents x questions: `cells[r][c]` answers `columns[c]` about `rows[r]`, with the grid's manifest.

    >>> grid = dp.review(dp.collection("deal-x"), questions=["Governing law?"])   # doctest: +SKIP
    >>> grid.cell(0, "Governing law?").status, grid.summary()["done"]              # doctest: +SKIP
    ('present', 12)
    """

    rows: list[Row]
    columns: list[Column]
    cells: list[list[Cell]]
    manifest: ReviewManifest

    def __post_init__(self) -> None:
        if len(self.cells) != len(self.rows) or any(len(r) != len(self.columns) for r in self.cells):
            raise ValueError(
                f"a grid of {len(self.rows)} rows x {len(self.columns)} columns needs a cell for every pair"
            )

    def cell(self, row: int | str, column: int | str) -> Cell:
        """Returns the cell at `row` (index, document id or name) and `column` (index, key or question)."""
        return self.cells[self._row(row)][self._column(column)]

    def _row(self, row: int | str) -> int:
        if isinstance(row, int):
            return row
        for i, r in enumerate(self.rows):
            if row in (r.document_id, r.name):
                return i
        raise KeyError(f"no row {row!r} in this grid: rows are {', '.join(r.name for r in self.rows)}")

    def _column(self, column: int | str) -> int:
        if isinstance(column, int):
            return column
        for i, c in enumerate(self.columns):
            if column in (c.key, c.question):
                return i
        raise KeyError(f"no column {column!r} in this grid: columns are {', '.join(c.key for c in self.columns)}")

    def summary(self) -> dict[str, Any]:
        """Returns the counts a reviewer reads first: cells, done (not failed), per status, from cache, and the
        failures with their reasons (one line per failed document, or per failed cell)."""
        counts: Counter[str] = Counter(cell.status for row in self.cells for cell in row)
        failures: list[str] = []
        for row, cells in zip(self.rows, self.cells):
            if row.error:
                failures.append(f"{row.name}: {row.error}")
                continue
            for column, cell in zip(self.columns, cells):
                if cell.status == "failed":
                    failures.append(f"{row.name} / {column.key}: {cell.note}")
        total = len(self.rows) * len(self.columns)
        return {
            "cells": total,
            "done": total - counts["failed"],
            "failed": counts["failed"],
            "not_found": counts["not_found"] + counts["absent"],
            "statuses": {s: counts[s] for s in CELL_STATUSES if counts[s]},
            "from_cache": sum(cell.cached for row in self.cells for cell in row),
            "failures": failures,
        }

    # -- exports ---------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": 1,
            "rows": [r.to_dict() for r in self.rows],
            "columns": [c.to_dict() for c in self.columns],
            "cells": [[cell.to_dict() for cell in row] for row in self.cells],
            "summary": self.summary(),
            "manifest": self.manifest.to_dict(),
        }

    def to_json(self) -> str:
        """Returns the whole grid (rows, columns, every cell with its quotes, the manifest) as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReviewGrid:
        return cls(
            rows=[Row.from_dict(r) for r in data["rows"]],
            columns=[Column.from_dict(c) for c in data["columns"]],
            cells=[[Cell.from_dict(cell) for cell in row] for row in data["cells"]],
            manifest=ReviewManifest.from_dict(data["manifest"]),
        )

    def to_csv(self) -> str:
        """Returns the grid as CSV: one row per document (its name and id), one column per question, each cell
        as a table shows it (`Cell.text`: a typed value's display, else the status and short answer; then the
        pages). `citations_csv` has the quotes, values as written and derivations. Every field, the
        header's questions included, goes through `docpipe.sheets.cell_text` (no formula-led cell)."""
        header = ["document", "document_id", *(c.key for c in self.columns)]
        rows = (
            [row.name, row.document_id, *(cell.text for cell in cells)] for row, cells in zip(self.rows, self.cells)
        )
        return csv_text(header, rows)

    def citation_rows(self) -> list[dict[str, str]]:
        """Returns one row per quote of every cell (document, question, status, answer, the typed value as shown,
        its words as written and the derivation of a computed one, quote, pages, section, verified, note), and
        one row for each cell without a quote (its note), so every cell is accounted for."""
        rows: list[dict[str, str]] = []
        for row, cells in zip(self.rows, self.cells):
            for column, cell in zip(self.columns, cells):
                base = {
                    "document": row.name,
                    "document_id": row.document_id,
                    "question": column.key,
                    "status": cell.status,
                    "answer": cell.answer,
                    "value": cell.value.display if cell.value is not None else "",
                    "as_written": cell.value.as_written if cell.value is not None else "",
                    "derivation": cell.derivation,
                }
                if not cell.quotes:
                    rows.append({**base, "quote": "", "pages": "", "section": "", "verified": "", "note": cell.note})
                for quote in cell.quotes:
                    rows.append(
                        {
                            **base,
                            "quote": " ".join(quote.quote.split()),
                            "pages": quote.pages,
                            "section": quote.section_id,
                            "verified": verified_label(quote),
                            "note": cell.note,
                        }
                    )
        return rows

    def citations_csv(self) -> str:
        """Returns `citation_rows` as CSV, every field through `docpipe.sheets.cell_text`."""
        return csv_text(CITATION_FIELDS, self.citation_rows())

    def to_markdown(self) -> str:
        """Returns the grid as a Markdown table, then the failures, for a reviewer."""
        head = ["Document", *(c.key for c in self.columns)]
        lines = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
        for row, cells in zip(self.rows, self.cells):
            lines.append("| " + " | ".join([_md(row.name), *(_md(cell.text) for cell in cells)]) + " |")
        summary = self.summary()
        lines.append("")
        lines.append(
            f"{summary['cells']} cells: {summary['done']} done, {summary['failed']} failed, "
            f"{summary['not_found']} with no such clause; {summary['from_cache']} from the cell cache."
        )
        for failure in summary["failures"]:
            lines.append(f"- failed: {_md(failure)}")
        return "\n".join(lines) + "\n"

    def to_xlsx(self, path: Any = None) -> bytes:
        """Returns the grid as an Excel workbook (and writes it to `path` when given): see
        `docpipe.review.xlsx`."""
        from docpipe.review.xlsx import grid_workbook

        data = grid_workbook(self.rows, self.columns, self.cells, manifest=self.manifest, summary=self.summary())
        if path is not None:
            from pathlib import Path

            atomic_write(Path(path), data)  # 0600: an export holds privileged text
        return data


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
