"""Definitions and cross-references: the parts of a contract a retrieved clause leans on.

A clause such as "Neither party shall disclose Confidential Information ... subject to Section 9.2" cannot be
read alone: the reader needs what "Confidential Information" means and what Section 9.2 says. `References`
finds a contract's defined terms (``"Term" means ...``, ``(the "Term")``) and its numbered sections once;
`supporting_hits` then brings the definitions and referenced sections that a context uses, in that
context's order, into whatever token budget is left. They go to the model marked as supporting material.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from docpipe.types import Document, Hit, Section

__all__ = ["Definition", "References", "supporting_hits"]

_Q_OPEN = '"“'
_Q_CLOSE = '"”'
# "Term" means / shall mean / has the meaning / refers to ...
_MEANS = re.compile(
    rf"[{_Q_OPEN}](?P<term>[A-Z][\w&/\-. ']{{1,60}}?)[{_Q_CLOSE}]\s*(?:\([^)]{{0,40}}\)\s*)?,?\s*"
    r"(?:means|shall mean|will mean|has the meaning|shall have the meaning|have the meanings?|refers to|"
    r"includes|shall include|is defined)",
)
# (the "Term"), (each, a "Term"), (hereinafter "Term"), (collectively, the "Terms")
_PAREN = re.compile(
    rf"\((?:[^()]{{0,40}}?)[{_Q_OPEN}](?P<term>[A-Z][\w&/\-. ']{{1,60}}?)[{_Q_CLOSE}](?:\s*(?:or|and)\s*"
    rf"[{_Q_OPEN}][^{_Q_CLOSE}]{{1,60}}[{_Q_CLOSE}])*\s*\)",
)
_REFERENCE = re.compile(
    r"\b(?:Sections?|Articles?|Clauses?|Paragraphs?)\s+(?P<number>\d{1,3}(?:\.\d{1,3}){0,3})(?![\d.]*%)",
)
_HEADING_NUMBER = re.compile(r"^(?:(?:ARTICLE|Article|SECTION|Section|CLAUSE|Clause)\s+)?(\d{1,3}(?:\.\d{1,3}){0,3})\b")
# A numbered clause starting a line inside a section: "14.1 Non-Solicitation." / "(ii)" is not one.
_LINE_NUMBER = re.compile(
    r"(?m)^[ \t]*(?:(?:ARTICLE|Article|SECTION|Section)\s+)?(\d{1,3}(?:\.\d{1,3}){0,3})\.?[ \t]+(?=[A-Z\"“(])"
)
# Where a definition or a cut referenced clause may end: after "." or ";" (or a blank line). Unlike the sentence
# ends of extractive answers (docpipe.answer.extractive), ":" does not end one, so a definition keeps the list it
# introduces ('"Services" means: (a) ... (b) ...').
_STATEMENT_END = re.compile(r"(?<=[.;])[\"”)]?\s+(?=[\"“(A-Z0-9])|\n\s*\n")
# Terms every clause uses and the pinned front matter already defines.
_GENERIC = {"agreement", "this agreement", "party", "parties", "you", "we", "us", "our", "your", "company"}

MAX_DEFINITION_CHARS = 1200
MAX_REFERENCE_TOKENS = 768


@dataclass(frozen=True, slots=True)
class Definition:
    """Where a defined term is defined: the term and the defining sentence's offsets in `Document.text`."""

    term: str
    start: int
    end: int


