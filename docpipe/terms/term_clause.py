"""The term clause: the agreement's initial term and expiration (a date, perpetual, until an event, or computed
from a start and a duration, with its derivation), its renewal, the notice that stops a renewal, and the last
day to give it."""

from __future__ import annotations

import re
from collections.abc import Callable

from docpipe.cells import Cell
from docpipe.terms.reading import Reader, Sentence, dates_in, read_cell
from docpipe.terms.typed import line
from docpipe.types import Citation
from docpipe.values.kinds import Value
from docpipe.values.read import find_values

__all__ = [
    "NOTICE_WORD",
    "auto_renewal",
    "expiration",
    "initial_term",
    "moved",
    "notice_deadline",
    "notice_period",
    "renewal_term",
    "term_duration",
]

# -- term, expiration, renewal, notice ----------------------------------------------------------------------------

_UNTIL_DATE = re.compile(
    r"\b(?:until|through(?:\s+and\s+including)?|expir\w*(?:\s+(?:on|at))?|ending\s+on|ends?\s+on|terminat\w*(?:\s+on)?"
    r"|conclud\w*(?:\s+on)?|thru|to\s+and\s+including|Termination\s+Date|Expiration\s+Date|extended\s+(?:to|until)"
    r"|end\w*\s+(?:on\s+)?the\s+(?:later|earlier)\s+of\s+(?:\(\w+\)\s+)?)"
    r"\s*(?:the\s+close\s+of\s+business\s+on\s+|midnight\s+on\s+|11:59\s*p\.?m\.?\s+on\s+)?\s*$",
    re.IGNORECASE,
)
# The end of a range the term is written as: "TERM: November 01, 2014 to October 31, 2017".
_RANGE_END = re.compile(r"(?:\b(?:19|20)\d{2}|\d/\d{2})\s*(?:to|through|until|-|–)\s*$", re.IGNORECASE)
_TERM_WORD = re.compile(r"\bterm\b", re.IGNORECASE)
_PERPETUAL = re.compile(
    r"\bperpetu\w*|\bin\s+perpetuity|\bindefinitely\b|\bindefinite\s+(?:period|term|duration)|\buntil\s+(?:it\s+is\s+|this\s+agreement\s+is\s+)?"
    r"terminated\b|\bunless\s+and\s+until\s+terminated|\buntil\s+(?:either|one|a)\s+party\s+(?:terminates|gives\s+"
    r"(?:\w+\s+)?notice)|\b(?:end|expire)s?\s+(?:only\s+)?(?:when|if)\s+(?:it\s+is\s+)?terminated\b",
    re.IGNORECASE,
)
_RENEWAL = re.compile(
    r"\b(?:automatically\s+(?:be\s+)?(?:renew|extend|continue)\w*|(?:renew|extend)\w*\s+(?:automatically|"
    r"for\s+(?:successive|additional|further|one|two|three|an?\s+additional)|(?:from\s+)?year\s+to\s+year)|"
    r"successive\s+(?:renewal\s+)?(?:periods|terms)|renewal\s+terms?\b|year[\s-]+to[\s-]+year|month[\s-]+to[\s-]+month)",
    re.IGNORECASE,
)
_NOTICE_AFTER = re.compile(r"^[^.;]{0,40}?\b(?:prior|before|in\s+advance|preceding|ahead)\b", re.IGNORECASE)
# A renewal's length is no notice period when what comes before "prior" is how it is agreed: "may be extended for
# up to three (3) years by written agreement of both Parties prior to the expiration".
_NOTICE_AFTER_RENEWAL = re.compile(
    r"^(?:(?!\bby\b|\bagreement\b)[^.;]){0,40}?\b(?:prior|before|in\s+advance|preceding|ahead)\b", re.IGNORECASE
)
NOTICE_WORD = re.compile(r"\bnotice|\bnotif", re.IGNORECASE)
_RENEWAL_NOTICE = re.compile(
    r"\b(?:cancel|terminat)\w*\b[^.;]{0,80}\b(?:at|as\s+of|effective\s+(?:on|as\s+of))\s+the\s+(?:end|expiration|expiry)\s+of\s+"
    r"(?:the|any|each|its)\b"
    r"|\bnon-?\s*renewal|\bnot\s+to\s+(?:renew|extend)|\bintention\s+not\s+to|\belect\w*\s+not\s+to\s+(?:renew|extend)"
    r"|\bdoes\s+not\s+wish\s+to\s+(?:renew|extend)",
    re.IGNORECASE,
)


