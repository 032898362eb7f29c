"""Collection evaluation on a data room in cuad-collection-dev format: every question names its contract by
title and parties and must be answered from that contract among all of them (as in LegalBench-RAG).

For each question and token budget B (Qwen3 tokens), the context docpipe would give the model
(`DocPipe.context` on the collection, no k) is checked:

- ``recall_at_budget``: a gold span lies inside the context's sections *of the right contract* (spans and
  text compared as case-folded NFKC alphanumerics, as `docpipe eval-retrieval` does);
- ``mismatch_at_budget``: the share of the context's tokens taken from other contracts;
- ``doc_at_1``: the right contract comes first (the contract the question is routed to, or the first hit's).

The naive baseline runs in the same report: LegalBench-RAG's naive method, 500-character chunks of every
contract in one flat FAISS index embedded with the same model, the top chunks by cosine that fit the budget.
Its chunk vectors are cached under the docpipe home (``eval-cache/``), keyed by the contracts and the model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import InputError
from docpipe.eval.retrieval import MIN_SPAN_CHARS, normalise_span
from docpipe.eval.room import add_room, manifest_files, percentiles

if TYPE_CHECKING:
    from docpipe.pipeline import DocPipe

__all__ = ["NAIVE_CHUNK_CHARS", "evaluate_collection", "format_collection_report"]

logger = logging.getLogger(__name__)

NAIVE_CHUNK_CHARS = 500
BUDGETS = (2048, 4096, 8192, 16384)


def _records(folder: Path) -> list[dict[str, Any]]:
    path = folder / "annotations.jsonl"
    if not path.is_file():
        raise InputError(
            f"{folder} has no annotations.jsonl: point eval-collection at a folder in cuad-collection-dev format "
            "(annotations.jsonl, manifest.csv and pdf/)",
            path=str(folder),
        )
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                record["file"], record["question"], record["answer_spans"]  # noqa: B018 - required keys
            except (ValueError, KeyError) as exc:
                raise InputError(
                    f"{path}:{number} is not a collection question record ({exc})", path=str(path)
                ) from exc
            records.append(record)
    return records


def evaluate_collection(
    dp: DocPipe,
    folder: Path,
    *,
    collection: str = "eval-collection",
    budgets: list[int] | None = None,
    limit: int | None = None,
    naive: bool = True,
    workers: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Returns recall, mismatch and doc@1 at each budget for docpipe and the naive baseline (module docstring),
    after adding every contract of `folder` to `collection` (documents already stored are not ingested again).
    `limit` keeps the first N questions (all contracts stay in the collection: they are the distractors)."""
    from docpipe.tokens import get_token_counter

    folder = Path(folder)
    budgets = sorted(budgets or BUDGETS)
    records = _records(folder)
    files = manifest_files(folder)
    if files is None:
        files = sorted({r["file"] for r in records})
    if limit:
        records = records[:limit]
    started = time.perf_counter()
    added = add_room(dp, folder, files, collection=collection, workers=workers, progress=progress)
    coll, report_add, doc_of = added.collection, added.report, added.doc_of
    missing = sorted({r["file"] for r in records if r["file"] not in doc_of})
    if missing:
        raise InputError(
            f"{len(missing)} contracts of the questions could not be added to the collection ({missing[0]}, ...): "
            + "; ".join(f"{name}: {reason}" for name, reason in report_add.failed[:3])
        )
    counter = get_token_counter(dp.settings.chunking.tokenizer)
    texts = {doc_id: coll.document(doc_id).text for doc_id in set(doc_of.values())}

    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    iterator: Any = sorted(
        records, key=lambda r: r["file"]
    )  # one contract's questions together: its index stays loaded
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, unit="question", desc="questions", leave=False)
    for record in iterator:
        gold = doc_of[record["file"]]
        spans = [s for s in (normalise_span(a["text"]) for a in record["answer_spans"]) if len(s) >= MIN_SPAN_CHARS]
        if not spans:
            continue
        row: dict[str, Any] = {"category": record.get("clause_category", ""), "found": {}, "mismatch": {}}
        for n, budget in enumerate(budgets):
            t0 = time.perf_counter()
            routed = dp.collection_service.context(coll, record["question"], k=10**6, budget_tokens=budget)
            route, context = routed.route, routed.hits
            if n == 0:
                latencies.append(time.perf_counter() - t0)
                first = route.named[0] if route.named else (context[0].document_id if context else "")
                row["doc_at_1"] = first == gold
                row["routed"] = bool(route.named)
            right = normalise_span(" ".join(h.text for h in context if h.document_id == gold))
            row["found"][budget] = any(s in right for s in spans)
            tokens = sum(h.n_tokens for h in context)
            wrong = sum(h.n_tokens for h in context if h.document_id != gold)
            row["mismatch"][budget] = wrong / tokens if tokens else 0.0
        rows.append(row)

    report: dict[str, Any] = {
        "questions": len(rows),
        "contracts": len(files),
        "budgets": budgets,
        **_summary(rows, budgets),
        "routed": round(sum(r["routed"] for r in rows) / len(rows), 4) if rows else 0.0,
        "context_latency_s": percentiles(latencies),
        "per_category": {
            c: _summary([r for r in rows if r["category"] == c], budgets) for c in sorted({r["category"] for r in rows})
        },
        "ingest": added.ingest_summary(),
        "settings": {"embedder": dp.settings.embedding.model, "fingerprint": dp.fingerprint},
    }
    if naive:
        report["naive"] = _naive(dp, records, doc_of, texts, counter, budgets, progress=progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _summary(rows: list[dict[str, Any]], budgets: list[int]) -> dict[str, Any]:
    if not rows:
        return {"questions": 0}
    n = len(rows)
    return {
        "questions": n,
        "recall_at_budget": {str(b): round(sum(r["found"][b] for r in rows) / n, 4) for b in budgets},
        "mismatch_at_budget": {str(b): round(sum(r["mismatch"][b] for r in rows) / n, 4) for b in budgets},
        "doc_at_1": round(sum(r["doc_at_1"] for r in rows) / n, 4),
    }


def _naive(
    dp: DocPipe,
    records: list[dict[str, Any]],
    doc_of: dict[str, str],
    texts: dict[str, str],
    counter: Any,
    budgets: list[int],
    *,
    progress: bool,
) -> dict[str, Any]:
    """Returns the naive baseline's figures on the same questions (module docstring)."""
    import faiss
    import numpy as np

    ids = sorted(texts)
    chunks: list[tuple[str, int, str]] = []  # (document id, position, text)
    for doc_id in ids:
        text = texts[doc_id]
        chunks += [
            (doc_id, n, text[i : i + NAIVE_CHUNK_CHARS]) for n, i in enumerate(range(0, len(text), NAIVE_CHUNK_CHARS))
        ]
    key = hashlib.sha256(json.dumps([ids, dp.settings.embedding.model, NAIVE_CHUNK_CHARS]).encode()).hexdigest()[:16]
    cache = dp.store.root / "eval-cache" / f"naive-{key}.npy"
    vectors = None
    if cache.is_file():
        try:
            with open(cache, "rb") as handle:
                vectors = np.load(handle, allow_pickle=False)
            if vectors.shape[0] != len(chunks):
                vectors = None
        except (OSError, ValueError):
            vectors = None
    if vectors is None:
        started = time.perf_counter()
        texts_only = [c[2] for c in chunks]
        parts = []
        step = 512
        for start in range(0, len(texts_only), step):
            parts.append(dp.embedder.embed(texts_only[start : start + step]))
            if progress:
                logger.info("naive baseline: embedded %d/%d chunks", start + len(parts[-1]), len(texts_only))
        vectors = np.vstack(parts).astype(np.float32)
        logger.info("naive baseline: %d chunks embedded in %.0f s", len(chunks), time.perf_counter() - started)
        from docpipe.storage.store import atomic_write, make_private_dir

        make_private_dir(cache.parent)
        import io

        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        atomic_write(cache, buffer.getvalue())
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    tokens = [counter.count(c[2]) for c in chunks]
    depth = min(len(chunks), max(budgets) // 64)
    rows: list[dict[str, Any]] = []
    questions = [r for r in records if r["file"] in doc_of]
    query_vectors = dp.embedder.embed([r["question"] for r in questions])
    _, found = index.search(np.ascontiguousarray(query_vectors, dtype=np.float32), depth)
    for record, order in zip(questions, found):
        gold = doc_of[record["file"]]
        spans = [s for s in (normalise_span(a["text"]) for a in record["answer_spans"]) if len(s) >= MIN_SPAN_CHARS]
        if not spans:
            continue
        row: dict[str, Any] = {"found": {}, "mismatch": {}, "doc_at_1": chunks[int(order[0])][0] == gold}
        for budget in budgets:
            used, picked = 0, []
            for i in order.tolist():
                if i < 0:
                    break
                if used + tokens[i] > budget:
                    break
                picked.append(i)
                used += tokens[i]
            right = normalise_span(
                " ".join(chunks[i][2] for i in sorted(picked, key=lambda i: chunks[i][1]) if chunks[i][0] == gold)
            )
            row["found"][budget] = any(s in right for s in spans)
            wrong = sum(tokens[i] for i in picked if chunks[i][0] != gold)
            row["mismatch"][budget] = wrong / used if used else 0.0
        rows.append(row)
    out = {
        "method": f"{NAIVE_CHUNK_CHARS}-character chunks of every contract in one flat FAISS index, same embedder, "
        "top chunks by cosine that fit the budget",
        "chunks": len(chunks),
        **_summary(rows, budgets),
    }
    return out


def format_collection_report(report: dict[str, Any]) -> str:
    """Returns the report as a plain-text table for a terminal."""
    budgets = report["budgets"]
    head = "".join(f"{b // 1024:>6}k" for b in budgets)
    lines = [
        f"Collection retrieval: {report['questions']} questions over {report['contracts']} contracts "
        f"(routed to a named contract: {report['routed']:.2f})",
        "",
        f"{'':<34}{head}   doc@1",
    ]

    def line(label: str, stats: dict[str, Any], key: str, tail: str = "") -> str:
        return f"{label:<34}" + "".join(f"{stats[key][str(b)]:>7.2f}" for b in budgets) + tail

    lines.append(line("docpipe recall", report, "recall_at_budget", f"{report['doc_at_1']:>8.3f}"))
    lines.append(line("docpipe other-contract share", report, "mismatch_at_budget"))
    if "naive" in report:
        naive = report["naive"]
        lines.append(line("naive recall", naive, "recall_at_budget", f"{naive['doc_at_1']:>8.3f}"))
        lines.append(line("naive other-contract share", naive, "mismatch_at_budget"))
    latency = report.get("context_latency_s") or {}
    if latency:
        lines.append(f"\ncontext per question: p50 {latency['p50'] * 1000:.0f} ms, p95 {latency['p95'] * 1000:.0f} ms")
    lines.append(f"{report['seconds']} s")
    return "\n".join(lines)
