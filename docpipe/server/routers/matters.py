"""``GET /v1/matters`` (the caller's matters and role in each) and ``DELETE /v1/matters/{matter}`` (a matter
and everything in it; admin)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from docpipe.server.deps import AuditDep, Credentials, HousekeeperDep, MattersDep, caller_in, logged, principal_of
from docpipe.server.models import ERROR_RESPONSES, Deleted, MattersOut

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["documents"], responses=ERROR_RESPONSES)


@router.get("/matters", response_model=MattersOut, summary="Your matters")
def list_matters(request: Request, credentials: Credentials, matters: MattersDep) -> dict[str, Any]:
    """Returns the matters your key may use, with your role and their document counts."""
    principal = principal_of(request, credentials)
    names = set(principal.matters()) | (set(matters.matters()) if principal.everywhere else set())
    return {
        "user": principal.user,
        "matters": [
            {"name": m, "role": principal.role(m), "documents": len(matters.documents(m))} for m in sorted(names)
        ],
    }


@router.delete("/matters/{matter_name}", response_model=Deleted, summary="Delete a matter")
def delete_matter(
    matter_name: str, request: Request, credentials: Credentials, housekeeper: HousekeeperDep, audit: AuditDep
) -> dict[str, Any]:
    """Deletes everything of the matter: its documents (and their PDF, text, indexes and cached answers
    when no other matter holds the same file), answers and reports. Needs the admin role."""
    who = caller_in(request, principal_of(request, credentials), matter_name, "admin")
    with logged(audit, who, "delete_matter"):
        removed = housekeeper.delete_matter(who.matter)
    return {
        "matter": who.matter,
        "deleted": who.matter,
        "documents": removed.documents,
        "answers_and_reports": removed.results,
        "purged": removed.purged,
        "review_jobs": removed.review_jobs,
    }