def _term_sentences(reader: Reader) -> list[Sentence]:
    """Returns the sentences that may state the agreement's term: those of clauses titled "Term" (not
    "Termination"; `Sentence.title`) first, then every other sentence that speaks of the agreement, its term or
    its expiry."""
    first, rest = [], []
    for sentence in reader.sentences:
        heading = sentence.title.casefold()
        if re.search(r"\bterm\b|\bduration\b", heading) and "terminat" not in heading:
            first.append(sentence)
        elif _ABOUT_TERM.search(sentence.text) or _TERM_LABEL.search(
            reader.text, max(0, sentence.start - 20), sentence.start
        ):
            rest.append(sentence)
    return first + rest


# A form's field: "6. TERM: November 01, 2014 to October 31, 2017".
_TERM_LABEL = re.compile(r"\bterm\s*:\s*$", re.IGNORECASE)
_ABOUT_TERM = re.compile(r"\b(?:agreement|contract|term|expir\w*)\b", re.IGNORECASE)
# What comes before the duration of the agreement's own term: "for a term of", "an initial term of", "shall
# continue for", "remain in full force and effect for a period of", "the term ... shall be", "is for".
_TERM_BEFORE = re.compile(
    r"(?:\b(?:initial\s+)?(?:term|period)\s+(?:of|shall\s+be|will\s+be|is)|\b(?:continue|remain|be|run|last|extend)"
    r"(?:\s+(?:in\s+(?:full\s+)?(?:force|effect)(?:\s+and\s+(?:effect|force))?|effective|in\s+effect))?\s+for"
    r"|\b(?:shall|will)\s+be|\bis|\bend(?:ing)?|\buntil|\b(?:the\s+)?(?:later|earlier)\s+of\s+(?:\(\w+\)\s+)?"
    r"|\bthe\s+entire)"
    r"(?:\s+(?:for|an?|the|initial|period|term|of|approximately))*\s*[(\"“]?\s*$",
    re.IGNORECASE,
)
# After a duration that is not the term: a time after it ends, a notice, a rate. ("ending two (2) years
# thereafter", "until five (5) years following the Effective Date" are the term: `_TERM_FROM` lets them be.)
_NOT_TERM_AFTER = re.compile(
    r"^[\s)\"”]*(?:(?:after|following|from)\s+(?:the\s+)?(?:expir|terminat|receipt|delivery|written|notice|date\s+of\s+"
    r"(?:expir|terminat))|thereafter|prior|before|in\s+advance|notice|written\s+notice|after\s+(?:such|any)|of\s+(?:the|its)"
    r"\s+(?:expir|terminat))",
    re.IGNORECASE,
)
_ENDS_BEFORE = re.compile(r"\b(?:end(?:ing)?|until|expir\w*|later\s+of|earlier\s+of)\b[^.;]{0,40}$", re.IGNORECASE)
# "until the twentieth (20th) anniversary of the Effective Date": N years.
_ANNIVERSARY = re.compile(
    r"\b(?:until|on|upon|expire\w*\s+(?:on|upon)|end\w*\s+on)\s+(?:the\s+(?:earlier|later)\s+of\s+(?:\(\w+\)\s+)?)?"
    r"(?:the\s+)?(?P<nth>[\w-]+(?:\s*\(\d+(?:st|nd|rd|th)\))?)\s+anniversary\s+of"
    r"\s+(?:the|this)\s+(?:Effective\s+Date|date\s+(?:hereof|of\s+this\s+Agreement)|Agreement|Commencement\s+Date)",
    re.IGNORECASE,
)
_START = re.compile(
    r"\b(?:commenc\w*|begin\w*|start\w*|effective|from)\s+(?:on|as\s+of|upon)?\s*(?:the\s+)?$", re.IGNORECASE
)


