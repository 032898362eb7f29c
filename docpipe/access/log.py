"""The access log: one JSON line per request that touches contract content (who, which matter, which
document, what action, a hash of the question, when, the outcome), appended to ``<home>/audit/access.log``.

Append-only: the file is opened with O_APPEND (0600) and never rewritten by docpipe; each line carries
the SHA-256 of the line before it, so a removed or edited line breaks the chain and `verify` finds where.
Questions are logged as a SHA-256 only: the log proves who asked what (hash the question to check) without
becoming a second copy of privileged content.

>>> import tempfile; log = AccessLog(Path(tempfile.mkdtemp()))
>>> _ = log.record(user="alice", key_id="k1", matter="deal-x", action="ask", document="ab" * 32, question="Who?")
>>> [e["action"] for e in log.read()], log.verify()
(['ask'], (True, 1, None))
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docpipe.errors import StoreError
from docpipe.ingest.store import make_private_dir

__all__ = ["AccessLog", "question_hash"]

_GENESIS = "0" * 64


def question_hash(question: str) -> str:
    """Returns the SHA-256 of the question as asked (UTF-8, surrogates replaced)."""
    return hashlib.sha256(question.encode("utf-8", "replace")).hexdigest()


class AccessLog:
    """Returns and appends the access log's entries (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.folder = Path(root) / "audit"
        self.path = self.folder / "access.log"
        self._lock = threading.Lock()

    def _last_hash(self, handle: Any) -> str:
        """Returns the SHA-256 of the file's last line (the chain's head)."""
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        if size == 0:
            return _GENESIS
        back = min(size, 65536)
        handle.seek(size - back)
        tail = handle.read(back).rstrip(b"\n").rsplit(b"\n", 1)[-1]
        return hashlib.sha256(tail).hexdigest()

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
        """Returns the entry after appending it (durably: fsync) to the log."""
        questions = [question] if isinstance(question, str) else list(question or [])
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "user": user,
            "key_id": key_id,
            "matter": matter,
            "action": action,
            "document": document,
            "questions_sha256": [question_hash(q) for q in questions],
            "outcome": outcome,
        }
        if detail:
            entry["detail"] = detail[:200]
        try:
            make_private_dir(self.folder)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot write the access log: {exc.strerror}", path=str(self.path)) from exc
        with self._lock, os.fdopen(fd, "r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # other server processes append to the same chain
            try:
                entry["prev"] = self._last_hash(handle)
                handle.write(json.dumps(entry, ensure_ascii=False, sort_keys=True).encode() + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return entry

    def _lines(self) -> Iterator[bytes]:
        try:
            with self.path.open("rb") as handle:
                for line in handle:
                    if line.strip():
                        yield line.rstrip(b"\n")
        except FileNotFoundError:
            return

    def read(
        self,
        *,
        matter: str | None = None,
        user: str | None = None,
        document: str | None = None,
        since: str | None = None,
    ) -> list[dict[str, Any]]:
        """Returns the entries that match every filter given (``since`` is an ISO date or time), oldest first."""
        out = []
        for line in self._lines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if matter and entry.get("matter") != matter:
                continue
            if user and entry.get("user") != user:
                continue
            if document and not str(entry.get("document") or "").startswith(document):
                continue
            if since and str(entry.get("time", "")) < since:
                continue
            out.append(entry)
        return out

    def verify(self) -> tuple[bool, int, int | None]:
        """Returns (intact, lines, first broken line number or None): every line must name its predecessor."""
        previous = _GENESIS
        count = 0
        for count, line in enumerate(self._lines(), 1):
            try:
                prev = json.loads(line).get("prev")
            except ValueError:
                return False, count, count
            if prev != previous:
                return False, count, count
            previous = hashlib.sha256(line).hexdigest()
        return True, count, None
