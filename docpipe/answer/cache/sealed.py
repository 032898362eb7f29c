"""`SealedCache`: any answer-cache backend (SQLite, Redis) with its values sealed under the store key, so cached
answers and review cells (their quotes are contract text) are encrypted at rest like the store itself. The
row's key (a SHA-256 of the inputs), document id, matter and times stay readable: the backend deletes by them.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from docpipe.answer.cache.base import AnswerCache, document_of
from docpipe.storage.sealing import Sealer, open_blob

__all__ = ["SealedCache"]

logger = logging.getLogger(__name__)

# The one field of a sealed entry's stored value: base64 of the sealed JSON of the answer.
_FIELD = "sealed"


class SealedCache:
    """Returns and keeps answers through `inner`, each value sealed for its cache key; entries an unsealed
    cache wrote earlier are still returned (they are rewritten sealed only when put again).

    >>> from docpipe.answer.cache.base import NullCache
    >>> cache = SealedCache(NullCache(), Sealer(bytes(32))); cache.get("k") is None
    True
    """

    def __init__(self, inner: AnswerCache, sealer: Sealer) -> None:
        self.inner = inner
        self.sealer = sealer

    def get(self, key: str) -> dict[str, Any] | None:
        value = self.inner.get(key)
        if value is None or set(value) != {_FIELD}:
            return value  # absent, or written before the key was set
        try:
            plain = open_blob(base64.b64decode(value[_FIELD], validate=True), _where(key), self.sealer)
            answer = json.loads(plain)
        except ValueError as exc:  # damaged (a wrong or missing key raises StoreKeyError, never dropped)
            logger.warning("unreadable sealed cache entry %s (%s); dropping it", key, exc)
            self.inner.delete(key)
            return None
        return answer if isinstance(answer, dict) else None

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        ttl_s: float | None = None,
        document_id: str | None = None,
        matter: str | None = None,
    ) -> None:
        blob = self.sealer.seal(json.dumps(value, ensure_ascii=False).encode("utf-8"), _where(key))
        self.inner.put(
            key,
            {_FIELD: base64.b64encode(blob).decode("ascii")},
            ttl_s=ttl_s,
            document_id=document_of(value, document_id),  # the backend files it under its document
            matter=matter,
        )

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_document(self, document_id: str, *, matter: str | None = None) -> int:
        return self.inner.delete_document(document_id, matter=matter)

    def delete_matter(self, matter: str) -> int:
        return self.inner.delete_matter(matter)

    def sweep(self, max_age_s: float) -> int:
        return self.inner.sweep(max_age_s)

    def clear(self) -> None:
        self.inner.clear()

    def stats(self) -> dict[str, int]:
        return self.inner.stats()

    def close(self) -> None:
        self.inner.close()


def _where(key: str) -> str:
    return f"cache/{key}"
