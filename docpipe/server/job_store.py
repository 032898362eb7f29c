"""Review jobs' records: a job's JSON record and its result (a grid, or a playbook check's report), kept under
``<home>/jobs/<job id>/`` by `JobStore` (folders 0700, files 0600, written atomically, sealed with the store key
when there is one). What a record holds, and how `docpipe.server.jobs.JobRunner` runs it, is said there.

>>> import tempfile; store = JobStore(Path(tempfile.mkdtemp()))
>>> job = Job.new(matter="deal-x", collection="room", user="alice", key_id="k1", request={"questions": ["Law?"]})
>>> store.save(job); store.load(job.id).state, store.load("../../etc/passwd")
('queued', None)
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import StoreError
from docpipe.playbook import PlaybookReport
from docpipe.review import ReviewGrid
from docpipe.storage.sealing import Sealer, open_blob, seal_blob
from docpipe.storage.store import atomic_write

if TYPE_CHECKING:
    from docpipe.cells import Row

__all__ = ["JOB_ID", "JOB_STATES", "UNFINISHED", "Job", "JobStore"]

logger = logging.getLogger(__name__)

#: A job id: 32 lowercase hex digits (128 random bits). Anything else names no job and touches no file.
JOB_ID = re.compile(r"[0-9a-f]{32}")
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
UNFINISHED = ("queued", "running")
_RECORD_FORMAT = 1


@dataclass(slots=True)
class Job:
    """One review job's record (see the module docstring); `to_dict` is what ``job.json`` holds."""

    id: str
    matter: str
    collection: str
    user: str
    key_id: str
    request: dict[str, Any]
    state: str = "queued"
    progress: dict[str, int] = field(default_factory=lambda: {"done": 0, "total": 0, "cached": 0, "failed": 0})
    created: float = 0.0
    started: float | None = None
    finished: float | None = None
    error: str | None = None
    notice: str | None = None
    failures: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    cancel_requested: bool = False
    resumed: int = 0  # how many times a server start took it up again

    @classmethod
    def new(cls, *, matter: str, collection: str, user: str, key_id: str, request: dict[str, Any]) -> Job:
        """Returns a queued job with a fresh random id."""
        return cls(secrets.token_hex(16), matter, collection, user, key_id, dict(request), created=time.time())

    @property
    def finished_state(self) -> bool:
        return self.state not in UNFINISHED

    def to_dict(self) -> dict[str, Any]:
        return {"record_format": _RECORD_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class JobStore:
    """Returns and keeps job records and their results (grids, a check's report) under `root` (``<home>/jobs``),
    sealed with the store key when there is one (a grid or report quotes the contracts; a record holds the
    questions, or a playbook)."""

    def __init__(self, root: Path, *, sealer: Sealer | None = None) -> None:
        self.root = Path(root)
        self.sealer = sealer
        # Jobs deleted while their runner still held them: never written again (a late save would bring back
        # a grid that quotes a deleted document or matter).
        self._deleted: set[str] = set()

    def _write(self, job_id: str, name: str, data: bytes) -> None:
        atomic_write(self.root / job_id / name, seal_blob(data, f"jobs/{job_id}/{name}", self.sealer))

    def _read(self, job_id: str, name: str) -> bytes:
        return open_blob((self.root / job_id / name).read_bytes(), f"jobs/{job_id}/{name}", self.sealer)

    def _folder(self, job_id: str) -> Path | None:
        if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
            return None
        return self.root / job_id

    def save(self, job: Job) -> None:
        """Writes the job's record (atomically; 0600 in a 0700 folder); nothing for a deleted job."""
        folder = self._folder(job.id)
        if folder is None:
            raise StoreError("a job id is 32 lowercase hex digits")
        if job.id in self._deleted:
            return
        try:
            self._write(job.id, "job.json", json.dumps(job.to_dict(), ensure_ascii=False).encode())
        except OSError as exc:
            raise StoreError(
                f"cannot write the review job's record ({exc.strerror}): free disk space or make the store writable",
                path=str(folder),
            ) from exc

    def load(self, job_id: str) -> Job | None:
        """Returns the job, or None for an id that is malformed or names no job (nothing is read for the first)."""
        folder = self._folder(job_id)
        if folder is None:
            return None
        try:
            data = json.loads(self._read(job_id, "job.json"))
            job = Job.from_dict(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("review job %s: unreadable record (%s)", job_id, exc)
            return None
        return job if job.id == job_id and job.state in JOB_STATES else None

    def save_grid(self, job_id: str, grid: dict[str, Any]) -> None:
        self._save_result(job_id, "grid.json", grid, "review grid")

    def load_grid(self, job_id: str) -> ReviewGrid | None:
        """Returns the finished job's grid, or None."""
        data = self._load_result(job_id, "grid.json")
        try:
            return ReviewGrid.from_dict(data) if data is not None else None
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("review job %s: unreadable grid (%s)", job_id, exc)
            return None

    def save_report(self, job_id: str, report: dict[str, Any]) -> None:
        """Writes a finished check job's report (`PlaybookReport.to_dict`), as `save_grid` writes a grid."""
        self._save_result(job_id, "report.json", report, "playbook report")

    def load_report(self, job_id: str) -> PlaybookReport | None:
        """Returns the finished check job's report, or None."""
        data = self._load_result(job_id, "report.json")
        try:
            return PlaybookReport.from_dict(data) if data is not None else None
        except (ValueError, KeyError, TypeError, StopIteration) as exc:
            logger.warning("review job %s: unreadable report (%s)", job_id, exc)
            return None

    def rows(self, job_id: str) -> list[Row]:
        """Returns the contracts a finished job's grid or report has a row for (the ones it quotes)."""
        result = self.load_grid(job_id) or self.load_report(job_id)
        return list(result.rows) if result is not None else []

    def _save_result(self, job_id: str, name: str, data: dict[str, Any], what: str) -> None:
        folder = self._folder(job_id)
        if folder is None:
            raise StoreError("a job id is 32 lowercase hex digits")
        if job_id in self._deleted:
            return
        try:
            self._write(job_id, name, json.dumps(data, ensure_ascii=False).encode())
        except OSError as exc:
            raise StoreError(
                f"cannot store the {what} ({exc.strerror}): free disk space or make the store writable",
                path=str(folder),
            ) from exc

    def _load_result(self, job_id: str, name: str) -> Any:
        if self._folder(job_id) is None:
            return None
        try:
            return json.loads(self._read(job_id, name))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("review job %s: unreadable %s (%s)", job_id, name, exc)
            return None

    def jobs(self) -> list[Job]:
        """Returns every job, oldest first."""
        try:
            names = [n for n in os.listdir(self.root) if JOB_ID.fullmatch(n)]
        except FileNotFoundError:
            return []
        found = [job for job in (self.load(n) for n in names) if job is not None]
        return sorted(found, key=lambda j: j.created)

    def quotes(self, job_id: str, doc_id: str) -> bool:
        """Returns True when the finished job's grid or report has a row for `doc_id` (so may quote it)."""
        return any(row.document_id == doc_id for row in self.rows(job_id))

    def forget(
        self,
        *,
        matter: str | None = None,
        document: str | None = None,
        finished_before: float | None = None,
        collection_holds: Any = None,
    ) -> int:
        """Deletes the jobs that match and returns how many: every job of `matter`; every job whose grid has a
        row for `document` (an unfinished one: whose collection holds it, by `collection_holds(job)`); every
        finished job that ended before `finished_before`. Their grids and reports quote contracts: they go with
        them. A job with a grid or report is matched to `document` by its rows; one without (queued, running, cancelled, failed)
        by its collection."""
        count = 0
        for job in self.jobs():
            if matter is not None and job.matter != matter:
                continue
            if document is not None:
                has_grid = job.state == "done"
                if has_grid and not self.quotes(job.id, document):
                    continue
                if not has_grid and not (collection_holds is not None and collection_holds(job)):
                    continue
            if finished_before is not None and (not job.finished_state or (job.finished or 0) >= finished_before):
                continue
            self.delete(job.id)
            count += 1
        return count

    def delete(self, job_id: str) -> None:
        folder = self._folder(job_id)
        if folder is None:
            return
        self._deleted.add(job_id)
        if folder.is_dir():
            tomb = self.root / f".deleted-{job_id}-{uuid.uuid4().hex}"
            os.rename(folder, tomb)
            shutil.rmtree(tomb, ignore_errors=True)
