"""Answer evaluation on CUAD-format labelled data with plain-language questions (``docpipe eval-answers``).

Every (contract, category) record is asked the category's question as a user would type it (a JSON object
mapping category names to questions), through `DocPipe.ask_many` as configured (extractive without a model).

- A record with a gold clause is *answered* when the answer text or one of its quotes overlaps a gold span.
  Both are compared as case-folded NFKC alphanumerics; they overlap when the gold span lies inside the
  answer, or the answer (at least 40 such characters) lies inside the gold span, or they share a run of at
  least min(60, 60% of the gold span) characters.
- A record without one (the contract has no such clause) is *honest* when the answer quotes nothing and says
  that nothing answering was found.
- The naive anchor, scored on the same records in the same run: the three sentences of the whole contract
  closest to the question by embedding cosine, with no retrieval and no other signal.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import InputError
from docpipe.eval.analysis import MIN_SPAN_CHARS, ratio
from docpipe.eval.retrieval import load_annotations, normalise_span

if TYPE_CHECKING:
    from docpipe.pipeline import DocPipe
    from docpipe.types import Answer, Document

__all__ = ["evaluate_answers", "format_answers_report", "load_questions", "overlaps"]

MIN_INSIDE_CHARS = 40
RUN_CHARS = 60
RUN_SHARE = 0.6
NAIVE_SENTENCES = 3


def overlaps(piece: str, gold: str) -> bool:
    """Returns True when `piece` (an answer or a quote) and the gold span overlap by the rule above.

    >>> overlaps("This Agreement shall be governed by the laws of the State of New York.", "the laws of the State of New York")
    True
    >>> overlaps("The Supplier shall deliver the goods.", "governed by the laws of the State of New York")
    False
    """
    p, g = normalise_span(piece), normalise_span(gold)
    if not p or not g:
        return False
    if g in p or (len(p) >= MIN_INSIDE_CHARS and p in g):
        return True
    run = min(RUN_CHARS, math.ceil(RUN_SHARE * len(g)))
    if run > len(p):
        return False
    return any(g[i : i + run] in p for i in range(len(g) - run + 1))


def load_questions(path: Path) -> dict[str, str]:
    """Returns the question for each category from a JSON object ``{"category": "question", ...}``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"{path} does not exist: give --questions a JSON file of category -> question", path=str(path)
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not a JSON file of category -> question ({exc})", path=str(path)) from exc
    if (
        not isinstance(data, dict)
        or not data
        or not all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in data.items())
    ):
        raise InputError(
            f"{path} must hold one JSON object mapping each category name to a non-empty question, "
            'e.g. {"Governing Law": "Which law governs the contract?"}',
            path=str(path),
        )
    return {k.casefold(): v for k, v in data.items()}


def _spans(record: dict[str, Any]) -> list[str]:
    return [a["text"] for a in record.get("answer_spans", []) if len(normalise_span(a["text"])) >= MIN_SPAN_CHARS]


def _answerable(record: dict[str, Any]) -> bool:
    # A data-room question set (cuad-collection-dev) holds answered questions only and says so by omission.
    return bool(record.get("has_answer", True)) and bool(_spans(record))


def _pick(contracts: dict[str, list[dict[str, Any]]], questions: dict[str, str], per_category: int | None):
    """Returns the records to ask, per file: all of them, or the first `per_category` answerable and the first
    `per_category` unanswerable records of each category (files in name order)."""
    taken: dict[tuple[str, bool], int] = defaultdict(int)
    chosen: dict[str, list[dict[str, Any]]] = {}
    for file in sorted(contracts):
        for record in contracts[file]:
            category = record["clause_category"]
            if category.casefold() not in questions:
                continue
            answerable = _answerable(record)
            key = (category.casefold(), answerable)
            if per_category is not None and taken[key] >= per_category:
                continue
            taken[key] += 1
            chosen.setdefault(file, []).append(record)
    return chosen


def _naive_quotes(dp: DocPipe, doc: Document, vectors: Any, cache: dict[str, Any]) -> list[list[str]]:
    """Returns, for each question vector, the `NAIVE_SENTENCES` sentences of the whole contract closest to it."""
    import numpy as np

    from docpipe.answer.extractive import sentence_spans

    if doc.id not in cache:
        sentences = [doc.text[s:e] for s, e in sentence_spans(doc.text)]
        cache.clear()
        cache[doc.id] = (sentences, dp.embedder.embed(sentences) if sentences else np.zeros((0, 1)))
    sentences, matrix = cache[doc.id]
    if not sentences:
        return [[] for _ in vectors]
    out = []
    for vector in vectors:
        scores = matrix @ vector
        out.append([sentences[i] for i in np.argsort(-scores)[:NAIVE_SENTENCES]])
    return out


