"""Reviewer marks: a reviewer's verdict on one cell of a grid (accepted, corrected with the right value, or
flagged), with a comment, who and when; kept per matter, so a rerun of the same grid (same documents, same
column keys) finds them again, and shown in every export of the grid (`docpipe.review.grid.ReviewGrid.marks`).

Layout (folders 0700, files 0600; sealed with the store key when there is one)::

    <home>/matters/<matter>/marks/<doc id>/<sha256 of the column key>.json   the mark and the ones it replaced

A mark is keyed by (matter, document id, column key): the column key is the checklist category's name or the
question itself, which a rerun of the grid gives again. Each cell is its own file, written whole (temp +
rename) under the matter's lock file, so two reviewers marking at once lose neither mark and a reader never
sees half of one. Setting a mark again keeps the marks it replaced (the last `HISTORY` of them, `history`);
clearing it removes the file, history and all. Deleting the matter (``MatterStore.delete_matter``) removes its
folder, and its marks with it. The library's own documents are in the matter ``default``.

>>> import tempfile; marks = MarkStore(Path(tempfile.mkdtemp()))
>>> _ = marks.set("deal-x", "ab" * 32, "Governing law", status="corrected", value="Delaware", user="alice")
>>> mark = marks.marks("deal-x")[("ab" * 32, "Governing law")]
>>> mark.status, mark.value, mark.user
('corrected', 'Delaware', 'alice')
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.access.keys import check_matter_name
from docpipe.errors import ConfigError, StoreError
from docpipe.storage.sealing import open_blob, seal_blob
from docpipe.storage.store import atomic_write, make_private_dir

if TYPE_CHECKING:
    from docpipe.storage.sealing import Sealer
    from docpipe.storage.store import Store

__all__ = [
    "DEFAULT_MATTER",
    "HISTORY",
    "MARK_FIELDS",
    "MARK_LABELS",
    "MARK_STATUSES",
    "MAX_COLUMN_CHARS",
    "MAX_COMMENT_CHARS",
    "MAX_USER_CHARS",
    "MAX_VALUE_CHARS",
    "Mark",
    "MarkStore",
]

logger = logging.getLogger(__name__)

MARK_STATUSES = ("accepted", "corrected", "flagged")
#: How a mark reads beside a cell.
MARK_LABELS = {"accepted": "Accepted", "corrected": "Corrected", "flagged": "Flagged"}
#: The columns of a grid's marks table (the "Marks" sheet, the Markdown section), in order.
MARK_FIELDS = ("Document", "Column", "Mark", "Corrected value", "Comment", "By", "When (UTC)")
#: The matter of the library's and the CLI's own documents (the server's `DEFAULT_MATTER`).
DEFAULT_MATTER = "default"
MAX_COLUMN_CHARS = 2000  # a free question is its own column key; the server takes questions up to 2,000
MAX_VALUE_CHARS = 2000
MAX_COMMENT_CHARS = 4000
MAX_USER_CHARS = 200
#: How many replaced marks a cell keeps (the access log has every one).
HISTORY = 20

_FORMAT = 1
_DOC_ID = re.compile(r"[0-9a-f]{64}")
_FILE = re.compile(r"[0-9a-f]{64}\.json")
# Control characters but tab and line feed: nothing a reviewer types, and they break the XLSX export's XML.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Mark:
    """A reviewer's mark on the cell of `document_id` (SHA-256) in the grid column `column` (its key): the
    `status` (one of `MARK_STATUSES`), the corrected `value` (``corrected`` only, else None), a `comment`, who
    (`user`) and when (`time`, epoch seconds).

    >>> Mark("ab" * 32, "Governing law", "flagged", None, "check Exhibit B", "alice", 0.0).label
    'Flagged'
    """

    document_id: str
    column: str
    status: str
    value: str | None
    comment: str
    user: str
    time: float

    @property
    def label(self) -> str:
        """Returns the status as a reviewer reads it ("Accepted", "Corrected", "Flagged")."""
        return MARK_LABELS.get(self.status, self.status)

    @property
    def text(self) -> str:
        """Returns the mark in one line: status, the corrected value, the comment, who."""
        parts = [self.label + (f": {self.value}" if self.value is not None else "")]
        if self.comment:
            parts.append(self.comment)
        parts.append(f"({self.user})")
        return " - ".join(parts[:-1]) + " " + parts[-1]

    @property
    def when(self) -> str:
        """Returns when the mark was made, in UTC (``2026-12-06T15:40:12Z``)."""
        return datetime.fromtimestamp(self.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Mark:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


class MarkStore:
    """Returns and keeps reviewers' marks per matter under ``<home>/matters/<matter>/marks`` (see the module
    docstring); `sealer` (the store key's, None for none) seals what it writes."""

    def __init__(self, home: Path, *, sealer: Sealer | None = None) -> None:
        self.root = Path(home) / "matters"
        self.sealer = sealer
        self._lock = threading.Lock()

    @classmethod
    def of(cls, store: Store) -> MarkStore:
        """Returns the marks kept beside `store` (a `DocPipe`'s ``dp.store``), sealed as it seals.

        >>> MarkStore.of(dp.store).set("default", doc.id, "Governing law", status="accepted", user="alice")  # doctest: +SKIP
        """
        return cls(store.root, sealer=store.sealer)

    def folder(self, matter: str) -> Path:
        """Returns the matter's marks folder (it may not exist yet)."""
        return self.root / check_matter_name(matter) / "marks"

    def set(
        self,
        matter: str,
        document_id: str,
        column: str,
        *,
        status: str,
        user: str,
        value: str | None = None,
        comment: str = "",
    ) -> Mark:
        """Returns the new mark of the cell after storing it in place of the one it had (kept in `history`).
        ConfigError, saying what to change, for a status not in `MARK_STATUSES`, ``corrected`` without a value,
        a value with another status, a document id that is not a SHA-256 in hex, or text too long."""
        mark = Mark(
            document_id=_doc_id(document_id),
            column=_column(column),
            status=_status(status),
            value=_value(status, value),
            comment=_text(comment, "the comment", MAX_COMMENT_CHARS, empty=True),
            user=_text(user, "the user", MAX_USER_CHARS, empty=False),
            time=time.time(),
        )
        path = self._path(matter, mark.document_id, mark.column)
        with self._locked(matter):
            record = self._read(path)
            history = [] if record is None else [record["mark"], *record.get("history", [])][:HISTORY]
            self._write(path, {"format": _FORMAT, "mark": mark.to_dict(), "history": history})
        return mark

    def clear(self, matter: str, document_id: str, column: str) -> bool:
        """Returns True when the cell had a mark; it is gone (with its history)."""
        path = self._path(matter, _doc_id(document_id), _column(column))
        with self._locked(matter):
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            with _ignored(OSError):
                path.parent.rmdir()  # the document's last mark: its folder goes too (fails when others remain)
        return True

    def get(self, matter: str, document_id: str, column: str) -> Mark | None:
        """Returns the cell's mark, or None."""
        record = self._read(self._path(matter, _doc_id(document_id), _column(column)))
        return None if record is None else Mark.from_dict(record["mark"])

    def history(self, matter: str, document_id: str, column: str) -> list[Mark]:
        """Returns the cell's mark and the marks it replaced, newest first (none when it has no mark)."""
        record = self._read(self._path(matter, _doc_id(document_id), _column(column)))
        if record is None:
            return []
        return [Mark.from_dict(m) for m in [record["mark"], *record.get("history", [])]]

    def marks(self, matter: str, document_ids: Iterable[str] | None = None) -> dict[tuple[str, str], Mark]:
        """Returns the matter's current marks by (document id, column key), of `document_ids` when given."""
        folder = self.folder(matter)
        if document_ids is None:
            try:
                wanted = [n for n in os.listdir(folder) if _DOC_ID.fullmatch(n)]
            except (FileNotFoundError, NotADirectoryError):
                return {}
        else:
            wanted = [d for d in dict.fromkeys(document_ids) if isinstance(d, str) and _DOC_ID.fullmatch(d)]
        found: dict[tuple[str, str], Mark] = {}
        for doc_id in sorted(wanted):
            try:
                names = sorted(n for n in os.listdir(folder / doc_id) if _FILE.fullmatch(n))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for name in names:
                record = self._read(folder / doc_id / name)
                if record is not None:
                    mark = Mark.from_dict(record["mark"])
                    found[(mark.document_id, mark.column)] = mark
        return found

    # -- files -----------------------------------------------------------------------------------------------
    def _path(self, matter: str, document_id: str, column: str) -> Path:
        return self.folder(matter) / document_id / f"{_column_hash(column)}.json"

    def _where(self, path: Path) -> str:
        # What a sealed file is bound to: a mark copied to another cell or matter does not open there.
        return "/".join(path.parts[-4:])

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            blob = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise StoreError(f"cannot read the mark at {path} ({exc.strerror}): check its permissions") from exc
        try:
            record = json.loads(open_blob(blob, self._where(path), self.sealer))
            if not isinstance(record, dict) or not isinstance(record.get("mark"), dict):
                raise ValueError("not a mark record")
            Mark.from_dict(record["mark"])
        except (ValueError, TypeError) as exc:  # SealedDataError is a ValueError; a missing key (StoreKeyError) is not
            logger.warning("unreadable mark %s (%s): left out", path.name, exc)
            return None
        return record

    def _write(self, path: Path, record: dict[str, Any]) -> None:
        body = json.dumps(record, ensure_ascii=False).encode()
        try:
            atomic_write(path, seal_blob(body, self._where(path), self.sealer))
        except OSError as exc:
            raise StoreError(
                f"cannot store the mark ({exc.strerror}): make {self.root} writable", path=str(path)
            ) from exc

    @contextmanager
    def _locked(self, matter: str) -> Iterator[None]:
        folder = self.folder(matter)
        try:
            make_private_dir(folder)
        except OSError as exc:
            raise StoreError(
                f"cannot create the marks folder {folder} ({exc.strerror}): set DOCPIPE_HOME to a writable folder",
                path=str(folder),
            ) from exc
        with self._lock, os.fdopen(os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600), "r+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _ignored(*errors: type[BaseException]) -> Iterator[None]:
    try:
        yield
    except errors:
        pass


def _column_hash(column: str) -> str:
    return hashlib.sha256(column.encode("utf-8")).hexdigest()


# -- checks: every one names the fix ----------------------------------------------------------------------
def _doc_id(document_id: object) -> str:
    if not isinstance(document_id, str) or not _DOC_ID.fullmatch(document_id):
        raise ConfigError(
            f"{str(document_id)[:80]!r} is not a document id: give the 64 lowercase hex characters of the "
            "document's SHA-256 (docpipe ls shows them)"
        )
    return document_id


def _column(column: object) -> str:
    if not isinstance(column, str) or not column.strip():
        raise ConfigError("no column given: name the grid column by its key (the category or the question)")
    return _text(column, "the column key", MAX_COLUMN_CHARS, empty=False, fold=False)


def _status(status: object) -> str:
    if status not in MARK_STATUSES:
        raise ConfigError(f"{str(status)[:40]!r} is not a mark: use {', '.join(MARK_STATUSES)}")
    return str(status)


def _value(status: str, value: object) -> str | None:
    if status != "corrected":
        if value is not None:
            raise ConfigError("a value goes with a correction only: mark the cell corrected, or drop the value")
        return None
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigError("a correction needs the corrected value: give it (e.g. --correct 'Delaware')")
    return _text(value, "the corrected value", MAX_VALUE_CHARS, empty=False)


def _text(text: object, what: str, limit: int, *, empty: bool, fold: bool = True) -> str:
    if not isinstance(text, str):
        raise ConfigError(f"{what} must be text")
    if fold:  # a browser's text box sends CRLF; a column key stays as the grid has it, to match
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not empty and not text.strip():
        raise ConfigError(f"{what} is empty: give it")
    if len(text) > limit:
        raise ConfigError(f"{what} is {len(text)} characters long: keep it under {limit}")
    if _CONTROL.search(text):
        raise ConfigError(f"{what} holds control characters: remove them")
    return text
