"""Answers and their citations, and the extractive answer used when no language model is configured.

A citation's quote is checked against the stored page text (after whitespace normalisation); a quote that
cannot be found there is flagged ``verified=False`` rather than shown as a fact.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from docpipe.audit import AuditManifest, iso_time
from docpipe.document import Document, page_range
from docpipe.index import tokenize
from docpipe.retrieve import Hit

if TYPE_CHECKING:
    from docpipe.embed import Embedder
    from docpipe.engine.base import GenerationResult

__all__ = [
    "ENABLE_MODEL_HINT",
    "Answer",
    "Citation",
    "extractive_answer",
    "generative_answer",
    "prime_sentences",
    "verify_quote",
]

ENABLE_MODEL_HINT = (
    "No language model is configured, so docpipe quotes the contract instead of writing an answer. "
    "To have Qwen3-14B answer: pip install 'docpipe[gpu]' on a CUDA machine, or point "
    "DOCPIPE_ENGINE__URL at a server (vllm serve Qwen/Qwen3-14B --reasoning-parser qwen3)."
)


@dataclass(frozen=True, slots=True)
class Citation:
    """A quoted span backing an answer: where it is (section, pages) and whether the quote was verified."""

    section_id: str
    heading: str
    page_start: int
    page_end: int
    quote: str
    verified: bool
    score: float = 0.0

    @property
    def pages(self) -> str:
        return page_range(self.page_start, self.page_end)


@dataclass(slots=True)
class Answer:
    """Returns nothing; holds an answer with its provenance, so it can be audited later.

    `mode` is ``extractive`` (quoted sentences, no model) or ``generative``; `thinking` holds a model's
    reasoning, never mixed into `text`.
    """

    question: str
    text: str
    mode: str
    citations: list[Citation]
    engine: str
    document_id: str
    fingerprint: str
    section_ids: list[str]
    thinking: str | None = None
    model: str | None = None
    notice: str | None = None
    thinking_enabled: bool = False
    created: float = field(default_factory=time.time)
    model_revision: str | None = None
    prompt_version: str = ""
    settings_fingerprint: str = ""
    document_name: str = ""

    def manifest(self) -> AuditManifest:
        """Returns the answer's audit manifest: document SHA-256, model and revision, settings, sections, time."""
        from docpipe import __version__

        return AuditManifest(
            kind="answer",
            document_sha256=self.document_id,
            document_name=self.document_name,
            engine=self.engine,
            model=self.model,
            model_revision=self.model_revision,
            thinking=self.thinking_enabled,
            prompt_version=self.prompt_version,
            settings_fingerprint=self.settings_fingerprint,
            index_fingerprint=self.fingerprint,
            section_ids=tuple(self.section_ids),
            created=iso_time(self.created),
            docpipe_version=__version__,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["citations"] = [{**asdict(c), "pages": c.pages} for c in self.citations]
        data["manifest"] = self.manifest().to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        """Returns the answer stored by `to_dict` (the answer cache keeps them so)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["citations"] = [
            Citation(**{k: v for k, v in c.items() if k in Citation.__dataclass_fields__})
            for c in data.get("citations", [])
        ]
        return cls(**fields)


_SPACE = re.compile(r"\s+")


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


_NORMALISED: OrderedDict[tuple[str, str, int], tuple[list[int], str]] = OrderedDict()
_NORMALISED_LOCK = threading.Lock()


def _normalised_pages(doc: Document) -> tuple[list[int], str]:
    """Returns (start offset of each page, all pages whitespace-normalised and joined), kept for a few
    documents: a report checks dozens of quotes against the same pages."""
    # The same PDF read by another extractor has other page text.
    key = (doc.id, doc.extractor, len(doc.pages))
    with _NORMALISED_LOCK:
        if key in _NORMALISED:
            _NORMALISED.move_to_end(key)
            return _NORMALISED[key]
    starts: list[int] = []
    chunks: list[str] = []
    offset = 0
    for page in doc.pages:
        starts.append(offset)
        chunk = _normalise(page.text)
        chunks.append(chunk)
        offset += len(chunk) + 1
    value = (starts, " ".join(chunks))
    with _NORMALISED_LOCK:
        _NORMALISED[key] = value
        while len(_NORMALISED) > 8:
            _NORMALISED.popitem(last=False)
    return value


def verify_quote(quote: str, doc: Document) -> tuple[bool, int, int]:
    """Returns (found, first page, last page) for `quote` in the stored page text, whitespace-normalised."""
    needle = _normalise(quote)
    if not needle:
        return False, 0, 0
    starts, haystack = _normalised_pages(doc)
    found = haystack.find(needle)
    if found < 0:
        return False, 0, 0
    first = bisect.bisect_right(starts, found) - 1
    last = bisect.bisect_right(starts, found + len(needle) - 1) - 1
    return True, doc.pages[first].number, doc.pages[last].number


# Sentence ends, clause items after ";" or ":", and blank lines; a wrapped line ("three\n(3) years") is not an end.
_SENTENCE_END = re.compile(r"(?<=[.;:?!])[\"”’)]?\s+(?=[\"“(A-Z0-9])|\n\s*\n")


_HEADING_ONLY = re.compile(r"(?:ARTICLE\s+\w+\s+|Section\s+)?\d+(?:\.\d+)*\.?\s+[^.;:]{1,80}[.:]?", re.IGNORECASE)


def _sentences(text: str) -> list[tuple[int, int]]:
    """Returns (start, end) offsets into `text` of its sentences (clause items count as sentences)."""
    spans, cursor = [], 0
    for match in _SENTENCE_END.finditer(text):
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
        verified, first, last = verify_quote(text, doc)
        citations.append(
            Citation(hit.section_id, hit.heading, first or hit.page_start, last or hit.page_end, text, verified, score)
        )
        if len(citations) >= sentences:
            break
    lines = [
        "Extractive answer (no language model configured): the passages of the contract that best match "
        "the question, quoted verbatim.",
        "",
    ]
    for number, citation in enumerate(citations, 1):
        lines.append(f"{number}. \"{_normalise(citation.quote)}\" ({citation.heading}, {citation.pages})")
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


def generative_answer(
    question: str,
    result: GenerationResult,
    hits: list[Hit],
    doc: Document,
    *,
    engine: str,
    model: str,
    fingerprint: str = "",
) -> Answer:
    """Returns the model's answer with its quotes checked: each double-quoted span is looked up in the
    stored page text; a quote that is not there is kept but flagged ``verified=False``."""
    from docpipe.prompts import extract_quotes

    by_id = {h.section_id: h for h in hits}
    citations: list[Citation] = []
    for quote, section_id in extract_quotes(result.text):
        verified, first, last = verify_quote(quote, doc)
        hit = by_id.get(section_id or "")
        if hit is None and verified:
            needle = _normalise(quote)
            hit = next((h for h in hits if needle in _normalise(h.text)), None)
        citations.append(
            Citation(
                section_id=hit.section_id if hit else (section_id or ""),
                heading=hit.heading if hit else "",
                page_start=first or (hit.page_start if hit else 0),
                page_end=last or (hit.page_end if hit else 0),
                quote=quote,
                verified=verified,
            )
        )
    notice = None
    if result.error:
        notice = f"The engine failed on this question: {result.error}"
    elif not result.text:
        notice = "The model returned no answer text" + (
            " (its thinking was cut by the thinking budget)." if result.thinking_truncated else "."
        )
    elif any(not c.verified for c in citations):
        notice = "Some quotes were not found in the document and are marked unverified: do not rely on them."
    elif not citations:
        notice = "The answer quotes nothing from the document: check it against the cited sections."
    return Answer(
        question=question,
        text=result.text,
        mode="generative",
        citations=citations,
        engine=engine,
        document_id=doc.id,
        fingerprint=fingerprint,
        section_ids=[h.section_id for h in hits],
        thinking=result.thinking,
        model=model,
        notice=notice,
    )
