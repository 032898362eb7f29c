"""Key terms read from a contract without a language model: deterministic readers over its sentences.

Each term is found where contracts write it, and read by the reader of its kind (`docpipe.values`):

- **title** and **parties**: the opening of the contract (its first 3,000 characters): the heading line that
  names the agreement; the parties with their defined names from the preamble (the signature blocks when the
  preamble names none).
- **agreement date**: the date the preamble ties to the agreement's making ("dated as of", "made ... on",
  "entered into as of", "this 21st day of June, 1999"); else a date in the opening; else the signature blocks'.
- **effective date**: a date the contract calls effective ("effective as of <date>", "<date> (the "Effective
  Date")", "shall take effect on <date>"); the agreement date when the contract says it takes effect on its date
  ("the Effective Date means the date first written above"). A contract that speaks of no effective date has
  none: the agreement date is not copied into it.
- **term, expiration, renewal, notice**: the sentences of the term clause: an expiration stated as a date, or
  as a duration from the effective (or agreement) date, computed and shown with its derivation ("2014-05-08 +
  5 years = 2019-05-08"); "perpetual" / "until terminated" are values; a renewal for successive periods and
  the notice that stops it; the last day for that notice is the expiration minus the notice period.
- **governing law** and **courts**: the governing-law clause's chosen law (`docpipe.values.jurisdictions`);
  the place of the courts given jurisdiction.
- **liability cap**: the sentence that limits a party's liability: the amount, or the formula as written.
- **termination for convenience**: a right to terminate for convenience, without cause or for any reason.

Every value comes with the sentence it was read from, as a verified quote (the sentence is the document's own
text, at its offsets), and is read again from that quote before it is shown: a value its quote does not give
drops the cell to ``uncertain`` with the reason. Each cell is ``present`` with a value, or ``not_found``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from docpipe.cells import Cell, Column
from docpipe.ingest.clauses import sentence_spans
from docpipe.terms.typed import line
from docpipe.types import Citation, Document, Section
from docpipe.values.kinds import Value
from docpipe.values.read import find_values

__all__ = ["READER_VERSION", "Sentence", "document_sentences", "read_key_terms", "supported"]

#: Part of every offline key-term cell's cache key: raise it when a reader changes what it finds.
READER_VERSION = "1"
OPENING_CHARS = 3000
MAX_OPENING_CHARS = 20000  # a preamble is looked for this far: past a cover page and a table of contents
_PREAMBLE = re.compile(
    r"\b(?:THIS|This)\b[^.]{0,200}?\b(?:is|are)\s+(?:hereby\s+)?(?:made|entered|dated|executed)|\bby\s+and\s+"
    r"(?:between|among)\b[^.]{0,400}?\(",
)
_QUOTE_CHARS = 600  # a quoted sentence longer than this is cut around the value it proves


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of the document: its offsets in `Document.text`, its text and the section that holds it."""

    start: int
    end: int
    text: str
    section: Section


def document_sentences(doc: Document) -> list[Sentence]:
    """Returns every sentence of `doc`'s sections, in document order, with offsets into `doc.text`: the
    quotable sentences `sentence_spans` finds, and the text between them (a title line, "Dated as of: ...")
    as sentences of their own, so nothing of the text is out of reach."""
    sentences = []
    for section in doc.sections:
        covered = 0
        spans = []
        for start, end in sentence_spans(section.text):
            if start > covered:
                spans.append((covered, start))
            spans.append((start, end))
            covered = max(covered, end)
        if covered < len(section.text):
            spans.append((covered, len(section.text)))
        for start, end in spans:
            text = section.text[start:end]
            if text.strip():
                sentences.append(Sentence(section.start + start, section.start + end, text, section))
    return sentences


def _flat(text: str) -> str:
    return " ".join(text.split())