def _answered(answer_text: str, quotes: list[str], spans: list[str]) -> bool:
    return any(overlaps(piece, gold) for gold in spans for piece in [answer_text, *quotes])


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["answerable"]]
    other = [r for r in rows if not r["answerable"]]
    quoted = [r for r in answerable if r["quote_chars"]]
    return {
        "answerable": len(answerable),
        "answered": ratio(sum(r["answered"] for r in answerable), len(answerable)),
        "naive_answered": ratio(sum(r["naive_answered"] for r in answerable), len(answerable)),
        "nothing_found_when_answerable": ratio(sum(r["nothing_found"] for r in answerable), len(answerable)),
        "unanswerable": len(other),
        "honest": ratio(sum(r["nothing_found"] for r in other), len(other)),
        "mean_quote_chars": round(sum(r["quote_chars"] for r in quoted) / len(quoted)) if quoted else 0,
        "mean_answer_chars": round(sum(r["answer_chars"] for r in answerable) / len(answerable)) if answerable else 0,
    }


def evaluate_answers(
    dp: DocPipe,
    folder: Path,
    questions: dict[str, str],
    *,
    per_category: int | None = None,
    limit: int | None = None,
    skip: Collection[str] = (),
    progress: bool = False,
    keep_rows: bool = False,
) -> dict[str, Any]:
    """Returns the answered / honest figures of `DocPipe.ask_many` and of the naive anchor, overall and per
    category (see the module docstring). Contracts whose file name is in `skip` are left out (e.g. those a
    setting was tuned on, to check that a figure holds on others)."""
    folder = Path(folder)
    contracts = {f: r for f, r in load_annotations(folder).items() if Path(f).name not in skip}
    chosen = _pick(contracts, questions, per_category)
    files = sorted(chosen)[: limit or None]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    ask_s: list[float] = []
    naive_cache: dict[str, Any] = {}
    iterator: Any = files
    if progress:
        from tqdm import tqdm

        iterator = tqdm(files, unit="contract", leave=False)
    for file in iterator:
        records = chosen[file]
        doc = dp.ingest(folder / file)
        asked = [questions[r["clause_category"].casefold()] for r in records]
        begun = time.perf_counter()
        answers: list[Answer] = dp.ask_many(doc, asked, use_cache=False)
        ask_s.append((time.perf_counter() - begun) / len(asked))
        naive = _naive_quotes(dp, doc, dp.embedder.embed(asked), naive_cache)
        for record, question, answer, naive_quotes in zip(records, asked, answers, naive):
            spans = _spans(record)
            quotes = [c.quote for c in answer.citations]
            rows.append(
                {
                    "contract": record.get("contract_id", file),
                    "category": record["clause_category"],
                    "question": question,
                    "answerable": _answerable(record),
                    "answered": bool(spans) and _answered(answer.text, quotes, spans),
                    "naive_answered": bool(spans) and _answered("", naive_quotes, spans),
                    "nothing_found": not answer.citations,
                    "quote_chars": sum(len(q) for q in quotes),
                    "answer_chars": len(answer.text),
                    "best_score": answer.citations[0].score if answer.citations else None,
                }
            )
    categories = sorted({r["category"] for r in rows})
    report: dict[str, Any] = {
        "overall": _summary(rows),
        "per_category": {c: _summary([r for r in rows if r["category"] == c]) for c in categories},
        "contracts": len(files),
        "records": len(rows),
        "per_category_limit": per_category,
        "mode": "generative" if dp.engine else "extractive",
        "naive": f"the {NAIVE_SENTENCES} sentences of the whole contract closest to the question by embedding cosine",
        "settings": {
            "embedder": dp.settings.embedding.model,
            "engine": dp.engine.name if dp.engine else "extractive",
            "fingerprint": dp.settings.settings_fingerprint(),
        },
        "ask_seconds_per_question": round(sum(ask_s) / len(ask_s), 4) if ask_s else 0,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if keep_rows:
        report["rows"] = rows
    return report


def format_answers_report(report: dict[str, Any]) -> str:
    """Returns the report as a terminal table."""

    def cell(value: float | None) -> str:
        return "   -" if value is None else f"{value:4.2f}"

    o = report["overall"]
    limit = report["per_category_limit"]
    lines = [
        f"Answers ({report['mode']}) on {report['contracts']} contracts, {report['records']} records"
        + (f" (first {limit} per category)" if limit else "")
        + f": {o['answerable']} with a gold clause, {o['unanswerable']} without",
        "",
        "columns: answered | naive anchor | honest (nothing found when there is no clause) | mean quote chars",
    ]
    columns = ("answered", "naive_answered", "honest")
    lines.append(f"{'overall':<46}" + "  ".join(cell(o[c]) for c in columns) + f"  {o['mean_quote_chars']:>6}")
    lines.append("")
    for category, stats in report["per_category"].items():
        row = f"{category[:38] + ' (' + str(stats['answerable']) + ')':<46}"
        lines.append(row + "  ".join(cell(stats[c]) for c in columns) + f"  {stats['mean_quote_chars']:>6}")
    lines.append(
        f"\nnaive anchor: {report['naive']}; nothing found on answerable records: "
        f"{cell(o['nothing_found_when_answerable'])}; ask {report['ask_seconds_per_question']} s per question; "
        f"{report['seconds']} s in all"
    )
    return "\n".join(lines)
