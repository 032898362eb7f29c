"""Key terms read from a contract without a language model: deterministic readers over its sentences.

Each term is found where contracts write it, and read by the reader of its kind (`docpipe.values`):

- **title** and **parties**: the opening of the contract (its first 3,000 characters): the heading line that
  names the agreement; the parties with their defined names from the preamble (the signature blocks when the
  preamble names none).
- **agreement date**: the date the preamble ties to the agreement's making ("dated as of", "made ... on",
  "entered into as of", "this 21st day of June, 1999"); else a date in the opening; else the signature blocks'.
- **effective date**: a date the contract calls effective ("effective as of <date>", "<date> (the "Effective
  Date")", "shall take effect on <date>"); the agreement date when the contract says it takes effect on its date
  ("the Effective Date means the date first written above"). A contract that speaks of no effective date has
  none: the agreement date is not copied into it.
- **term, expiration, renewal, notice**: the sentences of the term clause: an expiration stated as a date, or
  as a duration from the effective (or agreement) date, computed and shown with its derivation ("2014-05-08 +
  5 years = 2019-05-08"); "perpetual" / "until terminated" are values; a renewal for successive periods and
  the notice that stops it; the last day for that notice is the expiration minus the notice period.
- **governing law** and **courts**: the governing-law clause's chosen law (`docpipe.values.jurisdictions`);
  the place of the courts given jurisdiction.
- **liability cap**: the sentence that limits a party's liability: the amount, or the formula as written.
- **termination for convenience**: a right to terminate for convenience, without cause or for any reason.

Every value comes with the sentence it was read from, as a verified quote (the sentence is the document's own
text, at its offsets), and is read again from that quote before it is shown: a value its quote does not give
drops the cell to ``uncertain`` with the reason. Each cell is ``present`` with a value, or ``not_found``.
"""

from __future__ import annotations

from collections.abc import Callable

from docpipe.cells import Cell, Column
from docpipe.terms import clauses, dating, term_clause
from docpipe.terms.reading import Reader, Sentence, document_sentences, supported
from docpipe.types import Document

__all__ = ["READER_VERSION", "Sentence", "document_sentences", "read_key_terms", "supported"]

#: Part of every offline key-term cell's cache key: raise it when a reader changes what it finds.
READER_VERSION = "2"


def read_key_terms(doc: Document, columns: list[Column]) -> list[Cell]:
    """Returns one cell per column of the built-in key terms (`Column.term`) for `doc` (see the module
    docstring); a column that is not a key term gets ``not_found``."""
    reader = Reader(doc)
    done: dict[str, Cell] = {}

    def get(term: str) -> Cell:
        if term not in done:
            done[term] = _READERS[term](reader, get) if term in _READERS else Cell("not_found")
        return done[term]

    return [get(c.term) if c.term else Cell("not_found") for c in columns]


_READERS: dict[str, Callable[[Reader, Callable[[str], Cell]], Cell]] = {
    "agreement_date": lambda r, get: dating.agreement_date(r),
    "effective_date": lambda r, get: dating.effective_date(r, get("agreement_date")),
    "initial_term": lambda r, get: term_clause.initial_term(r),
    "expiration_date": term_clause.expiration,
    "auto_renewal": lambda r, get: term_clause.auto_renewal(r),
    "renewal_term": lambda r, get: term_clause.renewal_term(r),
    "notice_period": lambda r, get: term_clause.notice_period(r),
    "notice_deadline": term_clause.notice_deadline,
    "governing_law": lambda r, get: clauses.governing_law_cell(r),
    "venue": lambda r, get: clauses.venue(r),
    "liability_cap": lambda r, get: clauses.liability_cap(r),
    "termination_for_convenience": lambda r, get: clauses.termination_for_convenience(r),
    "document_title": lambda r, get: clauses.title(r),
    "parties": lambda r, get: clauses.parties(r),
}
