"""A playbook: a firm's standard positions, as rules a contract meets or departs from, read from a TOML file.

The file::

    [playbook]
    name = "Commercial contracts"            # optional: the file's name
    description = "Supply, licence and services agreements we sign as the customer."

    [[rule]]
    id = "governing-law"                     # lowercase letters, digits, - and _; unique
    title = "Governed by an approved law"
    severity = "high"                        # high | medium | low
    term = "governing_law"                   # a key term (`docpipe terms --list`) ...
    allowed = ["New York", "Delaware"]       # ... and what it must be
    fallback = "We can accept Delaware law if New York is refused."
    note = "Any other law goes to the partner."

    [[rule]]
    id = "liability-cap"
    title = "Liability is capped"
    severity = "high"
    clause = "Cap on Liability"              # a clause category of the checklist ...
    required = true                          # ... that must be there (or forbidden = true)

    [[rule]]
    id = "assignment-consent"
    title = "No assignment without our consent"
    severity = "medium"
    question = "May the other party assign this agreement without our consent?"
    expect = "no"                            # the answer that meets the rule

What a term rule may test, by the term's kind:

- a place (``governing_law``, ``venue``): ``allowed``, a list of places;
- a length (``initial_term``, ``renewal_term``, ``notice_period``): ``at_least`` / ``at_most``, e.g. ``"60 days"``;
- a date (``agreement_date``, ``effective_date``, ``expiration_date``, ``notice_deadline``): ``after`` /
  ``before``, ISO dates; ``perpetual`` is after every date;
- an amount (``liability_cap``): ``at_least`` / ``at_most`` as money (``"USD 1,000,000"``) or as months of fees
  (``"12 months of fees"``), compared with a cap written the same way;
- yes or no (``auto_renewal``, ``termination_for_convenience``): ``is = true`` or ``false``;
- the title: ``allowed``, compared ignoring case.

``if_absent`` says what a contract without the term means: ``"missing"`` (the default: the term is required) or
``"meets"`` (the rule is about the term where there is one: no renewal, no notice to give).

Everything is checked before a contract is read: an unknown key, term or clause category, a test the term's
kind cannot take, a bound that reads as no value, an allowed place docpipe does not know, or a rule that can
never fire (an empty list, ``at_least`` above ``at_most``, ``after`` not before ``before``) is refused, naming
the file, the line, the rule and the fix.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docpipe.errors import ConfigError

__all__ = [
    "MAX_PLAYBOOK_BYTES",
    "MAX_RULES",
    "SEVERITIES",
    "Bound",
    "Playbook",
    "Rule",
    "load_playbook",
    "parse_playbook",
]

MAX_PLAYBOOK_BYTES = 256 * 1024  # a playbook states positions; anything bigger is not one
MAX_RULES = 100  # each rule is a grid column; a review of more is a mistake, not a playbook
MAX_TEXT_CHARS = 2000  # a title, fallback, note or question
SEVERITIES: tuple[str, ...] = ("high", "medium", "low")
_HEAD_FIELDS = ("name", "description", "version", "owner")
_RULE_FIELDS = (
    "id",
    "title",
    "severity",
    "term",
    "clause",
    "question",
    "allowed",
    "at_least",
    "at_most",
    "after",
    "before",
    "is",
    "if_absent",
    "required",
    "forbidden",
    "expect",
    "fallback",
    "note",
)
_TERM_TESTS = ("allowed", "at_least", "at_most", "after", "before", "is")
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_FEE_MONTHS = re.compile(r"^\s*(\d{1,3})\s+months?\s+(?:of\s+)?(?:the\s+)?fees(?:\s+paid)?\s*$", re.IGNORECASE)
# The tests each kind of key term takes.
_TESTS_OF_KIND = {
    "jurisdiction": ("allowed",),
    "text": ("allowed",),
    "duration": ("at_least", "at_most"),
    "date": ("after", "before"),
    "money": ("at_least", "at_most"),
    "yes_no": ("is",),
}


@dataclass(frozen=True, slots=True)
class Bound:
    """A lower or upper bound of a term rule: a length in days, an amount with its currency, or a number of
    months of fees (a cap written as a formula)."""

    kind: str  # days | money | fee_months
    number: float
    currency: str = ""
    written: str = ""  # as the playbook wrote it

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "number": self.number, "currency": self.currency, "written": self.written}


@dataclass(frozen=True, slots=True)
class Rule:
    """One position of a playbook (see the module docstring). `form` is ``term``, ``clause`` or ``question``;
    only the fields of its form are set."""

    id: str
    title: str
    severity: str
    form: str
    term: str = ""
    clause: str = ""  # the checklist category's name, as the checklist spells it
    question: str = ""
    allowed: tuple[str, ...] = ()  # places by canonical name; titles as written
    at_least: Bound | None = None
    at_most: Bound | None = None
    after: str = ""
    before: str = ""
    is_: bool | None = None
    if_absent: str = "missing"  # missing | meets
    required: bool = False
    forbidden: bool = False
    expect: bool | None = None  # a question rule's answer that meets it
    fallback: str = ""
    note: str = ""
    line: int = 0  # where the rule starts in its file

    @property
    def test(self) -> str:
        """Returns what the rule tests, in a few words: ``governing_law in New York, Delaware``."""
        if self.form == "clause":
            return f"{self.clause}: {'required' if self.required else 'forbidden'}"
        if self.form == "question":
            return f"{self.question} Expected: {'yes' if self.expect else 'no'}"
        parts = []
        if self.allowed:
            parts.append(f"in {', '.join(self.allowed)}")
        if self.at_least is not None:
            parts.append(f">= {self.at_least.written}")
        if self.at_most is not None:
            parts.append(f"<= {self.at_most.written}")
        if self.after:
            parts.append(f"after {self.after}")
        if self.before:
            parts.append(f"before {self.before}")
        if self.is_ is not None:
            parts.append(f"is {'yes' if self.is_ else 'no'}")
        absent = "; none is fine" if self.if_absent == "meets" else ""
        return f"{self.term} {' and '.join(parts)}{absent}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "form": self.form,
            "test": self.test,
            "term": self.term,
            "clause": self.clause,
            "question": self.question,
            "allowed": list(self.allowed),
            "at_least": self.at_least.to_dict() if self.at_least else None,
            "at_most": self.at_most.to_dict() if self.at_most else None,
            "after": self.after,
            "before": self.before,
            "is": self.is_,
            "if_absent": self.if_absent,
            "required": self.required,
            "forbidden": self.forbidden,
            "expect": None if self.expect is None else ("yes" if self.expect else "no"),
            "fallback": self.fallback,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Playbook:
    """A checked playbook: its name, description, rules in the file's order, where it came from and the
    SHA-256 of its text (a report names the exact playbook it applied)."""

    name: str
    rules: tuple[Rule, ...]
    description: str = ""
    version: str = ""
    owner: str = ""
    source: str = ""
    sha256: str = ""
    text: str = ""  # the TOML as given: a REST job keeps it to run again

    def rule(self, rule_id: str) -> Rule:
        """Returns the rule with this id; a `KeyError` naming the ids otherwise."""
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(f"no rule {rule_id!r} in {self.name}: its rules are {', '.join(r.id for r in self.rules)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "owner": self.owner,
            "source": self.source,
            "sha256": self.sha256,
            "rules": [r.to_dict() for r in self.rules],
        }


def load_playbook(path: str | Path) -> Playbook:
    """Returns the playbook in the TOML file at `path`, checked (see the module docstring); a `ConfigError`
    naming the file, the line and the rule of the first problem, with the fix."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the playbook {file}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_PLAYBOOK_BYTES:
        raise ConfigError(f"{file} is {len(raw)} bytes: a playbook is at most {MAX_PLAYBOOK_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file} is not UTF-8 text: {exc}; save the playbook as UTF-8") from exc
    return parse_playbook(text, source=str(file), default_name=file.stem)