# A sentence that states the agreement's own term: the agreement (or its Term) continues, remains in effect,
# expires, runs or is for a period; not what survives it, a definition, or a confidentiality period.
_AGREEMENT_RUNS = re.compile(
    r"(?:this|the)\s+(?:Agreement|Contract|Sponsorship|Arrangement)\b[^.;]{0,120}?\b(?:shall|will|is|to)\s+(?:\w+\s+){0,3}?"
    r"(?:continue|remain|be\s+in\s+(?:full\s+)?(?:force|effect)|be\s+effective|expire|run|have\s+a\s+term|commence|be\s+for"
    r"|last|for\s+(?:a|an|the)\s+(?:initial\s+)?(?:term|period))|\b(?:initial\s+)?term\s+of\s+(?:this|the)\s+(?:Agreement|Contract|license|engagement|Franchise|Lease|Services?\s+Agreement)|\bthe\s+(?:initial\s+)?"
    r"[\"“]?Term[\"”]?\s+(?:\([^)]*\)\s+)?(?:shall|will|is)|\binitial\s+term\b",
    re.IGNORECASE,
)
# A time limit, not a term: "notifies ... within a period of three (3) months following the Renewal Notice".
_DEADLINE_BEFORE = re.compile(r"\bwithin\s+(?:a\s+period\s+of\s+|the\s+)?[\"“(]?\s*$", re.IGNORECASE)
_NOT_THE_TERM = re.compile(r"\bsurviv|\bconfidential|\bmeans\b|\bretain|\bwarrant|\brecords\b", re.IGNORECASE)


def _duration_of_term(sentence: Sentence) -> Value | None:
    """Returns the duration `sentence` gives the agreement's own term (not a period after it ends, a notice, a
    renewal, or what survives it)."""
    renewal = _RENEWAL.search(sentence.text)
    for value in find_values("duration", sentence.text):
        if renewal is not None and value.start > renewal.start():
            break
        if value.normalized.get("perpetual"):
            continue
        before = sentence.text[max(0, value.start - 80) : value.start]
        if _NOT_THE_TERM.search(sentence.text[: value.start]):
            break
        if _DEADLINE_BEFORE.search(before):
            continue
        after = sentence.text[value.end : value.end + 60]
        if _TERM_BEFORE.search(before) and (not _NOT_TERM_AFTER.search(after) or _ENDS_BEFORE.search(before)):
            return value
    anniversary = _ANNIVERSARY.search(sentence.text)
    if anniversary:
        from docpipe.values.numbers import read_ordinal

        count = read_ordinal(anniversary.group("nth"))
        if count:
            words = anniversary.group(0)
            unit = "year" if count == 1 else "years"
            return Value(
                "duration",
                {"days": 365 * count, "count": count, "unit": "year"},
                f"{count} {unit}",
                words,
                anniversary.start(),
                anniversary.end(),
            )
    return None


def term_duration(reader: Reader) -> tuple[Sentence, Value] | None:
    stated = _term_statement(reader)
    if stated is None or stated[0] != "duration":
        return None
    return stated[1], stated[2]


def initial_term(reader: Reader) -> Cell:
    found = term_duration(reader)
    if found is None:
        return Cell("not_found", note="No term stated as a duration.")
    return read_cell(reader, "duration", found[1], found[0])


def moved(start: str, count: int, unit: str) -> str | None:
    """Returns `start` (a date, or a year-month or year when the contract gives no more) moved by `count` units;
    None when the precision does not allow it (a year plus months)."""
    from docpipe.values.dates import add_duration

    unit = unit.rstrip("s")
    if len(start) == 10:
        return add_duration(start, count, unit)
    if len(start) == 7 and unit in ("year", "month"):
        return add_duration(start + "-01", count, unit)[:7]
    if len(start) == 4 and unit == "year":
        return str(int(start) + count)
    return None


