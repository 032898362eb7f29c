"""The request and response models of the review-job routes (`docpipe.server.routers.review_jobs`): review
grids, their typed columns, the key-terms table and playbook checks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from docpipe.playbook.schema import MAX_PLAYBOOK_BYTES, MAX_RULES
from docpipe.server.models import Mode, check_unicode
from docpipe.terms.catalog import KEY_TERMS

__all__ = ["CheckRequest", "ColumnSpec", "JobList", "JobOut", "JobProgress", "ReviewRequest", "TermsRequest"]


class ColumnSpec(BaseModel):
    """One typed column, as a columns file's ``[[column]]`` table says it (`docpipe.terms.columns`): a question
    and its kind (and a choice's options), or a built-in key term (and its header)."""

    # Other keys are kept here and refused by the columns' own check, whose message names the keys there are.
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    key: str | None = Field(None, description="The column's header (default: the question, or the key term's).")
    question: str | None = Field(None, description="The question its cells answer (not with a term).")
    kind: str | None = Field(
        None,
        description="What its cells hold: text (default), yes_no, date, duration, money, percent, jurisdiction, "
        "parties, choice.",
    )
    options: list[str] | None = Field(None, description="A choice column's options: at least two, at most 50.")
    term: str | None = Field(
        None, description="A built-in key term's id (e.g. governing_law, notice_deadline): its question and kind."
    )

    @model_validator(mode="after")
    def _valid_unicode(self) -> ColumnSpec:
        check_unicode(self)
        return self


class ReviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: list[str] | None = Field(
        None,
        description="Free questions, one column each (at most 200 columns in all). A question may name what its "
        'cells hold after "::": "Which law governs?::jurisdiction", "Who pays shipping?::choice[Buyer|Seller]".',
        examples=[["What is the notice period for termination for convenience?", "Which law governs?::jurisdiction"]],
    )
    checklist: bool = Field(False, description="Add every clause-checklist category as a column (41).")
    categories: list[str] | None = Field(
        None, description="Checklist categories to add as columns, e.g. Governing Law (see the checklist)."
    )
    columns: list[ColumnSpec] | None = Field(
        None,
        description="Typed columns: {key, question, kind, options} or {term, key}, checked as a columns file is.",
        examples=[[{"key": "Law", "question": "Which law governs?", "kind": "jurisdiction"}, {"term": "parties"}]],
    )
    key_terms: StrictBool | list[str] = Field(
        False,
        description="Add the built-in key terms as columns: true for all of them, or a list of their ids "
        "(POST /v1/collections/{name}/terms asks for them alone).",
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


class TermsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    terms: list[str] | None = Field(
        None,
        description=f"The key terms' ids (default: all of them): {', '.join(t.id for t in KEY_TERMS)}.",
        examples=[["governing_law", "expiration_date", "notice_deadline"]],
    )
    mode: Mode = Field("think", description="Thinking mode of the cells, with a language model (default think).")
    password: str | None = Field(
        None,
        description="The password of encrypted PDFs in the collection. Held in memory for this run only, never stored.",
    )

    @model_validator(mode="after")
    def _valid_unicode(self) -> TermsRequest:
        check_unicode(self)
        return self


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    playbook: str = Field(
        description=f"The playbook: the TOML text of a playbook file (docs/playbook.md), at most "
        f"{MAX_PLAYBOOK_BYTES // 1024} KiB and {MAX_RULES} rules. Checked before the job is queued: a problem is "
        "a 422 naming the line, the rule and the fix.",
        examples=[
            '[playbook]\nname = "Commercial contracts"\n\n[[rule]]\nid = "governing-law"\ntitle = "Governed by '
            'an approved law"\nseverity = "high"\nterm = "governing_law"\nallowed = ["New York", "Delaware"]\n'
        ],
    )
    mode: Mode = Field("think", description="Thinking mode of the cells, with a language model (default think).")
    password: str | None = Field(
        None,
        description="The password of encrypted PDFs in the collection. Held in memory for this run only, never stored.",
    )

    @model_validator(mode="after")
    def _valid_unicode(self) -> CheckRequest:
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
        description="What was asked: type (review, terms or check), questions, checklist, categories, columns, "
        "key_terms, mode, layout, password_given; a check's playbook_name, playbook_sha256 and rules (its TOML "
        "text is in the report)."
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
    summary: dict[str, Any] | None = Field(
        None,
        description="When done: the grid's counts by status; a check's contracts, rules, verdicts (count of each) "
        "and text (its one-line summary).",
    )
    message: str | None = Field(None, description="What the request did (cancel).")
    grid: dict[str, Any] | None = Field(
        None,
        description="When done: the whole grid (rows, columns, every cell with its quotes and typed value, the "
        "manifest). GET /v1/jobs/{id}/grid?format=xlsx|csv|md|json downloads it; GET /v1/jobs/{id}/deadlines.ics "
        "its deadlines.",
    )
    report: dict[str, Any] | None = Field(
        None,
        description="When a check is done: its report (the playbook with its text, the summary per rule, every "
        "contract worst first with its verdict per rule: meets, deviates, missing or needs_review, the reason and "
        "the quotes it rests on; the manifest of the grid read). GET /v1/jobs/{id}/report?format=xlsx|csv|md|json "
        "downloads it.",
    )


class JobList(BaseModel):
    matter: str
    jobs: list[JobOut] = Field(
        description="The matter's review, key-terms and check jobs, newest first (without their grids or reports)."
    )
