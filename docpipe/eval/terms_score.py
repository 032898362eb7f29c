"""The scoring rules of `docpipe eval-terms`: CUAD's expert key-term answers (a terms.jsonl record) against the
normalized values a reader gave (`docpipe.values.kinds`), field by field.

- A date (``agreement_date``, ``effective_date``, ``expiration_date``) is right when the value starts with the
  gold's normalized form: gold ``"2020"`` needs the year, ``"2006-07-11"`` the full date, ``"perpetual"`` needs
  ``"perpetual"``.
- A duration (``renewal_term``; ``notice_period`` against CUAD's notice period to terminate renewal) is right
  within 3% of the gold's days, so twelve months (360 days) is one year (365); a perpetual gold needs
  ``{"perpetual": True}``.
- Governing law compares the first comma part of each side, case-folded, without the words "the", "state",
  "commonwealth", "province", "of", "law" and "laws": equal, or one inside the other as whole words
  ("Ontario, Canada" = "Ontario", "England and Wales" = "England"). A gold answer of ";"-separated parts
  ("England; Wales", "People's Republic of China; United Nations Convention on ...") names every law the
  annotators marked: a value that matches any one part is right.
- Parties: each gold name loses its parenthesised defined names ("Acme, Inc. (\"Acme\")"), its corporate
  suffixes (Inc., LLC, Ltd., GmbH, ...) and a "the"; it is found when 60% of its words are in one predicted
  name. Per contract, precision is the share of predicted names that find some gold name, recall the share of
  gold names found, and the score is their F1.

A field's ``accuracy`` is the mean score over the contracts with a gold answer (``n_gold``);
``none_when_absent`` is the share of the contracts without one (``n_absent``) where no value is given. A gold
answer the rules cannot read (a date with unknown parts the annotators did not normalize, "[* * *]", a party
list with no name left) is counted in neither (``n_unscored``). A value shown as uncertain counts as given; the
``*_present_only`` figures count only the cells whose status is ``present``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "FIELDS",
    "Given",
    "date_right",
    "duration_right",
    "gold_of",
    "law_right",
    "party_words",
    "parties_f1",
    "score_contracts",
]

#: The fields scored: the key term the grid's column names (`Column.term`) -> the key of its gold answer in a
#: terms.jsonl record.
FIELDS: dict[str, str] = {
    "agreement_date": "agreement_date",
    "effective_date": "effective_date",
    "expiration_date": "expiration_date",
    "renewal_term": "renewal_term",
    "notice_period": "notice_period_to_terminate_renewal",
    "governing_law": "governing_law",
    "parties": "parties",
}
_DATES = ("agreement_date", "effective_date", "expiration_date")
_DURATIONS = ("renewal_term", "notice_period")

DURATION_TOLERANCE = 0.03
PARTY_WORD_SHARE = 0.6

_LAW_NOISE = frozenset({"the", "state", "commonwealth", "province", "of", "law", "laws"})
# Dots are removed before splitting, so "L.L.C." and "S.A." arrive here as "llc" and "sa".
_PARTY_NOISE = frozenset(
    {
        "inc", "incorporated", "corp", "corporation", "co", "company", "ltd", "limited", "llc", "lp", "llp",
        "lllp", "plc", "pc", "gmbh", "ag", "sa", "nv", "bv", "pte", "pty", "srl", "spa", "sarl", "sas", "kk", "the",
    }
)  # fmt: skip
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


@dataclass(frozen=True, slots=True)
class Given:
    """A value given for a field: its normalized form (`docpipe.values.kinds.Value.normalized`) and the status
    of the cell that holds it (``uncertain`` or ``candidate``: given, but not shown as present)."""

    normalized: Any
    status: str = "present"

    @property
    def present(self) -> bool:
        return self.status == "present"


Gold = tuple[Literal["present", "absent", "unscored"], Any]


def _words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return _WORD.findall(text)


# -- the gold ---------------------------------------------------------------------------------------------------


def gold_of(record: dict[str, Any], field: str) -> Gold:
    """Returns ("present", the gold in the form its rule compares), ("absent", None) when CUAD has no answer,
    or ("unscored", the answer as written) when there is an answer the rules cannot read."""
    entry = record.get(FIELDS[field]) or {}
    answer = entry.get("answer")
    if field in _DATES or field in _DURATIONS:
        normalized = entry.get("normalized")
        if normalized:
            return "present", normalized
    elif field == "governing_law":
        if isinstance(answer, str) and any(_law_words(part) for part in answer.split(";")):
            return "present", answer
    else:
        names = _gold_names(entry.get("names") or [])
        if names:
            return "present", names
        answer = answer or entry.get("names")
    return ("unscored", answer) if answer else ("absent", None)


def _gold_names(names: list[str]) -> list[list[str]]:
    """Returns the words of each distinct gold party name (those left with no words dropped)."""
    found: dict[tuple[str, ...], None] = {}
    for name in names:
        words = party_words(name)
        if words:
            found.setdefault(tuple(words), None)
    return [list(words) for words in found]


# -- the rules --------------------------------------------------------------------------------------------------


def date_right(value: Any, gold: str) -> bool:
    """True when the normalized date `value` starts with the gold's normalized form (module docstring)."""
    return isinstance(value, str) and value.startswith(gold)


