"""A playbook report as the Data room's Playbook view shows it (`docpipe.ui.playbook_view`): the table of
contracts x rules, its legend, the playbook's rules as uploaded, and one verdict for reading. Pure functions:
nothing here touches Gradio's events, so all of it is tested without a browser.

Everything that comes from a document or from the playbook (contract names, rule titles, reasons, values,
quotes, fallbacks) is escaped here: a playbook is a file from the browser, a contract's text is anyone's.
The table's headers are the exception: Gradio's Dataframe shows a header as text, never as markup, so they
are passed as written (escaping them would show ``&lt;`` on the page).

A cell shows its verdict as a symbol and a word on the verdict's colour (the XLSX report's fills,
`docpipe.playbook.xlsx.VERDICT_FILLS`), explained by `legend_html`: never colour alone. Hovering it shows the
verdict's reason; its pages follow the word.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from docpipe.playbook.judge import VERDICT_LABELS, VERDICTS
from docpipe.playbook.xlsx import VERDICT_FILLS
from docpipe.ui.review_render import short_name

if TYPE_CHECKING:
    from docpipe.playbook import Playbook, PlaybookReport, Rule, Verdict

__all__ = [
    "REASON_CHARS",
    "VERDICT_STYLES",
    "legend_html",
    "playbook_html",
    "report_table",
    "rule_header",
    "verdict_display",
    "verdict_html",
]

REASON_CHARS = 600  # a reason, as a cell's hover text shows it (the opened cell shows all of it)
QUOTE_CHARS = 1200  # a quote, as the opened cell lists it

# Verdict -> (symbol, what the legend says, background): the symbol and the word carry the meaning, the colour
# (the XLSX report's) helps the eye.
VERDICT_STYLES: dict[str, tuple[str, str, str]] = {
    "meets": ("\u2713", "Meets: a verified quote or value shows it, or no such clause anywhere", "#C6EFCE"),
    "deviates": ("\u2717", "Deviates: a verified quote or value departs from the rule", "#FFC7CE"),
    "missing": ("\u2013", "Missing: a required clause or term was not found", "#F8CBAD"),
    "needs_review": ("?", "Needs review: docpipe is not sure; a reviewer decides", "#FFEB9C"),
}
assert set(VERDICT_STYLES) == set(VERDICTS)
assert all(VERDICT_STYLES[v][2] == f"#{VERDICT_FILLS[v]}" for v in VERDICTS)


def _flat(text: str, limit: int | None = None) -> str:
    text = " ".join(str(text).split())
    if limit is not None and len(text) > limit:
        return text[: limit - 1].rsplit(" ", 1)[0] + "\u2026"
    return text


def rule_header(rule: Rule) -> str:
    """Returns the table's header for `rule`: its title and severity, as text (Gradio shows headers as text)."""
    return f"{_flat(rule.title)} ({rule.severity})"


def _headers(rules: tuple[Rule, ...]) -> list[str]:
    """Returns "Contract", then each rule's header, made unique for the table."""
    seen = {"Contract"}
    headers = ["Contract"]
    for rule in rules:
        label, n = rule_header(rule), 2
        while label in seen:
            label, n = f"{rule_header(rule)} [{n}]", n + 1
        seen.add(label)
        headers.append(label)
    return headers


def _name_html(name: str) -> str:
    shown = short_name(name)
    full = _flat(name)
    title = f' title="{html.escape(full)}"' if shown != full else ""
    return f'<span class="dp-name"{title}>{html.escape(shown)}</span>'


def verdict_display(verdict: Verdict) -> str:
    """Returns a verdict as its table cell shows it (HTML, escaped): symbol and word, the pages of its verified
    quotes, and its reason on hover."""
    symbol, _meaning, _colour = VERDICT_STYLES[verdict.status]
    pages = f' <small class="dp-pages">({html.escape(verdict.pages)})</small>' if verdict.pages else ""
    return (
        f'<span class="dp-verdict dp-verdict-{verdict.status}" title="{html.escape(_flat(verdict.reason, REASON_CHARS))}">'
        f'<span class="dp-sym">{symbol}</span> {VERDICT_LABELS[verdict.status]}{pages}</span>'
    )


def _styling(status: str) -> str:
    return f"background-color: {VERDICT_STYLES[status][2]}; color: #1f2328;"


def report_table(report: PlaybookReport) -> tuple[dict[str, Any], list[int]]:
    """Returns the table (a `gr.Dataframe` value: one row per contract, worst first (`PlaybookReport.order`),
    one column per rule, each cell coloured by its verdict) and the report's row index of each table row.
    Columns sort and filter by the verdict's word."""
    order = report.order()
    shown, styles, data = [], [], []
    for r in order:
        row, verdicts = report.rows[r], report.verdicts[r]
        shown.append([_name_html(row.name), *(verdict_display(v) for v in verdicts)])
        styles.append(["", *(_styling(v.status) for v in verdicts)])
        data.append([_flat(row.name), *(VERDICT_LABELS[v.status] for v in verdicts)])
    table = {
        "headers": _headers(report.playbook.rules),
        "data": data,
        "metadata": {"display_value": shown, "styling": styles},
    }
    return table, order


