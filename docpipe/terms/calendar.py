"""A review grid's deadlines as an iCalendar file (RFC 5545) a reviewer imports into her calendar.

Which cells become events (`deadline_label` decides per column): a cell of a column whose `term` is
``expiration_date`` ("Expires: <document>") or ``notice_deadline`` ("Last day to give notice of non-renewal:
<document>"), or of a ``date`` column whose term contains ``deadline`` or ``expir`` (the column's header then
names the event). A column without a term is not a deadline, whatever its kind: an effective date is a date,
not something to act on. The cell must be ``present`` (a verified quote backs it) and its value a whole date
(``2019-05-08``): a month or a year alone (``2019-05``, ``2019``) and ``perpetual`` name no day, so they are
left out, as are cells not found, uncertain or failed.

Each event is an all-day VEVENT (DTSTART a date, DTEND the next day, free time) with
- UID: a hash of the document id, the term and the date, so importing the file again updates the events
  instead of adding copies (a re-review that finds another date makes another event);
- DESCRIPTION: the document (name and SHA-256), each verified quote's clause heading, section and pages, the
  derivation of a computed date, and the words quoted;
- for a deadline (``notice_deadline`` and the terms that contain ``deadline``), a VALARM that shows a reminder
  `remind_days` days before (14 by default: time to decide and to send a notice; 0 for none).

Contract text (document names, headings, quotes) is data: the `icalendar` library escapes commas, semicolons,
backslashes and line breaks, and the control characters RFC 5545 forbids are dropped first, so a name such as
``"x\\r\\nBEGIN:VEVENT"`` stays inside its property.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from docpipe.errors import DependencyError
from docpipe.version import __version__

if TYPE_CHECKING:
    from docpipe.cells import Cell, Column, Row
    from docpipe.values.kinds import Value

__all__ = ["DEFAULT_REMIND_DAYS", "PRODID", "Grid", "calendar_date", "deadline_label", "deadlines_ics"]

#: The reminder before a notice deadline: two weeks to decide whether to renew and to send the notice.
DEFAULT_REMIND_DAYS = 14
PRODID = f"-//docpipe//docpipe {__version__}//EN"

_LABELS = {
    "expiration_date": "Expires",
    "notice_deadline": "Last day to give notice of non-renewal",
}
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# RFC 5545 text holds no control character but the tab (line breaks are escaped by the library).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff\ud800-\udfff]")


class Grid(Protocol):
    """What `deadlines_ics` reads of a grid: `docpipe.review.grid.ReviewGrid` is one (the key terms sit below
    the review layer, so they name its shape, not its class)."""

    @property
    def rows(self) -> Sequence[Row]: ...
    @property
    def columns(self) -> Sequence[Column]: ...
    @property
    def cells(self) -> Sequence[Sequence[Cell]]: ...


def calendar_date(value: Value | None) -> date | None:
    """Returns the day a ``date`` value names; None for a partial date (``2019-05``, ``2019``), ``perpetual``,
    another kind or no value.

    >>> from docpipe.values.kinds import Value
    >>> calendar_date(Value("date", "2019-05-08", "8 May 2019")), calendar_date(Value("date", "2019-05", "May 2019"))
    (datetime.date(2019, 5, 8), None)
    """
    if value is None or value.kind != "date" or not isinstance(value.normalized, str):
        return None
    if not _ISO_DATE.fullmatch(value.normalized):
        return None
    try:
        return date.fromisoformat(value.normalized)
    except ValueError:  # 2019-02-30
        return None


def deadline_label(column: Column) -> str | None:
    """Returns how an event of `column` is named ("Expires", "Last day to give notice of non-renewal", or the
    column's header for another deadline term), or None when its cells are not deadlines (module docstring)."""
    if column.term in _LABELS:
        return _LABELS[column.term]
    term = column.term.lower()
    if column.kind == "date" and ("deadline" in term or "expir" in term):
        return column.key
    return None


def deadlines_ics(grid: Grid, *, remind_days: int = DEFAULT_REMIND_DAYS, stamp: datetime | None = None) -> bytes:
    """Returns an iCalendar file of the grid's deadlines: an all-day event per present cell with a whole date
    of a deadline column (see the module docstring), in row then column order.

    `stamp` is the DTSTAMP of every event (now, in UTC, by default); `remind_days` the days before a notice
    deadline its reminder shows (0: no reminder).

    >>> ics = deadlines_ics(grid)                                          # doctest: +SKIP
    >>> Path("deadlines.ics").write_bytes(ics)                             # doctest: +SKIP
    """
    try:
        from icalendar import Alarm, Calendar, Event
    except ImportError as exc:  # a dependency of docpipe: missing only in a broken install
        raise DependencyError("icalendar is missing: pip install icalendar (a dependency of docpipe)") from exc

    stamp = (stamp or datetime.now(UTC)).astimezone(UTC)
    calendar = Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("method", "PUBLISH")
    seen: set[str] = set()
    for row, cells in zip(grid.rows, grid.cells):
        for column, cell in zip(grid.columns, cells):
            label = deadline_label(column)
            day = calendar_date(cell.value) if cell.status == "present" else None
            if label is None or day is None:
                continue
            uid = _uid(row.document_id, column.term, day)
            if uid in seen:  # the same deadline asked twice (two columns of one term)
                continue
            seen.add(uid)
            summary = _line(f"{label}: {row.name}")
            event = Event()
            event.add("uid", uid)
            event.add("dtstamp", stamp)
            event.add("dtstart", day)
            event.add("dtend", day + timedelta(days=1))
            event.add("transp", "TRANSPARENT")  # a day to remember, not a day taken
            event.add("summary", summary)
            event.add("description", _description(row, column, cell))
            if remind_days > 0 and "deadline" in column.term.lower():
                alarm = Alarm()
                alarm.add("action", "DISPLAY")
                alarm.add("trigger", timedelta(days=-remind_days))
                alarm.add("description", _line(f"In {remind_days} days: {summary}"))
                event.add_component(alarm)
            calendar.add_component(event)
    data: bytes = calendar.to_ical()
    return data


def _uid(document_id: str, term: str, day: date) -> str:
    digest = hashlib.sha256(f"{document_id}\x1f{term}\x1f{day.isoformat()}".encode()).hexdigest()
    return f"{digest[:32]}@docpipe"


def _text(text: str) -> str:
    return _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def _line(text: str) -> str:
    return " ".join(_text(text).split())


def _description(row: Row, column: Column, cell: Cell) -> str:
    lines = [f"Document: {_line(row.name)}", f"SHA-256: {row.document_id}", f"Column: {_line(column.key)}"]
    if cell.value is not None and cell.value.as_written:
        lines.append(f"As written: {_line(cell.value.as_written)}")
    if cell.derivation:
        lines.append(f"Computed: {_line(cell.derivation)}")
    for quote in cell.verified:
        where = ", ".join(
            part
            for part in (_line(quote.heading), f"section {quote.section_id}" if quote.section_id else "", quote.pages)
            if part
        )
        lines.append("")
        lines.append((f"{where}:" if where else "Quote:") + (" (OCR: check the scan)" if quote.ocr else ""))
        lines.append(f"\u201c{_line(quote.quote)}\u201d")
    return _text("\n".join(lines))
