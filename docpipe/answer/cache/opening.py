"""`open_cache`: the answer-cache backend named by a URL the caller passes (``cache_url`` in Settings: this
module reads no environment variable). Beside the backends rather than in `base`, which each backend imports.
"""

from __future__ import annotations

from pathlib import Path

from docpipe.answer.cache.base import DEFAULT_TTL_S, AnswerCache, NullCache, redact
from docpipe.answer.cache.redis import RedisCache
from docpipe.answer.cache.sqlite import SQLiteCache
from docpipe.errors import ConfigError

__all__ = ["open_cache"]

_SCHEMES = "sqlite:///PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB or none"


def open_cache(url: str | None, *, store_root: Path, ttl_s: float | None = DEFAULT_TTL_S) -> AnswerCache:
    """Returns the answer cache named by `url` (``Settings.cache_url``: the settings read ``DOCPIPE_CACHE_URL``,
    this function reads no environment variable).

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
        f"unsupported cache URL {redact(text)!r}: use {_SCHEMES}, or leave DOCPIPE_CACHE_URL unset "
        "for <store>/answers.sqlite",
        url=redact(text),
    )
