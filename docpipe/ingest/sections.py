"""Splits a document along its own structure (ARTICLE / 12.3 / Exhibit B ...) into sections of at most
`max_section_tokens` answering-model tokens, each with its heading path, pages and offsets.

Headings are found line by line; numbered headings must continue the numbering seen so far, which keeps
wrapped lines such as "2.5 million units ..." or cross-references ("Section 7.3.") from opening sections.
Parts longer than the limit are cut with langchain-text-splitters on paragraph, line and sentence
boundaries; offsets are computed here and checked (the splitter's own start index is unreliable with a
token length function).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from docpipe.ingest.tokens import TokenCounter
from docpipe.settings import ChunkingSettings
from docpipe.types import Document, Section

__all__ = ["find_headings", "split_sections"]

logger = logging.getLogger(__name__)

_ANNEX = re.compile(
    r"^(?:EXHIBIT|SCHEDULE|ANNEX|APPENDIX|ATTACHMENT|ADDENDUM|Exhibit|Schedule|Annex|Appendix|Attachment)"
    r"(?:\s+(?:[A-Z]{1,3}|[0-9IVX]+(?:[.-][0-9A-Z]+)*))?\b(?![ ]+(?:to|of|hereto|attached)\b)"
)
_ARTICLE = re.compile(r"^(?:ARTICLE|Article|SECTION)\s+([IVXLC]+|\d{1,2})\b(?!\.\d)")
_TOP = re.compile(r"^(\d{1,2})\.\s+(?=[A-Z(\"“])")
_SUB = re.compile(r"^(?:Section\s+|SECTION\s+)?(\d{1,2})\.(\d{1,2})\b(?!\.\d)\.?\s*(?=\S)")
_TOC_ENTRY = re.compile(r"^\S+(?:\s+\S+)?\s+[A-Za-z][^.]*?(?:\s*\.{2,}\s*|\s+)\d{1,3}$")
_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
_MAX_HEADING_LINE = 200


def _roman(value: str) -> int:
    total = 0
    for char, following in zip(value, value[1:] + " "):
        number = _ROMAN[char]
        total += -number if following != " " and _ROMAN[following] > number else number
    return total


def _looks_like_annex_title(line: str, id_end: int) -> bool:
    """Returns True for "EXHIBIT A STATEMENT OF WORK", "Exhibit B - Form of Note", "Schedule 1";
    False for body text that wraps onto a line starting "Schedule 1, as amended ..."."""
    if len(line) > 100:
        return False
    rest = line[id_end:].strip()
    letters = [c for c in line if c.isalpha()]
    return not rest or rest[0] in "-–—:.(" or all(c.isupper() for c in letters)


def _title(line: str) -> str:
    """Returns a short heading for a heading line: up to the end of its title sentence."""
    line = " ".join(line.split())
    match = re.match(r"^(.{3,90}?(?<!\bNo)(?<!\bNO)[.:])(?:\s|$)", line)
    if match and not re.fullmatch(r"[\w\s]*\d+\.(\d+\.?)?", match.group(1)):
        return match.group(1).rstrip(".:")
    return line if len(line) <= 90 else line[:87].rstrip() + "..."


@dataclass(slots=True)
class _Heading:
    offset: int
    level: int  # 0 annex, 1 article / top-level number, 2 numbered subsection
    title: str


def _table_of_contents(lines: list[str]) -> set[int]:
    """Returns the indexes of lines that read as table-of-contents entries: a title ending in a page
    number, among at least two more such lines close by (a lone wrapped line "within 30" is not one)."""
    candidates = [i for i, raw in enumerate(lines) if len(raw.strip()) <= 120 and _TOC_ENTRY.search(raw.strip())]
    marked = set()
    for position, index in enumerate(candidates):
        near = [j for j in candidates[max(0, position - 3) : position + 4] if j != index and abs(j - index) <= 4]
        if len(near) >= 2:
            marked.add(index)
    return marked


def find_headings(text: str) -> list[_Heading]:
    """Returns the headings of `text` that continue the document's own numbering, in order."""
    headings: list[_Heading] = []
    major = minor = 0
    offset = 0
    lines = text.splitlines(keepends=True)
    toc = _table_of_contents(lines)
    for number, raw in enumerate(lines):
        line = raw.strip()
        line_start = offset + len(raw) - len(raw.lstrip())
        offset += len(raw)
        if not line or len(line) > _MAX_HEADING_LINE and not (_SUB.match(line) or _TOP.match(line)):
            continue
        if number in toc:
            # "20.2 Implementation Of Plan ..... 39": a table of contents entry, not the clause itself.
            continue
        if (match := _ANNEX.match(line)) and _looks_like_annex_title(line, match.end()):
            # An SEC exhibit stamp ("Exhibit 10.1") above the title is not an annex of the contract.
            if not headings and line_start < 300:
                continue
            headings.append(_Heading(line_start, 0, _title(line)))
            major = minor = 0
            continue
        if match := _ARTICLE.match(line):
            value = match.group(1)
            number = int(value) if value.isdigit() else _roman(value)
            if major < number <= major + 3 or number == 1:
                headings.append(_Heading(line_start, 1, _title(line)))
                major, minor = number, 0
            continue
        if match := _SUB.match(line):
            a, b = int(match.group(1)), int(match.group(2))
            if (a == major and minor < b <= minor + 3) or (major < a <= major + 2 and b <= 2):
                headings.append(_Heading(line_start, 2, _title(line)))
                major, minor = a, b
            continue
        if match := _TOP.match(line):
            number = int(match.group(1))
            if major < number <= major + 2:
                headings.append(_Heading(line_start, 1, _title(line)))
                major, minor = number, 0
    return headings


