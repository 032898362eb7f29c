"""Finds the headings of a contract's text: those that continue the document's own numbering (ARTICLE 5 /
5. / 5.1 / Exhibit B ...) and unnumbered ones (TERMINATION, Governing Law) where nothing is numbered.

Headings are found line by line; numbered headings must continue the numbering seen so far, which keeps
wrapped lines such as "2.5 million units ..." or cross-references ("Section 7.3.") from opening sections.
Besides "ARTICLE 5" / "5." / "5.1", a document may number its clauses "Section 5.", "§ 5", "V.", "5)",
"5.TITLE" or "5    TITLE"; such a form counts where the document numbers headings 1 and 2 with it.
A sub-clause run into the line of the one before ("... Research Program. 4.2 Termination by Anixa. This ...")
starts a line of its own. A numbered heading is titled by its number and title ("4.2 Termination by Anixa"),
or by its number alone when a sentence follows the number ("6." for "6. (a) if either party should ...").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

__all__ = ["Heading", "find_headings", "roman_value"]

_ANNEX = re.compile(
    r"^(?:EXHIBIT|SCHEDULE|ANNEX|APPENDIX|ATTACHMENT|ADDENDUM|Exhibit|Schedule|Annex|Appendix|Attachment)"
    r"(?:\s+(?:[A-Z]{1,3}|[0-9IVX]+(?:[.-][0-9A-Z]+)*))?\b(?![ ]+(?:to|of|hereto|attached)\b)"
)
# Numbers spelled out ("SECTION TWENTY-ONE. HEADINGS"), up to the ninety-nines no contract reaches.
_UNITS = "ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE".split()
_TEENS = "TEN ELEVEN TWELVE THIRTEEN FOURTEEN FIFTEEN SIXTEEN SEVENTEEN EIGHTEEN NINETEEN".split()
_WORD_NUMBERS = {word: value for value, word in enumerate(_UNITS + _TEENS, 1)} | {
    f"{tens}{f'-{unit}' if unit else ''}": 10 * (index + 2) + value
    for index, tens in enumerate(["TWENTY", "THIRTY", "FORTY"])
    for value, unit in enumerate(["", *_UNITS])
}
_WORD_NUMBER = "|".join(sorted(_WORD_NUMBERS, key=len, reverse=True))
_ARTICLE = re.compile(rf"^(?:ARTICLE|Article|SECTION)\s+([IVXLC]+|\d{{1,2}}|(?i:{_WORD_NUMBER}))\b(?!\.\d)")
_TOP = re.compile(r"^(\d{1,2})\.\s+(?=[A-Z(\"“])")
_SUB = re.compile(r"^(?:Section\s+|SECTION\s+)?(\d{1,2})\.(\d{1,2})\b(?!\.\d)\.?(?!\()\s*(?=\S)")
# Where a sub-clause runs on from the sentence before it on the same line: after the sentence's end, a bare
# "4.2" followed by a capital (a cross-reference "4.3 and 4.4 survive" goes on in lowercase).
_RUN_ON = re.compile(r"(?<=[.;:])[^\S\n]+(?=\d{1,2}\.\d{1,2}\.?[^\S\n]+[A-Z\"“])")
# A clause without a title that opens with a defined term: '1.1 "Affiliate" means ...'.
_DEFINED_TERM = re.compile(r"^[\"“][^\"”]{1,60}[\"”]")
_REFERENCES = re.compile(r"\b(?:SECTIONS?|Sections?|ARTICLES?|Articles?)\s+\d")
# Further top-level forms, each used by a document throughout or not at all: "Section 1. Definitions",
# "§ 1 Term", "II. Affiliate Program", "1) Duties", "2.KALLO PROGRAM", "1    TERM". Mixed-case "Section 7"
# also starts wrapped cross-references, "(ii)" and "1)" also number list items, "I." also letters them: a
# form counts only where the document numbers at least two headings with it, and each line must carry a
# title ("Section 4." alone ends a sentence).
_FORMS = {
    "section": re.compile(r"^Section\s+(\d{1,2})(?:\.(?!\d)|:|\s+[-–—])\s*(?=\S)"),
    "paragraph": re.compile(r"^§\s*(\d{1,2})\.?\s+(?=[A-Za-z])"),
    "roman": re.compile(r"^([IVX]{1,5})\.\s+(?=[A-Z])"),
    "parenthesis": re.compile(r"^(\d{1,2})\)\s+(?=[A-Z\"“])"),
    "unspaced": re.compile(r"^(\d{1,2})\.(?=[A-Z][A-Za-z])"),
    "spaced": re.compile(r"^(\d{1,2})\s{2,}(?=[A-Z])"),
}
# Forms that stand in for "1. Title": a document numbered "1. Title" keeps that as its top level.
_LOOSE_FORMS = ("parenthesis", "unspaced", "spaced")
_TOC_ENTRY = re.compile(r"^\S+(?:\s+\S+)?\s+[A-Za-z][^.]*?(?:\s*\.{2,}\s*|\s+)\d{1,3}$")
_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
_MAX_HEADING_LINE = 200


def roman_value(value: str) -> int:
    """Returns the value of a Roman numeral in capitals ("IV" -> 4)."""
    total = 0
    for char, following in zip(value, value[1:] + " "):
        number = _ROMAN[char]
        total += -number if following != " " and _ROMAN[following] > number else number
    return total


def _looks_like_annex_title(line: str, id_end: int) -> bool:
    """Returns True for "EXHIBIT A STATEMENT OF WORK", "Exhibit B - Form of Note", "Schedule 1";
    False for body text that wraps onto a line starting "Schedule 1, as amended ..."."""
    if len(line) > 100:
        return False
    rest = line[id_end:].strip()
    letters = [c for c in line if c.isalpha()]
    return not rest or rest[0] in "-–—:.(" or all(c.isupper() for c in letters)


def _title(line: str) -> str:
    """Returns a short heading for a heading line: up to the end of its title sentence."""
    line = " ".join(line.split())
    match = re.match(r"^(.{3,90}?(?<!\bNo)(?<!\bNO)[.:])(?:\s|$)", line)
    if match and not re.fullmatch(r"[\w\s]*\d+\.(\d+\.?)?", match.group(1)):
        return match.group(1).rstrip(".:")
    return line if len(line) <= 90 else line[:87].rstrip() + "..."


@dataclass(slots=True)
class Heading:
    """A heading of a document's text: where its line starts, its level and the title a citation shows.

    >>> [h.title for h in find_headings("1. Term. It runs.\\n1.1 Start. Now.\\n1.2 (a) if either party should stop")]
    ['1. Term', '1.1 Start', '1.2']
    """

    offset: int
    level: int  # 0 annex, 1 article / top-level number, 2 numbered subsection
    title: str
    numbered: bool = False  # found by the document's own numbering (an annex, an article, a numbered clause)


def _table_of_contents(lines: list[str]) -> set[int]:
    """Returns the indexes of lines that read as table-of-contents entries: a title ending in a page
    number, among at least two more such lines close by (a lone wrapped line "within 30" is not one)."""
    candidates = [i for i, raw in enumerate(lines) if len(raw.strip()) <= 120 and _TOC_ENTRY.search(raw.strip())]
    marked = set()
    for position, index in enumerate(candidates):
        near = [j for j in candidates[max(0, position - 3) : position + 4] if j != index and abs(j - index) <= 4]
        if len(near) >= 2:
            marked.add(index)
    return marked


def _numbered_form(line: str) -> tuple[str, int, int] | None:
    """Returns (form, number, end of the number) for a line numbered in one of `_FORMS` and carrying a
    title, else None."""
    for form, pattern in _FORMS.items():
        if not (match := pattern.match(line)):
            continue
        value = match.group(1)
        if form == "roman" and not re.fullmatch(r"X{0,3}(?:IX|IV|V?I{0,3})", value):
            return None
        rest = line[match.end() :]
        if form == "spaced":
            title = _caps_heading(" ".join(rest.split())) or _title_case_heading(rest)
            return (form, int(value), match.end()) if title else None
        # "§" numbers nothing but clauses, whose titles may be in sentence case ("§ 6 Limitation of liability").
        if not _reads_as_numbered_title(rest, capitalised=form != "paragraph"):
            return None
        return form, roman_value(value) if form == "roman" else int(value), match.end()
    return None


def _reads_as_numbered_title(rest: str, *, capitalised: bool = True) -> bool:
    """True when the text after a number starts with a title ("Duties of Bravatek", "Term. This ...",
    "KALLO SALES AGENT PROGRAM"), not with a sentence ("The Company shall ...")."""
    segment = re.split(r"[.:;](?:\s|$)", rest, maxsplit=1)[0]
    words = re.findall(r"[A-Za-z][A-Za-z'’]*", segment)
    if not words or len(segment.split()) > 12 or _VERBS.intersection(w.lower() for w in words):
        return False
    return not capitalised or sum(w[0].isupper() for w in words) * 2 >= len(words)


def _reads_as_clause_title(rest: str) -> bool:
    """True when a clause number is followed by a title: "Term. This ...", "TERMINATION", "Limitation of
    liability. Neither ..."; False for a sentence ("(a) if either party should make ...")."""
    rest = rest.replace("\u037e", ";")  # a Greek question mark that PDF text gives for a semicolon
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'’]*", rest[:90]) if w not in _SMALL_WORDS]
    if len(rest) > 60 and not re.search(r"[.:;](?:\s|$)", rest[:90]) and not all(w[0].isupper() for w in words):
        return False  # a sentence wrapped at the end of the line ("ELEPHANT TALK wishes to become a full ...")
    if _reads_as_numbered_title(rest):
        return True
    # A title in sentence case is short and ends as a sentence of its own.
    title = re.match(r"([A-Z][^.:;]*)[.:](?:\s|$)", rest)
    return title is not None and len(title.group(1).split()) <= 5 and not _VERBS.intersection(title.group(1).split())


