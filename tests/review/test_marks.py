"""Reviewer marks (issue 27): a cell marked accepted, corrected (with the value) or flagged, with a comment, who
and when; kept per matter on disk with the store's private modes (sealed under a store key), found again by the
same (document, column key), concurrency-safe, gone with a clear or the matter's deletion. Real stores on disk."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from docpipe.access.matters import MatterStore
from docpipe.errors import ConfigError, StoreKeyError
from docpipe.review.marks import (
    HISTORY,
    MARK_STATUSES,
    MAX_COMMENT_CHARS,
    MAX_VALUE_CHARS,
    Mark,
    MarkStore,
)
from docpipe.storage.sealing import Sealer

DOC = "ab" * 32
DOC2 = "cd" * 32


def test_a_mark_is_stored_with_who_and_when_and_found_again(tmp_path: Path) -> None:
    before = time.time()
    mark = MarkStore(tmp_path).set(
        "deal-x", DOC, "Governing Law", status="corrected", value="Delaware", comment="see 12.3", user="alice"
    )
    assert mark == Mark(DOC, "Governing Law", "corrected", "Delaware", "see 12.3", "alice", mark.time)
    assert before <= mark.time <= time.time()
    again = MarkStore(tmp_path)  # a new process: only what is on disk
    assert again.marks("deal-x") == {(DOC, "Governing Law"): mark}
    assert again.get("deal-x", DOC, "Governing Law") == mark
    assert again.marks("deal-x", [DOC2]) == {}
    assert again.marks("deal-x", [DOC, DOC2]) == {(DOC, "Governing Law"): mark}
    assert again.marks("deal-y") == {}  # another matter sees none
    assert mark.text == "Corrected: Delaware - see 12.3 (alice)"


def test_every_status_and_a_free_question_as_the_column(tmp_path: Path) -> None:
    marks = MarkStore(tmp_path)
    question = "What is the notice period?\nAnd where / which \\ section? ../../x"
    for n, status in enumerate(MARK_STATUSES):
        value = "90 days" if status == "corrected" else None
        marks.set("default", DOC, f"{question} {n}", status=status, value=value, user="bob")
    found = marks.marks("default")
    assert sorted(m.status for m in found.values()) == sorted(MARK_STATUSES)
    assert all(key[1].startswith(question) for key in found)


def test_marks_are_private_files_under_the_matter(tmp_path: Path) -> None:
    MarkStore(tmp_path).set("deal-x", DOC, "Term", status="flagged", comment="privileged remark", user="alice")
    folder = tmp_path / "matters" / "deal-x" / "marks"
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != ".lock"]
    assert len(files) == 1 and files[0].parent.name == DOC
    for path in [folder, folder.parent, files[0].parent]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / ".lock").stat().st_mode) == 0o600


def test_a_store_key_seals_marks(tmp_path: Path) -> None:
    sealer = Sealer(bytes(range(32)))
    MarkStore(tmp_path, sealer=sealer).set("deal-x", DOC, "Term", status="flagged", comment="secret", user="a")
    (path,) = [p for p in (tmp_path / "matters").rglob("*.json")]
    assert b"secret" not in path.read_bytes()
    assert MarkStore(tmp_path, sealer=sealer).get("deal-x", DOC, "Term").comment == "secret"  # type: ignore[union-attr]
    with pytest.raises(StoreKeyError):  # the data is there, the key is not: never taken for "no marks"
        MarkStore(tmp_path).marks("deal-x")


def test_a_new_mark_replaces_the_old_one_which_history_keeps(tmp_path: Path) -> None:
    marks = MarkStore(tmp_path)
    marks.set("deal-x", DOC, "Term", status="flagged", comment="check", user="alice")
    marks.set("deal-x", DOC, "Term", status="accepted", user="bob")
    assert marks.get("deal-x", DOC, "Term").status == "accepted"  # type: ignore[union-attr]
    assert [(m.status, m.user) for m in marks.history("deal-x", DOC, "Term")] == [
        ("accepted", "bob"),
        ("flagged", "alice"),
    ]
    for n in range(HISTORY + 5):
        marks.set("deal-x", DOC, "Term", status="accepted", comment=str(n), user="bob")
    assert len(marks.history("deal-x", DOC, "Term")) == HISTORY + 1  # bounded


def test_clear_removes_the_mark_and_its_history(tmp_path: Path) -> None:
    marks = MarkStore(tmp_path)
    marks.set("deal-x", DOC, "Term", status="flagged", user="alice")
    marks.set("deal-x", DOC, "Law", status="accepted", user="alice")
    assert marks.clear("deal-x", DOC, "Term") is True
    assert marks.clear("deal-x", DOC, "Term") is False
    assert marks.history("deal-x", DOC, "Term") == []
    assert list(marks.marks("deal-x")) == [(DOC, "Law")]
    assert marks.clear("deal-x", DOC, "Law") is True
    assert not (tmp_path / "matters" / "deal-x" / "marks" / DOC).exists()  # no empty folder per document
    assert marks.clear("never-used", DOC, "Law") is False


def test_deleting_the_matter_removes_its_marks(tmp_path: Path) -> None:
    marks = MarkStore(tmp_path)
    MatterStore(tmp_path).add("deal-x", DOC, name="msa.pdf", user="alice", key_id="k1", encrypted=False)
    marks.set("deal-x", DOC, "Term", status="accepted", user="alice")
    marks.set("deal-y", DOC, "Term", status="flagged", user="carol")
    MatterStore(tmp_path).delete_matter("deal-x")
    assert marks.marks("deal-x") == {}
    assert list(marks.marks("deal-y")) == [(DOC, "Term")]


def test_concurrent_writers_lose_no_mark(tmp_path: Path) -> None:
    # Two stores (as two processes would have) and many threads marking the same document at once.
    stores = [MarkStore(tmp_path), MarkStore(tmp_path)]
    errors: list[BaseException] = []

    def mark(n: int) -> None:
        try:
            for i in range(10):
                stores[n % 2].set("deal-x", DOC, f"q{n}-{i}", status="flagged", user=f"u{n}")
                stores[n % 2].set("deal-x", DOC, "shared", status="accepted", comment=f"{n}-{i}", user=f"u{n}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=mark, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    found = MarkStore(tmp_path).marks("deal-x")
    assert len(found) == 6 * 10 + 1
    assert len(MarkStore(tmp_path).history("deal-x", DOC, "shared")) == HISTORY + 1
    assert not [p for p in (tmp_path / "matters").rglob("*.tmp")]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"status": "approved"}, "is not a mark: use accepted, corrected, flagged"),
        ({"status": ""}, "is not a mark"),
        ({"status": "corrected"}, "a correction needs the corrected value"),
        ({"status": "corrected", "value": "   "}, "a correction needs the corrected value"),
        ({"status": "accepted", "value": "x"}, "a value goes with a correction only"),
        ({"status": "flagged", "comment": "x" * (MAX_COMMENT_CHARS + 1)}, f"keep it under {MAX_COMMENT_CHARS}"),
        ({"status": "corrected", "value": "x" * (MAX_VALUE_CHARS + 1)}, f"keep it under {MAX_VALUE_CHARS}"),
        ({"status": "flagged", "comment": "a\x00b"}, "control characters"),
        ({"status": "flagged", "user": ""}, "the user is empty"),
        ({"status": "flagged", "user": "u" * 201}, "keep it under 200"),
        ({"status": "flagged", "comment": 3}, "must be text"),
    ],
)
def test_bad_marks_are_refused_with_the_fix(tmp_path: Path, kwargs: dict, says: str) -> None:
    args = {"user": "alice", **kwargs}
    with pytest.raises(ConfigError, match=says):
        MarkStore(tmp_path).set("deal-x", DOC, "Term", **args)
    assert not (tmp_path / "matters" / "deal-x" / "marks").exists() or MarkStore(tmp_path).marks("deal-x") == {}


@pytest.mark.parametrize("doc_id", ["../../etc", DOC.upper(), DOC[:-1], DOC + "0", "", "../" + DOC[3:]])
def test_a_document_id_must_be_a_sha256(tmp_path: Path, doc_id: str) -> None:
    marks = MarkStore(tmp_path)
    with pytest.raises(ConfigError, match="is not a document id"):
        marks.set("deal-x", doc_id, "Term", status="flagged", user="alice")
    with pytest.raises(ConfigError, match="is not a document id"):
        marks.clear("deal-x", doc_id, "Term")
    assert marks.marks("deal-x", [doc_id]) == {}
    assert not (tmp_path / "matters").exists()


@pytest.mark.parametrize("matter", ["../x", "Deal", "", "a/b", ".hidden"])
def test_a_matter_must_be_a_matter_name(tmp_path: Path, matter: str) -> None:
    with pytest.raises(ConfigError, match="is not a matter name"):
        MarkStore(tmp_path).set(matter, DOC, "Term", status="flagged", user="alice")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("column", ["", "   ", "x" * 2001, "a\x00b"])
def test_a_column_key_is_bounded(tmp_path: Path, column: str) -> None:
    with pytest.raises(ConfigError):
        MarkStore(tmp_path).set("deal-x", DOC, column, status="flagged", user="alice")


def test_a_comment_from_a_browser_keeps_its_lines(tmp_path: Path) -> None:
    mark = MarkStore(tmp_path).set("deal-x", DOC, "Term", status="flagged", comment="one\r\ntwo\rthree", user="a")
    assert mark.comment == "one\ntwo\nthree"


def test_a_damaged_mark_is_left_out_not_fatal(tmp_path: Path) -> None:
    marks = MarkStore(tmp_path)
    marks.set("deal-x", DOC, "Term", status="flagged", user="a")
    marks.set("deal-x", DOC, "Law", status="accepted", user="a")
    victim = next((tmp_path / "matters" / "deal-x" / "marks" / DOC).glob("*.json"))
    victim.write_bytes(b"{not json")
    assert len(marks.marks("deal-x")) == 1
