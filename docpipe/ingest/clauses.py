"""Cuts a section into the units a lawyer quotes: its numbered paragraphs and sub-clauses ("12.3 ...",
"(a) ...", "(ii) ..."), titled paragraphs and plain paragraphs, each bounded in length, and the sentences
inside them.

PDF text wraps every visual line, so a paragraph is found where a line opens with an enumeration marker or
a short title, after a blank line, or after a line that ends a sentence well short of the text's width. A unit
longer than `max_chars` is cut into runs of whole sentences; a bare title ("9.6 Governing Law.") is joined to
the paragraph it heads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Clause", "clause_spans", "sentence_spans"]

# Where a quotable sentence ends: sentence ends, clause items after ";" or ":", and blank lines; a wrapped line
# ("three\n(3) years") is not an end.
_SENTENCE_OR_ITEM_END = re.compile(r"(?<=[.;:?!])[\"”’)]?\s+(?=[\"“(A-Z0-9])|\n\s*\n")
_HEADING_ONLY = re.compile(r"(?:ARTICLE\s+\w+\s+|Section\s+)?\d+(?:\.\d+)*\.?\s+[^.;:]{1,80}[.:]?", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9]+")

# A line that opens a paragraph by its marker: "12.", "12.3", "12.3.1", "(a)", "(iv)", "(1)", "a)", "A.",
# "Section 5", "ARTICLE IV", "•".
_MARKER = re.compile(
    r"(?:\d{1,2}(?:\.\d{1,2}){0,3}\.?\)?|\(?[a-zA-Z]{1,2}\)|\(?[ivxIVX]{1,5}\)|\(\d{1,2}\)|[A-Z]\.|[•●▪\-–]"
    r"|(?:Section|SECTION|Article|ARTICLE|Clause|CLAUSE)\s+[\dIVXLC]+(?:\.\d+)*\.?)"
    r"[\s\xa0]+(?=\S)"
)
_SENTENCE_END = re.compile(r"[.;:!?][\"”’)]?$")
# Where a list item may end: a sentence end, or "; and" / ", or" before the next item.
_ITEM_END = re.compile(r"(?:[.;:!?][\"”’)]?|[;,]\s*(?:and|or)|\b(?:and|or))$")


@dataclass(frozen=True, slots=True)
class Clause:
    """A quotable unit of a section: its offsets in the section text and the offsets of its sentences."""

    start: int
    end: int
    sentences: tuple[tuple[int, int], ...]


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Returns (start, end) offsets into `text` of the sentences of text[start:end] (clause items count as
    sentences); bare headings and fragments of fewer than 4 words are left out."""
    end = len(text) if end is None else end
    spans, cursor = [], start
    for match in _SENTENCE_OR_ITEM_END.finditer(text, start, end):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, end))
    out = []
    for a, b in spans:
        piece = text[a:b]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        # A bare heading ("9.6 Governing Law; Jurisdiction.") answers nothing.
        if len(_WORD.findall(piece)) >= 4 and not _HEADING_ONLY.fullmatch(piece):
            out.append((a + lead, a + lead + len(piece)))
    return out


def _is_title(line: str) -> bool:
    """True for a short line that names what follows: "TERMINATION", "Governing Law.", "12.3 Notices"."""
    words = _WORD.findall(line)
    if not words or len(line) > 80 or len(words) > 10:
        return False
    letters = [c for c in line if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        return True
    capitalised = [w for w in words if w[0].isupper() or w.isdigit()]
    return len(capitalised) >= max(1, len(words) - 2) and not line.rstrip().endswith((",", ";"))


def _paragraph_starts(text: str, start: int, end: int) -> list[int]:
    """Returns the offsets in text[start:end] where a paragraph begins (always `start` first)."""
    lines: list[tuple[int, int]] = []
    cursor = start
    while cursor < end:
        stop = text.find("\n", cursor, end)
        stop = end if stop < 0 else stop
        lines.append((cursor, stop))
        cursor = stop + 1
    widths = sorted(len(text[a:b].strip()) for a, b in lines if text[a:b].strip())
    # The text's line width: most lines of a paragraph run to it; a paragraph's last line stops short.
    width = widths[int(len(widths) * 0.8)] if widths else 0
    starts = [start]
    previous = ""
    for a, b in lines:
        raw = text[a:b]
        line = raw.strip()
        if not line:
            previous = ""
            continue
        at = a + len(raw) - len(raw.lstrip())
        if (
            at > start
            and (
                not previous
                # "... under Section\n12.3 of this Agreement": a marker opens a paragraph only after one ended.
                or (_MARKER.match(line) and _ITEM_END.search(previous))
                or _is_title(previous)
                or (_SENTENCE_END.search(previous) and len(previous) < 0.7 * width and line[:1].isupper())
            )
        ):
            starts.append(at)
        previous = line
    return starts


def clause_spans(text: str, *, max_chars: int = 700, min_chars: int = 60) -> list[Clause]:
    """Returns the clauses of `text` in order: paragraphs, a bare title joined to what it heads, each at most
    `max_chars` long unless one sentence is longer (long paragraphs are cut into runs of whole sentences)."""
    starts = _paragraph_starts(text, 0, len(text))
    bounds = list(zip(starts, starts[1:] + [len(text)]))
    # A title or marker alone ("12.3 Notices.", "(a)") is joined to the paragraph it opens.
    merged: list[tuple[int, int]] = []
    carry: int | None = None
    for a, b in bounds:
        if carry is not None:
            a, carry = carry, None
        if len(text[a:b].strip()) < min_chars and (a, b) != bounds[-1]:
            carry = a
            continue
        merged.append((a, b))
    if carry is not None:
        merged.append((carry, len(text)))
    clauses: list[Clause] = []
    for a, b in merged:
        sentences = sentence_spans(text, a, b)
        if not sentences:
            continue
        # The paragraph's first run keeps its number and title ("12.3 Notices. Any notice ...").
        first = a + len(text[a:b]) - len(text[a:b].lstrip())
        run: list[tuple[int, int]] = []
        for sentence in sentences:
            if run and sentence[1] - first > max_chars:
                clauses.append(Clause(first, run[-1][1], tuple(run)))
                first, run = sentence[0], []
            run.append(sentence)
        clauses.append(Clause(first, run[-1][1], tuple(run)))
    return clauses