# The agreement runs until an event, not a date: "shall continue in effect until the expiration of the last
# Royalty Term", "until the completion of the Services". It has no fixed end.
# What continues until the event is the agreement or its term itself, not a right, a lien or an obligation it
# creates ("a continuing security interest ... which shall remain in effect until ...").
_RUNS_ITSELF = re.compile(
    r"\b(?:Agreement|Contract|Term)\b[\"”’)]*(?:(?!\b(?:which|that|who|interest|right|license|obligations?)\b)[^.;]){0,60}$",
    re.IGNORECASE,
)
_UNTIL_EVENT = re.compile(
    r"\b(?:continue|remain)\b[^.;]{0,80}?\b(?:until|through)\s+(?P<event>(?:the\s+)?(?:earlier|later|expiration|expiry|completion|"
    r"termination|last|end|date\s+on\s+which|such\s+time|all|either|one|a\s+party|it\s+is|terminated)[^.;]{0,160})",
    re.IGNORECASE,
)


# "perpetual" of a licence or a right the agreement grants, not of the agreement: "a perpetual, non-exclusive
# license"; "the license ... shall continue perpetually". "The rights and obligations of the Parties ... shall
# continue in perpetuity" is the agreement's own term.
_PERPETUAL_GRANT = re.compile(r"\blicen[cs]e|\bgrant|\bright(?!s\s+and\s+obligations)", re.IGNORECASE)
_GRANT_AFTER = re.compile(r"[^.;]{0,60}?\b(?:licen[cs]e|right|grant)", re.IGNORECASE)


def _term_statement(reader: Reader) -> tuple[str, Sentence, Value] | None:
    return reader.once("term statement", _read_term_statement)


def _read_term_statement(reader: Reader) -> tuple[str, Sentence, Value] | None:
    """Returns how the agreement's term is stated, from the first sentence of the term clause that states it
    (sentences of a "Term" section first): ("date", an end date), ("perpetual", the words), ("duration", the
    term), or ("event", the event it runs until)."""
    for sentence in _term_sentences(reader):
        text = sentence.text
        renewal = _RENEWAL.search(text)
        limit = renewal.start() if renewal is not None else len(text)
        for value in dates_in(sentence):
            before = text[max(0, value.start - 60) : value.start]
            if value.start < limit and (
                _UNTIL_DATE.search(before)
                or (_RANGE_END.search(before) and _TERM_WORD.search(reader.before(sentence, value, 80)))
            ):
                return "date", sentence, value
        runs = _AGREEMENT_RUNS.search(text)
        perpetual = _PERPETUAL.search(text, 0, limit)
        if (
            perpetual
            and (runs or re.search(r"\b(?:agreement|contract|term)\b", text[: perpetual.start()], re.I))
            and not find_values("duration", text[: perpetual.start()])
            and not _PERPETUAL_GRANT.search(text[: perpetual.start()])
            and not _GRANT_AFTER.match(text, perpetual.end())
        ):
            words = perpetual.group(0)
            return (
                "perpetual",
                sentence,
                Value("date", "perpetual", "perpetual", words, perpetual.start(), perpetual.end()),
            )
        if not runs:
            continue
        found = _duration_of_term(sentence)
        if found is not None:
            return "duration", sentence, found
        match = _UNTIL_EVENT.search(text, 0, limit)
        if (
            match
            and _RUNS_ITSELF.search(text[max(0, match.start() - 80) : match.start()])
            and not find_values("date", match.group("event"))
            and not find_values("duration", match.group("event"))
        ):
            words = " ".join(match.group("event").split())
            value = Value(
                "date",
                "perpetual",
                f"no fixed end: until {line(words, 80)}",
                match.group(0),
                match.start(),
                match.end(),
            )
            return "event", sentence, value
    return None


