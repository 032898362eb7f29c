"""The naive anchor `docpipe eval-terms` reports beside docpipe: a handful of regular expressions over the
same extracted text, meant to be naive, so that docpipe's key terms are read against what anyone gets in an
afternoon. It uses none of docpipe's readers (`docpipe.values`).

- agreement date and effective date: the first date written "June 21, 1999" in the opening 3,000 characters;
- governing law: the first "laws of (the State of) X", X the capitalised words that follow;
- renewal term: the first "renew ... for (an additional) N years" within a sentence;
- notice period: the first "N days ... prior to (or before) ... expiration (or the end)" within a sentence;
- no expiration date and no parties.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ANCHOR_METHOD", "OPENING_CHARS", "anchor_terms"]

OPENING_CHARS = 3000
ANCHOR_METHOD = (
    'regular expressions over the same text: the first "Month D, YYYY" in the opening 3,000 characters as '
    'agreement and effective date, the first "laws of (the State of) X", the first "renew ... for N years", the '
    'first "N days ... prior to/before ... expiration/end"; no expiration date, no parties'
)

_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ),
        1,
    )
    for name in names
}  # fmt: skip
_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + ")"
# "June 21, 1999", "Dec. 1, 2020": the form most contracts open with, and the only one the anchor knows.
_DATE = re.compile(rf"\b(?P<m>{_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s*(?P<y>\d{{4}})\b", re.IGNORECASE)

_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "forty-five": 45,
    "fifty": 50, "sixty": 60, "seventy-five": 75, "ninety": 90, "hundred": 100, "one hundred twenty": 120,
    "one hundred eighty": 180,
}  # fmt: skip
# A number as contracts write it: "60", "sixty (60)", "sixty", "one-year" (the unit follows).
_NUMBER = r"(?P<n>\d+|(?:" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r"))(?:\s*\((?P<p>\d+)\))?"
_LAW = re.compile(
    r"(?i:\blaws?\s+of\s+(?:the\s+)?(?:(?:state|commonwealth|province)\s+of\s+)?)"
    r"(?P<x>[A-Z][\w'\u2019-]*(?:\s+(?:of\s+)?[A-Z][\w'\u2019-]*)*)"
)
_RENEWAL = re.compile(
    rf"\brenew\w*\b[^.]{{0,200}}?\bfor\s+(?:(?:an?|additional|successive|further|subsequent|consecutive)\s+)*"
    rf"{_NUMBER}[\s-]*years?\b",
    re.IGNORECASE,
)
_NOTICE = re.compile(
    rf"\b{_NUMBER}\s*(?:calendar\s+|business\s+)?days?\b[^.]{{0,100}}?\b(?:prior\s+to|before)\b[^.]{{0,80}}?"
    r"\b(?:expir|end\b)",
    re.IGNORECASE,
)


def anchor_terms(text: str) -> dict[str, Any]:
    """Returns the anchor's normalized values (as `docpipe.values.kinds` writes them) for the fields it reads:
    agreement and effective date, governing law, renewal term and notice period; a field it finds nothing for
    is left out."""
    found: dict[str, Any] = {}
    date = _first_date(text[:OPENING_CHARS])
    if date:
        found["agreement_date"] = found["effective_date"] = date
    law = _LAW.search(text)
    if law:
        found["governing_law"] = " ".join(law["x"].split()).rstrip("'\u2019-")
    renewal = _RENEWAL.search(text)
    if renewal and (years := _number(renewal)):
        found["renewal_term"] = {"days": 365 * years, "count": years, "unit": "year"}
    notice = _NOTICE.search(text)
    if notice and (days := _number(notice)):
        found["notice_period"] = {"days": days, "count": days, "unit": "day"}
    return found


def _number(match: re.Match[str]) -> int:
    if match["p"]:
        return int(match["p"])
    n = match["n"].lower()
    return int(n) if n.isdigit() else _UNITS.get(n, 0)


def _first_date(text: str) -> str:
    for match in _DATE.finditer(text):
        day = int(match["d"])
        if 1 <= day <= 31:
            return f"{int(match['y']):04d}-{_MONTHS[match['m'].lower()]:02d}-{day:02d}"
    return ""
