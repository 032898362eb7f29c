"""The key terms read from one clause each: governing law, courts, the liability cap, termination for
convenience; and from the opening: the title and the parties."""

from __future__ import annotations

import re

from docpipe.cells import Cell
from docpipe.terms.reading import OPENING_CHARS, Reader, Sentence, flat, read_cell
from docpipe.terms.term_clause import NOTICE_WORD
from docpipe.types import Citation
from docpipe.values.kinds import Value
from docpipe.values.read import find_values

__all__ = [
    "governing_law_cell",
    "liability_cap",
    "parties",
    "termination_for_convenience",
    "title",
    "venue",
]

# -- law, courts, cap, termination for convenience -----------------------------------------------------------------

_LAW = re.compile(r"\bgovern\w*|\bconstrued|\binterpreted|\blaws?\s+of\b|\bapplicable\s+law", re.IGNORECASE)
_COURTS = re.compile(r"\bcourts?\b[^.;]{0,200}?\b(?:located|sitting|situated|of|in|for)\b", re.IGNORECASE)
_VENUE = re.compile(r"\bjurisdiction|\bvenue|\bforum", re.IGNORECASE)


def governing_law_cell(reader: Reader) -> Cell:
    from docpipe.values.jurisdictions import governing_law

    ranked = sorted(
        (s for s in reader.sentences if _LAW.search(s.text)),
        key=lambda s: (
            "govern" not in s.title.casefold() and "law" not in s.title.casefold(),
            not re.search(r"\bgovern", s.text, re.I),
        ),
    )
    for sentence in ranked:
        values = governing_law(sentence.text)
        if values:
            return read_cell(reader, "jurisdiction", values[0], sentence, read=governing_law)
    return Cell("not_found", note="No governing-law clause.")


def venue(reader: Reader) -> Cell:
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
            return read_cell(reader, "jurisdiction", shifted, sentence)
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


def liability_cap(reader: Reader) -> Cell:
    for sentence in reader.sentences:
        cap = _CAP.search(sentence.text)
        if not cap:
            continue
        money = [v for v in find_values("money", sentence.text) if v.start >= cap.start()]
        if money:
            return read_cell(reader, "money", money[0], sentence)
        formula = _FORMULA.search(sentence.text, cap.start())
        if formula:
            words = formula.group("formula").strip()
            value = Value(
                "money",
                {"amount": None, "currency": "", "formula": flat(words)},
                flat(words),
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


def termination_for_convenience(reader: Reader) -> Cell:
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
            if NOTICE_WORD.search(sentence.text[v.end : v.end + 60])
            or NOTICE_WORD.search(sentence.text[max(0, v.start - 30) : v.start])
        ]
        parts = ["Yes"]
        if who:
            parts.append(flat(who.group("who")))
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


def title(reader: Reader) -> Cell:
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
                title = flat(line)
                value = Value("text", title, title, line, match.start() - sentence.start, match.end() - sentence.start)
                return Cell(
                    "present",
                    answer=title,
                    quotes=[reader.quote(sentence, value)],
                    searched=[sentence.section.id],
                    value=value,
                )
    return Cell("not_found", note="No title line in the opening.")


def _naming(reader: Reader, name: str) -> Sentence | None:
    """Returns the sentence that names `name` (flattened, case-folded), in the opening first, then anywhere (a
    party read from the signature blocks); or, when a sentence splitter cut the name ("Dr. Gaetano Morello",
    "Michael T. Murray"), the run of up to three sentences of one section that holds it, as one sentence."""
    for sentences in (reader.opening, reader.sentences):
        for size in (1, 2, 3):
            for k in range(len(sentences) - size + 1):
                run = sentences[k : k + size]
                if run[-1].section is not run[0].section:
                    continue
                start, end = run[0].start, run[-1].end
                text = reader.text[start:end]
                if name in flat(text).casefold():
                    return Sentence(start, end, text, run[0].section)
    return None


def parties(reader: Reader) -> Cell:
    from docpipe.values.parties import read_parties

    value = read_parties(reader.text[: reader.opening_end], signed=reader.text)
    if value is None:
        return Cell("not_found", note="No parties named in the opening or the signature blocks.")
    quotes: list[Citation] = []
    missing = []
    signed = False
    for party in value.normalized:
        name = flat(str(party["name"])).casefold()
        sentence = _naming(reader, name)
        if sentence is None:
            missing.append(str(party["name"]))
            continue
        signed = signed or sentence.start >= reader.opening_end
        if all(
            q.section_id != sentence.section.id
            or q.page_start != reader.doc.page_of(sentence.start)
            or name not in flat(q.quote).casefold()
            for q in quotes
        ):
            quotes.append(reader.quote(sentence))
    if missing:
        return Cell(
            "uncertain",
            quotes=quotes,
            note=f"Parties read from the contract, but no sentence of it names {', '.join(missing)}.",
        )
    return Cell(
        "present",
        quotes=quotes,
        searched=list(dict.fromkeys(q.section_id for q in quotes)),
        value=value,
        note="Read from the opening and the signature blocks." if signed else "",
    )
