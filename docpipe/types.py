"""The pipeline's data, and nothing that does work: what a PDF becomes (pages with a status each,
clause-aware sections, passages, the `Document` tying them), what retrieval returns (`Hit`) and what an
answer is (`Answer` with its `Citation`s).

Offsets are character offsets into `Document.text`, the page texts joined by `PAGE_SEPARATOR`, so any
section or passage can be mapped back to its pages and checked against the stored page text. This module
imports nothing of docpipe but `docpipe.audit` and `docpipe.version` (for the manifest an answer carries):
every stage may import it.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from docpipe.audit import AuditManifest, iso_time
from docpipe.version import __version__

__all__ = [
    "OWN_MATTER",
    "PAGE_SEPARATOR",
    "Answer",
    "Citation",
    "Document",
    "Hit",
    "Page",
    "PageStatus",
    "Passage",
    "Section",
    "page_range",
    "scoped_matter",
]

#: The store's own matter: where the command line and the library work unless told another, and what a server or
#: workbench without API keys shows. Its views of documents and collections carry no matter (None), so what the
#: command line caches is what the server finds, and the other way round.
OWN_MATTER = "default"


def scoped_matter(matter: str | None) -> str | None:
    """Returns the matter a view is scoped to: None for the store's own matter (given as None or ``"default"``),
    else `matter`.

    >>> scoped_matter("default"), scoped_matter(None), scoped_matter("deal-x")
    (None, None, 'deal-x')
    """
    return None if matter in (None, OWN_MATTER) else matter


PAGE_SEPARATOR = "\n\n"


def page_range(first: int, last: int, unit: str = "page") -> str:
    """Returns a page range as a citation string: ``p. 3`` or ``pp. 3-4``; for a Word file, whose "pages" are
    its paragraphs (`Document.kind` ``docx``), ``¶ 3`` or ``¶¶ 3-4``."""
    if unit == "paragraph":
        return f"¶ {first}" if first == last else f"¶¶ {first}-{last}"
    return f"p. {first}" if first == last else f"pp. {first}-{last}"


class PageStatus(str, Enum):
    """How extraction went for one page."""

    OK = "ok"
    OCR = "ocr"  # no (usable) text layer: the text was read from the rendered page by OCR
    NO_TEXT = "no_text_layer"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Page:
    """One extracted page: 1-based number, its text, status and, when not ok, why.

    >>> Page(number=1, text="ARTICLE 1", status=PageStatus.OK).ok
    True
    """

    number: int
    text: str
    status: PageStatus = PageStatus.OK
    detail: str = ""
    # OCR pages: the engine's mean word confidence (0-1), and each word's place: (start, end) offsets into
    # `text` and its box (left, top, right, bottom) as fractions of the page's width and height, top-left origin.
    confidence: float | None = None
    words: tuple[tuple[int, int, float, float, float, float], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status is PageStatus.OK

    def to_dict(self) -> dict[str, Any]:
        """Returns the page as stored: number, text, status, detail and, for an OCR page, confidence and words."""
        data: dict[str, Any] = {"number": self.number, "text": self.text, "status": self.status.value}
        data["detail"] = self.detail
        if self.confidence is not None:
            data["confidence"] = self.confidence
        if self.words:
            data["words"] = [list(w) for w in self.words]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Page:
        """Returns the page `to_dict` gave (records stored before OCR have no confidence or words)."""
        return cls(
            data["number"],
            data["text"],
            PageStatus(data["status"]),
            data.get("detail", ""),
            confidence=data.get("confidence"),
            words=tuple(tuple(w) for w in data.get("words", ())),
        )

    def describe(self) -> str:
        """Returns a one-line human description, e.g. ``page 7: no text layer (scanned?)``."""
        if self.ok:
            return f"page {self.number}: ok ({len(self.text)} characters)"
        if self.status is PageStatus.OCR:
            confidence = f", confidence {self.confidence:.2f}" if self.confidence is not None else ""
            return f"page {self.number}: read by OCR{confidence}" + (f" ({self.detail})" if self.detail else "")
        label = {PageStatus.NO_TEXT: "no text layer", PageStatus.ERROR: "error"}[self.status]
        return f"page {self.number}: {label}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class Section:
    """A clause-aware section: an id, its heading path, the pages it spans and its offsets.

    `start`/`end` index into `Document.text`; `text` is exactly `Document.text[start:end]`.
    """

    id: str
    heading: str
    heading_path: tuple[str, ...]
    start: int
    end: int
    page_start: int
    page_end: int
    n_tokens: int
    text: str
    # What page_start/page_end count: "page", or "paragraph" in a Word file (`Document.unit`).
    unit: str = "page"

    @property
    def pages(self) -> str:
        """Returns the page range as a citation string: ``p. 3`` or ``pp. 3-4`` (a Word file's ``¶ 3``)."""
        return page_range(self.page_start, self.page_end, self.unit)


@dataclass(frozen=True, slots=True)
class Passage:
    """An embedder-sized piece of a section (what the embedder and BM25 read), pointing to its parent."""

    index: int
    section_id: str
    start: int
    end: int
    text: str


@dataclass(slots=True)
class Document:
    """An ingested PDF: id (SHA-256 of its bytes), name, pages with their statuses, and sections.

    >>> doc = Document(id="ab" * 32, name="x.pdf", pages=[Page(1, "Hello"), Page(2, "World")])
    >>> doc.text
    'Hello\\n\\nWorld'
    >>> doc.page_of(7)
    2
    """

    id: str
    name: str
    pages: list[Page]
    sections: list[Section] = field(default_factory=list)
    extractor: str = ""
    fingerprint: str = ""
    # PBKDF2 of the password that opened an encrypted PDF: stored text is only handed out with it.
    password_check: str | None = field(default=None, repr=False)
    # The matter this view of the document belongs to (a shared server keeps matters apart): part of every
    # answer-cache key made for it. Not stored: the content-addressed store is the same for every matter.
    matter: str | None = None
    # "pdf", or "docx": a Word file has no pages, so its "pages" are its paragraphs (and tables' rows), numbered
    # from 1, and citations give the section heading and paragraph number (`Citation.unit`).
    kind: str = "pdf"

    @property
    def unit(self) -> str:
        """Returns what page numbers count in this document: ``page``, or ``paragraph`` for a Word file."""
        return "paragraph" if self.kind == "docx" else "page"

    def citation_marks(self, first: int, last: int) -> dict[str, Any]:
        """Returns the `Citation` fields that depend on where a quote is: its unit (pages, or a Word file's
        paragraphs) and whether any page of `first`-`last` was read by OCR (a reviewer checks the scan)."""
        ocr = any(p.status is PageStatus.OCR for p in self.pages if first <= p.number <= last)
        return {"unit": self.unit, "ocr": ocr}

    @property
    def encrypted(self) -> bool:
        """Returns True when the PDF needed a password to open."""
        return self.password_check is not None

    @property
    def text(self) -> str:
        return PAGE_SEPARATOR.join(page.text for page in self.pages)

    @property
    def page_starts(self) -> list[int]:
        """Returns the offset in `text` where each page begins."""
        starts, offset = [], 0
        for page in self.pages:
            starts.append(offset)
            offset += len(page.text) + len(PAGE_SEPARATOR)
        return starts

    def page_of(self, offset: int) -> int:
        """Returns the 1-based page number that holds character `offset` of `text`."""
        index = bisect.bisect_right(self.page_starts, offset) - 1
        return self.pages[max(index, 0)].number

    @property
    def page_statuses(self) -> dict[int, str]:
        """Returns ``{page number: status}`` for every page."""
        return {page.number: page.status.value for page in self.pages}

    @property
    def warnings(self) -> list[str]:
        """Returns one line per page that did not extract cleanly."""
        return [page.describe() for page in self.pages if not page.ok]

    def section(self, section_id: str) -> Section:
        """Returns the section with this id."""
        for section in self.sections:
            if section.id == section_id:
                return section
        raise KeyError(section_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "extractor": self.extractor,
            "fingerprint": self.fingerprint,
            "password_check": self.password_check,
            "kind": self.kind,
            "pages": [p.to_dict() for p in self.pages],
            "sections": [{**asdict(s), "heading_path": list(s.heading_path)} for s in self.sections],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Document:
        pages = [Page.from_dict(p) for p in data["pages"]]
        sections = [Section(**{**s, "heading_path": tuple(s["heading_path"])}) for s in data.get("sections", [])]
        return cls(
            id=data["id"],
            name=data["name"],
            pages=pages,
            sections=sections,
            extractor=data.get("extractor", ""),
            fingerprint=data.get("fingerprint", ""),
            password_check=data.get("password_check"),
            kind=data.get("kind", "pdf"),
        )


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
    # The document the section is from: its id (SHA-256) and the name it is seen under.
    document_id: str = ""
    document_name: str = ""
    # What page_start/page_end count: "page", or "paragraph" in a Word file (the section's `unit`).
    unit: str = "page"

    @property
    def pages(self) -> str:
        return page_range(self.page_start, self.page_end, self.unit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "document_name": self.document_name,
            "section_id": self.section_id,
            "heading": self.heading,
            "heading_path": list(self.heading_path),
            "page_start": self.page_start,
            "page_end": self.page_end,
            "unit": self.unit,
            "score": round(self.score, 6),
            "n_tokens": self.n_tokens,
            "rank": self.rank,
            "role": self.role,
            "text": self.text,
        }


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
    # The sentence of `quote` that answers best (extractive answers quote whole clauses); "" when not marked.
    highlight: str = ""
    # The document quoted: its id (SHA-256) and the name it is seen under.
    document_id: str = ""
    document_name: str = ""
    # What page_start/page_end count: "page", or "paragraph" in a Word file (it has no pages).
    unit: str = "page"
    # The quote was verified against text read by OCR from a scanned page: a reviewer should check the scan.
    ocr: bool = False

    @property
    def pages(self) -> str:
        """Returns where the quote is: ``p. 3`` / ``pp. 3-4``, or a Word file's paragraphs ``¶ 3``."""
        return page_range(self.page_start, self.page_end, self.unit)

    def to_dict(self) -> dict[str, Any]:
        """Returns the citation as JSON-ready data, its page range spelled out (``pages``) for readers."""
        return {**asdict(self), "pages": self.pages}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Citation:
        """Returns the citation `to_dict` gave (keys it does not know, such as ``pages``, are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(slots=True)
class Answer:
    """An answer with its provenance, so it can be audited later.

    `mode` is ``extractive`` (quoted sentences, no model) or ``generative``; `thinking` holds a model's
    reasoning, never mixed into `text`.

    >>> a = Answer("Who pays?", "The Customer.", "generative", [], "echo", "ab" * 32, "f", ["s001"])
    >>> Answer.from_dict(a.to_dict()) == a
    True
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
    # Asked of a collection: its name, and every document whose sections were in the context (for an answer
    # about one document, `document_id` is it and this list is empty).
    collection: str = ""
    document_ids: list[str] = field(default_factory=list)
    # Asked of each contract of a collection (`docpipe.review.each`): the contracts by name where it is "found",
    # "to_check", "not_found", and "failed" (could not be read); None for an answer from pooled passages.
    each: dict[str, list[str]] | None = None
    # The model's token counts when it generated the answer (prompt, completion); zero for a quoted answer.
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def manifest(self) -> AuditManifest:
        """Returns the answer's audit manifest: document SHA-256, model and revision, settings, sections, time."""
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
            collection=self.collection,
            documents_sha256=tuple(self.document_ids),
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["citations"] = [c.to_dict() for c in self.citations]
        data["manifest"] = self.manifest().to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        """Returns the answer stored by `to_dict` (the answer cache keeps them so)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["citations"] = [Citation.from_dict(c) for c in data.get("citations", [])]
        return cls(**fields)