class _Reader:
    """One document's sentences and the cells read from them so far."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.text = doc.text
        self.sentences = document_sentences(doc)
        # The opening: the first 3,000 characters, or, when a cover page and a table of contents come first,
        # the 3,000 after the preamble begins ("This Agreement is made ...", "by and between").
        preamble = _PREAMBLE.search(self.text, 0, MAX_OPENING_CHARS)
        self.opening_end = max(OPENING_CHARS, preamble.start() + OPENING_CHARS if preamble else 0)
        self.title_block = max(TITLE_BLOCK_CHARS, preamble.start() if preamble else 0)
        self.opening = [s for s in self.sentences if s.start < self.opening_end] or self.sentences[:20]

    def before(self, sentence: Sentence, value: Value, chars: int) -> str:
        """Returns the `chars` characters of the document before `value` (read from `sentence`): a value's
        context may begin in the sentence before ("Date:" ends a sentence of its own)."""
        at = sentence.start + value.start
        return self.text[max(0, at - chars) : at]

    # -- quotes ------------------------------------------------------------------------------------------------
    def quote(self, sentence: Sentence, value: Value | None = None) -> Citation:
        """Returns `sentence` (cut around `value` when it is long) as a verified citation of the document."""
        start, end = sentence.start, sentence.end
        if value is not None and value.start >= 0 and end - start > _QUOTE_CHARS:
            centre = sentence.start + value.start
            start = max(start, centre - _QUOTE_CHARS // 2)
            end = min(end, start + _QUOTE_CHARS)
        text = self.text[start:end]
        first, last = self.doc.page_of(start), self.doc.page_of(max(start, end - 1))
        return Citation(
            section_id=sentence.section.id,
            heading=sentence.section.heading,
            page_start=first,
            page_end=last,
            quote=text,
            verified=True,
            highlight=value.as_written if value is not None else "",
            document_id=self.doc.id,
            document_name=self.doc.name,
            **self.doc.citation_marks(first, last),
        )

    def find(
        self, pattern: re.Pattern[str], sentences: Iterable[Sentence] | None = None
    ) -> Iterable[tuple[Sentence, re.Match[str]]]:
        for sentence in self.sentences if sentences is None else sentences:
            match = pattern.search(sentence.text)
            if match:
                yield sentence, match


def _cell(
    reader: _Reader,
    kind: str,
    value: Value,
    sentence: Sentence,
    note: str = "",
    read: Callable[[str], list[Value]] | None = None,
) -> Cell:
    """Returns a present cell of `value` read from `sentence`, after reading the quote again (`supported`, with
    the reader that found it when it is not the kind's own)."""
    quote = reader.quote(sentence, value)
    problem = supported(kind, value, quote.quote, read)
    if problem:
        return Cell("uncertain", quotes=[quote], note=problem, searched=[sentence.section.id])
    return Cell("present", quotes=[quote], note=note, searched=[sentence.section.id], value=value)


def supported(kind: str, value: Value, quote: str, read: Callable[[str], list[Value]] | None = None) -> str:
    """Returns "" when `quote` gives `value` (a reader of `kind`, or `read`, finds an equal normalized value in
    it), else the reason it does not: what a reviewer reads in the cell's note."""
    if kind in ("text", "yes_no"):
        return "" if quote.strip() else "no quote"
    found = read(quote) if read is not None else find_values(kind, quote)
    if any(_same(kind, f.normalized, value.normalized) for f in found):
        return ""
    seen = ", ".join(dict.fromkeys(f.display for f in found)) or "no " + kind
    return f"The quote does not give {value.display}: it reads {seen}."


def _same(kind: str, a: object, b: object) -> bool:
    if kind == "parties" and isinstance(a, list) and isinstance(b, list):
        return {_flat(str(p.get("name", ""))).casefold() for p in b} <= {
            _flat(str(p.get("name", ""))).casefold() for p in a
        }
    return a == b


# -- dates ---------------------------------------------------------------------------------------------------------

_MADE = re.compile(
    r"(?:\b(?:dated|made|entered\s+into|executed|signed|concluded|agreed)\b[^.;]{0,60}?|\bas\s+of|\bday\s+of|\bon"
    r"|\bdate[d]?\s*:?)\s*(?:this|the)?\s*$",
    re.IGNORECASE,
)
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
    r"|effective\s+as\s+of\s+the\s+date\s+(?:first\s+(?:written|set\s+forth|above)|hereof|of\s+this\s+Agreement)"
    r"|(?:this|the)\s+Agreement\s+shall\s+(?:be|become)\s+effective\s+(?:on|as\s+of|upon)\s+the\s+date\s+(?:first|"
    r"hereof|of)",
    re.IGNORECASE,
)
# A date that dates a filing, not the agreement: EDGAR's page footers ("ACME INC, 8-K, 11/6/2019"), "Filed",
# "Source:", "Page", and dates a sentence marks as of something else ("amended", "due").
_NOT_A_MAKING = re.compile(
    r"\b(?:Source|Filed|Page)\b|\bdue\s*$|\bamended\b|\b(?:[0-9A-Z]{1,4}-[0-9A-Z]{1,4}|SC\s+13[DG]|DEFM?\s*14A)(?:/A)?"
    r"\s*,\s*$",
    re.IGNORECASE,
)
_OWN_LINE = re.compile(r"(?:^|\n)[^\S\n]*(?:dated|date|effective)?[^\S\n]*:?[^\S\n]*$", re.IGNORECASE)
TITLE_BLOCK_CHARS = 1500  # a date alone on its line this near the top dates the agreement ("June 1, 2005")
_LINE_END = re.compile(r"[^\S\n]*(?:\n|$|\()")