def expiration(reader: Reader, get: Callable[[str], Cell]) -> Cell:
    stated = _term_statement(reader)
    if stated is None:
        return Cell("not_found", note="No expiration date, and no term to compute one from.")
    how, sentence, term = stated
    if how == "date":
        return read_cell(reader, "date", term, sentence)
    if how in ("perpetual", "event"):
        return Cell(
            "present",
            quotes=[reader.quote(sentence, term)],
            searched=[sentence.section.id],
            value=term,
            note="The agreement runs until it is terminated."
            if how == "perpetual"
            else "The agreement runs until an event, not to a date.",
        )
    term_cell = read_cell(reader, "duration", term, sentence)
    start: Value | None = None
    start_quotes: list[Citation] = []
    for value in dates_in(sentence):
        if _START.search(sentence.text[max(0, value.start - 40) : value.start]):
            start, start_quotes = value, [reader.quote(sentence, value)]
            break
    if start is None:
        start_cell = get("effective_date")
        if start_cell.value is None:
            start_cell = get("agreement_date")
        start, start_quotes = start_cell.value, start_cell.quotes[:1]
    if start is None:
        return Cell(
            "uncertain", quotes=term_cell.quotes, note=f"The term is {term.display}, but its start is not known."
        )
    normalized = term.normalized
    end = moved(str(start.normalized), int(normalized["count"]), str(normalized["unit"]))
    if end is None:
        return Cell(
            "uncertain",
            quotes=[*start_quotes, *term_cell.quotes],
            note=f"The term is {term.display} from {start.display}: not known to the day.",
        )
    return Cell(
        "present",
        quotes=[*start_quotes, *term_cell.quotes],
        note="Computed from the start date and the term.",
        searched=list(dict.fromkeys(q.section_id for q in [*start_quotes, *term_cell.quotes])),
        value=Value("date", end, end),
        derivation=f"{start.normalized} + {term.display} = {end}",
    )


# A renewal of the agreement's term: renewed, extended or prolonged, automatically or by option; not a renewal of
# something else (patents, warranties, a right that is extended to a third party, a deadline).
_RENEWS = re.compile(
    r"\b(?:renew\w*|extend\w*(?!\s+(?:until|through|to\b|beyond))|extension|prolong\w*|continue\w*\s+(?:in\s+effect\s+)?"
    r"from\s+year|automatically\s+continue\w*|thereafter\s+continue\w*|from\s+year\s+to\s+year"
    r"|(?:month|year)[\s-]+to[\s-]+(?:month|year)|indefinitely\s+(?:after\s+that|thereafter)"
    r"|additional\s+(?:\w+\s+)?(?:terms?|periods?)\s+of\b)",
    re.IGNORECASE,
)
_RENEWS_WHAT = re.compile(r"\b(?:agreement|contract|term|arrangement|appointment|sponsorship)\b", re.IGNORECASE)
_NOT_A_RENEWAL = re.compile(
    r"\bpatent|\bwarrant|\btransfer\b|\bsublicens|\bdeadline|\btime\s+(?:for|period)|\bmeans\b|\bcontinuations?\b"
    r"|\bpolic(?:y|ies)\b|\binsur",
    re.IGNORECASE,
)
_EVERY = re.compile(
    r"\b(?:each|every)\s+year|\bannually\b|\byear[\s-]+to[\s-]+year|\bmonth[\s-]+to[\s-]+month"
    r"|\b(?:monthly|annual|yearly)\s+(?:renewal\s+)?(?:periods?|terms?|basis)\b|\b(?:same|equal|like)\s+"
    r"(?:duration|period|term|length)|\bequal\s+to\s+the\s+(?:initial\s+)?term",
    re.IGNORECASE,
)
_AUTOMATIC_RENEWAL = re.compile(
    r"\bautomatic\w*|\btacit\w*|\bunless\b[^.]{0,200}\b(?:notice|notif)|\bshall\s+(?:be\s+)?(?:renew|extend)\w*\s+for"
    r"|\bwill\s+(?:be\s+)?(?:renew|extend)\w*\s+for|\bfrom\s+year\s+to\s+year",
    re.IGNORECASE,
)


