"""The agreement's dates: the date it was made (the preamble's, else the date last signed) and the date it takes
effect."""

from __future__ import annotations

import re

from docpipe.cells import Cell
from docpipe.terms.reading import Reader, Sentence, dates_in, read_cell
from docpipe.values.kinds import Value

__all__ = ["NOT_A_MAKING", "agreement_date", "effective_date"]

_MADE = re.compile(
    r"(?:\b(?:dated|made|entered\s+into|executed|signed|concluded|agreed)\b[^.;]{0,60}?|\bas\s+of|\bday\s+of|\bon"
    r"|\bdate[d]?\s*:?)\s*(?:this|the)?\s*$",
    re.IGNORECASE,
)
# The preamble's "effective as of <date>" dates the agreement too (a term's commencement does not).
_EFFECTIVE_AS_OF = re.compile(r"\beffective(?:\s+(?:as\s+of|on|from))?\s*(?:[:,]\s*)?(?:this|the)?\s*$", re.IGNORECASE)
_EFFECTIVE_BEFORE = re.compile(
    r"(?:\beffective(?:\s+(?:as\s+of|on|from|date|beginning))?\s*(?:[:,]\s*)?|\b(?:take|takes|become|becomes)\s+"
    r"effective(?:\s+(?:as\s+of|on|from))?|\b(?:commenc\w*|beginning|starting)\s+(?:on|as\s+of)"
    r"|\btakes?\s+effect\s+(?:on|as\s+of)?)\s*(?:this|the)?\s*$",
    re.IGNORECASE,
)
_EFFECTIVE_AFTER = re.compile(r"^[\s,]*\(?\s*(?:the|this)?\s*[\"“”‘’']{0,2}\s*Effective\s*Date", re.IGNORECASE)
_EFFECTIVE_IS_AGREEMENT = re.compile(
    r"Effective\s+Date[\"”’]?\s+(?:means|shall\s+mean|is|shall\s+be)\s+the\s+date\s+(?:first\s+(?:written|set\s+forth|"
    r"above)|of\s+this\s+Agreement|hereof|on\s+which\s+this\s+Agreement\s+(?:is|was|has\s+been)\s+(?:executed|signed))"
    r"|(?:Agreement|Contract)\b[^.;]{0,60}\beffective\s+as\s+of\s+the\s+date\s+(?:first\s+(?:written|set\s+forth|above)|hereof"
    r"|of\s+this\s+Agreement)"
    r"|(?:this|the)\s+Agreement\s+shall\s+(?:be|become)\s+effective\s+(?:on|as\s+of|upon)\s+the\s+date\s+(?:first|"
    r"hereof|of)",
    re.IGNORECASE,
)
# A date that dates a filing, not the agreement: EDGAR's page footers ("ACME INC, 8-K, 11/6/2019"), "Filed",
# "Source:", "Page", and dates a sentence marks as of something else ("amended", "due").
NOT_A_MAKING = re.compile(
    r"\b(?:Source|Filed|Page)\b|\bdue\s*$|\bamended\b|\b(?:[0-9A-Z]{1,4}-[0-9A-Z]{1,4}|SC\s+13[DG]|DEFM?\s*14A)(?:/A)?"
    r"\s*,\s*$",
    re.IGNORECASE,
)
_OWN_LINE = re.compile(r"(?:^|\n)[^\S\n]*(?:dated|date|effective)?[^\S\n]*:?[^\S\n]*$", re.IGNORECASE)
_LINE_END = re.compile(r"[^\S\n]*(?:\n|$|\()")


def agreement_date(reader: Reader) -> Cell:
    made: tuple[Sentence, Value] | None = None
    alone: tuple[Sentence, Value] | None = None
    for sentence in reader.opening:
        for value in dates_in(sentence):
            before = reader.before(sentence, value, 80)
            if NOT_A_MAKING.search(before[-40:]) or _SIGNED.search(before[-60:]):
                continue  # a filing's date, or a signature's: the signature blocks are read below
            if made is None and (_made(sentence, before) or _EFFECTIVE_AS_OF.search(before)):
                made = (sentence, value)
            if (
                alone is None
                and sentence.start + value.start < reader.title_block
                and _OWN_LINE.search(before)
                and _LINE_END.match(sentence.text, value.end)
            ):
                alone = (sentence, value)
    chosen = made or alone
    if chosen is None:
        signed = _signature_date(reader)
        if signed is None:
            return Cell("not_found", note="No date of the agreement in its opening or its signature blocks.")
        return read_cell(reader, "date", signed[1], signed[0], note="Read from the signature blocks.")
    return read_cell(reader, "date", chosen[1], chosen[0])


