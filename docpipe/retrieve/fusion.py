"""Small-to-big hybrid retrieval: score passages densely and with BM25, fuse by reciprocal rank, lift
passages to their parent sections, and fit the sections into a token budget."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from docpipe.types import Document, Passage, Section, page_range
from docpipe.retrieve.dense import BM25, DenseIndex

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder

__all__ = ["Hit", "SearchIndex", "fit_budget"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved section with its fused score and the passage that matched best."""

    section_id: str
    heading: str
    heading_path: tuple[str, ...]
    page_start: int
    page_end: int
    text: str
    score: float
    n_tokens: int
    rank: int
    passage_start: int = 0
    passage_end: int = 0
    dense_rank: int | None = None
    bm25_rank: int | None = None
    # "match" (ranked for the question), "front_matter" (pinned opening), or supporting material brought in
    # for a match: "definition" (a defined term's definition) or "reference" (a section it cites).
    role: str = "match"

    @property
    def pages(self) -> str:
        return page_range(self.page_start, self.page_end)

    def to_dict(self) -> dict[str, Any]:
        return {
            "section_id": self.section_id,
            "heading": self.heading,
            "heading_path": list(self.heading_path),
            "page_start": self.page_start,
            "page_end": self.page_end,
            "score": round(self.score, 6),
            "n_tokens": self.n_tokens,
            "rank": self.rank,
            "role": self.role,
            "text": self.text,
        }


@dataclass(slots=True)
class SearchIndex:
    """Returns ranked sections of one document for a question (see `rank`)."""

    doc: Document
    passages: list[Passage]
    dense: DenseIndex
    embedder: Embedder
    hybrid: bool = True
    rrf_k: int = 60
    _bm25: BM25 | None = field(default=None, repr=False)
    _sections: dict[str, Section] = field(default_factory=dict, repr=False)
    # Sentence vectors per section for extractive answers: a re-ask embeds only the question.
    sentence_cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _references: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._bm25 = BM25([p.text for p in self.passages]) if self.hybrid else None
        self._sections = {s.id: s for s in self.doc.sections}

    def front_matter(self, limit_tokens: int) -> Hit | None:
        """Returns the document's opening section as a hit when it is no larger than `limit_tokens`."""
        if not self.doc.sections or self.doc.sections[0].n_tokens > limit_tokens:
            return None
        section = self.doc.sections[0]
        return replace(_hit(section, score=0.0, rank=-1, passage=None), role="front_matter")

    @property
    def references(self):
        """Returns the document's defined terms and numbered sections (`docpipe.retrieve.references.References`)."""
        if self._references is None:
            from docpipe.retrieve.references import References

            self._references = References.build(self.doc)
        return self._references

    def rank(self, question: str, query: Any = None) -> list[Hit]:
        """Returns every section that any passage matched, best first (a section scores as its best passage).

        `query` is the question's embedding when the caller has embedded several questions at once.
        """
        if query is None:
            query = self.embedder.embed([question])[0]
        scores, ids = self.dense.search(query)
        fused: dict[int, float] = {}
        dense_rank: dict[int, int] = {}
        for rank, pid in enumerate(ids.tolist()):
            if pid < 0:
                continue
            dense_rank[pid] = rank
            fused[pid] = 1.0 / (self.rrf_k + rank + 1)
        bm25_rank: dict[int, int] = {}
        if self._bm25 is not None:
            lexical = self._bm25.scores(question)
            order = sorted((i for i, s in enumerate(lexical) if s > 0), key=lambda i: -lexical[i])
            for rank, pid in enumerate(order):
                bm25_rank[pid] = rank
                fused[pid] = fused.get(pid, 0.0) + 1.0 / (self.rrf_k + rank + 1)
        if not self.hybrid:
            fused = {pid: float(s) for pid, s in zip(ids.tolist(), scores.tolist()) if pid >= 0}

        best: dict[str, int] = {}
        for pid, score in fused.items():
            sid = self.passages[pid].section_id
            if sid not in best or score > fused[best[sid]]:
                best[sid] = pid
        ordered = sorted(best.items(), key=lambda item: (-fused[item[1]], item[1]))
        hits = []
        for rank, (sid, pid) in enumerate(ordered):
            hit = _hit(self._sections[sid], score=fused[pid], rank=rank, passage=self.passages[pid])
            hits.append(
                replace(hit, dense_rank=dense_rank.get(pid), bm25_rank=bm25_rank.get(pid))
            )
        return hits


def _hit(section: Section, *, score: float, rank: int, passage: Passage | None) -> Hit:
    return Hit(
        section_id=section.id,
        heading=section.heading,
        heading_path=section.heading_path,
        page_start=section.page_start,
        page_end=section.page_end,
        text=section.text,
        score=score,
        n_tokens=section.n_tokens,
        rank=rank,
        passage_start=passage.start if passage else section.start,
        passage_end=passage.end if passage else section.start,
    )


def fit_budget(
    hits: list[Hit], budget_tokens: int, k: int | None = None, *, pinned: Hit | None = None
) -> list[Hit]:
    """Returns hits in rank order that fit together within `budget_tokens` (at most `k` of them).

    A section too large for what is left is skipped, and smaller ones further down still get their turn.
    A `pinned` hit (the document's front matter) comes first when it takes at most a quarter of the budget.
    """
    chosen: list[Hit] = []
    used = 0
    if pinned is not None and pinned.n_tokens * 4 <= budget_tokens:
        chosen.append(pinned)
        used = pinned.n_tokens
        hits = [h for h in hits if h.section_id != pinned.section_id]
    for hit in hits:
        if k is not None and len(chosen) >= k:
            break
        if used + hit.n_tokens <= budget_tokens:
            chosen.append(hit)
            used += hit.n_tokens
    return chosen
