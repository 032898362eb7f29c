"""The contract-review checklist: the 41 clause categories of the CUAD dataset, each with the question docpipe
asks the model and the words it searches the contract with.

The category names and their grouping are CUAD's (Hendrycks et al., 2021, CC BY 4.0); the questions, search
wording and notes are docpipe's own. `kind` says what a finding looks like: ``fact`` categories (names,
dates, terms, law) are answered by a value, ``clause`` categories by whether such a clause exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from docpipe.errors import ConfigError

__all__ = ["CHECKLIST", "Category", "select_categories"]


@dataclass(frozen=True, slots=True)
class Category:
    """One checklist item: the CUAD category name, its group, the question for the model, the search text
    for retrieval and what the note should say.

    >>> CHECKLIST[7].name, CHECKLIST[7].kind
    ('Governing Law', 'fact')
    """

    name: str
    group: str
    kind: Literal["fact", "clause"]
    question: str
    search: str
    note: str

    @property
    def query(self) -> str:
        """Returns the retrieval query: the question followed by the wording such clauses usually use."""
        return f"{self.question} {self.search}"


def _c(name: str, group: str, kind: Literal["fact", "clause"], question: str, search: str, note: str) -> Category:
    return Category(name, group, kind, question, search, note)


CHECKLIST: tuple[Category, ...] = (
    _c(
        "Document Name",
        "-",
        "fact",
        "What is the title of this agreement?",
        "agreement title heading this agreement",
        "the agreement's title",
    ),
    _c(
        "Parties",
        "-",
        "fact",
        "Who are the parties that sign this agreement?",
        "by and between party company corporation hereinafter referred to as",
        "each party and its role",
    ),
    _c(
        "Agreement Date",
        "1",
        "fact",
        "On what date was this agreement made or signed?",
        "made and entered into as of dated this day of",
        "the date, as written",
    ),
    _c(
        "Effective Date",
        "1",
        "fact",
        "From what date does this agreement take effect?",
        "effective date shall become effective commencement date",
        "the effective date or how it is fixed",
    ),
    _c(
        "Expiration Date",
        "1",
        "fact",
        "When does the initial term of this agreement end?",
        "term of this agreement shall continue until expire initial term years",
        "the end date or length of the initial term",
    ),
    _c(
        "Renewal Term",
        "1",
        "fact",
        "Does the agreement renew or extend after its initial term, and for how long?",
        "automatically renew successive renewal term extend additional period unless",
        "the length of each renewal",
    ),
    _c(
        "Notice Period to Terminate Renewal",
        "1",
        "fact",
        "How much notice must a party give to stop the agreement from renewing?",
        "written notice of non-renewal prior to the end of the then-current term days",
        "the notice period",
    ),
    _c(
        "Governing Law",
        "-",
        "fact",
        "Which jurisdiction's law governs this agreement?",
        "governed by and construed in accordance with the laws of the state of",
        "the state or country",
    ),
    _c(
        "Most Favored Nation",
        "-",
        "clause",
        "Must a party receive terms at least as good as those it gives any third party?",
        "most favored no less favorable terms than those offered to any other customer",
        "who benefits and on what",
    ),
    _c(
        "Non-Compete",
        "2",
        "clause",
        "Is a party barred from competing with the other, or from operating in some field or territory?",
        "shall not compete engage in competing business directly or indirectly territory",
        "who is restricted, where, how long",
    ),
    _c(
        "Exclusivity",
        "2",
        "clause",
        "Does a party commit to deal exclusively with the other, or to buy all its requirements from it?",
        "exclusive sole and exclusive shall not appoint any other distributor supplier requirements",
        "what is exclusive and for whom",
    ),
    _c(
        "No-Solicit of Customers",
        "2",
        "clause",
        "Is a party barred from soliciting or taking the other party's customers or partners?",
        "shall not solicit customers clients divert business",
        "who is restricted and for how long",
    ),
    _c(
        "Competitive Restriction Exception",
        "2",
        "clause",
        "Are there carve-outs or exceptions to the non-compete, exclusivity or non-solicitation restrictions?",
        "notwithstanding the foregoing nothing shall restrict exception shall not apply to",
        "what is carved out",
    ),
    _c(
        "No-Solicit of Employees",
        "-",
        "clause",
        "Is a party barred from soliciting or hiring the other party's employees or contractors?",
        "shall not solicit hire employ recruit employees personnel of the other party",
        "who is restricted and for how long",
    ),
    _c(
        "Non-Disparagement",
        "-",
        "clause",
        "Is a party required not to disparage the other?",
        "shall not disparage make negative statements reputation",
        "who is bound",
    ),
    _c(
        "Termination for Convenience",
        "-",
        "clause",
        "Can a party end the agreement without cause, just by giving notice?",
        "may terminate this agreement for any reason or no reason without cause upon days prior written notice",
        "who may terminate and the notice period",
    ),
    _c(
        "Rofr/Rofo/Rofn",
        "-",
        "clause",
        "Does a party have a right of first refusal, first offer or first negotiation?",
        "right of first refusal right of first offer first negotiation before offering to any third party",
        "what the right covers",
    ),
    _c(
        "Change of Control",
        "3",
        "clause",
        "Does a change of control, merger or sale of a party let the other terminate, or need its consent or notice?",
        "change of control merger acquisition sale of all or substantially all assets controlling interest",
        "the consequence of a change of control",
    ),
    _c(
        "Anti-Assignment",
        "3",
        "clause",
        "Does assigning or transferring the agreement need the other party's consent or notice?",
        "shall not assign or transfer this agreement without the prior written consent",
        "whose consent is needed",
    ),
    _c(
        "Revenue/Profit Sharing",
        "-",
        "clause",
        "Must a party share revenue or profit with the other, for example as royalties or commissions?",
        "royalty percentage of net sales revenue share profit commission",
        "the share or rate",
    ),
    _c(
        "Price Restrictions",
        "-",
        "clause",
        "Is a party restricted in raising or lowering its prices?",
        "prices shall not increase price adjustment fixed prices may not raise",
        "the restriction",
    ),
    _c(
        "Minimum Commitment",
        "-",
        "clause",
        "Must a party buy or sell a minimum quantity or amount in a period?",
        "minimum purchase minimum order quantity annual minimum commitment shall purchase at least",
        "the minimum",
    ),
    _c(
        "Volume Restriction",
        "-",
        "clause",
        "Do fees rise, or is consent needed, when use exceeds a set threshold or volume?",
        "exceed usage limit threshold additional fees volume cap maximum number of",
        "the threshold",
    ),
    _c(
        "IP Ownership Assignment",
        "-",
        "clause",
        "Does intellectual property made by one party become the property of the other?",
        "hereby assigns all right title and interest intellectual property work product shall be the sole property",
        "what is assigned and to whom",
    ),
    _c(
        "Joint IP Ownership",
        "-",
        "clause",
        "Do the parties jointly own any intellectual property?",
        "jointly owned joint ownership co-owned jointly developed intellectual property",
        "what is jointly owned",
    ),
    _c(
        "License Grant",
        "4",
        "clause",
        "Does one party grant the other a license?",
        "hereby grants a license right to use non-exclusive license",
        "who licenses what to whom",
    ),
    _c(
        "Non-Transferable License",
        "4",
        "clause",
        "Is the licensee barred from transferring or sublicensing the license?",
        "non-transferable non-sublicensable license may not sublicense transfer",
        "the limit on transfer",
    ),
    _c(
        "Affiliate License-Licensor",
        "4",
        "clause",
        "Does the license include intellectual property of the licensor's affiliates, or come from them?",
        "licensor and its affiliates grant affiliates of licensor intellectual property",
        "which affiliates",
    ),
    _c(
        "Affiliate License-Licensee",
        "4",
        "clause",
        "Does the license extend to the licensee's affiliates?",
        "licensee and its affiliates may use license to affiliates subsidiaries",
        "which affiliates",
    ),
    _c(
        "Unlimited/All-You-Can-Eat-License",
        "4",
        "clause",
        "Is there an enterprise-wide, unlimited or all-you-can-eat license?",
        "unlimited number of users enterprise license unlimited use copies",
        "what is unlimited",
    ),
    _c(
        "Irrevocable or Perpetual License",
        "4",
        "clause",
        "Is any license irrevocable or perpetual?",
        "perpetual irrevocable license fully paid-up royalty-free",
        "which license",
    ),
    _c(
        "Source Code Escrow",
        "-",
        "clause",
        "Must source code be placed in escrow and released to the other party on certain events?",
        "source code escrow escrow agent deposit release conditions",
        "the release events",
    ),
    _c(
        "Post-Termination Services",
        "5",
        "clause",
        "Does a party owe anything after the agreement ends: transition help, payments, returns, wind-down?",
        "upon termination or expiration shall continue transition assistance return destroy survive",
        "the obligation",
    ),
    _c(
        "Audit Rights",
        "5",
        "clause",
        "May a party audit or inspect the other's books, records or premises?",
        "right to audit inspect books and records upon reasonable notice during normal business hours",
        "who may audit what",
    ),
    _c(
        "Uncapped Liability",
        "6",
        "clause",
        "Is a party's liability unlimited for some breaches or kinds of claims?",
        "shall not apply to liability limitation does not apply gross negligence willful misconduct indemnification "
        "confidentiality unlimited",
        "what is uncapped",
    ),
    _c(
        "Cap on Liability",
        "6",
        "clause",
        "Is a party's liability capped, or is the time to bring claims limited?",
        "in no event shall aggregate liability exceed amounts paid fees limitation of liability",
        "the cap",
    ),
    _c(
        "Liquidated Damages",
        "-",
        "clause",
        "Does a party owe liquidated damages, or a fee for ending the agreement early?",
        "liquidated damages termination fee penalty early termination charge",
        "the amount or formula",
    ),
    _c(
        "Warranty Duration",
        "-",
        "fact",
        "How long do warranties on the products or services last?",
        "warranty period warrants for a period of months days from delivery acceptance",
        "the warranty period",
    ),
    _c(
        "Insurance",
        "-",
        "clause",
        "Must a party carry insurance for the other's benefit?",
        "shall maintain insurance coverage general liability policy additional insured",
        "the cover required",
    ),
    _c(
        "Covenant Not to Sue",
        "-",
        "clause",
        "Is a party barred from suing the other or from challenging its intellectual property?",
        "shall not contest challenge the validity covenant not to sue bring any claim",
        "who may not sue about what",
    ),
    _c(
        "Third Party Beneficiary",
        "-",
        "clause",
        "Can someone who is not a party enforce any term of this agreement?",
        "third party beneficiary no third party beneficiaries intended beneficiary",
        "who the beneficiary is",
    ),
)

_BY_NAME = {c.name.casefold(): c for c in CHECKLIST}


def select_categories(names: list[str] | None) -> list[Category]:
    """Returns the checklist categories named (case-insensitive), in checklist order; all of them for None.

    >>> [c.name for c in select_categories(["governing law", "Parties"])]
    ['Parties', 'Governing Law']
    """
    if names is None:
        return list(CHECKLIST)
    wanted: set[str] = set()
    for raw in names:
        name = raw.strip().casefold()
        if not name:
            continue
        if name not in _BY_NAME:
            close = [c.name for c in CHECKLIST if name in c.name.casefold() or c.name.casefold() in name]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ConfigError(
                f"unknown checklist category {raw!r}{hint}: `docpipe analyze --list-categories` shows all "
                f"{len(CHECKLIST)}"
            )
        wanted.add(name)
    if not wanted:
        raise ConfigError("no categories given: name at least one, or leave the list out for all of them")
    return [c for c in CHECKLIST if c.name.casefold() in wanted]
