"""Answer cache: a finished answer is kept under a SHA-256 of everything that shaped it (document, question,
mode, model, prompt version, sampling, engine), so asking again costs a lookup instead of a model call.

Backends share the `AnswerCache` protocol: `SQLiteCache` (a file under the store, the default),
`RedisCache` (shared by several machines) and `NullCache` (``--no-cache``). `open_cache` picks one from a
URL such as ``DOCPIPE_CACHE_URL``. Values are JSON objects, in practice ``Answer.to_dict()``.

Every entry knows its document (and matter, when given), so deleting a document or a matter removes its
answers, and `sweep` removes entries older than a retention period besides the TTL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from docpipe.errors import ConfigError, DependencyError, StoreError
from docpipe.ingest.store import FILE_MODE, make_private_dir, tighten_mode

__all__ = ["DEFAULT_TTL_S", "AnswerCache", "NullCache", "RedisCache", "SQLiteCache", "cache_key", "open_cache"]

logger = logging.getLogger(__name__)

DEFAULT_TTL_S = 30 * 86400.0
# Part of every key: bump it when the shape of cached values changes, and old entries stop matching.
_KEY_FORMAT = 1
_SPACE = re.compile(r"\s+")
_SCHEMES = "sqlite:///PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB or none"


def cache_key(
    *,
    document_id: str,
    question: str,
    mode: str,
    model: str,
    prompt_version: str,
    sampling: dict[str, Any],
    engine: str = "",
    extra: dict[str, Any] | None = None,
) -> str:
    """Returns the hex SHA-256 of a canonical JSON of every input that shapes an answer.

    The question is stripped and its whitespace runs collapsed; case is kept, since it matters in legal text.

    >>> a = cache_key(document_id="d", question="Who pays?", mode="extractive", model="", prompt_version="1",
    ...               sampling={})
    >>> a == cache_key(document_id="d", question="  Who   pays? ", mode="extractive", model="",
    ...                prompt_version="1", sampling={})
    True
    """
    payload = {
        "format": _KEY_FORMAT,
        "document_id": document_id,
        "question": _SPACE.sub(" ", question).strip(),
        "mode": mode,
        "model": model,
        "prompt_version": prompt_version,
        "sampling": sampling,
        "engine": engine,
        "extra": extra or {},
    }
    try:
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cache key inputs must be plain JSON values (str, number, list, dict): {exc}") from exc
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@runtime_checkable
class AnswerCache(Protocol):
    """Returns and keeps JSON-serialisable answer dicts by `cache_key`."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        ttl_s: float | None = None,
        document_id: str | None = None,
        matter: str | None = None,
    ) -> None: ...

    def delete(self, key: str) -> None: ...

    def delete_document(self, document_id: str, *, matter: str | None = None) -> int: ...

    def delete_matter(self, matter: str) -> int: ...

    def sweep(self, max_age_s: float) -> int: ...

    def clear(self) -> None: ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...


def _check_ttl(ttl_s: float | None) -> float | None:
    if ttl_s is not None and not ttl_s > 0:
        raise ConfigError(f"cache TTL must be a positive number of seconds, or None for no expiry; got {ttl_s!r}")
    return ttl_s


def _check_age(max_age_s: float) -> float:
    if not max_age_s >= 0:
        raise ConfigError(f"retention must be zero or more seconds; got {max_age_s!r}")
    return float(max_age_s)


