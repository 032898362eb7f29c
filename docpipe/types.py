"""The data a PDF becomes: pages with a status each, clause-aware sections, and the `Document` tying them.

Offsets are character offsets into `Document.text`, the page texts joined by `PAGE_SEPARATOR`, so any
section or passage can be mapped back to its pages and checked against the stored page text.
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

__all__ = ["PAGE_SEPARATOR", "Document", "Page", "PageStatus", "Passage", "Section", "page_range"]

PAGE_SEPARATOR = "\n\n"


def page_range(first: int, last: int) -> str:
    """Returns a page range as a citation string: ``p. 3`` or ``pp. 3-4``."""
    return f"p. {first}" if first == last else f"pp. {first}-{last}"


class PageStatus(str, Enum):
    """How extraction went for one page."""

    OK = "ok"
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

    @property
    def ok(self) -> bool:
        return self.status is PageStatus.OK

    def describe(self) -> str:
        """Returns a one-line human description, e.g. ``page 7: no text layer (scanned?)``."""
        if self.ok:
            return f"page {self.number}: ok ({len(self.text)} characters)"
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

    @property
    def pages(self) -> str:
        """Returns the page range as a citation string: ``p. 3`` or ``pp. 3-4``."""
        return page_range(self.page_start, self.page_end)


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
    """Returns nothing; holds an ingested PDF: id (SHA-256 of its bytes), pages and sections.

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
            "pages": [
                {"number": p.number, "text": p.text, "status": p.status.value, "detail": p.detail}
                for p in self.pages
            ],
            "sections": [
                {**asdict(s), "heading_path": list(s.heading_path)} for s in self.sections
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Document:
        pages = [
            Page(p["number"], p["text"], PageStatus(p["status"]), p.get("detail", ""))
            for p in data["pages"]
        ]
        sections = [
            Section(**{**s, "heading_path": tuple(s["heading_path"])}) for s in data.get("sections", [])
        ]
        return cls(
            id=data["id"],
            name=data["name"],
            pages=pages,
            sections=sections,
            extractor=data.get("extractor", ""),
            fingerprint=data.get("fingerprint", ""),
            password_check=data.get("password_check"),
        )
