"""Questions about every contract of a collection: "Which contracts can be terminated for convenience?", "Do any
of the agreements have a most favored nation clause?", "List all contracts governed by California law".

Pooled retrieval answers from the best passages of a few contracts, so it cannot say which of 200 contracts hold
a clause. Such a question is asked of each contract instead, as one review-grid column (`each_question` gives
the question put to each contract), and answered as three lists (`answer_each`): the contracts where it is
found (a verified answer), those to check (candidates: offline findings, a model's uncertain cells), and those
where nothing was found, each found or to check with its quote and page. Offline a contract is to check when
its best clause scores at least `review.each_check_score`, and found at `review.each_found_score`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from docpipe.types import Answer, Citation

if TYPE_CHECKING:
    from docpipe.cells import Column
    from docpipe.embed.base import Embedder
    from docpipe.review.grid import ReviewGrid
    from docpipe.settings import Settings

__all__ = ["EACH_NOTICE", "ROUTE_SIMILARITY", "answer_each", "each_columns", "each_question"]

#: A question about every contract is searched with a checklist category's clause wording when its embedding is
#: at least this similar to the category's name and question (the packaged embedder; cosine).
ROUTE_SIMILARITY = 0.5

# Not "documents": "Which documents must the Supplier deliver?" asks about one contract's deliverables.
_DOCS = r"(?:contracts?|agreements?|deals?|leases?|licen[cs]es?)"
_IN_ROOM = r"(?:(?:in|of)\s+(?:the|this|our|my)\s+(?:collection|data\s+room|room|set|portfolio)\s+)?"
# The wordings of a question about every contract, and where the question put to each contract starts.
_ASKS_EACH = re.compile(
    rf"^\s*(?:which\s+(?:of\s+(?:the|these|our|my)\s+)?{_DOCS}\s+{_IN_ROOM}(?:(?:that|which)\s+)?"
    rf"|(?:do|does|are|is|have|has|can|may|will|did)\s+(?:any|all|some|none)\s+(?:of\s+)?(?:the\s+|these\s+|our\s+)?"
    rf"{_DOCS}\s+{_IN_ROOM}"
    rf"|(?:please\s+)?(?:list|show|find|name|give\s+me|identify)\s+(?:me\s+)?(?:all\s+|every\s+|each\s+|the\s+|any\s+)*"
    rf"{_DOCS}\s+{_IN_ROOM}(?:(?:that|which|where)\s+)?"
    rf"|how\s+many\s+(?:of\s+the\s+)?{_DOCS}\s+{_IN_ROOM}(?:(?:that|which)\s+)?)",
    re.IGNORECASE,
)
# "... in any contract that ...", "... all contracts with ...": the wording elsewhere in the question.
_ANY_CONTRACT = re.compile(rf"\b(?:any|all|every|each)\s+(?:of\s+the\s+)?{_DOCS}\s+(?:that|which|with|where)\b", re.I)
_PLURAL_VERB = re.compile(r"^(?:have|contain|include|allow|permit|require|give|grant|provide|let|say|mention)\b", re.I)

#: What an answer asked of each contract says it did.
EACH_NOTICE = (
    "Asked of each contract of the collection, one by one (a review-grid column), not answered from the best "
    "passages of a few."
)


def each_question(question: str) -> str | None:
    """Returns the question to put to each contract when `question` asks about every contract of a collection
    ("Which contracts are governed by California law?" -> "Is the contract governed by California law?"),
    else None."""
    match = _ASKS_EACH.match(question)
    if match is None:
        found = _ANY_CONTRACT.search(question)
        if found is None:
            return None
        rest = question[found.end() :].strip()
    else:
        rest = question[match.end() :].strip()
    rest = rest.rstrip("?. ").strip()
    if not rest:
        return None
    lowered = rest.casefold()
    if lowered.startswith(("are ", "is ")):
        return f"Is the contract {rest.split(None, 1)[1]}?"
    if lowered.startswith(("can ", "may ", "could ", "will ", "must ", "should ")):
        verb, _, tail = rest.partition(" ")
        return f"{verb.capitalize()} the contract {tail}?"
    if lowered.startswith(("has ", "had ")):
        return f"Does the contract have {rest.split(None, 1)[1]}?"
    if lowered.startswith("with "):
        return f"Does the contract have {rest[5:]}?"
    word = rest.split(None, 1)[0]
    if _PLURAL_VERB.match(word) or (word.casefold().endswith("s") and _PLURAL_VERB.match(word[:-1])):
        base = word[:-1] if _PLURAL_VERB.match(word[:-1]) and not _PLURAL_VERB.fullmatch(word) else word
        tail = rest[len(word) :]
        return f"Does the contract {base.casefold()}{tail}?"
    return f"Does the contract say: {rest}?"


def each_columns(questions: list[str], embedder: Embedder, settings: Settings) -> list[Column]:
    """Returns a grid column for each question put to each contract: searched with the question and, when it is
    about a clause of the checklist (`ROUTE_SIMILARITY`), the wording such clauses use ("Does the contract have
    a most favored nation clause?" is searched with "no less favorable terms than those offered to any other
    customer" too)."""
    import numpy as np

    from docpipe.analysis.checklist import CHECKLIST
    from docpipe.cells import Column

    if not questions:
        return []
    categories = list(CHECKLIST)
    similarity = (
        np.asarray(embedder.embed(questions))
        @ np.asarray(embedder.embed([f"{c.name}: {c.question}" for c in categories])).T
    )
    columns = []
    for question, row in zip(questions, similarity):
        best = int(np.argmax(row))
        query = f"{question} {categories[best].search}" if row[best] >= ROUTE_SIMILARITY else question
        columns.append(Column(question, question, query, min_score=settings.review.each_check_score))
    return columns


def answer_each(question: str, grid: ReviewGrid, column: int = 0, *, collection: str, settings: Settings) -> Answer:
    """Returns the answer to `question` from `grid`'s `column`, asked of every contract: the contracts where it
    is found, those to check and those where nothing was found (see the module docstring); `Answer.each` holds
    the three lists (and the contracts that could not be read) by name, `citations` the quote of each contract
    found or to check."""
    found_score = settings.review.each_found_score
    lists: dict[str, list[str]] = {"found": [], "to_check": [], "not_found": [], "failed": []}
    cited: dict[str, list[Citation]] = {"found": [], "to_check": []}
    for row, cells in zip(grid.rows, grid.cells):
        cell = cells[column]
        if cell.status == "failed":
            which = "failed"
        elif cell.status == "present" and cell.quotes:
            which = "found"
        elif cell.status == "candidate" and cell.quotes and (cell.score or 0.0) >= found_score:
            which = "found"
        elif cell.status in ("candidate", "uncertain", "present"):
            which = "to_check"
        else:
            which = "not_found"
        lists[which].append(row.name)
        if which in cited and cell.quotes:
            quote = cell.quotes[0]
            cited[which].append(quote if quote.document_name else _named(quote, row.name, row.document_id))
    for which in lists:
        lists[which].sort()
    for which in cited:
        cited[which].sort(key=lambda c: c.document_name)
    total = len(grid.rows)
    parts = [f"Asked of each of the {total} contracts of {collection}, one by one."]
    for which, title in (("found", "Found"), ("to_check", "To check")):
        parts.append(f"{title}: {len(lists[which])}")
        parts.extend(f"  - {_where(c)}: {_line(c)}" for c in cited[which])
    parts.append(f"Nothing found: {len(lists['not_found'])}")
    if lists["failed"]:
        parts.append(f"Could not be read: {', '.join(lists['failed'])}.")
    generative = grid.manifest.mode != "extractive"
    return Answer(
        question=question,
        text="\n".join(parts),
        mode="generative" if generative else "extractive",
        citations=cited["found"] + cited["to_check"],
        engine=grid.manifest.engine,
        document_id="",
        fingerprint=grid.manifest.settings_fingerprint,
        section_ids=[],
        model=grid.manifest.model,
        notice=EACH_NOTICE,
        collection=collection,
        document_ids=[row.document_id for row in grid.rows if row.document_id],
        each=lists,
    )


def _where(citation: Citation) -> str:
    pages = (
        f"p. {citation.page_start}"
        if citation.page_start == citation.page_end
        else f"pp. {citation.page_start}-{citation.page_end}"
    )
    return f"{citation.document_name} ({pages})"


def _line(citation: Citation) -> str:
    """Returns the citation's decisive words (its marked sentence, else its quote) on one line of at most 120
    characters."""
    words = " ".join((citation.highlight or citation.quote).split())
    return words if len(words) <= 120 else words[:119].rstrip() + "\u2026"


def _named(citation: Citation, name: str, document_id: str) -> Citation:
    from dataclasses import replace

    return replace(citation, document_name=name, document_id=citation.document_id or document_id)
