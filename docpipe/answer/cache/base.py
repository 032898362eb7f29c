"""What every answer-cache backend shares: the `AnswerCache` protocol, `cache_key` (a SHA-256 of everything
that shaped an answer), `NullCache`, and the small checks and codecs the backends use. Imports only
docpipe.errors; `opening.open_cache` picks a backend from a URL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from docpipe.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_TTL_S = 30 * 86400.0

# Part of every key: bump it when the shape of cached values changes, and old entries stop matching.
_KEY_FORMAT = 1

_SPACE = re.compile(r"\s+")


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
        check_age(max_age_s)
        return 0

    def clear(self) -> None:
        pass

    def stats(self) -> dict[str, int]:
        return {"hits": 0, "misses": self._misses, "entries": 0}

    def close(self) -> None:
        pass


def check_ttl(ttl_s: float | None) -> float | None:
    if ttl_s is not None and not ttl_s > 0:
        raise ConfigError(f"cache TTL must be a positive number of seconds, or None for no expiry; got {ttl_s!r}")
    return ttl_s


def check_age(max_age_s: float) -> float:
    if not max_age_s >= 0:
        raise ConfigError(f"retention must be zero or more seconds; got {max_age_s!r}")
    return float(max_age_s)


def document_of(value: dict[str, Any], document_id: str | None) -> str | None:
    if document_id is not None:
        return document_id
    found = value.get("document_id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def encode(value: dict[str, Any]) -> str:
    if not isinstance(value, dict):
        raise TypeError(f"cache values are dicts (Answer.to_dict()), not {type(value).__name__}")
    return json.dumps(value, ensure_ascii=False)


def decode(raw: str | bytes, where: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        logger.warning("unreadable cache entry %s (%s); dropping it", where, exc)
        return None
    return value if isinstance(value, dict) else None


def redact(url: str) -> str:
    """Returns `url` with any password replaced by ``***``, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = f"{parts.username}:***" if parts.username else ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))