def _renewal_sentences(reader: Reader) -> list[Sentence]:
    return reader.once("renewal sentences", _find_renewal_sentences)


def _find_renewal_sentences(reader: Reader) -> list[Sentence]:
    """Returns the sentences that renew or extend the agreement's term, those of a "Term" or "Renewal" section
    first."""
    found = [
        s
        for s in reader.sentences
        if _RENEWS.search(s.text) and _RENEWS_WHAT.search(s.text) and not _NOT_A_RENEWAL.search(s.text)
    ]
    return sorted(found, key=lambda s: not re.search(r"\bterm\b|renew|duration", s.title, re.I))


_UNTIL_TERMINATED = re.compile(r"\buntil\s+(?:it\s+is\s+|this\s+Agreement\s+is\s+)?terminated\b", re.IGNORECASE)


def renewal_term(reader: Reader) -> Cell:
    for sentence in _renewal_sentences(reader):
        match = _RENEWS.search(sentence.text)
        assert match is not None
        text = sentence.text
        found: list[tuple[int, str, Value]] = []
        for value in find_values("duration", text):
            if value.start < match.start() or value.start > match.end() + 200:
                continue
            if _NOTICE_AFTER_RENEWAL.search(text[value.end :]) or NOTICE_WORD.search(
                text[max(0, value.start - 40) : value.start]
            ):
                continue
            if _NOTICE_NEAR_AFTER.search(text[value.end : value.end + 40]):
                continue
            found.append((value.start, "duration", value))
        every = _EVERY.search(text, match.start())
        if every is not None:
            words = every.group(0).casefold()
            if "month" in words:
                normalized, display = {"days": 30, "count": 1, "unit": "month"}, "1 month"
            elif "year" in words or "annual" in words:
                normalized, display = {"days": 365, "count": 1, "unit": "year"}, "1 year"
            else:
                normalized, display = {}, "same"
            found.append(
                (
                    every.start(),
                    "every",
                    Value("duration", normalized, display, every.group(0), every.start(), every.end()),
                )
            )
        until = _UNTIL_TERMINATED.search(text, match.start())
        if until is not None and until.start() < match.end() + 120:
            found.append(
                (
                    until.start(),
                    "until",
                    Value(
                        "duration", {"perpetual": True}, "until terminated", until.group(0), until.start(), until.end()
                    ),
                )
            )
        if not found:
            continue
        _, how, value = min(found, key=lambda item: item[0])
        if how == "duration":
            return read_cell(reader, "duration", value, sentence)
        if value.display == "same":
            term = term_duration(reader)
            if term is None:
                continue
            value = Value("duration", term[1].normalized, term[1].display, value.as_written, value.start, value.end)
            return Cell(
                "present",
                quotes=[reader.quote(sentence, value), reader.quote(term[0], term[1])],
                searched=[sentence.section.id, term[0].section.id],
                value=value,
                derivation=f"the same as the initial term: {term[1].display}",
            )
        return Cell("present", quotes=[reader.quote(sentence, value)], searched=[sentence.section.id], value=value)
    return Cell("not_found", note="No renewal of the term.")


def auto_renewal(reader: Reader) -> Cell:
    sentences = _renewal_sentences(reader)
    for sentence in sentences:
        match = _AUTOMATIC_RENEWAL.search(sentence.text)
        if match:
            value = Value("yes_no", True, "Yes", match.group(0), match.start(), match.end())
            return Cell(
                "present",
                answer="Yes",
                quotes=[reader.quote(sentence, value)],
                searched=[sentence.section.id],
                value=value,
            )
    if sentences:
        value = Value("yes_no", False, "No: renewed only by option or agreement")
        return Cell(
            "present",
            answer=value.display,
            quotes=[reader.quote(sentences[0])],
            searched=[sentences[0].section.id],
            value=value,
            note="The term may be renewed or extended, but not automatically.",
        )
    return Cell("not_found", note="No renewal of the term.")


