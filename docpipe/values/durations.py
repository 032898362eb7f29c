"""Durations as contracts write them: "five (5) years", "ninety (90) days", "12 months", "thirty (30) calendar
days", "sixty (60) business days", "one-year", "18-month", "a period of one (1) year", "successive one (1) year
periods", "6 weeks", "perpetual" / "in perpetuity".

Normalized form: ``{"days": 1825, "count": 5, "unit": "year"}``; ``{"perpetual": True}`` for an agreement with no
end. Units are "year", "month", "week", "day" and "business_day" ("business days", "working days"). `days` is a
length to sort and compare by, not calendar arithmetic: a year is 365 days, a month 30, a week 7, and business
days count as days (a notice of "ten (10) business days" sorts with ten days). For calendar-correct dates use
`docpipe.values.dates.add_duration` with `count` and `unit`.

Display is "5 years", "90 days", "60 business days", "perpetual". When words and figure disagree ("thirty (60)
days"), the figure counts and the display says so: "60 days (words say 30)".

What is not a duration: ordinals ("the 20th day", "the twelfth calendar day"), "day-to-day", "Contract Year",
hours and minutes.
"""

from __future__ import annotations

import re

from docpipe.values.dates import MONTHS
from docpipe.values.kinds import Value
from docpipe.values.numbers import LazyPattern, NumberSpan, any_case, format_number, scan_numbers, words_disagree

__all__ = ["DAYS_PER_UNIT", "find_durations", "parse_duration"]

#: How many days one unit counts for in the normalized `days`.
DAYS_PER_UNIT = {"year": 365, "month": 30, "week": 7, "day": 1, "business_day": 1}

_BUSINESS = frozenset({"business", "working", "banking"})
_SEP = r"(?:[ \t]{0,3}-\s{0,3}|\s{1,12})"  # "30-day", "30- days", and "30-\ndays" (a PDF line break)
_S = r"\s{1,12}"
# What follows a number to make it a length: "years", "-month", " calendar days", " Business Days".
_UNIT_AFTER = LazyPattern(
    rf"{_SEP}?(?:(?P<qualifier>{any_case(['calendar', 'business', 'working', 'banking', 'consecutive', 'full', 'successive', 'contract'])}){_SEP})?"
    rf"(?P<unit>{any_case(['years', 'year', 'months', 'month', 'weeks', 'week', 'days', 'day'])})(?![A-Za-z])"
    r"(?![ \t]{0,3}-[ \t]{0,3}to[ \t]{0,3}-)"  # "day-to-day" is a manner, not a length
    # "this 31 day of July 2019" is a date ("30 days of June" is a length)
    rf"(?:(?<=[Ss])|(?!{_S}(?:{any_case(['of the month of', 'of'])}){_S}(?:{any_case(MONTHS)})(?![A-Za-z])))"
)
# "Page 8 of 80  Month(s) that": the 80 ends a page footer
_FOOTER_BEFORE = LazyPattern(r"(?<![A-Za-z])(?:page|pg\.?)\s{0,3}\d{1,4}\s{1,3}of\s{1,3}\Z", re.IGNORECASE)
_YEAR_LABEL = LazyPattern(r"(?:19|20)\d{2}")
_PERPETUAL = LazyPattern(rf"\b(?:{any_case(['in perpetuity', 'perpetually', 'perpetual'])})(?![A-Za-z])")


def find_durations(text: str) -> list[Value]:
    """Every duration written in `text`, in order, as `Value`s of kind "duration" whose `as_written` is the
    number and unit as written ("five (5) years") and `start`/`end` their offsets in `text`."""
    found = []
    for number in scan_numbers(text):
        unit = _UNIT_AFTER.match(text, number.end)
        if unit is not None and not _FOOTER_BEFORE.search(text, max(0, number.start - 20), number.start):
            value = _read(text, number, unit)
            if value is not None:
                found.append(value)
    found += [
        Value("duration", {"perpetual": True}, "perpetual", m.group(0), m.start(), m.end())
        for m in _PERPETUAL.finditer(text)
    ]
    return sorted(found, key=lambda v: v.start)


def parse_duration(text: str) -> Value | None:
    """The duration `text` is when it is one ("5 years", "thirty (30) days", "perpetual"), give or take
    surrounding spaces and punctuation; None otherwise."""
    core = text.strip().strip("\"'“”‘’.,;:()[] \t\r\n")
    found = find_durations(core)
    if len(found) == 1 and found[0].start == 0 and found[0].end == len(core):
        offset = text.find(core)
        v = found[0]
        return Value(v.kind, v.normalized, v.display, v.as_written, offset + v.start, offset + v.end)
    return None


def _read(text: str, number: NumberSpan, after: re.Match[str]) -> Value | None:
    reading = number.reading
    if reading.value <= 0:
        return None
    written = text[number.start : after.end()]
    unit = after.group("unit").lower().rstrip("s")
    if unit == "year" and _YEAR_LABEL.fullmatch(text[number.start : number.end]):
        return None  # "the 2019 calendar year" names a year; it does not last 2019 of them
    if unit == "day" and (after.group("qualifier") or "").lower() in _BUSINESS:
        unit = "business_day"
    count: int | float = int(reading.value) if reading.value == int(reading.value) else reading.value
    days = round(count * DAYS_PER_UNIT[unit])
    noun = unit.replace("_", " ")
    display = f"{format_number(count)} {noun}{'' if count == 1 else 's'}{words_disagree(reading)}"
    return Value("duration", {"days": days, "count": count, "unit": unit}, display, written, number.start, after.end())