@dataclass(slots=True)
class _Part:
    start: int
    end: int
    path: tuple[str, ...]


def _structural_parts(text: str) -> list[_Part]:
    headings = find_headings(text)
    parts: list[_Part] = []
    stack: list[_Heading] = []
    first = headings[0].offset if headings else len(text)
    if text[:first].strip():
        parts.append(_Part(0, first, ("Preamble",)))
    for heading, following in zip(headings, headings[1:] + [None]):
        stack = [h for h in stack if h.level < heading.level] + [heading]
        end = following.offset if following else len(text)
        parts.append(_Part(heading.offset, end, tuple(h.title for h in stack)))
    return parts


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _merge_small(parts: list[_Part], counts: list[int], minimum: int, maximum: int) -> list[tuple[_Part, int]]:
    """Returns parts with those under `minimum` tokens joined to the next one (e.g. a bare ARTICLE line)."""
    merged: list[tuple[_Part, int]] = []
    pending: tuple[_Part, int] | None = None
    for part, count in zip(parts, counts):
        if pending is not None:
            first, first_count = pending
            if first_count + count <= maximum:
                # A bare "ARTICLE 12 TERMINATION" joined to "12.1 ..." reads best under the deeper path.
                deeper = part.path[: len(first.path)] == first.path
                part = _Part(first.start, part.end, part.path if deeper else first.path)
                count = first_count + count
            else:
                merged.append(pending)
            pending = None
        if count < minimum:
            pending = (part, count)
        else:
            merged.append((part, count))
    if pending is not None:
        if merged and merged[-1][1] + pending[1] <= maximum:
            last, last_count = merged.pop()
            merged.append((_Part(last.start, pending[0].end, last.path), last_count + pending[1]))
        else:
            merged.append(pending)
    return merged


def _split_long(text: str, start: int, end: int, counter: TokenCounter, limit: int) -> list[tuple[int, int]]:
    """Returns (start, end) spans, each at most `limit` tokens, covering text[start:end] in order."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=limit,
        chunk_overlap=0,
        length_function=counter.count,
        separators=["\n\n", "\n", ". ", "; ", ", ", " ", ""],
        keep_separator="end",
    )
    spans: list[tuple[int, int]] = []
    cursor = start
    for chunk in splitter.split_text(text[start:end]):
        found = text.find(chunk, cursor, end)
        if found < 0:  # pragma: no cover - the splitter only strips whitespace
            raise AssertionError("text splitter returned text that is not in the section")
        spans.append((found, found + len(chunk)))
        cursor = found + len(chunk)
    # Whitespace the splitter dropped between pieces is given back to the earlier piece.
    return [(s, spans[i + 1][0] if i + 1 < len(spans) else end) for i, (s, _) in enumerate(spans)]


def split_sections(doc: Document, counter: TokenCounter, settings: ChunkingSettings) -> list[Section]:
    """Returns the clause-aware sections of `doc`, in document order, each within the token limit.

    Sections cover every non-blank character of the document text, never overlap, and
    ``section.text == doc.text[section.start:section.end]``.
    """
    text = doc.text
    parts = _structural_parts(text)
    trimmed = [_Part(*_trim(text, p.start, p.end), p.path) for p in parts]
    trimmed = [p for p in trimmed if p.end > p.start]
    counts = [counter.count(text[p.start : p.end]) for p in trimmed]
    merged = _merge_small(trimmed, counts, settings.min_section_tokens, settings.max_section_tokens)

    split_at = min(settings.split_tokens, settings.max_section_tokens)
    front = min(settings.front_matter_tokens, split_at)
    sections: list[Section] = []
    for number, (part, count) in enumerate(merged):
        # The opening (title, parties, date) stays a small section of its own, so it stays findable
        # and can be pinned into every context.
        limit = front if number == 0 and part.path == ("Preamble",) and front else split_at
        if count <= limit:
            spans = [(part.start, part.end)]
        else:
            spans = _split_long(text, part.start, part.end, counter, limit)
        for piece, (start, end) in enumerate(spans, 1):
            start, end = _trim(text, start, end)
            if end <= start:
                continue
            body = text[start:end]
            heading = part.path[-1] + (f" (part {piece} of {len(spans)})" if len(spans) > 1 else "")
            sections.append(
                Section(
                    id=f"s{len(sections) + 1:03d}",
                    heading=heading,
                    heading_path=part.path,
                    start=start,
                    end=end,
                    page_start=doc.page_of(start),
                    page_end=doc.page_of(end - 1),
                    n_tokens=count if len(spans) == 1 else counter.count(body),
                    text=body,
                )
            )
    logger.debug("%s: %d sections from %d structural parts", doc.name, len(sections), len(parts))
    return sections
