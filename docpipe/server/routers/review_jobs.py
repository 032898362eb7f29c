"""The review-job endpoints: a review grid, or the key-terms table, over a collection runs in the background
(`docpipe.server.jobs`); the caller polls it, downloads the grid, or cancels it::

    POST   /v1/collections/{name}/review   {"questions": [...], "checklist", "categories", "columns", "key_terms",
                                            "mode", "layout"} -> 202, the queued job and its URL (write)
    POST   /v1/collections/{name}/terms    {"terms": [...], "mode"}: the key-terms table -> 202, the job (write)
    POST   /v1/collections/{name}/check    {"playbook": "<TOML>", "mode"}: a playbook check -> 202, the job (write)
    GET    /v1/jobs                        the matter's jobs, newest first
    GET    /v1/jobs/{id}                   state, progress, failures; when done, the grid or the report (JSON)
    GET    /v1/jobs/{id}/grid?format=      the grid as xlsx, csv, md or json (a download)
    GET    /v1/jobs/{id}/report?format=    a check's report as xlsx, csv, md or json (a download)
    GET    /v1/jobs/{id}/deadlines.ics     the grid's expirations and notice deadlines as an iCalendar file
    DELETE /v1/jobs/{id}                   cancels a queued or running job (write)

The three kinds of job are one kind of record, run by one runner: a key-terms job is a review whose columns are
the key terms, a check a review of the columns its playbook's rules read, judged rule by rule into a report (its
request's ``type`` says which route made it); each per matter, resumed from the cell cache. A check's playbook is
parsed and checked before the job is queued (a problem is a 422 naming the line, the rule and the fix), and its
body is bounded before it is read (`CHECK_BODY_BYTES`, applied by the body guard on `CHECK_PATH`).

A job belongs to the matter of the collection it reviews: a key without a grant on that matter gets 404 for
it, exactly as for an id no job has; reading needs the read role, starting and cancelling write. A job id is
checked against its strict form before any file is looked at.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response
from starlette.exceptions import HTTPException

from docpipe.errors import InputError, PasswordRequiredError
from docpipe.playbook.schema import MAX_PLAYBOOK_BYTES
from docpipe.review.review import with_marks
from docpipe.server.access import Caller
from docpipe.server.deps import (
    AuditDep,
    DocPipeDep,
    JobsDep,
    MattersDep,
    OptionsDep,
    Reader,
    Writer,
    is_key,
    logged,
    open_collection,
)
from docpipe.server.errors import error_response
from docpipe.server.job_requests import check_request, question_texts, review_request, terms_request
from docpipe.server.jobs import Job, JobRunner, TooManyJobs
from docpipe.server.models import ERROR_RESPONSES
from docpipe.server.review_models import CheckRequest, JobList, JobOut, ReviewRequest, TermsRequest
from docpipe.terms.calendar import DEFAULT_REMIND_DAYS, deadlines_ics

if TYPE_CHECKING:
    from collections.abc import Sequence

    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterStore
    from docpipe.cells import Row
    from docpipe.collection.handle import Collection
    from docpipe.pipeline import DocPipe
    from docpipe.playbook import PlaybookReport
    from docpipe.review import ReviewGrid

__all__ = ["CHECK_BODY_BYTES", "CHECK_PATH", "router"]

#: The playbook-check route, whose body the body guard bounds by `CHECK_BODY_BYTES` before it is read.
CHECK_PATH = re.compile(r"/v1/collections/[^/]+/check/?")
#: The most a playbook of `MAX_PLAYBOOK_BYTES` takes as a JSON body: three times its size (a two-byte UTF-8
#: character escaped as \uXXXX is six bytes) and room for the other fields.
CHECK_BODY_BYTES = 3 * MAX_PLAYBOOK_BYTES + 16 * 1024

GridFormat = Literal["xlsx", "csv", "md", "json"]
_MEDIA = {
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "csv": "text/csv; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
}
_ICS_MEDIA = "text/calendar; charset=utf-8"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_PASSWORD_HEADER = "The password of encrypted PDFs it quotes."
_NOT_DONE: dict[int | str, dict[str, Any]] = {409: {"description": "The job is not done"}}

router = APIRouter(prefix="/v1", tags=["review jobs"], responses=ERROR_RESPONSES)


def _find(runner: JobRunner, who: Caller, job_id: str) -> Job:
    """Returns the job of the caller's matter; 404 (the same for a malformed id, an unknown one and one
    of another matter) otherwise."""
    job = runner.get(job_id)  # a malformed id is None before any file is looked at
    if job is None or job.matter != who.matter:
        raise HTTPException(
            404,
            detail=f"no review job with id {job_id[:40]!r} in matter {who.matter!r}: GET /v1/jobs lists them",
        )
    return job


def _out(
    runner: JobRunner,
    job: Job,
    *,
    grid: ReviewGrid | None = None,
    report: PlaybookReport | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    body = {k: v for k, v in job.to_dict().items() if k in JobOut.model_fields}
    # A playbook's text (up to 256 KiB) stays out of every listing: the report carries it.
    body["request"] = {k: v for k, v in job.request.items() if k != "playbook"}
    body.update(url=f"/v1/jobs/{job.id}", position=runner.position(job.id), message=message)
    body["grid"] = grid.to_dict() if grid is not None else None
    body["report"] = report.to_dict() if report is not None else None
    return body


def _is_check(job: Job) -> bool:
    return job.request.get("type") == "check"


def _open_documents(dp: DocPipe, matters: MatterStore, who: Caller, rows: Sequence[Row], password: str | None) -> None:
    """An encrypted PDF's cells and verdicts quote its text: reading them needs what its text needs (a key that
    proved the password, or the password)."""
    for row in rows:
        record = matters.get(who.matter, row.document_id) if row.document_id else None
        if record is None or not record.encrypted:
            continue
        if is_key(who) and who.key_id in record.granted:
            continue
        if not password:
            raise PasswordRequiredError(f"{record.name} is encrypted", path=record.name)
        dp.document(record.id, password=password, name=record.name, matter=who.matter)


def _submit(
    request: Request,
    response: Response,
    who: Caller,
    coll: Collection,
    asked: dict[str, Any],
    password: str | None,
    audit: AccessLog,
    runner: JobRunner,
    questions: list[str] | None = None,
) -> Any:
    """Queues the job `asked` of the collection; returns it (202, with its URL), or 429 past the user's limit.
    The access log keeps the hashes of `questions` (by default what `asked` asks in words)."""
    if not len(coll):
        raise InputError(
            f"collection {coll.name} has no documents: add some (POST /v1/collections/{coll.name}/documents)"
        )
    job = Job.new(matter=who.matter, collection=coll.name, user=who.user, key_id=who.key_id, request=asked)
    action = f"{asked['type']}_start"  # review_start, terms_start, check_start
    try:
        with logged(
            audit,
            who,
            action,
            questions=question_texts(asked) if questions is None else questions,
            detail=f"collection {coll.name} job {job.id}",
        ):
            job = runner.submit(job, password=password)
    except TooManyJobs as exc:
        return error_response(request, 429, "too_many_jobs", str(exc), {"Retry-After": "30"})
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return _out(runner, job)


_TOO_MANY: dict[int | str, dict[str, Any]] = {
    429: {"description": "You have the most review jobs queued or running allowed"}
}


@router.post(
    "/collections/{name}/review",
    response_model=JobOut,
    status_code=202,
    summary="Start a review job",
    responses=_TOO_MANY,
)
def start_review(
    name: str,
    body: ReviewRequest,
    request: Request,
    response: Response,
    who: Writer,
    dp: DocPipeDep,
    audit: AuditDep,
    runner: JobsDep,
    options: OptionsDep,
) -> Any:
    """Queues a review grid of the collection: every document against every question, typed column, key term
    and checklist category. Returns the job (202) at once; GET its URL for progress and, when done, the grid."""
    coll = open_collection(dp, who, name)
    asked = review_request(options, body)
    return _submit(request, response, who, coll, asked, body.password, audit, runner)


@router.post(
    "/collections/{name}/terms",
    response_model=JobOut,
    status_code=202,
    summary="Start a key-terms job",
    responses=_TOO_MANY,
)
def start_terms(
    name: str,
    body: TermsRequest,
    request: Request,
    response: Response,
    who: Writer,
    dp: DocPipeDep,
    audit: AuditDep,
    runner: JobsDep,
) -> Any:
    """Queues the key-terms table of the collection: one row per contract, one typed column per key term (all,
    or those named), each cell a normalized value with the quotes it was read from. A review job like the
    others (the same limits, progress, cancel and downloads); without a language model the values come from
    deterministic readers."""
    coll = open_collection(dp, who, name)
    asked = terms_request(body)
    return _submit(request, response, who, coll, asked, body.password, audit, runner)


@router.post(
    "/collections/{name}/check",
    response_model=JobOut,
    status_code=202,
    summary="Start a playbook check",
    responses={
        **_TOO_MANY,
        413: {"description": "The playbook is over 256 KiB (or the body over what such a playbook takes)"},
    },
)
def start_check(
    name: str,
    body: CheckRequest,
    request: Request,
    response: Response,
    who: Writer,
    dp: DocPipeDep,
    audit: AuditDep,
    runner: JobsDep,
    options: OptionsDep,
) -> Any:
    """Queues a playbook check of the collection: the playbook (TOML) is parsed and checked first (a problem is a
    422 naming the line, the rule and the fix), then one review grid reads what its rules need and each rule is
    judged on each contract: meets, deviates, missing or needs review, with the quotes it rests on. Returns the
    job (202) at once; GET its URL for progress and, when done, the report; GET its /report to download it."""
    size = len(body.playbook.encode("utf-8", "surrogatepass"))
    if size > MAX_PLAYBOOK_BYTES:  # before the TOML parser sees it
        raise HTTPException(
            413,
            detail=f"the playbook is {size:,} bytes; a playbook is at most {MAX_PLAYBOOK_BYTES:,} bytes "
            f"({MAX_PLAYBOOK_BYTES // 1024} KiB): split it into several playbooks",
        )
    coll = open_collection(dp, who, name)
    asked, playbook = check_request(options, body)
    questions = [rule.question for rule in playbook.rules if rule.question]
    return _submit(request, response, who, coll, asked, body.password, audit, runner, questions)


@router.get("/jobs", response_model=JobList, summary="The matter's review jobs")
def list_jobs(who: Reader, audit: AuditDep, runner: JobsDep) -> dict[str, Any]:
    """Returns the review jobs of the matter, newest first, without their grids."""
    with logged(audit, who, "list_jobs"):
        jobs = runner.jobs(who.matter)
    return {"matter": who.matter, "jobs": [_out(runner, job) for job in jobs]}


@router.get("/jobs/{job_id}", response_model=JobOut, summary="A review job")
def get_job(
    job_id: str,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    runner: JobsDep,
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> dict[str, Any]:
    """Returns the job's state and progress (cells done of total, from the cache, failed); when done, its
    failures and the whole grid, or a check's report."""
    job = _find(runner, who, job_id)
    if _is_check(job):
        report = runner.store.load_report(job.id) if job.state == "done" else None
        if report is None:
            return _out(runner, job)
        with logged(audit, who, "read_check", detail=f"collection {job.collection} job {job.id}"):
            _open_documents(dp, matters, who, report.rows, x_document_password)
        return _out(runner, job, report=report)
    grid = runner.store.load_grid(job.id) if job.state == "done" else None
    if grid is None:
        return _out(runner, job)
    with logged(audit, who, "read_review", detail=f"collection {job.collection} job {job.id}"):
        _open_documents(dp, matters, who, grid.rows, x_document_password)
        with_marks(grid, dp.store, who.matter)
    return _out(runner, job, grid=grid)


