"""Money and percents as contracts write them (`docpipe.values.money`): symbols, codes and currency words, amounts
in words with their figure, what is not money, and hostile input."""

from __future__ import annotations

from pathlib import Path

import pypdf
import pytest

from docpipe.values.money import find_money, find_percents, parse_money
from docpipe.values.read import find_values


@pytest.mark.parametrize(
    ("text", "amount", "currency", "written"),
    [
        ("a fee of $1,000,000 payable", 1_000_000, "USD", "$1,000,000"),
        ("a fee of $1,000,000.00 payable", 1_000_000, "USD", "$1,000,000.00"),
        ("$.01 par value per share", 0.01, "USD", "$.01"),
        ("up to US$ 5 million", 5_000_000, "USD", "US$ 5 million"),
        ("U.S. $1,000 per day", 1_000, "USD", "U.S. $1,000"),
        ("a limit of USD 250,000", 250_000, "USD", "USD 250,000"),
        ("a limit of 250,000 USD", 250_000, "USD", "250,000 USD"),
        ("€500,000 in total", 500_000, "EUR", "€500,000"),
        ("EUR 1.5 million", 1_500_000, "EUR", "EUR 1.5 million"),
        ("1,000 euros", 1_000, "EUR", "1,000 euros"),
        ("£10,000", 10_000, "GBP", "£10,000"),
        ("GBP 10,000", 10_000, "GBP", "GBP 10,000"),
        ("Rs. 10,00,000", 1_000_000, "INR", "Rs. 10,00,000"),
        ("INR 5,00,000", 500_000, "INR", "INR 5,00,000"),
        ("RMB 1,000,000", 1_000_000, "CNY", "RMB 1,000,000"),
        ("CAD 100", 100, "CAD", "CAD 100"),
        ("C$100", 100, "CAD", "C$100"),
        ("a fee of $5m", 5_000_000, "USD", "$5m"),
        ("$2.5MM", 2_500_000, "USD", "$2.5MM"),
        ("2.5 million dollars", 2_500_000, "USD", "2.5 million dollars"),
        ("Five Hundred Thousand Dollars", 500_000, "USD", "Five Hundred Thousand Dollars"),
        ("ten thousand Canadian dollars", 10_000, "CAD", "ten thousand Canadian dollars"),
        ("not less than USD\n5,000,000 per claim", 5_000_000, "USD", "USD\n5,000,000"),  # a PDF's line break
        ("the sum of USD$6.745.000 per year", 6_745_000, "USD", "USD$6.745.000"),  # points between thousands
        ("shall not exceed RUB 50 000 000 (fifty", 50_000_000, "RUB", "RUB 50 000 000"),  # spaces between them
    ],
)
def test_reads_every_form_of_money(text: str, amount: float, currency: str, written: str) -> None:
    (value,) = find_money(text)
    assert value.kind == "money"
    assert value.normalized == {"amount": amount, "currency": currency}
    assert value.display == f"{currency} {amount:,.2f}"
    assert value.as_written == written
    assert text[value.start : value.end] == written


@pytest.mark.parametrize(
    "text",
    [
        "one million dollars ($1,000,000)",
        "$1,000,000 (One Million Dollars)",
        "ONE MILLION DOLLARS ($1,000,000.00)",
        "One Million (1,000,000) Dollars",
        "one million ($1,000,000) dollars",
        "One Million Dollars (US$1,000,000)",
    ],
)
def test_words_and_their_figure_are_one_amount(text: str) -> None:
    found = find_money(text)
    assert [(v.normalized, v.display, v.as_written) for v in found] == [
        ({"amount": 1_000_000.0, "currency": "USD"}, "USD 1,000,000.00", text)
    ]


def test_figure_wins_over_disagreeing_words_and_the_display_says_so() -> None:
    (value,) = find_money("a cap of one million dollars ($2,000,000)")
    assert value.normalized == {"amount": 2_000_000.0, "currency": "USD"}
    assert value.display == "USD 2,000,000.00 (words say 1,000,000)"


@pytest.mark.parametrize(
    "text",
    [
        "a total of 1,000,000 units",
        "$[***] each occurrence",
        "$          during the 2nd License Year",
        "$______ per hour",
        "10 pounds of flour",
        "try 5 times",
        "eur 5 in lower case",
        "within 10 hours 10 days",
        "PHP 8 runtime",
        "Fee (USD)\nM1 - Discovery complete",
        "payable in USD\n5. Key Personnel",
    ],
)
def test_leaves_what_is_not_money(text: str) -> None:
    assert find_money(text) == []