def _clause_title(line: str, number_end: int) -> str:
    """Returns the heading of a numbered clause: its number and title ("4.2 Termination by Anixa"), its number
    and defined term ('1.1 "Affiliate"'), or its number alone where a sentence follows it ("6." for "6. (a) if
    either party should make ...", "14.1" for "14.1 STAAR or Distributor shall have the right ...")."""
    rest = " ".join(line[number_end:].split()).lstrip(".:–—- ")
    number = " ".join(line[:number_end].split())
    if not rest:
        return number
    if _reads_as_clause_title(rest):
        return f"{number} {_title(rest)}"
    if term := _DEFINED_TERM.match(rest):
        return f"{number} {term.group(0)}"
    return number


def _forms_in_use(lines: list[str], toc: set[int]) -> set[str]:
    """Returns the forms of `_FORMS` that number headings 1 and 2 of the document (I and II for roman)."""
    numbers: dict[str, list[int]] = {}
    for index, raw in enumerate(lines):
        line = raw.strip()
        if index in toc or not line:
            continue
        if (match := _TOP.match(line)) and _reads_as_numbered_title(line[match.end() :]):
            numbers.setdefault("top", []).append(int(match.group(1)))
        elif match := _ARTICLE.match(line):
            numbers.setdefault("article", []).append(0)
        elif found := _numbered_form(line):
            numbers.setdefault(found[0], []).append(found[1])
    in_use = {form for form, seen in numbers.items() if {1, 2} <= set(seen) and form in _FORMS}
    # "1. Title" stays the top level where the document uses it more than a looser form (lists are looser).
    top = numbers.get("top", [])
    in_use -= {form for form in _LOOSE_FORMS if {1, 2} <= set(top) and len(numbers.get(form, [])) <= len(top)}
    # Roman numerals that start again at I, or under ARTICLEs, number lists ("I. Party B shall ...").
    if numbers.get("roman", []).count(1) > 1 or "article" in numbers:
        in_use.discard("roman")
    return in_use


