"""The review grid: one row per document, one column per question, each cell an answer a reviewer can verify.

A `Cell` has a status as the checklist has them (``present`` / ``absent`` / ``uncertain`` with a language model;
``candidate`` / ``not_found`` without one) or ``failed`` (the document could not be read, or the engine failed
on the cell: the note says why). A cell is ``present`` only with a quote found verbatim in the sections the
model was given. Every (document, column) pair has a cell: nothing is silently missing.

Data and rendering only (JSON, CSV, Markdown here; XLSX in `docpipe.review.xlsx`); `docpipe.review.run`
fills the grids.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from docpipe.sheets import csv_text
from docpipe.types import Citation

__all__ = ["CELL_LABELS", "CELL_STATUSES", "Cell", "Column", "ReviewGrid", "ReviewManifest", "Row", "verified_label"]

CellStatus = Literal["present", "absent", "uncertain", "candidate", "not_found", "failed"]
CELL_STATUSES: tuple[str, ...] = ("present", "absent", "uncertain", "candidate", "not_found", "failed")

# How a status reads in a table cell.
CELL_LABELS = {
    "present": "Yes",
    "absent": "No",
    "uncertain": "Uncertain",
    "candidate": "Candidate",
    "not_found": "Not found",
    "failed": "Failed",
}


@dataclass(frozen=True, slots=True)
class Column:
    """One question of the grid: its `key` (the checklist category's name, or the question itself), the
    question put to the model, and what retrieval searches for (`query`: the question plus the wording such
    clauses use, for a checklist category)."""

    key: str
    question: str
    query: str
    group: str = ""
    note: str = ""  # for a checklist category: what the model's note should say
    category: bool = False  # a checklist category (else a free question)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Column:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Row:
    """One document of the grid: its id (SHA-256, "" when it could not be read) and the name it is seen under;
    `error` says why its cells failed, if they did."""

    document_id: str
    name: str
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(slots=True)
class Cell:
    """One answer of the grid: status, a short answer (a few words, from the model), verified quotes with
    pages, a note, the sections searched, and whether it came from the cell cache."""

    status: CellStatus
    answer: str = ""
    quotes: list[Citation] = field(default_factory=list)
    note: str = ""
    searched: list[str] = field(default_factory=list)  # section ids given for this cell
    score: float | None = None  # offline: the best clause score
    thinking: str | None = None
    cached: bool = False

    @property
    def verified(self) -> list[Citation]:
        """Returns the quotes found verbatim in the document."""
        return [q for q in self.quotes if q.verified]

    @property
    def pages(self) -> str:
        """Returns the pages of the verified quotes, e.g. ``p. 3; pp. 9-10``."""
        return "; ".join(dict.fromkeys(q.pages for q in self.verified))

    @property
    def text(self) -> str:
        """Returns the cell as a table shows it: the status, the short answer, the pages."""
        text = CELL_LABELS[self.status] + (f" - {self.answer}" if self.answer else "")
        return text + (f" ({self.pages})" if self.pages else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "answer": self.answer,
            "quotes": [q.to_dict() for q in self.quotes],
            "pages": self.pages,
            "note": self.note,
            "searched": self.searched,
            "score": self.score,
            "thinking": self.thinking,
            "cached": self.cached,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        return cls(
            status=data["status"],
            answer=data.get("answer", ""),
            quotes=[Citation.from_dict(q) for q in data.get("quotes", [])],
            note=data.get("note", ""),
            searched=list(data.get("searched", [])),
            score=data.get("score"),
            thinking=data.get("thinking"),
            cached=bool(data.get("cached", False)),
        )


@dataclass(slots=True)
class ReviewManifest:
    """The provenance of a whole grid: what was asked of which documents, how, by which model and settings,
    and which cells came from the cell cache (row, column indexes)."""

    engine: str
    model: str | None
    model_revision: str | None
    mode: str  # think | no_think | auto (with a model); extractive without
    layout: str
    prompt_version: str
    settings_fingerprint: str
    index_fingerprint: str
    collection: str = ""
    matter: str | None = None
    documents_sha256: tuple[str, ...] = ()
    created: str = ""
    finished: str = ""
    seconds: float = 0.0
    cells: int = 0
    cached_cells: list[tuple[int, int]] = field(default_factory=list)
    # Tokens of the cells computed in this run (not those from the cell cache): prompt, generated, and the
    # prompt tokens the engine's prefix cache served (None when the engine does not report it).
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prefix_cached_tokens: int | None = None
    docpipe_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["documents_sha256"] = list(self.documents_sha256)
        data["cached_cells"] = [list(rc) for rc in self.cached_cells]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReviewManifest:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["documents_sha256"] = tuple(fields.get("documents_sha256", ()))
        fields["cached_cells"] = [(int(r), int(c)) for r, c in fields.get("cached_cells", [])]
        return cls(**fields)


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
        as a table shows it (status, short answer, pages). `citations_csv` has the quotes. Every field, the
        header's questions included, goes through `docpipe.sheets.cell_text` (no formula-led cell)."""
        header = ["document", "document_id", *(c.key for c in self.columns)]
        rows = (
            [row.name, row.document_id, *(cell.text for cell in cells)] for row, cells in zip(self.rows, self.cells)
        )
        return csv_text(header, rows)

    def citation_rows(self) -> list[dict[str, str]]:
        """Returns one row per quote of every cell (document, question, status, quote, pages, section, verified),
        and one row for each cell without a quote (its note), so every cell is accounted for."""
        rows: list[dict[str, str]] = []
        for row, cells in zip(self.rows, self.cells):
            for column, cell in zip(self.columns, cells):
                base = {
                    "document": row.name,
                    "document_id": row.document_id,
                    "question": column.key,
                    "status": cell.status,
                    "answer": cell.answer,
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
        fields = ["document", "document_id", "question", "status", "answer", "quote", "pages", "section"]
        return csv_text([*fields, "verified", "note"], self.citation_rows())

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

        data = grid_workbook(self)
        if path is not None:
            from pathlib import Path

            Path(path).write_bytes(data)
        return data


def verified_label(quote: Citation) -> str:
    """Returns how a quote was checked, for a table: yes, yes (OCR: check the scan), no."""
    if not quote.verified:
        return "no"
    return "yes (OCR: check the scan)" if quote.ocr else "yes"


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