def legend_html() -> str:
    """Returns the legend: each verdict's colour, symbol and meaning, and what hover and click do."""
    items = "".join(
        f'<li class="dp-legend-{status}"><span class="dp-swatch" style="background-color: {colour}">{symbol}</span> '
        f"{html.escape(meaning)}</li>"
        for status, (symbol, meaning, colour) in VERDICT_STYLES.items()
    )
    return (
        f'<ul class="dp-legend" aria-label="What the colours mean">{items}</ul>'
        '<p class="dp-legend-marks">Hover a cell for the reason; click it for its quotes and the cited page. '
        "Worst contracts first: a high-severity deviation or miss counts as 10 medium ones, a medium as 10 low.</p>"
    )


def playbook_html(playbook: Playbook) -> str:
    """Returns the uploaded playbook for checking before a run: its name, version and description, then each rule
    with its severity, title, id and what it tests; everything escaped."""
    counts = {s: sum(r.severity == s for r in playbook.rules) for s in ("high", "medium", "low")}
    head = f"<b>{html.escape(playbook.name)}</b>" + (
        f" (version {html.escape(playbook.version)})" if playbook.version else ""
    )
    rules = len(playbook.rules)
    parts = [
        f'<p class="dp-ok">&#10003; {head}: {rules} rule{"s" if rules != 1 else ""} '
        f"({counts['high']} high, {counts['medium']} medium, {counts['low']} low severity)"
        + (f", from {html.escape(playbook.source)}" if playbook.source else "")
        + ". Choose the collection and Run the playbook.</p>"
    ]
    if playbook.description:
        parts.append(f"<p><small>{html.escape(_flat(playbook.description))}</small></p>")
    items = "".join(
        f'<li><span class="dp-severity">{html.escape(rule.severity)}</span> '
        f'<span class="dp-rule-title">{html.escape(rule.title)}</span> <code>{html.escape(rule.id)}</code>: '
        f"{html.escape(_flat(rule.test, 300))}</li>"
        for rule in playbook.rules
    )
    parts.append(f'<details class="dp-rules"><summary>The rules</summary><ol>{items}</ol></details>')
    return "".join(parts)


def verdict_html(report: PlaybookReport, r: int, k: int) -> str:
    """Returns one verdict for reading: contract and rule, the verdict and its reason, the value compared, what
    the rule asks, the fallback for a deviation or a miss, the rule's note, and each quote with its pages and
    whether it was found verbatim; everything escaped."""
    row, rule, verdict = report.rows[r], report.playbook.rules[k], report.verdicts[r][k]
    symbol = VERDICT_STYLES[verdict.status][0]
    parts = [
        f'<p><b>{html.escape(row.name)}</b> &mdash; <span class="dp-rule-title">{html.escape(rule.title)}</span> '
        f"({html.escape(rule.severity)} severity, <code>{html.escape(rule.id)}</code>)</p>",
        f'<p><span class="dp-sym">{symbol}</span> <b>{VERDICT_LABELS[verdict.status]}</b>: '
        f'<span class="dp-reason">{html.escape(verdict.reason)}</span></p>',
    ]
    if verdict.value is not None:
        written = verdict.value.as_written
        parts.append(
            f'<p class="dp-value">Value read: <b>{html.escape(verdict.value.display)}</b>'
            + (f" &mdash; as written: &ldquo;{html.escape(written)}&rdquo;" if written else "")
            + "</p>"
        )
    parts.append(f"<p><small>The rule: {html.escape(rule.test)}</small></p>")
    if verdict.status in ("deviates", "missing") and rule.fallback:
        parts.append(f'<p class="dp-fallback">Fallback: {html.escape(rule.fallback)}</p>')
    if rule.note:
        parts.append(f"<p><small>Note: {html.escape(rule.note)}</small></p>")
    if verdict.quotes:
        items = "".join(
            f"<li>{html.escape(q.pages if q.page_start else '?')}"
            f"{'' if q.verified else ' (not found verbatim)'}: &ldquo;{html.escape(_flat(q.quote, QUOTE_CHARS))}"
            "&rdquo;</li>"
            for q in verdict.quotes
        )
        parts.append(f"<ol>{items}</ol>")
    elif verdict.basis == "absence":
        parts.append(
            "<p><small>No quote: no sentence of the contract uses the words such clauses are written with.</small></p>"
        )
    return "".join(parts)
