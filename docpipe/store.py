"""Content-addressed store on disk: a document's id is the SHA-256 of its bytes, and its index lives under
that id and a fingerprint of the settings that shaped it. Writes are atomic (temp + rename); entries carry
a manifest of checksums, so a damaged entry is detected, dropped and rebuilt.

Layout::

    <home>/docs/<doc id>/source.pdf
    <home>/docs/<doc id>/extract-<extractor>.json
    <home>/docs/<doc id>/index-<fingerprint>/{manifest.json, document.json, passages.json, dense.faiss}
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from docpipe.errors import StoreError

__all__ = ["Store", "atomic_write", "sha256_hex"]

logger = logging.getLogger(__name__)

_FORMAT = 1


def sha256_hex(data: bytes) -> str:
    """Returns the hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Writes `data` to `path` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """Returns and keeps extracted pages and indexes by content hash under `root`.

    >>> import tempfile; store = Store(Path(tempfile.mkdtemp()))
    >>> store.load_index("0" * 64, "f" * 16) is None
    True
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        try:
            (self.root / "docs").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the docpipe store at {self.root} ({exc.strerror}): "
                "set DOCPIPE_HOME to a writable folder",
                path=str(self.root),
            ) from exc

    def doc_dir(self, doc_id: str) -> Path:
        return self.root / "docs" / doc_id

    # -- source and extraction -------------------------------------------------------------
    def save_source(self, doc_id: str, data: bytes) -> None:
        """Keeps the PDF's bytes under its id, replacing a stored copy that no longer matches its hash."""
        path = self.doc_dir(doc_id) / "source.pdf"
        try:
            if sha256_hex(path.read_bytes()) == doc_id:
                return
            logger.warning("stored source %s is damaged; replacing it", path)
        except FileNotFoundError:
            pass
        atomic_write(path, data)

    def load_source(self, doc_id: str) -> bytes | None:
        """Returns the stored PDF bytes, or None when absent or not matching the id."""
        try:
            data = (self.doc_dir(doc_id) / "source.pdf").read_bytes()
        except FileNotFoundError:
            return None
        return data if sha256_hex(data) == doc_id else None

    def load_extraction(self, doc_id: str, extractor: str) -> dict[str, Any] | None:
        """Returns the stored extraction record, or None when absent or damaged."""
        path = self.doc_dir(doc_id) / f"extract-{extractor}.json"
        record = self._read_json(path)
        if record is None:
            return None
        body = json.dumps(record.get("pages"), sort_keys=True).encode()
        if (
            record.get("format") != _FORMAT
            or record.get("checksum") != sha256_hex(body)
            or not isinstance(record.get("pages"), list)
        ):
            logger.warning("stored extraction %s is damaged; extracting again", path)
            path.unlink(missing_ok=True)
            return None
        return record

    def save_extraction(self, doc_id: str, extractor: str, record: dict[str, Any]) -> None:
        body = json.dumps(record["pages"], sort_keys=True).encode()
        record = {**record, "format": _FORMAT, "checksum": sha256_hex(body)}
        atomic_write(self.doc_dir(doc_id) / f"extract-{extractor}.json", json.dumps(record).encode())

    # -- index entries ---------------------------------------------------------------------
    def index_dir(self, doc_id: str, fingerprint: str) -> Path:
        return self.doc_dir(doc_id) / f"index-{fingerprint}"

    def load_index(self, doc_id: str, fingerprint: str) -> dict[str, bytes] | None:
        """Returns the files of a stored index entry, or None when absent or damaged (then it is removed)."""
        folder = self.index_dir(doc_id, fingerprint)
        manifest = self._read_json(folder / "manifest.json")
        if manifest is None:
            if folder.exists():
                logger.warning("index entry %s has no readable manifest; rebuilding it", folder)
                shutil.rmtree(folder, ignore_errors=True)
            return None
        files: dict[str, bytes] = {}
        try:
            if not isinstance(manifest.get("files"), dict) or not manifest["files"]:
                raise ValueError("manifest lists no files")
            for name, digest in manifest["files"].items():
                data = (folder / name).read_bytes()
                if sha256_hex(data) != digest:
                    raise ValueError(f"checksum mismatch in {name}")
                files[name] = data
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("index entry %s is damaged (%s); rebuilding it", folder, exc)
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return files

    def save_index(self, doc_id: str, fingerprint: str, files: dict[str, bytes], meta: dict[str, Any]) -> None:
        """Publishes an index entry atomically: it is written to a temp folder, then renamed into place."""
        folder = self.index_dir(doc_id, fingerprint)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
        try:
            for name, data in files.items():
                (tmp / name).write_bytes(data)
            manifest = {"format": _FORMAT, **meta, "files": {n: sha256_hex(d) for n, d in files.items()}}
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
            if folder.exists():
                if self.load_index(doc_id, fingerprint) is not None:
                    # Another process published the same content first: keep it, so a reader that has
                    # just found it is not left with a folder pulled from under it.
                    shutil.rmtree(tmp, ignore_errors=True)
                    return
                shutil.rmtree(folder, ignore_errors=True)  # a damaged entry lingers (load_index removed it)
            os.rename(tmp, folder)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if (folder / "manifest.json").exists():
                return  # a concurrent writer published the same content first
            raise StoreError(f"cannot write the index to {folder}: {exc}", path=str(folder)) from exc

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_bytes())
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, found {type(data).__name__}")
            return data
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("cannot read %s (%s); it will be rebuilt", path, exc)
            path.unlink(missing_ok=True)
            return None

    def drop_index(self, doc_id: str, fingerprint: str) -> None:
        """Removes an index entry (used when its content turns out unreadable)."""
        shutil.rmtree(self.index_dir(doc_id, fingerprint), ignore_errors=True)
