"""Amounts of money and percents as contracts write them.

Money: "$1,000,000", "$1,000,000.00", "US$ 5 million", "USD 250,000", "250,000 USD", "€500,000", "EUR 1.5
million", "£10,000", "GBP 10,000", "Rs. 10,00,000", "INR 5,00,000", "RMB 1,000,000", "C$100", "CAD 100", "Five
Hundred Thousand Dollars", "ten thousand (10,000) dollars", and words with the figure in brackets, "one million
dollars ($1,000,000)" or "$1,000,000 (One Million Dollars)", read as one amount, not two.

Normalized form: ``{"amount": 1000000.0, "currency": "USD"}``, the currency in ISO 4217. An amount is money
only when a symbol, code or currency word marks it, so the currency is always named: a bare number is not
money, and neither is a blank or redacted amount ("$[***]", "$______"). A bare "$" and "dollars" are US
dollars, the currency of most contracts that write them ("C$", "Canadian dollars" and the like name their own);
"¥" is the Japanese yen. Currency codes count in capitals only ("eur" is no currency), and codes that are also
words or product names ("TRY", "PHP", "COP") are left out.

Display: "USD 1,000,000.00". When words and figure disagree ("one million dollars ($2,000,000)") the figure
counts and the display says so: "USD 2,000,000.00 (words say 1,000,000)".

Percents: "12.5%", "ten percent (10%)" (one value), "15 per cent", "fifty (50%) percent"; normalized the number,
``12.5``; display "12.5%".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docpipe.values.kinds import Value
from docpipe.values.numbers import (
    DIGITS,
    SCALE,
    WORDS,
    LazyPattern,
    NumberReading,
    NumberSpan,
    any_case,
    format_number,
    parse_number,
    scan_numbers,
    words_disagree,
)

__all__ = ["find_money", "find_percents", "parse_money"]

# A symbol or abbreviation written before the amount, to its ISO 4217 code.
_SYMBOLS = {
    "US$": "USD",
    "U.S.$": "USD",
    "USD$": "USD",
    "US $": "USD",
    "U.S. $": "USD",
    "C$": "CAD",
    "CA$": "CAD",
    "CAD$": "CAD",
    "Can$": "CAD",
    "A$": "AUD",
    "AU$": "AUD",
    "AUD$": "AUD",
    "NZ$": "NZD",
    "HK$": "HKD",
    "S$": "SGD",
    "R$": "BRL",
    "Mex$": "MXN",
    "$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "Rs.": "INR",
    "Rs": "INR",
    "RMB": "CNY",
    "SFr.": "CHF",
}
_CODES = frozenset(
    "USD EUR GBP JPY CNY INR CAD AUD NZD CHF HKD SGD SEK NOK DKK BRL MXN ZAR KRW RUB ILS AED SAR TWD THB "
    "MYR IDR PLN CZK HUF KZT NGN".split()
)
# Currency words after the amount ("500,000 dollars", "five hundred euros").
_NAMES = {
    "U.S. dollars": "USD",
    "US dollars": "USD",
    "United States dollars": "USD",
    "American dollars": "USD",
    "Canadian dollars": "CAD",
    "Australian dollars": "AUD",
    "New Zealand dollars": "NZD",
    "Hong Kong dollars": "HKD",
    "Singapore dollars": "SGD",
    "dollars": "USD",
    "dollar": "USD",
    "euros": "EUR",
    "euro": "EUR",
    "pounds sterling": "GBP",
    "pound sterling": "GBP",
    "British pounds": "GBP",
    "sterling": "GBP",
    "Indian rupees": "INR",
    "rupees": "INR",
    "renminbi": "CNY",
    "yuan": "CNY",
    "yen": "JPY",
    "Swiss francs": "CHF",
}
_CURRENCY_OF = {marker.lower(): code for table in (_SYMBOLS, _NAMES) for marker, code in table.items()}

_SYMBOL_ENDS = frozenset(symbol[-1] for symbol in _SYMBOLS if not symbol[-1].isalpha())
_CODE = rf"(?:{'|'.join(sorted(_CODES))})(?![A-Za-z])"
_SYMBOL = rf"(?:{any_case(_SYMBOLS)})"
_PREFIX = rf"(?:(?<![A-Za-z]){_SYMBOL}|(?<![A-Za-z]){_CODE})"
_NAME = rf"(?:{any_case(_NAMES)})(?![A-Za-z])"
_SP = r"\s{0,3}"  # a line break too: extracted PDFs break "USD\n5,000,000"

# What marks a number as money, before it or after it.
_PREFIX_BEFORE = LazyPattern(rf"(?P<prefix>{_PREFIX}){_SP}\Z")
_SCALE_AFTER = LazyPattern(SCALE)
_SPACE_GROUPS = LazyPattern(r"(?:[ \xa0]\d{3}){1,6}(?![\d,.])")
_LIST_NUMBER = LazyPattern(r"[.)](?:\s|\Z)")
_CURRENCY_AFTER = LazyPattern(rf"{_SP}(?:(?P<code>{_CODE})|(?P<name>{_NAME}))")
# "ten thousand ($10,000) dollars": words, then the figure with its own symbol in brackets.
_FIGURE_IN_BRACKETS = LazyPattern(
    rf"\s{{0,3}}\(\s{{0,3}}(?P<prefix>{_PREFIX}){_SP}(?P<figure>{DIGITS}(?:{SCALE})?)\s{{0,3}}\)(?:\s{{0,3}}(?P<name>{_NAME}))?"
)
# What joins two readings of one amount: "one million dollars ($1,000,000)", "$1,000,000 (One Million Dollars)".
_OPEN = LazyPattern(r"\s{0,3}\(\s{0,3}")
_CLOSE = LazyPattern(r"\s{0,3}\)")

_PERCENT_WORD = rf"(?:{any_case(['percent', 'per cent'])})(?![A-Za-z])"
# ten percent (10%)
_WORDS_THEN_FIGURE = LazyPattern(
    rf"\s{{1,3}}{_PERCENT_WORD}\s{{0,3}}\(\s{{0,3}}(?P<figure>{DIGITS})\s{{0,3}}%\s{{0,3}}\)"
)
# fifty (50%) percent / twenty (20%)
_PERCENT_IN_BRACKETS = LazyPattern(
    rf"\s{{0,3}}\(\s{{0,3}}(?P<figure>{DIGITS})\s{{0,3}}%\s{{0,3}}\)(?:\s{{0,3}}{_PERCENT_WORD})?"
)
# 10% (ten percent)
_FIGURE_THEN_WORDS = LazyPattern(
    rf"\s{{0,3}}%\s{{0,3}}\(\s{{0,3}}(?P<words>{WORDS})\s{{1,3}}{_PERCENT_WORD}\s{{0,3}}\)"
)
# 12.5% / 15 per cent / fifty (50) percent
_PERCENT_SIGN = LazyPattern(rf"\s{{0,3}}(?:%|{_PERCENT_WORD})")


@dataclass(frozen=True, slots=True)
class _Atom:
    """One reading of an amount: where it is, its number, the currency it names, whether it is in words."""

    start: int
    end: int
    reading: NumberReading
    currency: str
    in_words: bool


def find_money(text: str) -> list[Value]:
    """Every amount of money written in `text`, in order, as `Value`s of kind "money" (forms, currencies and
    the reading of words against figures in the module docstring)."""
    atoms: list[_Atom] = []
    for number in scan_numbers(text):
        if atoms and number.start < atoms[-1].end:
            continue  # inside an amount already read: the figure of "ten thousand ($10,000) dollars"
        atom = _atom(text, number)
        if atom is not None:
            atoms.append(atom)
    values: list[Value] = []
    index = 0
    while index < len(atoms):
        atom = atoms[index]
        following = atoms[index + 1] if index + 1 < len(atoms) else None
        if following is not None and _restated(text, atom, following):
            values.append(_joined(text, atom, following))
            index += 2
        else:
            values.append(
                _money(text, atom.reading.value, atom.currency, atom.start, atom.end, words_disagree(atom.reading))
            )
            index += 1
    return values


def parse_money(text: str) -> Value | None:
    """The amount `text` is when it is one ("$1,000,000", "one million dollars ($1,000,000)"), give or take
    surrounding spaces and punctuation; None otherwise."""
    core = text.strip().strip("\"'“”‘’.,;: \t\r\n")
    found = find_money(core)
    if len(found) == 1 and found[0].start == 0 and found[0].end == len(core):
        offset = text.find(core)
        v = found[0]
        return Value(v.kind, v.normalized, v.display, v.as_written, offset + v.start, offset + v.end)
    return None


def find_percents(text: str) -> list[Value]:
    """Every percent written in `text`, in order, as `Value`s of kind "percent": normalized the number (12.5),
    displayed "12.5%"; words and a disagreeing figure read as the figure, the display saying so."""
    found: list[Value] = []
    for number in scan_numbers(text):
        if found and number.start < found[-1].end:
            continue  # the figure of "ten percent (10%)", read with its words
        read = _percent(text, number)
        if read is not None:
            reading, end = read
            display = f"{format_number(reading.value)}%{words_disagree(reading)}"
            found.append(Value("percent", reading.value, display, text[number.start : end], number.start, end))
    return found


def _percent(text: str, number: NumberSpan) -> tuple[NumberReading, int] | None:
    """The percent a number opens and where its words end, or None when it is not a percent."""
    reading = number.reading
    if reading.figure is None:  # in words: the figure may follow in brackets, with its own sign
        for tail in (_WORDS_THEN_FIGURE, _PERCENT_IN_BRACKETS):
            match = tail.match(text, number.end)
            if match is not None and (figure := parse_number(match.group("figure"))) is not None:
                return NumberReading(figure.value, reading.value, figure.value), match.end()
    elif reading.words is None:
        match = _FIGURE_THEN_WORDS.match(text, number.end)
        if match is not None and (words := parse_number(match.group("words"))) is not None:
            return NumberReading(reading.value, words.value, reading.value), match.end()
    sign = _PERCENT_SIGN.match(text, number.end)
    return (reading, sign.end()) if sign is not None else None


def _atom(text: str, number: NumberSpan) -> _Atom | None:
    reading, end = number.reading, number.end
    in_words = reading.figure is None
    currency = ""
    if in_words:
        bracketed = _FIGURE_IN_BRACKETS.match(text, end)
        if bracketed is not None:
            figure = parse_number(bracketed.group("figure"))
            if figure is not None:
                both = NumberReading(figure.value, reading.value, figure.value)
                return _Atom(number.start, bracketed.end(), both, _currency(bracketed.group("prefix")), False)
    elif reading.words is None:
        scale = _SCALE_AFTER.match(text, end)
        if scale is not None:
            scaled = parse_number(text[number.start : scale.end()])
            if scaled is not None:
                reading, end = scaled, scale.end()
        before = _prefix_before(text, number.start)
        if before is not None and "\n" in before.group() and _LIST_NUMBER.match(text, end):
            before = None  # "in USD\n5. Key Personnel": the figure numbers the next paragraph
        if before is not None:
            currency = _currency(before.group("prefix"))
            grouped = _SPACE_GROUPS.match(text, end) if end - number.start <= 3 else None
            if grouped is not None:  # "RUB 50 000 000": spaces between thousands, after a currency only
                amount = float(re.sub(r"\D", "", text[number.start : grouped.end()]))
                reading, end = NumberReading(amount, figure=amount), grouped.end()
            number = NumberSpan(before.start(), number.end, reading)
    after = _CURRENCY_AFTER.match(text, end)
    if after is not None:
        currency = currency or _currency(after.group("code") or after.group("name"))
        end = after.end()
    if not currency:
        return None
    return _Atom(number.start, end, reading, currency, in_words)


def _prefix_before(text: str, start: int) -> re.Match[str] | None:
    # Most figures have no symbol before them: a look at one character spares the search.
    last = text[max(0, start - 4) : start].rstrip()[-1:]
    if not last or not (last.isalpha() or last in _SYMBOL_ENDS):
        return None
    return _PREFIX_BEFORE.search(text, max(0, start - 12), start)


def _currency(marker: str) -> str:
    squashed = re.sub(r"\s+", " ", marker.strip())
    return squashed if squashed in _CODES else _CURRENCY_OF[squashed.lower()]


def _restated(text: str, first: _Atom, second: _Atom) -> bool:
    """True when `second` restates `first` in brackets, one in words and the other in figures."""
    if first.in_words == second.in_words:
        return False
    opened = _OPEN.fullmatch(text, first.end, second.start)
    return opened is not None and _CLOSE.match(text, second.end) is not None


def _joined(text: str, first: _Atom, second: _Atom) -> Value:
    words, figure = (first, second) if first.in_words else (second, first)
    close = _CLOSE.match(text, second.end)
    end = close.end() if close else second.end
    note = "" if words.reading.value == figure.reading.value else f" (words say {format_number(words.reading.value)})"
    return _money(text, figure.reading.value, figure.currency or words.currency, first.start, end, note)


def _money(text: str, amount: float, currency: str, start: int, end: int, note: str) -> Value:
    shown = f"{amount:,.2f}"
    if float(shown.replace(",", "")) != amount:  # "$0.001 par value" keeps its third decimal
        shown = f"{amount:,.6f}".rstrip("0")
    display = f"{currency} {shown}".strip() + note
    return Value("money", {"amount": float(amount), "currency": currency}, display, text[start:end], start, end)
