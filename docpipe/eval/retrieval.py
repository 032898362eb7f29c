"""Retrieval evaluation on CUAD-format labelled data: recall at a context budget, side by side with a
naive baseline (fixed 4k-token chunks, each embedded whole, ranked by dense score).

A (contract, category) pair counts as found at budget B when a gold span lies inside the context the
pipeline would send to the model: sections taken in rank order while they fit in B Qwen3 tokens, joined
in document order. Spans and context are compared as case-folded NFKC alphanumerics; spans with fewer
than 8 such characters are ignored.
"""

from __future__ import annotations

import json
import logging
import time
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import InputError
from docpipe.retrieve.fusion import select_context

if TYPE_CHECKING:
    from docpipe.pipeline import DocPipe

__all__ = ["evaluate_retrieval", "format_report", "load_annotations", "normalise_span"]

logger = logging.getLogger(__name__)

MIN_SPAN_CHARS = 8
LONG_CONTRACT_TOKENS = 16384
BASELINE_CHUNK_TOKENS = 4096


def normalise_span(text: str) -> str:
    """Returns the case-folded NFKC alphanumerics of `text` (what gold spans are compared on)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def load_annotations(folder: Path) -> dict[str, list[dict[str, Any]]]:
    path = folder / "annotations.jsonl"
    if not path.is_file():
        raise InputError(
            f"{folder} has no annotations.jsonl: point eval-retrieval at a CUAD-format folder "
            "(annotations.jsonl plus the PDFs it names)",
            path=str(folder),
        )
    contracts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                contracts[record["file"]].append(record)
            except (ValueError, KeyError) as exc:
                raise InputError(f"{path}:{number} is not a CUAD annotation record ({exc})", path=str(path)) from exc
    return contracts


def _recall(found: dict[int, list[bool]]) -> dict[str, float]:
    return {str(b): round(sum(v) / len(v), 4) if v else 0.0 for b, v in found.items()}


def evaluate_retrieval(
    dp: DocPipe,
    folder: Path,
    *,
    budgets: list[int] | None = None,
    limit: int | None = None,
    baseline: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """Returns recall at each token budget for docpipe and the naive baseline, overall, on contracts
    longer than 16k tokens, and per category (see the module docstring for the definition)."""
    from docpipe.tokens import get_token_counter

    budgets = sorted(budgets or [2048, 4096, 8192, 16384])
    folder = Path(folder)
    contracts = load_annotations(folder)
    files = sorted(contracts)[: limit or None]
    counter = get_token_counter(dp.settings.chunking.tokenizer)

    rows: list[dict[str, Any]] = []  # one per answerable pair
    contract_rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    iterator = files
    if progress:
        from tqdm import tqdm

        iterator = tqdm(files, unit="contract", leave=False)
    for file in iterator:
        records = contracts[file]
        t0 = time.perf_counter()
        doc = dp.ingest(folder / file)
        ingest_s = time.perf_counter() - t0
        index = dp.index(doc)  # the same index dp.context(doc, ...) searches
        doc_text = doc.text
        doc_tokens = counter.count(doc_text)
        whole = normalise_span(doc_text)
        chunks = counter.chunks(doc_text, BASELINE_CHUNK_TOKENS) if baseline else []
        chunk_vectors = dp.embedder.embed([c for c, _ in chunks]) if chunks else None
        contract_rows.append(
            {
                "file": file,
                "pages": len(doc.pages),
                "tokens": doc_tokens,
                "sections": len(doc.sections),
                "ingest_s": round(ingest_s, 2),
            }
        )
        for record in records:
            if not record.get("has_answer"):
                continue
            spans = [s for s in (normalise_span(a["text"]) for a in record["answer_spans"]) if len(s) >= MIN_SPAN_CHARS]
            if not spans:
                continue
            row: dict[str, Any] = {
                "contract": record.get("contract_id", file),
                "category": record["clause_category"],
                "long": doc_tokens > LONG_CONTRACT_TOKENS,
                "findable": any(s in whole for s in spans),
                "found": {},
                "baseline": {},
            }
            # One embedding per question serves every budget and the baseline.
            query = dp.embedder.embed([record["question"]])[0]
            for budget in budgets:
                # No k: as many ranked sections as the budget holds.
                chosen = select_context(
                    index,
                    record["question"],
                    retrieval=dp.settings.retrieval,
                    chunking=dp.settings.chunking,
                    k=10**6,
                    budget_tokens=budget,
                    query=query,
                )
                chosen_ids = {h.section_id for h in chosen}
                context = normalise_span(" ".join(s.text for s in doc.sections if s.id in chosen_ids))
                row["found"][budget] = any(s in context for s in spans)
            if chunk_vectors is not None:
                order = sorted(range(len(chunks)), key=lambda i: -float(chunk_vectors[i] @ query))
                for budget in budgets:
                    used, picked = 0, []
                    for i in order:
                        if used + chunks[i][1] <= budget:
                            picked.append(i)
                            used += chunks[i][1]
                    context = normalise_span(" ".join(chunks[i][0] for i in sorted(picked)))
                    row["baseline"][budget] = any(s in context for s in spans)
            rows.append(row)

    def summarise(subset: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pairs": len(subset),
            "recall_at_budget": _recall({b: [r["found"][b] for r in subset] for b in budgets}),
            "findable_in_extracted_text": round(sum(r["findable"] for r in subset) / len(subset), 4) if subset else 0.0,
        }
        if baseline:
            out["baseline"] = {"recall_at_budget": _recall({b: [r["baseline"][b] for r in subset] for b in budgets})}
        return out

    overall = summarise(rows)
    long_rows = [r for r in rows if r["long"]]
    categories = sorted({r["category"] for r in rows})
    report: dict[str, Any] = {
        "recall_at_budget": overall["recall_at_budget"],
        "baseline": {
            "method": f"fixed {BASELINE_CHUNK_TOKENS}-token chunks, each embedded whole, top chunks by dense score",
            **overall.get("baseline", {}),
        },
        "pairs": len(rows),
        "contracts": len(files),
        "findable_in_extracted_text": overall["findable_in_extracted_text"],
        "long_subset": {
            "min_tokens": LONG_CONTRACT_TOKENS,
            "contracts": sum(1 for c in contract_rows if c["tokens"] > LONG_CONTRACT_TOKENS),
            **summarise(long_rows),
        },
        "per_category": {c: summarise([r for r in rows if r["category"] == c]) for c in categories},
        "budgets": budgets,
        "settings": {
            "extractor": dp.settings.extraction.extractor,
            "embedder": dp.settings.embedding.model,
            "hybrid": dp.settings.retrieval.hybrid,
            "max_section_tokens": dp.settings.chunking.max_section_tokens,
            "fingerprint": dp.fingerprint,
        },
        "contract_stats": contract_rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return report


def format_report(report: dict[str, Any]) -> str:
    """Returns the report as a plain-text table for a terminal."""
    budgets = report["budgets"]
    head = "".join(f"{b // 1024:>6}k" for b in budgets)
    lines = [
        f"Retrieval recall at a context budget: {report['pairs']} answerable pairs, {report['contracts']} contracts "
        f"(gold span findable in extracted text: {report['findable_in_extracted_text']:.2f})",
        "",
        f"{'':<44}{head}",
    ]

    def line(label: str, recall: dict[str, float]) -> str:
        return f"{label:<44}" + "".join(f"{recall[str(b)]:>7.2f}" for b in budgets)

    lines.append(line("docpipe (small-to-big hybrid)", report["recall_at_budget"]))
    if "recall_at_budget" in report["baseline"]:
        lines.append(line("baseline (4k chunks, dense)", report["baseline"]["recall_at_budget"]))
    long = report["long_subset"]
    if long["pairs"]:
        lines.append("")
        lines.append(
            f"contracts over {long['min_tokens']} tokens ({long['contracts']} contracts, {long['pairs']} pairs)"
        )
        lines.append(line("  docpipe", long["recall_at_budget"]))
        if "baseline" in long:
            lines.append(line("  baseline", long["baseline"]["recall_at_budget"]))
    lines += ["", f"per category (docpipe / baseline){'':<10}{head}"]
    for category, stats in report["per_category"].items():
        lines.append(line(f"{category[:36]} ({stats['pairs']})", stats["recall_at_budget"]))
        if "baseline" in stats:
            lines.append(line("    baseline", stats["baseline"]["recall_at_budget"]))
    lines.append(f"\n{report['seconds']} s")
    return "\n".join(lines)