def duration_right(value: Any, gold: dict[str, Any]) -> bool:
    """True when the normalized duration `value` is within 3% of the gold's days, or both are perpetual."""
    if not isinstance(value, dict):
        return False
    if gold.get("perpetual"):
        return bool(value.get("perpetual"))
    days, want = value.get("days"), gold.get("days")
    if value.get("perpetual") or not isinstance(days, (int, float)) or not isinstance(want, (int, float)):
        return False
    return abs(days - want) <= DURATION_TOLERANCE * want


def _law_words(text: str) -> list[str]:
    return [w for w in _words(text.split(",")[0]) if w not in _LAW_NOISE]


def _inside(words: list[str], within: list[str]) -> bool:
    n = len(words)
    return any(within[i : i + n] == words for i in range(len(within) - n + 1))


def law_right(value: Any, gold: str) -> bool:
    """True when the jurisdiction `value` names the gold's law, or one of its ";"-separated parts (module
    docstring)."""
    if not isinstance(value, str):
        return False
    ours = _law_words(value)
    if not ours:
        return False
    for part in gold.split(";"):
        theirs = _law_words(part)
        if theirs and (_inside(theirs, ours) or _inside(ours, theirs)):
            return True
    return False


def party_words(name: str) -> list[str]:
    """Returns the words a party name is compared by: case-folded, without parenthesised parts, dots, corporate
    suffixes and "the"."""
    name = re.sub(r"\([^)]*\)?", " ", name).replace(".", "")
    return [w for w in _words(name) if w not in _PARTY_NOISE]


def _found(gold: list[str], predicted: list[str]) -> bool:
    want = set(gold)
    return len(want & set(predicted)) >= PARTY_WORD_SHARE * len(want)


def parties_f1(value: Any, gold: list[list[str]]) -> float:
    """Returns the F1 of the predicted parties (`value`: a list of {"name", "role"}, or of names) against the
    gold names' words (module docstring); 0.0 when nothing is predicted."""
    if not isinstance(value, list) or not value or not gold:
        return 0.0
    predicted = [party_words(p.get("name", "") if isinstance(p, dict) else str(p)) for p in value]
    precision = sum(any(_found(g, p) for g in gold) for p in predicted) / len(predicted)
    recall = sum(any(_found(g, p) for p in predicted) for g in gold) / len(gold)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def score(field: str, value: Any, gold: Any) -> float:
    """Returns the score of `value` against a present gold: 1.0 or 0.0, or the parties' F1."""
    if field in _DATES:
        return float(date_right(value, gold))
    if field in _DURATIONS:
        return float(duration_right(value, gold))
    if field == "governing_law":
        return float(law_right(value, gold))
    return parties_f1(value, gold)


# -- the figures ------------------------------------------------------------------------------------------------


def score_contracts(
    records: list[dict[str, Any]],
    given: list[dict[str, Given | None]],
    *,
    misses: int = 0,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Returns the figures of each field (module docstring) for the values `given` (one dict per record, field ->
    the value given or None), and up to `misses` misses per field: a contract whose value scores below 1, or that
    has a value where CUAD has none ({"contract_id", "gold", "predicted", "status"})."""
    figures: dict[str, dict[str, Any]] = {}
    missed: dict[str, list[dict[str, Any]]] = {}
    for field in FIELDS:
        right: list[float] = []
        right_present: list[float] = []
        empty: list[bool] = []
        empty_present: list[bool] = []
        unscored = 0
        for record, values in zip(records, given, strict=True):
            state, gold = gold_of(record, field)
            value = values.get(field)
            if state == "unscored":
                unscored += 1
                continue
            if state == "absent":
                empty.append(value is None)
                empty_present.append(value is None or not value.present)
                points = 1.0 if value is None else 0.0
            else:
                points = 0.0 if value is None else score(field, value.normalized, gold)
                right.append(points)
                right_present.append(points if value is not None and value.present else 0.0)
            if points < 1.0 and len(missed.setdefault(field, [])) < misses:
                missed[field].append(_miss(record, field, value))
        figures[field] = {
            "accuracy": _share(right),
            "n_gold": len(right),
            "none_when_absent": _share(empty),
            "n_absent": len(empty),
            "accuracy_present_only": _share(right_present),
            "none_when_absent_present_only": _share(empty_present),
            "n_unscored": unscored,
        }
    return figures, {field: rows for field, rows in missed.items() if rows}


def _share(values: list[float] | list[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _miss(record: dict[str, Any], field: str, value: Given | None) -> dict[str, Any]:
    entry = record.get(FIELDS[field]) or {}
    gold = entry.get("normalized") or entry.get("names") or entry.get("answer")
    return {
        "contract_id": record.get("contract_id", record.get("file", "")),
        "gold": gold,
        "predicted": value.normalized if value is not None else None,
        "status": value.status if value is not None else None,
    }