_NOT_RENEWAL_NOTICE = re.compile(
    r"\bpolic(?:y|ies)\b|\binsur|\bcertificate|\brates?\b|\bprices?\b|\bcharges\b|\bfees?\b", re.IGNORECASE
)
_TERM_END = re.compile(
    r"\b(?:expir\w*|end\s+of|termination\s+of\s+the\s+(?:then|initial|current)|anniversary|renewal"
    r"|then[\s-]+(?:current|existing)|(?:following|after)\s+the\s+(?:initial|first)\s+term)",
    re.IGNORECASE,
)


_OPTION_TO_RENEW = re.compile(
    r"\b(?:election|option|choice|wish\w*|desire\w*|request\w*)\s+to\s+(?:renew|extend)|\bexercise\s+(?:this|its|the|such)"
    r"\s+(?:renewal\s+)?option",
    re.IGNORECASE,
)
_NOTICE_NEAR_AFTER = re.compile(
    r"^[\s'’\")-]*(?:prior\s+|advance\s+|written\s+|advanced\s+)*(?:notice|notif)", re.IGNORECASE
)
_NOTICE_BEFORE = re.compile(
    r"\bnotice\b[^.;]{0,30}?\b(?:of\s+)?(?:at\s+least|not\s+less\s+than|no\s+less\s+than)\s*$", re.IGNORECASE
)


def notice_period(reader: Reader) -> Cell:
    """Returns the notice that stops a renewal: in a sentence that renews the term, or the two after it, or a
    sentence on non-renewal; a duration of notice given before the term ends."""
    candidates: list[Sentence] = []
    renewals = _renewal_sentences(reader)
    index = {s.start: i for i, s in enumerate(reader.sentences)}
    for sentence in renewals:
        i = index[sentence.start]
        candidates.extend(reader.sentences[i : i + 3])
    candidates.extend(s for s in reader.sentences if _RENEWAL_NOTICE.search(s.text))
    seen: set[int] = set()
    for sentence in candidates:
        text = sentence.text
        if sentence.start in seen or _NOT_RENEWAL_NOTICE.search(text) or _OPTION_TO_RENEW.search(text):
            continue
        seen.add(sentence.start)
        stops = _RENEWAL_NOTICE.search(text)
        if not NOTICE_WORD.search(text) or not (stops or _TERM_END.search(text) or _AUTOMATIC_RENEWAL.search(text)):
            continue
        if not renewals and not stops:
            continue
        for value in find_values("duration", text):
            if value.normalized.get("perpetual"):
                continue
            after, before = text[value.end : value.end + 40], text[max(0, value.start - 40) : value.start]
            if (
                _NOTICE_AFTER.search(text[value.end :])
                or _NOTICE_NEAR_AFTER.search(after)
                or _NOTICE_BEFORE.search(before)
            ):
                return read_cell(reader, "duration", value, sentence)
    return Cell("not_found", note="No notice period to stop a renewal.")


def notice_deadline(reader: Reader, get: Callable[[str], Cell]) -> Cell:
    notice, expiration = get("notice_period"), get("expiration_date")
    if notice.value is None:
        return Cell("not_found", note="No notice period to stop a renewal.")
    if expiration.value is None or len(str(expiration.value.normalized)) != 10:
        return Cell(
            "uncertain",
            quotes=notice.quotes,
            note=f"Notice of {notice.value.display} is due before the term ends, but the expiration date is not known "
            "to the day.",
        )
    from docpipe.values.dates import subtract_days

    days = int(notice.value.normalized["days"])
    end = subtract_days(str(expiration.value.normalized), days)
    return Cell(
        "present",
        quotes=[*expiration.quotes, *notice.quotes],
        note="Computed: the expiration date minus the notice period.",
        searched=[*expiration.searched, *notice.searched],
        value=Value("date", end, end),
        derivation=f"{expiration.value.normalized} - {days} days = {end}",
    )
