"""Context over several documents of a collection: sections from the pooled ranking lifted to their
sections (`lift`), and the best of them fitted to a budget, grouped by contract with each one's front matter
(`collection_context`).
"""

from __future__ import annotations

from docpipe.retrieve.fusion import SearchIndex
from docpipe.types import Hit

__all__ = ["collection_context", "lift"]


def collection_context(
    hits_by_doc: dict[str, list[Hit]],
    fronts: dict[str, Hit | None],
    *,
    budget_tokens: int,
    k: int,
    order: dict[str, dict[str, int]],
) -> list[Hit]:
    """Returns the context for a question over several documents: the best `k` hits of any of them that fit
    in `budget_tokens` (each hit names its document), each chosen document's front matter first when it
    fits in a quarter of the budget; grouped by document (the best document first) and in document order
    inside each."""
    ranked = sorted((h for hits in hits_by_doc.values() for h in hits), key=lambda h: -h.score)
    chosen: list[Hit] = []
    taken: set[tuple[str, str]] = set()
    matches = 0
    used = 0
    docs: list[str] = []
    for hit in ranked:
        if matches >= k:
            break
        if (hit.document_id, hit.section_id) in taken:
            continue  # the document's front matter, pinned already
        front = fronts.get(hit.document_id) if hit.document_id not in docs else None
        if front is not None and (front.section_id == hit.section_id or front.n_tokens * 4 > budget_tokens):
            front = None
        extra = front.n_tokens if front is not None else 0
        if used + hit.n_tokens + extra > budget_tokens:
            continue
        if hit.document_id not in docs:
            docs.append(hit.document_id)
            if front is not None:
                chosen.append(front)
                taken.add((front.document_id, front.section_id))
        chosen.append(hit)
        taken.add((hit.document_id, hit.section_id))
        matches += 1
        used += hit.n_tokens + extra
    rank = {d: n for n, d in enumerate(docs)}
    return sorted(
        chosen,
        key=lambda h: (rank[h.document_id], order.get(h.document_id, {}).get(h.section_id, 0), h.passage_start),
    )


def lift(index: SearchIndex, passages: list[tuple[int, float]]) -> list[Hit]:
    """Returns `index`'s sections for pooled passage matches (passage index, fused score), best first, one
    hit per section (its best passage), each naming the document."""
    best: dict[str, tuple[int, float]] = {}
    for pid, score in passages:
        if pid >= len(index.passages):
            continue
        sid = index.passages[pid].section_id
        if sid not in best or score > best[sid][1]:
            best[sid] = (pid, score)
    sections = {s.id: s for s in index.doc.sections}
    hits = []
    for rank, (sid, (pid, score)) in enumerate(sorted(best.items(), key=lambda item: -item[1][1])):
        section = sections[sid]
        passage = index.passages[pid]
        hit = Hit(
            section_id=sid,
            heading=section.heading,
            heading_path=section.heading_path,
            page_start=section.page_start,
            page_end=section.page_end,
            text=section.text,
            score=score,
            n_tokens=section.n_tokens,
            rank=rank,
            passage_start=passage.start,
            passage_end=passage.end,
            unit=section.unit,
        )
        hits.append(index.tag(hit))
    return hits
