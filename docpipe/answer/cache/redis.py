"""The shared answer-cache backend: `RedisCache`, answers under ``<prefix><cache key>`` with SET's expiry,
kept findable by document, matter and age through index sets that Lua scripts update atomically, so several
machines share one cache and deletion and retention still work. The ``redis`` client is imported when a
cache is opened (``pip install 'docpipe-contracts[redis]'``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from docpipe.answer.cache.base import DEFAULT_TTL_S, check_age, check_ttl, decode, document_of, encode, redact
from docpipe.errors import ConfigError, DependencyError, StoreError

logger = logging.getLogger(__name__)


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
                "pip install 'docpipe-contracts[redis]'",
                package="redis",
            ) from exc
        self.url = redact(url)
        self.ttl_s = check_ttl(ttl_s)
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
        value = None if raw is None else decode(raw, f"{self.prefix}{key} at {self.url}")
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
        ttl = check_ttl(ttl_s) if ttl_s is not None else self.ttl_s
        self._file(key, encode(value), ttl, document_of(value, document_id), matter, self._now())

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
                value = None if raw is None else decode(raw, name.decode(errors="replace"))
                document_id = document_of(value, None) if value is not None else None
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
        cutoff = repr(self._now() - check_age(max_age_s))
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
        """Closes the client's connections."""
        self._client.close()