# "as of", "day of" and "on" date the making only in a sentence about the agreement itself: "depositors of the
# Association as of March 31, 1995" dates something else.
_MAKING_VERB = re.compile(r"\b(?:dated|made|entered|executed|signed|concluded|agreed|date)\b", re.IGNORECASE)
_THE_AGREEMENT = re.compile(
    r"\b(?:agreement|contract|amendment|lease|licen[cs]e|memorandum|letter|deed)\b", re.IGNORECASE
)


def _made(sentence: Sentence, before: str) -> bool:
    match = _MADE.search(before)
    if match is None:
        return False
    return bool(_MAKING_VERB.search(match.group()) or _THE_AGREEMENT.search(sentence.text))


_SIGNED = re.compile(
    r"(?:\b(?<!Effective\s)(?:Date|Dated|Signed\s+on|Executed\s+on)\s*:|/s/[^\n]{0,60}?)[^\S\n]*$", re.IGNORECASE
)


# How a contract dates itself where the parties sign: "IN WITNESS WHEREOF the parties have executed this Agreement on
# the 1st day of June, 2006", "THUS DONE AND SIGNED at Pretoria on this 31st day of March 2001", "This Agreement is
# dated April 29, 2010"; and a date written beside a signature ("Hamburg, November 19th, 2012 /s/ ...").
_CLOSING = re.compile(
    r"\b(?:IN\s+WITNESS\s+WHEREOF|executed\s+(?:this|the)\s+(?:Agreement|Contract)|SIGNED|(?:Agreement|Contract)\s+is\s+dated)\b"
    r"[^.;]{0,100}$",
    re.IGNORECASE,
)
_SIGNED_AFTER = re.compile(r"[\s,]{0,10}/s/")
# A signature block that labels its blanks below them: "03/24/06  03/24/06" over "______  ______" over "Date  Date".
_LABEL_BELOW = re.compile(r"[^\n]{0,80}\n(?:[ \t\xa0_]*\n)?[ \t\xa0_]*Date(?:[ \t\xa0]+Date)*[ \t\xa0]*(?:\n|$)")


def _signature_date(reader: Reader) -> tuple[Sentence, Value] | None:
    """Returns the date the last party signed: the latest date written after "Date:" or beside a "/s/"
    signature anywhere in the document (a short agreement signs on its first page)."""
    tail = reader.sentences
    signed: list[tuple[str, Sentence, Value]] = []
    for sentence in tail:
        for value in dates_in(sentence):
            if len(str(value.normalized)) != 10:
                continue
            before = reader.before(sentence, value, 60)
            after = reader.text[sentence.start + value.end : sentence.start + value.end + 200]
            if (
                _SIGNED.search(before)
                or _CLOSING.search(sentence.text[max(0, value.start - 120) : value.start])
                or _SIGNED_AFTER.match(after)
                or _LABEL_BELOW.match(after)
            ):
                signed.append((str(value.normalized), sentence, value))
    if not signed:
        return None
    _, sentence, value = max(signed, key=lambda item: item[0])
    return sentence, value