def _numbered_title(line: str, number_end: int) -> str:
    """Returns "Section 1. Definitions" / "§ 2 Products" / "2. KALLO PROGRAM" for a heading numbered in one
    of `_FORMS` (or spelled out): the number as written, then the title sentence."""
    rest = line[number_end:]
    punctuation = re.match(r"\s*([.:])?\s*", rest)
    assert punctuation is not None
    number = line[:number_end].strip() + (punctuation.group(1) or "")
    return f"{number} {_title(rest[punctuation.end() :])}"


def _numbered_headings(lines: list[str]) -> list[tuple[int, Heading]]:
    """Returns (line index, heading) for the lines that continue the document's own numbering."""
    headings: list[tuple[int, Heading]] = []
    major = minor = 0
    offset = 0
    paragraph = 0  # "§ 2" numbering, which restarts under each top-level heading of another form
    paragraph_on_top = False
    part = 0  # "II." parts
    toc = _table_of_contents(lines)
    forms = _forms_in_use(lines, toc)
    for number, raw in enumerate(lines):
        line = raw.strip()
        line_start = offset + len(raw) - len(raw.lstrip())
        offset += len(raw)
        found = _numbered_form(line) if forms and line else None
        if found and found[0] not in forms:
            found = None
        # A long line is a paragraph unless it starts with its heading ("Section 4. Notices. Any notice ...").
        if not line or len(line) > _MAX_HEADING_LINE and not (_SUB.match(line) or _TOP.match(line) or found):
            continue
        if number in toc:
            # "20.2 Implementation Of Plan ..... 39": a table of contents entry, not the clause itself.
            continue
        if (match := _ANNEX.match(line)) and _looks_like_annex_title(line, match.end()):
            # An SEC exhibit stamp ("Exhibit 10.1") above the title is not an annex of the contract.
            if not headings and line_start < 300:
                continue
            headings.append((number, Heading(line_start, 0, _title(line), numbered=True)))
            major = minor = paragraph = part = 0
            paragraph_on_top = False
            continue
        if match := _ARTICLE.match(line):
            # "Article 3 below ..." or "ARTICLE 10 (Confidentiality), ARTICLE 11 ..." is a wrapped reference.
            rest = line[match.end() :].strip()
            if _REFERENCES.search(rest) or line.startswith("Article") and rest[:1].islower():
                continue
            value = match.group(1)
            article = int(value) if value.isdigit() else _WORD_NUMBERS.get(value.upper()) or roman_value(value)
            if major < article <= major + 3 or article == 1:
                spelled = value.upper() in _WORD_NUMBERS  # "SECTION ONE. DEFINITIONS"
                title = _numbered_title(line, match.end()) if spelled else _clause_title(line, match.end())
                headings.append((number, Heading(line_start, 1, title, numbered=True)))
                major, minor, paragraph, paragraph_on_top = article, 0, 0, False
            continue
        if match := _SUB.match(line):
            a, b = int(match.group(1)), int(match.group(2))
            # "Section 3.4" opens a line of a wrapped reference as often as a clause: a clause has a title.
            rest = line[match.end() :].strip()
            if line[0] == "S" and not (rest and _reads_as_clause_title(rest)):
                continue
            if (a == major and minor < b <= minor + 3) or (major < a <= major + 2 and b <= 2):
                headings.append((number, Heading(line_start, 2, _clause_title(line, match.end()), numbered=True)))
                major, minor = a, b
            continue
        if match := _TOP.match(line):
            top = int(match.group(1))
            if major < top <= major + 2:
                headings.append((number, Heading(line_start, 1, _clause_title(line, match.end()), numbered=True)))
                major, minor, paragraph, paragraph_on_top = top, 0, 0, False
            continue
        if found is None:
            continue
        form, value, number_end = found
        title = _numbered_title(line, number_end)
        if form == "paragraph":
            # Under a top-level heading of another form ("II. Affiliate Program") "§ 1" starts again.
            if paragraph < value <= paragraph + 2:
                level = 2 if (major or part) and not paragraph_on_top else 1
                headings.append((number, Heading(line_start, level, title, numbered=True)))
                paragraph = value
                if level == 1:
                    major, minor, paragraph_on_top = value, 0, True
        elif form == "roman":
            # Parts above the document's own numbering ("I. INTRODUCTION" then "1. Definitions"), counted
            # apart so that numbering goes on across them.
            if part < value <= part + 2:
                headings.append((number, Heading(line_start, 1, title, numbered=True)))
                part, paragraph, paragraph_on_top = value, 0, False
        elif major < value <= major + 2:
            headings.append((number, Heading(line_start, 1, title, numbered=True)))
            major, minor, paragraph, paragraph_on_top = value, 0, 0, False
    return headings


