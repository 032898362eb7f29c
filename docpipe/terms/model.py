"""Typed cells read by a language model: the JSON schema a typed column's reply must follow (`schema_for`), the
request that asks for it (`typed_request`), and the cell made of the reply (`typed_model_cell`), checked twice
before a value is shown as a fact.

The reply, decoded under the engine's structured outputs (`docpipe.engine.base.GenerationRequest.json_schema`),
evidence first so the value is written with its quote already in view::

    {"quote": "Either Party may terminate ... upon ninety (90) days' prior written notice.",
     "as_written": "ninety (90) days",
     "value": {"count": 90, "unit": "day"},      # the kind's form, or null
     "status": "present",                          # present | absent | uncertain
     "note": "Either party, for convenience."}

The checks:

1. the quote must be in the sections the model was given (`docpipe.answer.verify.locate_quote`, as every cited
   answer's quotes are): without it a cell is never ``present``;
2. the value must be one docpipe's readers find in that quote (`docpipe.values.read.find_values`; jurisdictions
   compared by canonical name, parties by name and role, choices by option): the model points, the readers
   normalize, and the cell's `Value` is the reader's. A value its quote does not support drops to ``uncertain``
   with no value, and the note says what the quote says and what the model said. yes/no has no reader of words:
   ``true`` (and ``false``) need the verified quote.

A reply that is not the JSON asked for (cut by ``max_tokens`` mid-object, or from a server without structured
outputs) fails its cell, saying why; a failed cell is not cached, so a rerun asks again.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from docpipe.answer.core import build_request
from docpipe.answer.verify import locate_quote, normalise_whitespace, verify_quote
from docpipe.cells import Cell, Column
from docpipe.engine.base import PRIORITY_BULK, GenerationRequest, GenerationResult
from docpipe.types import Citation, Document, Hit
from docpipe.values.kinds import TYPED_KINDS, Value
from docpipe.values.read import find_values

if TYPE_CHECKING:
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.settings import EngineSettings

__all__ = [
    "DATE_PATTERN",
    "DURATION_UNITS",
    "TYPED_PROMPT_VERSION",
    "schema_for",
    "typed_column",
    "typed_model_cell",
    "typed_question",
    "typed_request",
]

#: Part of every typed schema (its description), so a change of prompt or checks keys new cache entries.
TYPED_PROMPT_VERSION = "typed-cell-1"
STATUSES = ("present", "absent", "uncertain")
#: ISO dates as the date reader normalizes them: a day, a month or a year, or an agreement with no end.
DATE_PATTERN = r"^(\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?|perpetual)$"
#: The units of the duration reader (`docpipe.values.durations`).
DURATION_UNITS = ("year", "month", "week", "day", "business_day")
# Bounds on every string, list and number: a model (or random weights) cannot run a reply on until max_tokens.
# Strings hold no "<": the grammar then cannot write a <think> tag inside the JSON, which the engines read as
# the end of a thought. Random weights do write them: 9 of 48 typed replies of the tests' tiny Qwen3 held one
# with bounded strings alone, 0 of 48 with this rule. Contract text hardly has a "<" (none of the 20 CUAD dev
# contracts has one), and a quote that needed one would only fail its check, never show a wrong value.
QUOTE_CHARS = 600
AS_WRITTEN_CHARS = 200
NOTE_CHARS = 300
NAME_CHARS = 100
_RUN = 100
MAX_PARTIES = 6
_TITLE = "_cell"  # a typed schema's title is "<kind>_cell": `typed_column` reads the column back from it

_FORMS = {
    "date": 'the date as "YYYY-MM-DD" ("YYYY-MM" or "YYYY" when the contract gives no more), or "perpetual" '
    "for an agreement with no end",
    "duration": 'the length as {"count": 90, "unit": "day"} (unit: year, month, week, day or business_day), or '
    '"perpetual"',
    "money": 'the amount as {"amount": 1000000, "currency": "USD"} (ISO 4217 code; "" when the words name none)',
    "percent": "the percentage as a number (12.5 for 12.5%)",
    "jurisdiction": 'the place whose law or courts the words name, e.g. "New York", "England and Wales"',
    "parties": 'the parties as [{"name": "Acme Corp.", "role": "Supplier"}] (role: the name the contract gives '
    'the party, "" if none)',
    "yes_no": "true or false",
    "choice": "one of the options: {options}",
}


def _text(limit: int) -> dict[str, Any]:
    """Returns the schema of a string of at most `limit` characters (a multiple of 100), none of them "<". The
    bound is in the pattern (xgrammar 0.2.8 takes no maxLength beside a pattern), in runs of 100: it fails to
    compile one repetition of more than about 128."""
    runs, rest = divmod(limit, _RUN)
    if rest or not runs:
        raise ValueError(f"a typed cell's string bound is a multiple of {_RUN}: got {limit}")
    return {"type": "string", "pattern": f"^([^<]{{{_RUN}}}){{0,{runs - 1}}}[^<]{{0,{_RUN}}}$"}


def _value_schema(kind: str, options: tuple[str, ...]) -> dict[str, Any]:
    if kind == "date":
        return {"type": "string", "pattern": DATE_PATTERN, "examples": ["2019-05-08", "2019-05", "perpetual"]}
    if kind == "duration":
        length = {
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 0, "maximum": 100000},
                "unit": {"enum": list(DURATION_UNITS)},
            },
            "required": ["count", "unit"],
            "additionalProperties": False,
        }
        return {"anyOf": [length, {"const": "perpetual"}]}
    if kind == "money":
        return {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "minimum": 0, "maximum": 1e15},
                "currency": {"type": "string", "pattern": "^([A-Z]{3})?$", "examples": ["USD", ""]},
            },
            "required": ["amount", "currency"],
            "additionalProperties": False,
        }
    if kind == "percent":
        return {"type": "number", "minimum": 0, "maximum": 1000}
    if kind == "jurisdiction":
        return _text(NAME_CHARS)
    if kind == "parties":
        party = {
            "type": "object",
            "properties": {
                "name": _text(NAME_CHARS),
                "role": _text(NAME_CHARS),
            },
            "required": ["name", "role"],
            "additionalProperties": False,
        }
        return {"type": "array", "items": party, "minItems": 1, "maxItems": MAX_PARTIES}
    if kind == "yes_no":
        return {"type": "boolean"}
    if kind == "choice":
        if not options:
            raise ValueError("a choice column needs options")
        return {"enum": list(options)}
    raise ValueError(f"no typed schema for kind {kind!r}: use one of {', '.join(TYPED_KINDS)}")


def schema_for(column: Column) -> dict[str, Any]:
    """Returns the JSON schema of a typed `column`'s reply (see the module docstring): quote, as_written, value
    (the kind's form, or null), status, note; every string, list and number bounded. A `ValueError` for a
    ``text`` column or a choice without options."""
    return {
        "title": column.kind + _TITLE,
        "description": f"One typed cell of a contract review grid ({TYPED_PROMPT_VERSION}).",
        "type": "object",
        "properties": {
            "quote": _text(QUOTE_CHARS),
            "as_written": _text(AS_WRITTEN_CHARS),
            "value": {"anyOf": [_value_schema(column.kind, column.options), {"type": "null"}]},
            "status": {"enum": list(STATUSES)},
            "note": _text(NOTE_CHARS),
        },
        "required": ["quote", "as_written", "value", "status", "note"],
        "additionalProperties": False,
    }


def typed_column(request: GenerationRequest) -> Column | None:
    """Returns the kind and options of the typed column `request` asks about (a `Column` holding only those),
    read back from its schema; None for a request `typed_request` did not make. A pending cell carries its
    request, not its column (the Ray executor ships requests to its workers), so this is how its reply finds
    the checks it needs."""
    schema = request.json_schema
    title = str(schema.get("title", "")) if schema else ""
    kind = title.removesuffix(_TITLE)
    if not schema or not title.endswith(_TITLE) or kind not in TYPED_KINDS:
        return None
    options: tuple[str, ...] = ()
    if kind == "choice":
        options = tuple(schema["properties"]["value"]["anyOf"][0]["enum"])
    return Column(title, "", "", kind=kind, options=options)


def typed_question(column: Column) -> str:
    """Returns the question of one typed cell: the column's question, then the fields of the JSON reply. The
    column comes first and the format after it, as for text cells."""
    name = f"Review item: {column.key}. " if column.key != column.question else "Review item: "
    form = _FORMS[column.kind].replace("{options}", ", ".join(column.options))
    about = column.note or "what the quoted clause provides"
    return (
        f"{name}{column.question}\n"
        "Reply with one JSON object with these fields, in this order:\n"
        'quote: the one sentence of the sections that answers it, copied verbatim ("" if none does)\n'
        "as_written: the words of that sentence that state the answer, copied exactly\n"
        f"value: {form}; null if the sections do not state it\n"
        "status: present (the quote states it), absent (no section states it) or uncertain\n"
        f"note: one sentence on {about}, or on what was searched if absent"
    )


def typed_request(
    column: Column, hits: list[Hit], doc: Document, *, settings: EngineSettings, mode: str
) -> GenerationRequest:
    """Returns the engine request of a typed cell: the grounded prompt over `hits` as a review cell's
    (`docpipe.answer.core.build_request`, thinking by `mode`, ``auto`` thinking as for analysis), at bulk
    priority, its answer bound to `schema_for(column)`."""
    request = build_request(
        typed_question(column), hits, doc, settings=settings, mode=cast("ThinkingMode", mode), analysis=True
    )
    return replace(request, priority=PRIORITY_BULK, json_schema=schema_for(column))


def typed_model_cell(column: Column, result: GenerationResult, hits: list[Hit], doc: Document) -> Cell:
    """Returns the cell of a typed column from the model's JSON reply (`result`) over `hits` of `doc`: its quote
    checked against the sections given, its value against what the readers find in the quote (see the module
    docstring). Never ``present`` without a verified quote that holds the value; the value shown is the reader's."""
    searched = [h.section_id for h in hits]
    if result.error:
        return Cell("failed", note=f"The engine failed on this cell: {result.error}", searched=searched)
    reply = _reply(result.text)
    if reply is None:
        return Cell("failed", note=_unreadable(result), searched=searched, thinking=result.thinking)
    quote, as_written, note = reply["quote"].strip(), reply["as_written"].strip(), reply["note"].strip()
    citation = _citation(quote, as_written, hits, doc) if quote else None
    quotes = [citation] if citation is not None else []
    base: dict[str, Any] = {"quotes": quotes, "searched": searched, "thinking": result.thinking}
    said = _said(column, reply["value"])
    shown = _shown(column.kind, said) if said is not None else "no value"
    status = reply["status"]
    if status == "absent":
        return Cell(
            "absent", answer="not stated", note=note or f"Searched {len(hits)} sections; none states it.", **base
        )
    if status == "uncertain":
        kept = f" The model's reading: {shown}." if said is not None else ""
        return Cell("uncertain", note=(note + kept).strip(), **base)
    if citation is None or not citation.verified:
        why = "its quote is not in the sections it was given" if quote else "it quoted nothing"
        if quote and verify_quote(quote, doc)[0]:
            why += " (the words are elsewhere in the document, in sections the model was not given)"
        return Cell("uncertain", note=f"The model said {shown}, but {why}: not shown as a fact. {note}".strip(), **base)
    if said is None:
        return Cell(
            "uncertain", note=f"The model found the clause but gave no {_label(column.kind)}. {note}".strip(), **base
        )
    value, says = _supported(column, said, quote, as_written)
    if value is None:
        quoted = f"The quote says {says}" if says else f"The quote holds no {_label(column.kind)}"
        return Cell("uncertain", note=f"{quoted}, the model said {shown}: not shown as a fact. {note}".strip(), **base)
    return Cell("present", answer=value.display, note=note, value=value, **base)


def _reply(text: str) -> dict[str, Any] | None:
    """Returns the reply's fields when `text` is one JSON object of the typed shape, else None."""
    text = text.strip()
    # xgrammar lets raw control characters into JSON strings: read them (strict=False) rather than fail.
    candidates = [text, text[text.find("{") : text.rfind("}") + 1]] if "{" in text else [text]
    for candidate in candidates:
        try:
            data = json.loads(candidate, strict=False)
        except ValueError:
            continue
        if not isinstance(data, dict) or data.get("status") not in STATUSES:
            return None
        fields = {name: data.get(name, "") for name in ("quote", "as_written", "note")}
        if not all(isinstance(v, str) for v in fields.values()):
            return None
        return {**fields, "status": data["status"], "value": data.get("value")}
    return None


def _unreadable(result: GenerationResult) -> str:
    if not result.text and result.thinking_truncated:
        return "The model's thinking used every token it was given, so it never wrote the JSON reply: run it again."
    if result.finish_reason == "length":
        return (
            "The model's reply stopped at its token limit before its JSON closed: raise "
            "DOCPIPE_ENGINE__MAX_ANSWER_TOKENS, or run it again."
        )
    return "The model's reply is not the JSON the cell asks for: check that the engine supports structured outputs."


def _citation(quote: str, as_written: str, hits: list[Hit], doc: Document) -> Citation:
    """Returns the quote as a citation: verified, with its section and pages, when a section given holds it."""
    highlight = as_written if as_written and normalise_whitespace(as_written) in normalise_whitespace(quote) else ""
    found = locate_quote(quote, hits, doc)
    if found is None:
        return Citation("", "", 0, 0, quote, False, document_id=doc.id, document_name=doc.name, unit=doc.unit)
    marks = doc.citation_marks(found.page_start, found.page_end)
    return Citation(
        found.hit.section_id,
        found.hit.heading,
        found.page_start,
        found.page_end,
        quote,
        True,
        highlight=highlight,
        document_id=doc.id,
        document_name=doc.name,
        **marks,
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _said(column: Column, value: Any) -> Any:
    """Returns the model's value in the readers' normalized form (durations as count and unit, jurisdictions by
    canonical name, parties as name and role keys), or None when it gave none or not of the kind's form."""
    kind = column.kind
    if value is None:
        return None
    if kind == "date":
        return value if isinstance(value, str) and value else None
    if kind == "duration":
        if value == "perpetual":
            return {"perpetual": True}
        if isinstance(value, dict) and value.get("unit") in DURATION_UNITS:
            count = _number(value.get("count"))
            return {"count": int(count), "unit": value["unit"]} if count is not None and count.is_integer() else None
        return None
    if kind == "money":
        if not isinstance(value, dict) or _number(value.get("amount")) is None:
            return None
        return {"amount": _number(value["amount"]), "currency": str(value.get("currency") or "").upper()}
    if kind == "percent":
        return _number(value)
    if kind == "jurisdiction":
        if not isinstance(value, str) or not value.strip():
            return None
        named = find_values("jurisdiction", value)
        return named[0].normalized if named else " ".join(value.split())
    if kind == "parties":
        if not isinstance(value, list) or not value:
            return None
        parties = [(str(p.get("name", "")), str(p.get("role", ""))) for p in value if isinstance(p, dict)]
        return [p for p in parties if p[0].strip()] or None
    if kind == "yes_no":
        return value if isinstance(value, bool) else None
    if kind == "choice":
        return value if value in column.options else None
    return None


def _key(name: str) -> str:
    return " ".join(name.casefold().split()).strip(" .,;:'\"")


def _same(kind: str, read: Any, said: Any) -> bool:
    """Returns whether a reader's normalized value `read` is the model's value `said` (`_said`'s form)."""
    if kind == "duration":
        if not isinstance(read, dict):
            return False
        if said.get("perpetual"):
            return bool(read.get("perpetual"))
        return read.get("count") == said["count"] and read.get("unit") == said["unit"]
    if kind == "money":
        if not isinstance(read, dict) or _number(read.get("amount")) is None:
            return False
        amount = cast(float, _number(read["amount"]))
        same_amount = math.isclose(amount, said["amount"], rel_tol=1e-9, abs_tol=0.005)
        return same_amount and str(read.get("currency") or "").upper() == said["currency"]
    if kind == "percent":
        number = _number(read)
        return number is not None and math.isclose(number, said, rel_tol=1e-9, abs_tol=1e-9)
    if kind == "jurisdiction":
        return isinstance(read, str) and read.casefold() == str(said).casefold()
    if kind == "parties":
        if not isinstance(read, list):
            return False
        roles = {_key(str(p.get("name", ""))): _key(str(p.get("role", ""))) for p in read if isinstance(p, dict)}
        if {_key(name) for name, _ in said} != set(roles):
            return False
        return all(not role or not roles[_key(name)] or _key(role) == roles[_key(name)] for name, role in said)
    return bool(read == said)


def _supported(column: Column, said: Any, quote: str, as_written: str) -> tuple[Value | None, str]:
    """Returns (the reader's value in `quote` equal to the model's, "") or (None, the values the readers find in
    `quote`, "" for none)."""
    kind = column.kind
    if kind == "yes_no":
        start = quote.find(as_written) if as_written else -1
        words = as_written if start >= 0 else ""
        return Value("yes_no", said, "Yes" if said else "No", words, start, start + len(words) if words else -1), ""
    found = find_values(kind, quote, column.options)
    matching = [v for v in found if _same(kind, v.normalized, said)]
    if matching:
        written = normalise_whitespace(as_written)
        within = [v for v in matching if written and normalise_whitespace(v.as_written) in written]
        return (within or matching)[0], ""
    return None, "; ".join(dict.fromkeys(v.display for v in found))


def _label(kind: str) -> str:
    return {"yes_no": "yes or no", "choice": "option", "parties": "parties"}.get(kind, kind)


def _shown(kind: str, said: Any) -> str:
    """Returns the model's value as a note shows it: "2020-05-08", "90 days", "USD 1,000,000", "12.5%"."""
    if kind == "duration":
        if said.get("perpetual"):
            return "perpetual"
        unit = said["unit"].replace("_", " ")
        return f"{said['count']} {unit}{'' if said['count'] == 1 else 's'}"
    if kind == "money":
        amount = f"{said['amount']:,.2f}".removesuffix(".00")
        return f"{said['currency']} {amount}".strip()
    if kind == "percent":
        return f"{said:g}%"
    if kind == "parties":
        return "; ".join(f"{name} ({role})" if role else name for name, role in said)
    if kind == "yes_no":
        return "yes" if said else "no"
    return str(said)
