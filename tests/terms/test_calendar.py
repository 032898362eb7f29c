"""A grid's deadlines as an iCalendar file, parsed back with the icalendar library: one all-day event per
present, whole-date cell of a deadline column, its summary naming the document, its description citing the
clause, pages, derivation and quote; stable UIDs; a reminder before a notice deadline; nothing from partial
dates, "perpetual", uncertain cells or columns that are not deadlines; and contract text that tries to start
an event of its own stays inside its property."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from icalendar import Calendar

from docpipe.review.grid import Cell, Column, ReviewGrid, ReviewManifest, Row
from docpipe.terms.calendar import DEFAULT_REMIND_DAYS, PRODID, calendar_date, deadline_label, deadlines_ics
from docpipe.types import Citation
from docpipe.values.kinds import Value

ACME, BETA, GAMMA = "a" * 64, "b" * 64, "c" * 64
STAMP = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)

EXPIRES = Column("Expiration date", "When does it expire?", "expire", kind="date", term="expiration_date")
NOTICE = Column("Last day for notice", "Last day for notice?", "notice", kind="date", term="notice_deadline")
OPTION = Column("Option deadline", "Option?", "option", kind="date", term="option_exercise_deadline")
EFFECTIVE = Column("Effective date", "Effective?", "effective", kind="date", term="effective_date")
FREE_DATE = Column("When is the deadline?", "When is the deadline?", "deadline", kind="date")
RENEWS = Column("Renews automatically", "Renews?", "renew", kind="yes_no", term="auto_renewal")
COLUMNS = [EXPIRES, NOTICE, OPTION, EFFECTIVE, FREE_DATE, RENEWS]


def quote(text: str, *, heading: str = "12. Term and Renewal", section: str = "s012", pages: tuple[int, int] = (3, 3)):
    return Citation(
        section_id=section, heading=heading, page_start=pages[0], page_end=pages[1], quote=text, verified=True
    )


def dated(normalized: str, *, status: str = "present", derivation: str = "", quotes: list[Citation] | None = None):
    quotes = quotes if quotes is not None else [quote(f"This Agreement ends on {normalized}.")]
    value = Value("date", normalized, normalized, as_written=f"as written {normalized}")
    return Cell(status=status, quotes=quotes, value=value, derivation=derivation)  # type: ignore[arg-type]


def grid(rows: list[Row] | None = None, cells: list[list[Cell]] | None = None) -> ReviewGrid:
    rows = rows or [Row(ACME, "acme-supply.pdf"), Row(BETA, "beta-license.pdf"), Row(GAMMA, "gamma-nda.pdf")]
    unverified = Citation("s001", "1. Term", 1, 1, "ends on 2031-01-01", verified=False)
    cells = cells or [
        [
            dated(
                "2027-03-31",
                derivation="2022-03-31 + 5 years = 2027-03-31",
                quotes=[
                    quote("The initial term is five (5) years from the Effective Date."),
                    quote("Notices go to the addresses above.", heading="20. Notices", section="s020", pages=(9, 10)),
                    unverified,
                ],
            ),
            dated("2027-01-30", derivation="2027-03-31 - 60 days = 2027-01-30"),
            dated("2026-06-15"),
            dated("2022-03-31"),  # an effective date: a date, not a deadline
            dated("2026-07-01"),  # a date column without a term: not a deadline
            Cell(status="present", value=Value("yes_no", True, "Yes")),
        ],
        [
            dated("2027-05"),  # a month names no day
            dated("2026-11-30", status="uncertain"),
            Cell(status="not_found"),
            Cell(status="not_found"),
            Cell(status="not_found"),
            Cell(status="absent"),
        ],
        [
            dated("perpetual"),
            dated("2026-02-30"),  # no such day
            Cell(status="failed", note="engine failed"),
            dated("2019"),
            Cell(status="not_found"),
            Cell(status="not_found"),
        ],
    ]
    manifest = ReviewManifest(
        engine="echo",
        model=None,
        model_revision=None,
        mode="extractive",
        layout="shared",
        prompt_version="1",
        settings_fingerprint="f",
        index_fingerprint="i",
    )
    columns = COLUMNS[: len(cells[0])]
    return ReviewGrid(rows=rows, columns=columns, cells=cells, manifest=manifest)


def events(ics: bytes) -> dict[str, object]:
    calendar = Calendar.from_ical(ics)
    return {str(e["summary"]): e for e in calendar.walk("VEVENT")}


def test_present_whole_dates_of_deadline_columns_become_all_day_events() -> None:
    ics = deadlines_ics(grid(), stamp=STAMP)
    calendar = Calendar.from_ical(ics)
    assert str(calendar["prodid"]) == PRODID and "docpipe" in PRODID and str(calendar["version"]) == "2.0"
    found = events(ics)
    assert sorted(found) == [
        "Expires: acme-supply.pdf",
        "Last day to give notice of non-renewal: acme-supply.pdf",
        "Option deadline: acme-supply.pdf",
    ]
    expires = found["Expires: acme-supply.pdf"]
    assert expires.decoded("dtstart") == date(2027, 3, 31) and expires.decoded("dtend") == date(2027, 4, 1)
    assert type(expires.decoded("dtstart")) is date  # all day, not a time
    assert expires.decoded("dtstamp") == STAMP and str(expires["transp"]) == "TRANSPARENT"
    assert found["Option deadline: acme-supply.pdf"].decoded("dtstart") == date(2026, 6, 15)


def test_a_description_cites_the_document_clauses_pages_derivation_and_quote() -> None:
    description = str(events(deadlines_ics(grid(), stamp=STAMP))["Expires: acme-supply.pdf"]["description"])
    assert "Document: acme-supply.pdf" in description and f"SHA-256: {ACME}" in description
    assert "Computed: 2022-03-31 + 5 years = 2027-03-31" in description
    assert "As written: as written 2027-03-31" in description
    assert "12. Term and Renewal, section s012, p. 3:" in description
    assert "\u201cThe initial term is five (5) years from the Effective Date.\u201d" in description
    assert "20. Notices, section s020, pp. 9-10:" in description
    assert "2031-01-01" not in description  # an unverified quote is not cited


def test_a_notice_deadline_has_a_reminder_before_it_and_an_expiry_none() -> None:
    found = events(deadlines_ics(grid(), stamp=STAMP))
    (alarm,) = found["Last day to give notice of non-renewal: acme-supply.pdf"].walk("VALARM")
    assert DEFAULT_REMIND_DAYS == 14 and alarm.decoded("trigger") == timedelta(days=-14)
    assert str(alarm["action"]) == "DISPLAY" and "In 14 days: Last day to give notice" in str(alarm["description"])
    assert found["Option deadline: acme-supply.pdf"].walk("VALARM")  # a deadline term: reminded too
    assert found["Expires: acme-supply.pdf"].walk("VALARM") == []
    later = events(deadlines_ics(grid(), stamp=STAMP, remind_days=30))
    (alarm,) = later["Last day to give notice of non-renewal: acme-supply.pdf"].walk("VALARM")
    assert alarm.decoded("trigger") == timedelta(days=-30)
    none = events(deadlines_ics(grid(), stamp=STAMP, remind_days=0))
    assert all(e.walk("VALARM") == [] for e in none.values())


def test_uids_are_stable_across_exports_and_distinct_per_deadline() -> None:
    first = events(deadlines_ics(grid(), stamp=STAMP))
    second = events(deadlines_ics(grid(), stamp=STAMP + timedelta(days=3)))
    uids = {summary: str(e["uid"]) for summary, e in first.items()}
    assert uids == {summary: str(e["uid"]) for summary, e in second.items()}
    assert len(set(uids.values())) == 3 and all(uid.endswith("@docpipe") for uid in uids.values())
    moved = grid()
    moved.cells[0][0] = dated("2028-03-31")
    assert str(events(deadlines_ics(moved))["Expires: acme-supply.pdf"]["uid"]) != uids["Expires: acme-supply.pdf"]


def test_the_same_deadline_asked_twice_is_one_event() -> None:
    twice = grid(rows=[Row(ACME, "acme.pdf")], cells=[[dated("2027-03-31"), dated("2027-01-30")]])
    twice.columns[1] = EXPIRES
    assert len(events(deadlines_ics(twice))) == 1


def test_a_grid_without_deadlines_is_an_empty_calendar() -> None:
    empty = grid(rows=[Row(ACME, "acme.pdf")], cells=[[dated("2027-05")]])
    calendar = Calendar.from_ical(deadlines_ics(empty))
    assert calendar.walk("VEVENT") == [] and str(calendar["prodid"]) == PRODID


def test_contract_text_cannot_start_an_event_of_its_own() -> None:
    name = 'Evil, Inc.; "draft"\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:pwned\r\nSUMMARY:pwned\\n\x00\x7f.pdf'
    heading = "4. Term; Renewal, Notice\nBEGIN:VALARM"
    text = "ends on 31 March 2027; unless, renewed\r\nEND:VCALENDAR"
    cells = [[dated("2027-03-31", quotes=[quote(text, heading=heading)])]]
    ics = deadlines_ics(grid(rows=[Row(ACME, name)], cells=cells), stamp=STAMP)
    lines = ics.split(b"\r\n")  # a folded line goes on after CRLF and a space: never a property of its own
    assert [line for line in lines if line.startswith((b"BEGIN:", b"END:", b"UID:"))] == [
        b"BEGIN:VCALENDAR",
        b"BEGIN:VEVENT",
        b"UID:" + str(Calendar.from_ical(ics).walk("VEVENT")[0]["uid"]).encode(),
        b"END:VEVENT",
        b"END:VCALENDAR",
    ]
    assert b"\x00" not in ics and b"\x7f" not in ics
    calendar = Calendar.from_ical(ics)
    (event,) = calendar.walk("VEVENT")
    assert calendar.walk("VALARM") == []
    assert (
        str(event["summary"]) == 'Expires: Evil, Inc.; "draft" END:VEVENT BEGIN:VEVENT UID:pwned SUMMARY:pwned\\n.pdf'
    )
    assert str(event["uid"]).endswith("@docpipe")
    description = str(event["description"])
    assert "4. Term; Renewal, Notice BEGIN:VALARM, section s012, p. 3:" in description
    assert "\u201cends on 31 March 2027; unless, renewed END:VCALENDAR\u201d" in description


@pytest.mark.parametrize(
    ("value", "day"),
    [
        (Value("date", "2019-05-08", "8 May 2019"), date(2019, 5, 8)),
        (Value("date", "2019-05", "May 2019"), None),
        (Value("date", "2019", "2019"), None),
        (Value("date", "perpetual", "perpetual"), None),
        (Value("date", "2019-02-30", "30 Feb 2019"), None),
        (Value("date", "20190508", "20190508"), None),
        (Value("duration", {"days": 30}, "30 days"), None),
        (None, None),
    ],
)
def test_only_a_whole_date_names_a_calendar_day(value: Value | None, day: date | None) -> None:
    assert calendar_date(value) == day


def test_which_columns_are_deadlines() -> None:
    assert [deadline_label(c) for c in COLUMNS] == [
        "Expires",
        "Last day to give notice of non-renewal",
        "Option deadline",
        None,
        None,
        None,
    ]
    assert deadline_label(Column("Licence expiry", "?", "?", kind="date", term="licence_expiry")) == "Licence expiry"
    assert deadline_label(Column("Deadline", "?", "?", kind="text", term="filing_deadline")) is None
