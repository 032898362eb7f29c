"""A playbook applied to contracts: the verdict of every (contract, rule) pair, worst contracts first, and the
exports a reviewer hands over (JSON, CSV, Markdown; XLSX in `docpipe.playbook.xlsx`).

Contracts are ordered by what they need: the severity-weighted count of rules they deviate from or miss (a high
counts as 100 lows, a medium as 10), then the rules left for review, then by name. The summary per rule counts
each verdict, and the contracts that deviate or miss by severity.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe.cells import Row
from docpipe.playbook.judge import VERDICT_LABELS, VERDICTS, Verdict
from docpipe.playbook.schema import Playbook, parse_playbook
from docpipe.sheets import csv_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from docpipe.cells import ReviewManifest

__all__ = ["REPORT_FIELDS", "PlaybookReport"]

_WEIGHT = {"high": 100, "medium": 10, "low": 1}
#: The columns of `PlaybookReport.to_csv`: one row per (contract, rule).
REPORT_FIELDS: tuple[str, ...] = (
    "document",
    "document_id",
    "rule",
    "title",
    "severity",
    "verdict",
    "reason",
    "value",
    "pages",
    "quote",
    "fallback",
)


@dataclass(slots=True)
class PlaybookReport:
    """`verdicts[r][k]` is rule `playbook.rules[k]` on contract `rows[r]`; `manifest` is the review grid's that
    the verdicts were read from."""

    playbook: Playbook
    rows: list[Row]
    verdicts: list[list[Verdict]]
    manifest: ReviewManifest
    seconds: float = 0.0

    def verdict(self, row: int | str, rule: str) -> Verdict:
        """Returns the verdict of rule id `rule` on the row at index `row`, or of the document with that id or
        name."""
        k = next(i for i, r in enumerate(self.playbook.rules) if r.id == rule)
        if isinstance(row, int):
            return self.verdicts[row][k]
        r = next(i for i, x in enumerate(self.rows) if row in (x.document_id, x.name))
        return self.verdicts[r][k]

    def weight(self, r: int) -> tuple[int, int]:
        """Returns row `r`'s (severity-weighted deviations and misses, rules left for review)."""
        bad = sum(
            _WEIGHT[rule.severity]
            for rule, v in zip(self.playbook.rules, self.verdicts[r])
            if v.status in ("deviates", "missing")
        )
        return bad, sum(v.status == "needs_review" for v in self.verdicts[r])

    def order(self) -> list[int]:
        """Returns the row indexes, worst contract first (module docstring)."""
        weights = [self.weight(r) for r in range(len(self.rows))]
        return sorted(
            range(len(self.rows)),
            key=lambda r: (-weights[r][0], -weights[r][1], self.rows[r].name.casefold()),
        )

    def counts(self) -> dict[str, int]:
        """Returns how many (contract, rule) pairs have each verdict."""
        found = Counter(v.status for row in self.verdicts for v in row)
        return {status: found.get(status, 0) for status in VERDICTS}

    def rule_summary(self) -> list[dict[str, Any]]:
        """Returns per rule: id, title, severity, the count of each verdict and the share of contracts that
        deviate or miss."""
        out = []
        for k, rule in enumerate(self.playbook.rules):
            found = Counter(row[k].status for row in self.verdicts)
            bad = found["deviates"] + found["missing"]
            out.append(
                {
                    "rule": rule.id,
                    "title": rule.title,
                    "severity": rule.severity,
                    **{status: found.get(status, 0) for status in VERDICTS},
                    "deviating_share": round(bad / len(self.rows), 4) if self.rows else 0.0,
                }
            )
        return out

    def summary_text(self) -> str:
        """Returns one line: contracts and rules, then the count of each verdict and the high-severity ones."""
        counts = self.counts()
        high = sum(
            1
            for row in self.verdicts
            for rule, v in zip(self.playbook.rules, row)
            if rule.severity == "high" and v.status in ("deviates", "missing")
        )
        return (
            f"{len(self.rows)} contract{'' if len(self.rows) == 1 else 's'} x {len(self.playbook.rules)} rules of "
            f"{self.playbook.name}: "
            f"{counts['deviates']} deviate, {counts['missing']} missing ({high} of high severity), "
            f"{counts['needs_review']} need review, {counts['meets']} meet."
        )

    def to_dict(self) -> dict[str, Any]:
        """Returns the report as JSON-ready data, contracts worst first: each with its verdicts by rule id."""
        return {
            "playbook": {**self.playbook.to_dict(), "text": self.playbook.text},
            "summary": {"counts": self.counts(), "rules": self.rule_summary(), "text": self.summary_text()},
            "contracts": [
                {
                    **self.rows[r].to_dict(),
                    "weight": self.weight(r)[0],
                    "verdicts": {rule.id: v.to_dict() for rule, v in zip(self.playbook.rules, self.verdicts[r])},
                }
                for r in self.order()
            ],
            "manifest": self.manifest.to_dict(),
            "seconds": round(self.seconds, 2),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlaybookReport:
        """Returns the report `to_dict` gave (the playbook parsed again from its text when the data holds it)."""
        from docpipe.cells import ReviewManifest
        from docpipe.playbook.schema import Bound, Rule

        book = data["playbook"]
        if book.get("text"):
            playbook = parse_playbook(
                book["text"], source=book.get("source", "playbook"), default_name=book.get("name", "playbook")
            )
        else:
            rules = []
            for r in book["rules"]:
                fields = {
                    k: v for k, v in r.items() if k in Rule.__dataclass_fields__ and k not in ("at_least", "at_most")
                }
                fields["allowed"] = tuple(r.get("allowed", ()))
                fields["is_"] = r.get("is")
                fields["expect"] = None if r.get("expect") is None else r["expect"] == "yes"
                for side in ("at_least", "at_most"):
                    if r.get(side):
                        fields[side] = Bound(**r[side])
                rules.append(Rule(**fields))
            playbook = Playbook(
                name=book["name"],
                rules=tuple(rules),
                description=book.get("description", ""),
                version=book.get("version", ""),
                owner=book.get("owner", ""),
                source=book.get("source", ""),
                sha256=book.get("sha256", ""),
            )
        rows, verdicts = [], []
        for contract in data["contracts"]:
            rows.append(Row.from_dict(contract))
            verdicts.append([Verdict.from_dict(contract["verdicts"][rule.id]) for rule in playbook.rules])
        return cls(playbook, rows, verdicts, ReviewManifest.from_dict(data["manifest"]), data.get("seconds", 0.0))

    def table_rows(self) -> list[dict[str, str]]:
        """Returns one row per (contract, rule), contracts worst first (`REPORT_FIELDS`)."""
        out = []
        for r in self.order():
            row = self.rows[r]
            for rule, v in zip(self.playbook.rules, self.verdicts[r]):
                quote = next((q for q in v.quotes if q.verified), None)
                out.append(
                    {
                        "document": row.name,
                        "document_id": row.document_id,
                        "rule": rule.id,
                        "title": rule.title,
                        "severity": rule.severity,
                        "verdict": VERDICT_LABELS[v.status],
                        "reason": v.reason,
                        "value": v.value.display if v.value is not None else "",
                        "pages": v.pages,
                        "quote": " ".join(quote.quote.split()) if quote else "",
                        "fallback": rule.fallback if v.status in ("deviates", "missing") else "",
                    }
                )
        return out

    def to_csv(self) -> str:
        """Returns the report as CSV, one row per (contract, rule) (`REPORT_FIELDS`), every cell made safe for a
        spreadsheet (`docpipe.sheets.csv_text`)."""
        return csv_text(list(REPORT_FIELDS), [[r[f] for f in REPORT_FIELDS] for r in self.table_rows()])

    def to_markdown(self) -> str:
        """Returns the report as Markdown: the summary line, the count of each verdict per rule (for more than one
        contract), then each contract, worst first, one line per rule, worst verdicts first: the verdict, the
        rule, its pages and reason; a deviation or a missing term with its quote and the fallback wording."""
        lines = [f"# {_md(self.playbook.name)}", "", self.summary_text(), ""]
        if len(self.rows) > 1:
            lines += ["## Rules", "", "| rule | severity | deviates | missing | needs review | meets |"]
            lines.append("|---|---|---|---|---|---|")
            for s in self.rule_summary():
                lines.append(
                    f"| {_md(s['title'])} (`{s['rule']}`) | {s['severity']} | {s['deviates']} | {s['missing']} | "
                    f"{s['needs_review']} | {s['meets']} |"
                )
            lines.append("")
        for r in self.order():
            row = self.rows[r]
            lines += [f"## {_md(row.name)}", ""]
            if row.error:
                lines += [f"Could not be read: {_md(row.error)}", ""]
            pairs = sorted(
                zip(self.playbook.rules, self.verdicts[r]), key=lambda p: (_RANK[p[1].status], _SEVERITY[p[0].severity])
            )
            for rule, v in pairs:
                where = f" ({v.pages})" if v.pages else ""
                lines.append(f"- {_SIGN[v.status]}: {_md(rule.title)} ({rule.severity}){where}. {_md(v.reason)}")
                if v.status in ("deviates", "missing"):
                    quote = next((q for q in v.quotes if q.verified), None)
                    if quote is not None:
                        lines.append(f"  > {_md(quote.quote[:600])}")
                    if rule.fallback:
                        lines.append(f"  Fallback: {_md(rule.fallback)}")
            lines.append("")
        return "\n".join(lines)

    def to_xlsx(self, path: Any = None, *, pdfs: Mapping[str, str] | None = None) -> bytes:
        """Returns the report as an Excel workbook (and writes it, 0600, to `path` when given): see
        `docpipe.playbook.xlsx`."""
        from docpipe.playbook.xlsx import report_workbook
        from docpipe.storage.store import atomic_write

        data = report_workbook(self, pdfs=pdfs)
        if path is not None:
            from pathlib import Path

            atomic_write(Path(path), data)
        return data


_SEVERITY = {"high": 0, "medium": 1, "low": 2}
_RANK = {"deviates": 0, "missing": 1, "needs_review": 2, "meets": 3}
_SIGN = {"meets": "✓ Meets", "deviates": "✗ Deviates", "missing": "– Missing", "needs_review": "? Needs review"}


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
