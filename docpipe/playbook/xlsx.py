"""A playbook report as an Excel workbook (openpyxl).

- Sheet "Summary": one row per rule (id, title, severity, what it tests, how many contracts meet, deviate, miss
  or need review, the share that deviate or miss), ordered high severity first, then by that share; under it, the
  deviating and missing contracts per severity.
- Sheet "Verdicts": one row per contract, worst first, its name first, one column per rule (headed by the rule's
  title), each cell the verdict's word coloured by it (green meets, red deviates, orange missing, amber needs
  review) with a note holding the reason, linked to its first row on "Citations"; the document's SHA-256 last,
  hidden. Frozen header and name, an autofilter, readable widths.
- Sheet "Citations": one row per quote a verdict rests on (contract, rule, severity, verdict, reason, value,
  quote with the PDF's line breaks folded and the marked words in bold, pages, section, fallback wording for a
  deviation), and one row for a verdict without quotes, so every verdict is accounted for. With `pdfs` (the
  documents copied beside the workbook) each quote's pages link to its PDF at that page.
- Sheet "Playbook": the rules as written (id, title, severity, test, fallback, note) and the playbook's
  name, version and SHA-256.

Every string goes through `docpipe.sheets` (never a formula).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from docpipe.errors import DependencyError
from docpipe.playbook.judge import VERDICT_LABELS
from docpipe.review.pdfs import pdf_target
from docpipe.review.xlsx import _bold_within, _table
from docpipe.sheets import append_row, append_typed_row, sheet_title, xml_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from docpipe.types import Citation

__all__ = ["VERDICT_FILLS", "report_workbook"]

#: The fill of a verdict's cell: green meets, red deviates, orange missing, amber needs review.
VERDICT_FILLS = {"meets": "C6EFCE", "deviates": "FFC7CE", "missing": "F8CBAD", "needs_review": "FFEB9C"}
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}
_CITATION_FIELDS = (
    "Document",
    "Rule",
    "Severity",
    "Verdict",
    "Reason",
    "Value",
    "Quote",
    "Pages",
    "Section",
    "Fallback",
)
_QUOTE = _CITATION_FIELDS.index("Quote") + 1
_PAGES = _CITATION_FIELDS.index("Pages") + 1


def report_workbook(report: Any, *, pdfs: Mapping[str, str] | None = None) -> bytes:
    """Returns the .xlsx bytes of `report`, a `docpipe.playbook.report.PlaybookReport` (see the module
    docstring; the report imports this module, not the other way round)."""
    pdfs = pdfs or {}
    try:
        from openpyxl import Workbook
        from openpyxl.comments import Comment
        from openpyxl.styles import Alignment, Font, PatternFill
        from openpyxl.utils import get_column_letter
        from openpyxl.worksheet.hyperlink import Hyperlink
    except ImportError as exc:  # a dependency of docpipe: missing only in a broken install
        raise DependencyError("openpyxl is missing: pip install openpyxl (a dependency of docpipe)") from exc

    rules = report.playbook.rules
    book = Workbook()
    summary = book.active
    summary.title = sheet_title("Summary")
    verdicts = book.create_sheet(sheet_title("Verdicts"))
    citations = book.create_sheet(sheet_title("Citations"))
    written = book.create_sheet(sheet_title("Playbook"))
    bold = Font(bold=True)
    link = Font(color="0563C1", underline="single")
    wrap = Alignment(wrap_text=True, vertical="top")
    order = report.order()

    append_row(
        summary,
        ["Rule", "Title", "Severity", "Test", "Meets", "Deviates", "Missing", "Needs review", "Deviating share"],
    )
    per_rule = sorted(
        zip(rules, report.rule_summary()),
        key=lambda pair: (_SEVERITY_ORDER[pair[0].severity], -pair[1]["deviating_share"], pair[0].id),
    )
    for rule, figures in per_rule:
        number = append_typed_row(
            summary,
            [
                rule.id,
                rule.title,
                rule.severity,
                rule.test,
                figures["meets"],
                figures["deviates"],
                figures["missing"],
                figures["needs_review"],
                figures["deviating_share"],
            ],
        )
        summary.cell(row=number, column=9).number_format = "0%"
    _table(summary, bold=bold, wrap=wrap, freeze="C2", bounds=(8, 60))
    summary.append([])
    append_row(summary, ["Severity", "Contracts deviating or missing", "Pairs deviating", "Pairs missing"])
    summary.cell(row=summary.max_row, column=1).font = bold
    for severity in ("high", "medium", "low"):
        ks = [k for k, r in enumerate(rules) if r.severity == severity]
        bad_rows = sum(any(report.verdicts[r][k].status in ("deviates", "missing") for k in ks) for r in order)
        deviating = sum(report.verdicts[r][k].status == "deviates" for r in order for k in ks)
        missing = sum(report.verdicts[r][k].status == "missing" for r in order for k in ks)
        append_typed_row(summary, [severity, bad_rows, deviating, missing])

    append_row(citations, _CITATION_FIELDS)
    first_row: dict[tuple[int, int], int] = {}
    for r in order:
        row = report.rows[r]
        for k, (rule, verdict) in enumerate(zip(rules, report.verdicts[r])):
            first_row[(r, k)] = citations.max_row + 1
            fallback = rule.fallback if verdict.status in ("deviates", "missing") else ""
            quotes: list[Citation | None] = list(verdict.quotes) or [None]
            for quote in quotes:
                number = append_row(
                    citations,
                    [
                        row.name,
                        rule.title,
                        rule.severity,
                        verdict.label,
                        verdict.reason,
                        verdict.value.display if verdict.value is not None else "",
                        " ".join(quote.quote.split()) if quote else "",
                        quote.pages if quote else "",
                        (quote.heading or quote.section_id) if quote else "",
                        fallback,
                    ],
                )
                citations.cell(row=number, column=4).fill = PatternFill("solid", fgColor=VERDICT_FILLS[verdict.status])
                if quote is not None and quote.highlight:
                    _bold_within(citations.cell(row=number, column=_QUOTE), quote.highlight)
                if quote is not None and row.document_id in pdfs:
                    pages = citations.cell(row=number, column=_PAGES)
                    pages.hyperlink = pdf_target(
                        pdfs[row.document_id], quote.page_start if quote.unit == "page" else None
                    )
                    pages.font = link
    _table(citations, bold=bold, wrap=wrap, freeze="C2", bounds=(8, 60))

    append_row(verdicts, ["Document", *(f"{r.title} ({r.severity})" for r in rules), "Document ID (SHA-256)"])
    for r in order:
        row = report.rows[r]
        number = append_row(verdicts, [row.name, *(v.label for v in report.verdicts[r]), row.document_id])
        for k, verdict in enumerate(report.verdicts[r]):
            cell = verdicts.cell(row=number, column=k + 2)
            cell.fill = PatternFill("solid", fgColor=VERDICT_FILLS[verdict.status])
            cell.comment = Comment(xml_text(verdict.reason)[:2000], "docpipe")
            cell.hyperlink = Hyperlink(ref=cell.coordinate, location=f"'{citations.title}'!A{first_row[(r, k)]}")
            cell.font = link
    _table(verdicts, bold=bold, wrap=wrap, freeze="B2", bounds=(10, 28))
    last = get_column_letter(verdicts.max_column)
    verdicts.column_dimensions[last].hidden = True

    append_row(written, ["Rule", "Title", "Severity", "Test", "Fallback", "Note"])
    for rule in rules:
        append_row(written, [rule.id, rule.title, rule.severity, rule.test, rule.fallback, rule.note])
    _table(written, bold=bold, wrap=wrap, freeze="B2", bounds=(8, 60))
    book_meta = report.playbook
    written.append([])
    for key, value in (("Playbook", book_meta.name), ("Version", book_meta.version), ("SHA-256", book_meta.sha256)):
        append_row(written, [key, value])

    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


assert set(VERDICT_FILLS) == set(VERDICT_LABELS)
