"""The answer without a language model: the sentences of the retrieved sections that best match the question,
quoted verbatim with their pages and labelled as such (`extractive_answer`), and the sentence embeddings they
are scored with, computed once per section (`prime_sentences`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from docpipe.answer.verify import locate_quote, normalise_whitespace
from docpipe.retrieve.dense import tokenize
from docpipe.types import Answer, Citation, Document, Hit

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder

__all__ = ["ENABLE_MODEL_HINT", "extractive_answer", "prime_sentences"]

ENABLE_MODEL_HINT = (
    "No language model is configured, so docpipe quotes the contract instead of writing an answer. "
    "To have Qwen3-14B answer: pip install 'docpipe[gpu]' on a CUDA machine, or point "
    "DOCPIPE_ENGINE__URL at a server (vllm serve Qwen/Qwen3-14B --reasoning-parser qwen3)."
)


# Where a quotable sentence ends: sentence ends, clause items after ";" or ":", and blank lines; a wrapped line
# ("three\n(3) years") is not an end. Finer than the statement ends of docpipe.retrieve.references, which keep a
# definition together with the list after its ":".
_SENTENCE_OR_ITEM_END = re.compile(r"(?<=[.;:?!])[\"”’)]?\s+(?=[\"“(A-Z0-9])|\n\s*\n")


_HEADING_ONLY = re.compile(r"(?:ARTICLE\s+\w+\s+|Section\s+)?\d+(?:\.\d+)*\.?\s+[^.;:]{1,80}[.:]?", re.IGNORECASE)


def _sentences(text: str) -> list[tuple[int, int]]:
    """Returns (start, end) offsets into `text` of its sentences (clause items count as sentences)."""
    spans, cursor = [], 0
    for match in _SENTENCE_OR_ITEM_END.finditer(text):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, len(text)))
    out = []
    for start, end in spans:
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        # A bare heading ("9.6 Governing Law; Jurisdiction.") answers nothing.
        if len(tokenize(piece)) >= 4 and not _HEADING_ONLY.fullmatch(piece):
            out.append((start + lead, start + lead + len(piece)))
    return out


def _stems(text: str) -> set[str]:
    return {word[:6] for word in tokenize(text) if not word.isdigit()} - {"what", "which", "who", "when", "how"}


def _sentence_key(hit: Hit) -> str:
    # A ranked or pinned hit holds its whole section; supporting material (a referenced clause) only a part.
    if hit.role in ("match", "front_matter"):
        return hit.section_id
    return f"{hit.section_id}@{hit.passage_start}:{len(hit.text)}"


def _quotable(hits: list[Hit]) -> list[Hit]:
    # Definitions help a model read a clause; quoted alone they answer nothing.
    return [h for h in hits if h.role != "definition"]


def prime_sentences(hits: list[Hit], embedder: Embedder, cache: dict[str, Any]) -> None:
    """Embeds, in one call, the sentences of every hit not yet in `cache` (one call of many sentences runs
    the embedder's batched path instead of many small ones)."""
    todo: dict[str, list[str]] = {}
    for hit in _quotable(hits):
        key = _sentence_key(hit)
        if key not in cache and key not in todo:
            todo[key] = [hit.text[start:end] for start, end in _sentences(hit.text)]
    texts = [text for group in todo.values() for text in group]
    vectors = embedder.embed(texts) if texts else None
    offset = 0
    for key, group in todo.items():
        cache[key] = (group, vectors[offset : offset + len(group)] if group else None)
        offset += len(group)


def extractive_answer(
    question: str,
    hits: list[Hit],
    doc: Document,
    embedder: Embedder,
    *,
    sentences: int = 3,
    fingerprint: str = "",
    cache: dict[str, Any] | None = None,
    query: Any = None,
) -> Answer:
    """Returns the sentences of the retrieved sections that best match `question`, quoted verbatim.

    `query` is the question's embedding when the caller already has it."""
    import numpy as np

    cache = {} if cache is None else cache
    hits = _quotable(hits)
    prime_sentences(hits, embedder, cache)
    candidates: list[tuple[Hit, str]] = []
    blocks = []
    for hit in hits:
        texts, vectors = cache[_sentence_key(hit)]
        candidates.extend((hit, text) for text in texts)
        if vectors is not None:
            blocks.append(vectors)
    if not candidates:
        return Answer(
            question=question,
            text="Nothing in this document matches the question.",
            mode="extractive",
            citations=[],
            engine="extractive",
            document_id=doc.id,
            fingerprint=fingerprint,
            section_ids=[h.section_id for h in hits],
            notice=ENABLE_MODEL_HINT,
        )
    vectors = np.concatenate(blocks)
    if query is None:
        query = embedder.embed([question])[0]
    terms = _stems(question)
    scored = []
    for (hit, text), vector in zip(candidates, vectors):
        # Shared word stems back the embedding: "terminate ... notice" answers "notice ... termination".
        overlap = len(terms & _stems(text)) / max(len(terms), 1)
        scored.append((float(vector @ query) + 0.25 * overlap, hit, text))
    scored.sort(key=lambda item: -item[0])

    citations: list[Citation] = []
    seen: set[str] = set()
    for score, hit, text in scored:
        if text in seen:
            continue
        seen.add(text)
        found = locate_quote(text, [hit], doc)
        first, last = (found.page_start, found.page_end) if found else (hit.page_start, hit.page_end)
        citations.append(Citation(hit.section_id, hit.heading, first, last, text, found is not None, score))
        if len(citations) >= sentences:
            break
    lines = [
        "Extractive answer (no language model configured): the passages of the contract that best match "
        "the question, quoted verbatim.",
        "",
    ]
    for number, citation in enumerate(citations, 1):
        lines.append(f'{number}. "{normalise_whitespace(citation.quote)}" ({citation.heading}, {citation.pages})')
    return Answer(
        question=question,
        text="\n".join(lines),
        mode="extractive",
        citations=citations,
        engine="extractive",
        document_id=doc.id,
        fingerprint=fingerprint,
        section_ids=[h.section_id for h in hits],
        notice=ENABLE_MODEL_HINT,
    )
