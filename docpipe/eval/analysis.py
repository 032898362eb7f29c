"""Contract-analysis evaluation on CUAD-format labelled data (``docpipe eval-analysis``).

For every contract the checklist runs as `DocPipe.analyze` would run it; each (contract, category) pair is
then scored against the expert labels:

- retrieval recall: a gold span lies inside the context the category got (within `analysis.budget_tokens`);
- presence precision / recall: the report's ``present`` or ``candidate`` against the label "has a clause";
- candidate precision: of the categories reported present or candidate, the share whose quotes show a gold
  span (a quote and a gold span overlap when one contains the other or their word F1 is at least 0.5);
- span overlap: the best word F1 between a quote and a gold span, over labelled categories reported present;
- definition / reference coverage: of the defined terms the matched sections use and the clauses they cite,
  the share whose text is in the context (what bringing in definitions and cross-references changes).

Spans are compared as case-folded NFKC alphanumerics (as in `docpipe.eval.retrieval`).
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.eval.retrieval import load_annotations, normalise_span

if TYPE_CHECKING:
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.pipeline import DocPipe

__all__ = ["evaluate_analysis", "format_analysis_report", "ratio", "span_f1"]

MIN_SPAN_CHARS = 4
FIRST_PAGE_CATEGORIES = ("Document Name", "Parties", "Agreement Date", "Effective Date")
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def span_f1(quote: str, gold: str) -> float:
    """Returns the word-level F1 between a quote and a gold span (1.0 when either contains the other).

    >>> span_f1("governed by the laws of the State of Delaware", "the laws of the State of Delaware")
    1.0
    """
    q, g = normalise_span(quote), normalise_span(gold)
    if q and g and (q in g or g in q):
        return 1.0
    a, b = Counter(_words(quote)), Counter(_words(gold))
    common = sum((a & b).values())
    if not common:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(b.values())
    return 2 * precision * recall / (precision + recall)


def ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    labelled = [r for r in rows if r["labelled"]]
    predicted = [r for r in rows if r["predicted"]]
    both = [r for r in labelled if r["predicted"]]
    return {
        "pairs": len(rows),
        "labelled_present": len(labelled),
        "retrieval_recall": ratio(sum(r["retrieved"] for r in labelled), len(labelled)),
        "presence_precision": ratio(len(both), len(predicted)),
        "presence_recall": ratio(len(both), len(labelled)),
        "candidate_precision": ratio(sum(r["quote_hit"] for r in predicted), len(predicted)),
        "quote_hit_rate": ratio(sum(r["quote_hit"] for r in both), len(both)),
        "span_f1": round(sum(r["best_f1"] for r in both) / len(both), 4) if both else None,
        # Of the defined terms / cited clauses the matched sections use, the share whose text is in the context.
        "definition_coverage": ratio(sum(r["terms_defined"] for r in rows), sum(r["terms_used"] for r in rows)),
        "reference_coverage": ratio(sum(r["refs_in_context"] for r in rows), sum(r["refs_cited"] for r in rows)),
    }


def evaluate_analysis(
    dp: DocPipe,
    folder: Path,
    *,
    limit: int | None = None,
    expand: bool | None = None,
    mode: ThinkingMode = "think",
    progress: bool = False,
    keep_rows: bool = False,
) -> dict[str, Any]:
    """Returns per-category and overall scores of `DocPipe.analyze` against CUAD labels (see module docstring)."""
    folder = Path(folder)
    contracts = load_annotations(folder)
    files = sorted(contracts)[: limit or None]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    analysis_s: list[float] = []
    iterator = files
    if progress:
        from tqdm import tqdm

        iterator = tqdm(files, unit="contract", leave=False)
    for file in iterator:
        # CUAD spells some names in title case ("Change Of Control"): match case-insensitively.
        records = {r["clause_category"].casefold(): r for r in contracts[file]}
        doc = dp.ingest(folder / file)
        report = dp.analyze(doc, mode=mode, expand=expand, use_cache=False)
        analysis_s.append(report.seconds)
        refs = dp.index(doc).references
        for finding in report.findings:
            record = records.get(finding.category.casefold())
            if record is None:
                continue
            spans = [
                a["text"] for a in record.get("answer_spans", []) if len(normalise_span(a["text"])) >= MIN_SPAN_CHARS
            ]
            labelled = bool(record.get("has_answer")) and bool(spans)
            context = normalise_span(" ".join(h.text for h in finding.hits))
            quotes = [q.quote for q in finding.quotes]
            # What the matched clauses lean on: defined terms they use, clauses they cite; in context or not.
            matched = " ".join(h.text for h in finding.hits if h.role == "match")
            terms = refs.terms_in(matched)
            definitions = [refs.definitions[t] for t in terms]
            cited = refs.cited_in(matched)
            texts = doc.text
            best = max((span_f1(q, g) for q in quotes for g in spans), default=0.0)
            rows.append(
                {
                    "contract": record.get("contract_id", file),
                    "category": finding.category,
                    "labelled": labelled,
                    "predicted": finding.status in ("present", "candidate"),
                    "status": finding.status,
                    "score": finding.score,
                    "retrieved": labelled and any(normalise_span(g) in context for g in spans),
                    "quote_hit": best >= 0.5,
                    "best_f1": best,
                    "context_tokens": sum(h.n_tokens for h in finding.hits),
                    "support_sections": sum(1 for h in finding.hits if h.role in ("definition", "reference")),
                    "terms_used": len(definitions),
                    "terms_defined": sum(normalise_span(texts[d.start : d.end][:300]) in context for d in definitions),
                    "refs_cited": len(cited),
                    "refs_in_context": sum(normalise_span(texts[start : start + 200]) in context for _, start in cited),
                }
            )
    categories = list(dict.fromkeys(r["category"] for r in rows))
    engine = dp.engine
    return ({"rows": rows} if keep_rows else {}) | {
        "overall": _summary(rows),
        "first_page_categories": {
            c: {
                "retrieved": sum(r["retrieved"] for r in rows if r["category"] == c and r["labelled"]),
                "labelled": sum(1 for r in rows if r["category"] == c and r["labelled"]),
            }
            for c in FIRST_PAGE_CATEGORIES
            if c in categories
        },
        "per_category": {c: _summary([r for r in rows if r["category"] == c]) for c in categories},
        "contracts": len(files),
        "mode": "generative" if engine else "extractive",
        "settings": {
            "budget_tokens": dp.settings.analysis.budget_tokens,
            "k": dp.settings.analysis.k,
            "expand_references": dp.settings.analysis.expand_references if expand is None else expand,
            "min_candidate_score": dp.settings.analysis.min_candidate_score,
            "embedder": dp.settings.embedding.model,
            "engine": engine.name if engine else "extractive",
            "fingerprint": dp.settings.settings_fingerprint(),
        },
        "mean_context_tokens": round(sum(r["context_tokens"] for r in rows) / len(rows), 1) if rows else 0,
        "mean_support_sections": round(sum(r["support_sections"] for r in rows) / len(rows), 2) if rows else 0,
        "analysis_seconds_per_contract": round(sum(analysis_s) / len(analysis_s), 2) if analysis_s else 0,
        "seconds": round(time.perf_counter() - started, 1),
    }


def format_analysis_report(report: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    """Returns the report as a terminal table; with `other` (the run without references) side by side."""

    def cell(value: float | None) -> str:
        return "   -" if value is None else f"{value:4.2f}"

    o = report["overall"]
    lines = [
        f"Contract analysis ({report['mode']}) on {report['contracts']} contracts, {o['pairs']} pairs, "
        f"{o['labelled_present']} with a labelled clause; budget {report['settings']['budget_tokens']} tokens",
        "",
        "columns: retrieval recall | presence precision | presence recall | candidate precision | span F1",
    ]
    label = "with references" if report["settings"]["expand_references"] else "without references"
    columns = ("retrieval_recall", "presence_precision", "presence_recall", "candidate_precision", "span_f1")
    lines.append(f"{'overall, ' + label:<46}" + "  ".join(cell(o[c]) for c in columns))
    if other is not None:
        p = other["overall"]
        lines.append(f"{'overall, without references':<46}" + "  ".join(cell(p[c]) for c in columns))
    lines.append("")
    for category, stats in report["per_category"].items():
        row = f"{category[:38] + ' (' + str(stats['labelled_present']) + ')':<46}"
        row += "  ".join(cell(stats[c]) for c in columns)
        if other is not None:
            row += f"   | w/o refs: {cell(other['per_category'][category]['retrieval_recall'])}"
        lines.append(row)
    for label, run in (("with", report), ("without", other)):
        if run is not None:
            o = run["overall"]
            lines.append(
                f"  {label} references: definitions of the terms used in context {cell(o['definition_coverage'])}, "
                f"cited clauses in context {cell(o['reference_coverage'])}, mean context {run['mean_context_tokens']} tokens"
            )
    lines.append("")
    for category, stats in report["first_page_categories"].items():
        lines.append(f"{category}: retrieved for {stats['retrieved']}/{stats['labelled']} contracts")
    lines.append(
        f"\nmean context {report['mean_context_tokens']} tokens, {report['mean_support_sections']} supporting "
        f"sections per category; analysis {report['analysis_seconds_per_contract']} s per contract; "
        f"{report['seconds']} s in all"
    )
    return "\n".join(lines)