def parse_playbook(text: str, *, source: str = "playbook", default_name: str = "playbook") -> Playbook:
    """Returns the playbook written in `text` (TOML, see the module docstring), checked; `source` names it in
    errors (a file's path, or ``playbook`` for a REST request's)."""
    import tomllib

    if len(text.encode("utf-8")) > MAX_PLAYBOOK_BYTES:
        raise ConfigError(f"{source}: a playbook is at most {MAX_PLAYBOOK_BYTES} bytes")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not a TOML playbook: {exc}") from exc
    lines = text.splitlines()
    for key in data:
        if key not in ("playbook", "rule"):
            raise ConfigError(
                f"{source}:{_line_of(lines, key, 0)}: unknown key {key!r}; a playbook holds a [playbook] table and "
                "[[rule]] tables"
            )
    head = data.get("playbook", {})
    if not isinstance(head, dict):
        raise ConfigError(f"{source}: [playbook] is a table of {', '.join(_HEAD_FIELDS)}")
    for key, value in head.items():
        if key not in _HEAD_FIELDS:
            raise ConfigError(
                f"{source}:{_line_of(lines, key, 0)}: unknown key {key!r} in [playbook]; use {', '.join(_HEAD_FIELDS)}"
            )
        if not isinstance(value, str):
            raise ConfigError(f"{source}:{_line_of(lines, key, 0)}: [playbook] {key} must be a string")
    tables = data.get("rule")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(
            f"{source} has no [[rule]] tables: write one per position (id, title, severity, what it tests)"
        )
    if len(tables) > MAX_RULES:
        raise ConfigError(f"{source} has {len(tables)} rules: a playbook takes at most {MAX_RULES}; split it")
    starts = [i for i, line in enumerate(lines) if re.match(r"\s*\[\[\s*rule\s*\]\]", line)]
    rules: list[Rule] = []
    seen: set[str] = set()
    for n, table in enumerate(tables):
        first = starts[n] if n < len(starts) else 0
        rule = _rule(table, source, lines, first)
        if rule.id in seen:
            raise ConfigError(f"{source}:{first + 1}: rule {rule.id!r} is given twice; give each rule its own id")
        seen.add(rule.id)
        rules.append(rule)
    return Playbook(
        name=" ".join(str(head.get("name") or default_name).split())[:200],
        rules=tuple(rules),
        description=str(head.get("description", "")).strip(),
        version=str(head.get("version", "")).strip(),
        owner=str(head.get("owner", "")).strip(),
        source=source,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        text=text,
    )


