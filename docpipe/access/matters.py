"""Matters: which documents belong to which matter, under which name, uploaded by whom and when.

The store underneath is content-addressed and shared (the same bytes are extracted and embedded once), but
what anyone can see goes through a matter's own record of the document: its display name, when it was
added and by whom, and which keys proved an encrypted PDF's password. The same bytes uploaded into two
matters are two records; neither matter learns of the other's.

Layout (folders 0700, files 0600)::

    <home>/matters/<matter>/matter.json               created, by whom
    <home>/matters/<matter>/documents/<doc id>.json   name, added, added_by, encrypted, granted key ids

>>> import tempfile; matters = MatterStore(Path(tempfile.mkdtemp()))
>>> _ = matters.add("deal-x", "ab" * 32, name="msa.pdf", user="alice", key_id="k1", encrypted=False)
>>> [d.name for d in matters.documents("deal-x")], matters.get("other", "ab" * 32)
(['msa.pdf'], None)
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from docpipe.access.keys import check_matter_name
from docpipe.errors import StoreError
from docpipe.storage.store import atomic_write, make_private_dir

__all__ = ["MatterDocument", "MatterStore"]

logger = logging.getLogger(__name__)

_DOC_ID = re.compile(r"^[0-9a-f]{64}$")


@dataclass(slots=True)
class MatterDocument:
    """One matter's record of a document: what that matter's users see of it (name, when, who, grants)."""

    id: str
    name: str
    added: float
    added_by: str
    encrypted: bool = False
    # Key ids (and "workbench:<user>") that proved the password of an encrypted PDF in this matter.
    granted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatterDocument:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class MatterStore:
    """Returns and keeps the matters' document records under ``<root>/matters``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "matters"
        self._lock = threading.Lock()

    def _folder(self, matter: str) -> Path:
        return self.root / check_matter_name(matter)

    def _doc_path(self, matter: str, doc_id: str) -> Path | None:
        if not isinstance(doc_id, str) or not _DOC_ID.match(doc_id):
            return None
        return self._folder(matter) / "documents" / f"{doc_id}.json"

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        try:
            make_private_dir(path.parent)
            atomic_write(path, json.dumps(data, ensure_ascii=False).encode())
        except OSError as exc:
            raise StoreError(f"cannot write the matter record: {exc.strerror or exc}", path=str(path)) from exc

    # -- matters ---------------------------------------------------------------------------
    def matters(self) -> list[str]:
        """Returns every matter that has a folder, sorted."""
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        except FileNotFoundError:
            return []

    def ensure(self, matter: str, *, user: str) -> None:
        """Creates the matter's record on first use (who opened it, when)."""
        path = self._folder(matter) / "matter.json"
        if not path.exists():
            self._write(path, {"name": matter, "created": time.time(), "created_by": user})

    def delete_matter(self, matter: str) -> list[str]:
        """Returns the ids of the documents the matter held; its folder is gone (renamed away first, so a
        reader never sees half of it)."""
        folder = self._folder(matter)
        ids = [d.id for d in self.documents(matter)]
        if folder.exists():
            tomb = folder.with_name(f".deleted-{matter}-{uuid.uuid4().hex}")
            os.rename(folder, tomb)
            shutil.rmtree(tomb, ignore_errors=True)
        return ids

    # -- documents -------------------------------------------------------------------------
    def add(
        self, matter: str, doc_id: str, *, name: str, user: str, key_id: str, encrypted: bool, grant: bool = True
    ) -> MatterDocument:
        """Returns the matter's record of the document: created on first upload (this uploader's name and
        time); a later upload of the same bytes into the same matter keeps the record. An encrypted PDF
        opened with its password grants the uploading key (with `grant`) the right to its text."""
        path = self._doc_path(matter, doc_id)
        if path is None:
            raise StoreError("a document id is the SHA-256 of the PDF (64 hex characters)")
        with self._lock:
            self.ensure(matter, user=user)
            record = self.get(matter, doc_id)
            if record is None:
                record = MatterDocument(doc_id, name, time.time(), user, encrypted)
            if encrypted and grant and key_id not in record.granted:
                record.granted.append(key_id)
            self._write(path, record.to_dict())
        return record

    def get(self, matter: str, doc_id: str) -> MatterDocument | None:
        """Returns the matter's record of the document, or None when the matter does not hold it."""
        path = self._doc_path(matter, doc_id)
        if path is None:
            return None
        try:
            return MatterDocument.from_dict(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("unreadable matter record %s (%s)", path.name, exc)
            return None

    def documents(self, matter: str) -> list[MatterDocument]:
        """Returns the matter's documents, oldest first."""
        folder = self._folder(matter) / "documents"
        try:
            names = [p.stem for p in folder.glob("*.json")]
        except FileNotFoundError:
            return []
        records = [r for r in (self.get(matter, n) for n in names) if r is not None]
        return sorted(records, key=lambda r: r.added)

    def remove(self, matter: str, doc_id: str) -> bool:
        """Returns True when the matter held the document; its record is gone."""
        path = self._doc_path(matter, doc_id)
        if path is None:
            return False
        with self._lock:
            try:
                path.unlink()
                return True
            except FileNotFoundError:
                return False

    def holders(self, doc_id: str) -> list[str]:
        """Returns the matters that hold the document (its shared store data stays while any does)."""
        return [m for m in self.matters() if self.get(m, doc_id) is not None]