@dataclass(slots=True)
class References:
    """Returns the defined terms and numbered sections of one document (built once, kept with its index)."""

    definitions: dict[str, Definition]
    numbered: dict[str, tuple[str, int]]  # clause number ("9.2") -> (section id, offset where the clause starts)
    _term_pattern: re.Pattern[str] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, doc: Document) -> References:
        """Returns the references of `doc`: the first definition of each term and each heading's number."""
        text = doc.text
        definitions: dict[str, Definition] = {}
        for pattern in (_MEANS, _PAREN):
            for match in pattern.finditer(text):
                term = " ".join(match.group("term").split()).strip(" .'")
                if len(term) < 3 or term.casefold() in _GENERIC or term in definitions:
                    continue
                start, end = _sentence_around(text, match.start(), match.end())
                definitions[term] = Definition(term, start, end)
        numbered: dict[str, tuple[str, int]] = {}
        for section in doc.sections:
            for heading in (*section.heading_path, section.heading):
                found = _HEADING_NUMBER.match(heading)
                if found and found.group(1) not in numbered:
                    numbered[found.group(1)] = (section.id, section.start)
        # Clauses too small to be sections of their own start a line inside one. Only those inside the
        # article of the same number count, so a table of contents or an exhibit's own "1." does not.
        for section in doc.sections:
            top = next((m.group(1) for m in map(_HEADING_NUMBER.match, section.heading_path) if m), None)
            if top is None:
                continue
            for match in _LINE_NUMBER.finditer(section.text):
                number = match.group(1)
                if number not in numbered and number.split(".")[0] == top.split(".")[0]:
                    numbered[number] = (section.id, section.start + match.start(1))
        return cls(definitions, numbered)

    def terms_in(self, text: str) -> list[str]:
        """Returns the defined terms used in `text`, in order of first use."""
        if not self.definitions:
            return []
        if self._term_pattern is None:
            # Longest first, so "Confidential Information" wins over "Information".
            alternatives = sorted(self.definitions, key=len, reverse=True)
            self._term_pattern = re.compile(r"(?<![\w])(?:" + "|".join(map(re.escape, alternatives)) + r")(?![\w])")
        seen: dict[str, None] = {}
        for match in self._term_pattern.finditer(text):
            seen.setdefault(match.group(0), None)
        return list(seen)

    def locate(self, number: str) -> tuple[str, int] | None:
        """Returns (section id, start offset) of the clause numbered `number`, else of its nearest numbered
        parent ("4.3.2" -> "4.3"), else None."""
        parts = number.split(".")
        while parts:
            found = self.numbered.get(".".join(parts))
            if found:
                return found
            parts.pop()
        return None

    def cited_in(self, text: str) -> list[tuple[str, int]]:
        """Returns (section id, start offset) of each clause that `text` cites ("Section 9.2") and this
        document has, in order of first citation."""
        found: dict[tuple[str, int], None] = {}
        for match in _REFERENCE.finditer(text):
            where = self.locate(match.group("number"))
            if where:
                found.setdefault(where, None)
        return list(found)

    def section_for(self, number: str) -> str | None:
        """Returns the id of the section holding the clause numbered `number` (see `locate`)."""
        found = self.locate(number)
        return found[0] if found else None


