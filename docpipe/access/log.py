"""The access log: one JSON line per request that touches contract content (who, which matter, which
document, what action, a keyed hash of each question, when, the outcome), appended to
``<home>/audit/access.log``. docs/access-log.md says what it proves and what it does not.

Append-only: the file is opened with O_APPEND (0600) and never rewritten by docpipe. Each line carries the
SHA-256 of the line before it (``prev``), its own line number (``seq``) and a MAC (HMAC-SHA256) over all of
that under the store's audit key (`AuditKey`, kept apart from the log), so a line edited and re-hashed, or
added without the key, is found. After each append ``audit/checkpoint.json`` records the line count and the
last line's hash under a MAC of its own, so lines removed from the end are found too, and the next append
after such a removal says so in a signed ``resumed`` field, which cannot be removed without the key either.
Lines written before the log was signed ("legacy") keep their hash chain, which the first signed line's
MAC covers.

Questions are logged as HMACs only (``questions_hmac``): the log proves who asked what to anyone holding the
key (`AccessLog.question_hash`, ``docpipe audit --question``) without becoming a second copy of privileged
content, and a guess cannot be confirmed without the key.

>>> import tempfile; log = AccessLog(Path(tempfile.mkdtemp()))
>>> _ = log.record(user="alice", key_id="k1", matter="deal-x", action="ask", document="ab" * 32, question="Who?")
>>> [e["action"] for e in log.read(question="Who?")], log.verify().intact
(['ask'], True)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from docpipe.access.audit_key import AuditKey
from docpipe.errors import ConfigError, StoreError
from docpipe.storage.store import atomic_write, make_private_dir

__all__ = ["AccessLog", "Verification"]

logger = logging.getLogger(__name__)

_GENESIS = "0" * 64
# 2: the checkpoint also carries how many unsigned lines from before the key the log may start with.
_CHECKPOINT_FORMAT = 2


def _canonical(data: dict[str, Any]) -> bytes:
    """Returns the one serialisation of an entry or checkpoint that is written, hashed and signed."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True).encode()


