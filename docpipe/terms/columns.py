"""Typed columns from what a user writes: ``-q "Governing law?::jurisdiction"`` and a columns file.

A columns file is TOML, one ``[[column]]`` table per column::

    [[column]]
    key = "Law"                          # the header (optional: the question)
    question = "Which law governs this agreement?"
    kind = "jurisdiction"                # text (default), yes_no, date, duration, money, percent,
                                         # jurisdiction, parties, choice
    [[column]]
    question = "Who bears the cost of shipping?"
    kind = "choice"
    options = ["Buyer", "Seller", "Shared"]

    [[column]]
    term = "notice_deadline"             # a built-in key term (see `docpipe terms --list`)

Everything is checked before a grid starts: an unknown key, an unknown kind or term, a choice without options
or options on another kind is refused, naming the file and the line. `column_from_table` applies the same rules,
with the same messages, to one column given as a mapping (a column of a REST request's ``columns``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from docpipe.cells import Column
from docpipe.errors import ConfigError
from docpipe.terms.catalog import KEY_TERMS, key_term, key_term_columns
from docpipe.values.kinds import KINDS

__all__ = ["COLUMN_FIELDS", "MAX_COLUMNS_FILE_BYTES", "column_from_table", "load_columns", "parse_question"]

MAX_COLUMNS_FILE_BYTES = 256 * 1024  # a columns file names columns; anything bigger is not one
#: What a column may say: its header, question, kind, a choice's options, or a built-in key term.
COLUMN_FIELDS: tuple[str, ...] = ("key", "question", "kind", "options", "term")
_FIELDS = COLUMN_FIELDS
_SPEC = re.compile(r"^(?P<question>.*?)::\s*(?P<kind>[a-z_]+)\s*(?:\[(?P<options>[^\]]*)\])?\s*$", re.DOTALL)


def parse_question(text: str) -> tuple[str, str, tuple[str, ...]]:
    """Returns (question, kind, options) of a question as typed: ``"Governing law?::jurisdiction"``,
    ``"Who pays shipping?::choice[Buyer|Seller]"``; a plain question is ``text``. A `ConfigError` names the
    kinds when the kind is unknown."""
    match = _SPEC.match(text)
    if match is None:
        return text, "text", ()
    question, kind = match.group("question").strip(), match.group("kind")
    options = tuple(o.strip() for o in (match.group("options") or "").split("|") if o.strip())
    _check(kind, options, where=f"question {text!r}")
    return question, kind, options


def _check(kind: str, options: tuple[str, ...], *, where: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"{where}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    if kind == "choice" and len(options) < 2:
        raise ConfigError(f'{where}: a choice column needs at least two options, e.g. "...::choice[Buyer|Seller]"')
    if kind != "choice" and options:
        raise ConfigError(f"{where}: options are for a choice column, not a {kind} one")


def load_columns(path: str | Path) -> list[Column]:
    """Returns the columns of a columns file (see the module docstring); a `ConfigError` naming the file and
    line of the first problem."""
    import tomllib

    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the columns file {file}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_COLUMNS_FILE_BYTES:
        raise ConfigError(f"{file} is {len(raw)} bytes: a columns file is at most {MAX_COLUMNS_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file} is not a TOML columns file: {exc}") from exc
    lines = text.splitlines()
    unknown_top = [k for k in data if k != "column"]
    if unknown_top:
        raise ConfigError(
            f"{file}:{_line_of(lines, unknown_top[0], 0)}: unknown key {unknown_top[0]!r}; "
            "a columns file holds [[column]] tables only"
        )
    tables = data.get("column")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{file} has no [[column]] tables: give one per column (key, question, kind, options)")
    starts = [i for i, line in enumerate(lines) if re.match(r"\s*\[\[\s*column\s*\]\]", line)]
    columns = []
    for n, table in enumerate(tables):
        first = starts[n] if n < len(starts) else 0
        where = f"{file}:{first + 1}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: a column is a table of key, question, kind, options")
        for name in table:
            if name not in _FIELDS:
                raise ConfigError(
                    f"{file}:{_line_of(lines, name, first)}: unknown key {name!r} in a column; use {', '.join(_FIELDS)}"
                )
        columns.append(_column(table, where))
    return columns


def column_from_table(table: Mapping[str, Any], *, where: str) -> Column:
    """Returns the column a mapping of `COLUMN_FIELDS` describes, checked as a columns file's ``[[column]]``
    table is (the same rules and messages); a `ConfigError` starting with `where` names the first problem.

    >>> column_from_table({"question": "Who pays shipping?", "kind": "choice", "options": ["Buyer", "Seller"]},
    ...                   where="columns[0]").options
    ('Buyer', 'Seller')
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: a column is a table of key, question, kind, options")
    for name in table:
        if name not in _FIELDS:
            raise ConfigError(f"{where}: unknown key {name!r} in a column; use {', '.join(_FIELDS)}")
    return _column(table, where)


def _column(table: Mapping[str, Any], where: str) -> Column:
    values = {name: table.get(name) for name in _FIELDS}
    for name in ("key", "question", "kind", "term"):
        if values[name] is not None and not isinstance(values[name], str):
            raise ConfigError(f"{where}: {name} must be a string")
    options = values["options"] or []
    if not isinstance(options, list) or not all(isinstance(o, str) and o.strip() for o in options):
        raise ConfigError(f"{where}: options must be a list of non-empty strings")
    if values["term"]:
        try:
            key_term(values["term"])
        except KeyError:
            raise ConfigError(
                f"{where}: unknown term {values['term']!r}; the key terms are {', '.join(t.id for t in KEY_TERMS)}"
            ) from None
        extra = [n for n in ("question", "kind", "options") if values[n]]
        if extra:
            raise ConfigError(f"{where}: a key term column takes only key (its header), not {', '.join(extra)}")
        column = key_term_columns([values["term"]])[0]
        return Column(**{**column.to_dict(), "key": values["key"] or column.key, "options": ()})
    question = " ".join((values["question"] or "").split())
    if not question:
        raise ConfigError(f"{where}: a column needs a question (or a term)")
    kind = values["kind"] or "text"
    _check(kind, tuple(options), where=where)
    return Column(values["key"] or question, question, question, kind=kind, options=tuple(options))


def _line_of(lines: list[str], key: str, after: int) -> int:
    for i in range(after, len(lines)):
        if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", lines[i]):
            return i + 1
    return after + 1
