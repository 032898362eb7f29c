"""The default answer-cache backend: `SQLiteCache`, one SQLite file (WAL mode, 0600, secure_delete) under the
store, shared safely by threads and processes, with lazy expiry, deletion by document or matter, a schema
migration for files an older docpipe wrote, and a damaged file moved aside instead of failing. Imports the
cache base and the store's file-mode helpers.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from docpipe.answer.cache.base import DEFAULT_TTL_S, check_age, check_ttl, decode, document_of, encode
from docpipe.errors import StoreError
from docpipe.storage.store import FILE_MODE, make_private_dir, tighten_mode

logger = logging.getLogger(__name__)


class SQLiteCache:
    """Returns cached answers from one SQLite file (WAL mode), shared safely by threads and processes.

    `ttl_s` is the default lifetime of an entry (None: no expiry); `now` is the clock, injectable for tests.
    Expired entries are never returned and are purged lazily. A file that is not a readable database is
    moved aside to ``<path>.corrupt-<timestamp>`` and a fresh cache is started. Hit and miss counts in
    `stats()` are this object's own; `entries` counts live rows in the file. The file and its -wal/-shm
    sidecars are 0600. Each row carries its document id and matter; a file written by an older docpipe
    (schema version 0) gains those columns on first open, filled from the stored answers.

    >>> import tempfile; cache = SQLiteCache(Path(tempfile.mkdtemp()) / "answers.sqlite")
    >>> cache.put("k", {"text": "42"}); cache.get("k")
    {'text': '42'}
    """

    _PURGE_EVERY = 256
    _SCHEMA = 2  # PRAGMA user_version: 0 = before document_id and matter columns

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl_s: float | None = DEFAULT_TTL_S,
        now: Callable[[], float] = time.time,
        busy_timeout_s: float = 30.0,
    ) -> None:
        self.path = Path(path)
        self.ttl_s = check_ttl(ttl_s)
        self._now = now
        self._busy_timeout_s = busy_timeout_s
        # One connection behind a lock: SQLite serialises writers anyway, and a single connection is
        # easy to close. Other processes coordinate through SQLite's file locks and the busy timeout.
        self._lock = threading.Lock()
        self._hits = self._misses = self._puts = 0
        self._conn = self._open()
        self._pid = os.getpid()

    def _open(self) -> sqlite3.Connection:
        try:
            make_private_dir(self.path.parent)
        except OSError as exc:
            raise self._error("cannot create the folder for", exc) from exc
        try:
            return self._connect_waiting()
        except sqlite3.OperationalError as exc:  # locked, unwritable, out of space: not corruption
            raise self._error("cannot open", exc) from exc
        except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed"
            aside = self.path.with_name(f"{self.path.name}.corrupt-{datetime.now():%Y%m%dT%H%M%S%f}")
            logger.warning("answer cache %s is damaged (%s); moved it to %s and starting afresh", self.path, exc, aside)
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
                except FileNotFoundError:
                    pass  # no sidecar, or another process moved it first
            try:
                return self._connect_waiting()
            except sqlite3.DatabaseError as again:
                raise self._error("cannot create", again) from again

    def _connect_waiting(self) -> sqlite3.Connection:
        """Returns a new connection, retrying while another process holds the file during its own setup."""
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                return self._connect()
            except sqlite3.OperationalError as exc:
                # Switching a new file to WAL can fail with "locked" without waiting on the busy handler
                # while another process sets the same file up: retry until the busy timeout.
                busy = (exc.sqlite_errorcode & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _connect(self) -> sqlite3.Connection:
        self._make_private()
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; a crash may lose the last puts only
            conn.execute("PRAGMA secure_delete = ON")  # deleted answers are overwritten, not left in free pages
            if conn.execute("PRAGMA user_version").fetchone()[0] < self._SCHEMA:
                self._migrate(conn)
            conn.execute("DELETE FROM answers WHERE expires IS NOT NULL AND expires <= ?", (self._now(),))
        except BaseException:
            conn.close()
            raise
        return conn

    def _make_private(self) -> None:
        """Creates the file 0600 before SQLite does (SQLite gives its -wal and -shm files the database
        file's mode); tightens files an older docpipe left readable by others."""
        try:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE))
        except FileExistsError:
            pass
        for suffix in ("", "-wal", "-shm"):
            if tighten_mode(Path(f"{self.path}{suffix}"), FILE_MODE):
                logger.warning(
                    "answer cache file %s%s was readable by others; made it private (0600)", self.path, suffix
                )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Brings the file to the current schema; one process does it while others wait on the lock."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                "created REAL NOT NULL, expires REAL, document_id TEXT, matter TEXT)"
            )
            columns = {row[1] for row in conn.execute("PRAGMA table_info(answers)")}
            for column in ("document_id", "matter"):
                if column not in columns:
                    conn.execute(f"ALTER TABLE answers ADD COLUMN {column} TEXT")
            if "document_id" not in columns:
                rows = conn.execute("SELECT key, value FROM answers").fetchall()
                filled = [(doc, key) for key, doc in self._documents_of(rows)]
                conn.executemany("UPDATE answers SET document_id = ? WHERE key = ?", filled)
                logger.info("answer cache %s: added document ids to %d entries", self.path, len(filled))
            conn.execute("CREATE INDEX IF NOT EXISTS answers_document ON answers (document_id)")
            conn.execute("CREATE INDEX IF NOT EXISTS answers_matter ON answers (matter)")
            conn.execute("CREATE INDEX IF NOT EXISTS answers_created ON answers (created)")
            conn.execute(f"PRAGMA user_version = {self._SCHEMA}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _documents_of(rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Returns (key, document id) of the rows whose stored answer names its document."""
        found = []
        for key, raw in rows:
            try:
                doc = document_of(json.loads(raw), None)
            except ValueError:
                continue
            if doc is not None:
                found.append((key, doc))
        return found

    def _error(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(
            f"{what} the answer cache at {self.path} ({exc}): make its folder writable (or delete a damaged "
            "file), point DOCPIPE_CACHE_URL at another sqlite:///PATH, or run with --no-cache",
            path=str(self.path),
        )

    def _connection(self) -> sqlite3.Connection:
        """Returns this process's connection; call it before taking the lock."""
        if os.getpid() != self._pid:
            # A connection must not cross fork(), and the lock may have been held by a parent thread:
            # the child opens its own of both (the parent's connection is left untouched).
            self._lock = threading.Lock()
            self._conn = self._open()
            self._pid = os.getpid()
        return self._conn

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """Returns the number of rows the statement changed."""
        conn = self._connection()
        with self._lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    changed = conn.execute(sql, params).rowcount
                    conn.execute("COMMIT")
                    return changed
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                raise self._error("cannot write", exc) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        """Returns the cached value for `key`, or None when absent or expired."""
        conn = self._connection()
        with self._lock:
            try:
                row = conn.execute("SELECT value, expires FROM answers WHERE key = ?", (key,)).fetchone()
            except sqlite3.DatabaseError as exc:
                raise self._error("cannot read", exc) from exc
            now = self._now()
            expired = row is not None and row[1] is not None and row[1] <= now
            value = None if row is None or expired else decode(row[0], f"{key} in {self.path}")
            if value is None:
                self._misses += 1
            else:
                self._hits += 1
        if expired:
            # Purge lazily; the condition spares an entry another writer refreshed meanwhile.
            self._write("DELETE FROM answers WHERE key = ? AND expires IS NOT NULL AND expires <= ?", (key, now))
        elif row is not None and value is None:
            self._write("DELETE FROM answers WHERE key = ? AND value = ?", (key, row[0]))
        return value

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        ttl_s: float | None = None,
        document_id: str | None = None,
        matter: str | None = None,
    ) -> None:
        """Keeps `value` under `key` for `ttl_s` seconds (default: the cache's TTL), filed under its
        document (`document_id`, else ``value["document_id"]``) and `matter` for deletion."""
        ttl = check_ttl(ttl_s) if ttl_s is not None else self.ttl_s
        now = self._now()
        self._write(
            "INSERT OR REPLACE INTO answers (key, value, created, expires, document_id, matter) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (key, encode(value), now, None if ttl is None else now + ttl, document_of(value, document_id), matter),
        )
        self._puts += 1
        if self._puts % self._PURGE_EVERY == 0:
            self._write("DELETE FROM answers WHERE expires IS NOT NULL AND expires <= ?", (now,))

    def delete(self, key: str) -> None:
        """Removes `key` if present."""
        self._write("DELETE FROM answers WHERE key = ?", (key,))

    def delete_document(self, document_id: str, *, matter: str | None = None) -> int:
        """Returns how many entries of the document (in `matter` only, when given) it removed."""
        if matter is not None:
            removed = self._write("DELETE FROM answers WHERE document_id = ? AND matter = ?", (document_id, matter))
            return self._forget(removed)
        removed = self._write("DELETE FROM answers WHERE document_id = ?", (document_id,))
        # Rows an older docpipe wrote into the migrated file carry no document id: look inside them.
        conn = self._connection()
        with self._lock:
            try:
                rows = conn.execute("SELECT key, value FROM answers WHERE document_id IS NULL").fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._error("cannot read", exc) from exc
        for key, doc in self._documents_of(rows):
            if doc == document_id:
                removed += self._write("DELETE FROM answers WHERE key = ? AND document_id IS NULL", (key,))
        return self._forget(removed)

    def delete_matter(self, matter: str) -> int:
        """Returns how many entries put with this `matter` it removed."""
        return self._forget(self._write("DELETE FROM answers WHERE matter = ?", (matter,)))

    def _forget(self, removed: int) -> int:
        """Returns `removed`; after a deletion, copies the WAL into the file and empties it, so the deleted
        answers' text is in neither (secure_delete has zeroed their pages). Best effort: a reader in another
        process can hold the WAL until its next checkpoint."""
        if removed:
            conn = self._connection()
            with self._lock:
                try:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                except sqlite3.DatabaseError as exc:
                    logger.warning("answer cache %s: checkpoint after deletion failed (%s)", self.path, exc)
        return removed

    def sweep(self, max_age_s: float) -> int:
        """Returns how many entries put more than `max_age_s` seconds ago (or already expired) it removed."""
        now = self._now()
        return self._forget(
            self._write(
                "DELETE FROM answers WHERE created < ? OR (expires IS NOT NULL AND expires <= ?)",
                (now - check_age(max_age_s), now),
            )
        )

    def clear(self) -> None:
        """Removes every entry."""
        self._write("DELETE FROM answers")

    def stats(self) -> dict[str, int]:
        """Returns this object's hits and misses, and the number of live entries in the file."""
        conn = self._connection()
        with self._lock:
            try:
                (entries,) = conn.execute(
                    "SELECT count(*) FROM answers WHERE expires IS NULL OR expires > ?", (self._now(),)
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                raise self._error("cannot read", exc) from exc
        return {"hits": self._hits, "misses": self._misses, "entries": int(entries)}

    def close(self) -> None:
        """Closes the connection (the file stays)."""
        with self._lock:
            self._conn.close()
