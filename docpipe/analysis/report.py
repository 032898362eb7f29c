"""The contract-analysis report: one `CategoryFinding` per checklist category and the `ContractReport` that
holds them with the audit manifest, and how they render (JSON, CSV, a reviewer's Markdown table).

Statuses: ``present`` (a quote backing it was found verbatim in the sections the model was given), ``absent``
(those sections were searched and held no such clause), ``uncertain``; without a language model, ``candidate``
(best-matching sentences, for a reviewer) or ``not_found``. Data and rendering only: `docpipe.analysis.analyze`
makes the reports.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from docpipe.audit import AuditManifest
from docpipe.sheets import csv_text
from docpipe.types import Citation, Hit

__all__ = ["STATUS_LABELS", "CategoryFinding", "ContractReport", "Status"]

Status = Literal["present", "absent", "uncertain", "candidate", "not_found"]

STATUS_LABELS = {
    "present": "yes",
    "absent": "no (searched, none found)",
    "uncertain": "uncertain",
    "candidate": "candidate (review)",
    "not_found": "no candidate found",
}


@dataclass(slots=True)
class CategoryFinding:
    """One checklist row: the category, its status, verbatim quotes with pages, a note, what was searched."""

    category: str
    group: str
    question: str
    status: Status
    quotes: list[Citation]
    note: str
    searched: list[dict[str, Any]]
    thinking: str | None = None
    score: float | None = None
    # The context that went to the model (not serialised: `searched` summarises it).
    hits: list[Hit] = field(default_factory=list, repr=False)

    @property
    def pages(self) -> str:
        """Returns the pages of the verified quotes, e.g. ``p. 3; pp. 9-10``."""
        seen: list[str] = []
        for quote in self.quotes:
            if quote.verified and quote.pages not in seen:
                seen.append(quote.pages)
        return "; ".join(seen)

    @property
    def clause(self) -> str:
        """Returns the verified quotes joined, for a table cell."""
        return " […] ".join(" ".join(q.quote.split()) for q in self.quotes if q.verified)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "group": self.group,
            "question": self.question,
            "status": self.status,
            "quotes": [q.to_dict() for q in self.quotes],
            "pages": self.pages,
            "note": self.note,
            "searched": self.searched,
            "thinking": self.thinking,
            "score": self.score,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CategoryFinding:
        return cls(
            category=data["category"],
            group=data.get("group", "-"),
            question=data.get("question", ""),
            status=data["status"],
            quotes=[Citation.from_dict(q) for q in data["quotes"]],
            note=data.get("note", ""),
            searched=data.get("searched", []),
            thinking=data.get("thinking"),
            score=data.get("score"),
        )


@dataclass(slots=True)
class ContractReport:
    """A checklist report for one contract: a finding per category, with its audit manifest. Its `id` is a
    hash of its content; it renders as JSON, CSV rows or a reviewer's Markdown table.

    >>> report = dp.analyze("contract.pdf", ["Governing Law"])   # doctest: +SKIP
    >>> report.findings[0].status, report.findings[0].pages     # doctest: +SKIP
    ('candidate', 'p. 12')
    >>> print(report.to_markdown())                              # doctest: +SKIP
    """

    document_id: str
    document_name: str
    mode: Literal["generative", "extractive"]
    findings: list[CategoryFinding]
    manifest: AuditManifest
    seconds: float = 0.0
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            body = json.dumps(self._body(), sort_keys=True, ensure_ascii=False).encode()
            self.id = hashlib.sha256(body).hexdigest()[:24]

    def _body(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "document_name": self.document_name,
            "mode": self.mode,
            "findings": [f.to_dict() for f in self.findings],
            "manifest": self.manifest.to_dict(),
            "seconds": self.seconds,
        }

    def finding(self, category: str) -> CategoryFinding:
        """Returns the finding for `category` (case-insensitive); KeyError if it was not analysed."""
        for item in self.findings:
            if item.category.casefold() == category.casefold():
                return item
        raise KeyError(category)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **self._body()}

    def to_json(self) -> str:
        """Returns the whole report (findings, quotes, searched sections, manifest) as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContractReport:
        return cls(
            document_id=data["document_id"],
            document_name=data["document_name"],
            mode=data["mode"],
            findings=[CategoryFinding.from_dict(f) for f in data["findings"]],
            manifest=AuditManifest.from_dict(data["manifest"]),
            seconds=data.get("seconds", 0.0),
            id=data.get("id", ""),
        )

    def rows(self) -> list[dict[str, str]]:
        """Returns one flat row per category: category, status, clause (verified quotes), pages, note."""
        return [
            {
                "category": f.category,
                "status": f.status,
                "clause": f.clause,
                "pages": f.pages,
                "note": f.note,
            }
            for f in self.findings
        ]

    def to_csv(self) -> str:
        """Returns the rows as CSV with a header line, every field through `docpipe.sheets.cell_text`: a clause
        that starts like a formula is text, never something a spreadsheet computes."""
        return csv_text(["category", "status", "clause", "pages", "note"], self.rows(), lineterminator="\n")

    def to_markdown(self) -> str:
        """Returns a reviewer's table in Markdown, with how the report was made underneath."""
        heading = "Candidates for review" if self.mode == "extractive" else "Clause checklist"
        lines = [f"# {heading}: {self.document_name}", ""]
        if self.mode == "extractive":
            lines += [
                "No language model was configured: each row shows the sentences that best match the category, "
                "for a reviewer to judge. They are candidates, not findings.",
                "",
            ]
        lines += ["| Category | Found | Clause | Pages | Note |", "|---|---|---|---|---|"]
        for f in self.findings:
            clause = f.clause
            if len(clause) > 400:
                clause = clause[:400].rstrip() + " …"
            cells = [f.category, STATUS_LABELS[f.status], clause, f.pages, f.note]
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        m = self.manifest
        lines += [
            "",
            f"Document SHA-256 `{m.document_sha256}` · engine {m.engine}"
            + (f" · model {m.model} ({m.model_revision})" if m.model else "")
            + f" · settings `{m.settings_fingerprint}` · {m.created} · report `{self.id}`",
        ]
        return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
