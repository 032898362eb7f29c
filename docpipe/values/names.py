"""What a party's name is made of, shared by the preamble reader (`docpipe.values.parties`) and the signature
blocks' (`docpipe.values.signatures`): corporate suffixes, the words that end or join a name, the words that
are roles rather than names, and the tests of a name (`plausible`, `same_entity`)."""

from __future__ import annotations

import re

from docpipe.values.jurisdictions import canonical_jurisdiction

__all__ = [
    "CONNECTORS",
    "ENTITY_WORDS",
    "NOT_IN_NAMES",
    "NOT_NAMES",
    "ROLE_WORDS",
    "STOP_WORDS",
    "SUFFIXES",
    "VERBS",
    "is_suffix",
    "plausible",
    "same_entity",
    "word_key",
]

SUFFIXES = {
    "inc", "incorporated", "corp", "corporation", "co", "company", "llc", "lc", "ltd", "limited", "lp", "llp",
    "lllp", "plc", "gmbh", "ag", "sa", "sas", "spa", "srl", "sarl", "sàrl", "nv", "bv", "pte", "pty", "kk", "ab",
    "a/s", "as", "asa", "oy", "oyj", "se", "sl", "na", "fsb", "pc", "pllc", "bhd", "sdn", "kg", "kgaa", "ltda",
    "sae", "spc", "lda", "cv", "aktiengesellschaft",
}  # fmt: skip

# Words that make a name an organisation's without being a corporate suffix.
ENTITY_WORDS = {"bank", "association", "university", "trust", "fund", "foundation", "institute", "society",
                "authority", "partnership", "partners", "holdings", "group"}  # fmt: skip

# Words that join the words of a name ("Bank of America", "Savings and Loan Association").
CONNECTORS = {"of", "and", "the", "for", "de", "du", "des", "la", "le", "van", "von", "der", "den", "y", "e", "&", "und",
              "da", "di", "do", "del", "at"}  # fmt: skip

# Words that end a name: the descriptor that follows it ("Acme Inc., having its office at ...").
STOP_WORDS = {
    "hereinafter", "having", "with", "whose", "which", "located", "organized", "organised", "incorporated",
    "existing", "acting", "through", "represented", "c/o", "on", "in", "whereas", "as", "its", "by", "is", "was",
    "shall", "will", "herein", "hereto", "dated", "effective", "d/b/a", "dba", "doing", "being", "under",
    "pursuant", "who", "that", "a", "an", "registered", "each", "both", "together", "formerly", "address",
    "this", "source",
}  # fmt: skip

# A defined term is a role, not a name; the terms that name the agreement or the parties together are neither.
ROLE_WORDS = {
    "company", "party", "parties", "agreement", "licensor", "licensee", "customer", "supplier", "purchaser",
    "seller", "buyer", "distributor", "you", "we", "us", "it", "sponsor", "executive", "employee", "consultant",
    "contractor", "agent", "borrower", "lender", "franchisee", "franchisor", "client", "vendor", "reseller",
    "manufacturer", "provider", "the", "this", "such", "each", "all", "other", "any", "said",
}  # fmt: skip

# Words that are never a party's name on their own (headings and labels read by mistake).
NOT_NAMES = {
    "exhibit", "schedule", "annex", "appendix", "address", "general", "section", "article", "page", "table",
    "contents", "attention", "telephone", "fax", "email", "recitals", "definitions", "source", "date", "name",
    "title", "notice", "signage", "preamble", "witnesseth", "confidential", "witnesses", "witness", "as", "and",
    "introduction", "background", "purpose", "scope", "term", "termination", "interpretation", "whereas",
}  # fmt: skip

NOT_IN_NAMES = re.compile(
    r"\b(?:agreement|parties|relating|hereto|hereof|herein|hereunder|between|following|including)\b", re.I
)

_MONTHS = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d|\b\d{1,2}(?:st|nd|rd|th)?\s+day\b",
    re.IGNORECASE,
)

VERBS = re.compile(r"\b(?:is|are|shall|will|agrees?|hereby|has|have|was|were|may|must|means)\b", re.IGNORECASE)


def word_key(token: str) -> str:
    """Returns `token` as names compare it: case-folded, without its dots and the punctuation around it."""
    return token.strip(",;:.").casefold().replace(".", "")


def is_suffix(token: str) -> bool:
    return word_key(token) in SUFFIXES and (token[:1].isupper() or word_key(token) in {"inc", "llc", "ltd", "plc"})


def plausible(name: str) -> bool:
    words = name.split()
    if not words or len(words) > 14 or not re.search(r"[A-Za-z]{2}", name):
        return False
    if all(word_key(w) in CONNECTORS or word_key(w) in ROLE_WORDS for w in words):
        return False
    if sum(bool(re.fullmatch(r"[A-Z\-–—]", w)) for w in words) >= 2:  # "List of Principals G Site ... D ACH -"
        return False
    if (len(words) == 1 and word_key(name) in NOT_NAMES) or NOT_IN_NAMES.search(name) or "..." in name:
        return False
    if "$" in name or all(is_suffix(w) for w in words):  # "If Retainer $[*]", "LLC" alone
        return False
    if any(w.endswith(".") and len(w) > 4 and not is_suffix(w) and "." not in w[:-1] for w in words[:-1]):
        return False  # "Provision of Services. eGain": a heading and the next sentence
    if canonical_jurisdiction(name) is not None:  # "VIRGINIA", "Boulder, Colorado": an address read as a name
        return False
    if re.match(r"(?:[A-Z]|\d{1,2})\.\s|Party\s+[A-Z]\b", name):  # "A. The Company" (a recital), "Party B"
        return False
    return (
        not VERBS.search(name)
        and not _MONTHS.search(name)
        and not name.lower().startswith(("this ", "the undersigned"))
    )


def same_entity(a: str, b: str) -> bool:
    """Whether two names name one entity: the same words, whatever the case, "The" and punctuation, and no
    two different suffixes ("Kestrel Partners, L.P." is not "Kestrel Partners Limited")."""

    def key(name: str) -> tuple[set[str], set[str]]:
        words = {word_key(w).strip("()") for w in name.split()} - {"", "the"}
        return words - SUFFIXES, words & SUFFIXES

    (wa, sa), (wb, sb) = key(a), key(b)
    return bool(wa) and wa == wb and (not sa or not sb or sa == sb)
