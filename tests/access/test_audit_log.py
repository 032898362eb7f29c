"""The access log holds against someone who can write its folder but not read the audit key (issue 23, items 4
and 5): lines removed from the end, a line edited and every later hash recomputed, a checkpoint rewritten or
deleted, lines stripped of their MAC are all reported by the real ``docpipe audit --verify`` with a non-zero
exit; several processes appending at once keep a log that verifies; lines from before the log was signed are
reported as legacy without failing it; questions are keyed hashes that ``docpipe audit --question`` finds and
plain SHA-256 does not; the key is a private file (a readable one is refused) and can live outside the store,
also for ``docpipe serve``."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.server import server_env, serving, upload

from docpipe.access.log import AccessLog
from docpipe.errors import ConfigError

QUESTION = "What is the governing law?"


def audit(home: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Any:
    """Returns the finished ``docpipe --home HOME audit ARGS`` (no DOCPIPE_* variables but those in `env`)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    return subprocess.run(
        [sys.executable, "-m", "docpipe", "--home", str(home), "audit", *args],
        env={**environment, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def filled(home: Path, lines: int = 10, **options: Any) -> AccessLog:
    log = AccessLog(home, **options)
    for n in range(lines):
        log.record(
            user=f"user{n % 3}", key_id="k1", matter="deal-x", action="ask", document="ab" * 32, question=f"Q{n}?"
        )
    return log


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entries(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (home / "audit" / "access.log").read_bytes().splitlines()]


def rewrite(home: Path, edited: list[dict[str, Any]]) -> None:
    """Writes `edited` as the log with every `prev` recomputed: all one can do without the key."""
    prev, out = "0" * 64, b""
    for entry in edited:
        raw = json.dumps({**entry, "prev": prev}, ensure_ascii=False, sort_keys=True).encode()
        out += raw + b"\n"
        prev = _sha256(raw)
    (home / "audit" / "access.log").write_bytes(out)


def cut(home: Path, keep: int) -> None:
    path = home / "audit" / "access.log"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:keep]))


# -- truncation and forgery --------------------------------------------------------------------------------------
def test_an_intact_log_verifies(tmp_path: Path) -> None:
    filled(tmp_path)
    done = audit(tmp_path, "--verify")
    assert done.returncode == 0, done.stderr
    assert "access log intact: 10 lines" in done.stdout and "checkpoint" in done.stdout


@pytest.mark.parametrize("removed", [1, 5])
def test_lines_removed_from_the_end_are_reported(tmp_path: Path, removed: int) -> None:
    filled(tmp_path)
    cut(tmp_path, 10 - removed)
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "intact" not in done.stdout
    assert f"{removed} line{'s' if removed > 1 else ''} removed from the end" in done.stderr, done.stderr
    assert "the checkpoint counts 10" in done.stderr


def test_the_next_append_after_a_truncation_keeps_it_reported(tmp_path: Path) -> None:
    log = filled(tmp_path)
    cut(tmp_path, 7)
    log.record(user="user0", key_id="k1", matter="deal-x", action="ask")  # the server writes on, the key unknown
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0, done.stdout
    assert "line 8 was written after tampering: the log was 3 lines short" in done.stderr, done.stderr


def test_an_edited_line_with_every_later_hash_recomputed_is_forgery(tmp_path: Path) -> None:
    filled(tmp_path)
    edited = entries(tmp_path)
    edited[3]["user"] = "mallory"  # blame someone else for line 4
    rewrite(tmp_path, edited)
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "intact" not in done.stdout
    assert "line 4 is forged: its MAC does not match" in done.stderr, done.stderr


