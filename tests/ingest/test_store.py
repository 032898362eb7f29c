"""The content-addressed store, tested by what it does on disk: nothing is extracted or embedded twice,
settings that shape an index get their own entry, damaged entries are rebuilt, writes are atomic, and the
text of an encrypted PDF is only handed out with its password.

Everything is real (extraction worker, sectioning, FAISS); the embedder is the packaged hashing embedder,
wrapped by `CountingEmbedder` below to observe what gets embedded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from docpipe import (
    DocPipe,
    Document,
    HashingEmbedder,
    PasswordRequiredError,
    Settings,
    WrongPasswordError,
)
from docpipe.ingest.sentences import document_texts
from docpipe.storage.store import Store, atomic_write

ENCRYPTED = "pypdf-r2-user-password.pdf"
ENCRYPTED_PASSWORD = "asdfzxcv"
INDEX_FILES = ("document.json", "passages.json", "dense.faiss", "manifest.json")


class CountingEmbedder:
    """A real `Embedder`: the hashing embedder's vectors, recording every text it is asked to embed."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder()
        self.name = self._inner.name
        self.dim = self._inner.dim
        self.max_tokens = self._inner.max_tokens
        self.embedded: list[str] = []
        self.token_span_calls = 0

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        self.token_span_calls += 1
        return self._inner.token_spans(text)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return self._inner.embed(texts)


