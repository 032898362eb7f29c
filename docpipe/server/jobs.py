"""Review jobs: a review grid over a collection, run in the background by `docpipe serve`, one at a time.

A job is a JSON record under ``<home>/jobs/<job id>/job.json`` (folders 0700, files 0600, written atomically),
with its result beside it once done: ``grid.json``, or ``report.json`` for a playbook check. The record holds the
request (collection, matter, its type: ``review``, ``terms`` (the key-terms table) or ``check`` (a playbook held
against the collection, its TOML text kept to run again); questions, checklist categories, typed columns, key
terms, mode, layout: `docpipe.server.job_requests`), who started it (user and key id, never a secret), its state
(``queued`` -> ``running`` -> ``done`` / ``failed`` / ``cancelled``), its progress (cells done, total, from
the cell cache, failed; written at most every second while it runs), its times, and what went wrong.

One runner thread fills one grid at a time (one engine serves them all; a grid already keeps it busy) and
the others wait their turn. A job left queued or running by a server that stopped is run again when the next
one starts: every finished cell is in the answer cache, so it continues where it stopped.

The password of an encrypted PDF is held in memory for the run only and never written down: a job resumed
after a restart runs without it, its record says so, and the rows that need it fail saying how to fill them
(post the review again with the password: every other cell comes from the cache).

The records and results are kept by `docpipe.server.job_store.JobStore`; this module runs them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from docpipe.errors import DocpipeError
from docpipe.playbook import PlaybookReport, parse_playbook
from docpipe.review import ReviewCancelled, ReviewGrid, ReviewProgress
from docpipe.server.job_requests import job_columns
from docpipe.server.job_store import JOB_ID, JOB_STATES, UNFINISHED, Job, JobStore
from docpipe.storage.store import make_private_dir

if TYPE_CHECKING:
    from docpipe.collection.handle import Collection
    from docpipe.pipeline import DocPipe

# Job, JobStore and the id's form are `docpipe.server.job_store`'s, named here too: the runner's callers use them.
__all__ = ["JOB_ID", "JOB_STATES", "MAX_UNFINISHED_PER_USER", "Job", "JobRunner", "JobStore", "TooManyJobs"]

logger = logging.getLogger(__name__)

MAX_UNFINISHED_PER_USER = 4  # a user's jobs queued or running at once; more are refused (429)
_MAX_FAILURES = 200  # failure lines kept in the record (the grid has every failed cell)
# The library's fix for a missing password names the CLI and Python; over HTTP it is the review's body.
_CLI_PASSWORD_FIX = "pass the password (--password on the command line, password= in Python)"
_HTTP_PASSWORD_FIX = 'send its password ("password" in the JSON body of POST /v1/collections/{name}/{route})'


class TooManyJobs(Exception):
    """The user has as many unfinished jobs as the server allows (answered 429)."""


class JobRunner:
    """Runs review jobs one at a time in a thread of its own; queued jobs wait their turn (see the module
    docstring). `start` takes up the jobs a stopped server left; `stop` leaves the running one to be resumed.

    >>> runner = JobRunner(dp, JobStore(dp.store.root / "jobs"))       # doctest: +SKIP
    >>> runner.start(); job = runner.submit(job, password=None)         # doctest: +SKIP
    """

    def __init__(
        self,
        dp: DocPipe,
        store: JobStore,
        *,
        max_unfinished_per_user: int = MAX_UNFINISHED_PER_USER,
        progress_every_s: float = 1.0,
    ) -> None:
        self.dp = dp
        self.store = store
        self.max_unfinished_per_user = max_unfinished_per_user
        self.progress_every_s = progress_every_s
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._live: dict[str, Job] = {}  # queued and running jobs: the records GET reads
        self._cancel: dict[str, threading.Event] = {}
        self._passwords: dict[str, str] = {}  # memory only
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, *, retention_s: float | None = None) -> None:
        """Queues the jobs a stopped server left queued or running (oldest first), drops finished jobs older
        than `retention_s`, and starts the runner thread."""
        make_private_dir(self.store.root)
        resumed = 0
        cutoff = time.time() - retention_s if retention_s else None
        for job in self.store.jobs():
            if job.state in UNFINISHED:
                job.state, job.resumed = "queued", job.resumed + 1
                job.progress = {**job.progress, "done": 0, "cached": 0, "failed": 0}
                if job.request.get("password_given"):
                    job.notice = (
                        "resumed after a server restart without the documents' password, which is never stored: "
                        'rows of encrypted documents fail; post the review again with "password" to fill them '
                        "(every other cell comes from the cache)"
                    )
                self.store.save(job)
                with self._cond:
                    self._live[job.id] = job
                    self._cancel[job.id] = threading.Event()
                    self._queue.append(job.id)
                resumed += 1
            elif cutoff is not None and (job.finished or job.created) < cutoff:
                self.store.delete(job.id)
        if resumed:
            logger.info("resuming %d review job(s) left by the last run", resumed)
        self._thread = threading.Thread(target=self._work, name="docpipe-review-jobs", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stops the runner: the running grid stops after its engine batch and stays queued for the next start."""
        with self._cond:
            self._stopping = True
            for event in self._cancel.values():
                event.set()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- requests ----------------------------------------------------------------------------
    def submit(self, job: Job, *, password: str | None = None) -> Job:
        """Returns the queued job (saved); `TooManyJobs` when its user has the most unfinished jobs allowed."""
        with self._cond:
            mine = sum(1 for j in self._live.values() if j.user == job.user)
            if mine >= self.max_unfinished_per_user:
                raise TooManyJobs(
                    f"you have {mine} review jobs queued or running; this server takes at most "
                    f"{self.max_unfinished_per_user} per user: wait for one to finish (GET /v1/jobs) or cancel one "
                    "(DELETE /v1/jobs/{id})"
                )
            job.request = {**job.request, "password_given": bool(password)}
            self.store.save(job)
            self._live[job.id] = job
            self._cancel[job.id] = threading.Event()
            if password:
                self._passwords[job.id] = password
            self._queue.append(job.id)
            self._cond.notify_all()
            return self.snapshot(job)

    def get(self, job_id: str) -> Job | None:
        """Returns the job as it stands now (a running job's progress as of its last cell)."""
        with self._cond:
            live = self._live.get(job_id)
            if live is not None:
                return self.snapshot(live)
        return self.store.load(job_id)

    def jobs(self, matter: str) -> list[Job]:
        """Returns the jobs of `matter`, newest first."""
        found = [self.get(j.id) for j in self.store.jobs() if j.matter == matter]
        return sorted((j for j in found if j is not None), key=lambda j: j.created, reverse=True)

    def position(self, job_id: str) -> int | None:
        """Returns how many jobs wait ahead of a queued job (0: next), None when it is not queued."""
        with self._cond:
            try:
                return list(self._queue).index(job_id)
            except ValueError:
                return None

    def cancel(self, job_id: str, *, wait_s: float = 5.0) -> Job | None:
        """Returns the job after cancelling it: a queued one at once; a running one stops after the engine
        batch in progress (waited for up to `wait_s`; `cancel_requested` says it is on its way). None when
        the job is not queued or running."""
        with self._cond:
            job = self._live.get(job_id)
            if job is None:
                return None
            job.cancel_requested = True
            if job.state == "queued":
                self._queue.remove(job_id)
                self._finish(job, "cancelled")
                return self.snapshot(job)
            self._cancel[job_id].set()
            self.store.save(job)
            self._cond.wait_for(lambda: job_id not in self._live, timeout=wait_s)
            return self.snapshot(job)

    def forget(
        self, *, matter: str | None = None, document: str | None = None, finished_before: float | None = None
    ) -> int:
        """Cancels the unfinished jobs that match (see `JobStore.forget`: of `matter`, or reviewing a collection
        that holds `document`), then deletes every matching job with its grid; returns how many went."""

        def holds(job: Job) -> bool:
            coll = self.dp.collection(job.collection, matter=job.matter)
            return coll.exists and document in coll

        if finished_before is None:  # only finished jobs age out
            for job in [j for j in self.store.jobs() if not j.finished_state]:
                if (matter is None or job.matter == matter) and (document is None or holds(job)):
                    self.cancel(job.id)
        return self.store.forget(
            matter=matter, document=document, finished_before=finished_before, collection_holds=holds
        )

    @staticmethod
    def snapshot(job: Job) -> Job:
        return Job.from_dict(json.loads(json.dumps(job.to_dict())))

    # -- the runner --------------------------------------------------------------------------
    def _finish(self, job: Job, state: str) -> None:
        """Under the lock: the job's last state, written down; it leaves the live jobs."""
        job.state, job.finished = state, time.time()
        self.store.save(job)
        self._live.pop(job.id, None)
        self._cancel.pop(job.id, None)
        self._passwords.pop(job.id, None)
        self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or bool(self._queue))
                if self._stopping:
                    return
                job = self._live[self._queue.popleft()]
                job.state, job.started, job.finished = "running", time.time(), None
                cancel = self._cancel[job.id]
                password = self._passwords.pop(job.id, None)
                self.store.save(job)
            try:
                self._run(job, cancel, password)
            except Exception:  # noqa: BLE001 - a job's failure must not stop the runner
                logger.exception("review job %s: unexpected failure", job.id)

    def _run(self, job: Job, cancel: threading.Event, password: str | None) -> None:
        last_save = time.monotonic()

        def progress(step: ReviewProgress) -> None:
            nonlocal last_save
            with self._cond:
                job.progress = {"done": step.done, "total": step.total, "cached": step.cached, "failed": step.failed}
                if time.monotonic() - last_save >= self.progress_every_s:
                    self.store.save(job)
                    last_save = time.monotonic()

        logger.info("review job %s: started", job.id)
        try:
            coll = self.dp.collection(job.collection, matter=job.matter)
            if not coll.exists or not len(coll):
                raise _JobError(
                    f"collection {job.collection!r} is gone or empty: add documents to it and post the review again"
                )
            result = self._compute(job, coll, password, progress, cancel)
        except ReviewCancelled:
            with self._cond:
                if self._stopping and not job.cancel_requested:
                    # The server is stopping: the job stays to be resumed at the next start.
                    job.state = "queued"
                    self.store.save(job)
                    self._live.pop(job.id, None)
                    self._cond.notify_all()
                    logger.info("review job %s: interrupted by shutdown; resumes at the next start", job.id)
                    return
                self._finish(job, "cancelled")
            logger.info("review job %s: cancelled", job.id)
            return
        except (DocpipeError, _JobError) as exc:
            message = self._client_text(str(exc), job)
            with self._cond:
                job.error = message
                self._finish(job, "failed")
            logger.info("review job %s: failed (%s)", job.id, type(exc).__name__)
            return
        except Exception as exc:
            reference = uuid.uuid4().hex[:12]
            logger.error("review job %s: unexpected error %s", job.id, reference, exc_info=exc)
            with self._cond:
                job.error = f"unexpected server error (reference {reference}): see the server log"
                self._finish(job, "failed")
            return
        if isinstance(result, PlaybookReport):
            self._done_check(job, result)
            return
        grid = result
        self._clean(grid, job)
        self.store.save_grid(job.id, grid.to_dict())
        summary = grid.summary()
        with self._cond:
            job.progress = {
                "done": summary["cells"],
                "total": summary["cells"],
                "cached": summary["from_cache"],
                "failed": summary["failed"],
            }
            job.failures = summary["failures"][:_MAX_FAILURES]
            job.summary = {k: v for k, v in summary.items() if k != "failures"}
            self._finish(job, "done")
        logger.info("review job %s: done (%d cells, %d failed)", job.id, summary["cells"], summary["failed"])

    def _compute(
        self,
        job: Job,
        coll: Collection,
        password: str | None,
        progress: Callable[[ReviewProgress], None],
        cancel: threading.Event,
    ) -> ReviewGrid | PlaybookReport:
        """Returns the job's grid, or its report for a playbook check (the playbook read again from its text)."""
        request = job.request
        mode = request.get("mode") or "think"
        if request.get("type") == "check":
            playbook = parse_playbook(request["playbook"], source="playbook")
            return self.dp.check(playbook, coll, mode=mode, password=password, progress=progress, cancel=cancel)
        key_terms = request.get("key_terms") or False
        return self.dp.review(
            coll,
            questions=request.get("questions") or None,
            checklist=bool(request.get("checklist")),
            categories=request.get("categories") or None,
            columns=job_columns(request) or None,
            key_terms=key_terms if isinstance(key_terms, bool) else list(key_terms),
            mode=mode,
            layout=request.get("layout"),
            password=password,
            progress=progress,
            cancel=cancel,
        )

    def _done_check(self, job: Job, report: PlaybookReport) -> None:
        """Keeps a check job's report (failure reasons as a client reads them) and ends the job: its progress
        is its grid's (every cell reported, so the last step is the whole grid)."""
        from dataclasses import replace

        report.rows = [replace(r, error=self._client_text(r.error, job)) if r.error else r for r in report.rows]
        report.verdicts = [
            [replace(v, reason=self._client_text(v.reason, job)) for v in row] for row in report.verdicts
        ]
        self.store.save_report(job.id, report.to_dict())
        with self._cond:
            total = report.manifest.cells or job.progress["total"]
            cached = len(report.manifest.cached_cells)
            job.progress = {"done": total, "total": total, "cached": cached, "failed": job.progress["failed"]}
            job.failures = [f"{row.name}: {row.error}" for row in report.rows if row.error][:_MAX_FAILURES]
            job.summary = {
                "contracts": len(report.rows),
                "rules": len(report.playbook.rules),
                "verdicts": report.counts(),
                "text": report.summary_text(),
            }
            self._finish(job, "done")
        logger.info("review job %s: playbook check done (%d contracts)", job.id, len(report.rows))

    def _client_text(self, text: str, job: Job) -> str:
        """Returns a failure reason as a client may read it: no server folder in it, the password's fix in
        HTTP terms."""
        text = text.replace(str(self.dp.store.root), "the server's store")
        route = {"terms": "terms", "check": "check"}.get(job.request.get("type", ""), "review")
        fix = _HTTP_PASSWORD_FIX.replace("{name}", job.collection).replace("{route}", route)
        return text.replace(_CLI_PASSWORD_FIX, fix)

    def _clean(self, grid: ReviewGrid, job: Job) -> None:
        """Rewrites the grid's failure reasons for a client (`_client_text`)."""
        from dataclasses import replace

        grid.rows = [replace(r, error=self._client_text(r.error, job)) if r.error else r for r in grid.rows]
        for row in grid.cells:
            for cell in row:
                if cell.status == "failed" and cell.note:
                    cell.note = self._client_text(cell.note, job)


class _JobError(Exception):
    """A job that cannot run, with the reason for its record."""