def _rule(table: Any, source: str, lines: list[str], first: int) -> Rule:
    where = f"{source}:{first + 1}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: a rule is a table of id, title, severity and what it tests")
    named = f"rule {table['id']!r}: " if isinstance(table.get("id"), str) else ""
    for name in table:
        if name not in _RULE_FIELDS:
            raise ConfigError(
                f"{source}:{_line_of(lines, name, first)}: {named}unknown key {name!r} in a rule; "
                f"use {', '.join(_RULE_FIELDS)}"
            )
    rule_id = table.get("id")
    if not isinstance(rule_id, str) or not _ID.match(rule_id):
        raise ConfigError(
            f'{where}: a rule needs an id of lowercase letters, digits, - and _ (at most 64), e.g. id = "governing-law"'
        )
    where = f"{source}:{first + 1}: rule {rule_id!r}"

    def text(name: str, *, required: bool = False) -> str:
        value = table.get(name, "")
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {name} must be a string")
        value = " ".join(value.split())
        if required and not value:
            raise ConfigError(f"{where}: a rule needs a {name}")
        if len(value) > MAX_TEXT_CHARS:
            raise ConfigError(f"{where}: {name} is {len(value)} characters; keep it under {MAX_TEXT_CHARS}")
        return value

    title, fallback, note = text("title", required=True), text("fallback"), text("note")
    severity = table.get("severity")
    if severity not in SEVERITIES:
        raise ConfigError(f"{where}: severity must be one of {', '.join(SEVERITIES)}, not {severity!r}")
    forms = [f for f in ("term", "clause", "question") if f in table]
    if len(forms) != 1:
        raise ConfigError(
            f"{where}: a rule tests one thing: give exactly one of term = (a key term), clause = (a checklist "
            f"category) or question = (for the model){'; it gives ' + ', '.join(forms) if forms else ''}"
        )
    form = forms[0]
    common = {"id": rule_id, "title": title, "severity": severity, "fallback": fallback, "note": note}
    allowed_here = {"term": (*_TERM_TESTS, "if_absent"), "clause": ("required", "forbidden"), "question": ("expect",)}
    for name in table:
        if name in _RULE_FIELDS[6:16] and name not in allowed_here[form]:
            raise ConfigError(
                f"{where}: {name} is not for a {form} rule; a {form} rule takes {', '.join(allowed_here[form])}"
            )
    if form == "term":
        return _term_rule(table, where, common, first + 1)
    if form == "clause":
        return _clause_rule(table, where, common, first + 1)
    question = text("question", required=True)
    from docpipe.review.run import MAX_QUESTION_CHARS

    if len(question) > MAX_QUESTION_CHARS:
        raise ConfigError(f"{where}: the question is {len(question)} characters; keep it under {MAX_QUESTION_CHARS}")
    expect = table.get("expect")
    answers = {"yes": True, "no": False, True: True, False: False}
    if expect not in answers:
        raise ConfigError(f'{where}: a question rule needs expect = "yes" or "no": the answer that meets the rule')
    return Rule(**common, form="question", question=question, expect=answers[expect], line=first + 1)