@router.get(
    "/jobs/{job_id}/grid",
    summary="Download a review grid",
    response_class=Response,
    responses={
        200: {"content": {m.split(";")[0]: {} for m in _MEDIA.values()}, "description": "The grid"},
        **_NOT_DONE,
    },
)
def download_grid(
    job_id: str,
    request: Request,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    runner: JobsDep,
    format: GridFormat = Query("xlsx", description="xlsx (Review, Citations, Manifest sheets), csv, md, json."),
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> Response:
    """Returns the finished grid as a file: Excel (a sheet of cells, one of citations, the manifest), CSV,
    Markdown or JSON. A playbook check has a report instead (GET /v1/jobs/{id}/report)."""
    job = _find(runner, who, job_id)
    if _is_check(job):
        return _no_grid(request, job)
    grid = runner.store.load_grid(job.id) if job.state == "done" else None
    if grid is None:
        return _not_done(request, job)
    with logged(audit, who, "download_review", detail=f"collection {job.collection} job {job.id} {format}"):
        _open_documents(dp, matters, who, grid.rows, x_document_password)
        with_marks(grid, dp.store, who.matter)  # the marks as they are now, made after the job too
        if format == "xlsx":
            data: bytes = grid.to_xlsx()
        elif format == "csv":
            data = grid.to_csv().encode()
        elif format == "md":
            data = grid.to_markdown().encode()
        else:
            data = grid.to_json().encode()
    return _download(data, _MEDIA[format], f"{_stem(job)}.{format}")


@router.get(
    "/jobs/{job_id}/report",
    summary="Download a playbook check's report",
    response_class=Response,
    responses={
        200: {"content": {m.split(";")[0]: {} for m in _MEDIA.values()}, "description": "The report"},
        **_NOT_DONE,
    },
)
def download_report(
    job_id: str,
    request: Request,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    runner: JobsDep,
    format: GridFormat = Query(
        "xlsx",
        description="xlsx (Summary, Verdicts, Citations, Playbook sheets), csv (a row per contract and "
        "rule), md, json (the report as GET /v1/jobs/{id} carries it).",
    ),
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> Response:
    """Returns a finished playbook check's report as a file: Excel (the summary per rule, the verdict of every
    contract and rule, worst contracts first, the citations, the playbook), CSV, Markdown or JSON."""
    job = _find(runner, who, job_id)
    if not _is_check(job):
        kind = job.request.get("type") or "review"
        return error_response(
            request,
            409,
            "no_report",
            f"job {job.id} is a {kind} job: only a playbook check has a report; its grid downloads from "
            f"GET /v1/jobs/{job.id}/grid",
        )
    report = runner.store.load_report(job.id) if job.state == "done" else None
    if report is None:
        return _not_done(request, job)
    with logged(audit, who, "download_check", detail=f"collection {job.collection} job {job.id} {format}"):
        _open_documents(dp, matters, who, report.rows, x_document_password)
        if format == "xlsx":
            data: bytes = report.to_xlsx()
        elif format == "csv":
            data = report.to_csv().encode()
        elif format == "md":
            data = report.to_markdown().encode()
        else:
            data = report.to_json().encode()
    return _download(data, _MEDIA[format], f"{_stem(job)}.{format}")


@router.get(
    "/jobs/{job_id}/deadlines.ics",
    summary="Download a grid's deadlines (iCalendar)",
    response_class=Response,
    responses={200: {"content": {"text/calendar": {}}, "description": "The deadlines"}, **_NOT_DONE},
)
def download_deadlines(
    job_id: str,
    request: Request,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    runner: JobsDep,
    remind_days: int = Query(
        DEFAULT_REMIND_DAYS, ge=0, le=366, description="Days before a notice deadline its reminder shows (0: none)."
    ),
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> Response:
    """Returns the finished grid's deadlines as an iCalendar file to import into a calendar: an all-day event
    per contract for its expiration and for the last day to give notice of non-renewal (with a reminder), each
    describing the quotes the date was read from. Its cells that name no whole day are left out; a grid without
    deadline columns gives an empty calendar."""
    job = _find(runner, who, job_id)
    if _is_check(job):
        return _no_grid(request, job)
    grid = runner.store.load_grid(job.id) if job.state == "done" else None
    if grid is None:
        return _not_done(request, job)
    with logged(audit, who, "download_deadlines", detail=f"collection {job.collection} job {job.id}"):
        _open_documents(dp, matters, who, grid.rows, x_document_password)
        data = deadlines_ics(grid, remind_days=remind_days)
    return _download(data, _ICS_MEDIA, f"{_stem(job, 'deadlines')}.ics")


def _not_done(request: Request, job: Job) -> Response:
    return error_response(
        request,
        409,
        "not_done",
        f"review job {job.id} is {job.state} ({job.progress['done']} of {job.progress['total']} cells): "
        + (
            "GET it again when its state is done"
            if job.state in ("queued", "running")
            else f"it has no {'report' if _is_check(job) else 'grid'}"
        ),
    )


def _no_grid(request: Request, job: Job) -> Response:
    return error_response(
        request,
        409,
        "no_grid",
        f"job {job.id} is a playbook check: it has a report, not a grid; download it from "
        f"GET /v1/jobs/{job.id}/report?format=xlsx|csv|md|json",
    )


def _stem(job: Job, what: str | None = None) -> str:
    """Returns a download's name without its suffix: ``<what>-<collection>-<id>``, `what` by default the job's
    type (``review``, ``terms`` for key terms, ``check`` for a playbook check)."""
    what = what or str(job.request.get("type") or "review")
    return f"{what}-{_UNSAFE.sub('_', job.collection)[:60]}-{job.id[:8]}"


def _download(data: bytes, media_type: str, filename: str) -> Response:
    return Response(
        data,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "X-Content-Type-Options": "nosniff"},
    )


@router.delete("/jobs/{job_id}", response_model=JobOut, summary="Cancel a review job")
def cancel_job(job_id: str, request: Request, who: Writer, audit: AuditDep, runner: JobsDep) -> Any:
    """Cancels a queued job at once, a running one after the engine batch in progress (the cells done stay
    in the cache: posting the review again continues from them)."""
    job = _find(runner, who, job_id)
    with logged(audit, who, "review_cancel", detail=f"collection {job.collection} job {job.id}"):
        cancelled = runner.cancel(job.id)
    if cancelled is None:
        return error_response(
            request,
            409,
            "not_running",
            f"review job {job.id} is {job.state} already: only a queued or running job can be cancelled",
        )
    if cancelled.state == "cancelled":
        message = f"cancelled after {cancelled.progress['done']} of {cancelled.progress['total']} cells"
    else:
        message = "cancelling: the job stops after the engine batch in progress; GET it to see it stop"
    return _out(runner, cancelled, message=message)
