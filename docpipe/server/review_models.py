"""The request and response models of the review-job routes (`docpipe.server.routers.review_jobs`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from docpipe.server.models import Mode, check_unicode

__all__ = ["JobList", "JobOut", "JobProgress", "ReviewRequest"]


class ReviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: list[str] | None = Field(
        None,
        description="Free questions, one column each (at most 200 columns in all).",
        examples=[["What is the notice period for termination for convenience?"]],
    )
    checklist: bool = Field(False, description="Add every clause-checklist category as a column (41).")
    categories: list[str] | None = Field(
        None, description="Checklist categories to add as columns, e.g. Governing Law (see the checklist)."
    )
    mode: Mode = Field("think", description="Thinking mode of the cells (default think).")
    layout: Literal["auto", "shared", "per_cell"] | None = Field(
        None,
        description="shared: a document's cells share one context; per_cell: each its own; auto: per_cell when "
        "cells think, shared when not (the server's default, DOCPIPE_REVIEW__LAYOUT).",
    )
    password: str | None = Field(
        None,
        description="The password of encrypted PDFs in the collection. Held in memory for this run only, never "
        "stored: a job resumed after a server restart fails those rows and says so.",
    )

    @model_validator(mode="after")
    def _valid_unicode(self) -> ReviewRequest:
        check_unicode(self)
        return self


class JobProgress(BaseModel):
    done: int = Field(description="Cells finished (from the cache or computed; failed ones included).")
    total: int = Field(description="Cells of the grid (documents x columns); 0 until the job starts.")
    cached: int = Field(description="Cells that came from the cell cache.")
    failed: int = Field(description="Cells that failed (the grid's notes say why).")


class JobOut(BaseModel):
    id: str = Field(description="The job's id (32 hex digits).")
    url: str = Field(description="Where the job is: GET it for its progress, DELETE it to cancel.")
    matter: str
    collection: str
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    position: int | None = Field(None, description="Jobs ahead of this one while it is queued (0: next).")
    progress: JobProgress
    user: str = Field(description="Who started it.")
    request: dict[str, Any] = Field(
        description="What was asked: questions, checklist, categories, mode, layout, password_given."
    )
    created: float = Field(description="When it was posted (Unix time).")
    started: float | None = Field(None, description="When it last started running (Unix time).")
    finished: float | None = None
    error: str | None = Field(None, description="Why a failed job failed, and what to do.")
    notice: str | None = Field(None, description="Something to know, e.g. that it was resumed without a password.")
    cancel_requested: bool = Field(False, description="A cancel was asked for; a running job stops after its batch.")
    resumed: int = Field(0, description="Times a server start took the job up again (it resumes from the cache).")
    failures: list[str] = Field(
        default_factory=list, description="When done: one line per failed document, or per failed cell."
    )
    summary: dict[str, Any] | None = Field(None, description="When done: the grid's counts by status.")
    message: str | None = Field(None, description="What the request did (cancel).")
    grid: dict[str, Any] | None = Field(
        None,
        description="When done: the whole grid (rows, columns, every cell with its quotes, the manifest). "
        "GET /v1/jobs/{id}/grid?format=xlsx|csv|md|json downloads it.",
    )


class JobList(BaseModel):
    matter: str
    jobs: list[JobOut] = Field(description="The matter's review jobs, newest first (without their grids).")