# Unnumbered headings are judged by the line and by its neighbours: a short line standing alone between
# the end of one paragraph and the start of the next, neither in the title block, nor a running header,
# nor part of a signature block.
_SMALL_WORDS = frozenset("a an and as at by for from in into of on or the to with".split())
_VERBS = frozenset("are be been does has have is may must shall should was were will would".split())
_COMPANY = re.compile(
    r"\b(?:INC|INCORPORATED|L\.?L\.?C|CORP|CORPORATION|LTD|LIMITED|CO|COMPANY|L\.?P|L\.?L\.?P|PLC|GMBH|AG|"
    r"B\.?V|N\.?V|S\.?A|N\.?A|S\.?P\.?A|S\.?R\.?L|PTY|BANK|TRUST|HOLDINGS|PARTNERS)\b\.?,?\)?$",
    re.IGNORECASE,
)
# Lines of the opening and of signature pages that read like headings but belong to what surrounds them.
_NOT_HEADINGS = frozenset(
    "AGREEMENT|AGREEMENTS|AMONG|AND|BACKGROUND|BETWEEN|BY|CONFIDENTIAL|CONTENTS|DRAFT|EXECUTION COPY|INDEX|"
    "EXECUTION VERSION|PARTIES|PREAMBLE|RECITALS|SIGNATURES|TABLE OF CONTENTS|WHEREAS|WITNESSETH|WITNESS|"
    "NOW THEREFORE|NOW, THEREFORE|IN WITNESS WHEREOF|SIGNATURE PAGE|SIGNATURE PAGE FOLLOWS|EXHIBITS|SCHEDULES|"
    "AGREED AND ACCEPTED|ACCEPTED AND AGREED|AGREED|ACCEPTED|WITNESSES|NOTARY PUBLIC|ACKNOWLEDGMENT|"
    "ACKNOWLEDGEMENT|DEFINITIONS OF TERMS".split("|")
)
_SIGNATURE_LINE = re.compile(
    r"^(?:By|BY|Name|NAME|Title|TITLE|Its|ITS|Date|DATE|Dated|Per|Signature|SIGNATURE|Signed|SIGNED|Attest|"
    r"ATTEST|Witness|WITNESS)\b\s*:|/s/|_{4,}"
)
# Lines of an address block below a party's name.
_ADDRESS_LINE = re.compile(r"^(?:Attention|ATTENTION|Attn|ATTN|Address|Tel|Telephone|Phone|Fax|Facsimile|E-?mail)\b")
# The contract's own name ("SUPPLY AGREEMENT") above its first clause is its title, not a heading.
_TITLE_WORDS = frozenset("AGREEMENT CONTRACT AMENDMENT ADDENDUM CONDITIONS MEMORANDUM UNDERSTANDING".split())
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?[-–(]?\s*[\dA-Z]{0,2}-?\d{1,3}\s*[-–)]?(?:\s*of\s*\d+)?$", re.IGNORECASE)
_BODY_START = re.compile(r"^[\"“'(A-Z0-9]")
_TERMINAL = tuple(".:;!?)]\"”'")
_BARE_ID = re.compile(r"^[\s.:–—-]*$")


