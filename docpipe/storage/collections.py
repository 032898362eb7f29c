"""Collections: named sets of stored documents (a deal's data room, a supplier portfolio), kept as records
beside the content-addressed store. A document may be in several collections and is extracted and embedded
once whatever the number; a collection holds only each member's id, the name it goes by there, when it was
added and its page count.

Layout (folders 0700, files 0600)::

    <root>/<name>/collection.json      name, created, next slot, members (id, name, added, pages, slot)
    <root>/<name>/index-<fingerprint>/  the collection's own index (docpipe.retrieve.collection)

`<root>` is ``<home>/collections`` for the library and the CLI, and a matter's folder on a shared server, so
the collections of one matter are invisible to another. Changes are read-modify-write under a file lock, so
two processes adding to one collection lose neither's documents.

>>> import tempfile; collections = CollectionStore(Path(tempfile.mkdtemp()))
>>> collections.add("deal-x", [Member("ab" * 32, "msa.pdf", pages=12)])
(['abababababababababababababababababababababababababababababababab'], [])
>>> [m.name for m in collections.members("deal-x")], collections.names()
(['msa.pdf'], ['deal-x'])
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from docpipe.errors import ConfigError, StoreError
from docpipe.storage.store import atomic_write, make_private_dir

__all__ = ["CollectionStore", "Member", "check_collection_name"]

logger = logging.getLogger(__name__)

_FORMAT = 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_DOC_ID = re.compile(r"[0-9a-f]{64}")
_RECORD = "collection.json"


def check_collection_name(name: object) -> str:
    """Returns `name` when it can name a collection: 1-63 letters, digits, ``.``, ``_`` or ``-``, starting
    with a letter or digit; raises a `ConfigError` that says so otherwise (a name is also a folder name, so
    nothing that could leave the collections folder passes).

    >>> check_collection_name("deal-x")
    'deal-x'
    >>> check_collection_name("../x")
    Traceback (most recent call last):
    docpipe.errors.ConfigError: '../x' is not a collection name: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. deal-x or portfolio.2026)
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"{str(name)[:80]!r} is not a collection name: use 1-63 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (e.g. deal-x or portfolio.2026)"
        )
    return name


@dataclass(slots=True)
class Member:
    """A document as one collection knows it: id (SHA-256), the name it goes by there, when it was added,
    its page count, and its slot (a small number unique in the collection, for the collection's index)."""

    id: str
    name: str
    added: float = field(default_factory=time.time)
    pages: int = 0
    slot: int = -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class CollectionStore:
    """Returns and keeps the collections' member records under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()

    def folder(self, name: str) -> Path:
        """Returns the collection's folder (it may not exist yet)."""
        return self.root / check_collection_name(name)

    def names(self) -> list[str]:
        """Returns the names of the collections, sorted."""
        try:
            entries = os.listdir(self.root)
        except FileNotFoundError:
            return []
        return sorted(n for n in entries if _NAME.fullmatch(n) and (self.root / n / _RECORD).is_file())

    def exists(self, name: str) -> bool:
        return (self.folder(name) / _RECORD).is_file()

    def members(self, name: str) -> list[Member]:
        """Returns the collection's members in the order they were added (none for an unknown collection)."""
        return [Member.from_dict(m) for m in self._read(name)["members"]]

    def record(self, name: str) -> dict[str, Any]:
        """Returns the collection's record: name, created, members (as dicts)."""
        return self._read(name)

    def create(self, name: str) -> bool:
        """Creates an empty collection; returns False when it existed already (it is left as it is)."""
        with self._editing(name) as record:
            return bool(record.get("_new"))

    def add(self, name: str, members: list[Member]) -> tuple[list[str], list[str]]:
        """Adds `members` (creating the collection when needed); returns (ids added, ids already members).
        A member already present keeps its name and slot."""
        added: list[str] = []
        present: list[str] = []
        with self._editing(name) as record:
            known = {m["id"] for m in record["members"]}
            for member in members:
                if not _DOC_ID.fullmatch(member.id):
                    raise ConfigError(f"{member.id[:80]!r} is not a document id (a SHA-256 in hex)")
                if member.id in known:
                    present.append(member.id)
                    continue
                member.slot = record["next_slot"]
                record["next_slot"] += 1
                record["members"].append(member.to_dict())
                known.add(member.id)
                added.append(member.id)
        return added, present

    def remove(self, name: str, doc_ids: list[str]) -> list[str]:
        """Removes the documents from the collection (not from the store); returns the ids that were members."""
        gone = set(doc_ids)
        removed: list[str] = []
        if not self.exists(name):
            return removed
        with self._editing(name) as record:
            kept = []
            for member in record["members"]:
                if member["id"] in gone:
                    removed.append(member["id"])
                else:
                    kept.append(member)
            record["members"] = kept
        return removed

    def delete(self, name: str) -> bool:
        """Deletes the collection's record and index (its documents stay in the store); False when unknown."""
        folder = self.folder(name)
        if not folder.exists():
            return False
        tomb = folder.with_name(f".{name}.deleted-{uuid.uuid4().hex}")
        try:
            os.rename(folder, tomb)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreError(
                f"cannot delete collection {name} ({exc.strerror}): make {self.root} writable", path=str(folder)
            ) from exc
        shutil.rmtree(tomb, ignore_errors=True)
        return True

    def containing(self, doc_id: str) -> list[str]:
        """Returns the names of the collections that hold the document."""
        return [n for n in self.names() if any(m["id"] == doc_id for m in self._read(n)["members"])]

    # -- records ---------------------------------------------------------------------------
    def _read(self, name: str) -> dict[str, Any]:
        path = self.folder(name) / _RECORD
        try:
            record = json.loads(path.read_bytes())
            if not isinstance(record, dict) or not isinstance(record.get("members"), list):
                raise ValueError("not a collection record")
        except FileNotFoundError:
            return {
                "format": _FORMAT,
                "name": name,
                "created": time.time(),
                "next_slot": 0,
                "members": [],
                "_new": True,
            }
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"the record of collection {name} at {path} is unreadable ({exc}): restore it from a backup, or "
                f"delete the folder and add the documents again (they stay in the store)",
                path=str(path),
            ) from exc
        record.setdefault("next_slot", 1 + max((m.get("slot", -1) for m in record["members"]), default=-1))
        return record

    @contextmanager
    def _editing(self, name: str) -> Iterator[dict[str, Any]]:
        folder = self.folder(name)
        try:
            make_private_dir(folder)
        except OSError as exc:
            raise StoreError(
                f"cannot create collection {name} at {folder} ({exc.strerror}): set DOCPIPE_HOME to a writable folder",
                path=str(folder),
            ) from exc
        with self._lock, os.fdopen(os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600), "r+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                record = self._read(name)
                yield record
                record.pop("_new", None)
                atomic_write(folder / _RECORD, json.dumps(record, indent=1).encode())
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
