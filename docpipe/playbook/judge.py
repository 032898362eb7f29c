"""A playbook rule held against one contract's cells: the verdict, and what it rests on.

Verdicts:

- ``meets``: the contract says what the rule asks, shown by a verified quote or a verified typed value (the
  value read again from its quote), or, for a clause the rule forbids or a term it allows to be absent, by a
  search of the whole text that finds none of the words such clauses are written with
  (`docpipe.playbook.evidence`);
- ``deviates``: a verified quote or value that departs from the rule;
- ``missing``: a required clause or term was not found;
- ``needs review``: docpipe is not sure: an offline candidate, a model's uncertain cell, a value it cannot
  compare, a question for a model with no model, or a clause not found in a contract that still uses its words.

A rule never says ``meets`` when it is not sure: `settle` turns any ``meets`` without its proof into ``needs
review``, whatever produced it. Offline (no language model) a clause found by its clause score alone is never
``meets``: only a clause read by its reader (the liability cap, termination for convenience) or a very high score
is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from docpipe.cells import Cell
from docpipe.playbook.evidence import SURE_READERS, clause_signature, term_subject
from docpipe.playbook.schema import Bound, Rule
from docpipe.types import Citation
from docpipe.values.kinds import Value

__all__ = ["VERDICTS", "VERDICT_LABELS", "Mentions", "Verdict", "judge", "settle"]

VERDICTS: tuple[str, ...] = ("meets", "deviates", "missing", "needs_review")
VERDICT_LABELS = {"meets": "Meets", "deviates": "Deviates", "missing": "Missing", "needs_review": "Needs review"}
#: The sentences of one contract that match a pattern (verified quotes, in reading order); None when its text
#: cannot be searched (then nothing rests on an absence).
Mentions = Callable[[re.Pattern[str]], list[Citation] | None]
_UNSEARCHED = "its text could not be searched to be sure: check"
_SHOWN = 3  # mentions cited by a verdict that asks for a reviewer


@dataclass(slots=True)
class Verdict:
    """One rule on one contract: its status (`VERDICTS`), one sentence saying why, the quotes it rests on, the
    typed value compared (for a term rule) and its basis: ``quote``, ``value``, ``absence`` (a whole-text
    search found none of the clause's words), or ``""`` when it rests on nothing sure."""

    status: str
    reason: str
    quotes: list[Citation] = field(default_factory=list)
    value: Value | None = None
    basis: str = ""

    @property
    def label(self) -> str:
        return VERDICT_LABELS[self.status]

    @property
    def pages(self) -> str:
        return "; ".join(dict.fromkeys(q.pages for q in self.quotes if q.verified))

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "label": self.label,
            "reason": self.reason,
            "quotes": [q.to_dict() for q in self.quotes],
            "pages": self.pages,
            "value": self.value.to_dict() if self.value is not None else None,
            "basis": self.basis,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            status=data["status"],
            reason=data.get("reason", ""),
            quotes=[Citation.from_dict(q) for q in data.get("quotes", [])],
            value=Value.from_dict(data["value"]) if data.get("value") else None,
            basis=data.get("basis", ""),
        )


def settle(verdict: Verdict) -> Verdict:
    """Returns `verdict`, or ``needs review`` in its place when it says ``meets`` without proof: a verified
    quote, or a whole-text search that found no word of the clause."""
    if verdict.status != "meets":
        return verdict
    if verdict.basis == "absence" or any(q.verified for q in verdict.quotes):
        return verdict
    return Verdict(
        "needs_review",
        f"Not shown as meeting the rule: nothing verified supports it ({verdict.reason})",
        verdict.quotes,
        verdict.value,
    )


def judge(
    rule: Rule,
    cell: Cell,
    *,
    reader_cell: Cell | None = None,
    mentions: Mentions,
    found_score: float,
    sure_score: float,
) -> Verdict:
    """Returns the verdict of `rule` on one contract from its grid `cell` (the rule's column), `reader_cell`
    (a clause rule's key-term reader, when the clause has one), and `mentions` (a search of the contract's
    whole text). `found_score` and `sure_score` are the offline clause scores at which a clause is found and
    found for sure (module docstring)."""
    if cell.status == "failed":
        return Verdict("needs_review", f"The contract could not be checked: {cell.note}")
    if rule.form == "term":
        verdict = _term(rule, cell, mentions)
    elif rule.form == "clause":
        verdict = _clause(rule, cell, reader_cell, mentions, found_score, sure_score)
    else:
        verdict = _question(rule, cell)
    return settle(verdict)