def test_display_keeps_the_decimals_an_amount_has() -> None:
    (value,) = find_money("common stock, $0.001 par value")
    assert (value.normalized["amount"], value.display) == (0.001, "USD 0.001")


def test_finds_amounts_in_order() -> None:
    text = "limits of not less than $2,000,000 per occurrence and $4,000,000 in the aggregate, and EUR 500 per claim"
    assert [v.display for v in find_money(text)] == ["USD 2,000,000.00", "USD 4,000,000.00", "EUR 500.00"]


def test_parse_money_reads_one_amount() -> None:
    value = parse_money(" one million dollars ($1,000,000). ")
    assert value is not None
    assert value.normalized == {"amount": 1_000_000.0, "currency": "USD"}
    assert (value.start, value.end) == (1, 33)
    assert parse_money("$5 and $6") is None
    assert parse_money("5,000") is None


@pytest.mark.parametrize(
    ("text", "percent", "written"),
    [
        ("an interest rate of 12.5% per annum", 12.5, "12.5%"),
        ("ten percent (10%) of the Fees", 10, "ten percent (10%)"),
        ("Fifty Percent (50%)", 50, "Fifty Percent (50%)"),
        ("10% (ten percent)", 10, "10% (ten percent)"),
        ("fifty (50%) percent", 50, "fifty (50%) percent"),
        ("fifty (50) percent", 50, "fifty (50) percent"),
        ("twenty (20%) of the shares", 20, "twenty (20%)"),
        ("15 per cent", 15, "15 per cent"),
        ("15 PER CENT", 15, "15 PER CENT"),
        ("fifty percent of", 50, "fifty percent"),
        ("at least 99.9%", 99.9, "99.9%"),
    ],
)
def test_reads_every_form_of_percent(text: str, percent: float, written: str) -> None:
    (value,) = find_percents(text)
    assert value.kind == "percent"
    assert value.normalized == percent
    assert value.display == f"{percent:g}%"
    assert value.as_written == written
    assert text[value.start : value.end] == written


def test_percent_figure_wins_over_disagreeing_words() -> None:
    (value,) = find_percents("ten percent (20%)")
    assert (value.normalized, value.display) == (20.0, "20% (words say 10)")


@pytest.mark.parametrize("text", ["5 percentage points", "a percentage of sales", "12.5 units", "100 per month"])
def test_leaves_what_is_not_a_percent(text: str) -> None:
    assert find_percents(text) == []


def test_find_values_reaches_both_readers() -> None:
    text = "a fee of $500 plus 5% interest"
    assert [v.display for v in find_values("money", text)] == ["USD 500.00"]
    assert [v.display for v in find_values("percent", text)] == ["5%"]


def test_reads_the_amounts_and_percents_of_the_sample_contract(sample_pdf: Path) -> None:
    text = "\n".join(page.extract_text() for page in pypdf.PdfReader(sample_pdf).pages)
    assert {v.display for v in find_money(text)} == {
        "USD 1,000,000.00",
        "USD 2,000,000.00",
        "USD 3,000,000.00",
        "USD 4,000,000.00",
        "USD 5,000,000.00",
    }
    percents = {v.display for v in find_percents(text)}
    assert {"50%", "99.9%"} <= percents  # "fifty percent (50%)" in Change of Control; the uptime of Schedule 1


def _hostile(units: list[str], size: int = 1_000_000) -> str:
    """`size` characters of text built to make regexes backtrack: runs of each unit in turn, one block each."""
    block = size // len(units)
    return "".join((unit * (block // len(unit) + 1))[:block] for unit in units)


@pytest.mark.timeout(120)  # a regex that backtracks without bound would take hours, not seconds
def test_a_megabyte_of_hostile_text_finishes() -> None:
    text = _hostile(["one ", "twenty-", "$1,000 (", "10% (ten ", "1/2/", "$", "USD ", "one million dollars ("])
    money, percents = find_money(text), find_percents(text)
    assert money and percents  # the runs of "$1,000 (" and "10% (ten " are amounts and percents
    for found in (money, percents):
        assert all(text[v.start : v.end] == v.as_written for v in found)
