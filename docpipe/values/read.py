"""One entry to every reader: `find_values(kind, text)` returns the values of a kind in `text`, in order."""

from __future__ import annotations

from collections.abc import Sequence

from docpipe.values.kinds import Value, check_kind

__all__ = ["find_values"]


def find_values(kind: str, text: str, options: Sequence[str] = ()) -> list[Value]:
    """Returns every value of `kind` written in `text`, in the order they appear (offsets into `text`).

    ``text`` and ``yes_no`` have no reader of words (a sentence is their value; yes/no is a finding), so they
    return nothing; ``choice`` finds the `options` named in `text`, whole words, case-folded."""
    check_kind(kind)
    if kind == "date":
        from docpipe.values.dates import find_dates

        return find_dates(text)
    if kind == "duration":
        from docpipe.values.durations import find_durations

        return find_durations(text)
    if kind == "money":
        from docpipe.values.money import find_money

        return find_money(text)
    if kind == "percent":
        from docpipe.values.money import find_percents

        return find_percents(text)
    if kind == "jurisdiction":
        from docpipe.values.jurisdictions import find_jurisdictions

        return find_jurisdictions(text)
    if kind == "parties":
        from docpipe.values.parties import read_parties

        found = read_parties(text)
        return [found] if found is not None else []
    if kind == "choice":
        return _choices(text, options)
    return []


def _choices(text: str, options: Sequence[str]) -> list[Value]:
    import re

    found = []
    for option in options:
        words = r"\s+".join(re.escape(w) for w in option.split())
        match = re.search(rf"(?<!\w){words}(?!\w)", text, flags=re.IGNORECASE)
        if match:
            found.append(Value("choice", option, option, match.group(0), match.start(), match.end()))
    return sorted(found, key=lambda v: v.start)
