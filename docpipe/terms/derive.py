"""Computed key terms from the verified values of a row: the expiration from the start and the initial term, the
last day for notice from the expiration and the notice period.

Offline, the readers compute them as they read (`docpipe.terms.term_clause`). With a language model each key term
is its own cell, and a computed date is in no quote, so the model's value for it cannot be checked against one
and is never shown as a fact; `derive_row` computes it instead, in code, from the row's verified values, with the
working in `Cell.derivation` and the quotes of every value it used. A cell that already has a value is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpipe.cells import Cell, Column
from docpipe.terms.term_clause import moved
from docpipe.values.dates import subtract_days
from docpipe.values.kinds import Value

__all__ = ["derive_row"]


def derive_row(columns: Sequence[Column], cells: list[Cell]) -> None:
    """Fills, in place, row `cells`' expiration and notice deadline (columns by `Column.term`) when they have no
    value and the values they are computed from are there (see the module docstring)."""
    at = {column.term: c for c, column in enumerate(columns) if column.term}

    def value(term: str) -> Cell | None:
        cell = cells[at[term]] if term in at else None
        return cell if cell is not None and cell.value is not None and cell.status == "present" else None

    if "expiration_date" in at and value("expiration_date") is None:
        start, term = value("effective_date") or value("agreement_date"), value("initial_term")
        if start is not None and term is not None and start.value is not None and term.value is not None:
            duration = term.value.normalized
            end = None
            if isinstance(duration, dict) and "count" in duration:
                end = moved(str(start.value.normalized), int(duration["count"]), str(duration["unit"]))
            if end is not None:
                cells[at["expiration_date"]] = _computed(
                    end, f"{start.value.normalized} + {term.value.display} = {end}", start, term
                )
    if "notice_deadline" in at and value("notice_deadline") is None:
        expiration, notice = value("expiration_date"), value("notice_period")
        if expiration is not None and notice is not None and expiration.value is not None and notice.value is not None:
            ends, days = str(expiration.value.normalized), notice.value.normalized
            if len(ends) == 10 and isinstance(days, dict) and days.get("days"):
                last = subtract_days(ends, int(days["days"]))
                cells[at["notice_deadline"]] = _computed(
                    last, f"{ends} - {int(days['days'])} days = {last}", expiration, notice
                )


def _computed(date: str, derivation: str, *used: Cell) -> Cell:
    quotes = [q for cell in used for q in cell.quotes]
    return Cell(
        "present",
        quotes=quotes,
        note="Computed from the verified values of this row's other key terms.",
        searched=list(dict.fromkeys(s for cell in used for s in cell.searched)),
        value=Value("date", date, date),
        derivation=derivation,
    )