def _dates_in(sentence: Sentence) -> list[Value]:
    return [v for v in find_values("date", sentence.text) if v.normalized != "perpetual"]


def _agreement_date(reader: _Reader) -> Cell:
    made: tuple[Sentence, Value] | None = None
    alone: tuple[Sentence, Value] | None = None
    for sentence in reader.opening:
        for value in _dates_in(sentence):
            before = reader.before(sentence, value, 80)
            if _NOT_A_MAKING.search(before[-40:]) or _SIGNED.search(before[-60:]):
                continue  # a filing's date, or a signature's: the signature blocks are read below
            if made is None and (_MADE.search(before) or _EFFECTIVE_BEFORE.search(before)):
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
        return _cell(reader, "date", signed[1], signed[0], note="Read from the signature blocks.")
    return _cell(reader, "date", chosen[1], chosen[0])


_SIGNED = re.compile(
    r"(?:\b(?<!Effective\s)(?:Date|Dated|Signed\s+on|Executed\s+on)\s*:|/s/[^\n]{0,60}?)[^\S\n]*$", re.IGNORECASE
)


def _signature_date(reader: _Reader) -> tuple[Sentence, Value] | None:
    """Returns the date the last party signed: the latest date written after "Date:" or beside a "/s/"
    signature in the second half of the document."""
    tail = [s for s in reader.sentences if s.end >= len(reader.text) * 0.5]
    signed: list[tuple[str, Sentence, Value]] = []
    for sentence in tail:
        for value in _dates_in(sentence):
            if len(str(value.normalized)) != 10:
                continue
            if _SIGNED.search(reader.before(sentence, value, 60)):
                signed.append((str(value.normalized), sentence, value))
    if not signed:
        return None
    _, sentence, value = max(signed, key=lambda item: item[0])
    return sentence, value


_SPEAKS_OF_EFFECT = re.compile(r"\bEffective\s+Date\b")


