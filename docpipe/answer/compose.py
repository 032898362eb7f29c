"""Answers and their citations, and the extractive answer used when no language model is configured.

A citation's quote is checked against the sections that were in the model's context (after whitespace
normalisation, and reading the text as the prompt showed it, see `docpipe.answer.prompts.neutralise`); its pages are
where it was found there. A quote that no context section holds is flagged ``verified=False`` rather than
shown as a fact, even when the words occur elsewhere in the document: the model was not given them there.
"""

from __future__ import annotations

import bisect
import re
from array import array
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from docpipe.audit import AuditManifest, iso_time
from docpipe.types import Document, page_range
from docpipe.retrieve.dense import tokenize
from docpipe.retrieve.fusion import Hit

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import GenerationResult

__all__ = [
    "ENABLE_MODEL_HINT",
    "Answer",
    "Citation",
    "QuoteLocation",
    "extractive_answer",
    "generative_answer",
    "locate_quote",
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
    """Returns (found, first page, last page) for `quote` anywhere in the stored page text, whitespace-normalised.

    Citations are checked with `locate_quote`, against the sections the model was given; this whole-document
    look-up only says whether an unverified quote exists elsewhere."""
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


@dataclass(frozen=True, slots=True)
class QuoteLocation:
    """Where a quote was found in the model's context: the section (hit) holding it and the quote's own pages."""

    hit: Hit
    page_start: int
    page_end: int


@dataclass(frozen=True, slots=True)
class _Piece:
    """A run of a hit's text as the prompt showed it, whitespace-folded, with a map back to the raw offsets."""

    folded: str
    # Segment i starts at folded[norm_starts[i]] and raw[raw_starts[i]]; kept[i] is 0 for a replaced run.
    # Arrays, not lists: a cached 4k-token section has thousands of segments.
    norm_starts: array[int]
    raw_starts: array[int]
    kept: bytes
    # Offset of the piece in `Document.text`, or None when it could not be placed (pages fall back to the hit's).
    base: int | None

    def raw_offset(self, index: int) -> int:
        segment = bisect.bisect_right(self.norm_starts, index) - 1
        if self.kept[segment]:
            return self.raw_starts[segment] + index - self.norm_starts[segment]
        return self.raw_starts[segment]


def _fold_quote(quote: str) -> str:
    from docpipe.answer.prompts import neutralise

    return _normalise(neutralise(quote))


def _fold(text: str, base: int | None) -> _Piece:
    """Returns `text` as `_fold_quote` reads a quote copied from the prompt: tag brackets escaped as
    `neutralise` escapes them, whitespace runs as one space."""
    from docpipe.answer.prompts import ESCAPED_OPENER, tag_openers

    events = [(m.start(), m.end(), " ") for m in _SPACE.finditer(text)]
    escaped = tag_openers(text)
    if escaped:
        events = sorted(events + [(at, at + 1, ESCAPED_OPENER) for at in escaped])
    parts: list[str] = []
    norm_starts: array[int] = array("q")
    raw_starts: array[int] = array("q")
    kept = bytearray()
    length = cursor = 0
    for start, end, replacement in events:
        if start > cursor:
            norm_starts.append(length)
            raw_starts.append(cursor)
            kept.append(1)
            parts.append(text[cursor:start])
            length += start - cursor
        norm_starts.append(length)
        raw_starts.append(start)
        kept.append(0)
        parts.append(replacement)
        length += len(replacement)
        cursor = end
    if cursor < len(text) or not norm_starts:
        norm_starts.append(length)
        raw_starts.append(cursor)
        kept.append(1)
        parts.append(text[cursor:])
    return _Piece("".join(parts), norm_starts, raw_starts, bytes(kept), base)


_DOC_TEXT: OrderedDict[tuple[str, str, int], tuple[str, list[int], dict[str, int]]] = OrderedDict()
_PIECES: OrderedDict[tuple[Any, ...], list[_Piece]] = OrderedDict()
_LOCATE_LOCK = threading.Lock()
# Definition hits join several excerpts of one section with this line (docpipe.retrieve.references).
_EXCERPT_JOIN = "\n…\n"


def _doc_text(doc: Document) -> tuple[str, list[int], dict[str, int]]:
    """Returns (the document's text, where each page starts in it, where each section starts), kept for a few
    documents: every quote of an answer is placed in the same text."""
    key = (doc.id, doc.extractor, len(doc.pages))
    with _LOCATE_LOCK:
        if key in _DOC_TEXT:
            _DOC_TEXT.move_to_end(key)
            return _DOC_TEXT[key]
    value = (doc.text, doc.page_starts, {s.id: s.start for s in doc.sections})
    with _LOCATE_LOCK:
        _DOC_TEXT[key] = value
        while len(_DOC_TEXT) > 8:
            _DOC_TEXT.popitem(last=False)
    return value


def _pieces(hit: Hit, doc: Document) -> list[_Piece]:
    """Returns the hit's text folded for look-ups, each piece placed in the document's text, cached: a report
    checks dozens of quotes against the same sections."""
    key = (doc.id, doc.extractor, len(doc.pages), hit.section_id, hit.passage_start, hit.text)
    with _LOCATE_LOCK:
        if key in _PIECES:
            _PIECES.move_to_end(key)
            return _PIECES[key]
    raw, _, section_starts = _doc_text(doc)
    lowest = section_starts.get(hit.section_id, 0)
    texts = [hit.text]
    if not raw.startswith(hit.text, lowest) and raw.find(hit.text, lowest) < 0 and _EXCERPT_JOIN in hit.text:
        texts = hit.text.split(_EXCERPT_JOIN)
    pieces = []
    for text in texts:
        base: int | None = lowest if raw.startswith(text, lowest) else raw.find(text, lowest)
        if base is not None and base < 0:
            base = None
        pieces.append(_fold(text, base))
    with _LOCATE_LOCK:
        _PIECES[key] = pieces
        while len(_PIECES) > 256:
            _PIECES.popitem(last=False)
    return pieces


def locate_quote(
    quote: str, context: Sequence[Hit], doc: Document, *, section_id: str | None = None
) -> QuoteLocation | None:
    """Returns where `quote` is in the context the model was given: the first hit holding it (the cited
    `section_id` first, then the others in order), with the pages of the quote itself; None when no context
    section holds it, even if the document has the same words elsewhere.

    Whitespace is normalised, and a quote copied from the prompt (where tag-like text shows as ``&lt;section``)
    is found in the raw text it came from."""
    needle = _fold_quote(quote)
    if not needle:
        return None
    ordered = [h for h in context if h.section_id == section_id] + [h for h in context if h.section_id != section_id]
    for hit in ordered:
        for piece in _pieces(hit, doc):
            found = piece.folded.find(needle)
            if found < 0:
                continue
            if piece.base is None:
                return QuoteLocation(hit, hit.page_start, hit.page_end)
            _, page_starts, _ = _doc_text(doc)
            first = piece.base + piece.raw_offset(found)
            last = piece.base + piece.raw_offset(found + len(needle) - 1)
            return QuoteLocation(hit, _page_number(doc, page_starts, first), _page_number(doc, page_starts, last))
    return None


def _page_number(doc: Document, page_starts: list[int], offset: int) -> int:
    return doc.pages[max(bisect.bisect_right(page_starts, offset) - 1, 0)].number


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
    sections the model was given (`hits`); a quote that is not there is kept but flagged ``verified=False``,
    even when the same words are elsewhere in the document."""
    from docpipe.answer.prompts import extract_quotes

    citations: list[Citation] = []
    elsewhere = 0
    for quote, section_id in extract_quotes(result.text):
        found = locate_quote(quote, hits, doc, section_id=section_id)
        if found is not None:
            hit = found.hit
            citations.append(Citation(hit.section_id, hit.heading, found.page_start, found.page_end, quote, True))
            continue
        cited = next((h for h in hits if h.section_id == section_id), None)
        elsewhere += verify_quote(quote, doc)[0]
        citations.append(
            Citation(
                section_id=section_id or "",
                heading=cited.heading if cited else "",
                page_start=cited.page_start if cited else 0,
                page_end=cited.page_end if cited else 0,
                quote=quote,
                verified=False,
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
        notice = (
            "Some quotes were not found in the sections given to the model and are marked unverified: "
            "do not rely on them."
        )
        if elsewhere:
            notice += (
                f" {elsewhere} of them {'is' if elsewhere == 1 else 'are'} elsewhere in the document, in sections "
                "the model was not given, so the answer cannot have read them in context."
            )
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
