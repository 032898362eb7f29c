"""What a typed grid column holds: its kind, and the normalized value a reader took from a contract's words.

A `Value` is plain data, JSON-ready (`to_dict` / `from_dict`), and carries what a reviewer needs to trust it:
the normalized form she sorts and filters by (`normalized`), how a table shows it (`display`), the words as the
contract wrote them (`as_written`) and where those words are in the text they were read from (`start`, `end`).

Normalized forms, per kind:

- ``date``: ``"2019-05-08"``, or ``"2019-05"`` / ``"2019"`` when the contract gives no more; ``"perpetual"`` for
  an agreement with no end ("perpetual", "until terminated").
- ``duration``: ``{"days": 365, "count": 1, "unit": "year"}`` (days: years 365, months 30, weeks 7, business
  days as days); ``{"perpetual": True}`` for "perpetual".
- ``money``: ``{"amount": 1000000.0, "currency": "USD"}`` (ISO 4217; ``""`` when the words name none).
- ``percent``: ``12.5``.
- ``jurisdiction``: the canonical name, ``"New York"``, ``"Ontario, Canada"``, ``"England and Wales"``.
- ``parties``: ``[{"name": "Acme Corp.", "role": "Supplier"}, ...]`` (role: the defined name, ``""`` if none).
- ``yes_no``: ``True`` / ``False``.
- ``choice``: one of the column's options, as the column spells it.
- ``text``: the decisive sentence.

Imports nothing from docpipe.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["KINDS", "TYPED_KINDS", "Kind", "Value", "check_kind"]

Kind = Literal["text", "yes_no", "date", "duration", "money", "percent", "jurisdiction", "parties", "choice"]
KINDS: tuple[str, ...] = ("text", "yes_no", "date", "duration", "money", "percent", "jurisdiction", "parties", "choice")
#: The kinds whose cells hold a normalized value (``text`` holds the decisive sentence only).
TYPED_KINDS: tuple[str, ...] = tuple(k for k in KINDS if k != "text")


def check_kind(kind: str) -> str:
    """Returns `kind` when it is a column kind; a `ValueError` naming the kinds otherwise."""
    if kind not in KINDS:
        raise ValueError(f"unknown column kind {kind!r}: use one of {', '.join(KINDS)}")
    return kind


@dataclass(frozen=True, slots=True)
class Value:
    """A normalized value read from a contract's words (see the module docstring for each kind's form)."""

    kind: str
    normalized: Any
    display: str
    as_written: str = ""
    start: int = -1  # offsets of `as_written` in the text it was read from; -1 when computed, not read
    end: int = -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Value:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
