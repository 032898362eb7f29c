"""Answer cache: a finished answer is kept under a SHA-256 of everything that shaped it (document, question,
mode, model, prompt version, sampling, engine), so asking again costs a lookup instead of a model call.

Backends share the `AnswerCache` protocol (`base`): `SQLiteCache` (`sqlite`: a file under the store, the
default), `RedisCache` (`redis`: shared by several machines) and `NullCache` (``--no-cache``); `open_cache`
(`opening`) picks one from a URL such as ``Settings.cache_url``. Values are JSON objects, in practice
``Answer.to_dict()``. Every entry knows its document (and matter, when given), so deleting a document or a
matter removes its answers, and `sweep` removes entries older than a retention period besides the TTL. The package imports only
docpipe.errors and docpipe.storage.store (for private file modes).
"""

from __future__ import annotations

from docpipe.answer.cache.base import DEFAULT_TTL_S, AnswerCache, NullCache, cache_key
from docpipe.answer.cache.opening import open_cache
from docpipe.answer.cache.redis import RedisCache
from docpipe.answer.cache.sqlite import SQLiteCache

__all__ = ["DEFAULT_TTL_S", "AnswerCache", "NullCache", "RedisCache", "SQLiteCache", "cache_key", "open_cache"]