def _document_of(value: dict[str, Any], document_id: str | None) -> str | None:
    if document_id is not None:
        return document_id
    found = value.get("document_id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def _encode(value: dict[str, Any]) -> str:
    if not isinstance(value, dict):
        raise TypeError(f"cache values are dicts (Answer.to_dict()), not {type(value).__name__}")
    return json.dumps(value, ensure_ascii=False)


def _decode(raw: str | bytes, where: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        logger.warning("unreadable cache entry %s (%s); dropping it", where, exc)
        return None
    return value if isinstance(value, dict) else None


class NullCache:
    """Returns None for every lookup and keeps nothing (``--no-cache``).

    >>> cache = NullCache(); cache.put("k", {"text": "x"}); cache.get("k") is None
    True
    """

    def __init__(self) -> None:
        self._misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        self._misses += 1
        return None

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        ttl_s: float | None = None,
        document_id: str | None = None,
        matter: str | None = None,
    ) -> None:
        pass

    def delete(self, key: str) -> None:
        pass

    def delete_document(self, document_id: str, *, matter: str | None = None) -> int:
        return 0

    def delete_matter(self, matter: str) -> int:
        return 0

    def sweep(self, max_age_s: float) -> int:
        _check_age(max_age_s)
        return 0

    def clear(self) -> None:
        pass

    def stats(self) -> dict[str, int]:
        return {"hits": 0, "misses": self._misses, "entries": 0}

    def close(self) -> None:
        pass


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
        self.ttl_s = _check_ttl(ttl_s)
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
            logger.warning("answer cache %s is damaged (%s); moved it to %s and starting afresh",
                           self.path, exc, aside)
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
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
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
                logger.warning("answer cache file %s%s was readable by others; made it private (0600)",
                               self.path, suffix)

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
                doc = _document_of(json.loads(raw), None)
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
                row = conn.execute(
                    "SELECT value, expires FROM answers WHERE key = ?", (key,)
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                raise self._error("cannot read", exc) from exc
            now = self._now()
            expired = row is not None and row[1] is not None and row[1] <= now
            value = None if row is None or expired else _decode(row[0], f"{key} in {self.path}")
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
        ttl = _check_ttl(ttl_s) if ttl_s is not None else self.ttl_s
        now = self._now()
        self._write(
            "INSERT OR REPLACE INTO answers (key, value, created, expires, document_id, matter) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (key, _encode(value), now, None if ttl is None else now + ttl, _document_of(value, document_id),
             matter),
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
        return self._forget(self._write(
            "DELETE FROM answers WHERE created < ? OR (expires IS NOT NULL AND expires <= ?)",
            (now - _check_age(max_age_s), now),
        ))

    def clear(self) -> None:
        """Returns nothing; removes every entry."""
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
        """Returns nothing; closes the connection (the file stays)."""
        with self._lock:
            self._conn.close()


def _redact(url: str) -> str:
    """Returns `url` with any password replaced by ``***``, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = f"{parts.username}:***" if parts.username else ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


# KEYS: entry, created zset, index sets; ARGV: value ('' keeps the stored one), lifetime in ms ('' for
# none), cache key, creation time. A set lives as long as its longest-lived entry.
_PUT = """
local ms = tonumber(ARGV[2])
if ARGV[1] ~= '' then
  if ms then redis.call('SET', KEYS[1], ARGV[1], 'PX', ms) else redis.call('SET', KEYS[1], ARGV[1]) end
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
for i = 3, #KEYS do
  local existed = redis.call('EXISTS', KEYS[i]) == 1
  redis.call('SADD', KEYS[i], ARGV[3])
  if not ms then
    redis.call('PERSIST', KEYS[i])
  elseif not existed then
    redis.call('PEXPIRE', KEYS[i], ms)
  else
    local left = redis.call('PTTL', KEYS[i])
    if left >= 0 and left < ms then redis.call('PEXPIRE', KEYS[i], ms) end
  end
end
return 1
"""

# KEYS: one index set (or two: their intersection), created zset; ARGV: entry prefix. Returns entries removed.
_DELETE_INDEXED = """
local members
if #KEYS == 3 then members = redis.call('SINTER', KEYS[1], KEYS[2]) else members = redis.call('SMEMBERS', KEYS[1]) end
local removed = 0
for _, m in ipairs(members) do
  removed = removed + redis.call('DEL', ARGV[1] .. m)
  redis.call('ZREM', KEYS[#KEYS], m)
  for i = 1, #KEYS - 1 do redis.call('SREM', KEYS[i], m) end
end
return removed
"""

# KEYS: created zset; ARGV: entry prefix, cutoff, batch size. Returns {entries removed, members seen}.
_SWEEP = """
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local removed = 0
for _, m in ipairs(members) do
  removed = removed + redis.call('DEL', ARGV[1] .. m)
  redis.call('ZREM', KEYS[1], m)
end
return {removed, #members}
"""


class RedisCache:
    """Returns cached answers from a Redis server, under keys ``<prefix><cache key>`` with SET's expiry.

    Connection problems raise `StoreError` after at most about `timeout_s` per attempt (one retry).
    Hit and miss counts in `stats()` are this object's own; `entries` counts answers under the prefix.
    For deletion and retention, ``<prefix>index:doc:<id>`` and ``<prefix>index:matter:<name>`` are sets of
    the cache keys of a document or matter (expiring with their longest-lived entry) and
    ``<prefix>index:created`` a sorted set of keys by creation time; entries an older docpipe wrote are
    indexed when a cache is first opened (``<prefix>index:version`` records that). Cache keys never start
    with ``index:`` (`cache_key` gives hex).

    >>> cache = RedisCache("redis://127.0.0.1:6379/0")  # doctest: +SKIP
    >>> cache.put("k", {"text": "42"}); cache.get("k")  # doctest: +SKIP
    {'text': '42'}
    """

    def __init__(
        self,
        url: str,
        *,
        ttl_s: float | None = DEFAULT_TTL_S,
        prefix: str = "docpipe:answer:",
        timeout_s: float = 2.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError as exc:
            raise DependencyError(
                "the redis client is not installed, so a redis:// cache URL cannot be used: "
                "pip install 'docpipe[redis]'",
                package="redis",
            ) from exc
        self.url = _redact(url)
        self.ttl_s = _check_ttl(ttl_s)
        self.prefix = prefix
        self._index = f"{prefix}index:"
        self._now = now
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._hits = self._misses = 0
        try:
            self._client = redis.Redis.from_url(
                url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
            )
        except ValueError as exc:
            raise ConfigError(f"bad Redis cache URL {self.url}: {exc}", url=self.url) from exc
        self._call(self._client.ping)
        self._put_script = self._client.register_script(_PUT)
        self._delete_script = self._client.register_script(_DELETE_INDEXED)
        self._sweep_script = self._client.register_script(_SWEEP)
        if not self._call(self._client.exists, f"{self._index}version"):
            self._index_existing()

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._errors as exc:
            raise StoreError(
                f"cannot reach the Redis answer cache at {self.url} ({type(exc).__name__}: {exc}): start "
                "redis-server there, or unset DOCPIPE_CACHE_URL to use the local SQLite cache "
                "(or run with --no-cache)",
                url=self.url,
            ) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        """Returns the cached value for `key`, or None when absent or expired."""
        raw = self._call(self._client.get, self.prefix + key)
        value = None if raw is None else _decode(raw, f"{self.prefix}{key} at {self.url}")
        if value is None:
            self._misses += 1
            if raw is not None:
                self._call(self._client.delete, self.prefix + key)
            return None
        self._hits += 1
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
        ttl = _check_ttl(ttl_s) if ttl_s is not None else self.ttl_s
        self._file(key, _encode(value), ttl, _document_of(value, document_id), matter, self._now())

    def _file(
        self, key: str, raw: str, ttl: float | None, document_id: str | None, matter: str | None, created: float
    ) -> None:
        sets = [f"{self._index}doc:{document_id}"] if document_id is not None else []
        if matter is not None:
            sets.append(f"{self._index}matter:{matter}")
        lifetime = "" if ttl is None else str(max(1, round(ttl * 1000)))
        self._call(
            self._put_script,
            keys=[self.prefix + key, f"{self._index}created", *sets],
            args=[raw.encode("utf-8") if raw else b"", lifetime, key, repr(created)],
        )

    def _index_existing(self) -> None:
        """Files the entries an older docpipe wrote (without index) under their documents."""
        keys = self._keys()
        now = self._now()
        for start in range(0, len(keys), 500):
            batch = keys[start : start + 500]
            pipe = self._client.pipeline(transaction=False)
            for name in batch:
                pipe.get(name)
                pipe.pttl(name)
            replies = self._call(pipe.execute)
            for name, raw, left in zip(batch, replies[::2], replies[1::2]):
                value = None if raw is None else _decode(raw, name.decode(errors="replace"))
                document_id = _document_of(value, None) if value is not None else None
                if document_id is None:
                    continue
                ttl = left / 1000 if left and left > 0 else None
                age = max(0.0, self.ttl_s - ttl) if self.ttl_s is not None and ttl is not None else 0.0
                self._file(name.decode()[len(self.prefix) :], "", ttl, document_id, None, now - age)
        self._call(self._client.set, f"{self._index}version", b"1")
        if keys:
            logger.info("answer cache %s: indexed %d entries by document", self.url, len(keys))

    def delete(self, key: str) -> None:
        """Removes `key` if present."""
        self._call(self._client.delete, self.prefix + key)

    def delete_document(self, document_id: str, *, matter: str | None = None) -> int:
        """Returns how many entries of the document (in `matter` only, when given) it removed."""
        sets = [f"{self._index}doc:{document_id}"]
        if matter is not None:
            sets.append(f"{self._index}matter:{matter}")
        return int(self._call(self._delete_script, keys=[*sets, f"{self._index}created"], args=[self.prefix]))

    def delete_matter(self, matter: str) -> int:
        """Returns how many entries put with this `matter` it removed."""
        keys = [f"{self._index}matter:{matter}", f"{self._index}created"]
        return int(self._call(self._delete_script, keys=keys, args=[self.prefix]))

    def sweep(self, max_age_s: float, *, batch: int = 500) -> int:
        """Returns how many entries put more than `max_age_s` seconds ago it removed (in batches, each
        atomic, so Redis is never blocked for long)."""
        cutoff = repr(self._now() - _check_age(max_age_s))
        removed = 0
        while True:
            gone, seen = self._call(
                self._sweep_script, keys=[f"{self._index}created"], args=[self.prefix, cutoff, batch]
            )
            removed += int(gone)
            if int(seen) < batch:
                return removed

    def _keys(self, *, with_index: bool = False) -> list[bytes]:
        pattern = _glob_escape(self.prefix) + "*"
        keys = self._call(lambda: list(self._client.scan_iter(match=pattern, count=500)))
        if with_index:
            return keys
        index = self._index.encode("utf-8")
        return [k for k in keys if not k.startswith(index)]

    def clear(self) -> None:
        """Removes the keys under this cache's prefix only (SCAN, never FLUSHDB), its index included."""
        keys = self._keys(with_index=True)
        for start in range(0, len(keys), 500):
            self._call(self._client.delete, *keys[start : start + 500])

    def stats(self) -> dict[str, int]:
        """Returns this object's hits and misses, and the number of answers under the prefix."""
        return {"hits": self._hits, "misses": self._misses, "entries": len(self._keys())}

    def close(self) -> None:
        """Returns nothing; closes the client's connections."""
        self._client.close()


def open_cache(url: str | None, *, store_root: Path, ttl_s: float | None = DEFAULT_TTL_S) -> AnswerCache:
    """Returns the answer cache named by `url` (e.g. ``DOCPIPE_CACHE_URL``).

    None or "" -> SQLite at ``<store_root>/answers.sqlite``; ``sqlite:///PATH`` -> SQLite at PATH (as in
    SQLAlchemy: ``sqlite:///cache.sqlite`` is relative to the working directory, ``sqlite:////tmp/a.sqlite``
    absolute); ``redis://`` or ``rediss://`` -> Redis; ``none`` -> no caching.

    >>> import tempfile; type(open_cache("none", store_root=Path(tempfile.mkdtemp()))).__name__
    'NullCache'
    """
    text = (url or "").strip()
    if not text:
        return SQLiteCache(Path(store_root) / "answers.sqlite", ttl_s=ttl_s)
    if text.lower() == "none":
        return NullCache()
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme == "sqlite":
        if not text.lower().startswith("sqlite:///") or len(text) == len("sqlite:///"):
            raise ConfigError(f"bad cache URL {text!r}: write sqlite:///PATH (four slashes for an absolute path)")
        return SQLiteCache(Path(text[len("sqlite:///") :]).expanduser(), ttl_s=ttl_s)
    if scheme in ("redis", "rediss"):
        return RedisCache(text, ttl_s=ttl_s)
    raise ConfigError(
        f"unsupported cache URL {_redact(text)!r}: use {_SCHEMES}, or leave DOCPIPE_CACHE_URL unset "
        "for <store>/answers.sqlite",
        url=_redact(text),
    )
