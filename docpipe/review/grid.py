"""The review grid: one row per document, one column per question, each cell an answer a reviewer can verify.

A `Cell` has a status as the checklist has them (``present`` / ``absent`` / ``uncertain`` with a language model;
``candidate`` / ``not_found`` without one) or ``failed`` (the document could not be read, or the engine failed
on the cell: the note says why). A cell is ``present`` only with a quote found verbatim in the sections the
model was given. Every (document, column) pair has a cell: nothing is silently missing.

A grid carries the reviewers' marks on its cells (`ReviewGrid.marks`, `docpipe.review.marks`: accepted,
corrected with the value, flagged, with a comment, who and when), and every export shows them: JSON a
``"mark"`` object per cell (null when unmarked); CSV a ``<column> - mark`` column after each question when the
grid has marks; Markdown the mark beside the cell and a "Reviewer marks" section; XLSX a "Marks" sheet and a
note and border on each marked cell.

Data and rendering only (the parts in `docpipe.review.cells`; JSON, CSV, Markdown here; XLSX in
`docpipe.review.xlsx`); `docpipe.review.run` fills the grids.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from docpipe.review.cells import CELL_LABELS, CELL_STATUSES, Cell, Column, ReviewManifest, Row, verified_label
from docpipe.review.marks import MARK_FIELDS, Mark
from docpipe.sheets import csv_text
from docpipe.storage.store import atomic_write

__all__ = [
    "CELL_LABELS",
    "CELL_STATUSES",
    "CITATION_FIELDS",
    "Cell",
    "Column",
    "Mark",
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
    #: The reviewers' marks on this grid's cells, by (document id, column key) (`attach_marks`).
    marks: dict[tuple[str, str], Mark] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.cells) != len(self.rows) or any(len(r) != len(self.columns) for r in self.cells):
            raise ValueError(
                f"a grid of {len(self.rows)} rows x {len(self.columns)} columns needs a cell for every pair"
            )

    def cell(self, row: int | str, column: int | str) -> Cell:
        """Returns the cell at `row` (index, document id or name) and `column` (index, key or question)."""
        return self.cells[self._row(row)][self._column(column)]

    def mark(self, row: int | str, column: int | str) -> Mark | None:
        """Returns the reviewer's mark on the cell at `row` and `column` (as `cell` takes them), or None."""
        return self.marks.get((self.rows[self._row(row)].document_id, self.columns[self._column(column)].key))

    def attach_marks(self, marks: Mapping[tuple[str, str], Mark]) -> ReviewGrid:
        """Returns this grid holding the marks (`MarkStore.marks`) of its own cells in place of those it had;
        marks of other documents or columns are left out."""
        cells = {(r.document_id, c.key) for r in self.rows if r.document_id for c in self.columns}
        self.marks = {key: mark for key, mark in marks.items() if key in cells}
        return self

    def marked(self) -> list[tuple[Row, Column, Mark]]:
        """Returns the marked cells in grid order: row, column, mark."""
        return [
            (row, column, self.marks[(row.document_id, column.key)])
            for row in self.rows
            for column in self.columns
            if (row.document_id, column.key) in self.marks
        ]

    def mark_rows(self) -> list[list[str]]:
        """Returns one row per marked cell, as `MARK_FIELDS` names them (document, column, mark, corrected
        value, comment, by, when in UTC)."""
        return [
            [row.name, column.key, mark.label, mark.value or "", mark.comment, mark.user, mark.when]
            for row, column, mark in self.marked()
        ]

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

    def summary_text(self, what: str = "questions") -> str:
        """Returns the one line that sums the grid up, the same after a printed table and a written file:
        ``3 documents x 41 questions = 123 cells: 120 done (45 from the cell cache), 3 failed, 60 with no such
        clause``."""
        summary = self.summary()

        def count(n: int, noun: str) -> str:
            return f"{n} {noun if n != 1 else noun.removesuffix('s')}"

        return (
            f"{count(len(self.rows), 'documents')} x {count(len(self.columns), what)} = "
            f"{count(summary['cells'], 'cells')}: {summary['done']} done ({summary['from_cache']} from the cell "
            f"cache), {summary['failed']} failed, {summary['not_found']} with no such clause"
        )

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
            "cells": [
                [{**cell.to_dict(), "mark": self._mark_dict(row, column)} for column, cell in zip(self.columns, cells)]
                for row, cells in zip(self.rows, self.cells)
            ],
            "summary": self.summary(),
            "manifest": self.manifest.to_dict(),
        }

    def _mark_dict(self, row: Row, column: Column) -> dict[str, Any] | None:
        mark = self.marks.get((row.document_id, column.key))
        return None if mark is None else {**mark.to_dict(), "when": mark.when}

    def to_json(self) -> str:
        """Returns the whole grid (rows, columns, every cell with its quotes and its reviewer's mark or null,
        the manifest) as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReviewGrid:
        marks = [Mark.from_dict(c["mark"]) for row in data["cells"] for c in row if isinstance(c.get("mark"), dict)]
        return cls(
            rows=[Row.from_dict(r) for r in data["rows"]],
            columns=[Column.from_dict(c) for c in data["columns"]],
            cells=[[Cell.from_dict(cell) for cell in row] for row in data["cells"]],
            manifest=ReviewManifest.from_dict(data["manifest"]),
            marks={(m.document_id, m.column): m for m in marks},
        )

    def to_csv(self) -> str:
        """Returns the grid as CSV: one row per document (its name and id), one column per question, each cell
        as a table shows it (`Cell.text`: a typed value's display, else the status and short answer; then the
        pages). `citations_csv` has the quotes, values as written and derivations. A grid with marks has a
        ``<column> - mark`` column after each question (`Mark.text`: status, corrected value, comment, who).
        Every field, the header's questions included, goes through `docpipe.sheets.cell_text` (no formula-led
        cell)."""
        if not self.marks:
            header = ["document", "document_id", *(c.key for c in self.columns)]
            rows = (
                [row.name, row.document_id, *(cell.text for cell in cells)] for row, cells in zip(self.rows, self.cells)
            )
            return csv_text(header, rows)
        header = ["document", "document_id", *(h for c in self.columns for h in (c.key, f"{c.key} - mark"))]
        marked = []
        for row, cells in zip(self.rows, self.cells):
            fields = [row.name, row.document_id]
            for column, cell in zip(self.columns, cells):
                mark = self.marks.get((row.document_id, column.key))
                fields += [cell.text, mark.text if mark is not None else ""]
            marked.append(fields)
        return csv_text(header, marked)

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
        """Returns the grid as a Markdown table (a marked cell ends with its mark: ``[Corrected: Delaware]``),
        then the failures, then the reviewers' marks, for a reviewer."""
        head = ["Document", *(c.key for c in self.columns)]
        lines = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
        for row, cells in zip(self.rows, self.cells):
            shown = [_md(cell.text + self._mark_sign(row, column)) for column, cell in zip(self.columns, cells)]
            lines.append("| " + " | ".join([_md(row.name), *shown]) + " |")
        lines.append("")
        lines.append(self.summary_text() + ".")
        for failure in self.summary()["failures"]:
            lines.append(f"- failed: {_md(failure)}")
        if self.marks:
            lines += ["", "Reviewer marks:", ""]
            lines += ["| " + " | ".join(MARK_FIELDS) + " |", "|" + "---|" * len(MARK_FIELDS)]
            lines += ["| " + " | ".join(_md(v) for v in fields) + " |" for fields in self.mark_rows()]
        return "\n".join(lines) + "\n"

    def _mark_sign(self, row: Row, column: Column) -> str:
        mark = self.marks.get((row.document_id, column.key))
        if mark is None:
            return ""
        return f" [{mark.label}" + (f": {mark.value}" if mark.value is not None else "") + "]"

    def to_xlsx(self, path: Any = None, *, pdfs: Mapping[str, str] | None = None) -> bytes:
        """Returns the grid as an Excel workbook (and writes it to `path` when given): see
        `docpipe.review.xlsx`. `pdfs` maps a document id to its PDF's path relative to the workbook
        (`docpipe.review.pdfs.copy_pdfs` copies them beside it): each citation's pages then link to
        ``<path>#page=N``; without it nothing links outside the workbook."""
        from docpipe.review.xlsx import grid_workbook

        data = grid_workbook(
            self.rows,
            self.columns,
            self.cells,
            manifest=self.manifest,
            summary=self.summary(),
            marks=self.marks,
            pdfs=pdfs,
        )
        if path is not None:
            from pathlib import Path

            atomic_write(Path(path), data)  # 0600: an export holds privileged text
        return data


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
