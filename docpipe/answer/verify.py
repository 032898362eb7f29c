"""Quote verification: where a quoted span is in the contract text, and whether it is there at all.

A citation's quote is checked against the sections that were in the model's context (`locate_quote`), after
whitespace normalisation and reading the text as the prompt showed it (see `docpipe.answer.prompts.neutralise`);
its pages are where it was found there. A quote that no context section holds is not a verified fact, even when
the words occur elsewhere in the document (`verify_quote` says whether they do): the model was not given them.
"""

from __future__ import annotations

import bisect
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from docpipe.answer.prompts import ESCAPED_OPENER, neutralise, tag_openers
from docpipe.types import Document, Hit

__all__ = ["QuoteLocation", "locate_quote", "normalise_whitespace", "verify_quote"]

_SPACE = re.compile(r"\s+")


def normalise_whitespace(text: str) -> str:
    """Returns `text` with every whitespace run as one space and none at either end (how quotes are compared)."""
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
        chunk = normalise_whitespace(page.text)
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
    needle = normalise_whitespace(quote)
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
    return normalise_whitespace(neutralise(quote))


def _fold(text: str, base: int | None) -> _Piece:
    """Returns `text` as `_fold_quote` reads a quote copied from the prompt: tag brackets escaped as
    `neutralise` escapes them, whitespace runs as one space."""
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