def _sentence_around(text: str, start: int, end: int) -> tuple[int, int]:
    """Returns the offsets of the sentence (or clause item) holding text[start:end], bounded in length."""
    lo = max(0, start - MAX_DEFINITION_CHARS // 2)
    left = start
    for match in _STATEMENT_END.finditer(text, lo, start):
        left = match.end()
    if left == start:
        newline = text.rfind("\n", lo, start)
        left = newline + 1 if newline >= 0 else lo
    stop = _STATEMENT_END.search(text, end, min(len(text), left + MAX_DEFINITION_CHARS))
    right = stop.start() if stop else min(len(text), left + MAX_DEFINITION_CHARS)
    return left, right


def supporting_hits(
    context: list[Hit],
    doc: Document,
    refs: References,
    *,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> list[Hit]:
    """Returns definition and cross-reference hits for the sections in `context`, within `budget_tokens`.

    Referenced sections come first (they are part of the clause's meaning), then definitions of the terms
    the context uses, each in the order the context mentions them. Anything already in the context is
    skipped; a referenced section too large for what is left is cut at a sentence end.
    """
    if budget_tokens <= 0 or not context:
        return []
    sections = {s.id: s for s in doc.sections}
    spans = [(sections[h.section_id].start, sections[h.section_id].end) for h in context if h.section_id in sections]

    def covered(start: int, end: int) -> bool:
        return any(s <= start and end <= e for s, e in spans)

    out: list[Hit] = []
    used = 0
    referenced: list[tuple[str, int]] = []
    for hit in context:
        if hit.role != "match":
            continue
        for cited in refs.cited_in(hit.text):
            if cited not in referenced and not covered(cited[1], cited[1] + 1):
                referenced.append(cited)
    for sid, start in referenced:
        if covered(start, start + 1):
            continue
        section = sections[sid]
        text = section.text[start - section.start :]
        limit = min(MAX_REFERENCE_TOKENS, budget_tokens - used)
        text, tokens = _cut(_own_clause(text), limit, count_tokens)
        if not text:
            continue
        out.append(_support(section, start, start + len(text), text, tokens, "reference", doc))
        used += tokens
        spans.append((start, start + len(text)))

    terms: list[str] = []
    for hit in context + out:
        for term in refs.terms_in(hit.text):
            if term not in terms:
                terms.append(term)
    by_section: dict[str, list[Definition]] = {}
    for term in terms:
        definition = refs.definitions[term]
        if covered(definition.start, definition.end):
            continue
        tokens = count_tokens(doc.text[definition.start : definition.end])
        if used + tokens > budget_tokens:
            continue
        used += tokens
        spans.append((definition.start, definition.end))
        home = _section_at(doc, definition.start)
        if home is not None:
            by_section.setdefault(home.id, []).append(definition)
    for sid, found in by_section.items():
        found.sort(key=lambda d: d.start)
        text = "\n…\n".join(doc.text[d.start : d.end].strip() for d in found)
        tokens = count_tokens(text)
        out.append(_support(sections[sid], found[0].start, found[-1].end, text, tokens, "definition", doc))
    return out


def _own_clause(text: str) -> str:
    """Returns `text` up to the next numbered clause at the same or a higher level ("9.2 ..." stops at "9.3")."""
    first = _LINE_NUMBER.match(text)
    if first is None:
        return text
    depth = first.group(1).count(".")
    for match in _LINE_NUMBER.finditer(text, first.end()):
        if match.group(1).count(".") <= depth:
            return text[: match.start()].rstrip()
    return text


def _cut(text: str, limit: int, count_tokens: Callable[[str], int]) -> tuple[str, int]:
    """Returns the longest run of whole sentences from the start of `text` within `limit` tokens."""
    if limit <= 0:
        return "", 0
    text = text.rstrip()
    tokens = count_tokens(text)
    if tokens <= limit:
        return text, tokens
    ends = [m.start() for m in _STATEMENT_END.finditer(text)]
    best: tuple[str, int] = ("", 0)
    lo, hi = 0, len(ends) - 1
    while lo <= hi:  # token counts grow with the prefix: bisect on the sentence ends
        mid = (lo + hi) // 2
        piece = text[: ends[mid]].rstrip()
        tokens = count_tokens(piece)
        if tokens <= limit:
            best, lo = (piece, tokens), mid + 1
        else:
            hi = mid - 1
    return best


def _section_at(doc: Document, offset: int) -> Section | None:
    for section in doc.sections:
        if section.start <= offset < section.end:
            return section
    return None


def _support(section: Section, start: int, end: int, text: str, tokens: int, role: str, doc: Document) -> Hit:
    first, last = doc.page_of(start), doc.page_of(max(start, end - 1))
    return Hit(
        section_id=section.id,
        heading=section.heading,
        heading_path=section.heading_path,
        page_start=first,
        page_end=last,
        text=text,
        score=0.0,
        n_tokens=tokens,
        rank=-1,
        passage_start=start,
        passage_end=end,
        role=role,
        unit=section.unit,
    )