def _clause_rule(table: dict[str, Any], where: str, common: dict[str, Any], line: int) -> Rule:
    from docpipe.analysis.checklist import CHECKLIST

    name = table["clause"]
    clauses = {c.name.casefold(): c.name for c in CHECKLIST if c.kind == "clause"}
    if not isinstance(name, str) or name.casefold().strip() not in clauses:
        facts = {c.name.casefold() for c in CHECKLIST if c.kind == "fact"}
        hint = " (that one is a value: write a term rule)" if isinstance(name, str) and name.casefold() in facts else ""
        raise ConfigError(
            f"{where}: unknown clause category {name!r}{hint}; the categories are {', '.join(clauses.values())}"
        )
    required, forbidden = table.get("required"), table.get("forbidden")
    for flag, value in (("required", required), ("forbidden", forbidden)):
        if value is not None and value is not True:
            raise ConfigError(f"{where}: write {flag} = true, or leave it out")
    if bool(required) == bool(forbidden):
        raise ConfigError(f"{where}: a clause rule says required = true or forbidden = true (one of them)")
    return Rule(
        **common,
        form="clause",
        clause=clauses[name.casefold().strip()],
        required=bool(required),
        forbidden=bool(forbidden),
        line=line,
    )


def _term_rule(table: dict[str, Any], where: str, common: dict[str, Any], line: int) -> Rule:
    from docpipe.terms.catalog import KEY_TERMS

    kinds = {t.id: t.kind for t in KEY_TERMS}
    term = table["term"]
    if term not in kinds:
        raise ConfigError(f"{where}: unknown term {term!r}; the key terms are {', '.join(kinds)}")
    kind = kinds[term]
    takes = _TESTS_OF_KIND.get(kind)
    if takes is None:
        raise ConfigError(
            f"{where}: {term} ({kind}) cannot be tested by a playbook rule; use a question rule for the model instead"
        )
    given = [t for t in _TERM_TESTS if t in table]
    if not given:
        raise ConfigError(f"{where}: a rule over {term} needs a test: {' or '.join(takes)}")
    wrong = [t for t in given if t not in takes]
    if wrong:
        raise ConfigError(f"{where}: {term} is a {kind.replace('_', '/')}: it takes {', '.join(takes)}, not {wrong[0]}")
    if_absent = table.get("if_absent", "missing")
    if if_absent not in ("missing", "meets"):
        raise ConfigError(
            f'{where}: if_absent is "missing" (the term is required) or "meets" (no such term is fine), not {if_absent!r}'
        )
    fields: dict[str, Any] = {"term": term, "if_absent": if_absent}
    if "allowed" in table:
        fields["allowed"] = _allowed(table["allowed"], kind, where)
    for name in ("at_least", "at_most"):
        if name in table:
            fields[name] = _bound(table[name], kind, name, where)
    low, high = fields.get("at_least"), fields.get("at_most")
    if low is not None and high is not None:
        if low.kind != high.kind or low.currency != high.currency:
            raise ConfigError(f"{where}: at_least and at_most must be written alike (both {low.written!r}'s form)")
        if low.number > high.number:
            raise ConfigError(
                f"{where}: at_least {low.written} is above at_most {high.written}: no contract can meet it"
            )
    for name in ("after", "before"):
        if name in table:
            fields[name] = _date(table[name], name, where)
    if fields.get("after") and fields.get("before") and fields["after"] >= fields["before"]:
        raise ConfigError(
            f"{where}: after {fields['after']} is not before before {fields['before']}: no date is between"
        )
    if "is" in table:
        if not isinstance(table["is"], bool):
            raise ConfigError(f"{where}: is = true or is = false (no quotes)")
        fields["is_"] = table["is"]
    return Rule(**common, form="term", line=line, **fields)


