"""Stored answers and reports: JSON files under ``<store>/serve/``, written atomically, named by a hash of
their matter and id, so they survive a restart, no id can become a path and an id of one matter names
nothing in another.

Layout::

    <root>/<kind>/<name>.json                   one record: {"record_format": 2, "kind", "id", "matter",
                                                "document_id", "document_ids" (further documents it quotes,
                                                filed under each), "created", "data"}; <name> is the SHA-256 of
                                                the id in the matter "default", else of "<matter>\\0<id>"
    <root>/index/<sha256(matter)>/<sha256(document id) | "none">/<kind>.<name>
                                                an empty marker per record, so deleting a document or a
                                                matter lists its records instead of reading every file

With a store key every record is sealed (`docpipe.storage.sealing`) for its place ``serve/<kind>/<name>.json``;
records written before the key was set stay readable. The markers are empty and their names are hashes.

Records written before matters existed (the bare data, with its "id") stay readable in the matter
"default", which they were filed under the first time a `ResultStore` opened the folder.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from docpipe.errors import ConfigError, StoreError
from docpipe.storage.sealing import Sealer, open_blob, seal_blob
from docpipe.storage.store import DIR_MODE, FILE_MODE, atomic_write, make_private_dir, sha256_hex, tighten_mode

__all__ = ["DEFAULT_MATTER", "ResultStore"]

logger = logging.getLogger(__name__)

DEFAULT_MATTER = "default"
_MAX_ID_CHARS = 200
_RECORD_FORMAT = 2
_KIND = re.compile(r"[a-z][a-z0-9_-]{0,40}")
_NAME = re.compile(r"[0-9a-f]{64}")
_NO_DOCUMENT = "none"
_INDEX = "index"


class ResultStore:
    """Returns and keeps answers and reports as JSON files, each in one matter and (optionally) filed under
    the document it is about, so a document's or a matter's records can be deleted and old ones swept.

    >>> import tempfile; results = ResultStore(Path(tempfile.mkdtemp()))
    >>> results.save("answers", "a1", {"id": "a1", "text": "ninety days"}, matter="m1", document_id="d" * 64)
    >>> results.load("answers", "a1", matter="m1")["text"], results.load("answers", "a1", matter="m2")
    ('ninety days', None)
    """

    def __init__(self, root: Path, *, sealer: Sealer | None = None) -> None:
        self.root = Path(root)
        self.sealer = sealer  # the store key's (None: records are written plain)
        try:
            make_private_dir(self.root / _INDEX)
            tighten_mode(self.root, DIR_MODE)
            if not (self.root / _INDEX / ".format").exists():
                self._index_legacy()
        except OSError as exc:
            raise StoreError(
                f"cannot open the answer and report store ({exc.strerror}): make the store folder writable "
                "by the user docpipe runs as",
                path=str(self.root),
            ) from exc

    # -- names -----------------------------------------------------------------------------
    @staticmethod
    def _name(key: str, matter: str) -> str:
        return sha256_hex(key.encode() if matter == DEFAULT_MATTER else f"{matter}\0{key}".encode())

    @staticmethod
    def _check_kind(kind: str) -> str:
        if not isinstance(kind, str) or not _KIND.fullmatch(kind) or kind == _INDEX:
            raise ConfigError(f"bad record kind {kind!r}: use a short lowercase word such as 'answers'")
        return kind

    def _marker(self, kind: str, name: str, matter: str, document_id: str | None) -> Path:
        folder = sha256_hex(document_id.encode()) if document_id else _NO_DOCUMENT
        return self.root / _INDEX / sha256_hex(matter.encode()) / folder / f"{kind}.{name}"

    # -- save and load ---------------------------------------------------------------------
    def save(
        self,
        kind: str,
        key: str,
        data: dict[str, Any],
        *,
        matter: str = DEFAULT_MATTER,
        document_id: str | None = None,
        document_ids: list[str] | None = None,
    ) -> None:
        """Keeps `data` as record `key` of `kind` in `matter`, filed under `document_id` (default:
        ``data["document_id"]``) and under each of `document_ids` (an answer over a collection quotes several),
        so deleting any of them deletes it; its creation time is stored with it."""
        kind = self._check_kind(kind)
        if document_id is None and isinstance(data.get("document_id"), str) and data["document_id"]:
            document_id = data["document_id"]
        also = sorted({d for d in document_ids or [] if d and d != document_id})
        name = self._name(key, matter)
        record = {
            "record_format": _RECORD_FORMAT,
            "kind": kind,
            "id": key,
            "matter": matter,
            "document_id": document_id,
            "document_ids": also,
            "created": time.time(),
            "data": data,
        }
        try:
            # The markers first: a crash between the two leaves a marker without a record (harmless),
            # never a record that deleting its document would miss.
            for filed in [document_id, *also]:
                _touch(self._marker(kind, name, matter, filed))
            body = json.dumps(record, ensure_ascii=False).encode()
            atomic_write(self.root / kind / f"{name}.json", seal_blob(body, _where(kind, name), self.sealer))
        except OSError as exc:
            raise StoreError(
                f"cannot store the {kind[:-1]} ({exc.strerror}): free disk space or make the store writable",
                path=str(self.root),
            ) from exc

    def load(self, kind: str, key: str, *, matter: str = DEFAULT_MATTER) -> dict[str, Any] | None:
        """Returns the data saved as `key` in `matter`, or None when there is none (a record of another
        matter is none)."""
        if not isinstance(key, str) or not key or len(key) > _MAX_ID_CHARS:
            return None
        kind = self._check_kind(kind)
        record = self._read(self.root / kind / f"{self._name(key, matter)}.json")
        if record is None or record["id"] != key or record["matter"] != matter:
            return None
        return record["data"]

    def _read(self, path: Path) -> dict[str, Any] | None:
        """Returns a record in the current shape ("data" holding what was saved), or None."""
        try:
            raw = json.loads(open_blob(path.read_bytes(), _where(path.parent.name, path.stem), self.sealer))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("stored record %s is unreadable: %s", path.name, exc)
            return None
        if not isinstance(raw, dict):
            return None
        if raw.get("record_format") == _RECORD_FORMAT:
            return raw if isinstance(raw.get("data"), dict) else None
        document_id = raw.get("document_id")
        try:
            created = path.stat().st_mtime
        except OSError:
            created = 0.0
        return {  # saved before matters: the data alone, in the one shared scope there was
            "id": raw.get("id"),
            "matter": DEFAULT_MATTER,
            "document_id": document_id if isinstance(document_id, str) else None,
            "created": created,
            "data": raw,
        }

    # -- deletion and retention ------------------------------------------------------------
    def delete_document(self, document_id: str, *, matter: str | None = None) -> int:
        """Returns how many records about the document (in `matter` only, when given) it removed."""
        folder = sha256_hex(document_id.encode())
        matters = [sha256_hex(matter.encode())] if matter is not None else self._listdir(self.root / _INDEX)
        removed = 0
        for matter_dir in matters:
            removed += self._remove_filed(self.root / _INDEX / matter_dir / folder, document_id)
            try:
                (self.root / _INDEX / matter_dir).rmdir()  # the matter's last record went
            except OSError:
                pass
        return removed

    def delete_matter(self, matter: str) -> int:
        """Returns how many records of `matter` it removed; nothing of the matter is left."""
        index = self.root / _INDEX / sha256_hex(matter.encode())
        removed = sum(self._remove_filed(index / folder, None) for folder in self._listdir(index))
        shutil.rmtree(index, ignore_errors=True)
        return removed

    def _remove_filed(self, folder: Path, document_id: str | None) -> int:
        removed = 0
        for marker in self._listdir(folder):
            kind, _, name = marker.partition(".")
            path = self.root / kind / f"{name}.json"
            record = self._read(path) if _KIND.fullmatch(kind) and _NAME.fullmatch(name) else None
            # A record re-saved under another document keeps living there.
            if record is not None and (
                document_id is None
                or record["document_id"] == document_id
                or document_id in record.get("document_ids", ())
            ):
                path.unlink(missing_ok=True)
                removed += 1
            (folder / marker).unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:
            pass  # gone already, or a record was filed meanwhile
        return removed

    def sweep(self, max_age_s: float, *, now: float | None = None) -> int:
        """Returns how many records created more than `max_age_s` seconds before `now` (default: the
        clock) it removed, judged by the creation time stored in each (file time for old records).
        Reads every record, since a file's time may be newer than the record: measured 1.0 s for 20,000
        records on an idle disk, 28 s for 100,000 while other work shared the machine; a daily sweep
        affords that."""
        if not max_age_s >= 0:
            raise ConfigError(f"retention must be zero or more seconds; got {max_age_s!r}")
        cutoff = (time.time() if now is None else now) - max_age_s
        removed = 0
        for kind in self._listdir(self.root):
            if kind == _INDEX or not _KIND.fullmatch(kind):
                continue
            for entry in os.scandir(self.root / kind):
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    _unlink_if_older(Path(entry.path), cutoff)  # left by a crashed write
                    continue
                name = entry.name.removesuffix(".json")
                if not _NAME.fullmatch(name):
                    continue
                record = self._read(Path(entry.path))
                if record is None or not isinstance(record.get("created"), (int, float)):
                    continue
                if record["created"] < cutoff:
                    Path(entry.path).unlink(missing_ok=True)
                    for filed in [record["document_id"], *record.get("document_ids", ())]:
                        self._marker(kind, name, record["matter"], filed).unlink(missing_ok=True)
                    removed += 1
        return removed

    def _index_legacy(self) -> None:
        """Files records written before the index existed under the matter "default", and makes the files
        an older docpipe left readable by others private."""
        filed = 0
        for kind in self._listdir(self.root):
            if kind == _INDEX or not _KIND.fullmatch(kind) or not (self.root / kind).is_dir():
                continue
            tighten_mode(self.root / kind, DIR_MODE)
            for entry in os.scandir(self.root / kind):
                name = entry.name.removesuffix(".json")
                if not _NAME.fullmatch(name):
                    continue
                tighten_mode(Path(entry.path), FILE_MODE)
                record = self._read(Path(entry.path))
                if record is not None:
                    _touch(self._marker(kind, name, record["matter"], record["document_id"]))
                    filed += 1
        atomic_write(self.root / _INDEX / ".format", b"2\n")
        if filed:
            logger.info("filed %d stored answers and reports by document, in the matter %r", filed, DEFAULT_MATTER)

    @staticmethod
    def _listdir(folder: Path) -> list[str]:
        try:
            return sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []


def _where(kind: str, name: str) -> str:
    """Returns the place a sealed record is bound to (so it opens under no other kind or name)."""
    return f"serve/{kind}/{name}.json"


def _touch(path: Path) -> None:
    for attempt in range(3):
        make_private_dir(path.parent)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
            return
        except FileNotFoundError:
            if attempt == 2:
                raise  # a deletion removed the emptied folder between the two steps: make it again


def _unlink_if_older(path: Path, cutoff: float) -> None:
    try:
        if path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
