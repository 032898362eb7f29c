"""What a playbook verdict can rest on beyond a grid cell: the words a kind of clause is written with, searched
in the whole contract.

A clause found by no cell is not proof of its absence: retrieval searches the best sections, the offline score
misses clauses worded unusually. But a kind of clause is written with words it cannot do without: a most
favoured nation clause speaks of "favored" or "favorable" terms or the "lowest price", a non-compete of
competing, a renewal of renewing or of successive terms. When no sentence of the contract uses them, the clause
is absent for sure (`clause_signature`, `term_subject`); when some do, those sentences are what a reviewer
reads. Each pattern is written from how contracts word the clause, wide on purpose: a pattern that matches too
much costs a reviewer a look, one that matches too little would let a ``meets`` through.

`Mentions` searches one contract's sentences, each found as a verified quote with its page.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from docpipe.types import Citation

if TYPE_CHECKING:
    from docpipe.types import Document

__all__ = ["CLAUSE_READERS", "SURE_READERS", "DocumentMentions", "clause_signature", "term_subject"]

_I = re.IGNORECASE | re.DOTALL

#: The clause categories a key-term reader reads (`docpipe.terms.clauses`): found by the reader with a verified
#: quote, the clause is found, and for those in `SURE_READERS` found for sure. On the 231 contracts of
#: cuad-collection-dev the liability-cap reader's 32 finds are all labelled Cap on Liability by CUAD; the
#: termination reader's include some that CUAD does not label Termination for Convenience (15 of 56: a right to
#: end on notice after a breach reads alike), so its find makes a forbidden clause deviate but never meets a rule.
CLAUSE_READERS = {
    "Cap on Liability": "liability_cap",
    "Termination for Convenience": "termination_for_convenience",
}
SURE_READERS = frozenset({"Cap on Liability"})

_CONVENIENCE = (
    r"(?=.*\bterminat)(?=.*(?:\bconvenience\b|\bwithout\s+cause\b|\b(?:any|no)\s+reason\b|\bat\s+any\s+time\b|"
    r"\bsole\s+discretion\b|\bdays?\W{0,3}\s+(?:prior\s+|advance\s+)?(?:written\s+)?notice))"
)

# Per checklist clause category: a sentence of such a clause uses one of these words. None: no words are
# particular to it (every contract speaks of prices, terms, liability), so its absence is never sure.
_SIGNATURES: dict[str, str | None] = {
    "Most Favored Nation": r"\bmost[\s-]+favou?red\b|\bfavou?rable\b|\b(?:lowest|best)\s+(?:net\s+)?(?:price|pricing|"
    r"rates?|terms)\b|\bno\s+(?:less|more|higher|greater)\s+than\s+(?:the\s+)?(?:prices?|rates?)\s+(?:charged|"
    r"offered|given)\b",
    "Non-Compete": r"\bcompet(?:e|es|ed|ing|ition|itive|itor|itors)\b|\bnon-?compet",
    # Exclusivity is also written as a promise to take on no competitor: "will not accept ... any other company
    # ... competitive with Prolong products", "the sole supplier", "only from".
    "Exclusivity": r"\bexclusiv(?:e|ely|ity)\b(?!\s+(?:and\s+sole\s+)?(?:jurisdiction|venue|remed|forum|courts?\b))|"
    r"\bcompet(?:e|es|ing|ition|itive|itor|itors)\b|\bsole\s+(?:and\s+\w+\s+)?(?:supplier|source|provider|distributor|"
    r"sponsor|agent|representative|licensee|reseller|vendor|manufacturer)\b|\bonly\s+(?:from|through|to)\b|"
    r"\bany\s+other\s+(?:company|supplier|distributor|vendor|provider|sponsor|manufacturer)\b",
    "No-Solicit of Customers": r"\bsolicit|\bentice|\binduce",
    "Competitive Restriction Exception": None,
    "No-Solicit of Employees": r"\bsolicit|\brecruit|\bhire\b|\bhiring\b|\bentice|\binduce",
    "Non-Disparagement": r"\bdisparag|\bderogatory\b|\bdefam|\bnegative(?:ly)?\s+(?:comments?|statements?|remarks?)\b",
    "Termination for Convenience": _CONVENIENCE,
    "Rofr/Rofo/Rofn": r"\bfirst\s+(?:right|refusal|offer|negotiat|option|look)|\bright\s+of\s+first\b|\bmatch\b",
    "Change of Control": r"\bchange\s+(?:of|in)\s+(?:the\s+)?(?:control|ownership)\b|\bcontrol(?:ling|led)?\b|"
    r"\bmerge[drs]?\b|\bmerger\b|\bacqui(?:re[sd]?|ring|sition)\b|\bconsolidat|\bsubstantially\s+all\b",
    "Anti-Assignment": r"\bassign|\btransfer",
    "Revenue/Profit Sharing": None,
    "Price Restrictions": None,
    "Minimum Commitment": None,
    "Volume Restriction": None,
    "IP Ownership Assignment": r"\bassign|\bwork(?:s)?\s+made\s+for\s+hire\b|\bvest",
    "Joint IP Ownership": r"\bjoint(?:ly)?\b|\bco-?own",
    "License Grant": r"\blicen[cs]|\bright\s+to\s+use\b",
    "Non-Transferable License": r"\btransfer|\bsub-?licens|\bassign",
    "Affiliate License-Licensor": r"\baffiliat|\bsubsidiar",
    "Affiliate License-Licensee": r"\baffiliat|\bsubsidiar",
    "Unlimited/All-You-Can-Eat-License": r"\bunlimited\b|\ball[\s-]+you[\s-]+can[\s-]+eat\b|\benterprise[\s-]+wide\b",
    "Irrevocable or Perpetual License": r"\birrevocabl|\bperpetu|\bindefinite|\bforever\b|\bsurviv",
    "Source Code Escrow": r"\bescrow|\bsource\s+code\b",
    "Post-Termination Services": r"\b(?:after|following|upon|on)\s+(?:the\s+)?(?:termination|expiration|expiry)\b|"
    r"\btransition|\bwind[\s-]?down|\bsurviv",
    "Audit Rights": r"\baudit|\binspect|\bexamin|\bbooks\s+and\s+records\b|\brecords\b",
    "Uncapped Liability": None,
    "Cap on Liability": r"\bliab|\bdamages\b",
    "Liquidated Damages": r"\bliquidated\b|\bpenalt(?:y|ies)\b|\bagreed\s+damages\b",
    "Insurance": r"\binsur|\bcoverage\b|\bpolic(?:y|ies)\s+of\b",
    "Covenant Not to Sue": r"\bsue\b|\bsuit\b|\bchalleng|\bcontest|\bclaim\b|\bclaims\b",
    "Third Party Beneficiary": r"\bbeneficiar|\bthird[\s-]+part(?:y|ies)\b",
}

# A renewal, an extension of the term, or a contract that runs on until a party ends it on notice ("shall
# continue indefinitely", "until terminated by either party on thirty days' notice"): each has a notice to give.
_RENEWAL = (
    r"\brenew|\bautomatic(?:ally)?\s+(?:be\s+)?(?:extend|continu|roll)|\bsuccessive\b|\bevergreen\b|"
    r"\bextend(?:s|ed|ing)?\b[^.]{0,40}\b(?:term|agreement|period)|\bextension\b|\bfurther\s+(?:periods?|terms?)\b|"
    r"\bindefinite|\buntil\s+(?:it\s+is\s+|so\s+)?terminated\b|"
    r"\bcontinue[sd]?\s+(?:in\s+(?:full\s+)?(?:force|effect)\s+)?(?:thereafter|from\s+(?:year|month))"
)
# Per key term: a sentence that speaks of it uses one of these words. None: every contract speaks of it.
_SUBJECTS: dict[str, str | None] = {
    "auto_renewal": _RENEWAL,
    "renewal_term": _RENEWAL,
    "notice_period": _RENEWAL,
    "notice_deadline": _RENEWAL,
    "governing_law": r"\bgovern|\blaws?\b|\bconstrued\b",
    "venue": r"\bjurisdiction\b|\bvenue\b|\bcourts?\b|\btribunal|\barbitrat",
    "liability_cap": r"\bliab|\bdamages\b",
    "termination_for_convenience": _CONVENIENCE,
}

_COMPILED: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _COMPILED:
        _COMPILED[pattern] = re.compile(pattern, _I)
    return _COMPILED[pattern]


def clause_signature(category: str) -> re.Pattern[str] | None:
    """Returns the pattern every sentence of a `category` clause matches (see the module docstring), or None
    when no words are particular to it."""
    pattern = _SIGNATURES.get(category)
    return _compiled(pattern) if pattern else None


def term_subject(term: str) -> re.Pattern[str] | None:
    """Returns the pattern a sentence about key term `term` matches, or None when every contract speaks of it."""
    pattern = _SUBJECTS.get(term)
    return _compiled(pattern) if pattern else None


class DocumentMentions:
    """The sentences of one contract that match a pattern (`__call__`), as verified quotes with pages, in
    reading order; the sentences are split once."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self._sentences: list[tuple[int, int, int]] | None = None  # (section index, start, end)

    def __call__(self, pattern: re.Pattern[str]) -> list[Citation]:
        from docpipe.ingest.clauses import sentence_spans

        doc = self.doc
        if self._sentences is None:
            self._sentences = [
                (i, start, end) for i, section in enumerate(doc.sections) for start, end in sentence_spans(section.text)
            ]
        found = []
        for i, start, end in self._sentences:
            section = doc.sections[i]
            text = section.text[start:end]
            match = pattern.search(text)
            if match is None:
                continue
            first = doc.page_of(section.start + start)
            last = doc.page_of(section.start + max(start, end - 1))
            found.append(
                Citation(
                    section_id=section.id,
                    heading=section.heading,
                    page_start=first,
                    page_end=last,
                    quote=text,
                    verified=True,
                    highlight=match.group(0) if match.group(0) else "",
                    document_id=doc.id,
                    document_name=doc.name,
                    **doc.citation_marks(first, last),
                )
            )
        return found
