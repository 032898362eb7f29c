"""Numbers as contracts write them: in digits ("1,000,000", "12.5", "10,00,000"), in words ("twenty-four",
"one hundred twenty", "one-half", "two and one-half"), scaled ("2.5 million") and doubled, words with the figure
in brackets or the reverse ("thirty (30)", "30 (thirty)").

The other readers build their patterns from the fragments here (`NUMBER`, `DIGITS`, `WORDS`, `SCALE`, `ORDINAL`),
or walk the numbers of a text with `scan_numbers` and look at what stands before and after each; `parse_number`
and `read_ordinal` read one number. The fragments hold no capturing groups, so a pattern may use them several
times and name its own groups around them.

When the words and the bracketed figure disagree ("thirty (60)"), the figure in digits wins. That is a choice for
review, not a rule of law (for negotiable instruments the words prevail, UCC 3-114), so the disagreement stays
visible: `parse_number` returns a `NumberReading` whose `consistent` is false and which keeps both numbers, and the
readers of durations, money and percents say it in the value's `display` ("60 days (words say 30)").

Every repetition in the fragments is bounded and `scan_numbers` reads each stretch of text a bounded number of
times, so a megabyte of hostile text takes time in proportion to its length, not to its square.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIGITS",
    "NUMBER",
    "ORDINAL",
    "SCALE",
    "WORDS",
    "LazyPattern",
    "NumberReading",
    "NumberSpan",
    "any_case",
    "format_number",
    "parse_number",
    "read_number",
    "read_ordinal",
    "scan_numbers",
    "words_disagree",
]

_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}
_TEENS = {
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fourty": 40,  # a misspelling contracts do carry
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000, "trillion": 1_000_000_000_000}
# "one-half", "two-thirds", "three-quarters": the denominators contracts use.
_FRACTIONS = {
    "half": 2,
    "halves": 2,
    "third": 3,
    "thirds": 3,
    "quarter": 4,
    "quarters": 4,
    "fourth": 4,
    "fourths": 4,
    "fifth": 5,
    "fifths": 5,
    "tenth": 10,
    "tenths": 10,
}

_ORDINAL_UNITS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "thirteenth": 13,
    "fourteenth": 14,
    "fifteenth": 15,
    "sixteenth": 16,
    "seventeenth": 17,
    "eighteenth": 18,
    "nineteenth": 19,
}
_ORDINAL_TENS = {
    "twentieth": 20,
    "thirtieth": 30,
    "fortieth": 40,
    "fiftieth": 50,
    "sixtieth": 60,
    "seventieth": 70,
    "eightieth": 80,
    "ninetieth": 90,
}


def any_case(words: Iterable[str]) -> str:
    """A regex alternation of `words` as contracts capitalise them: as given, lower case, UPPER CASE and Each
    Word Capitalised, longest first (so "seventeen" is tried before "seven"). Matching these few spellings
    instead of `re.IGNORECASE` keeps a scan several times faster: the regex engine can skip ahead on literals."""
    spellings: set[str] = set()
    for word in words:
        capitalised = re.sub(r"(?:^|(?<=[ \-]))([a-z])", lambda m: m.group(1).upper(), word)
        spellings.update((word, word.lower(), word.upper(), capitalised))
    ordered = sorted(spellings, key=lambda w: (-len(w), w))
    return "|".join(re.escape(w).replace(r"\ ", r"\s{1,3}") for w in ordered)


_NUMBER_WORD = rf"(?:{any_case([*_UNITS, *_TEENS, *_TENS, 'hundred', *_SCALES])})(?![A-Za-z])"
# "third party" is a party, not a fraction: an ordinal-like fraction may not be followed by "part".
_FRACTION_WORD = rf"(?:{any_case(_FRACTIONS)})(?![A-Za-z])(?![ \t-]{{1,3}}(?:{any_case(['part'])}))"
_SEP = r"(?:[ \t]{0,3}-[ \t]{0,3}|\s{1,12})"  # "twenty-four", "twenty - four", "twenty four", a line break
_OPEN = r"\s{0,3}\(\s{0,3}"
_CLOSE = r"\s{0,3}\)"

#: A number in words: "five", "twenty-four", "one hundred and twenty", "one-half", "two and one-half".
#: At most 15 words, taken possessively: a long run of number words costs a bounded amount per word.
WORDS = (
    rf"\b{_NUMBER_WORD}(?:{_SEP}(?:(?:{any_case(['and'])})\s{{1,12}})?{_NUMBER_WORD}){{0,14}}+"
    rf"(?:{_SEP}{_FRACTION_WORD})?"
)
#: A number in digits: "30", "1,000,000", "12.5", ".01", "10,00,000" (Indian grouping), "4.047.000.000" and
#: "1.250.000,50" (points between thousands, as Latin American and European contracts write them; one point,
#: "1.500", is a decimal point). The first digit comes before the look back (no digit, comma or point before
#: it), so the regex engine can skip ahead to digits.
DIGITS = (
    r"(?:\d(?<![\d,.]\d)(?:(?:\d?(?:,\d{2}){1,6},\d{3}|\d{0,2}(?:,\d{3}){1,6}|\d{0,19})(?:\.\d{1,12})?(?!\d|\.\d)"
    r"|\d{0,2}(?:\.\d{3}){2,6}(?:,\d{1,2})?(?!\d))"
    r"|\.(?<![\d,.]\.)\d{1,12}(?!\d))"
)
#: What scales a figure: "2.5 million", "$5m", "$5MM", "$1.2bn", "$10k".
SCALE = (
    rf"(?:\s{{1,3}}(?:{any_case(['million', 'billion', 'trillion', 'thousand'])})(?![A-Za-z])"
    r"|(?:mm|MM|mn|bn|BN|m|M|k|K)(?![A-Za-z]))"
)
#: Any written number: words, digits, and the doubled forms "thirty (30)" and "30 (thirty)"; no scale.
NUMBER = rf"(?:{WORDS}(?:{_OPEN}{DIGITS}{_CLOSE})?|{DIGITS}(?:{_OPEN}{WORDS}{_CLOSE})?)"

_ORDINAL_WORD = (
    rf"\b(?:(?:{any_case(_TENS)})[ \t]{{0,3}}-?[ \t]{{0,3}}(?:{any_case(_ORDINAL_UNITS)})"
    rf"|(?:{any_case([*_ORDINAL_TENS, *_ORDINAL_UNITS])}))(?![A-Za-z])"
)
_ORDINAL_SUFFIX = r"(?:s\s?t|n\s?d|r\s?d|t\s?h|ST|ND|RD|TH)"  # "24th", and "24t h" as PDFs split it
#: An ordinal up to 99: "21st", "21", "twenty-first", "thirtieth (30th)", "30th (thirtieth)".
ORDINAL = (
    rf"(?:{_ORDINAL_WORD}(?:{_OPEN}\d{{1,2}}{_ORDINAL_SUFFIX}?{_CLOSE})?"
    rf"|\d(?<![\d,.]\d)\d?(?:{_ORDINAL_SUFFIX}(?![A-Za-z]))?(?!\d)(?:{_OPEN}{_ORDINAL_WORD}{_CLOSE})?)"
)


class LazyPattern:
    """A regular expression compiled on its first use, so that importing a reader costs no compiling (the big
    alternations of the readers take tens of milliseconds to compile, and the CLI must start at once)."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern."""
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.match(text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.fullmatch(text, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.search(text, pos, endpos)

    def finditer(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text, pos, endpos)

    def findall(self, text: str) -> list[Any]:
        return self.pattern.findall(text)


# NUMBER with its parts named, for the scan: words and their bracketed figure, or a figure and its words.
_SCANNER = LazyPattern(
    rf"(?P<words>{WORDS})(?:{_OPEN}(?P<words_figure>{DIGITS}){_CLOSE})?"
    rf"|(?P<figure>{DIGITS})(?:{_OPEN}(?P<figure_words>{WORDS}){_CLOSE})?"
)
_WORDS_RE = LazyPattern(WORDS)
_DIGITS_RE = LazyPattern(DIGITS)
_TOKEN_RE = LazyPattern(r"[A-Za-z]+")
_PAIR_RE = LazyPattern(r"^(?P<a>[^()]*?)\s*\(\s*(?P<b>[^()]*?)\s*\)$")
_SCALE_RE = LazyPattern(rf"^(?P<n>.*?)(?P<s>{SCALE})$", re.DOTALL)
_ABBREVIATED_SCALES = {"mm": 1_000_000, "mn": 1_000_000, "m": 1_000_000, "bn": 1_000_000_000, "k": 1_000}


@dataclass(frozen=True, slots=True)
class NumberReading:
    """A number read from words, digits or both. `value` is what the number means: the figure in digits when
    both are written (so "thirty (60)" reads 60), the words otherwise.

    >>> parse_number("thirty (60)")
    NumberReading(value=60.0, words=30.0, figure=60.0)
    >>> parse_number("thirty (60)").consistent
    False
    """

    value: float
    words: float | None = None
    figure: float | None = None

    @property
    def consistent(self) -> bool:
        """False when words and figure are both written and say different numbers."""
        return self.words is None or self.figure is None or self.words == self.figure


@dataclass(frozen=True, slots=True)
class NumberSpan:
    """A number found in a text: its offsets there and its reading."""

    start: int
    end: int
    reading: NumberReading


def parse_number(text: str) -> NumberReading | None:
    """Reads `text` as one number ("thirty (30)", "30 (thirty)", "twenty-four", "1,000,000", "2.5 million",
    "one-half"); None when it is anything else."""
    text = text.strip()
    if not text:
        return None
    scale = 1.0
    scaled = _SCALE_RE.match(text)
    if scaled and _DIGITS_RE.fullmatch(scaled.group("n").strip()):  # words hold their own scale words
        word = scaled.group("s").strip().lower()
        scale = float(_SCALES.get(word) or _ABBREVIATED_SCALES[word])
        text = scaled.group("n").strip()
    pair = _PAIR_RE.match(text)
    if pair:
        first, second = _read_simple(pair.group("a")), _read_simple(pair.group("b"))
        if first is None or second is None or first[1] == second[1]:
            return None  # both words or both digits: "thirty (thirty)" is not a way numbers are written
        words = first[0] if first[1] == "words" else second[0]
        figure = first[0] if first[1] == "digits" else second[0]
        return NumberReading(figure * scale, words * scale, figure * scale)
    simple = _read_simple(text)
    if simple is None:
        return None
    if simple[1] == "words":
        return NumberReading(simple[0] * scale, words=simple[0] * scale)
    return NumberReading(simple[0] * scale, figure=simple[0] * scale)


def read_number(text: str) -> float | None:
    """The number `text` says (see `parse_number`), or None. Words and a disagreeing figure read as the figure."""
    reading = parse_number(text)
    return reading.value if reading is not None else None


def scan_numbers(text: str) -> Iterator[NumberSpan]:
    """Every number written in `text`, in order, each the longest run of words and figures that reads as one
    number: "one thirty (30)" is "one", then "thirty (30)". Unscaled ("5 million" yields 5 and leaves
    " million" to the caller, see `SCALE`); a megabyte of any text takes time in proportion to its length."""
    position = 0
    while (match := _SCANNER.search(text, position)) is not None:
        if match.group("figure") is not None:
            figure = _figure_value(match.group("figure"))
            words = match.group("figure_words")
            said = _words_value(_tokens(words)) if words is not None else None
            if said is None:  # no words, or words that are not a number: the figure alone
                yield NumberSpan(match.start(), match.end("figure"), NumberReading(figure, figure=figure))
                position = match.end("figure")
            else:
                yield NumberSpan(match.start(), match.end(), NumberReading(figure, said, figure))
                position = match.end()
            continue
        tokens = list(_TOKEN_RE.finditer(match.group("words")))
        words = [t.group().lower() for t in tokens]
        value = _words_value(words)
        if value is not None:
            bracketed = match.group("words_figure")
            if bracketed is None:
                yield NumberSpan(match.start(), match.end(), NumberReading(value, words=value))
            else:
                figure = _figure_value(bracketed)
                yield NumberSpan(match.start(), match.end(), NumberReading(figure, value, figure))
            position = match.end()
            continue
        # Words that are several numbers, or none ("one thirty (30)", "twenty twenty"): each number in turn,
        # all in this one pass but the last, which the next search reads again with what follows it.
        index = 0
        while True:
            count, value = _longest_words(words, index)
            if index + max(count, 1) >= len(words):
                position = match.start() + tokens[index].start() + (1 if value is None else 0)
                break
            if value is not None:
                start, end = match.start() + tokens[index].start(), match.start() + tokens[index + count - 1].end()
                yield NumberSpan(start, end, NumberReading(value, words=value))
            index += max(count, 1)


def read_ordinal(text: str) -> int | None:
    """Reads an ordinal up to 99 ("21st", "twenty-first", "thirtieth (30th)", "21"); the figure wins over
    disagreeing words. None when `text` is not one."""
    text = text.strip()
    pair = _PAIR_RE.match(text)
    if pair:
        return _ordinal_figure(pair.group("b")) or _ordinal_figure(pair.group("a"))
    return _ordinal_figure(text) or _ordinal_words(text)


def format_number(value: float) -> str:
    """A number for a display: "30", "12.5", "1,000,000" (no trailing ".0")."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.6f}".rstrip("0").rstrip(".")


def words_disagree(reading: NumberReading) -> str:
    """The note a display carries when words and figure disagree (" (words say 30)"), "" when they agree."""
    if reading.consistent or reading.words is None:
        return ""
    return f" (words say {format_number(reading.words)})"


def _longest_words(words: list[str], start: int) -> tuple[int, float | None]:
    """How many of `words` from `start` on are the longest that read as one number, and its value; (0, None)
    when none does."""
    refused = _first_refused(words, start)
    # Where the whole numbers stop, a fraction may follow: "one-half", "two and one-half".
    for end in (refused + 3, refused + 1):
        if end <= len(words) and words[end - 1] in _FRACTIONS:
            value = _words_value(words[start:end])
            if value is not None:
                return end - start, value
    # Every word before `refused` was accepted: the run is a number unless it ends on "and".
    end = refused - 1 if refused > start and words[refused - 1] == "and" else refused
    if end == start:
        return 0, None
    return end - start, float(_integer_value(words[start:end]))


def _figure_value(figure: str) -> float:
    if figure.count(".") > 1:  # "1.250.000,50": points between thousands, a decimal comma
        return float(figure.replace(".", "").replace(",", "."))
    return float(figure.replace(",", ""))


def _tokens(words: str) -> list[str]:
    return [t.lower() for t in _TOKEN_RE.findall(words)]


def _read_simple(text: str) -> tuple[float, str] | None:
    text = text.strip()
    if _DIGITS_RE.fullmatch(text):
        return _figure_value(text), "digits"
    if _WORDS_RE.fullmatch(text):
        value = _words_value(_tokens(text))
        return (value, "words") if value is not None else None
    return None


def _words_value(tokens: list[str]) -> float | None:
    """The value of number words (lower case), or None when they are not one number ("twenty thirty")."""
    fraction = 0.0
    if len(tokens) >= 2 and tokens[-1] in _FRACTIONS:
        numerator = _UNITS.get(tokens[-2], 0)
        if numerator <= 0:
            return None
        fraction = numerator / _FRACTIONS[tokens[-1]]
        tokens = tokens[:-2]
        if not tokens:
            return fraction
        if tokens[-1] != "and":
            return None
        tokens = tokens[:-1]
    if not tokens or _first_refused(tokens) < len(tokens) or tokens[-1] == "and":
        return None
    return fraction + _integer_value(tokens)


def _first_refused(tokens: list[str], start: int = 0) -> int:
    """The index of the first word from `start` on that the grammar of whole numbers in words refuses;
    len(tokens) if none.

    Units follow nothing or a tens word ("twenty-four"), teens and tens follow nothing or a hundred or a scale,
    "hundred" follows 1-99, each scale ("thousand", "million") follows a number and is smaller than the last,
    "and" follows "hundred" or a scale."""
    current, last_scale, previous = 0, 0, ""
    for index in range(start, len(tokens)):
        token = tokens[index]
        if token == "and":
            ok = previous == "hundred" or previous in _SCALES
        elif token == "zero":
            ok = len(tokens) == start + 1
        elif token in _UNITS:
            ok = current % 100 == 0 or (previous in _TENS and current % 10 == 0)
            current += _UNITS[token]
        elif token in _TEENS or token in _TENS:
            ok = current % 100 == 0
            current += _TEENS.get(token) or _TENS[token]
        elif token == "hundred":
            ok = 1 <= current <= 99
            current *= 100
        elif token in _SCALES:
            ok = current > 0 and (last_scale == 0 or _SCALES[token] < last_scale)
            current, last_scale = 0, _SCALES[token]
        else:
            ok = False
        if not ok:
            return index
        previous = token
    return len(tokens)


def _integer_value(tokens: list[str]) -> int:
    total, current = 0, 0
    for token in tokens:
        if token in _UNITS:
            current += _UNITS[token]
        elif token in _TEENS or token in _TENS:
            current += _TEENS.get(token) or _TENS[token]
        elif token == "hundred":
            current *= 100
        elif token in _SCALES:
            total += current * _SCALES[token]
            current = 0
    return total + current


def _ordinal_figure(text: str) -> int | None:
    match = _ORDINAL_FIGURE_RE.fullmatch(text.strip())
    return int(match.group(1)) if match else None


def _ordinal_words(text: str) -> int | None:
    tokens = [t.lower() for t in _TOKEN_RE.findall(text)]
    if len(tokens) == 1:
        return _ORDINAL_UNITS.get(tokens[0]) or _ORDINAL_TENS.get(tokens[0])
    if len(tokens) == 2 and tokens[0] in _TENS and tokens[1] in _ORDINAL_UNITS and _ORDINAL_UNITS[tokens[1]] < 10:
        return _TENS[tokens[0]] + _ORDINAL_UNITS[tokens[1]]
    return None


_ORDINAL_FIGURE_RE = LazyPattern(rf"(\d{{1,2}}){_ORDINAL_SUFFIX}?")