# "“Effective Date” means October 31, 2019".
_EFFECTIVE_DEFINED = re.compile(r"Effective\s+Date[\"”’]?\s+(?:means|shall\s+mean|is|shall\s+be)\s*$", re.IGNORECASE)
# The agreement's own Effective Date, not an amendment's or an assignment's.
_SPEAKS_OF_EFFECT = re.compile(r"(?<!Amendment\s)\bEffective\s+Date\b(?!\s+of\s+[A-Z])")
# An effective date tied to an event, not to the agreement's date: "the Effective Date means the Closing Date",
# "shall be effective as of the date the Site becomes operational", "... as of the date of physical completion".
_EFFECTIVE_EVENT = re.compile(
    r"[\"“]?Effective\s+Date[\"”]?\s+(?:means|shall\s+mean|has\s+the\s+meaning)"
    r"|(?:Agreement|Contract)\b[^.;]{0,80}\b(?:be|become|becomes|is|shall\s+be)\s+effective\s+(?:as\s+of|on|upon)\s+(?:that\s+date"
    r"|the\s+(?:date|day)\s+(?:of|on\s+which|that|when))",
    re.IGNORECASE,
)
# What makes such a definition the agreement's own date after all: its signing, its first paragraph.
_EVENT_IS_SIGNING = re.compile(
    r"\b(?:sign\w*|execut\w*|hereof|first\s+(?:written|set\s+(?:forth|out)|above)|(?:initial|first|opening)\s+paragraph"
    r"|preamble|above|of\s+this\s+(?:Agreement|Contract))",
    re.IGNORECASE,
)


# The day the agreement's term begins is the day it takes effect: "The term of this Agreement will begin on
# December 15, 1997", "This Agreement shall commence on January 10th, 2019".
_TERM_BEGINS = re.compile(r"\b(?:term|Agreement|Contract)\b[^.;]{0,80}?\b(?:commenc|begin|start)", re.IGNORECASE)
_BEGINS_ON = re.compile(
    r"\b(?:(?:this|the)\s+(?:Agreement|Contract)|(?:the\s+)?(?:initial\s+)?term(?:\s+of\s+(?:this|the)\s+(?:Agreement"
    r"|Contract))?)\b[\"”’)]*(?:\s*\([^)]{0,40}\))?\s+(?:shall|will|is\s+to)?\s*(?:commence|begin|start)s?\w*"
    r"\s+(?:on|as\s+of|from|with\s+effect\s+from)\s*(?:the\s+)?$",
    re.IGNORECASE,
)


def effective_date(reader: Reader, agreement: Cell) -> Cell:
    for sentence in reader.sentences:
        for value in dates_in(sentence):
            before = reader.before(sentence, value, 60)
            after = reader.text[sentence.start + value.end : sentence.start + value.end + 40]
            if NOT_A_MAKING.search(before[-40:]):
                continue
            if (
                _EFFECTIVE_AFTER.search(after)
                or _EFFECTIVE_DEFINED.search(before)
                or (_EFFECTIVE_BEFORE.search(before) and sentence.start < reader.opening_end)
            ):
                return read_cell(reader, "date", value, sentence)
    if agreement.value is None:
        return _term_begins(reader) or Cell(
            "not_found", note="The contract names no effective date, and no date of its own."
        )
    # A contract that speaks of its Effective Date, or of taking effect, without a date of its own for it takes
    # effect on its date ("effective as of the date first written above", "the Effective Date" used throughout).
    for said, match in reader.find(_EFFECTIVE_EVENT):
        defined = said.text[match.end() : match.end() + 120]
        if dates_in(said):
            continue  # "Effective Date means October 31, 2019": a date, read above or by the agreement date
        if not _EFFECTIVE_IS_AGREEMENT.search(said.text) and not _EVENT_IS_SIGNING.search(defined):
            return Cell(
                "uncertain",
                quotes=[reader.quote(said)],
                searched=[said.section.id],
                note="The contract ties its effective date to an event, not to a date it states: read the quote.",
            )
    for said, _match in [*reader.find(_EFFECTIVE_IS_AGREEMENT), *reader.find(_SPEAKS_OF_EFFECT)]:
        return Cell(
            "present",
            quotes=[*agreement.quotes, reader.quote(said)],
            note="The contract takes effect on its date: it gives its effective date no date of its own.",
            searched=[*agreement.searched, said.section.id],
            value=agreement.value,
            derivation=f"the date of the agreement: {agreement.value.display}",
        )
    return _term_begins(reader) or Cell("not_found", note="The contract speaks of no effective date.")


def _term_begins(reader: Reader) -> Cell | None:
    """Returns the day the agreement's term begins, for a contract that names no effective date."""
    for sentence in reader.sentences:
        if not _TERM_BEGINS.search(sentence.text):
            continue
        for value in dates_in(sentence):
            if _BEGINS_ON.search(reader.before(sentence, value, 80)):
                note = "The contract names no effective date; this is the day its term begins."
                return read_cell(reader, "date", value, sentence, note=note)
    return None