def test_a_line_stripped_of_its_mac_is_reported(tmp_path: Path) -> None:
    filled(tmp_path)
    edited = entries(tmp_path)
    for field in ("mac", "mac_key_id", "seq"):  # dressed as a legacy line, then edited
        edited[5].pop(field)
    edited[5]["outcome"] = "denied"
    rewrite(tmp_path, edited[:6])
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0
    assert "line 6 has no MAC after signed lines" in done.stderr, done.stderr
    # The same at the very start: the key was made over an empty log, so no line may lack a MAC.
    rewrite(tmp_path, [{k: v for k, v in edited[0].items() if k not in ("mac", "mac_key_id", "seq")}, *edited[1:3]])
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "line 1 has no MAC, but the log was signed from line 1 on" in done.stderr


def test_a_signed_log_rewritten_as_legacy_lines_is_reported(tmp_path: Path) -> None:
    """Every MAC stripped, one line edited, the chain recomputed, the checkpoint deleted: dressed as a log from
    before the key. The key was made over an empty log, so no unsigned line is legacy (found by the security
    probes: this verified with rc 0, and the next append signed over it)."""
    filled(tmp_path, 8)
    stripped = [{k: v for k, v in e.items() if k not in ("mac", "mac_key_id", "seq")} for e in entries(tmp_path)]
    stripped[3]["user"] = "mallory"
    rewrite(tmp_path, stripped)
    (tmp_path / "audit" / "checkpoint.json").unlink()
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "checkpoint.json is missing" in done.stderr, done.stderr
    filled(tmp_path, 1)  # the server's next request: it notices, and the log keeps failing
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0, done.stdout
    assert "line 1 has no MAC, but the log was signed from line 1 on" in done.stderr, done.stderr
    assert "the checkpoint was missing" in entries(tmp_path)[-1]["resumed"]


def test_a_rewritten_or_deleted_checkpoint_is_reported(tmp_path: Path) -> None:
    filled(tmp_path)
    checkpoint = tmp_path / "audit" / "checkpoint.json"
    recorded = json.loads(checkpoint.read_bytes())
    assert recorded["lines"] == 10 and recorded["head"] == _sha256(
        (tmp_path / "audit" / "access.log").read_bytes()[:-1].rsplit(b"\n", 1)[-1]
    )
    cut(tmp_path, 7)
    heads = [_sha256(line) for line in (tmp_path / "audit" / "access.log").read_bytes().splitlines()]
    checkpoint.write_text(json.dumps({**recorded, "lines": 7, "head": heads[-1]}))  # matched to the cut log
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "checkpoint.json is forged: its MAC does not match" in done.stderr, done.stderr
    checkpoint.unlink()
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "checkpoint.json is missing" in done.stderr, done.stderr


def test_an_old_checkpoint_put_back_is_reported_but_a_crash_between_line_and_checkpoint_is_not(tmp_path: Path) -> None:
    log = filled(tmp_path, 4)
    checkpoint = tmp_path / "audit" / "checkpoint.json"
    four = checkpoint.read_bytes()
    filled(tmp_path, 1)
    checkpoint.write_bytes(four)  # as if the process died after writing line 5 and before its checkpoint
    verdict = log.verify()
    assert verdict.intact and verdict.lines == 5 and "crash" in str(verdict.note), verdict
    filled(tmp_path, 1)
    assert log.verify().intact  # the next append moved the checkpoint on, without a "resumed" mark
    checkpoint.write_bytes(four)  # two lines behind: no crash does that
    verdict = log.verify()
    assert not verdict.intact and "an old checkpoint was put back" in str(verdict.problem), verdict


def test_head_and_expect_head_catch_a_rewind_of_log_and_checkpoint_together(tmp_path: Path) -> None:
    filled(tmp_path, 3)
    folder = tmp_path / "audit"
    saved = {name: (folder / name).read_bytes() for name in ("access.log", "checkpoint.json")}
    filled(tmp_path, 3)
    head = audit(tmp_path, "--head")
    assert head.returncode == 0 and head.stdout.strip().startswith("6:"), head.stderr
    for name, data in saved.items():  # back to the consistent pair of three lines ago
        (folder / name).write_bytes(data)
    assert audit(tmp_path, "--verify").returncode == 0  # undetectable from inside the store (docs/access-log.md)
    done = audit(tmp_path, "--verify", "--expect-head", head.stdout.strip())
    assert done.returncode != 0 and "fewer than the 6 recorded" in done.stderr, done.stderr
    done = audit(tmp_path, "--verify", "--expect-head", head.stdout.strip().replace("6:", "2:"))
    assert done.returncode != 0 and "line 2 is not the line recorded for it" in done.stderr, done.stderr


