"""Contract text at rest: the store, the answer cache and the server's stored answers are private to their
owner (folders 0700, files 0600, whatever the umask), a document can be deleted so that nothing of it is
left, a matter's records are invisible to another matter, and old entries are swept by age.

Real parts only: a real `DocPipe` (test preset, echo engine, so answers are cached) ingests and answers
the sample contract into a store on disk; SQLite runs on real files; Redis is a real server (skipped when
redis-server is not installed). Ages are set explicitly (an injected clock, a stored creation time, file times): no sleeping.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docpipe import DocPipe, Settings
from docpipe.answer.cache import RedisCache, SQLiteCache
from docpipe.server.storage import ResultStore
from docpipe.storage.store import Store, atomic_write, make_private_dir, private_umask, sha256_hex

QUESTION = "What is the notice period for termination for convenience?"
CLAUSE = "ninety (90) days"  # the answer's text: in the extraction, the index and the cached answer


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Runs the test under the common 022 umask, so private modes must come from docpipe, not the umask."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _modes(root: Path) -> dict[str, str]:
    """Returns {relative path: octal mode} of the root and everything under it."""
    out = {".": oct(stat.S_IMODE(root.stat().st_mode))}
    for path in sorted(root.rglob("*")):
        out[path.relative_to(root).as_posix()] = oct(stat.S_IMODE(path.lstat().st_mode))
    return out


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def _files_holding(root: Path, text: str) -> list[str]:
    needle = text.encode()
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


def _pipe(home: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=home, engine={"backend": "echo"}))


def _ingest_and_answer(pipe: DocPipe, pdf: Path | bytes, results: ResultStore, *, matter: str = "default"):
    doc = pipe.ingest(pdf)
    answer = pipe.ask(doc, QUESTION).to_dict()
    results.save(
        "answers", f"answer-{doc.id[:8]}", {**answer, "id": f"answer-{doc.id[:8]}"}, matter=matter, document_id=doc.id
    )
    results.save(
        "reports", f"report-{doc.id[:8]}", {"id": f"report-{doc.id[:8]}", "document_id": doc.id}, matter=matter
    )
    return doc, answer


# -- permissions ------------------------------------------------------------------------------------
def test_everything_under_a_fresh_store_is_private(open_umask: None, tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    pipe = _pipe(home)
    _ingest_and_answer(pipe, sample_pdf, ResultStore(home / "serve"))
    modes = _modes(home)
    assert {"answers.sqlite", "answers.sqlite-wal", "answers.sqlite-shm"} <= set(modes), sorted(modes)
    assert any(name.endswith("/manifest.json") for name in modes) and any("/source.pdf" in n for n in modes)
    assert any(name.startswith("serve/answers/") for name in modes)
    wrong = {name: mode for name, mode in modes.items() if mode != ("0o700" if (home / name).is_dir() else "0o600")}
    assert wrong == {}


def test_an_existing_open_store_is_tightened_once(
    open_umask: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True, mode=0o755)
    with caplog.at_level(logging.WARNING, logger="docpipe.storage.store"):
        Store(home)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700 and stat.S_IMODE((home / "docs").stat().st_mode) == 0o700
    assert "made it private" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="docpipe.storage.store"):
        Store(home)
    assert caplog.text == ""


def test_an_old_world_readable_cache_file_is_tightened(open_umask: None, tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    with sqlite3.connect(path) as conn:  # as an older docpipe left it: 0644 under this umask
        conn.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL, expires REAL)"
        )
    conn.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    SQLiteCache(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_private_folders_do_not_depend_on_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)  # even one that takes the owner's own write and search bits
    try:
        make_private_dir(tmp_path / "a" / "b")
        atomic_write(tmp_path / "a" / "b" / "c" / "f.json", b"{}")
    finally:
        os.umask(old)
    for folder in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700, folder


def test_private_umask_makes_new_files_private(tmp_path: Path) -> None:
    old = private_umask()
    try:
        (tmp_path / "plain.txt").write_text("x")
        (tmp_path / "folder").mkdir()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "folder").stat().st_mode) == 0o700


# -- deletion -----------------------------------------------------------------------------------------
def test_deleting_a_document_leaves_nothing_of_it(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    pipe = _pipe(home)
    results = ResultStore(home / "serve")
    gone, _ = _ingest_and_answer(pipe, sample_pdf, results)
    other, _ = _ingest_and_answer(pipe, sample_pdf.read_bytes() + b"\n% another copy\n", results)
    assert gone.id != other.id and pipe.store.document_ids() == sorted([gone.id, other.id])
    before = _tree(home)

    assert pipe.store.delete_document(gone.id) is True
    assert pipe.cache.delete_document(gone.id) == 1
    assert results.delete_document(gone.id) == 2

    after = _tree(home)
    removed = before - after
    assert after <= before
    assert {n for n in removed if n.startswith("docs/")} == {n for n in before if n.startswith(f"docs/{gone.id}")}
    assert not [n for n in after if gone.id in n]
    assert {n.split("/")[1] for n in removed if n.startswith("serve/") and n.endswith(".json")} == {
        "answers",
        "reports",
    }
    assert pipe.store.document_ids() == [other.id]
    assert pipe.store.load_source(gone.id) is None
    with sqlite3.connect(home / "answers.sqlite") as conn:
        assert [r[0] for r in conn.execute("SELECT document_id FROM answers")] == [other.id]
    conn.close()
    assert results.load("answers", f"answer-{gone.id[:8]}") is None
    assert results.load("reports", f"report-{gone.id[:8]}") is None
    assert results.load("answers", f"answer-{other.id[:8]}") is not None
    assert results.load("reports", f"report-{other.id[:8]}") is not None
    assert pipe.store.delete_document(gone.id) is False  # nothing left to delete
    assert pipe.cache.delete_document(gone.id) == 0 and results.delete_document(gone.id) == 0


def test_deleted_contract_text_is_in_no_file(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    pipe = _pipe(home)
    results = ResultStore(home / "serve")
    doc, answer = _ingest_and_answer(pipe, sample_pdf, results)
    assert CLAUSE in answer["text"]
    # SQLite copies its WAL into the file every 1000 pages, or when the last connection closes: do it now.
    with sqlite3.connect(home / "answers.sqlite") as other_process:
        other_process.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    other_process.close()
    assert "answers.sqlite" in _files_holding(home, CLAUSE)
    pipe.store.delete_document(doc.id)
    pipe.cache.delete_document(doc.id)
    results.delete_document(doc.id)
    # SQLite keeps deleted rows in free pages and in its WAL unless told otherwise.
    assert _files_holding(home, CLAUSE) == []


def test_a_crashed_deletion_is_finished_by_the_next(tmp_path: Path) -> None:
    store = Store(tmp_path)
    doc_id = "a" * 64
    store.save_source(doc_id, b"%PDF- not really")  # the id need not match for a tombstone
    tomb = tmp_path / "docs" / f".{'b' * 64}.deleted-0123"
    (tomb / "index-x").mkdir(parents=True)
    (tomb / "index-x" / "passages.json").write_text("[]")
    assert store.document_ids() == [doc_id]
    assert store.delete_document(doc_id) is True
    assert os.listdir(tmp_path / "docs") == []


def test_ids_that_are_not_document_ids_delete_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    (tmp_path / "victim").mkdir()
    for bad in ("../../victim", "", ".", "A" * 64, "a" * 63):
        assert store.delete_document(bad) is False
    assert (tmp_path / "victim").is_dir()


# -- matters --------------------------------------------------------------------------------------------
def test_a_record_of_one_matter_is_not_found_in_another(tmp_path: Path) -> None:
    results = ResultStore(tmp_path)
    results.save("answers", "a1", {"id": "a1", "text": "secret"}, matter="acme-v-beta", document_id="d" * 64)
    assert results.load("answers", "a1", matter="acme-v-beta") == {"id": "a1", "text": "secret"}
    assert results.load("answers", "a1", matter="other") is None
    assert results.load("answers", "a1") is None  # the default matter is a matter like any other
    # The same id in two matters is two records.
    results.save("answers", "a1", {"id": "a1", "text": "theirs"}, matter="other", document_id="d" * 64)
    assert results.load("answers", "a1", matter="acme-v-beta")["text"] == "secret"
    assert results.delete_document("d" * 64, matter="other") == 1
    assert results.load("answers", "a1", matter="acme-v-beta")["text"] == "secret"
    assert results.delete_matter("acme-v-beta") == 1
    assert results.load("answers", "a1", matter="acme-v-beta") is None
    assert not (tmp_path / "answers").exists() or os.listdir(tmp_path / "answers") == []
    assert os.listdir(tmp_path / "index") == [".format"]


def test_records_saved_before_matters_stay_readable_and_deletable(tmp_path: Path) -> None:
    # What the server stored before this change: the bare record, named by the SHA-256 of its id.
    old = {"id": "old-1", "document_id": "d" * 64, "text": "kept"}
    atomic_write(tmp_path / "answers" / f"{sha256_hex(b'old-1')}.json", json.dumps(old).encode())
    results = ResultStore(tmp_path)
    assert results.load("answers", "old-1") == old
    assert results.load("answers", "old-1", matter="other") is None
    assert results.delete_document("d" * 64) == 1
    assert results.load("answers", "old-1") is None


def test_cache_entries_are_deleted_by_document_and_matter(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "answers.sqlite")
    cache.put("k1", {"document_id": "d1", "text": "x"}, matter="m1")
    cache.put("k2", {"document_id": "d1", "text": "x"}, matter="m2")
    cache.put("k3", {"text": "x"}, document_id="d2", matter="m1")
    assert cache.delete_document("d1", matter="m1") == 1
    assert cache.get("k1") is None and cache.get("k2") is not None
    assert cache.delete_matter("m1") == 1
    assert cache.get("k3") is None and cache.get("k2") is not None
    assert cache.delete_document("d1") == 1
    assert cache.stats()["entries"] == 0
    cache.close()


def test_an_old_cache_file_is_migrated_and_its_entries_deletable(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    with sqlite3.connect(path) as conn:  # the schema before document ids, with two answers in it
        conn.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL, expires REAL)"
        )
        conn.execute("INSERT INTO answers VALUES ('a', ?, 1, NULL)", (json.dumps({"document_id": "d1"}),))
        conn.execute("INSERT INTO answers VALUES ('b', ?, 1, NULL)", (json.dumps({"document_id": "d2"}),))
        conn.execute("INSERT INTO answers VALUES ('c', '{not json', 1, NULL)")
    conn.close()
    cache = SQLiteCache(path, ttl_s=None)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT key, document_id, matter FROM answers ORDER BY key").fetchall() == [
            ("a", "d1", None),
            ("b", "d2", None),
            ("c", None, None),
        ]
    conn.close()
    assert cache.get("a") == {"document_id": "d1"}
    assert cache.delete_document("d1") == 1
    assert cache.get("a") is None and cache.get("b") == {"document_id": "d2"}
    cache.close()
    # An older docpipe still writing to the migrated file (its INSERT names the old columns only).
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO answers (key, value, created, expires) VALUES ('e', ?, 1, NULL)",
            (json.dumps({"document_id": "d2"}),),
        )
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()
    cache = SQLiteCache(path, ttl_s=None)
    assert cache.delete_document("d2") == 2
    cache.close()


# -- retention -------------------------------------------------------------------------------------------
def test_cache_sweep_removes_old_entries_and_keeps_new_ones(tmp_path: Path) -> None:
    clock = [1_000_000.0]
    cache = SQLiteCache(tmp_path / "answers.sqlite", ttl_s=None, now=lambda: clock[0])
    cache.put("old", {"document_id": "d"})
    clock[0] += 5 * 86400
    cache.put("new", {"document_id": "d"})
    clock[0] += 3600
    assert cache.sweep(86400) == 1
    assert cache.get("old") is None and cache.get("new") == {"document_id": "d"}
    cache.close()


def test_result_sweep_removes_old_records_and_keeps_new_ones(tmp_path: Path) -> None:
    results = ResultStore(tmp_path)
    now = time.time()
    for key in ("old", "new", "old-file-time"):
        results.save("answers", key, {"id": key}, document_id="d" * 64)
    # The stored creation time decides; the file time only for records without one.
    path = tmp_path / "answers" / f"{ResultStore._name('old', 'default')}.json"
    record = json.loads(path.read_bytes())
    path.write_text(json.dumps({**record, "created": now - 10 * 86400}))
    legacy = tmp_path / "answers" / f"{sha256_hex(b'legacy')}.json"
    atomic_write(legacy, json.dumps({"id": "legacy"}).encode())
    os.utime(legacy, (now - 10 * 86400, now - 10 * 86400))
    os.utime(path.with_name(f"{ResultStore._name('new', 'default')}.json"), (now - 10 * 86400,) * 2)

    assert results.sweep(86400, now=now) == 2
    assert results.load("answers", "old") is None and results.load("answers", "legacy") is None
    assert results.load("answers", "new") == {"id": "new"}
    assert results.load("answers", "old-file-time") == {"id": "old-file-time"}
    assert results.delete_document("d" * 64) == 2  # the swept record's marker went with it


# -- Redis -----------------------------------------------------------------------------------------------
def test_redis_deletes_by_document_and_matter_and_sweeps(redis_url: str, raw_redis: Any) -> None:  # noqa: F811
    clock = [1_000_000.0]
    cache = RedisCache(redis_url, ttl_s=600, now=lambda: clock[0])
    cache.put("k2", {"document_id": "d1"}, matter="m2", ttl_s=1200)
    cache.put("k1", {"document_id": "d1"}, matter="m1")  # a shorter life must not shorten the set's
    cache.put("k3", {"text": "x"}, document_id="d2", matter="m1")
    assert 600_000 < raw_redis.pttl("docpipe:answer:index:doc:d1") <= 1_200_000  # its longest-lived entry
    assert cache.stats()["entries"] == 3  # index keys are not entries
    assert cache.delete_document("d1", matter="m1") == 1
    assert cache.get("k1") is None and cache.get("k2") is not None
    assert cache.delete_matter("m1") == 1 and cache.get("k3") is None
    assert cache.delete_document("d1") == 1 and cache.stats()["entries"] == 0

    cache.put("old", {"document_id": "d3"})
    clock[0] += 500
    cache.put("new", {"document_id": "d3"})
    assert cache.sweep(100, batch=1) == 1
    assert cache.get("old") is None and cache.get("new") is not None
    cache.clear()
    assert raw_redis.keys("*") == []
    cache.close()


def test_redis_entries_of_an_older_docpipe_are_indexed_and_deletable(
    redis_url: str,  # noqa: F811
    raw_redis: Any,  # noqa: F811
) -> None:
    raw_redis.set("docpipe:answer:old", json.dumps({"document_id": "d1"}), px=60_000)
    raw_redis.set("docpipe:answer:other", json.dumps({"document_id": "d2"}))
    cache = RedisCache(redis_url)
    assert cache.delete_document("d1") == 1
    assert raw_redis.get("docpipe:answer:old") is None and cache.get("other") == {"document_id": "d2"}
    cache.close()
