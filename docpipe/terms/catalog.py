"""The built-in key terms: the columns of a due-diligence key-terms table, each a typed grid column.

Each term has an id (`Column.term`), the header a table shows (`Column.key`), the question a model is asked,
the words retrieval searches for (`Column.query`: the question plus how such clauses are written), and its
kind. `key_term_columns()` returns them in the order a reviewer reads a contract: what it is and who signed
it, its dates and term, renewal and the notice that stops it, law and courts, the cap on liability, and the
right to walk away.
"""

from __future__ import annotations

from dataclasses import dataclass

from docpipe.cells import Column

__all__ = ["KEY_TERMS", "KeyTerm", "key_term", "key_term_columns"]


@dataclass(frozen=True, slots=True)
class KeyTerm:
    id: str
    header: str
    kind: str
    question: str
    search: str  # the wording such clauses use, added to the question for retrieval


KEY_TERMS: tuple[KeyTerm, ...] = (
    KeyTerm(
        "document_title",
        "Title",
        "text",
        "What is the title of this agreement?",
        "agreement title heading",
    ),
    KeyTerm(
        "parties",
        "Parties",
        "parties",
        "Who are the parties to this agreement, and what is each called in it?",
        "by and between, a corporation, hereinafter referred to as, party, parties",
    ),
    KeyTerm(
        "agreement_date",
        "Agreement date",
        "date",
        "On what date was this agreement made or signed?",
        "made and entered into as of, dated as of, this day of, date first written above",
    ),
    KeyTerm(
        "effective_date",
        "Effective date",
        "date",
        "On what date does this agreement take effect (the Effective Date)?",
        "effective as of, Effective Date means, shall become effective on",
    ),
    KeyTerm(
        "expiration_date",
        "Expiration date",
        "date",
        "On what date does the initial term of this agreement expire? Compute it from the term if needed.",
        "term of this agreement shall commence and continue until expire, initial term, years from the Effective Date",
    ),
    KeyTerm(
        "initial_term",
        "Initial term",
        "duration",
        "How long is the initial term of this agreement?",
        "initial term, term of this agreement, period of years from the Effective Date",
    ),
    KeyTerm(
        "auto_renewal",
        "Renews automatically",
        "yes_no",
        "Does this agreement renew automatically at the end of its term?",
        "automatically renew, automatically extended, successive renewal terms, unless either party gives notice",
    ),
    KeyTerm(
        "renewal_term",
        "Renewal term",
        "duration",
        "For how long does each renewal of this agreement run?",
        "renew for successive additional periods of one year, renewal term",
    ),
    KeyTerm(
        "notice_period",
        "Notice to stop renewal",
        "duration",
        "How much notice must a party give to stop this agreement from renewing?",
        "written notice of non-renewal at least days prior to the expiration of the then-current term",
    ),
    KeyTerm(
        "notice_deadline",
        "Last day for notice",
        "date",
        "What is the last day to give notice that this agreement will not renew?",
        "notice of non-renewal days prior to expiration",
    ),
    KeyTerm(
        "governing_law",
        "Governing law",
        "jurisdiction",
        "Which jurisdiction's law governs this agreement?",
        "governed by and construed in accordance with the laws of the State of",
    ),
    KeyTerm(
        "venue",
        "Courts",
        "jurisdiction",
        "Which courts have jurisdiction over disputes under this agreement?",
        "exclusive jurisdiction of the courts located in, venue, submit to the jurisdiction",
    ),
    KeyTerm(
        "liability_cap",
        "Liability cap",
        "money",
        "What is the cap on a party's liability under this agreement?",
        "in no event shall liability exceed the total amount of fees paid, aggregate liability limited to",
    ),
    KeyTerm(
        "termination_for_convenience",
        "Termination for convenience",
        "yes_no",
        "May a party terminate this agreement for convenience, without cause, and on how much notice?",
        "may terminate this agreement for any reason or no reason, without cause, for convenience, upon days notice",
    ),
)

_BY_ID = {t.id: t for t in KEY_TERMS}


def key_term(term_id: str) -> KeyTerm:
    """Returns the key term with this id; a `KeyError` naming the ids otherwise."""
    try:
        return _BY_ID[term_id]
    except KeyError:
        raise KeyError(f"no key term {term_id!r}: the key terms are {', '.join(_BY_ID)}") from None


def key_term_columns(terms: list[str] | None = None) -> list[Column]:
    """Returns the grid columns of the key terms named (all of them by default), in the catalog's order."""
    chosen = [key_term(t) for t in terms] if terms else list(KEY_TERMS)
    return [
        Column(t.header, t.question, f"{t.question} {t.search}", group="Key terms", kind=t.kind, term=t.id)
        for t in chosen
    ]
