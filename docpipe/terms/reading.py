"""What every key-term reader shares: a document's sentences with their offsets (`document_sentences`), the
`Reader` that holds them with the contract's opening, and `read_cell`, which makes a cell of a value only once
its quote, read again, gives it (`supported`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from docpipe.cells import Cell
from docpipe.ingest.clauses import sentence_spans
from docpipe.types import Citation, Document, Section
from docpipe.values.dates import MONTHS
from docpipe.values.kinds import Value
from docpipe.values.read import find_values

T = TypeVar("T")

__all__ = [
    "MAX_OPENING_CHARS",
    "OPENING_CHARS",
    "TITLE_BLOCK_CHARS",
    "Reader",
    "Sentence",
    "dates_in",
    "document_sentences",
    "flat",
    "read_cell",
    "supported",
]

OPENING_CHARS = 3000
TITLE_BLOCK_CHARS = 1500  # a date alone on its line this near the top dates the agreement ("June 1, 2005")
MAX_OPENING_CHARS = 20000  # a preamble is looked for this far: past a cover page and a table of contents
_PREAMBLE = re.compile(
    r"\b(?:THIS|This)\b[^.]{0,200}?\b(?:is|are)\s+(?:hereby\s+)?(?:made|entered|dated|executed)|\bby\s+and\s+"
    r"(?:between|among)\b[^.]{0,400}?\(|\bAGREEMENT\s+(?:dated|made)\b[^.]{0,60}?\b(?:Between|BETWEEN)\b",
)
_QUOTE_CHARS = 600  # a quoted sentence longer than this is cut around the value it proves


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of the document: its offsets in `Document.text`, its text and the section that holds it."""

    start: int
    end: int
    text: str
    section: Section

    @property
    def title(self) -> str:
        """The heading that names the sentence's clause: its section's own or, for a clause headed by its number
        alone ("13.1"), the nearest heading above it that has words ("13. Term")."""
        for heading in (self.section.heading, *reversed(self.section.heading_path)):
            if not _NUMBER_ALONE.match(heading):
                return heading
        return self.section.heading


# A heading that is a clause number and nothing else: "6.", "13.1", "Section 7", "12.3(b)", "IV.".
_NUMBER_ALONE = re.compile(
    r"^\s*(?:(?:Section|SECTION|Article|ARTICLE|Clause|CLAUSE|§)\s*)?(?:\d+|[IVXLC]+)(?:\.\d+)*\.?"
    r"(?:\([a-z0-9]+\))*\.?(?:\s*\(part \d+ of \d+\))?\s*$"
)


def document_sentences(doc: Document) -> list[Sentence]:
    """Returns every sentence of `doc`'s sections, in document order, with offsets into `doc.text`: the
    quotable sentences `sentence_spans` finds, and the text between them (a title line, "Dated as of: ...")
    as sentences of their own, so nothing of the text is out of reach."""
    sentences = []
    for section in doc.sections:
        covered = 0
        spans = []
        for start, end in sentence_spans(section.text):
            if start > covered:
                spans.append((covered, start))
            spans.append((start, end))
            covered = max(covered, end)
        if covered < len(section.text):
            spans.append((covered, len(section.text)))
        for start, end in _joined(section.text, spans):
            text = section.text[start:end]
            if text.strip():
                sentences.append(Sentence(section.start + start, section.start + end, text, section))
    return sentences


# Where a sentence splitter breaks in the middle of a date: after a month's name with a period ("April. 1st
# 2019") or after the label of a date ("Date: 3-14-18"). "may." ends sentences.
_UNFINISHED = re.compile(rf"(?:\b(?:{'|'.join(m for m in MONTHS if m != 'may')})\.|\bDated?\s*:)\s*$", re.IGNORECASE)

# A sentence does not begin in lower case: "for a period of 12\nmonths, each such extension ..." is one.
_GOES_ON = re.compile(r"\s*[a-z]")


