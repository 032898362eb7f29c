"""Numbers as contracts write them (`docpipe.values.numbers`): words, figures, both, and what is not a number."""

from __future__ import annotations

import re

import pytest

from docpipe.values.numbers import (
    NUMBER,
    ORDINAL,
    any_case,
    format_number,
    parse_number,
    read_number,
    read_ordinal,
    scan_numbers,
    words_disagree,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("five", 5),
        ("Twenty-Four", 24),
        ("twenty four", 24),
        ("NINETY", 90),
        ("one hundred twenty", 120),
        ("one hundred and twenty-five", 125),
        ("one thousand", 1_000),
        ("Five Hundred Thousand", 500_000),
        ("two million three hundred thousand", 2_300_000),
        ("fourty-five", 45),  # a misspelling contracts carry
        ("1,000,000", 1_000_000),
        ("10,00,000", 1_000_000),  # Indian grouping: ten lakh
        ("4.047.000.000", 4_047_000_000),  # points between thousands
        ("1.250.000,50", 1_250_000.5),  # and a decimal comma
        ("1.500", 1.5),  # one point is a decimal point
        ("12.5", 12.5),
        (".01", 0.01),
        ("one-half", 0.5),
        ("two and one-half", 2.5),
        ("three-quarters", 0.75),
        ("2.5 million", 2_500_000),
        ("5m", 5_000_000),
        ("thirty (30)", 30),
        ("30 (thirty)", 30),
        ("THIRTY (30)", 30),
        ("zero", 0),
    ],
)
def test_reads_numbers_in_words_and_figures(text: str, value: float) -> None:
    assert read_number(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "twenty thirty",
        "one two",
        "five and",
        "hundred",
        "thirty (thirty)",
        "30 (30)",
        "$5",
        "someone",
        "Section",
        "10.1.2",
    ],
)
def test_refuses_what_is_not_one_number(text: str) -> None:
    assert parse_number(text) is None
    assert read_number(text) is None


def test_words_and_figure_that_agree_are_consistent() -> None:
    reading = parse_number("sixty (60)")
    assert reading is not None
    assert (reading.value, reading.words, reading.figure, reading.consistent) == (60, 60, 60, True)
    assert words_disagree(reading) == ""


@pytest.mark.parametrize("text", ["thirty (60)", "60 (thirty)"])
def test_figure_wins_over_disagreeing_words_and_says_so(text: str) -> None:
    reading = parse_number(text)
    assert reading is not None
    assert reading.value == 60
    assert reading.words == 30
    assert not reading.consistent
    assert words_disagree(reading) == " (words say 30)"


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("21st", 21),
        ("2nd", 2),
        ("21", 21),
        ("first", 1),
        ("Twenty-First", 21),
        ("thirtieth", 30),
        ("thirtieth (30th)", 30),
        ("30th (thirtieth)", 30),
        ("24t h", 24),  # the ordinal as text extracted from a PDF splits it
    ],
)
def test_reads_ordinals(text: str, day: int) -> None:
    assert read_ordinal(text) == day
    assert re.fullmatch(ORDINAL, text)


def test_scan_splits_words_that_are_two_numbers() -> None:
    text = "for one thirty (30) day period"
    spans = list(scan_numbers(text))
    assert [(text[s.start : s.end], s.reading.value) for s in spans] == [("one", 1), ("thirty (30)", 30)]


def test_scan_keeps_words_inside_other_words_and_third_parties_out() -> None:
    text = "someone often gives notice to one third party and to anyone"
    assert [(text[s.start : s.end], s.reading.value) for s in scan_numbers(text)] == [("one", 1)]


def test_scan_reads_a_long_run_of_numbers_one_at_a_time() -> None:
    text = "twenty " * 40  # no two of them make one number
    spans = list(scan_numbers(text))
    assert len(spans) == 40
    assert {s.reading.value for s in spans} == {20}


def test_fragment_matches_the_doubled_forms_whole() -> None:
    assert re.fullmatch(NUMBER, "forty-five (45)")
    assert re.fullmatch(NUMBER, "45 (forty-five)")
    assert not re.fullmatch(NUMBER, "forty-five (45%)")


def test_any_case_matches_the_spellings_contracts_use_only() -> None:
    pattern = re.compile(rf"(?:{any_case(['per cent'])})")
    for spelling in ("per cent", "Per Cent", "PER CENT", "per  cent"):
        assert pattern.fullmatch(spelling), spelling
    assert pattern.fullmatch("pEr cEnt") is None


@pytest.mark.parametrize(("value", "shown"), [(30.0, "30"), (12.5, "12.5"), (1_000_000.0, "1,000,000"), (0.25, "0.25")])
def test_formats_numbers_for_display(value: float, shown: str) -> None:
    assert format_number(value) == shown


def _hostile(units: list[str], size: int = 1_000_000) -> str:
    """`size` characters of text built to make regexes backtrack: runs of each unit in turn, one block each."""
    block = size // len(units)
    return "".join((unit * (block // len(unit) + 1))[:block] for unit in units)


@pytest.mark.timeout(120)  # a regex that backtracks without bound would take hours, not seconds
def test_a_megabyte_of_hostile_text_finishes() -> None:
    text = _hostile(["one ", "twenty-", "one hundred and ", "1,11", "thirty (", "9", " ", "one two three four "])
    spans = list(scan_numbers(text))
    assert len(spans) > 50_000  # the runs of words and figures are numbers, one at a time
    assert all(0 <= s.start < s.end <= len(text) for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