def _effective_date(reader: _Reader, agreement: Cell) -> Cell:
    for sentence in reader.sentences:
        for value in _dates_in(sentence):
            before = reader.before(sentence, value, 60)
            after = reader.text[sentence.start + value.end : sentence.start + value.end + 40]
            if _NOT_A_MAKING.search(before[-40:]):
                continue
            if _EFFECTIVE_AFTER.search(after) or (
                _EFFECTIVE_BEFORE.search(before) and sentence.start < reader.opening_end
            ):
                return _cell(reader, "date", value, sentence)
    if agreement.value is None:
        return Cell("not_found", note="The contract names no effective date, and no date of its own.")
    # A contract that speaks of its Effective Date, or of taking effect, without a date of its own for it takes
    # effect on its date ("effective as of the date first written above", "the Effective Date" used throughout).
    for said, _match in [*reader.find(_EFFECTIVE_IS_AGREEMENT), *reader.find(_SPEAKS_OF_EFFECT)]:
        return Cell(
            "present",
            quotes=[*agreement.quotes, reader.quote(said)],
            note="The contract takes effect on its date: it gives its effective date no date of its own.",
            searched=[*agreement.searched, said.section.id],
            value=agreement.value,
            derivation=f"the date of the agreement: {agreement.value.display}",
        )
    return Cell("not_found", note="The contract speaks of no effective date.")


# -- term, expiration, renewal, notice ----------------------------------------------------------------------------

_TERM_SENTENCE = re.compile(
    r"\b(?:initial\s+term|term\s+of\s+(?:this|the)\s+(?:agreement|contract|license)|(?:this|the)\s+(?:agreement|"
    r"contract)\s+(?:shall|will)\s+(?:commence|continue|remain|be\s+in\s+(?:full\s+)?(?:force|effect)|expire|"
    r"terminate\s+(?:on|upon)|run|have\s+a\s+term)|shall\s+remain\s+in\s+(?:full\s+)?force|(?:the|its)\s+\"?term\"?\s+"
    r"(?:shall|will)\s+(?:commence|begin|be|continue|expire|end))",
    re.IGNORECASE,
)
_UNTIL_DATE = re.compile(
    r"\b(?:until|through|expir\w*(?:\s+(?:on|at))?|ending\s+on|ends?\s+on|terminat\w*(?:\s+on)?|conclud\w*(?:\s+on)?|thru"
    r"|to\s+and\s+including|Termination\s+Date|Expiration\s+Date)"
    r"\s*(?:the\s+close\s+of\s+business\s+on\s+|midnight\s+on\s+|11:59\s*p\.?m\.?\s+on\s+)?\s*$",
    re.IGNORECASE,
)
_PERPETUAL = re.compile(
    r"\bperpetu\w*|\bin\s+perpetuity|\bindefinite(?:ly)?\b|\buntil\s+(?:it\s+is\s+|this\s+agreement\s+is\s+)?"
    r"terminated\b|\bunless\s+and\s+until\s+terminated|\buntil\s+(?:either|one|a)\s+party\s+terminates",
    re.IGNORECASE,
)
_RENEWAL = re.compile(
    r"\b(?:automatically\s+(?:be\s+)?(?:renew|extend|continue)\w*|(?:renew|extend)\w*\s+(?:automatically|"
    r"for\s+(?:successive|additional|further|one|two|three|an?\s+additional)|(?:from\s+)?year\s+to\s+year)|"
    r"successive\s+(?:renewal\s+)?(?:periods|terms)|renewal\s+terms?\b|year[\s-]+to[\s-]+year|month[\s-]+to[\s-]+month)",
    re.IGNORECASE,
)
_AUTOMATIC = re.compile(
    r"\bautomatic\w*|\bunless\b[^.]{0,200}\bnotice|\bshall\s+(?:be\s+)?(?:renew|extend)\w*\s+for", re.IGNORECASE
)
_NOTICE_AFTER = re.compile(r"^[^.;]{0,40}?\b(?:prior|before|in\s+advance|preceding|ahead)\b", re.IGNORECASE)
_NOTICE_WORD = re.compile(r"\bnotice|\bnotif", re.IGNORECASE)
_RENEWAL_NOTICE = re.compile(
    r"\bnon-?\s*renewal|\bnot\s+to\s+(?:renew|extend)|\bintention\s+not\s+to|\belect\w*\s+not\s+to\s+(?:renew|extend)"
    r"|\bdoes\s+not\s+wish\s+to\s+(?:renew|extend)",
    re.IGNORECASE,
)