def _joined(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Returns `spans` with each span that ends unfinished (`_UNFINISHED`) joined to the span after it."""
    joined: list[tuple[int, int]] = []
    for start, end in spans:
        if joined and (_UNFINISHED.search(text, joined[-1][0], joined[-1][1]) or _GOES_ON.match(text, start)):
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


def flat(text: str) -> str:
    return " ".join(text.split())


class Reader:
    """One document's sentences and the cells read from them so far."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.text = doc.text
        self.sentences = document_sentences(doc)
        # The opening: the first 3,000 characters, or, when a cover page and a table of contents come first,
        # the 3,000 after the preamble begins ("This Agreement is made ...", "by and between").
        preamble = _PREAMBLE.search(self.text, 0, MAX_OPENING_CHARS)
        self.opening_end = max(OPENING_CHARS, preamble.start() + OPENING_CHARS if preamble else 0)
        self.title_block = max(TITLE_BLOCK_CHARS, preamble.start() if preamble else 0)
        self.opening = [s for s in self.sentences if s.start < self.opening_end] or self.sentences[:20]
        self._memo: dict[str, Any] = {}

    def once(self, name: str, work: Callable[[Reader], T]) -> T:
        """Returns `work(self)`, computed once per document: several terms read the same clause (the term
        statement, the renewal sentences)."""
        if name not in self._memo:
            self._memo[name] = work(self)
        return cast(T, self._memo[name])

    def before(self, sentence: Sentence, value: Value, chars: int) -> str:
        """Returns the `chars` characters of the document before `value` (read from `sentence`): a value's
        context may begin in the sentence before ("Date:" ends a sentence of its own)."""
        at = sentence.start + value.start
        return self.text[max(0, at - chars) : at]

    # -- quotes ------------------------------------------------------------------------------------------------
    def quote(self, sentence: Sentence, value: Value | None = None) -> Citation:
        """Returns `sentence` (cut around `value` when it is long) as a verified citation of the document."""
        start, end = sentence.start, sentence.end
        if value is not None and value.start >= 0 and end - start > _QUOTE_CHARS:
            centre = sentence.start + value.start
            start = max(start, centre - _QUOTE_CHARS // 2)
            end = min(end, start + _QUOTE_CHARS)
        text = self.text[start:end]
        first, last = self.doc.page_of(start), self.doc.page_of(max(start, end - 1))
        return Citation(
            section_id=sentence.section.id,
            heading=sentence.section.heading,
            page_start=first,
            page_end=last,
            quote=text,
            verified=True,
            highlight=value.as_written if value is not None else "",
            document_id=self.doc.id,
            document_name=self.doc.name,
            **self.doc.citation_marks(first, last),
        )

    def find(
        self, pattern: re.Pattern[str], sentences: Iterable[Sentence] | None = None
    ) -> Iterable[tuple[Sentence, re.Match[str]]]:
        for sentence in self.sentences if sentences is None else sentences:
            match = pattern.search(sentence.text)
            if match:
                yield sentence, match


def read_cell(
    reader: Reader,
    kind: str,
    value: Value,
    sentence: Sentence,
    note: str = "",
    read: Callable[[str], list[Value]] | None = None,
) -> Cell:
    """Returns a present cell of `value` read from `sentence`, after reading the quote again (`supported`, with
    the reader that found it when it is not the kind's own)."""
    quote = reader.quote(sentence, value)
    problem = supported(kind, value, quote.quote, read)
    if problem:
        return Cell("uncertain", quotes=[quote], note=problem, searched=[sentence.section.id])
    return Cell("present", quotes=[quote], note=note, searched=[sentence.section.id], value=value)


def supported(kind: str, value: Value, quote: str, read: Callable[[str], list[Value]] | None = None) -> str:
    """Returns "" when `quote` gives `value` (a reader of `kind`, or `read`, finds an equal normalized value in
    it), else the reason it does not: what a reviewer reads in the cell's note."""
    if kind in ("text", "yes_no"):
        return "" if quote.strip() else "no quote"
    found = read(quote) if read is not None else find_values(kind, quote)
    if any(_same(kind, f.normalized, value.normalized) for f in found):
        return ""
    seen = ", ".join(dict.fromkeys(f.display for f in found)) or "no " + kind
    return f"The quote does not give {value.display}: it reads {seen}."


def _same(kind: str, a: object, b: object) -> bool:
    if kind == "parties" and isinstance(a, list) and isinstance(b, list):
        return {flat(str(p.get("name", ""))).casefold() for p in b} <= {
            flat(str(p.get("name", ""))).casefold() for p in a
        }
    return a == b


def dates_in(sentence: Sentence) -> list[Value]:
    """Returns the dates written in `sentence` ("perpetual" is not one here)."""
    return [v for v in find_values("date", sentence.text) if v.normalized != "perpetual"]