# -- several writers -----------------------------------------------------------------------------------------------
def _append_many(home: str, user: str, count: int, start: Any) -> None:
    start.wait()
    log = AccessLog(Path(home))
    for n in range(count):
        log.record(user=user, key_id="k1", matter="deal-x", action="ask", question=f"{user} {n}")


def test_concurrent_appends_from_several_processes_keep_a_verifiable_log(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [context.Process(target=_append_many, args=(str(tmp_path), f"user{n}", 25, start)) for n in range(4)]
    for worker in workers:
        worker.start()
    start.set()  # all four race to make the key and to append
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    verdict = AccessLog(tmp_path).verify()
    assert verdict.intact and verdict.lines == 100 and verdict.note is None, verdict
    assert [e["seq"] for e in entries(tmp_path)] == list(range(1, 101))
    assert len({e["mac_key_id"] for e in entries(tmp_path)}) == 1
    assert audit(tmp_path, "--verify").returncode == 0


# -- legacy lines --------------------------------------------------------------------------------------------------
def legacy_log(home: Path, count: int) -> list[dict[str, Any]]:
    """Writes `count` lines as docpipe wrote them before the log was signed; returns them."""
    old = [
        {
            "time": f"2026-11-0{n + 1}T10:00:00.000+00:00",
            "user": "alice",
            "key_id": "k1",
            "matter": "deal-x",
            "action": "ask",
            "document": "ab" * 32,
            "questions_sha256": [_sha256(f"Old {n}?".encode())],
            "outcome": "ok",
        }
        for n in range(count)
    ]
    (home / "audit").mkdir(parents=True)
    rewrite(home, old)
    return entries(home)


def test_legacy_lines_are_reported_and_covered_by_the_first_signed_line(tmp_path: Path) -> None:
    legacy_log(tmp_path, 3)
    done = audit(tmp_path, "--verify")
    assert done.returncode == 0 and "unkeyed legacy lines 1..3" in done.stderr, done.stderr
    assert "no checkpoint anchors the log's end" in done.stderr
    filled(tmp_path, 2)
    done = audit(tmp_path, "--verify")
    assert done.returncode == 0 and "access log intact: 5 lines" in done.stdout, done.stderr
    assert "unkeyed legacy lines 1..3" in done.stderr and "no checkpoint" not in done.stderr
    assert [e["seq"] for e in entries(tmp_path)[3:]] == [4, 5]
    # Old questions are found by their SHA-256, new ones by their keyed hash.
    found = audit(tmp_path, "--question", "Old 1?", "--question", "Q1?", "--json")
    assert [json.loads(line)["time"][:10] for line in found.stdout.splitlines()][0] == "2026-11-02"
    assert len(found.stdout.splitlines()) == 2, found.stdout
    # A legacy line edited and the chain recomputed: the first signed line's MAC names it.
    edited = entries(tmp_path)
    edited[1]["user"] = "mallory"
    rewrite(tmp_path, edited)
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and "line 4 is forged" in done.stderr, done.stderr


# -- question hashes -----------------------------------------------------------------------------------------------
def test_questions_are_keyed_hashes_that_the_key_holder_can_find(tmp_path: Path) -> None:
    log = filled(tmp_path, 3)
    log.record(user="bob", key_id="k2", matter="deal-x", action="ask", question=QUESTION)
    log.record(user="carol", key_id="k3", matter="deal-x", action="ask", question=[QUESTION, "Who pays?"])
    text = log.path.read_text()
    assert QUESTION not in text and _sha256(QUESTION.encode()) not in text  # a guess cannot be confirmed
    assert "questions_sha256" not in text and entries(tmp_path)[3]["questions_hmac"] == [log.question_hash(QUESTION)]
    other = filled(tmp_path / "other", 1)
    assert other.question_hash(QUESTION) != log.question_hash(QUESTION)  # a per-store key
    found = audit(tmp_path, "--question", QUESTION)
    assert found.returncode == 0 and [line.split()[1] for line in found.stdout.splitlines()] == ["bob", "carol"]
    piped = audit(tmp_path, "--question", "-", "--user", "carol", "--json", stdin=QUESTION + "\n")
    assert [json.loads(line)["user"] for line in piped.stdout.splitlines()] == ["carol"], piped.stderr
    assert audit(tmp_path, "--question", "What is the notice period?").stdout == ""


# -- the key -------------------------------------------------------------------------------------------------------
def test_the_key_is_a_private_file_and_a_readable_one_is_refused(tmp_path: Path) -> None:
    log = filled(tmp_path, 2)
    key = tmp_path / "access" / "audit.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert key.parent != log.path.parent and len(key.read_text().strip()) == 64
    key.chmod(0o644)
    done = audit(tmp_path, "--verify")
    assert done.returncode != 0 and f"chmod 600 {key}" in done.stderr, done.stderr
    with pytest.raises(ConfigError, match="can be read by other users"):
        AccessLog(tmp_path).record(user="u", key_id="k", matter="deal-x", action="ask")


def test_a_missing_or_other_key_is_named_not_replaced(tmp_path: Path) -> None:
    filled(tmp_path, 2)
    key = tmp_path / "access" / "audit.key"
    other = filled(tmp_path / "other", 1).key_path
    done = audit(tmp_path, "--verify", env={"DOCPIPE_AUDIT_KEY_FILE": str(other)})
    assert done.returncode != 0 and "line 1 was signed with the audit key" in done.stderr, done.stderr
    with pytest.raises(ConfigError, match="was signed with the audit key"):
        AccessLog(tmp_path, key_file=other).prepare()
    key.rename(tmp_path / "lost.key")
    with pytest.raises(ConfigError, match="is missing, but the access log was signed"):
        AccessLog(tmp_path).record(user="u", key_id="k", matter="deal-x", action="ask")
    assert not key.exists()  # no new key made over the lost one


def test_a_key_kept_outside_the_store_signs_the_servers_log(tmp_path: Path, sample_pdf: Path) -> None:
    home, secrets = tmp_path / "home", tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    outside = {"DOCPIPE_AUDIT_KEY_FILE": str(secrets / "audit.key")}
    with serving(home, "--engine", "echo", "--no-ui", env=outside) as served:
        assert upload(served, sample_pdf.read_bytes()).status_code == 200
        assert httpx.get(f"{served.url}/v1/documents", headers=served.headers, timeout=30).status_code == 200
    assert (secrets / "audit.key").is_file() and not (home / "access" / "audit.key").exists()
    signed = audit(home, "--verify", env=outside)
    assert signed.returncode == 0 and "intact" in signed.stdout, signed.stderr
    assert len(entries(home)) >= 2
    without = audit(home, "--verify")  # the default place has no key: nothing is taken as verified
    assert without.returncode != 0 and "no audit key" in without.stderr, without.stderr
    unfound = audit(home, "--question", "Who pays?")  # nor is "never asked" said without the key
    assert unfound.returncode != 0 and "no audit key" in unfound.stderr, unfound.stderr
    # A server given another key stops at its start, before writing a line the log's key did not sign.
    (tmp_path / "wrong.key").write_text(os.urandom(32).hex() + "\n")
    (tmp_path / "wrong.key").chmod(0o600)
    refused = subprocess.run(
        [sys.executable, "-m", "docpipe", "serve", "--preset", "test", "--home", str(home), "--engine", "echo",
         "--no-ui", "--port", "0"],
        env=server_env({"DOCPIPE_AUDIT_KEY_FILE": str(tmp_path / "wrong.key")}),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "was signed with the audit key" in refused.stderr, refused.stderr[-2000:]