def _allowed(values: Any, kind: str, where: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        raise ConfigError(f'{where}: allowed is a list of names, e.g. allowed = ["New York", "Delaware"]')
    if not values:
        raise ConfigError(f"{where}: allowed is empty: no contract could meet the rule; name what is allowed")
    if kind != "jurisdiction":
        return tuple(" ".join(v.split()) for v in values)
    from docpipe.values.jurisdictions import canonical_jurisdiction

    places = []
    for value in values:
        place = canonical_jurisdiction(value)
        if place is None:
            raise ConfigError(
                f"{where}: {value!r} is not a place docpipe reads (a US state, a Canadian province, a country, "
                '"England and Wales"): the rule could never match it; write the place as a contract names it'
            )
        places.append(place)
    return tuple(dict.fromkeys(places))


def _bound(value: Any, kind: str, name: str, where: str) -> Bound:
    from docpipe.values.read import find_values

    if not isinstance(value, str) or not value.strip():
        example = '"60 days"' if kind == "duration" else '"USD 1,000,000" or "12 months of fees"'
        raise ConfigError(f"{where}: {name} is written as text, e.g. {name} = {example}")
    if kind == "money":
        months = _FEE_MONTHS.match(value)
        if months:
            return Bound("fee_months", float(months.group(1)), written=value.strip())
    found = find_values(kind, value)
    if len(found) != 1 or found[0].as_written.strip() != value.strip().rstrip("."):
        example = '"60 days", "1 year"' if kind == "duration" else '"USD 1,000,000", "12 months of fees"'
        raise ConfigError(f"{where}: {name} = {value!r} does not read as one {kind}; write it as {example}")
    normalized = found[0].normalized
    if kind == "duration":
        if not isinstance(normalized, dict) or "days" not in normalized:
            raise ConfigError(f"{where}: {name} = {value!r} is not a length in days, months or years")
        return Bound("days", float(normalized["days"]), written=found[0].display)
    if normalized.get("amount") is None:
        raise ConfigError(f"{where}: {name} = {value!r} names no amount")
    return Bound("money", float(normalized["amount"]), str(normalized.get("currency") or ""), found[0].display)


def _date(value: Any, name: str, where: str) -> str:
    import datetime

    written = value.isoformat() if isinstance(value, datetime.date) else value
    if not isinstance(written, str) or not _ISO_DATE.match(written):
        raise ConfigError(f"{where}: {name} is an ISO date, e.g. {name} = 2027-06-30")
    try:
        datetime.date.fromisoformat(written)
    except ValueError:
        raise ConfigError(f"{where}: {name} = {written} is not a day of the calendar") from None
    return written


def _line_of(lines: list[str], key: str, after: int) -> int:
    for i in range(after, len(lines)):
        if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", lines[i]):
            return i + 1
    return after + 1