def _term(rule: Rule, cell: Cell, mentions: Mentions) -> Verdict:
    name = rule.term.replace("_", " ")
    if cell.status == "present" and cell.value is not None:
        fits, why = _compare(rule, cell.value)
        shown = cell.value.display + (f" ({cell.derivation})" if cell.derivation else "")
        if fits is None:
            return Verdict("needs_review", f"The {name} is {shown}: {why}", cell.quotes, cell.value)
        if fits:
            return Verdict("meets", f"The {name} is {shown}: {why}", cell.quotes, cell.value, "value")
        return Verdict("deviates", f"The {name} is {shown}: {why}", cell.quotes, cell.value, "value")
    if cell.status in ("not_found", "absent"):
        said = cell.note or f"No {name} found."
        if rule.is_ is not None or rule.if_absent == "meets":
            subject = term_subject(rule.term)
            seen = mentions(subject) if subject is not None else []
            if seen is None:
                return Verdict("needs_review", f"{said} The contract's {_UNSEARCHED}.")
            if subject is None or seen:
                return Verdict(
                    "needs_review",
                    f"{said} The contract still speaks of it ({len(seen)} sentences): check them.",
                    seen[:_SHOWN],
                )
            if rule.is_ is None:
                return Verdict(
                    "meets", f"No {name}: the contract never speaks of one, and the rule allows that.", basis="absence"
                )
            fits = rule.is_ is False
            status = "meets" if fits else "deviates"
            return Verdict(status, f"The contract never speaks of it: {name} is no.", basis="absence")
        return Verdict("missing", f"{said} The rule requires it.", cell.quotes)
    value = f" ({cell.value.display})" if cell.value is not None else ""
    return Verdict("needs_review", f"The {name}{value} needs a reviewer: {cell.note}".strip(), cell.quotes, cell.value)


def _compare(rule: Rule, value: Value) -> tuple[bool | None, str]:
    """Returns whether `value` passes `rule`'s tests (None: cannot tell) and why."""
    normalized = value.normalized
    if rule.is_ is not None:
        if not isinstance(normalized, bool):
            return None, "not a yes or no"
        return normalized is rule.is_, f"the rule wants {'yes' if rule.is_ else 'no'}"
    if rule.allowed:
        shown = str(normalized if value.kind == "jurisdiction" else value.display)
        allowed = {a.casefold() for a in rule.allowed}
        if shown.casefold() in allowed:
            return True, "allowed"
        return False, f"allowed are {', '.join(rule.allowed)}"
    checks: list[tuple[bool | None, str]] = []
    if rule.at_least is not None:
        checks.append(_against(value, rule.at_least, lower=True))
    if rule.at_most is not None:
        checks.append(_against(value, rule.at_most, lower=False))
    if (rule.after or rule.before) and normalized == "perpetual" and value.display.startswith("no fixed end"):
        return None, "the term ends on an event, not a date: place it by hand"
    if rule.after:
        checks.append(_date_against(normalized, rule.after, after=True))
    if rule.before:
        checks.append(_date_against(normalized, rule.before, after=False))
    for fits, why in checks:  # one bound it departs from decides, before one it cannot be held to
        if fits is False:
            return False, why
    for fits, why in checks:
        if fits is None:
            return None, why
    return True, "; ".join(why for _, why in checks)


def _against(value: Value, bound: Bound, *, lower: bool) -> tuple[bool | None, str]:
    side = "at least" if lower else "at most"
    want = f"the rule wants {side} {bound.written}"
    normalized = value.normalized if isinstance(value.normalized, dict) else {}
    if bound.kind == "days":
        if normalized.get("perpetual"):
            return lower, want
        days = normalized.get("days")
        if not isinstance(days, int | float):
            return None, f"{want}, and this length has no number of days"
        return (days >= bound.number if lower else days <= bound.number), want
    if bound.kind == "money":
        amount = normalized.get("amount")
        if amount is None:
            return None, f"{want}; the cap is a formula, not an amount: compare it by hand"
        currency = str(normalized.get("currency") or "")
        if bound.currency and currency and currency != bound.currency:
            return None, f"{want}; the cap is in {currency}"
        return (amount >= bound.number if lower else amount <= bound.number), want
    months = _fee_months(str(normalized.get("formula") or ""))
    if months is None:
        return None, f"{want}; the cap is not written as months of fees: compare it by hand"
    return (months >= bound.number if lower else months <= bound.number), want