def _count(n: int, what: str = "line") -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _sha256(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def _legacy_question_hash(question: str) -> str:
    # How questions were hashed before the log was keyed (field questions_sha256): still searchable.
    return hashlib.sha256(question.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True, slots=True)
class Verification:
    """What `AccessLog.verify` found. `intact` holds when every line follows the one before it, every signed
    line's MAC and number are right, and the signed checkpoint (and `expect_head`, when given) agree with the
    log's end; otherwise `problem` says what is wrong in one line and `line` where (None: the end, or the
    checkpoint). `legacy` is the first and last unsigned line from before the log was keyed; `anchored` is
    False when no checkpoint anchors the end (an empty or wholly legacy log); `note` is something to know that
    is not a fault."""

    intact: bool
    lines: int
    head: str
    problem: str | None = None
    line: int | None = None
    legacy: tuple[int, int] | None = None
    anchored: bool = False
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["legacy"] = list(self.legacy) if self.legacy else None
        return data


class AccessLog:
    """Returns and appends the access log's entries (see the module docstring); `key_file` is where the audit
    key is (default ``<root>/access/audit.key``)."""

    def __init__(self, root: Path, *, key_file: Path | None = None) -> None:
        self.folder = Path(root) / "audit"
        self.path = self.folder / "access.log"
        self.checkpoint_path = self.folder / "checkpoint.json"
        self.key_path = Path(key_file).expanduser() if key_file is not None else Path(root) / "access" / "audit.key"
        self._lock = threading.Lock()
        self._key: AuditKey | None = None

    # -- the key ------------------------------------------------------------------------------------------
    def _writing_key(self) -> AuditKey:
        """Returns the audit key, made on first use; ConfigError when the log was signed but its key is gone
        (a new one would leave every signed line unverifiable: restore the key, or rotate).

        Making the key anchors the log at once (`_anchor`): a checkpoint records how many unsigned lines from
        before the key the log holds. Without that record, stripping every MAC and deleting the checkpoint
        would turn a signed log into an unsigned "legacy" one that verifies."""
        if self._key is None:
            new = not self.key_path.exists()
            if new and (self.checkpoint_path.exists() or self._has_signed_lines()):
                raise ConfigError(
                    f"the audit key {self.key_path} is missing, but the access log was signed with one: restore "
                    "it, or point DOCPIPE_AUDIT_KEY_FILE at it (docs/access-log.md says how to rotate a lost key)"
                )
            key = AuditKey.load_or_create(self.key_path)
            if new:
                self._anchor(key)
            self._key = key
        return self._key

    def _anchor(self, key: AuditKey) -> None:
        """Writes the first checkpoint of a log whose key was just made, unless one exists (a process that
        raced to make the same key wrote it): every line the log holds now is legacy, and no later one may be."""
        with self._writing() as handle:
            if self._load_checkpoint() is None:
                last, _ = _last_line(handle)
                lines = _count_lines(handle)
                self._write_checkpoint(lines, _sha256(last) if last is not None else _GENESIS, key, lines)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[BinaryIO]:
        """Yields the log opened for appending (0600, made if missing) under this process's lock and the file
        lock every server process takes to append to the same chain."""
        try:
            make_private_dir(self.folder)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot write the access log: {exc.strerror}", path=str(self.path)) from exc
        with self._lock, os.fdopen(fd, "r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield handle
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _reading_key(self) -> AuditKey | None:
        """Returns the audit key, or None when there is none (reading never makes one)."""
        if self._key is None and self.key_path.exists():
            self._key = AuditKey.load(self.key_path)
        return self._key

    def prepare(self) -> None:
        """Loads (or makes) the audit key and checks that it signed this log, so that a server with the wrong
        key fails at its start rather than at its first request. ConfigError when it is not the log's key."""
        key = self._writing_key()
        checkpoint = self._load_checkpoint()
        if isinstance(checkpoint, dict) and checkpoint.get("mac_key_id") != key.key_id:
            raise ConfigError(self._other_key(str(checkpoint.get("mac_key_id")), key))

    def _other_key(self, found: str, key: AuditKey) -> str:
        return (
            f"the access log {self.path} was signed with the audit key {found[:16]}, not with {key.key_id} in "
            f"{self.key_path}: point DOCPIPE_AUDIT_KEY_FILE at the key that signed it (or rotate: "
            "docs/access-log.md)"
        )

    def question_hash(self, question: str) -> str:
        """Returns the keyed hash the log records for `question` (``questions_hmac``). ConfigError without a key."""
        key = self._reading_key()
        if key is None:
            raise ConfigError(f"no audit key at {self.key_path}: point DOCPIPE_AUDIT_KEY_FILE at the server's key")
        return key.question(question)

    # -- writing ------------------------------------------------------------------------------------------
    def record(
        self,
        *,
        user: str,
        key_id: str,
        matter: str,
        action: str,
        document: str | None = None,
        question: str | list[str] | None = None,
        outcome: str = "ok",
        detail: str = "",
    ) -> dict[str, Any]:
        """Returns the entry after appending it (durably: fsync) to the log and updating the checkpoint."""
        key = self._writing_key()
        questions = [question] if isinstance(question, str) else list(question or [])
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "user": user,
            "key_id": key_id,
            "matter": matter,
            "action": action,
            "document": document,
            "questions_hmac": [key.question(q) for q in questions],
            "outcome": outcome,
        }
        if detail:
            entry["detail"] = detail[:200]
        with self._writing() as handle:
            self._append(handle, entry, key)
        return entry

    def _append(self, handle: BinaryIO, entry: dict[str, Any], key: AuditKey) -> None:
        """Signs `entry` as the log's next line, appends it and writes the checkpoint (under the caller's lock).
        When the log's end and the checkpoint disagree, the line says why in its signed ``resumed`` field."""
        last, ends_cleanly = _last_line(handle)
        checkpoint = self._load_checkpoint()
        reasons: list[str] = []
        if last is None:
            seq, prev = 1, _GENESIS
        else:
            prev = _sha256(last)
            allowed = checkpoint["legacy"] if isinstance(checkpoint, dict) else None
            seq, reasons = self._next_seq(handle, last, key, legacy=allowed)
        reasons += self._disagreement(checkpoint, key, seq - 1, prev)
        # The legacy count travels from checkpoint to checkpoint; from one that cannot be trusted, none.
        legacy = checkpoint["legacy"] if isinstance(checkpoint, dict) and _checkpoint_ok(checkpoint, key) else 0
        entry.update(prev=prev, seq=seq, mac_key_id=key.key_id)
        if reasons:
            entry["resumed"] = "; ".join(reasons)[:300]
            logger.error("the access log %s was tampered with or damaged: %s", self.path, entry["resumed"])
        entry["mac"] = key.line_mac(_canonical(entry))
        line = _canonical(entry)
        # A line cut short by a crash is ended, so that this one is not glued onto it.
        handle.write((b"" if ends_cleanly else b"\n") + line + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
        # After the line: a crash in between leaves the checkpoint one line behind, which verify accepts.
        self._write_checkpoint(seq, _sha256(line), key, legacy)

    def _next_seq(self, handle: BinaryIO, last: bytes, key: AuditKey, *, legacy: int | None) -> tuple[int, list[str]]:
        """Returns the next line's number and, when the last line cannot be trusted, why: a signed last line
        gives its own number; otherwise the lines are counted, and an unsigned last line is trusted only among
        the `legacy` lines the checkpoint allows (None: no checkpoint, which `_disagreement` reports)."""
        try:
            previous = json.loads(last)
        except ValueError:
            previous = None
        if isinstance(previous, dict) and "mac" in previous:
            if previous.get("mac_key_id") != key.key_id:
                raise ConfigError(self._other_key(str(previous.get("mac_key_id")), key))
            if _line_ok(last, previous, key) and isinstance(previous.get("seq"), int):
                return previous["seq"] + 1, []
            return _count_lines(handle) + 1, ["the last line's MAC did not match"]
        count = _count_lines(handle)
        if previous is None:
            return count + 1, ["the last line was not a JSON entry"]
        # An unsigned line: legacy when the log held it before the key was made, else added without the key.
        return count + 1, ["the last line had no MAC"] if legacy is not None and count > legacy else []

    def _disagreement(self, checkpoint: dict[str, Any] | str | None, key: AuditKey, lines: int, head: str) -> list[str]:
        """Returns why the checkpoint and the log's end (`lines`, the last line's hash `head`) disagree: empty
        when they agree, or when there is no checkpoint because nothing was signed yet."""
        if checkpoint is None:
            # Making the key wrote one (`_anchor`), so a keyed log without a checkpoint lost it.
            return ["the checkpoint was missing"] if lines else []
        if isinstance(checkpoint, str):
            return [checkpoint]
        if checkpoint.get("mac_key_id") != key.key_id:
            raise ConfigError(self._other_key(str(checkpoint.get("mac_key_id")), key))
        if not _checkpoint_ok(checkpoint, key):
            return ["the checkpoint's MAC did not match"]
        recorded = checkpoint["lines"]
        if recorded > lines:
            return [f"the log was {_count(recorded - lines)} short at the end (the checkpoint counted {recorded})"]
        if recorded == lines and checkpoint["head"] != head:
            return [f"line {lines} was not the one the checkpoint recorded"]
        if recorded < lines - 1:
            # Appends are serialised, so a crash leaves the checkpoint at most one line behind.
            return [f"the checkpoint was {_count(lines - recorded)} behind the log (an old checkpoint put back?)"]
        return []

    def _has_signed_lines(self) -> bool:
        return any(b'"mac":' in line for line in self._lines())

    def _load_checkpoint(self) -> dict[str, Any] | str | None:
        """Returns the checkpoint, None when there is none, or why it cannot be read (a string)."""
        try:
            data = json.loads(self.checkpoint_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            return f"the checkpoint could not be read ({type(exc).__name__})"
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("lines"), int)
            or not isinstance(data.get("head"), str)
            or not isinstance(data.get("legacy"), int)
        ):
            return "the checkpoint is not a checkpoint"
        return data

    def _write_checkpoint(self, lines: int, head: str, key: AuditKey, legacy: int) -> None:
        """Replaces the checkpoint: `lines` in the log, the last one's hash `head`, and `legacy`, how many
        unsigned lines from before the key the log starts with, all under the checkpoint's MAC."""
        data: dict[str, Any] = {
            "format": _CHECKPOINT_FORMAT,
            "lines": lines,
            "head": head,
            "legacy": legacy,
            "mac_key_id": key.key_id,
        }
        data["mac"] = key.checkpoint_mac(_canonical(data))
        try:
            atomic_write(self.checkpoint_path, _canonical(data) + b"\n")
            # The rename made durable too: a power cut must not bring back a checkpoint several lines old.
            folder = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            raise StoreError(
                f"cannot write the access log's checkpoint: {exc.strerror}", path=str(self.checkpoint_path)
            ) from exc

    # -- reading ------------------------------------------------------------------------------------------
    def _lines(self, limit: int | None = None) -> Iterator[bytes]:
        """Yields the log's non-blank lines (without their newline), from its first `limit` bytes if given."""
        try:
            with self.path.open("rb") as handle:
                yield from _read_lines(handle, limit)
        except FileNotFoundError:
            return

    def read(
        self,
        *,
        matter: str | None = None,
        user: str | None = None,
        document: str | None = None,
        since: str | None = None,
        question: str | list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Returns the entries that match every filter given (``since`` is an ISO date or time; ``question``
        one or more questions, matched by their keyed hash, or by SHA-256 in legacy lines), oldest first."""
        asked = [question] if isinstance(question, str) else list(question or [])
        key = self._reading_key() if asked else None
        if asked and key is None and (self.checkpoint_path.exists() or self._has_signed_lines()):
            # Finding nothing would read as "never asked": without the key, signed lines cannot be searched.
            raise ConfigError(f"no audit key at {self.key_path}: point DOCPIPE_AUDIT_KEY_FILE at the server's key")
        keyed = {key.question(q) for q in asked} if key is not None else set()
        legacy = {_legacy_question_hash(q) for q in asked}
        out = []
        for line in self._lines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if matter and entry.get("matter") != matter:
                continue
            if user and entry.get("user") != user:
                continue
            if document and not str(entry.get("document") or "").startswith(document):
                continue
            if since and str(entry.get("time", "")) < since:
                continue
            if asked and not (
                keyed & set(entry.get("questions_hmac") or []) or legacy & set(entry.get("questions_sha256") or [])
            ):
                continue
            out.append(entry)
        return out

    # -- verifying ----------------------------------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[str, Any] | str | None, int]:
        """Returns the checkpoint and the log's size read together under a shared lock, so that an append
        between the two cannot look like lines removed."""
        try:
            with self.path.open("rb") as handle:
                fcntl.flock(handle, fcntl.LOCK_SH)
                try:
                    return self._load_checkpoint(), os.fstat(handle.fileno()).st_size
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except FileNotFoundError:
            return self._load_checkpoint(), 0

    def verify(self, *, expect_head: tuple[int, str] | None = None) -> Verification:
        """Returns what checking the whole log found (see `Verification`): the hash chain, each signed line's
        MAC and number, the checkpoint, and `expect_head` (a line count and that line's SHA-256 recorded
        elsewhere earlier, e.g. from ``docpipe audit --head``: the log must still hold that line)."""
        checkpoint, size = self._snapshot()
        key = self._reading_key()
        previous, count, signed = _GENESIS, 0, False
        legacy: tuple[int, int] | None = None
        heads: dict[int, str] = {}
        wanted = {n for n in (_recorded(checkpoint), expect_head[0] if expect_head else None) if n}
        # How many unsigned lines the log may start with, as recorded when it was keyed (the checkpoint's MAC is
        # checked at the end: a forged count fails there).
        allowed = checkpoint["legacy"] if isinstance(checkpoint, dict) else None

        def broken(problem: str, line: int | None = None) -> Verification:
            return Verification(False, count, previous, problem, line, legacy, checkpoint is not None)

        for count, line in enumerate(self._lines(size), 1):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict):
                return broken(f"line {count} is not a JSON entry: it was changed", count)
            if entry.get("prev") != previous:
                where = "the log's start" if count == 1 else f"line {count - 1}"
                return broken(f"line {count} does not follow {where}: a line was removed or changed there", count)
            if "mac" in entry:
                signed = True
                if key is None:
                    return broken(
                        f"the log is signed but there is no audit key at {self.key_path}: point "
                        "DOCPIPE_AUDIT_KEY_FILE at the server's key"
                    )
                if entry.get("mac_key_id") != key.key_id:
                    return broken(
                        f"line {count} was signed with the audit key {str(entry.get('mac_key_id'))[:16]}, not with "
                        f"{key.key_id}: point DOCPIPE_AUDIT_KEY_FILE at the key that signed it",
                        count,
                    )
                if not _line_ok(line, entry, key):
                    return broken(
                        f"line {count} is forged: its MAC does not match (changed, or re-hashed without the key)",
                        count,
                    )
                if entry.get("seq") != count:
                    return broken(
                        f"line {count} was written as line {entry.get('seq')}: lines were removed before it (or added)",
                        count,
                    )
                if entry.get("resumed"):
                    return broken(f"line {count} was written after tampering: {entry['resumed']}", count)
            elif signed:
                return broken(
                    f"line {count} has no MAC after signed lines: it was added or changed without the key", count
                )
            elif allowed is not None and count > allowed:
                return broken(
                    f"line {count} has no MAC, but the log was signed from line {allowed + 1} on: it was added, or "
                    "stripped of its MAC, without the key",
                    count,
                )
            else:
                legacy = (legacy[0] if legacy else count, count)
            previous = _sha256(line)
            if count in wanted:
                heads[count] = previous
        return self._check_end(checkpoint, key, count, previous, heads, legacy, signed, expect_head)

    def _check_end(
        self,
        checkpoint: dict[str, Any] | str | None,
        key: AuditKey | None,
        count: int,
        head: str,
        heads: dict[int, str],
        legacy: tuple[int, int] | None,
        signed: bool,
        expect_head: tuple[int, str] | None,
    ) -> Verification:
        """Returns the verdict on the log's end: the checkpoint's count and head, then `expect_head`."""

        def broken(problem: str, line: int | None = None) -> Verification:
            return Verification(False, count, head, problem, line, legacy, checkpoint is not None)

        note = None
        if checkpoint is None:
            # Making the key writes the first checkpoint, so a keyed log without one lost it: perhaps with its
            # lines' MACs, which would otherwise pass for lines from before the key.
            if signed or (key is not None and count):
                return broken(
                    f"the checkpoint {self.checkpoint_path} is missing: lines may have been removed from the end, "
                    "or stripped of their MACs"
                )
        elif isinstance(checkpoint, str):
            return broken(f"{checkpoint} ({self.checkpoint_path}): it was changed")
        elif key is None:
            return broken(
                f"the log has a checkpoint but there is no audit key at {self.key_path}: point "
                "DOCPIPE_AUDIT_KEY_FILE at the server's key"
            )
        elif checkpoint.get("mac_key_id") != key.key_id or not _checkpoint_ok(checkpoint, key):
            return broken(f"the checkpoint {self.checkpoint_path} is forged: its MAC does not match")
        else:
            recorded = checkpoint["lines"]
            if recorded > count:
                return broken(
                    f"{_count(recorded - count)} removed from the end: the checkpoint counts {recorded}, "
                    f"the log has {count}"
                )
            if heads.get(recorded, head if recorded == count else None) != checkpoint["head"]:
                return broken(
                    f"line {recorded} is not the line the checkpoint recorded: the log was rewritten", recorded
                )
            if recorded < count - 1:
                return broken(
                    f"the checkpoint counts {recorded} lines, {count - recorded} fewer than the log: an old "
                    "checkpoint was put back (a crash leaves it one line behind at most)"
                )
            if recorded < count:
                note = "the last line is after the checkpoint (a crash between an append and its checkpoint)"
        if expect_head is not None:
            lines, expected = expect_head
            if lines > count:
                return broken(
                    f"the log has {count} lines, fewer than the {lines} recorded: lines were removed from the end "
                    "(or the log and its checkpoint were rewound)"
                )
            if lines and not hmac.compare_digest(heads.get(lines, ""), expected.lower()):
                return broken(f"line {lines} is not the line recorded for it: the log was rewritten", lines)
        return Verification(True, count, head, None, None, legacy, checkpoint is not None, note)


# -- helpers on the log's bytes --------------------------------------------------------------------------------
def _line_ok(line: bytes, entry: dict[str, Any], key: AuditKey) -> bool:
    """Returns True when `line` is `entry` in canonical form with a right MAC."""
    body = {k: v for k, v in entry.items() if k != "mac"}
    mac = entry.get("mac")
    return (
        isinstance(mac, str)
        and hmac.compare_digest(key.line_mac(_canonical(body)), mac)
        and hmac.compare_digest(_canonical(entry), line)
    )


def _checkpoint_ok(checkpoint: dict[str, Any], key: AuditKey) -> bool:
    body = {k: v for k, v in checkpoint.items() if k != "mac"}
    mac = checkpoint.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(key.checkpoint_mac(_canonical(body)), mac)


def _recorded(checkpoint: dict[str, Any] | str | None) -> int | None:
    return checkpoint["lines"] if isinstance(checkpoint, dict) else None


def _read_lines(handle: BinaryIO, limit: int | None = None) -> Iterator[bytes]:
    read = 0
    for line in handle:
        if limit is not None:
            if read >= limit:
                return
            line = line[: limit - read]  # the snapshot's end: what was appended after it is not read
        read += len(line)
        if line.strip():
            yield line.rstrip(b"\n")


def _count_lines(handle: BinaryIO) -> int:
    handle.seek(0)
    return sum(1 for _ in _read_lines(handle))


def _last_line(handle: BinaryIO) -> tuple[bytes | None, bool]:
    """Returns the file's last non-blank line (None when there is none) and whether the file ends in a newline."""
    handle.seek(0, os.SEEK_END)
    position = handle.tell()
    tail = b""
    # Back a block at a time until a whole non-blank line is in view (entries are small: one block, usually).
    while position > 0:
        step = min(position, 65536)
        position -= step
        handle.seek(position)
        tail = handle.read(step) + tail
        pieces = tail.split(b"\n")
        for line in reversed(pieces if position == 0 else pieces[1:]):
            if line.strip():
                return line, tail.endswith(b"\n")
    return None, not tail or tail.endswith(b"\n")
