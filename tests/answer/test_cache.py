"""The answer cache, tested by what it does: keys change with every input that shapes an answer, entries
come back until they expire, concurrent threads and processes do not corrupt the SQLite file, a damaged
file is moved aside, and the Redis backend behaves the same against a real `redis-server` on 127.0.0.1.

No mocks: SQLite runs on real files, expiry uses an injected clock, Redis is a real server started here
(skipped when the `redis-server` binary is not installed).
"""

from __future__ import annotations

import logging
import multiprocessing
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.net import free_port

from docpipe.answer.cache import NullCache, RedisCache, SQLiteCache, cache_key, open_cache
from docpipe.errors import ConfigError, StoreError

ANSWER = {
    "question": "What is the notice period for termination?",
    "text": "Ninety (90) days' written notice.",
    "mode": "extractive",
    "citations": [{"section_id": "s12", "page_start": 7, "page_end": 7, "quote": "ninety (90) days", "verified": True}],
    "score": 0.5,
}

KEY_FIELDS: dict[str, Any] = {
    "document_id": "a" * 64,
    "question": "What is the notice period for termination?",
    "mode": "generative",
    "model": "Qwen/Qwen3-14B",
    "prompt_version": "3",
    "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 1024},
    "engine": "vllm",
    "extra": {"thinking": True},
}


