"""Computed key terms from a row's verified values (what a model's grid gets instead of an unverifiable date)."""

from __future__ import annotations

from docpipe.cells import Cell
from docpipe.terms.catalog import key_term_columns
from docpipe.terms.derive import derive_row
from docpipe.types import Citation
from docpipe.values.kinds import Value


def _quote(text: str, page: int) -> Citation:
    return Citation("s001", "Term", page, page, text, verified=True)


def _row(**cells: Cell) -> tuple[list, list[Cell]]:
    columns = key_term_columns(
        ["effective_date", "initial_term", "expiration_date", "notice_period", "notice_deadline"]
    )
    return columns, [cells.get(c.term, Cell("uncertain", note="the model's date is in no quote")) for c in columns]


def test_a_models_row_gets_its_expiration_and_deadline_computed_with_their_quotes():
    columns, cells = _row(
        effective_date=Cell(
            "present", quotes=[_quote("as of May 8, 2014", 1)], value=Value("date", "2014-05-08", "2014-05-08")
        ),
        initial_term=Cell(
            "present",
            quotes=[_quote("for five (5) years", 4)],
            value=Value("duration", {"days": 1825, "count": 5, "unit": "year"}, "5 years"),
        ),
        notice_period=Cell(
            "present",
            quotes=[_quote("ninety (90) days prior", 4)],
            value=Value("duration", {"days": 90, "count": 90, "unit": "day"}, "90 days"),
        ),
    )
    derive_row(columns, cells)
    expiration, deadline = cells[2], cells[4]
    assert (expiration.status, expiration.value.normalized) == ("present", "2019-05-08")
    assert expiration.derivation == "2014-05-08 + 5 years = 2019-05-08"
    assert [q.page_start for q in expiration.quotes] == [1, 4]
    assert (deadline.value.normalized, deadline.derivation) == ("2019-02-07", "2019-05-08 - 90 days = 2019-02-07")


def test_nothing_is_computed_from_values_that_are_not_verified_or_not_there():
    columns, cells = _row(
        effective_date=Cell("uncertain", note="the quote does not give it", value=None),
        initial_term=Cell(
            "present",
            quotes=[_quote("for five (5) years", 4)],
            value=Value("duration", {"days": 1825, "count": 5, "unit": "year"}, "5 years"),
        ),
    )
    derive_row(columns, cells)
    assert cells[2].status == "uncertain" and cells[2].value is None
    assert cells[4].status == "uncertain" and cells[4].value is None


def test_a_value_the_row_already_has_is_kept():
    kept = Cell(
        "present", quotes=[_quote("expires on June 30, 2020", 3)], value=Value("date", "2020-06-30", "2020-06-30")
    )
    columns, cells = _row(
        effective_date=Cell(
            "present", quotes=[_quote("May 8, 2014", 1)], value=Value("date", "2014-05-08", "2014-05-08")
        ),
        initial_term=Cell(
            "present",
            quotes=[_quote("five (5) years", 4)],
            value=Value("duration", {"days": 1825, "count": 5, "unit": "year"}, "5 years"),
        ),
        expiration_date=kept,
    )
    derive_row(columns, cells)
    assert cells[2] is kept