def _snapshot(home: Path) -> dict[str, tuple[int, int, int]]:
    """Returns {relative path: (inode, mtime_ns, size)} of every file under `home`."""
    return {
        str(p.relative_to(home)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def _doc_dir(home: Path, doc_id: str) -> Path:
    return home / "docs" / doc_id


def _index_dirs(home: Path, doc_id: str) -> list[str]:
    return sorted(p.name for p in _doc_dir(home, doc_id).iterdir() if p.is_dir() and p.name.startswith("index-"))


def _sections(doc: Document) -> list[tuple[Any, ...]]:
    return [(s.id, s.heading, s.page_start, s.page_end, s.start, s.end, s.text) for s in doc.sections]


def _answers(dp: DocPipe, doc: Document, facts: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    return [
        [(c.section_id, c.page_start, c.page_end, c.quote, c.verified) for c in dp.ask(doc, f["question"]).citations]
        for f in facts
    ]


def _assert_valid_entry(home: Path, doc_id: str, fingerprint: str) -> None:
    folder = _doc_dir(home, doc_id) / f"index-{fingerprint}"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["files"]) == {"document.json", "passages.json", "dense.faiss"}
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "flipped":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif how == "deleted":
        path.unlink()
    else:  # pragma: no cover - a typo in a parameter
        raise AssertionError(how)


def _counting_pipe(home: Path, **overrides: Any) -> tuple[DocPipe, CountingEmbedder]:
    embedder = CountingEmbedder()
    return DocPipe(Settings.preset("test", home=home, **overrides), embedder=embedder), embedder


# -- content addressing ------------------------------------------------------------------------


def test_document_id_is_the_sha256_of_the_file_bytes(test_pipe: DocPipe, sample_pdf: Path) -> None:
    data = sample_pdf.read_bytes()
    doc = test_pipe.ingest(sample_pdf)
    assert doc.id == hashlib.sha256(data).hexdigest()
    assert (_doc_dir(test_pipe.store.root, doc.id) / "source.pdf").read_bytes() == data

    # One more byte after %%EOF is still a readable PDF, but other content: another id, another folder.
    changed = test_pipe.ingest(data + b"\n% appended\n", name="changed.pdf")
    assert changed.id == hashlib.sha256(data + b"\n% appended\n").hexdigest() != doc.id
    assert sorted(p.name for p in (test_pipe.store.root / "docs").iterdir()) == sorted([doc.id, changed.id])


def test_same_bytes_are_extracted_and_embedded_once(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    data = sample_pdf.read_bytes()
    first_pipe, first = _counting_pipe(home)
    doc = first_pipe.ingest(sample_pdf)
    manifest = json.loads((_doc_dir(home, doc.id) / f"index-{doc.fingerprint}" / "manifest.json").read_text())
    assert manifest["passages"] > len(doc.sections) > 20
    # The passages, then every sentence and heading offline answers score (the sentence table).
    sentences = document_texts(doc.sections)
    assert len(first.embedded) == manifest["passages"] + len(sentences), "the counter must see every embedding"
    assert first.embedded[manifest["passages"] :] == sentences
    before = _snapshot(home)
    embedded_once = len(first.embedded)

    again = [first_pipe.ingest(sample_pdf), first_pipe.ingest(data), first_pipe.ingest(str(sample_pdf))]
    assert len(first.embedded) == embedded_once

    # A new DocPipe on the same home reads the store; it neither extracts nor embeds.
    second_pipe, second = _counting_pipe(home)
    again += [second_pipe.ingest(sample_pdf), second_pipe.ingest(bytearray(data)), second_pipe.ingest(memoryview(data))]
    assert second.embedded == []
    assert second.token_span_calls == 0

    assert _snapshot(home) == before, "a cache hit must not rewrite any stored file"
    for other in again:
        assert other.id == doc.id
        assert other.fingerprint == doc.fingerprint
        assert _sections(other) == _sections(doc)


def test_changed_chunking_builds_a_new_entry_and_reuses_the_extraction(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    doc = DocPipe(Settings.preset("test", home=home)).ingest(sample_pdf)
    before = _snapshot(home)

    small = DocPipe(Settings.preset("test", home=home, chunking={"max_section_tokens": 256})).ingest(sample_pdf)
    assert small.fingerprint != doc.fingerprint
    assert _index_dirs(home, doc.id) == sorted([f"index-{doc.fingerprint}", f"index-{small.fingerprint}"])
    assert max(s.n_tokens for s in small.sections) <= 256 < max(s.n_tokens for s in doc.sections)
    after = _snapshot(home)
    for name, stat in before.items():
        assert after[name] == stat, f"{name} was rewritten: the extraction and the old entry must be reused"
    assert [n for n in after if n.endswith(".json") and "/extract-" in n] == [f"docs/{doc.id}/extract-pypdf.json"]

    # The old entry is still the one the old settings get.
    again = DocPipe(Settings.preset("test", home=home)).ingest(sample_pdf)
    assert _sections(again) == _sections(doc)
    assert _snapshot(home) == after


def test_changed_extractor_builds_a_new_extraction_and_entry(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    doc = DocPipe(Settings.preset("test", home=home)).ingest(sample_pdf)
    before = _snapshot(home)

    other = DocPipe(Settings.preset("test", home=home, extraction={"extractor": "pypdfium2"})).ingest(sample_pdf)
    assert other.extractor == "pypdfium2" and doc.extractor == "pypdf"
    assert other.fingerprint != doc.fingerprint
    assert len(other.pages) == 15
    assert _index_dirs(home, doc.id) == sorted([f"index-{doc.fingerprint}", f"index-{other.fingerprint}"])
    assert (_doc_dir(home, doc.id) / "extract-pypdfium2.json").is_file()
    after = _snapshot(home)
    assert all(after[name] == stat for name, stat in before.items())


# -- damage ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path, expected_facts: list[dict[str, Any]]):
    """Returns (home, document, answers) of a store built once; tests damage copies of it."""
    home = tmp_path_factory.mktemp("pristine") / "home"
    dp, _ = _counting_pipe(home)
    doc = dp.ingest(sample_pdf)
    return home, doc, _answers(dp, doc, expected_facts)


def _copy_of(pristine_home: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(pristine_home, home)
    return home


def _assert_rebuilt_like(home: Path, sample_pdf: Path, doc: Document, answers: Any, facts: Any) -> None:
    """A new DocPipe ingests without raising, rebuilds, gives the same sections and answers, and leaves a
    valid entry that the next DocPipe loads without embedding anything."""
    dp, counter = _counting_pipe(home)
    rebuilt = dp.ingest(sample_pdf)
    assert counter.embedded, "the damaged entry must have been rebuilt, not served"
    assert rebuilt.id == doc.id and rebuilt.fingerprint == doc.fingerprint
    assert _sections(rebuilt) == _sections(doc)
    assert _answers(dp, rebuilt, facts) == answers
    _assert_valid_entry(home, doc.id, doc.fingerprint)

    later, later_counter = _counting_pipe(home)
    assert _sections(later.ingest(sample_pdf)) == _sections(doc)
    assert later_counter.embedded == []


@pytest.mark.parametrize("how", ["truncated", "empty", "flipped", "deleted"])
@pytest.mark.parametrize("name", INDEX_FILES)
def test_damaged_index_file_is_rebuilt(
    pristine, tmp_path: Path, sample_pdf: Path, expected_facts, caplog: pytest.LogCaptureFixture, name: str, how: str
) -> None:
    pristine_home, doc, answers = pristine
    home = _copy_of(pristine_home, tmp_path)
    _damage(_doc_dir(home, doc.id) / f"index-{doc.fingerprint}" / name, how)
    extraction = _snapshot(home)[f"docs/{doc.id}/extract-pypdf.json"]
    with caplog.at_level(logging.WARNING, logger="docpipe"):
        _assert_rebuilt_like(home, sample_pdf, doc, answers, expected_facts)
    assert any(r.name.startswith("docpipe.") and r.levelno == logging.WARNING for r in caplog.records), (
        "damage must be logged, not silently repaired"
    )
    assert _snapshot(home)[f"docs/{doc.id}/extract-pypdf.json"] == extraction, "the good extraction is reused"


@pytest.mark.parametrize("how", ["truncated", "empty", "flipped", "deleted"])
def test_damaged_extraction_and_index_are_rebuilt(
    pristine, tmp_path: Path, sample_pdf: Path, expected_facts, how: str
) -> None:
    pristine_home, doc, answers = pristine
    home = _copy_of(pristine_home, tmp_path)
    _damage(_doc_dir(home, doc.id) / "extract-pypdf.json", how)
    _damage(_doc_dir(home, doc.id) / f"index-{doc.fingerprint}" / "document.json", "truncated")
    _assert_rebuilt_like(home, sample_pdf, doc, answers, expected_facts)
    record = Store(home).load_extraction(doc.id, "pypdf")
    assert record is not None, "the damaged extraction must have been replaced with a valid one"
    assert [p["text"] for p in record["pages"]] == [p.text for p in doc.pages]


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_damaged_extraction_is_redone_for_new_chunking(pristine, tmp_path: Path, sample_pdf: Path, how: str) -> None:
    pristine_home, doc, _ = pristine
    home = _copy_of(pristine_home, tmp_path)
    _damage(_doc_dir(home, doc.id) / "extract-pypdf.json", how)
    dp, _ = _counting_pipe(home, chunking={"max_section_tokens": 512})
    other = dp.ingest(sample_pdf)
    assert [p.text for p in other.pages] == [p.text for p in doc.pages]
    record = Store(home).load_extraction(doc.id, "pypdf")
    assert record is not None and [p["text"] for p in record["pages"]] == [p.text for p in doc.pages]


@pytest.mark.parametrize(
    ("relative", "content"),
    [("index/manifest.json", b'{"files": []}'), ("extract-pypdf.json", b"[]"), ("extract-pypdf.json", b'"x"')],
)
def test_wrongly_shaped_json_is_treated_as_damage(
    pristine, tmp_path: Path, sample_pdf: Path, relative: str, content: bytes
) -> None:
    pristine_home, doc, _ = pristine
    home = _copy_of(pristine_home, tmp_path)
    folder = _doc_dir(home, doc.id)
    (folder / relative.replace("index/", f"index-{doc.fingerprint}/")).write_bytes(content)
    # A new chunking setting makes the pipeline read the extraction as well as the (new) entry.
    for overrides in ({}, {"chunking": {"max_section_tokens": 512}}):
        dp, _ = _counting_pipe(home, **overrides)
        assert [p.text for p in dp.ingest(sample_pdf).pages] == [p.text for p in doc.pages]


def test_damaged_source_is_replaced_when_the_good_bytes_come_again(pristine, tmp_path: Path, sample_pdf: Path) -> None:
    pristine_home, doc, _ = pristine
    home = _copy_of(pristine_home, tmp_path)
    folder = _doc_dir(home, doc.id)
    _damage(folder / "source.pdf", "truncated")
    _damage(folder / "extract-pypdf.json", "truncated")
    _counting_pipe(home, chunking={"max_section_tokens": 512})[0].ingest(sample_pdf)  # extracts the good bytes
    (folder / "extract-pypdf.json").unlink()
    other, _ = _counting_pipe(home, chunking={"max_section_tokens": 1024})
    assert other.search(doc, "termination for convenience")  # rebuilds from the stored source
    assert hashlib.sha256((folder / "source.pdf").read_bytes()).hexdigest() == doc.id


# -- atomic writes -----------------------------------------------------------------------------


def test_atomic_write_leaves_only_the_target(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.json"
    atomic_write(target, b"first")
    assert target.read_bytes() == b"first"
    atomic_write(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["file.json"]


def test_failed_atomic_write_leaves_no_temp_file_and_keeps_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    atomic_write(target, b"old")
    with pytest.raises(TypeError):
        atomic_write(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]

    folder = tmp_path / "taken"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        atomic_write(folder, b"data")  # the rename onto a non-empty folder fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json", "taken"]


def test_store_writes_leave_no_temp_files(test_pipe: DocPipe, sample_pdf: Path) -> None:
    test_pipe.ingest(sample_pdf)
    DocPipe(Settings.preset("test", home=test_pipe.store.root, chunking={"max_section_tokens": 512})).ingest(sample_pdf)
    leftovers = [p for p in test_pipe.store.root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]
    assert leftovers == []


def test_leftover_temp_files_from_a_crash_do_not_break_loading(pristine, tmp_path: Path, sample_pdf: Path) -> None:
    pristine_home, doc, _ = pristine
    home = _copy_of(pristine_home, tmp_path)
    folder = _doc_dir(home, doc.id)
    crashed = folder / f".index-{doc.fingerprint}.k3j2h1.tmp"
    crashed.mkdir()
    (crashed / "document.json").write_bytes(b'{"id": "half-writ')
    (folder / ".index-xxx.tmp").mkdir()
    (folder / ".extract-pypdf.json.abc123.tmp").write_bytes(b'{"pages": [')
    (folder / f"index-{doc.fingerprint}" / ".document.json.q9.tmp").write_bytes(b"partial")

    dp, counter = _counting_pipe(home)
    assert _sections(dp.ingest(sample_pdf)) == _sections(doc)
    assert counter.embedded == [], "the complete entry beside the leftovers must be used as it is"


def test_crash_before_publishing_an_entry_rebuilds_it(pristine, tmp_path: Path, sample_pdf: Path) -> None:
    pristine_home, doc, _ = pristine
    home = _copy_of(pristine_home, tmp_path)
    folder = _doc_dir(home, doc.id)
    entry = folder / f"index-{doc.fingerprint}"
    # The crash happened after the files were written to the temp folder, before the rename.
    entry.rename(folder / f".index-{doc.fingerprint}.crashed.tmp")
    (folder / f".index-{doc.fingerprint}.crashed.tmp" / "manifest.json").write_bytes(b'{"form')

    dp, counter = _counting_pipe(home)
    assert _sections(dp.ingest(sample_pdf)) == _sections(doc)
    assert counter.embedded
    _assert_valid_entry(home, doc.id, doc.fingerprint)


# -- encrypted documents -----------------------------------------------------------------------


@pytest.fixture
def encrypted_pdf(eval_dir: Path) -> Path:
    path = eval_dir / "bad-pdfs" / ENCRYPTED
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_encrypted_document_is_only_handed_out_with_its_password(tmp_path: Path, encrypted_pdf: Path) -> None:
    settings = Settings.preset("test", home=tmp_path / "home")
    with pytest.raises(WrongPasswordError):
        DocPipe(settings).ingest(encrypted_pdf, password="wrong")
    doc = DocPipe(settings).ingest(encrypted_pdf, password=ENCRYPTED_PASSWORD)
    assert doc.encrypted
    assert "pdf encryption test" in doc.text

    fresh = DocPipe(settings)
    with pytest.raises(PasswordRequiredError) as caught:
        fresh.ingest(encrypted_pdf)
    assert caught.value.path == ENCRYPTED
    assert "password" in str(caught.value)
    with pytest.raises(PasswordRequiredError):
        fresh.ingest(encrypted_pdf.read_bytes())
    with pytest.raises(WrongPasswordError):
        fresh.ingest(encrypted_pdf, password="asdfzxcV")
    with pytest.raises(PasswordRequiredError):
        fresh.search(encrypted_pdf, "encryption")
    with pytest.raises(PasswordRequiredError):
        fresh.ask(encrypted_pdf, "What is the password?")
    opened = fresh.ingest(encrypted_pdf, password=ENCRYPTED_PASSWORD)
    assert opened.text == doc.text
    # Once loaded in memory, it is still not handed out without the password.
    with pytest.raises(PasswordRequiredError):
        fresh.ingest(encrypted_pdf)
    assert fresh.search(encrypted_pdf, "encryption", password=ENCRYPTED_PASSWORD)

    # Other settings reuse the stored extraction: the password is checked there too.
    other = DocPipe(Settings.preset("test", home=tmp_path / "home", chunking={"max_section_tokens": 512}))
    with pytest.raises(PasswordRequiredError):
        other.ingest(encrypted_pdf)
    with pytest.raises(WrongPasswordError):
        other.ingest(encrypted_pdf, password="wrong")
    assert other.ingest(encrypted_pdf, password=ENCRYPTED_PASSWORD).text == doc.text


def test_encrypted_document_is_not_handed_out_for_a_bare_id(tmp_path: Path, encrypted_pdf: Path) -> None:
    settings = Settings.preset("test", home=tmp_path / "home")
    doc = DocPipe(settings).ingest(encrypted_pdf, password=ENCRYPTED_PASSWORD)
    stub = Document(id=doc.id, name="anything.pdf", pages=[])
    with pytest.raises(PasswordRequiredError):
        DocPipe(settings).search(stub, "password")


# -- where the store lives ---------------------------------------------------------------------


def test_docpipe_home_env_var_picks_the_store_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_pdf: Path
) -> None:
    monkeypatch.setenv("DOCPIPE_HOME", str(tmp_path / "from-env"))
    assert Settings().store_root() == tmp_path / "from-env"
    assert Settings.preset("test").store_root() == tmp_path / "from-env"
    assert Settings(home=tmp_path / "explicit").store_root() == tmp_path / "explicit"
    assert Settings.preset("test", home=tmp_path / "explicit").store_root() == tmp_path / "explicit"

    doc = DocPipe(Settings.preset("test")).ingest(sample_pdf)
    assert (tmp_path / "from-env" / "docs" / doc.id / "source.pdf").is_file()
    assert not (tmp_path / "explicit").exists()

    monkeypatch.delenv("DOCPIPE_HOME")
    default = Settings().store_root()
    assert default.name == "docpipe" and tmp_path not in default.parents
    assert os.path.isabs(default)


def test_a_second_writer_keeps_the_entry_already_published(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.save_index("ab" * 32, "fp", {"a.bin": b"one"}, {})
    first = store.index_dir("ab" * 32, "fp")
    inode = (first / "a.bin").stat().st_ino
    store.save_index("ab" * 32, "fp", {"a.bin": b"one"}, {})  # a racing process with the same content
    assert (first / "a.bin").stat().st_ino == inode  # not deleted and replaced under a reader
    assert store.load_index("ab" * 32, "fp") == {"a.bin": b"one"}
    assert not [p for p in first.parent.iterdir() if p.name.endswith(".tmp")]
    # A damaged entry is still replaced.
    (first / "a.bin").write_bytes(b"rot")
    store.save_index("ab" * 32, "fp", {"a.bin": b"one"}, {})
    assert store.load_index("ab" * 32, "fp") == {"a.bin": b"one"}
