"""Durations as contracts write them (`docpipe.values.durations`): counts in words and figures, units and their
qualifiers, lengths with no end, words that disagree with their figure, and hostile input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pypdf
import pytest

from docpipe.values.durations import find_durations, parse_duration
from docpipe.values.read import find_values


@pytest.mark.parametrize(
    ("text", "count", "unit", "days", "display", "written"),
    [
        ("for a term of five (5) years from", 5, "year", 1825, "5 years", "five (5) years"),
        ("within ninety (90) days after", 90, "day", 90, "90 days", "ninety (90) days"),
        ("not exceed 12 months", 12, "month", 360, "12 months", "12 months"),
        ("thirty (30) calendar days' notice", 30, "day", 30, "30 days", "thirty (30) calendar days"),
        ("sixty (60) business days", 60, "business_day", 60, "60 business days", "sixty (60) business days"),
        ("within ten (10) Business Days", 10, "business_day", 10, "10 business days", "ten (10) Business Days"),
        ("five working days", 5, "business_day", 5, "5 business days", "five working days"),
        ("an initial one-year term", 1, "year", 365, "1 year", "one-year"),
        ("for a period of one (1) year", 1, "year", 365, "1 year", "one (1) year"),
        ("for successive one (1) year periods", 1, "year", 365, "1 year", "one (1) year"),
        ("satisfying the two-year", 2, "year", 730, "2 years", "two-year"),
        ("an 18-month period", 18, "month", 540, "18 months", "18-month"),
        ("at least 6 weeks", 6, "week", 42, "6 weeks", "6 weeks"),
        ("twelve-week pilot", 12, "week", 84, "12 weeks", "twelve-week"),
        (
            "one hundred twenty (120) consecutive days",
            120,
            "day",
            120,
            "120 days",
            "one hundred twenty (120) consecutive days",
        ),
        ("FIVE (5) YEARS", 5, "year", 1825, "5 years", "FIVE (5) YEARS"),
        ("one and one-half years", 1.5, "year", 548, "1.5 years", "one and one-half years"),
    ],
)
def test_reads_every_form_of_duration(
    text: str, count: float, unit: str, days: int, display: str, written: str
) -> None:
    found = find_durations(text)
    assert len(found) == 1
    value = found[0]
    assert value.kind == "duration"
    assert value.normalized == {"days": days, "count": count, "unit": unit}
    assert value.display == display
    assert value.as_written == written
    assert text[value.start : value.end] == written


@pytest.mark.parametrize("text", ["perpetual", "shall continue in perpetuity", "a Perpetual license", "PERPETUALLY"])
def test_no_end_is_perpetual(text: str) -> None:
    assert [(v.normalized, v.display) for v in find_durations(text)] == [({"perpetual": True}, "perpetual")]


@pytest.mark.parametrize(
    "text",
    [
        "by the 20th day of each month",
        "on the twelfth calendar day",
        "managed on a day-to-day basis",
        "during the 2019 calendar year",
        "within 24 hours",
        "during each Contract Year",
        "someday, someone",
        "zero days",
        "the first License Year",
        "entered into as of this 31 day of July 2019",  # a date
        "Page 8 of 80      Month(s) that",  # a page footer, then a heading
    ],
)
def test_leaves_what_is_not_a_duration(text: str) -> None:
    assert find_durations(text) == []


def test_figure_wins_over_disagreeing_words_and_the_display_says_so() -> None:
    (value,) = find_durations("upon thirty (60) days' written notice")
    assert value.normalized == {"days": 60, "count": 60, "unit": "day"}
    assert value.display == "60 days (words say 30)"
    assert value.as_written == "thirty (60) days"


def test_words_and_figures_either_way_round() -> None:
    assert [v.normalized["count"] for v in find_durations("thirty (30) days or 30 (thirty) days")] == [30, 30]


def test_days_of_a_month_are_a_length_when_plural() -> None:
    assert [v.display for v in find_durations("the first 30 days of June 2020")] == ["30 days"]


def test_finds_durations_in_order() -> None:
    text = "an initial term of three (3) years, renewed for successive one-year terms on ninety (90) days' notice"
    assert [v.display for v in find_durations(text)] == ["3 years", "1 year", "90 days"]


def test_parse_duration_reads_one_duration() -> None:
    value = parse_duration("  '5 years'. ")
    assert value is not None
    assert (value.normalized, value.as_written, value.start, value.end) == (
        {"days": 1825, "count": 5, "unit": "year"},
        "5 years",
        3,
        10,
    )
    assert parse_duration("5 years and 6 months") is None
    assert parse_duration("five") is None


def test_find_values_reaches_the_reader() -> None:
    assert [v.display for v in find_values("duration", "within sixty (60) days")] == ["60 days"]


def test_reads_the_durations_of_the_sample_contract(sample_pdf: Path, expected_facts: list[dict[str, Any]]) -> None:
    text = " ".join(" ".join(page.extract_text() for page in pypdf.PdfReader(sample_pdf).pages).split())
    expected = {
        "What is the notice period for termination for convenience?": "90 days",
        "What is the cap on each party's liability?": "12 months",
        "How long do the confidentiality obligations survive after termination?": "5 years",
        "What is the initial term of the agreement?": "3 years",
        "When are invoices due for payment?": "45 days",
    }
    for fact in expected_facts:
        if fact["question"] in expected:
            assert fact["expected"] in text
            assert [v.display for v in find_durations(fact["expected"])] == [expected[fact["question"]]]
    assert {"90 days", "5 years", "3 years", "45 days"} <= {v.display for v in find_durations(text)}


def _hostile(units: list[str], size: int = 1_000_000) -> str:
    """`size` characters of text built to make regexes backtrack: runs of each unit in turn, one block each."""
    block = size // len(units)
    return "".join((unit * (block // len(unit) + 1))[:block] for unit in units)


@pytest.mark.timeout(120)  # a regex that backtracks without bound would take hours, not seconds
def test_a_megabyte_of_hostile_text_finishes() -> None:
    text = _hostile(["one ", "twenty-", "one hundred and ", "thirty (", "thirty (30) ", "9 ", "1/2/", "days "])
    found = find_durations(text)
    assert all(text[v.start : v.end] == v.as_written for v in found)


def test_a_hyphenated_length_broken_across_pdf_lines_is_read():
    (value,) = find_durations("unless either party provides 30-\ndays advance notice of termination")
    assert value.normalized == {"days": 30, "count": 30, "unit": "day"}
    assert value.as_written == "30-\ndays"