class Clock:
    """A settable clock for `SQLiteCache(now=...)`: expiry is tested without sleeping."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


# -- keys ------------------------------------------------------------------------------------------
def test_same_fields_give_the_same_key() -> None:
    key = cache_key(**KEY_FIELDS)
    assert key == cache_key(**dict(KEY_FIELDS))
    assert len(key) == 64 and int(key, 16) >= 0
    # Dict order does not matter: the JSON is canonical.
    reordered = {**KEY_FIELDS, "sampling": dict(reversed(list(KEY_FIELDS["sampling"].items())))}
    assert cache_key(**reordered) == key


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("document_id", "b" * 64),
        ("question", "What is the notice period for renewal?"),
        ("mode", "extractive"),
        ("model", "Qwen/Qwen3-8B"),
        ("prompt_version", "4"),
        ("sampling", {"temperature": 0.7, "top_p": 0.95, "max_tokens": 1024}),
        ("sampling", {"temperature": 0.6, "top_p": 0.95, "max_tokens": 1024, "seed": 1}),
        ("engine", "openai"),
        ("extra", {"thinking": False}),
        ("extra", None),
    ],
)
def test_each_field_changes_the_key(field: str, value: Any) -> None:
    assert cache_key(**{**KEY_FIELDS, field: value}) != cache_key(**KEY_FIELDS)


def test_question_whitespace_is_normalised_but_case_is_kept() -> None:
    base = cache_key(**KEY_FIELDS)
    spaced = "  What is the notice\tperiod for\n\ntermination?  "
    assert cache_key(**{**KEY_FIELDS, "question": spaced}) == base
    assert cache_key(**{**KEY_FIELDS, "question": KEY_FIELDS["question"].lower()}) != base
    assert cache_key(**{**KEY_FIELDS, "question": "What is the Notice period for termination?"}) != base


def test_key_inputs_must_be_json() -> None:
    with pytest.raises(ConfigError, match="JSON"):
        cache_key(**{**KEY_FIELDS, "sampling": {"temperature": object()}})


# -- SQLite ----------------------------------------------------------------------------------------
def test_sqlite_round_trip_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    cache = SQLiteCache(path)
    key = cache_key(**KEY_FIELDS)
    assert cache.get(key) is None
    cache.put(key, ANSWER)
    assert cache.get(key) == ANSWER
    cache.put(key, {**ANSWER, "text": "replaced"})
    assert cache.get(key)["text"] == "replaced"  # type: ignore[index]
    cache.close()

    reopened = SQLiteCache(path)  # entries survive the process's connection
    assert reopened.get(key)["text"] == "replaced"  # type: ignore[index]
    reopened.delete(key)
    assert reopened.get(key) is None
    reopened.delete(key)  # deleting a missing key is fine
    reopened.close()


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "answers.sqlite"
    SQLiteCache(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_entries_expire(tmp_path: Path) -> None:
    clock = Clock()
    cache = SQLiteCache(tmp_path / "answers.sqlite", ttl_s=100, now=clock)
    cache.put("default-ttl", ANSWER)
    cache.put("short", ANSWER, ttl_s=10)
    clock.advance(9.9)
    assert cache.get("short") == ANSWER
    clock.advance(0.2)
    assert cache.get("short") is None
    assert cache.get("default-ttl") == ANSWER
    clock.advance(100)
    assert cache.get("default-ttl") is None
    assert cache.stats()["entries"] == 0
    cache.close()

    no_expiry = SQLiteCache(tmp_path / "forever.sqlite", ttl_s=None, now=clock)
    no_expiry.put("k", ANSWER)
    clock.advance(10 * 365 * 86400)
    assert no_expiry.get("k") == ANSWER
    no_expiry.close()


def test_expired_entries_are_purged_from_the_file(tmp_path: Path) -> None:
    import sqlite3

    clock = Clock()
    path = tmp_path / "answers.sqlite"
    cache = SQLiteCache(path, ttl_s=5, now=clock)
    cache.put("a", ANSWER)
    cache.put("b", ANSWER)
    clock.advance(6)
    assert cache.get("a") is None
    with sqlite3.connect(path) as conn:
        assert [row[0] for row in conn.execute("SELECT key FROM answers")] == ["b"]
    cache.close()
    SQLiteCache(path, ttl_s=5, now=clock).close()  # opening sweeps the rest
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM answers").fetchone()[0] == 0


def test_unreadable_entry_is_a_miss_and_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import sqlite3

    path = tmp_path / "answers.sqlite"
    cache = SQLiteCache(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO answers (key, value, created, expires) VALUES ('bad', '{not json', 0, NULL)")
    with caplog.at_level(logging.WARNING, logger="docpipe.answer.cache"):
        assert cache.get("bad") is None
    assert "unreadable cache entry" in caplog.text
    assert cache.stats() == {"hits": 0, "misses": 1, "entries": 0}
    cache.close()


def test_bad_ttl_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="positive"):
        SQLiteCache(tmp_path / "answers.sqlite", ttl_s=0)
    cache = SQLiteCache(tmp_path / "answers.sqlite")
    with pytest.raises(ConfigError, match="positive"):
        cache.put("k", ANSWER, ttl_s=-1)
    with pytest.raises(TypeError, match="dict"):
        cache.put("k", ["not", "a", "dict"])  # type: ignore[arg-type]
    cache.close()


def test_sqlite_stats_and_clear(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "answers.sqlite")
    assert cache.stats() == {"hits": 0, "misses": 0, "entries": 0}
    cache.put("a", ANSWER)
    cache.put("b", ANSWER)
    cache.get("a")
    cache.get("a")
    cache.get("missing")
    assert cache.stats() == {"hits": 2, "misses": 1, "entries": 2}
    cache.clear()
    assert cache.get("a") is None
    assert cache.stats() == {"hits": 2, "misses": 2, "entries": 0}
    cache.close()


def test_sqlite_threads_write_concurrently(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "answers.sqlite")
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(worker: int) -> None:
        try:
            start.wait()
            for i in range(50):
                key = f"k{(worker * 25 + i) % 120}"  # neighbouring workers overlap on half their keys
                cache.put(key, {**ANSWER, "worker": worker, "i": i})
                cache.get(key)
        except BaseException as exc:  # collected: an exception in a thread would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    keys = {f"k{(w * 25 + i) % 120}" for w in range(4) for i in range(50)}
    for key in keys:
        value = cache.get(key)
        assert value is not None and value["text"] == ANSWER["text"]
    assert cache.stats()["entries"] == len(keys)
    cache.close()


def _process_writer(path: str, worker: int, ready: Any) -> None:
    """Runs in a spawned process: opens the cache itself and writes keys that overlap the other worker's."""
    ready.wait()
    cache = SQLiteCache(path)
    for i in range(100):
        cache.put(f"k{(worker * 50 + i) % 150}", {**ANSWER, "worker": worker, "i": i})
    cache.close()


