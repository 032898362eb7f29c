"""Content-addressed store on disk: a document's id is the SHA-256 of its bytes, and its index lives under
that id and a fingerprint of the settings that shaped it. Writes are atomic (temp + rename); entries carry
a manifest of checksums, so a damaged entry is detected, dropped and rebuilt.

Layout::

    <home>/docs/<doc id>/source.pdf
    <home>/docs/<doc id>/extract-<extractor>.json
    <home>/docs/<doc id>/index-<fingerprint>/{manifest.json, document.json, passages.json, dense.faiss}

The store holds contract text, so it is private to its owner: the root and every folder docpipe creates are
0700, every file 0600, whatever the umask. With a store key (`docpipe.storage.sealing`), every file the store
writes of a document (source, extraction records, index files and their manifests) is also sealed with
AES-256-GCM, bound to its place; files written before the key was set stay readable, and `seal_plain_files`
seals them. An index manifest's checksums are of the bytes on disk (ciphertext when sealed): damage is found
before any key is needed, and no hash of a document's text is left beside it for a guess to be checked
against. A document is deleted by renaming its folder to a tombstone (``docs/.<doc id>.deleted-<random>``)
and then removing that, so a reader sees the whole folder or none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from docpipe.errors import StoreError, StoreKeyError
from docpipe.storage.sealing import Sealer, is_sealed, open_blob, seal_blob

__all__ = ["Store", "atomic_write", "make_private_dir", "private_umask", "sha256_hex", "tighten_mode"]

logger = logging.getLogger(__name__)

_FORMAT = 1
_DOC_ID = re.compile(r"[0-9a-f]{64}")
_TOMBSTONE = ".deleted-"
DIR_MODE = 0o700
FILE_MODE = 0o600


def sha256_hex(data: bytes) -> str:
    """Returns the hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def private_umask() -> int:
    """Sets the process umask to 077 (new files and folders private to the owner); returns the old one,
    for a caller that wants to restore it.

    >>> old = private_umask(); os.umask(old) == 0o077
    True
    """
    return os.umask(0o077)


def make_private_dir(path: Path) -> None:
    """Creates `path` and any missing parents, each 0700 whatever the umask; folders that exist are left
    as they are."""
    missing: list[Path] = []
    folder = Path(path)
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # another process created it: its creator set the mode
        os.chmod(folder, DIR_MODE)  # mkdir's mode passes through the umask; chmod does not


