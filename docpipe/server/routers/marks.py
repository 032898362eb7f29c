"""``/v1/marks``: reviewers' marks on grid cells (accepted, corrected with the value, flagged; with a comment),
kept per matter (`docpipe.review.marks`), so a review job or a grid run again in the matter shows them.

A mark names a document the caller's matter holds (another matter's key gets 404 for it, as for any id the
matter does not hold) and a grid column by its key (the category or the question). Setting and clearing need
the write role, reading the read role; each is written to the access log (``mark``, ``unmark``, ``marks``)
with the column and the status, never the comment.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from docpipe.errors import ConfigError
from docpipe.review.marks import MAX_COLUMN_CHARS, MAX_COMMENT_CHARS, MAX_VALUE_CHARS, MarkStore
from docpipe.server.deps import AuditDep, DocPipeDep, MattersDep, Reader, Writer, logged, matter_record
from docpipe.server.models import ERROR_RESPONSES

__all__ = ["MAX_DOCUMENTS", "Cleared", "MarkIn", "MarkOut", "MarksOut", "router"]

router = APIRouter(prefix="/v1", tags=["review marks"], responses=ERROR_RESPONSES)

_DOC_ID = "The document's id (its SHA-256, 64 hex characters)."
_COLUMN = "The grid column's key: the category or the question."
#: How many documents one ``GET /v1/marks`` may name.
MAX_DOCUMENTS = 1000


class MarkIn(BaseModel):
    """A reviewer's mark on one cell."""

    model_config = ConfigDict(extra="forbid")

    document_id: str = Field(min_length=1, max_length=64, description=_DOC_ID)
    column: str = Field(min_length=1, max_length=MAX_COLUMN_CHARS, description=_COLUMN)
    status: Literal["accepted", "corrected", "flagged"] = Field(
        description="accepted, corrected (give `value`) or flagged."
    )
    value: str | None = Field(None, max_length=MAX_VALUE_CHARS, description="The corrected value (corrected only).")
    comment: str = Field("", max_length=MAX_COMMENT_CHARS, description="What the reviewer wants said about the cell.")


class MarkOut(BaseModel):
    document_id: str
    column: str
    status: str
    value: str | None
    comment: str
    user: str = Field(description="Who marked the cell (the key's user).")
    time: float = Field(description="When, in seconds since the epoch.")
    when: str = Field(description="When, in UTC (ISO 8601).")


class MarksOut(BaseModel):
    matter: str
    marks: list[MarkOut]


class Cleared(BaseModel):
    matter: str
    document_id: str
    column: str
    cleared: bool = Field(description="False when the cell had no mark.")


def _out(mark: Any) -> dict[str, Any]:
    return {**mark.to_dict(), "when": mark.when}


def _detail(column: str, status: str) -> str:
    # The access log keeps 200 characters of detail: the status must survive a long question.
    return f"{status}: {column[:150]}"


@router.put("/marks", response_model=MarkOut, summary="Mark a grid cell")
def set_mark(body: MarkIn, who: Writer, dp: DocPipeDep, matters: MattersDep, audit: AuditDep) -> dict[str, Any]:
    """Marks the cell of `document_id` in the grid column `column` accepted, corrected (with `value`) or flagged,
    replacing the mark it had; the mark names you and the time. Grids and review jobs of the matter show it."""
    matter_record(matters, who, body.document_id)
    with logged(audit, who, "mark", document=body.document_id, detail=_detail(body.column, body.status)):
        mark = MarkStore.of(dp.store).set(
            who.matter,
            body.document_id,
            body.column,
            status=body.status,
            value=body.value,
            comment=body.comment,
            user=who.user,
        )
    return _out(mark)


@router.delete("/marks", response_model=Cleared, summary="Clear a grid cell's mark")
def clear_mark(
    who: Writer,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    document_id: str = Query(min_length=1, max_length=64, description=_DOC_ID),
    column: str = Query(min_length=1, max_length=MAX_COLUMN_CHARS, description=_COLUMN),
) -> dict[str, Any]:
    """Removes the cell's mark (and the marks it replaced)."""
    matter_record(matters, who, document_id)
    with logged(audit, who, "unmark", document=document_id, detail=_detail(column, "cleared")):
        cleared = MarkStore.of(dp.store).clear(who.matter, document_id, column)
    return {"matter": who.matter, "document_id": document_id, "column": column, "cleared": cleared}


@router.get("/marks", response_model=MarksOut, summary="The matter's marks")
def list_marks(
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    document_id: list[str] | None = Query(
        None, description="Only the marks of these documents (repeat the parameter for several)."
    ),
) -> dict[str, Any]:
    """Returns the marks of the matter's documents (of `document_id` when given), by document and column."""
    if document_id is not None and len(document_id) > MAX_DOCUMENTS:
        raise ConfigError(
            f"{len(document_id)} documents in one request; ask for at most {MAX_DOCUMENTS} at a time, or for all"
        )
    for doc_id in document_id or []:
        matter_record(matters, who, doc_id)
    with logged(audit, who, "marks", document=document_id[0] if document_id and len(document_id) == 1 else None):
        found = MarkStore.of(dp.store).marks(who.matter, document_id)
    held = {key[0] for key in found if matters.get(who.matter, key[0]) is not None}
    return {"matter": who.matter, "marks": [_out(m) for key, m in found.items() if key[0] in held]}
