"""Small-to-big hybrid retrieval: score passages densely and with BM25, fuse by reciprocal rank, lift
passages to their parent sections, fit the sections into a token budget, and assemble the context a question
sends to the model (`select_context`: ranked sections, pinned front matter, supporting definitions and
cross-references, in document order)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from docpipe.errors import ConfigError
from docpipe.retrieve.dense import BM25, DenseIndex
from docpipe.types import Document, Hit, Passage, Section

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder
    from docpipe.embed.table import VectorTable
    from docpipe.retrieve.references import References
    from docpipe.settings import ChunkingSettings, RetrievalSettings

__all__ = ["SearchIndex", "SentenceCache", "context_limits", "fit_budget", "select_context"]


class SentenceCache(dict[str, Any]):
    """What offline answers keep of a document while its index is loaded: its sections cut into clauses with
    their sentences' embeddings, by section (and heading), and the document's sentence table they are read
    from (`docpipe.answer.extractive.sentence_table`). `saved` is how many of the table's vectors the store
    holds (None: not read from the store yet); `lock` is held while the table is read or made."""

    saved: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.RLock()
        self.table: VectorTable | None = None


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
    # Sentence vectors for extractive answers: a question embeds only itself.
    sentence_cache: SentenceCache = field(default_factory=lambda: SentenceCache(), repr=False)
    _references: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._bm25 = BM25([p.text for p in self.passages]) if self.hybrid else None
        self._sections = {s.id: s for s in self.doc.sections}

    def front_matter(self, limit_tokens: int) -> Hit | None:
        """Returns the document's opening section as a hit when it is no larger than `limit_tokens`."""
        if not self.doc.sections or self.doc.sections[0].n_tokens > limit_tokens:
            return None
        section = self.doc.sections[0]
        return self.tag(replace(_hit(section, score=0.0, rank=-1, passage=None), role="front_matter"))

    def sections(self) -> list[Hit]:
        """Returns every section of the document as a hit, in document order (the opening one as front matter):
        the whole contract, for a prompt that has room for it."""
        hits = [self.tag(_hit(s, score=0.0, rank=n, passage=None)) for n, s in enumerate(self.doc.sections)]
        if hits:
            hits[0] = replace(hits[0], role="front_matter")
        return hits

    def tag(self, hit: Hit) -> Hit:
        """Returns `hit` naming this index's document (id and the name it is seen under)."""
        return replace(hit, document_id=self.doc.id, document_name=self.doc.name)

    @property
    def references(self) -> References:
        """Returns the document's defined terms and numbered sections, found on first use."""
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
                replace(
                    hit,
                    dense_rank=dense_rank.get(pid),
                    bm25_rank=bm25_rank.get(pid),
                    document_id=self.doc.id,
                    document_name=self.doc.name,
                )
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
        unit=section.unit,
    )


def fit_budget(hits: list[Hit], budget_tokens: int, k: int | None = None, *, pinned: Hit | None = None) -> list[Hit]:
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


def context_limits(retrieval: RetrievalSettings, k: int | None, budget_tokens: int | None) -> tuple[int, int]:
    """Returns (k, budget in tokens): the given ones, else the settings'; a ConfigError when either is below 1."""
    k = retrieval.k if k is None else k
    budget = retrieval.budget_tokens if budget_tokens is None else budget_tokens
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    if budget < 1:
        raise ConfigError(f"the token budget must be at least 1, got {budget}")
    return k, budget


def select_context(
    index: SearchIndex,
    question: str,
    *,
    retrieval: RetrievalSettings,
    chunking: ChunkingSettings,
    k: int | None = None,
    budget_tokens: int | None = None,
    expand: bool | None = None,
    query: Any = None,
) -> list[Hit]:
    """Returns the sections that go to the model with `question`, in document order: the top `k` that fit in
    the budget, plus the document's front matter when `retrieval.pin_front_matter`, plus (with `expand`,
    default `retrieval.expand_references`) the definitions and cross-referenced sections those sections use,
    in the budget left (their `role` says which). `query` is the question's embedding when the caller has it.
    """
    k, budget = context_limits(retrieval, k, budget_tokens)
    pinned = index.front_matter(chunking.front_matter_tokens) if retrieval.pin_front_matter else None
    chosen = fit_budget(index.rank(question, query), budget, k, pinned=pinned)
    if retrieval.expand_references if expand is None else expand:
        from docpipe.retrieve.references import supporting_hits
        from docpipe.tokens import get_token_counter

        left = budget - sum(h.n_tokens for h in chosen)
        counter = get_token_counter(chunking.tokenizer)
        support = supporting_hits(chosen, index.doc, index.references, budget_tokens=left, count_tokens=counter.count)
        chosen += [index.tag(h) for h in support]
    position = {s.id: i for i, s in enumerate(index.doc.sections)}
    return sorted(chosen, key=lambda h: (position[h.section_id], h.passage_start))