def tighten_mode(path: Path, mode: int) -> bool:
    """Returns True when `path` (owned by this user) had more permissions than `mode` and now has `mode`.
    Paths of other owners and missing paths are left alone (False)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & ~mode == 0:
        return False
    os.chmod(path, mode)
    return True


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def atomic_write(path: Path, data: bytes) -> None:
    """Writes `data` to `path` so that readers see the old file or the whole new one, never a part.
    The file is 0600 and any folder it needs is created 0700."""
    make_private_dir(path.parent)
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

    `sealer` (None: no key) seals what the store writes and opens what it reads; see the module docstring.

    >>> import tempfile; store = Store(Path(tempfile.mkdtemp()))
    >>> store.load_index("0" * 64, "f" * 16) is None
    True
    """

    def __init__(self, root: Path, *, sealer: Sealer | None = None) -> None:
        self.root = Path(root)
        self.sealer = sealer
        try:
            make_private_dir(self.root / "docs")
            for folder in (self.root, self.root / "docs"):
                if tighten_mode(folder, DIR_MODE):
                    logger.warning("store folder %s was open to other users; made it private (0700)", folder)
        except OSError as exc:
            raise StoreError(
                f"cannot create the docpipe store at {self.root} ({exc.strerror}): "
                "set DOCPIPE_HOME to a writable folder",
                path=str(self.root),
            ) from exc
        mode = stat.S_IMODE(self.root.stat().st_mode)
        if mode & 0o077:
            logger.warning(
                "store folder %s belongs to another user and is open to others (mode %o): its owner should "
                "run chmod 700 on it, or set DOCPIPE_HOME to a folder of your own",
                self.root,
                mode,
            )

    def doc_dir(self, doc_id: str) -> Path:
        return self.root / "docs" / doc_id

    # -- sealed files ----------------------------------------------------------------------
    # Every file of a document goes through these two: sealed for its place ``docs/<id>/<name>`` when the
    # store has a key, plain otherwise; a plain file reads back with or without a key.
    def write_file(self, doc_id: str, name: str, data: bytes) -> None:
        """Writes `data` atomically as `name` (e.g. ``index-<fingerprint>/sentences.npz``) in the document's
        folder, sealed when the store has a key."""
        atomic_write(self.doc_dir(doc_id) / name, seal_blob(data, _where(doc_id, name), self.sealer))

    def read_file(self, doc_id: str, name: str) -> bytes | None:
        """Returns the plain bytes of `name` in the document's folder, or None when it is absent. StoreKeyError
        when it is sealed and the key is missing or another; SealedDataError (a ValueError) when damaged."""
        try:
            blob = (self.doc_dir(doc_id) / name).read_bytes()
        except FileNotFoundError:
            return None
        return open_blob(blob, _where(doc_id, name), self.sealer)

    # -- listing and deletion --------------------------------------------------------------
    def document_ids(self) -> list[str]:
        """Returns the ids of the documents the store holds anything of, sorted."""
        try:
            names = os.listdir(self.root / "docs")
        except FileNotFoundError:
            return []
        return sorted(n for n in names if _DOC_ID.fullmatch(n) and (self.root / "docs" / n).is_dir())

    def delete_document(self, doc_id: str) -> bool:
        """Returns True when the store held anything of the document; afterwards it holds nothing: source,
        extractions and every index entry are gone. Readers see the whole folder or none: it is renamed to
        a tombstone first, then removed. An id that is not a SHA-256 hex names nothing (False)."""
        if not isinstance(doc_id, str) or not _DOC_ID.fullmatch(doc_id):
            return False
        folder = self.doc_dir(doc_id)
        tomb = folder.with_name(f".{doc_id}{_TOMBSTONE}{uuid.uuid4().hex}")
        try:
            os.rename(folder, tomb)
        except FileNotFoundError:
            found = False
        except OSError as exc:
            raise StoreError(
                f"cannot delete document {doc_id} from the store ({exc.strerror}): make the store folder "
                "writable by the user docpipe runs as, then delete again",
                path=str(folder),
            ) from exc
        else:
            found = True
        self._remove_tombstones()
        return found

    def _remove_tombstones(self) -> None:
        """Removes every tombstone folder, also those a crashed deletion left behind."""
        docs = self.root / "docs"
        for name in os.listdir(docs):
            if name.startswith(".") and _TOMBSTONE in name:
                _rmtree(docs / name)

    # -- source and extraction -------------------------------------------------------------
    def save_source(self, doc_id: str, data: bytes) -> None:
        """Keeps the PDF's bytes under its id, replacing a stored copy that no longer matches its hash."""
        path = self.doc_dir(doc_id) / "source.pdf"
        try:
            blob = path.read_bytes()
            if sha256_hex(open_blob(blob, _where(doc_id, "source.pdf"), self.sealer)) == doc_id:
                if self.sealer is None or is_sealed(blob):
                    return
                # A copy stored before the key was set: sealed now that the document is touched.
            else:
                logger.warning("stored source %s is damaged; replacing it", path)
        except FileNotFoundError:
            pass
        except ValueError as exc:  # SealedDataError: damaged under the right key (another key raises)
            logger.warning("stored source %s is damaged (%s); replacing it", path, exc)
        self.write_file(doc_id, "source.pdf", data)

    def load_source(self, doc_id: str) -> bytes | None:
        """Returns the stored PDF bytes, or None when absent or not matching the id."""
        try:
            data = self.read_file(doc_id, "source.pdf")
        except ValueError:  # SealedDataError: damaged
            return None
        return data if data is not None and sha256_hex(data) == doc_id else None

    def load_extraction(self, doc_id: str, extractor: str) -> dict[str, Any] | None:
        """Returns the stored extraction record, or None when absent or damaged."""
        path = self.doc_dir(doc_id) / f"extract-{extractor}.json"
        record = self._read_json(path, _where(doc_id, path.name))
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
        self.write_file(doc_id, f"extract-{extractor}.json", json.dumps(record).encode())

    # -- index entries ---------------------------------------------------------------------
    def index_dir(self, doc_id: str, fingerprint: str) -> Path:
        return self.doc_dir(doc_id) / f"index-{fingerprint}"

    def load_index(self, doc_id: str, fingerprint: str) -> dict[str, bytes] | None:
        """Returns the files of a stored index entry, or None when absent or damaged (then it is removed)."""
        folder = self.index_dir(doc_id, fingerprint)
        manifest = self._read_json(folder / "manifest.json", _where(doc_id, folder.name, "manifest.json"))
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
                if sha256_hex(data) != digest:  # of the bytes on disk: sealed or plain
                    raise ValueError(f"checksum mismatch in {name}")
                files[name] = open_blob(data, _where(doc_id, folder.name, name), self.sealer)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("index entry %s is damaged (%s); rebuilding it", folder, exc)
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return files

    def save_index(self, doc_id: str, fingerprint: str, files: dict[str, bytes], meta: dict[str, Any]) -> None:
        """Publishes an index entry atomically: it is written to a temp folder, then renamed into place."""
        folder = self.index_dir(doc_id, fingerprint)
        make_private_dir(folder.parent)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
        try:
            stored = {n: seal_blob(d, _where(doc_id, folder.name, n), self.sealer) for n, d in files.items()}
            for name, data in stored.items():
                _write_private(tmp / name, data)
            manifest = {"format": _FORMAT, **meta, "files": {n: sha256_hex(d) for n, d in stored.items()}}
            body = json.dumps(manifest, indent=1).encode()
            _write_private(
                tmp / "manifest.json", seal_blob(body, _where(doc_id, folder.name, "manifest.json"), self.sealer)
            )
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

    def _read_json(self, path: Path, where: str) -> dict[str, Any] | None:
        """Returns the JSON object in `path`, or None when absent or damaged (then it is removed). A sealed
        file without its key raises StoreKeyError, which is never damage: nothing is removed."""
        try:
            data = json.loads(open_blob(path.read_bytes(), where, self.sealer))
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, found {type(data).__name__}")
            return data
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("cannot read %s (%s); it will be rebuilt", path, exc)
            path.unlink(missing_ok=True)
            return None

    # -- sealing a store made before the key --------------------------------------------------
    def seal_plain_files(self) -> int:
        """Returns how many plain files of the store's documents it sealed with the store's key (sources,
        extractions, index files and manifests, sentence vectors); sealed files are left as they are. Run it
        while nothing else writes the store: an index entry is rewritten file by file, manifest last."""
        if self.sealer is None:
            raise StoreKeyError(
                "no store key is set, so there is nothing to seal with: make one (docpipe keys store-key --out "
                "FILE) and set DOCPIPE_STORE_KEY_FILE to it"
            )
        sealed = 0
        for doc_id in self.document_ids():
            for path in sorted(self.doc_dir(doc_id).iterdir()):
                if path.name.startswith("."):
                    continue  # a temp file or folder of a write in progress
                if path.is_dir() and path.name.startswith("index-"):
                    sealed += self._seal_index(doc_id, path)
                elif path.is_file():
                    sealed += self._seal_file(doc_id, path.name)
        return sealed

    def _seal_file(self, doc_id: str, name: str) -> int:
        data = self.read_file(doc_id, name)
        if data is None or is_sealed((self.doc_dir(doc_id) / name).read_bytes()):
            return 0
        self.write_file(doc_id, name, data)
        return 1

    def _seal_index(self, doc_id: str, folder: Path) -> int:
        try:
            raw = (folder / "manifest.json").read_bytes()
        except FileNotFoundError:
            return 0
        files = self.load_index(doc_id, folder.name.removeprefix("index-"))
        manifest = self._read_json(folder / "manifest.json", _where(doc_id, folder.name, "manifest.json"))
        if files is None or manifest is None:
            return 0  # damaged: load_index removed it, and the next ingestion rebuilds it sealed
        sealed = 0
        digests = dict(manifest["files"])
        for name, data in files.items():
            if not is_sealed((folder / name).read_bytes()):
                blob = seal_blob(data, _where(doc_id, folder.name, name), self.sealer)
                atomic_write(folder / name, blob)
                digests[name] = sha256_hex(blob)
                sealed += 1
        if sealed or not is_sealed(raw):
            body = json.dumps({**manifest, "files": digests}, indent=1).encode()
            self.write_file(doc_id, f"{folder.name}/manifest.json", body)
            sealed += 0 if is_sealed(raw) else 1
        for path in sorted(folder.iterdir()):  # files kept beside the entry (sentence vectors)
            if (
                path.is_file()
                and not path.name.startswith(".")
                and path.name not in files
                and path.name != "manifest.json"
            ):
                sealed += self._seal_file(doc_id, f"{folder.name}/{path.name}")
        return sealed

    def drop_index(self, doc_id: str, fingerprint: str) -> None:
        """Removes an index entry (used when its content turns out unreadable)."""
        shutil.rmtree(self.index_dir(doc_id, fingerprint), ignore_errors=True)


def _where(doc_id: str, *names: str) -> str:
    """Returns the place a sealed file is bound to: its path under the store root, in POSIX form."""
    return "/".join(("docs", doc_id, *names))


def _rmtree(path: Path) -> None:
    """Removes a folder tree, also entries whose folder lost its write permission; what cannot be removed
    is logged, and the next deletion tries again."""

    def retry(func: Any, target: str, _error: Any) -> None:
        try:
            os.chmod(os.path.dirname(target), DIR_MODE)
            func(target)
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.warning("cannot remove %s (%s); the next deletion retries", target, exc)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)  # deprecated from 3.12, where onexc replaces it