def _fee_months(formula: str) -> float | None:
    """Returns the months of fees a cap formula names ("fees paid in the twelve (12) months before the claim" ->
    12), or None when it names no months and fees."""
    from docpipe.values.read import find_values

    if not re.search(r"\b(?:fees|amounts?|charges|paid|payable)\b", formula, re.IGNORECASE):
        return None
    for length in find_values("duration", formula):
        data = length.normalized if isinstance(length.normalized, dict) else {}
        if data.get("unit") == "month":
            return float(data["count"])
        if data.get("unit") == "year":
            return float(data["count"]) * 12
    return None


def _date_against(normalized: Any, day: str, *, after: bool) -> tuple[bool | None, str]:
    want = f"the rule wants {'after' if after else 'before'} {day}"
    if normalized == "perpetual":
        return after, want
    if not isinstance(normalized, str) or not re.match(r"^\d{4}(-\d{2}(-\d{2})?)?$", normalized):
        return None, f"{want}, and this is not a date"
    # A year or a month stands for every day in it: decided only when all of them fall on one side.
    first = normalized + "-01-01"[len(normalized) - 4 :] if len(normalized) < 10 else normalized
    last = normalized + "-12-31"[len(normalized) - 4 :] if len(normalized) < 10 else normalized
    if len(normalized) == 7:
        last = normalized + "-31"
    if after:
        if first > day:
            return True, want
        if last <= day:
            return False, want
    else:
        if last < day:
            return True, want
        if first >= day:
            return False, want
    return None, f"{want}, and the contract gives only {normalized}"


def _clause(
    rule: Rule,
    cell: Cell,
    reader_cell: Cell | None,
    mentions: Mentions,
    found_score: float,
    sure_score: float,
) -> Verdict:
    name = rule.clause
    read = reader_cell is not None and reader_cell.status == "present" and bool(reader_cell.verified)
    score = cell.score or 0.0
    quotes = cell.verified
    sure = (cell.status == "present" and bool(quotes)) or (
        cell.status == "candidate" and bool(quotes) and score >= sure_score
    )
    found = sure or (cell.status == "candidate" and bool(quotes) and score >= found_score)
    by_reader = read and not sure
    if by_reader:
        assert reader_cell is not None
        sure, found, quotes = name in SURE_READERS, True, reader_cell.verified
    how = (
        "read by its reader" if by_reader else (f"clause score {score:.1f}" if cell.score is not None else "the model")
    )
    if rule.required:
        if sure:
            return Verdict("meets", f"{name}: found ({how}).", quotes, basis="quote")
        if cell.status in ("candidate", "uncertain", "present") or (reader_cell and reader_cell.status != "not_found"):
            shown = quotes if by_reader else cell.quotes
            return Verdict("needs_review", f"{name}: a likely clause ({how}); check that it is one.", shown)
        return Verdict("missing", f"{name}: not found. {cell.note}".strip(), cell.quotes)
    if found:
        return Verdict("deviates", f"{name}: found ({how}), and the rule forbids it.", quotes, basis="quote")
    if cell.status in ("candidate", "uncertain", "present"):
        return Verdict("needs_review", f"{name}: a possible clause ({how}); check it.", cell.quotes)
    signature = clause_signature(name)
    if signature is None:
        return Verdict(
            "needs_review",
            f"{name}: not found, but such clauses have no words docpipe can search the whole contract for: check.",
            cell.quotes,
        )
    seen = mentions(signature)
    if seen is None:
        return Verdict("needs_review", f"{name}: not found, but the contract's {_UNSEARCHED}.", cell.quotes)
    if seen:
        return Verdict(
            "needs_review",
            f"{name}: no clause found, but {len(seen)} sentences use the words such clauses use: check them.",
            seen[:_SHOWN],
        )
    return Verdict(
        "meets", f"{name}: none; no sentence of the contract uses the words such clauses use.", basis="absence"
    )


def _question(rule: Rule, cell: Cell) -> Verdict:
    expected = "yes" if rule.expect else "no"
    if cell.status == "present" and cell.value is not None and isinstance(cell.value.normalized, bool):
        said = "yes" if cell.value.normalized else "no"
        status = "meets" if cell.value.normalized is rule.expect else "deviates"
        return Verdict(
            status, f"The model answers {said}; the rule expects {expected}.", cell.quotes, cell.value, "quote"
        )
    if cell.status in ("candidate", "not_found"):
        found = f" The clauses found are cited ({len(cell.verified)})." if cell.verified else ""
        return Verdict(
            "needs_review",
            f"A question for a language model; none is configured, so a reviewer answers it.{found}",
            cell.quotes,
        )
    return Verdict("needs_review", f"The model is not sure: {cell.note}".strip(), cell.quotes)
