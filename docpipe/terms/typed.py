"""Typed cells without a language model: the built-in key terms (`docpipe.terms.key_terms`), and any other typed
column read from the sections retrieval found for its question.

A column of one's own (``-q "Renewal fee?::money"``) is read from its retrieved sections, best first: the first
sentence that holds a value of the column's kind gives the cell its value and quote. The sentence was found
by similarity, not by a reader that knows where such a term is written, so the cell is a ``candidate`` with
its value: a reviewer sees the value and checks it. Nothing found is ``not_found``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from docpipe.cells import Cell, Column
from docpipe.ingest.clauses import sentence_spans
from docpipe.types import Citation, Document, Hit
from docpipe.values.kinds import Value
from docpipe.values.read import find_values

__all__ = ["LINE_CHARS", "line", "read_typed_cell"]

LINE_CHARS = 160  # a cell's sentence, cut to what one line of a table shows


def line(text: str, limit: int = LINE_CHARS) -> str:
    """Returns `text` on one line, cut at a word to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _reader_for(column: Column) -> Callable[[str], list[Value]]:
    """Returns the reader of `column`'s values: its kind's, or for a question about the governing law the
    governing-law reader (the law chosen, not the place of incorporation or of the courts)."""
    if column.kind == "jurisdiction" and re.search(r"\blaws?\b|\bgovern", column.question, re.IGNORECASE):
        from docpipe.values.jurisdictions import governing_law

        return governing_law
    return lambda text: find_values(column.kind, text, column.options)


def read_typed_cell(column: Column, hits: list[Hit], doc: Document) -> Cell:
    """Returns the cell of typed `column` read from `hits` (the sections retrieved for it from `doc`)."""
    searched = [h.section_id for h in hits]
    read = _reader_for(column)
    # The sections that match the question first; the pinned opening (front matter) last.
    for hit in sorted(hits, key=lambda h: (h.role == "front_matter", h.rank)):
        try:
            section = doc.section(hit.section_id)
        except KeyError:
            continue
        for start, end in sentence_spans(section.text):
            sentence = section.text[start:end]
            values = read(sentence)
            if not values:
                continue
            value = values[0]
            first = doc.page_of(section.start + start)
            last = doc.page_of(section.start + max(start, end - 1))
            quote = Citation(
                section_id=section.id,
                heading=section.heading,
                page_start=first,
                page_end=last,
                quote=sentence,
                verified=True,
                highlight=value.as_written,
                document_id=doc.id,
                document_name=doc.name,
                **doc.citation_marks(first, last),
            )
            return Cell(
                "candidate",
                answer=value.display,
                quotes=[quote],
                note=f"Read from the best-matching sections: check that this {column.kind} answers the question.",
                searched=searched,
                value=value,
            )
    return Cell(
        "not_found",
        note=f"No {column.kind.replace('_', ' ')} in the {len(hits)} sections that match the question.",
        searched=searched,
    )
