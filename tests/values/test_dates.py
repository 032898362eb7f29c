"""Dates as contracts write them (`docpipe.values.dates`): the forms, what is not a date, the two-digit years,
the blanks of unsigned forms, the calendar arithmetic, and hostile input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pypdf
import pytest

from docpipe.values.dates import PERPETUAL, add_duration, find_dates, parse_date, subtract_days
from docpipe.values.read import find_values


def _normalized(text: str, **kwargs: bool) -> list[str]:
    return [v.normalized for v in find_dates(text, **kwargs)]


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("made and entered into this 21st day of June, 1999, by", "1999-06-21"),
        ("made this 21 day of June 1999", "1999-06-21"),
        ("dated as of June 21, 1999", "1999-06-21"),
        ("dated as of June 21st, 1999", "1999-06-21"),
        ("JUNE 21, 1999", "1999-06-21"),
        ("on 21 June 1999 the parties", "1999-06-21"),
        ("the 1st of June, 2020", "2020-06-01"),
        ("made this first day of July, 2017", "2017-07-01"),
        ("on the thirtieth (30th) day of the month of January, 2012.", "2012-01-30"),
        ("effective as of the 24t h day of August 2018", "2018-08-24"),  # an ordinal PDF extraction split
        ("dated as of 02 June, 2015", "2015-06-02"),
        ("signed 6/21/99", "1999-06-21"),
        ("signed 06/21/1999", "1999-06-21"),
        ("signed 6-21-1999", "1999-06-21"),
        ("as of 2019-05-08", "2019-05-08"),
        ("until Dec. 31, 2006", "2006-12-31"),
        ("from Sept. 1, 2000", "2000-09-01"),
        ("registered 05-Sep-2019", "2019-09-05"),
        ("den 21.06.1999", "1999-06-21"),
        ("Commercial in Confidence   June 1999", "1999-06"),
        ("dated June, 1999", "1999-06"),
        ("this ___ day of June, 1999", "1999-06"),
        ("dated June __, 2020", "2020-06"),
        ("dated as of ____________, 2020", "2020"),
        ("dated as of [*], 2020", "2020"),
        ("dated as of [●], 2020", "2020"),
        ("Date: []/[]/2006", "2006"),
        ("AGENCY AGREEMENT\n\n, 2006\n\nLadies and Gentlemen", "2006"),  # the blank lost in the filing's text
        ("dated as of , 2006, between", "2006"),
        ("AGREEMENT made as of  ,\xa02013,\xa0between", "2013"),  # the PDF's no-break space
        ("made and entered into this 20th day of Friday, March 2020 (the", "2020-03-20"),
        ("Date: 3-14-18", "2018-03-14"),  # dashes and a two-digit year after a date's label
    ],
)
def test_reads_every_form_of_date(text: str, iso: str) -> None:
    found = find_dates(text)
    assert [v.normalized for v in found] == [iso]
    value = found[0]
    assert value.kind == "date"
    assert value.display == iso
    assert text[value.start : value.end] == value.as_written


@pytest.mark.parametrize(
    "text",
    [
        "effective as of the date last signed below",
        "as set out in Section 10.1.2 and Section 6/21",
        "call (212) 555-1212 or 1-800-555-1212",
        "a fee of $1,999 per month",
        "Page 2 of 15",
        "on February 30, 2020",
        "on 31 June 2020",
        "on 29 February 2019",  # not a leap year, and not the month "2019-02" either
        "under the Securities Act of 1933 and the Incoterms 1990",
        "by March 10 and June 10 of each year",
        "this __ day of ____, 20___",
        "a limit of $[***], 2019 aggregate",
        "part number 12-12-12",
        "Part: 3-14-18",
        "on the 1st Monday of each month",
        "Exhibit 10.12.2019",
    ],
)
def test_leaves_what_is_not_a_date(text: str) -> None:
    assert find_dates(text) == []


def test_a_page_footer_is_not_a_day_of_the_month() -> None:
    assert _normalized("Commercial in Confidence   Page 2   May 2004") == ["2004-05"]


def test_a_leap_day_is_a_date_in_a_leap_year() -> None:
    assert _normalized("on 29 February 2020") == ["2020-02-29"]


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("6/21/99", "1999-06-21"),
        ("1/3/00", "2000-01-03"),
        ("12/31/68", "2068-12-31"),  # the strptime pivot: 00-68 are this century
        ("1/1/69", "1969-01-01"),
        ("5-Sep-19", "2019-09-05"),
    ],
)
def test_two_digit_years_pivot_as_strptime_does(text: str, iso: str) -> None:
    assert _normalized(text) == [iso]


def test_slashes_are_month_first_unless_the_month_cannot_be() -> None:
    assert _normalized("6/7/2008 and 18/9/2008") == ["2008-06-07", "2008-09-18"]


def test_finds_dates_in_order_with_their_offsets() -> None:
    text = (
        "The term of the license shall commence August 1, 1995 and continue until January 30, 2000, unless "
        "sooner terminated; the first payment is due 8/1/95."
    )
    found = find_dates(text)
    assert [v.normalized for v in found] == ["1995-08-01", "2000-01-30", "1995-08-01"]
    assert [v.as_written for v in found] == ["August 1, 1995", "January 30, 2000", "8/1/95"]
    assert all(text[v.start : v.end] == v.as_written for v in found)


def test_the_longest_reading_wins() -> None:
    found = find_dates("dated as of the 28th day of March 2006 by and among")
    assert [(v.normalized, v.as_written) for v in found] == [("2006-03-28", "28th day of March 2006")]


@pytest.mark.parametrize("text", ["shall continue in perpetuity", "a perpetual licence", "until terminated by"])
def test_an_agreement_with_no_end_is_perpetual_unless_asked_not(text: str) -> None:
    assert _normalized(text) == [PERPETUAL]
    assert _normalized(text, perpetual=False) == []


def test_parse_date_reads_one_date_expression() -> None:
    value = parse_date(' "June 21, 1999." ')
    assert value is not None
    assert (value.normalized, value.as_written, value.start, value.end) == ("1999-06-21", "June 21, 1999", 2, 15)
    bracketed = parse_date("[*], 2020")
    assert bracketed is not None and bracketed.normalized == "2020"
    assert parse_date("perpetual") is not None


@pytest.mark.parametrize(
    "text", ["", "hello", "June 21, 1999 and July 1, 2000", "February 30, 2020", "dated June 21, 1999"]
)
def test_parse_date_refuses_anything_but_one_date(text: str) -> None:
    assert parse_date(text) is None


def test_find_values_reaches_the_reader() -> None:
    assert [v.normalized for v in find_values("date", "effective as of March 3, 2025")] == ["2025-03-03"]


@pytest.mark.parametrize(
    ("iso", "count", "unit", "result"),
    [
        ("2014-05-08", 5, "years", "2019-05-08"),
        ("2020-02-29", 1, "year", "2021-02-28"),  # the leap day has no anniversary: the month's last day
        ("2020-02-29", 4, "year", "2024-02-29"),
        ("2020-01-31", 1, "month", "2020-02-29"),
        ("2019-12-15", 3, "months", "2020-03-15"),
        ("2020-03-01", 2, "weeks", "2020-03-15"),
        ("2020-12-31", 1, "day", "2021-01-01"),
        ("2021-03-01", -1, "month", "2021-02-01"),
        ("2024-05-31", 1, "business_day", "2024-06-03"),  # a Friday: Monday is the next business day
        ("2024-06-03", 10, "business_days", "2024-06-17"),
        ("2024-06-03", -1, "business_day", "2024-05-31"),
    ],
)
def test_add_duration_is_calendar_correct(iso: str, count: int, unit: str, result: str) -> None:
    assert add_duration(iso, count, unit) == result


def test_add_duration_names_the_units_it_knows() -> None:
    with pytest.raises(ValueError, match="year, month, week, day or business_day"):
        add_duration("2020-01-01", 1, "fortnight")


def test_subtract_days_crosses_months_and_years() -> None:
    assert subtract_days("2020-03-01", 1) == "2020-02-29"
    assert subtract_days("2021-01-10", 90) == "2020-10-12"


def test_reading_dates_does_not_load_dateutil() -> None:
    # The CLI imports the readers; dateutil's parser alone costs ~70 ms, so only the arithmetic loads it.
    code = (
        "import sys; from docpipe.values.dates import find_dates; find_dates('June 21, 1999'); "
        "print(any(m.startswith('dateutil') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_reads_the_dates_of_the_sample_contract(sample_pdf: Path) -> None:
    text = "\n".join(page.extract_text() for page in pypdf.PdfReader(sample_pdf).pages)
    found = find_dates(text, perpetual=False)
    assert found[0].normalized == "2025-03-03"  # "Dated as of March 3, 2025", the first date of the agreement
    assert {"2025-05-16", "2025-11-14"} <= {v.normalized for v in found}  # the milestones of Exhibit A
    assert all(len(v.normalized) == 10 for v in found)
    assert all(text[v.start : v.end] == v.as_written for v in found)


def _hostile(units: list[str], size: int = 1_000_000) -> str:
    """`size` characters of text built to make regexes backtrack: runs of each unit in turn, one block each."""
    block = size // len(units)
    return "".join((unit * (block // len(unit) + 1))[:block] for unit in units)


@pytest.mark.timeout(120)  # a regex that backtracks without bound would take hours, not seconds
def test_a_megabyte_of_hostile_text_finishes() -> None:
    units = ["9", "1,11", "_", "[*] ", "1/2/", "June 21 ", "31 June 2020 ", "twenty-first day of ", ", 2020", "1.2."]
    text = _hostile(units)
    found = find_dates(text)
    assert found  # the odd real date the runs make ("2 June 2020" where two blocks meet) is fine; none is invalid
    assert all(text[v.start : v.end] == v.as_written for v in found)
    assert all(a.end <= b.start for a, b in zip(found, found[1:]))
