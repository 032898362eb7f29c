"""The review-job endpoints: a review grid over a collection runs in the background (`docpipe.server.jobs`);
the caller polls it, downloads the grid, or cancels it::

    POST   /v1/collections/{name}/review   {"questions": [...], "checklist", "categories", "mode", "layout"}
                                           -> 202, the queued job and its URL (write)
    GET    /v1/jobs                        the matter's jobs, newest first
    GET    /v1/jobs/{id}                   state, progress, failures; when done, the grid (JSON)
    GET    /v1/jobs/{id}/grid?format=      the grid as xlsx, csv, md or json (a download)
    DELETE /v1/jobs/{id}                   cancels a queued or running job (write)

A job belongs to the matter of the collection it reviews: a key without a grant on that matter gets 404 for
it, exactly as for an id no job has; reading needs the read role, starting and cancelling write. A job id is
checked against its strict form before any file is looked at.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response
from starlette.exceptions import HTTPException

from docpipe.errors import ConfigError, InputError, PasswordRequiredError
from docpipe.review.run import MAX_COLUMNS, columns_for
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
from docpipe.server.jobs import Job, JobRunner, TooManyJobs
from docpipe.server.models import ERROR_RESPONSES
from docpipe.server.review_models import JobList, JobOut, ReviewRequest

if TYPE_CHECKING:
    from docpipe.access.matters import MatterStore
    from docpipe.pipeline import DocPipe
    from docpipe.review import ReviewGrid
    from docpipe.server.options import ServeOptions

__all__ = ["router"]

GridFormat = Literal["xlsx", "csv", "md", "json"]
_MEDIA = {
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "csv": "text/csv; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_PASSWORD_HEADER = "The password of encrypted PDFs it quotes."

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


def _out(runner: JobRunner, job: Job, *, grid: ReviewGrid | None = None, message: str | None = None) -> dict[str, Any]:
    body = {k: v for k, v in job.to_dict().items() if k in JobOut.model_fields}
    body.update(url=f"/v1/jobs/{job.id}", position=runner.position(job.id), message=message)
    body["grid"] = grid.to_dict() if grid is not None else None
    return body


def _check_columns(options: ServeOptions, body: ReviewRequest) -> list[str]:
    questions = list(body.questions or [])
    if not questions and not body.checklist and not body.categories:
        raise ConfigError(
            'a review needs columns: send "questions" (a list of questions), "checklist": true (every '
            'clause category), or "categories" (names of checklist categories)'
        )
    if len(questions) > MAX_COLUMNS:
        raise ConfigError(
            f"{len(questions)} questions in one review; a grid takes at most {MAX_COLUMNS} columns: split them "
            "over several reviews"
        )
    for number, question in enumerate(questions, 1):
        if len(question) > options.max_question_chars:
            raise ConfigError(
                f"question {number} is {len(question)} characters long; keep it under {options.max_question_chars}"
            )
    try:
        columns_for(questions, checklist=body.checklist, categories=body.categories)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("a question is empty", 'a question in "questions" is empty')) from None
    return questions


def _open_grid_documents(
    dp: DocPipe, matters: MatterStore, who: Caller, grid: ReviewGrid, password: str | None
) -> None:
    """An encrypted PDF's cells quote its text: reading them needs what its text needs (a key that proved
    the password, or the password)."""
    for row in grid.rows:
        record = matters.get(who.matter, row.document_id) if row.document_id else None
        if record is None or not record.encrypted:
            continue
        if is_key(who) and who.key_id in record.granted:
            continue
        if not password:
            raise PasswordRequiredError(f"{record.name} is encrypted", path=record.name)
        dp.document(record.id, password=password, name=record.name, matter=who.matter)


@router.post(
    "/collections/{name}/review",
    response_model=JobOut,
    status_code=202,
    summary="Start a review job",
    responses={429: {"description": "You have the most review jobs queued or running allowed"}},
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
    """Queues a review grid of the collection: every document against every question (and checklist
    category). Returns the job (202) at once; GET its URL for progress and, when done, the grid."""
    coll = open_collection(dp, who, name)
    questions = _check_columns(options, body)
    if not len(coll):
        raise InputError(
            f"collection {coll.name} has no documents: add some (POST /v1/collections/{coll.name}/documents)"
        )
    job = Job.new(
        matter=who.matter,
        collection=coll.name,
        user=who.user,
        key_id=who.key_id,
        request={
            "questions": questions,
            "checklist": body.checklist,
            "categories": list(body.categories or []),
            "mode": body.mode,
            "layout": body.layout,
        },
    )
    try:
        with logged(audit, who, "review_start", questions=questions, detail=f"collection {coll.name} job {job.id}"):
            job = runner.submit(job, password=body.password)
    except TooManyJobs as exc:
        return error_response(request, 429, "too_many_jobs", str(exc), {"Retry-After": "30"})
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return _out(runner, job)


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
    failures and the whole grid."""
    job = _find(runner, who, job_id)
    grid = runner.store.load_grid(job.id) if job.state == "done" else None
    if grid is None:
        return _out(runner, job)
    with logged(audit, who, "read_review", detail=f"collection {job.collection} job {job.id}"):
        _open_grid_documents(dp, matters, who, grid, x_document_password)
    return _out(runner, job, grid=grid)


@router.get(
    "/jobs/{job_id}/grid",
    summary="Download a review grid",
    response_class=Response,
    responses={
        200: {"content": {m.split(";")[0]: {} for m in _MEDIA.values()}, "description": "The grid"},
        409: {"description": "The job is not done"},
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
    Markdown or JSON."""
    job = _find(runner, who, job_id)
    grid = runner.store.load_grid(job.id) if job.state == "done" else None
    if grid is None:
        return error_response(
            request,
            409,
            "not_done",
            f"review job {job.id} is {job.state} ({job.progress['done']} of {job.progress['total']} cells): "
            + ("GET it again when its state is done" if job.state in ("queued", "running") else "it has no grid"),
        )
    with logged(audit, who, "download_review", detail=f"collection {job.collection} job {job.id} {format}"):
        _open_grid_documents(dp, matters, who, grid, x_document_password)
        if format == "xlsx":
            data: bytes = grid.to_xlsx()
        elif format == "csv":
            data = grid.to_csv().encode()
        elif format == "md":
            data = grid.to_markdown().encode()
        else:
            data = grid.to_json().encode()
    filename = f"review-{_UNSAFE.sub('_', job.collection)[:60]}-{job.id[:8]}.{format}"
    return Response(
        data,
        media_type=_MEDIA[format],
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
