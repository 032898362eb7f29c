"""A review grid's row without a language model: each cell read offline and cached by content.

A built-in key term is read by its reader (`docpipe.terms.key_terms`, all of a row's key terms at once); another
typed column from its retrieved sections (`docpipe.terms.typed`); a text or yes/no column is the checklist's
offline finding (`docpipe.analysis.analyze.candidate_finding`) with its decisive sentence as the cell's answer.
`docpipe.review.run` calls `offline_row` for each row, on this machine or in a Ray worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from docpipe.analysis.analyze import candidate_finding
from docpipe.analysis.checklist import Category
from docpipe.answer.core import CacheOpener, cache_call, cache_put
from docpipe.answer.prompts import REVIEW_PROMPT_VERSION
from docpipe.review.grid import Cell, Column

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings
    from docpipe.types import Document, Hit

__all__ = ["cached_cell", "offline_row"]


def offline_row(
    r: int,
    index: SearchIndex,
    columns: list[Column],
    contexts: list[list[Hit]],
    vectors: Any,
    embedder: Embedder,
    settings: Settings,
    fingerprint: str,
    cache: CacheOpener | None,
    record: Callable[[int, int, Cell, str], None],
) -> None:
    """Fills row `r` without a language model, each cell cached: a key term read by its reader
    (`docpipe.terms.key_terms`, all of a row's key terms at once), another typed column's value read from its
    sections (`docpipe.terms.typed`), a text or yes/no column the checklist's offline finding with its decisive
    sentence as the cell's answer."""
    from docpipe.answer.cache import cache_key
    from docpipe.terms.key_terms import READER_VERSION, read_key_terms
    from docpipe.terms.typed import line, read_typed_cell

    doc = index.doc
    keys = []
    for column, hits in zip(columns, contexts):
        typed = {"kind": column.kind, "options": list(column.options), "term": column.term}
        keys.append(
            cache_key(
                document_id=doc.id,
                question=column.query,
                mode="review-offline",
                model=embedder.name,
                prompt_version=f"{REVIEW_PROMPT_VERSION}+terms{READER_VERSION}"
                if column.kind != "text"
                else REVIEW_PROMPT_VERSION,
                sampling={},
                extra={
                    "fingerprint": fingerprint,
                    "sections": [h.section_id for h in hits] if not column.term else [],
                    "analysis": settings.analysis.model_dump(mode="json"),
                    **({"typed": typed} if column.kind != "text" or column.term else {}),
                    **({"min_score": column.min_score} if column.min_score is not None else {}),
                    **({"matter": doc.matter} if doc.matter is not None else {}),
                },
            )
        )
    cells: list[Cell | None] = [cached_cell(cache, key) for key in keys]
    missing_terms = [c for c, column in enumerate(columns) if column.term and cells[c] is None]
    if missing_terms:
        read = read_key_terms(doc, [columns[c] for c in missing_terms])
        for c, cell in zip(missing_terms, read):
            cells[c] = cell
            _put(cache, keys[c], cell, doc)
    for c, (column, hits, vector) in enumerate(zip(columns, contexts, vectors)):
        found = cells[c]
        if found is not None:
            cell = found
        else:
            if column.kind != "text" and column.kind != "yes_no":
                cell = read_typed_cell(column, hits, doc)
            else:
                category = Category(column.key, column.group or "-", "clause", column.question, "", column.note)
                category = _with_query(category, column.query)
                finding = candidate_finding(
                    index, category, hits, vector, embedder=embedder, settings=settings, min_score=column.min_score
                )
                quotes = [replace(q, document_id=doc.id, document_name=doc.name) for q in finding.quotes]
                decisive = next((q.highlight or q.quote for q in quotes if q.verified), "")
                cell = Cell(
                    finding.status,
                    answer=line(decisive) if decisive else "",
                    quotes=quotes,
                    note=finding.note,
                    searched=[h.section_id for h in hits],
                    score=finding.score,
                )
            _put(cache, keys[c], cell, doc)
        record(r, c, cell, doc.name)


def _put(cache: CacheOpener | None, key: str, cell: Cell, doc: Document) -> None:
    if cache is not None and not cell.cached and cell.status != "failed":
        cache_put(cache, key, cell.to_dict(), doc)


def cached_cell(cache: CacheOpener | None, key: str) -> Cell | None:
    """Returns the cell stored under `key` in the cell cache, marked as from the cache; None when absent."""
    stored = cache_call(cache, "get", key) if cache is not None else None
    if stored is None:
        return None
    cell = Cell.from_dict(stored)
    cell.cached = True
    return cell


def _with_query(category: Category, query: str) -> Category:
    """Returns `category` whose `query` is `query` (its question plus, for a free question, nothing else)."""
    search = query[len(category.question) :].strip() if query.startswith(category.question) else query
    return replace(category, search=search)