def test_sqlite_processes_write_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "answers.sqlite"  # not created yet: both processes race to create it
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(2)
    procs = [ctx.Process(target=_process_writer, args=(str(path), w, ready)) for w in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0]
    cache = SQLiteCache(path)
    keys = {f"k{(w * 50 + i) % 150}" for w in range(2) for i in range(100)}
    assert len(keys) == 150
    for key in keys:
        value = cache.get(key)
        assert value is not None and value["worker"] in (0, 1)
    assert cache.stats()["entries"] == 150
    assert not list(path.parent.glob("*.corrupt-*"))
    cache.close()


def test_corrupted_file_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "answers.sqlite"
    garbage = b"this is not a database \x00\xff" * 400
    path.write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="docpipe.answer.cache"):
        cache = SQLiteCache(path)
    aside = list(tmp_path.glob("answers.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage
    assert any("damaged" in r.getMessage() and str(aside[0]) in r.getMessage() for r in caplog.records)
    cache.put("k", ANSWER)
    assert cache.get("k") == ANSWER
    cache.close()
    assert SQLiteCache(path).get("k") == ANSWER  # the fresh file is a good one


def test_unusable_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(StoreError, match="--no-cache"):
        SQLiteCache(blocker / "answers.sqlite")
    assert blocker.read_text().startswith("a file")  # nothing was moved aside


def test_null_cache_keeps_nothing() -> None:
    cache = NullCache()
    cache.put("k", ANSWER)
    assert cache.get("k") is None
    cache.delete("k")
    cache.clear()
    assert cache.stats() == {"hits": 0, "misses": 1, "entries": 0}
    cache.close()


# -- open_cache ------------------------------------------------------------------------------------
def test_open_cache_defaults_to_sqlite_under_the_store(tmp_path: Path) -> None:
    for url in (None, "", "  "):
        cache = open_cache(url, store_root=tmp_path, ttl_s=60)
        assert isinstance(cache, SQLiteCache)
        assert cache.path == tmp_path / "answers.sqlite" and cache.ttl_s == 60
        cache.close()


def test_open_cache_sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "elsewhere" / "cache.sqlite"
    cache = open_cache(f"sqlite:///{absolute}", store_root=tmp_path / "store", ttl_s=60)
    assert isinstance(cache, SQLiteCache) and cache.path == absolute and absolute.exists()
    cache.close()

    monkeypatch.chdir(tmp_path)
    relative = open_cache("sqlite:///rel/cache.sqlite", store_root=tmp_path / "store", ttl_s=60)
    assert isinstance(relative, SQLiteCache) and relative.path == Path("rel/cache.sqlite")
    assert (tmp_path / "rel" / "cache.sqlite").exists()
    relative.close()


def test_open_cache_none_and_bad_urls(tmp_path: Path) -> None:
    assert isinstance(open_cache("none", store_root=tmp_path, ttl_s=60), NullCache)
    assert isinstance(open_cache("NONE", store_root=tmp_path, ttl_s=60), NullCache)
    for url in ("memcached://localhost:11211", "postgres://db/cache", "/just/a/path", "sqlite:///", "sqlite://x"):
        with pytest.raises(ConfigError, match="sqlite:///PATH") as info:
            open_cache(url, store_root=tmp_path, ttl_s=60)
        assert isinstance(info.value, ValueError)
    with pytest.raises(ConfigError) as info:
        open_cache("memcached://user:s3cret@host", store_root=tmp_path, ttl_s=60)
    assert "s3cret" not in str(info.value) and "redis://" in str(info.value)


def test_missing_redis_client_is_a_dependency_error() -> None:
    # A real interpreter in which `import redis` fails, as on an install without the extra.
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "from docpipe.answer.cache import open_cache\n"
        "from docpipe.errors import DependencyError\n"
        "try:\n"
        "    open_cache('redis://127.0.0.1:1/0', store_root='.', ttl_s=60)\n"
        "except DependencyError as exc:\n"
        "    assert isinstance(exc, ImportError)\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'docpipe-contracts[redis]'" in out.stdout


# -- Redis (a real redis-server) -------------------------------------------------------------------
def test_redis_round_trip_and_stats(redis_url: str, raw_redis: Any) -> None:
    cache = RedisCache(redis_url)
    key = cache_key(**KEY_FIELDS)
    assert cache.get(key) is None
    cache.put(key, ANSWER)
    assert cache.get(key) == ANSWER
    assert raw_redis.exists(f"docpipe:answer:{key}")
    assert 29 * 86400 < raw_redis.ttl(f"docpipe:answer:{key}") <= 30 * 86400  # the default TTL, via SET
    cache.put("b", ANSWER)
    assert cache.stats() == {"hits": 1, "misses": 1, "entries": 2}
    cache.delete(key)
    assert cache.get(key) is None
    cache.close()


def test_redis_entries_expire(redis_url: str, raw_redis: Any) -> None:
    cache = RedisCache(redis_url, ttl_s=60)
    cache.put("short", ANSWER, ttl_s=1)
    cache.put("long", ANSWER)
    assert 0 < raw_redis.pttl("docpipe:answer:short") <= 1000
    time.sleep(1.2)
    assert cache.get("short") is None
    assert cache.get("long") == ANSWER
    cache.close()

    forever = RedisCache(redis_url, ttl_s=None)
    forever.put("k", ANSWER)
    assert raw_redis.ttl("docpipe:answer:k") == -1  # no expiry set
    forever.close()


def test_redis_clear_removes_only_its_prefix(redis_url: str, raw_redis: Any) -> None:
    raw_redis.set("unrelated", "keep me")
    raw_redis.set("docpipe:other:x", "keep me")
    raw_redis.set("t1:x", "keep me")  # would match an unescaped glob of the prefix "t[1]:"
    cache = RedisCache(redis_url)
    odd = RedisCache(redis_url, prefix="t[1]:")
    for i in range(1200):  # more than one SCAN page and one DEL batch
        cache.put(f"k{i}", ANSWER)
    odd.put("k", ANSWER)
    assert cache.stats()["entries"] == 1200 and odd.stats()["entries"] == 1
    cache.clear()
    assert cache.stats()["entries"] == 0
    assert odd.get("k") == ANSWER
    odd.clear()
    assert sorted(raw_redis.keys("*")) == [b"docpipe:other:x", b"t1:x", b"unrelated"]
    cache.close()
    odd.close()


def test_open_cache_redis_url(redis_url: str, raw_redis: Any, tmp_path: Path) -> None:
    cache = open_cache(redis_url, store_root=tmp_path, ttl_s=5)
    assert isinstance(cache, RedisCache)
    cache.put("k", ANSWER)
    assert 0 < raw_redis.pttl("docpipe:answer:k") <= 5000
    assert not (tmp_path / "answers.sqlite").exists()
    cache.close()


def test_unreachable_redis_is_a_store_error_with_a_fix(tmp_path: Path) -> None:
    pytest.importorskip("redis", reason="the redis client is not installed: pip install 'docpipe-contracts[redis]'")
    dead = f"redis://:s3cret@127.0.0.1:{free_port()}/0"  # nothing listens there: refused at once
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        open_cache(dead, store_root=tmp_path, ttl_s=60)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "127.0.0.1" in message and "redis-server" in message and "DOCPIPE_CACHE_URL" in message
    assert "s3cret" not in message and isinstance(info.value, OSError)


def test_silent_redis_times_out_within_bounds() -> None:
    pytest.importorskip("redis", reason="the redis client is not installed: pip install 'docpipe-contracts[redis]'")
    # A socket that accepts connections and never answers: only the socket timeout ends the wait.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        started = time.monotonic()
        with pytest.raises(StoreError, match="start redis-server"):
            RedisCache(url, timeout_s=0.3)
        assert time.monotonic() - started < 5
