"""The parts of a review grid: its columns (`Column`, typed by kind), rows (`Row`), cells (`Cell`, with the
statuses and their labels, and a typed value) and what made it (`ReviewManifest`); `docpipe.review.grid.ReviewGrid`
holds them. Plain data, below the stages that fill cells (`docpipe.terms`, `docpipe.review`).

A `Cell` has a status as the checklist has them (``present`` / ``absent`` / ``uncertain`` with a language model;
``candidate`` / ``not_found`` without one) or ``failed`` (the document could not be read, or the engine failed
on the cell: the note says why). A cell is ``present`` only with a quote found verbatim in the sections the
model was given.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from docpipe.types import Citation
from docpipe.values.kinds import Value

__all__ = ["CELL_LABELS", "CELL_STATUSES", "Cell", "Column", "ReviewManifest", "Row", "verified_label"]

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
    # What its cells hold (`docpipe.values.kinds.KINDS`): ``text`` (the decisive sentence) or a typed value.
    kind: str = "text"
    options: tuple[str, ...] = ()  # a ``choice`` column's options
    term: str = ""  # a built-in key term (`docpipe.terms.catalog`): its id, read by that term's reader
    # Offline: the clause score a text cell's best clause needs to be a candidate (None: the analysis setting).
    min_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = list(self.options)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Column:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["options"] = tuple(fields.get("options", ()))
        return cls(**fields)


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
    # A typed column's value (`docpipe.values.kinds.Value`), read from the verified quotes; None when the cell
    # has none (not found, or dropped to uncertain: the note says why).
    value: Value | None = None
    derivation: str = ""  # a computed value's working: "2014-05-08 + 5 years = 2019-05-08"

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
        """Returns the cell as a table shows it: a typed value (``New York (p. 12)``), else the status and the
        short answer (offline: the decisive sentence, cut to a line), then the pages."""
        if self.value is not None:
            text = (
                self.value.display if self.status == "present" else f"{CELL_LABELS[self.status]} - {self.value.display}"
            )
        else:
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
            "value": self.value.to_dict() if self.value is not None else None,
            "derivation": self.derivation,
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
            value=Value.from_dict(data["value"]) if data.get("value") else None,
            derivation=data.get("derivation", ""),
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


def verified_label(quote: Citation) -> str:
    """Returns how a quote was checked, for a table: yes, yes (OCR: check the scan), no."""
    if not quote.verified:
        return "no"
    return "yes (OCR: check the scan)" if quote.ocr else "yes"