def _caps_heading(line: str) -> str | None:
    """Returns the title of an ALL-CAPS heading line ("GOVERNING LAW.", "REPRESENTATIONS AND WARRANTIES"),
    None for anything else: long or sentence-like lines, party names, amounts, dates and numbers."""
    core = line[:-1].rstrip() if line.endswith((".", ":")) else line
    words = core.split()
    letters = [c for c in core if c.isalpha()]
    if not 1 <= len(words) <= 8 or len(core) > 60 or len(letters) < 3 or any(c.islower() for c in letters):
        return None
    if len(letters) < 0.75 * len(core.replace(" ", "")) or not core[0].isalpha():
        return None
    if sum(len(word) == 1 for word in words) * 2 > len(words):  # "R E C I T A L S"
        return None
    return core if _reads_as_title(core, words) else None


def _title_case_heading(line: str) -> str | None:
    """Returns the title of a Title-Case heading line ("Governing Law.", "Confidentiality"), else None."""
    core = line[:-1].rstrip() if line.endswith((".", ":")) else line
    words = core.split()
    if not 1 <= len(words) <= 6 or len(core) > 50 or not re.fullmatch(r"[A-Za-z][A-Za-z ,&'’-]*", core):
        return None
    if not all(w[0].isupper() or w in _SMALL_WORDS for w in words) or max(len(w) for w in words) < 5:
        return None
    if sum(c.isupper() for c in core) > len(words) + 1:  # "ACME Corp" or "LOGO Inc" are names, not titles
        return None
    return core if _reads_as_title(core, words) else None


def _reads_as_title(core: str, words: list[str]) -> bool:
    # Sentence punctuation inside ("FRANCHISE. GOOD CAUSE ...") or a dangling end ("SAMPLE FORM OF") is
    # wrapped body text; a verb makes it a sentence; "ACME CORP." is a party in a signature block.
    if re.search(r"[;!?]|[.:](?=\s)", core) or core.endswith((",", "-", "&", "(")):
        return False
    lowered = [w.lower().strip(",") for w in words]
    if lowered[-1] in _SMALL_WORDS or _VERBS.intersection(lowered) or _COMPANY.search(core):
        return False
    return core.upper() not in _NOT_HEADINGS


