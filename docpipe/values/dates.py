"""Dates as contracts write them, read to ISO form, and the calendar arithmetic later derivations need.

`find_dates` reads every form a contract uses for a date: "the 21st day of June, 1999", "this 21 day of June
1999", "the thirtieth (30th) day of the month of January, 2012", "June 21, 1999", "Dec. 31, 2006", "21 June
1999", "05-Sep-2019", "6/21/99", "06/21/1999", "2019-05-08", "21.06.1999", "June 1999", and the blanks of a form
not yet signed: "this ___ day of June, 1999" ("1999-06"), "____________, 2020" and "[*], 2020" ("2020").

What it leaves alone: a year by itself ("the Securities Act of 1933"), a month and day with no year ("March
10"), section numbers ("10.1.2", "Section 6/21"), phone numbers, amounts ("$1,999"), page footers ("Page 2 of
15") and days the calendar does not have (February 30).

Rules a reader should know:

- Normalized form is ISO, "YYYY-MM-DD", or "YYYY-MM" / "YYYY" when the words give no more; display is the same.
- Four-digit years run from 1900 to 2099.
- Two-digit years pivot as `time.strptime("%y")` does (POSIX): 00-68 are 2000-2068, 69-99 are 1969-1999. The
  contracts of the public record (EDGAR starts in 1993) and the terms they run to, into the 2040s and 2060s,
  fall on the right side of it, and it is the rule Python and the C library already apply.
- Numeric dates with slashes or dashes are month first ("6/7/99" is June 7), the American order of most
  contracts in English; when the first number cannot be a month ("18/9/2008") they are day first. Dotted dates
  ("21.06.1999") are day first, as in the European contracts that write them. Dashes with a two-digit year
  ("3-14-18") are a date only after a "Date:" label: elsewhere they are as likely a part number.
- "perpetual", "in perpetuity" and "until terminated" read as the date "perpetual" (an agreement with no end)
  unless `perpetual=False`.

Only the standard library loads with this module, and its patterns compile on first use; `dateutil`'s
`relativedelta` loads on the first call to `add_duration`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from itertools import accumulate

from docpipe.values.kinds import Value
from docpipe.values.numbers import ORDINAL, LazyPattern, any_case, read_ordinal

__all__ = ["MONTHS", "PERPETUAL", "add_duration", "find_dates", "parse_date", "subtract_days"]

#: The normalized date of an agreement with no end.
PERPETUAL = "perpetual"

# dateutil.parser.parserinfo holds these same names, but importing the parser costs ~70 ms; the regex needs
# them as an alternation anyway.
#: Month names and their abbreviations, lower case, to the month's number.
MONTHS = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = rf"\b(?P<month>{any_case(MONTHS)})\.?(?![A-Za-z])"
_YEAR4 = r"(?P<year>(?:19|20)\d{2})(?!\d)"
_YEAR = r"(?P<year>(?:19|20)\d{2}|\d{2})(?!\d)"
_S = r"[ \t\r\n\xa0]{1,12}"  # the space between words, line breaks and the padding of extracted PDFs included
_S0 = r"[ \t\r\n\xa0]{0,12}"
_COMMA = rf"{_S0},?{_S0}"
_DAY = rf"(?P<day>{ORDINAL})"
_OF = rf"(?:{any_case(['of'])}){_S}"
_DAY_WORD = rf"(?:{_S}(?:{any_case(['day'])})(?![A-Za-z]))?(?:{_S}(?:{any_case(['of the month of', 'of'])}))?"
# "this 20th day of Friday, March 2020": a weekday written between the day and its month.
_WEEKDAY = (
    rf"(?:{any_case(['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'])})(?![A-Za-z])"
)
# A blank left for the date: "___", "[*]", "[ ]", "[●]", "[__]"; never after "$" (a blank amount). Each opens on
# its literal character and looks back after it, so the engine can skip ahead to "_" and "[".
_BLANK = r"(?:_(?<![_$]_)_+(?!_)|\[(?<!\$\[)[^\]\n]{0,6}\])"
_YEAR_BLANK = r"(?:_{1,12}|\[[^\]\n]{0,6}\])"
# A figure opening a date may not continue a number, a word or a path: "10.1.2", "A1/2/99", "$1,999".
_FIRST = r"\d(?<![\w/.,$-]\d)"

_FORMS: list[tuple[str, str]] = [
    # One pass for the forms a month opens, the longest first:
    # June 21, 1999 / June 21st, 1999 / Dec. 31, 2006 / June 21 1999; June __, 2020; June 1999 / June, 1999
    (
        "month_first",
        rf"{_MONTH}(?:{_S0}{_DAY}{_COMMA}(?:{_OF})?{_YEAR4}"
        rf"|{_S0}(?P<blank>{_BLANK}){_COMMA}(?P<blank_year>(?:19|20)\d{{2}})(?!\d)"
        rf"|{_COMMA}(?:{_OF})?(?P<month_year>(?:19|20)\d{{2}})(?!\d))",
    ),
    # the 21st day of June, 1999 / 21 June 1999 / the 20th day of Friday, March 2020 / the thirtieth (30th) day of the month of January, 2012
    (
        "day_month_year",
        rf"{_DAY}{_DAY_WORD}{_COMMA}(?:{_WEEKDAY}{_COMMA})?{_MONTH}{_COMMA}(?:(?:{any_case(['in the year'])}){_S}|{_OF})?{_YEAR4}",
    ),
    # 05-Sep-2019 / 5-Sep-19
    ("day_mon_year", rf"(?P<day>{_FIRST}\d?)-{_MONTH}-{_YEAR}(?![\w-])"),
    # 2019-05-08 / 2019/05/08
    (
        "iso",
        rf"(?P<year>{_FIRST}\d{{3}})(?P<sep>[-/])(?P<month>\d{{1,2}})(?P=sep)(?P<day>\d{{1,2}})(?![\w/-]|\.\d)",
    ),
    # 6/21/99 / 06/21/1999 / 6-21-1999 (dashes with four-digit years only, so "555-12-12" stays a number)
    ("numeric", rf"(?P<a>{_FIRST}\d?)(?P<sep>[/-])(?P<b>\d{{1,2}})(?P=sep){_YEAR}(?![\w/]|-\d|\.\d)"),
    # 21.06.1999: day first, four-digit year only (a section "10.1.20" is not a date)
    ("dotted", rf"(?P<day>{_FIRST}\d?)\.(?P<month>\d{{1,2}})\.{_YEAR4}(?!\.?\d)"),
    # this ___ day of June, 1999 / [*] June 2020: the month and year are all there is
    ("blank_day", rf"{_BLANK}{_DAY_WORD}{_COMMA}{_MONTH}{_COMMA}(?:{_OF})?{_YEAR4}"),
    # []/[]/2006 / __/__/2020
    ("blank_numeric", rf"{_YEAR_BLANK}/{_YEAR_BLANK}/{_YEAR4}"),
    # ____________, 2020 / [*], 2020 / as of _______ 2020
    ("blank_year", rf"{_BLANK}{_COMMA}{_YEAR4}"),
    # "dated as of , 2006": the blank of a form, lost when the filing was turned into text (see _elided)
    ("elided_blank", rf",[ \t\xa0]{{0,3}}{_YEAR4}"),
    # perpetual / in perpetuity / until terminated
    (
        "perpetual",
        rf"\b(?:{any_case(['in perpetuity', 'perpetually', 'perpetual', 'until terminated', 'until it is terminated', 'until this agreement is terminated', 'until this Agreement is terminated'])})(?![A-Za-z])",
    ),
]
# Words after which a figure numbers something: "Page 2   May 2004" is a footer, not the 2nd of May.
_LABEL = LazyPattern(
    r"(?<![A-Za-z])(?:page|pages|pg|pp?|section|sections|sec|§|article|clause|exhibit|schedule|annex|appendix|"
    r"no|nos|number|item|rule|paragraph|para|part|chapter|form)\.?[ \t\xa0]{0,12}$",
    re.IGNORECASE,
)
# The label of a date's blank on a signature page: "Date: 3-14-18", "Dated:".
_DATE_LABEL = LazyPattern(r"(?<![A-Za-z])dated?[ \t\xa0]*:[ \t\xa0]*$", re.IGNORECASE)
# What may stand before an elided blank: the start of a line, or a word that asks for a date.
_ELIDED_AFTER = LazyPattern(
    r"(?:^|\n)[ \t\xa0]*$|(?<![A-Za-z])(?:dated|of|on|effective)[ \t\xa0]{1,12}$", re.IGNORECASE
)
_LEADING_FIGURE = frozenset({"day_month_year", "day_mon_year", "numeric", "dotted"})
_FULL_DATES = frozenset({"month_first", "day_month_year", "day_mon_year", "iso", "dotted"})
_PATTERNS = [(name, LazyPattern(pattern)) for name, pattern in _FORMS]


def find_dates(text: str, *, perpetual: bool = True) -> list[Value]:
    """Every date written in `text`, in order, as `Value`s of kind "date" with offsets into `text` (the forms
    and rules are in the module docstring). Where two readings overlap, the longer wins ("June 21, 1999" is one
    date, not also "1999")."""
    found: list[tuple[int, int, str]] = []  # start, end, normalized
    invalid: list[tuple[int, int]] = []  # full dates the calendar does not have: "29 February 2019"
    for name, pattern in _PATTERNS:
        if name == "perpetual" and not perpetual:
            continue
        read = _READERS[name]
        for match in pattern.finditer(text):
            if name in _LEADING_FIGURE and _labelled(match):
                continue
            if name == "elided_blank" and not _elided(match):
                continue
            normalized = read(match)
            if normalized is not None:
                found.append((match.start(), match.end(), normalized))
            elif name in _FULL_DATES:
                invalid.append(match.span())
    # "29 February 2019" is no date at all, not the month "2019-02" its last words would read as by themselves.
    found = _outside(found, invalid)
    return [
        Value("date", normalized, normalized, text[start:end], start, end)
        for start, end, normalized in _without_overlaps(found)
    ]


def parse_date(text: str) -> Value | None:
    """The date `text` is, when it is one date expression ("June 21, 1999", "6/21/99", "perpetual"), give or
    take surrounding spaces, quotes and punctuation; None when it holds no date or more than that."""
    core = text.strip().strip("\"'“”‘’.,;:()[] \t\r\n")
    if not core:
        return None
    offset = text.find(core)
    for value in find_dates(core)[:1]:
        if value.start == 0 and value.end == len(core):
            return Value("date", value.normalized, value.display, value.as_written, offset, offset + len(core))
    # "[*], 2020" loses its bracket to the strip above: try the text as it is.
    whole = find_dates(text)
    if len(whole) == 1 and not text[: whole[0].start].strip() and not text[whole[0].end :].strip(" .;:\t\r\n"):
        return whole[0]
    return None


def add_duration(iso: str, count: int, unit: str) -> str:
    """`iso` ("YYYY-MM-DD") moved by `count` units, calendar-correct; negative counts go back. Units are those of
    a duration's normalized form, "year", "month", "week", "day", "business_day" (plurals too): "2014-05-08" + 5
    years is "2019-05-08"; a day past a month's end becomes its last day ("2020-02-29" + 1 year is "2021-02-28",
    "2020-01-31" + 1 month is "2020-02-29"); business days skip Saturdays and Sundays (no public holidays)."""
    start = date.fromisoformat(iso)
    unit = unit.lower().replace(" ", "_").removesuffix("s")
    if unit == "business_day":
        return _add_weekdays(start, count).isoformat()
    if unit not in ("year", "month", "week", "day"):
        raise ValueError(f"unknown unit {unit!r}: use year, month, week, day or business_day")
    from dateutil.relativedelta import relativedelta

    result: date = start + relativedelta(**{f"{unit}s": count})
    return result.isoformat()


def subtract_days(iso: str, days: int) -> str:
    """`iso` ("YYYY-MM-DD") less `days` calendar days: the last day to give a notice due `days` before a date."""
    return (date.fromisoformat(iso) - timedelta(days=days)).isoformat()


def _add_weekdays(start: date, count: int) -> date:
    step = timedelta(days=1 if count >= 0 else -1)
    day, left = start, abs(count)
    while left:
        day += step
        if day.weekday() < 5:
            left -= 1
    return day


def _without_overlaps(found: list[tuple[int, int, str]]) -> Iterator[tuple[int, int, str]]:
    # Longest first at each start, then keep what does not overlap what is kept.
    kept: list[tuple[int, int, str]] = []
    for item in sorted(found, key=lambda f: (f[0], -(f[1] - f[0]))):
        if kept and item[0] < kept[-1][1]:
            continue
        kept.append(item)
    return iter(kept)


def _outside(found: list[tuple[int, int, str]], spans: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """The items of `found` that no span of `spans` contains (sorted and bisected: a megabyte of invalid dates
    must not cost the square of their number)."""
    if not spans:
        return found
    spans.sort()
    starts = [start for start, _ in spans]
    reach = list(accumulate((end for _, end in spans), max))  # the furthest end of the spans starting so far
    kept = []
    for item in found:
        index = bisect_right(starts, item[0])
        if not (index and reach[index - 1] >= item[1]):
            kept.append(item)
    return kept


def _before(match: re.Match[str], chars: int) -> str:
    return match.string[max(0, match.start() - chars) : match.start()]


def _labelled(match: re.Match[str]) -> bool:
    """True when the figure that opens `match` is a page, section or item number ("Page 2  May 2004")."""
    before = match.string[max(0, match.start() - 24) : match.start()]
    return _LABEL.search(before) is not None


def _elided(match: re.Match[str]) -> bool:
    """True when the ", 2006" of `match` stands where a form's blank was: "dated as of , 2006", a line's start."""
    return _ELIDED_AFTER.search(match.string, max(0, match.start() - 40), match.start()) is not None


def _year(digits: str) -> int:
    year = int(digits)
    if len(digits) == 2:
        return 2000 + year if year <= 68 else 1900 + year
    return year


def _iso(year: int, month: int | None = None, day: int | None = None) -> str | None:
    if not 1900 <= year <= 2099:
        return None
    if month is None:
        return f"{year:04d}"
    if not 1 <= month <= 12:
        return None
    if day is None:
        return f"{year:04d}-{month:02d}"
    try:
        return date(year, month, day).isoformat()
    except ValueError:  # February 30, June 31
        return None


def _month(match: re.Match[str]) -> int:
    return MONTHS[match.group("month").lower()]


def _day(match: re.Match[str]) -> int | None:
    return read_ordinal(match.group("day"))


def _read_month_first(match: re.Match[str]) -> str | None:
    year = match.group("blank_year") or match.group("month_year")
    if year is not None:
        return _iso(_year(year), _month(match))
    return _read_named_day(match)


def _read_named_day(match: re.Match[str]) -> str | None:
    day = _day(match)
    return _iso(_year(match.group("year")), _month(match), day) if day is not None else None


def _read_numeric_month(match: re.Match[str]) -> str | None:
    return _iso(_year(match.group("year")), int(match.group("month")), int(match.group("day")))


def _read_numeric(match: re.Match[str]) -> str | None:
    if match.group("sep") == "-" and len(match.group("year")) == 2 and not _DATE_LABEL.search(_before(match, 12)):
        return None  # "12-12-12" is as likely a part number as a date; after "Date:" it is a date
    first, second = int(match.group("a")), int(match.group("b"))
    month, day = (first, second) if first <= 12 else (second, first)
    return _iso(_year(match.group("year")), month, day)


def _read_month_year(match: re.Match[str]) -> str | None:
    return _iso(_year(match.group("year")), _month(match))


def _read_year(match: re.Match[str]) -> str | None:
    return _iso(_year(match.group("year")))


_READERS: dict[str, Callable[[re.Match[str]], str | None]] = {
    "month_first": _read_month_first,
    "day_month_year": _read_named_day,
    "day_mon_year": _read_named_day,
    "iso": _read_numeric_month,
    "numeric": _read_numeric,
    "dotted": _read_numeric_month,
    "blank_day": _read_month_year,
    "blank_numeric": _read_year,
    "blank_year": _read_year,
    "elided_blank": _read_year,
    "perpetual": lambda match: PERPETUAL,
}
