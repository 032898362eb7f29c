"""Answer cache: a finished answer is kept under a SHA-256 of everything that shaped it (document, question,
mode, model, prompt version, sampling, engine), so asking again costs a lookup instead of a model call.

Backends share the `AnswerCache` protocol: `SQLiteCache` (a file under the store, the default),
`RedisCache` (shared by several machines) and `NullCache` (``--no-cache``). `open_cache` picks one from a
URL such as ``DOCPIPE_CACHE_URL``. Values are JSON objects, in practice ``Answer.to_dict()``.
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

    def put(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None: ...

    def delete(self, key: str) -> None: ...

    def clear(self) -> None: ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...


def _check_ttl(ttl_s: float | None) -> float | None:
    if ttl_s is not None and not ttl_s > 0:
        raise ConfigError(f"cache TTL must be a positive number of seconds, or None for no expiry; got {ttl_s!r}")
    return ttl_s


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

    def put(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        pass

    def delete(self, key: str) -> None:
        pass

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
    `stats()` are this object's own; `entries` counts live rows in the file.

    >>> import tempfile; cache = SQLiteCache(Path(tempfile.mkdtemp()) / "answers.sqlite")
    >>> cache.put("k", {"text": "42"}); cache.get("k")
    {'text': '42'}
    """

    _PURGE_EVERY = 256

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
            self.path.parent.mkdir(parents=True, exist_ok=True)
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
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; a crash may lose the last puts only
            conn.execute(
                "CREATE TABLE IF NOT EXISTS answers "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL, expires REAL)"
            )
            conn.execute("DELETE FROM answers WHERE expires IS NOT NULL AND expires <= ?", (self._now(),))
        except BaseException:
            conn.close()
            raise
        return conn

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

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        conn = self._connection()
        with self._lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(sql, params)
                    conn.execute("COMMIT")
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

    def put(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        """Returns nothing; keeps `value` under `key` for `ttl_s` seconds (default: the cache's TTL)."""
        ttl = _check_ttl(ttl_s) if ttl_s is not None else self.ttl_s
        now = self._now()
        self._write(
            "INSERT OR REPLACE INTO answers (key, value, created, expires) VALUES (?, ?, ?, ?)",
            (key, _encode(value), now, None if ttl is None else now + ttl),
        )
        self._puts += 1
        if self._puts % self._PURGE_EVERY == 0:
            self._write("DELETE FROM answers WHERE expires IS NOT NULL AND expires <= ?", (now,))

    def delete(self, key: str) -> None:
        """Returns nothing; removes `key` if present."""
        self._write("DELETE FROM answers WHERE key = ?", (key,))

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


class RedisCache:
    """Returns cached answers from a Redis server, under keys ``<prefix><cache key>`` with SET's expiry.

    Connection problems raise `StoreError` after at most about `timeout_s` per attempt (one retry).
    Hit and miss counts in `stats()` are this object's own; `entries` counts keys under the prefix.

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

    def put(self, key: str, value: dict[str, Any], *, ttl_s: float | None = None) -> None:
        """Returns nothing; keeps `value` under `key` for `ttl_s` seconds (default: the cache's TTL)."""
        ttl = _check_ttl(ttl_s) if ttl_s is not None else self.ttl_s
        expiry_ms = None if ttl is None else max(1, round(ttl * 1000))
        self._call(self._client.set, self.prefix + key, _encode(value).encode("utf-8"), px=expiry_ms)

    def delete(self, key: str) -> None:
        """Returns nothing; removes `key` if present."""
        self._call(self._client.delete, self.prefix + key)

    def _keys(self) -> list[bytes]:
        pattern = _glob_escape(self.prefix) + "*"
        return self._call(lambda: list(self._client.scan_iter(match=pattern, count=500)))

    def clear(self) -> None:
        """Returns nothing; removes the keys under this cache's prefix only (SCAN, never FLUSHDB)."""
        keys = self._keys()
        for start in range(0, len(keys), 500):
            self._call(self._client.delete, *keys[start : start + 500])

    def stats(self) -> dict[str, int]:
        """Returns this object's hits and misses, and the number of keys under the prefix."""
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