def _term_sentences(reader: _Reader) -> list[Sentence]:
    """Returns the sentences that may state the agreement's term: those of sections headed "Term" (not
    "Termination") first, then every other sentence that speaks of the agreement, its term or its expiry."""
    first, rest = [], []
    for sentence in reader.sentences:
        heading = sentence.section.heading.casefold()
        if re.search(r"\bterm\b|\bduration\b", heading) and "terminat" not in heading:
            first.append(sentence)
        elif _ABOUT_TERM.search(sentence.text):
            rest.append(sentence)
    return first + rest


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
    r"\b(?:until|on|expire\w*\s+on|end\w*\s+on)\s+(?:the\s+)?(?P<nth>[\w-]+(?:\s*\(\d+(?:st|nd|rd|th)\))?)\s+anniversary\s+of"
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


def _term_duration(reader: _Reader) -> tuple[Sentence, Value] | None:
    stated = _term_statement(reader)
    if stated is None or stated[0] != "duration":
        return None
    return stated[1], stated[2]


def _initial_term(reader: _Reader) -> Cell:
    found = _term_duration(reader)
    if found is None:
        return Cell("not_found", note="No term stated as a duration.")
    return _cell(reader, "duration", found[1], found[0])


def _moved(start: str, count: int, unit: str) -> str | None:
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
_UNTIL_EVENT = re.compile(
    r"\b(?:continue|remain)\b[^.;]{0,80}?\buntil\s+(?P<event>(?:the\s+)?(?:earlier|later|expiration|expiry|completion|"
    r"termination|last|end|date\s+on\s+which|such\s+time|all|either|one|a\s+party|it\s+is|terminated)[^.;]{0,160})",
    re.IGNORECASE,
)


def _term_statement(reader: _Reader) -> tuple[str, Sentence, Value] | None:
    """Returns how the agreement's term is stated, from the first sentence of the term clause that states it
    (sentences of a "Term" section first): ("date", an end date), ("perpetual", the words), ("duration", the
    term), or ("event", the event it runs until)."""
    for sentence in _term_sentences(reader):
        text = sentence.text
        renewal = _RENEWAL.search(text)
        limit = renewal.start() if renewal is not None else len(text)
        for value in _dates_in(sentence):
            if value.start < limit and _UNTIL_DATE.search(text[max(0, value.start - 60) : value.start]):
                return "date", sentence, value
        runs = _AGREEMENT_RUNS.search(text)
        perpetual = _PERPETUAL.search(text, 0, limit)
        if (
            perpetual
            and (runs or re.search(r"\b(?:agreement|contract|term)\b", text[: perpetual.start()], re.I))
            and not find_values("duration", text[: perpetual.start()])
            and not re.search(r"licen[cs]e|right|grant", text[: perpetual.start()], re.I)
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


def _expiration(reader: _Reader, get: Callable[[str], Cell]) -> Cell:
    stated = _term_statement(reader)
    if stated is None:
        return Cell("not_found", note="No expiration date, and no term to compute one from.")
    how, sentence, term = stated
    if how == "date":
        return _cell(reader, "date", term, sentence)
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
    term_cell = _cell(reader, "duration", term, sentence)
    start: Value | None = None
    start_quotes: list[Citation] = []
    for value in _dates_in(sentence):
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
    end = _moved(str(start.normalized), int(normalized["count"]), str(normalized["unit"]))
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
    r"\b(?:renew\w*|extend\w*|extension|prolong\w*|continue\w*\s+(?:in\s+effect\s+)?from\s+year)", re.I
)
_RENEWS_WHAT = re.compile(r"\b(?:agreement|contract|term|arrangement|appointment|sponsorship)\b", re.IGNORECASE)
_NOT_A_RENEWAL = re.compile(
    r"\bpatent|\bwarrant|\btransfer\b|\bsublicens|\bdeadline|\btime\s+(?:for|period)|\bmeans\b|\bcontinuations?\b"
    r"|\bpolic(?:y|ies)\b|\binsur",
    re.IGNORECASE,
)
_EVERY = re.compile(
    r"\b(?:each|every)\s+year|\bannually\b|\byear[\s-]+to[\s-]+year|\bmonth[\s-]+to[\s-]+month|\b(?:same|equal|like)\s+"
    r"(?:duration|period|term|length)|\bequal\s+to\s+the\s+(?:initial\s+)?term",
    re.IGNORECASE,
)
_AUTOMATIC_RENEWAL = re.compile(
    r"\bautomatic\w*|\btacit\w*|\bunless\b[^.]{0,200}\b(?:notice|notif)|\bshall\s+(?:be\s+)?(?:renew|extend)\w*\s+for"
    r"|\bwill\s+(?:be\s+)?(?:renew|extend)\w*\s+for|\bfrom\s+year\s+to\s+year",
    re.IGNORECASE,
)


