"""Splits a document along its own structure (ARTICLE / 12.3 / Exhibit B ..., found by
`docpipe.ingest.headings`) into sections of at most `max_section_tokens` answering-model tokens, each with its
heading path, pages and offsets.

Parts under `min_section_tokens` join the next part when it is their own first sub-clause (a bare
"ARTICLE 5" line), but a numbered clause, however short, stays a section of its own: a citation names its own
clause. Parts longer than the limit are cut with langchain-text-splitters on paragraph, line and sentence
boundaries; offsets are computed here and checked (the splitter's own start index is unreliable with a
token length function).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from docpipe.ingest.headings import Heading, find_headings
from docpipe.settings import ChunkingSettings
from docpipe.tokens import TokenCounter
from docpipe.types import Document, Section

__all__ = ["find_headings", "split_sections"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Part:
    start: int
    end: int
    path: tuple[str, ...]
    numbered: bool = False


def _structural_parts(text: str) -> list[_Part]:
    headings = find_headings(text)
    parts: list[_Part] = []
    stack: list[Heading] = []
    first = headings[0].offset if headings else len(text)
    if text[:first].strip():
        parts.append(_Part(0, first, ("Preamble",)))
    for heading, following in zip(headings, headings[1:] + [None]):
        stack = [h for h in stack if h.level < heading.level] + [heading]
        end = following.offset if following else len(text)
        parts.append(_Part(heading.offset, end, tuple(h.title for h in stack), heading.numbered))
    return parts


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _fold_bare(text: str, parts: list[_Part], counts: list[int]) -> tuple[list[_Part], list[int]]:
    """Returns parts with each that holds its number and nothing else ("1.1." on a line of its own: a numbering
    column extracted apart from its text) joined to the part after it, under that part's heading: such a
    section answers nothing, and a reference to its number must find the text that follows. A redacted clause
    ("4.5 [***].") keeps its own section."""
    out: list[_Part] = []
    out_counts: list[int] = []
    pending: tuple[int, int] | None = None  # (start, tokens) of bare parts waiting for a part with words
    for part, count in zip(parts, counts):
        if _BARE.fullmatch(text, part.start, part.end):
            pending = (pending[0] if pending else part.start, (pending[1] if pending else 0) + count)
            continue
        if pending is not None:
            part, count = _Part(pending[0], part.end, part.path, part.numbered), pending[1] + count
            pending = None
        out.append(part)
        out_counts.append(count)
    if pending is not None:  # bare numbers at the very end stay where they are
        out.append(_Part(pending[0], parts[-1].end, parts[-1].path, parts[-1].numbered))
        out_counts.append(pending[1])
    return out, out_counts


_BARE = re.compile(r"[\d.()\s]*")


def _merge_small(parts: list[_Part], counts: list[int], minimum: int, maximum: int) -> list[tuple[_Part, int]]:
    """Returns parts with those under `minimum` tokens joined to the next one (e.g. a bare ARTICLE line). Two
    numbered clauses ("4.1 Term", "4.2 Termination by Anixa") stay apart, however short: a section joined to
    its sibling would give a citation of the second the heading of the first."""
    merged: list[tuple[_Part, int]] = []
    pending: tuple[_Part, int] | None = None
    for part, count in zip(parts, counts):
        if pending is not None:
            first, first_count = pending
            # A bare "ARTICLE 12 TERMINATION" joined to "12.1 ..." reads best under the deeper path.
            deeper = part.path[: len(first.path)] == first.path
            if first_count + count <= maximum and (deeper or not (first.numbered or part.numbered)):
                part = (
                    _Part(first.start, part.end, part.path, part.numbered)
                    if deeper
                    else _Part(first.start, part.end, first.path, first.numbered)
                )
                count = first_count + count
            else:
                merged.append(pending)
            pending = None
        if count < minimum:
            pending = (part, count)
        else:
            merged.append((part, count))
    if pending is not None:
        if merged and merged[-1][1] + pending[1] <= maximum and not (merged[-1][0].numbered or pending[0].numbered):
            last, last_count = merged.pop()
            merged.append((_Part(last.start, pending[0].end, last.path, last.numbered), last_count + pending[1]))
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
    trimmed = [_Part(*_trim(text, p.start, p.end), p.path, p.numbered) for p in parts]
    trimmed = [p for p in trimmed if p.end > p.start]
    counts = [counter.count(text[p.start : p.end]) for p in trimmed]
    trimmed, counts = _fold_bare(text, trimmed, counts)
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
                    unit=doc.unit,
                )
            )
    logger.debug("%s: %d sections from %d structural parts", doc.name, len(sections), len(parts))
    return sections