def _is_body(line: str, *, prose: bool = False) -> bool:
    """True for a line that starts a body paragraph: prose with lowercase words, or (unless `prose`) a long
    capitalised sentence such as a disclaimer."""
    if not _BODY_START.match(line) or _SIGNATURE_LINE.match(line):
        return False
    lowercase = sum(word.islower() for word in line.split())
    return lowercase >= 4 if prose else lowercase >= 2 or len(line) > 60


def _bare_number(line: str) -> bool:
    """True for a numbered heading line that carries no title: "ARTICLE 5", "EXHIBIT B", "Schedule 1:"."""
    match = _ARTICLE.match(line) or _ANNEX.match(line)
    return match is not None and _BARE_ID.match(line[match.end() :]) is not None


def _unnumbered_headings(lines: list[str], numbered: list[tuple[int, Heading]]) -> list[Heading]:
    """Returns the numbered headings, titled from an unnumbered line below a bare number ("ARTICLE 5" then
    "TERMINATION"), with the unnumbered headings added where the document has no numbered ones."""
    clean = [" ".join(raw.split()) for raw in lines]
    starts, offset = [], 0
    for raw in lines:
        starts.append(offset + len(raw) - len(raw.lstrip()))
        offset += len(raw)
    by_line = dict(numbered)
    # A line seen on three pages or more is a running header or footer ("CONFIDENTIAL", "Source: ...").
    repeated = {line for line, count in Counter(clean).items() if count >= 3}
    # The title block ends at the first line of prose; an unnumbered line before it is the title.
    opening = next((i for i, line in enumerate(clean) if _is_body(line, prose=True) and len(line) > 40), len(lines))
    first_numbered = min((i for i, h in numbered if h.level > 0), default=len(lines))
    found = [h for _, h in numbered]
    previous: int | None = None
    for index, line in enumerate(clean):
        if not line:
            continue
        before, previous = previous, index
        if index in by_line:
            continue
        if (
            before in by_line
            and _bare_number(clean[before])
            and (title := _caps_heading(line) or _title_case_heading(line))
        ):
            heading = by_line[before]
            heading.title = _title(f"{clean[before].rstrip('.:–—- ')} {title}")
            continue
        if index <= opening or index > first_numbered or line in repeated:
            continue
        title = _caps_heading(line)
        if title is None and not numbered:
            title = _title_case_heading(line)
            if title is not None and not _is_body(_next(clean, index), prose=True):
                continue
        if title is None or not _stands_alone(clean, index, before, repeated, by_line):
            continue
        if title.split()[-1].upper() in _TITLE_WORDS and not any(h.offset < starts[index] for h in found):
            continue
        found.append(Heading(starts[index], 1, title))
    return found


def _next(clean: list[str], index: int) -> str:
    return next((line for line in clean[index + 1 :] if line), "")


def _stands_alone(
    clean: list[str], index: int, before: int | None, repeated: set[str], by_line: dict[int, Heading]
) -> bool:
    """True when line `index` follows the end of a paragraph and a body paragraph follows it."""
    if before is not None and before == index - 1:
        above = clean[before]
        ended = above.endswith(_TERMINAL) or above in repeated or _PAGE_NUMBER.match(above)
        if not ended or _SIGNATURE_LINE.match(above):
            return False
    if any("WITNESS WHEREOF" in line.upper() for line in clean[max(0, index - 12) : index]):
        return False
    following = [i for i in range(index + 1, min(len(clean), index + 12)) if clean[i]][:3]
    if not following or following[0] in by_line or not _is_body(clean[following[0]]):
        return False
    return not any(_SIGNATURE_LINE.match(clean[i]) or _ADDRESS_LINE.match(clean[i]) for i in following)


def _run_on_pieces(raw: str) -> list[str]:
    """Returns a line cut before each sub-clause number that runs on from the sentence before it."""
    cuts = [0, *(match.end() for match in _RUN_ON.finditer(raw)), len(raw)]
    return [raw[start:end] for start, end in zip(cuts, cuts[1:])]


def find_headings(text: str) -> list[Heading]:
    """Returns the headings of `text` in order: those that continue the document's own numbering, and
    unnumbered ones ("TERMINATION", "GOVERNING LAW") where no numbered heading covers that part."""
    lines = [piece for raw in text.splitlines(keepends=True) for piece in _run_on_pieces(raw)]
    numbered = _numbered_headings(lines)
    return sorted(_unnumbered_headings(lines, numbered), key=lambda h: h.offset)