def _renewal_sentences(reader: _Reader) -> list[Sentence]:
    """Returns the sentences that renew or extend the agreement's term, those of a "Term" or "Renewal" section
    first."""
    found = [
        s
        for s in reader.sentences
        if _RENEWS.search(s.text) and _RENEWS_WHAT.search(s.text) and not _NOT_A_RENEWAL.search(s.text)
    ]
    return sorted(found, key=lambda s: not re.search(r"\bterm\b|renew|duration", s.section.heading, re.I))


_UNTIL_TERMINATED = re.compile(r"\buntil\s+(?:it\s+is\s+|this\s+Agreement\s+is\s+)?terminated\b", re.IGNORECASE)


def _renewal_term(reader: _Reader) -> Cell:
    for sentence in _renewal_sentences(reader):
        match = _RENEWS.search(sentence.text)
        assert match is not None
        text = sentence.text
        found: list[tuple[int, str, Value]] = []
        for value in find_values("duration", text):
            if value.start < match.start() or value.start > match.end() + 200:
                continue
            if _NOTICE_AFTER.search(text[value.end :]) or _NOTICE_WORD.search(
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
            return _cell(reader, "duration", value, sentence)
        if value.display == "same":
            term = _term_duration(reader)
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


def _auto_renewal(reader: _Reader) -> Cell:
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
    r"|then[\s-]+(?:current|existing))",
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


def _notice_period(reader: _Reader) -> Cell:
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
        if not _NOTICE_WORD.search(text) or not (stops or _TERM_END.search(text) or _AUTOMATIC_RENEWAL.search(text)):
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
                return _cell(reader, "duration", value, sentence)
    return Cell("not_found", note="No notice period to stop a renewal.")


def _notice_deadline(reader: _Reader, get: Callable[[str], Cell]) -> Cell:
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


# -- law, courts, cap, termination for convenience -----------------------------------------------------------------

_LAW = re.compile(r"\bgovern\w*|\bconstrued|\binterpreted|\blaws?\s+of\b|\bapplicable\s+law", re.IGNORECASE)
_COURTS = re.compile(r"\bcourts?\b[^.;]{0,200}?\b(?:located|sitting|situated|of|in|for)\b", re.IGNORECASE)
_VENUE = re.compile(r"\bjurisdiction|\bvenue|\bforum", re.IGNORECASE)


def _governing_law(reader: _Reader) -> Cell:
    from docpipe.values.jurisdictions import governing_law

    ranked = sorted(
        (s for s in reader.sentences if _LAW.search(s.text)),
        key=lambda s: (
            "govern" not in s.section.heading.casefold() and "law" not in s.section.heading.casefold(),
            not re.search(r"\bgovern", s.text, re.I),
        ),
    )
    for sentence in ranked:
        values = governing_law(sentence.text)
        if values:
            return _cell(reader, "jurisdiction", values[0], sentence, read=governing_law)
    return Cell("not_found", note="No governing-law clause.")


def _venue(reader: _Reader) -> Cell:
    for sentence in reader.sentences:
        courts = _COURTS.search(sentence.text)
        if not courts or not _VENUE.search(sentence.text):
            continue
        for value in find_values("jurisdiction", sentence.text[courts.start() :]):
            shifted = Value(
                value.kind,
                value.normalized,
                value.display,
                value.as_written,
                value.start + courts.start(),
                value.end + courts.start(),
            )
            return _cell(reader, "jurisdiction", shifted, sentence)
    return Cell("not_found", note="No clause choosing courts.")


_CAP = re.compile(
    r"\bliabilit\w*\b[^.]{0,300}?\b(?:exceed|limited\s+to|in\s+excess\s+of|greater\s+of|lesser\s+of|capped|"
    r"not\s+to\s+exceed|maximum)\b",
    re.IGNORECASE,
)
_FORMULA = re.compile(
    r"\b(?:exceed|limited\s+to|in\s+excess\s+of|not\s+to\s+exceed)\b\s*(?P<formula>(?:the\s+)?(?:total|aggregate|"
    r"amount|fees|sums|greater|lesser|[^.;]{0,20}(?:paid|payable))[^.;]{0,220})",
    re.IGNORECASE,
)


def _liability_cap(reader: _Reader) -> Cell:
    for sentence in reader.sentences:
        cap = _CAP.search(sentence.text)
        if not cap:
            continue
        money = [v for v in find_values("money", sentence.text) if v.start >= cap.start()]
        if money:
            return _cell(reader, "money", money[0], sentence)
        formula = _FORMULA.search(sentence.text, cap.start())
        if formula:
            words = formula.group("formula").strip()
            value = Value(
                "money",
                {"amount": None, "currency": "", "formula": _flat(words)},
                _flat(words),
                words,
                formula.start("formula"),
                formula.start("formula") + len(words),
            )
            return Cell(
                "present",
                quotes=[reader.quote(sentence, value)],
                searched=[sentence.section.id],
                value=value,
                note="The cap is a formula, as written.",
            )
    return Cell("not_found", note="No cap on liability found.")


_CONVENIENCE = re.compile(
    r"\bterminat\w*\b[^.]{0,200}?\b(?:for\s+convenience|without\s+cause|for\s+any\s+reason|for\s+no\s+reason|"
    r"at\s+(?:its|any)\s+(?:sole\s+)?(?:discretion|time)\s+(?:and\s+)?(?:for\s+any|without|upon|on|by)|"
    r"with\s+or\s+without\s+cause)",
    re.IGNORECASE,
)
_WHO = re.compile(
    r"(?P<who>(?:either|each|any)\s+party|[A-Z][\w&.\- ]{1,40}?)\s+(?:may|shall\s+have\s+the\s+right\s+to|"
    r"has\s+the\s+right\s+to|is\s+entitled\s+to)\s+(?:at\s+any\s+time\s+)?terminat",
    re.IGNORECASE,
)


def _termination_for_convenience(reader: _Reader) -> Cell:
    for sentence in reader.sentences:
        match = _CONVENIENCE.search(sentence.text)
        if not match or re.search(r"\bbreach|\binsolven|\bbankrupt", sentence.text[: match.end()], re.I):
            continue
        who = _WHO.search(sentence.text)
        if who is None and not re.search(r"\b(?:may|right\s+to|entitled\s+to)\b", sentence.text, re.I):
            continue  # a heading ("12.3 Termination for Convenience."), not the right itself
        notice = [
            v
            for v in find_values("duration", sentence.text)
            if _NOTICE_WORD.search(sentence.text[v.end : v.end + 60])
            or _NOTICE_WORD.search(sentence.text[max(0, v.start - 30) : v.start])
        ]
        parts = ["Yes"]
        if who:
            parts.append(_flat(who.group("who")))
        if notice:
            parts.append(f"{notice[0].display} notice")
        display = ", ".join(parts)
        value = Value("yes_no", True, display, match.group(0), match.start(), match.end())
        return Cell(
            "present",
            answer=display,
            quotes=[reader.quote(sentence, value)],
            searched=[sentence.section.id],
            value=value,
        )
    return Cell("not_found", note="No right to terminate for convenience found.")


# -- title and parties --------------------------------------------------------------------------------------------

_TITLE_WORDS = re.compile(
    r"\b(?:AGREEMENT|CONTRACT|LICENSE|LICENCE|LEASE|AMENDMENT|MEMORANDUM|DEED|TERMS|ARRANGEMENT|PLAN)\b", re.IGNORECASE
)
_NOT_TITLE = re.compile(r"\b(?:EXHIBIT|CONFIDENTIAL|OMITTED|SECURITIES|PURSUANT|Source|Page)\b", re.IGNORECASE)


def _title(reader: _Reader) -> Cell:
    opening = reader.text[:OPENING_CHARS]
    for match in re.finditer(r"[^\n]+", opening):
        line = match.group(0).strip()
        letters = [c for c in line if c.isalpha()]
        if len(line) < 4 or len(line) > 120 or not letters or _NOT_TITLE.search(line) or not _TITLE_WORDS.search(line):
            continue
        if sum(c.isupper() for c in letters) / len(letters) < 0.8:
            continue
        for sentence in reader.sentences:
            if sentence.start <= match.start() < sentence.end:
                title = _flat(line)
                value = Value("text", title, title, line, match.start() - sentence.start, match.end() - sentence.start)
                return Cell(
                    "present",
                    answer=title,
                    quotes=[reader.quote(sentence, value)],
                    searched=[sentence.section.id],
                    value=value,
                )
    return Cell("not_found", note="No title line in the opening.")


def _parties(reader: _Reader) -> Cell:
    from docpipe.values.parties import read_parties

    value = read_parties(reader.text[: reader.opening_end])
    if value is None:
        return Cell("not_found", note="No parties named in the opening.")
    quotes: list[Citation] = []
    missing = []
    for party in value.normalized:
        name = _flat(str(party["name"])).casefold()
        sentence = next((s for s in reader.opening if name in _flat(s.text).casefold()), None)
        if sentence is None:
            missing.append(str(party["name"]))
        elif all(
            q.section_id != sentence.section.id
            or q.page_start != reader.doc.page_of(sentence.start)
            or name not in _flat(q.quote).casefold()
            for q in quotes
        ):
            quotes.append(reader.quote(sentence))
    if missing:
        return Cell(
            "uncertain",
            quotes=quotes,
            note=f"Parties read from the opening, but no sentence of it names {', '.join(missing)}.",
        )
    return Cell("present", quotes=quotes, searched=list(dict.fromkeys(q.section_id for q in quotes)), value=value)


def read_key_terms(doc: Document, columns: list[Column]) -> list[Cell]:
    """Returns one cell per column of the built-in key terms (`Column.term`) for `doc` (see the module
    docstring); a column that is not a key term gets ``not_found``."""
    reader = _Reader(doc)
    done: dict[str, Cell] = {}

    def get(term: str) -> Cell:
        if term not in done:
            done[term] = _READERS[term](reader, get) if term in _READERS else Cell("not_found")
        return done[term]

    return [get(c.term) if c.term else Cell("not_found") for c in columns]


_READERS: dict[str, Callable[[_Reader, Callable[[str], Cell]], Cell]] = {
    "agreement_date": lambda r, get: _agreement_date(r),
    "effective_date": lambda r, get: _effective_date(r, get("agreement_date")),
    "initial_term": lambda r, get: _initial_term(r),
    "expiration_date": _expiration,
    "auto_renewal": lambda r, get: _auto_renewal(r),
    "renewal_term": lambda r, get: _renewal_term(r),
    "notice_period": lambda r, get: _notice_period(r),
    "notice_deadline": _notice_deadline,
    "governing_law": lambda r, get: _governing_law(r),
    "venue": lambda r, get: _venue(r),
    "liability_cap": lambda r, get: _liability_cap(r),
    "termination_for_convenience": lambda r, get: _termination_for_convenience(r),
    "document_title": lambda r, get: _title(r),
    "parties": lambda r, get: _parties(r),
}
