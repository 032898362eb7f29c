"""How the workbench shows things: pure functions from docpipe's results to escaped HTML, table rows and
report files. Nothing here touches Gradio, so all of it is tested without a browser. Model output and file
names are always escaped: neither can inject markup or load images.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docpipe import Answer, ContractReport, Document
from docpipe.names import clean_upload_name
from docpipe.storage.store import atomic_write
from docpipe.summary import document_summary

__all__ = [
    "CSS",
    "FOUND_LABELS",
    "REPORT_FORMATS",
    "answer_html",
    "citation_rows",
    "describe_collection",
    "describe_doc",
    "describe_error",
    "doc_label",
    "error_html",
    "highlight",
    "report_rows",
    "report_summary",
    "source_html",
    "streaming_html",
    "write_report_files",
]

# How the checklist's statuses read in the table (docpipe.ContractReport: present, absent, ...).
FOUND_LABELS = {
    "present": "yes",
    "absent": "no",
    "uncertain": "uncertain",
    "candidate": "candidate (review)",
    "not_found": "no candidate found",
}
REPORT_FORMATS = (("csv", "CSV"), ("json", "JSON"), ("md", "Markdown"))

CSS = """
#source-panel pre, #answer-text pre { white-space: pre-wrap; font-family: inherit; margin: 0; }
#source-panel mark { background: #ffe066; color: inherit; padding: 0 1px; }
.dp-ok { color: #1a7f37; } .dp-err { color: #c62828; } .dp-warn { color: #9a6700; }
.dp-legend { display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; padding: 0; margin: 0; }
.dp-swatch, .dp-mark { display: inline-block; min-width: 1.4em; padding: 0 4px; border-radius: 3px;
  text-align: center; color: #1f2328; border: 1px solid #c8ccd1; }
.dp-sym { font-weight: bold; }
.dp-decisive { display: block; font-style: italic; margin-top: 2px; }
.dp-mark { margin-left: 4px; font-size: 0.9em; white-space: nowrap; }
.dp-mark-accepted { background: #cfe8ff; } .dp-mark-corrected { background: #e9d8fd; }
.dp-mark-flagged { background: #ffd8a8; }
.dp-legend-marks { margin: 4px 0 0 0; }
"""


def doc_label(doc: Document) -> str:
    """Returns a document's label in the pickers: name, pages and the start of its id."""
    return f"{doc.name} ({len(doc.pages)} pages, {doc.id[:8]})"


def describe_doc(doc: Document) -> str:
    """Returns the upload result for a document: name, pages, sections, pages with text, per-page warnings."""
    summary = document_summary(doc)
    pages = summary["pages"]
    plural = "s" if pages != 1 else ""
    parts = [
        (
            f'<div class="dp-ok"><b>&#10003; {html.escape(summary["name"])}</b>: {pages} page{plural}, '
            f"{summary['sections']} sections, {summary['pages_with_text']} of {pages} pages with text</div>"
        )
    ]
    warnings = [warning["message"] for warning in summary["warnings"]]
    if warnings:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in warnings[:50])
        more = f"<li>... and {len(warnings) - 50} more</li>" if len(warnings) > 50 else ""
        parts.append(f'<ul class="dp-warn">{items}{more}</ul>')
    return "".join(parts)


def describe_collection(name: str, added: int, present: int, failed: int) -> str:
    """Returns the headline of an upload into a collection: how many files joined, were there, failed."""
    kind = "dp-ok" if not failed else "dp-warn"
    return (
        f'<div class="{kind}"><b>Collection {html.escape(name)}</b>: {added} added, {present} already in it, '
        f"{failed} failed</div>"
    )


def describe_error(name: str, message: str) -> str:
    """Returns an upload's error line: the file's name and what went wrong, escaped."""
    return f'<div class="dp-err"><b>&#10007; {html.escape(name)}</b>: {html.escape(message)}</div>'


_BOLD = re.compile(r"\*\*(.+?)\*\*", re.DOTALL)


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def highlight(text: str, quote: str) -> str:
    """Returns `text` HTML-escaped with the first whitespace-insensitive occurrence of `quote` in <mark>."""
    words = quote.split()
    match = None
    if words:
        pattern = r"\s+".join(re.escape(word) for word in words)
        match = re.search(pattern, text)
    if match is None:
        return html.escape(text)
    return (
        html.escape(text[: match.start()])
        + "<mark>"
        + html.escape(match.group(0))
        + "</mark>"
        + html.escape(text[match.end() :])
    )


def citation_rows(answer: Answer) -> list[list[str]]:
    """Returns one row per citation: document, heading, pages (a Word file's paragraphs: ¶), quote, verified (✓/✗;
    a quote verified against OCR text of a scan says so)."""
    return [
        [
            c.document_name or answer.document_name or "-",
            c.heading or c.section_id or "(unknown section)",
            c.pages if c.page_start else "?",
            c.quote,
            ("✓ (OCR: check the scan)" if c.ocr else "✓") if c.verified else "✗",
        ]
        for c in answer.citations
    ]


def source_html(doc: Document, answer: Answer) -> str:
    """Returns the first cited section of `doc` (an answer over a collection cites several documents), its
    text HTML-escaped with the quoted span marked."""
    for citation in answer.citations:
        if not citation.section_id or (citation.document_id and citation.document_id != doc.id):
            continue
        try:
            section = doc.section(citation.section_id)
        except KeyError:
            continue
        header = f"<p><b>{html.escape(section.heading or section.id)}</b> ({html.escape(section.pages)})</p>"
        if answer.collection:
            header = f"<p><b>{html.escape(doc.name)}</b></p>" + header
        # An extractive quote is a whole clause: mark the sentence that answers when there is one.
        marked = citation.highlight if citation.highlight and citation.highlight in section.text else citation.quote
        return header + f"<pre>{highlight(section.text, marked)}</pre>"
    return "<p><i>No cited section to show.</i></p>"


def answer_html(answer: Answer) -> str:
    """Returns the answer text (escaped, so model output cannot inject markup or load images) and its notice."""
    label = (
        "extractive (quoted from the contract)"
        if answer.mode == "extractive"
        else (f"{answer.mode}, {answer.model or answer.engine}" + (", thinking" if answer.thinking_enabled else ""))
    )
    body = _pre(answer.text or "(no answer text)")
    if answer.mode == "extractive":
        # The quoted clause's decisive sentence comes **marked**: shown bold, after escaping.
        body = _BOLD.sub(r"<b>\1</b>", body)
    out = f"<p><small>Answer mode: {html.escape(label)}</small></p>" + body
    if answer.notice:
        out += f'<p class="dp-warn"><small>{html.escape(answer.notice)}</small></p>'
    return out


def streaming_html(text: str, *, thinking: bool = False) -> str:
    """Returns the answer written so far (escaped), marked as still being written (class ``dp-streaming``)."""
    if text:
        status = "Writing the answer..."
    elif thinking:
        status = "The model is thinking (open Thinking below to follow along)..."
    else:
        status = "Finding the relevant sections..."
    return f'<div class="dp-streaming"><p><small>{html.escape(status)}</small></p>{_pre(text)}</div>'


def error_html(message: str) -> str:
    """Returns an error message for the answer box, escaped."""
    return f'<div class="dp-err"><b>Error:</b> {html.escape(message)}</div>'


def report_rows(report: ContractReport) -> list[list[str]]:
    """Returns one table row per checklist category: category, found, clause (verified quotes), pages, note."""
    return [
        [
            row["category"],
            FOUND_LABELS.get(row["status"], row["status"]),
            row["clause"],
            row["pages"] or "-",
            row["note"],
        ]
        for row in report.rows()
    ]


def report_summary(report: ContractReport) -> str:
    """Returns a one-paragraph Markdown summary of a report: counts per status and what they mean."""
    counts: dict[str, int] = {}
    for finding in report.findings:
        counts[finding.status] = counts.get(finding.status, 0) + 1
    parts = ", ".join(f"{n} {FOUND_LABELS.get(status, status)}" for status, n in counts.items())
    out = f"**{len(report.findings)} categories** checked in {html.escape(report.document_name)}: {parts}."
    if report.mode == "extractive":
        out += (
            " No language model is configured: each row shows the sentences that best match the category, "
            "for a reviewer to judge. They are candidates, not findings."
        )
    return out


def write_report_files(report: ContractReport, folder: Path) -> list[Path]:
    """Returns the report written to `folder` as CSV, JSON and Markdown, named after the document."""
    stem = (
        re.sub(r"[^A-Za-z0-9._-]+", "_", Path(clean_upload_name(report.document_name)).stem).strip("._") or "contract"
    )
    texts = {"csv": report.to_csv(), "json": report.to_json(), "md": report.to_markdown()}
    paths = []
    for suffix, _label in REPORT_FORMATS:
        path = folder / f"{stem[:80]}-checklist.{suffix}"
        atomic_write(path, texts[suffix].encode())
        paths.append(path)
    return paths
