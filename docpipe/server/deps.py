"""What the routers (`docpipe.server.routers`) share: FastAPI dependencies over the app's state, the caller
in a matter, and the helpers that keep every route to that matter and write its access-log line.

`create_app` puts the pipeline and the stores on ``app.state``; the small functions here read them from the
request, and the ``...Dep`` aliases let a route ask for one by its type (FastAPI's ``Annotated`` style)::

    @router.get("/documents")
    def list_documents(who: Reader, matters: MattersDep, audit: AuditDep) -> dict[str, Any]: ...

`Reader` and `Writer` authenticate the bearer credential (`docpipe.server.access`) and choose the matter
(``X-Matter`` or ``?matter=``) with the read or write role; a known caller refused a matter is written to the
access log as ``denied``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Header, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from docpipe.access.keys import KeyStore, Principal
from docpipe.access.log import AccessLog
from docpipe.access.matters import MatterDocument, MatterStore
from docpipe.access.scope import logged as logged_action
from docpipe.answer.core import check_question
from docpipe.errors import ConfigError, InputError, PasswordRequiredError
from docpipe.pipeline import DocPipe
from docpipe.server.access import MATTER_HEADER, AccessDenied, Caller, authenticate, choose_matter
from docpipe.server.housekeeping import Housekeeper
from docpipe.server.jobs import JobRunner
from docpipe.server.metrics import Metrics
from docpipe.server.options import TOKEN_ENV, ServeOptions
from docpipe.server.storage import ResultStore
from docpipe.storage.collections import check_collection_name

if TYPE_CHECKING:
    from docpipe.collection.handle import Collection
    from docpipe.types import Document

__all__ = [
    "AnalysisSlotsDep",
    "AuditDep",
    "Credentials",
    "DocPipeDep",
    "HousekeeperDep",
    "JobsDep",
    "MattersDep",
    "MetricsDep",
    "OptionsDep",
    "Reader",
    "ResultsDep",
    "StartedDep",
    "Writer",
    "caller_in",
    "check_questions",
    "checked_name",
    "document_gone",
    "is_key",
    "logged",
    "matter_record",
    "open_collection",
    "open_document",
    "principal_of",
]

_DOC_ID = re.compile(r"^[0-9a-f]{64}$")


# -- the app's state --------------------------------------------------------------------------------------
def get_dp(request: Request) -> DocPipe:
    return request.app.state.dp


def get_options(request: Request) -> ServeOptions:
    return request.app.state.options


def get_keys(request: Request) -> KeyStore:
    return request.app.state.keys


def get_matters(request: Request) -> MatterStore:
    return request.app.state.matters


def get_audit(request: Request) -> AccessLog:
    return request.app.state.audit


def get_results(request: Request) -> ResultStore:
    return request.app.state.results


def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


def get_housekeeper(request: Request) -> Housekeeper:
    return request.app.state.housekeeper


def get_jobs(request: Request) -> JobRunner:
    return request.app.state.jobs


def get_analysis_slots(request: Request) -> asyncio.Semaphore:
    """Returns the semaphore that bounds the analyses running at once (``--max-concurrent-analyses``)."""
    return request.app.state.analyses


def get_started(request: Request) -> float:
    """Returns when the app was created (``time.time()``)."""
    return request.app.state.started


DocPipeDep = Annotated[DocPipe, Depends(get_dp)]
OptionsDep = Annotated[ServeOptions, Depends(get_options)]
MattersDep = Annotated[MatterStore, Depends(get_matters)]
AuditDep = Annotated[AccessLog, Depends(get_audit)]
ResultsDep = Annotated[ResultStore, Depends(get_results)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
HousekeeperDep = Annotated[Housekeeper, Depends(get_housekeeper)]
JobsDep = Annotated[JobRunner, Depends(get_jobs)]
AnalysisSlotsDep = Annotated[asyncio.Semaphore, Depends(get_analysis_slots)]
StartedDep = Annotated[float, Depends(get_started)]


# -- the caller -------------------------------------------------------------------------------------------
bearer = HTTPBearer(
    auto_error=False,
    description=f"A per-user API key (docpipe keys create) or the server's token ({TOKEN_ENV}).",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _http(exc: AccessDenied) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return HTTPException(exc.status, detail=exc.message, headers=headers)


def principal_of(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """Returns who the bearer credential proves; 401 when it proves nothing."""
    header = f"Bearer {credentials.credentials}" if credentials is not None else None
    try:
        return authenticate(get_keys(request), get_options(request).token, header)
    except AccessDenied as exc:
        raise _http(exc) from None


def caller_in(request: Request, principal: Principal, requested: str | None, role: str) -> Caller:
    """Returns the caller in the requested matter; a known user refused a matter (no grant: 404, too low a
    role: 403) is written to the access log as ``denied``, with the route as the action and why."""
    try:
        return choose_matter(principal, requested, role)
    except AccessDenied as exc:
        if exc.matter is not None:  # 400s are malformed requests, not attempts on a matter
            route = request.scope.get("route")
            get_audit(request).record(
                user=principal.user,
                key_id=principal.key_id,
                matter=exc.matter,
                action=getattr(route, "name", None) or "request",
                outcome="denied",
                detail=exc.message,
            )
        raise _http(exc) from None


def _caller_with(role: str) -> Callable[..., Caller]:
    def dependency(
        request: Request,
        credentials: Credentials,
        x_matter: str | None = Header(
            None, alias=MATTER_HEADER, description="The matter to act in (default: your key's only matter)."
        ),
        matter: str | None = Query(None, description=f"The matter, if not in the {MATTER_HEADER} header."),
    ) -> Caller:
        return caller_in(request, principal_of(request, credentials), x_matter or matter, role)

    return dependency


#: The caller, in a matter where they may read (or write).
Reader = Annotated[Caller, Depends(_caller_with("read"))]
Writer = Annotated[Caller, Depends(_caller_with("write"))]


def is_key(caller: Caller) -> bool:
    """Returns True for a per-user key (grants are per key; the shared token and the local user get none)."""
    return caller.key_id not in ("local", "token")


# -- one matter, logged -----------------------------------------------------------------------------------
@contextlib.contextmanager
def logged(
    audit: AccessLog,
    who: Caller,
    action: str,
    document: str | None = None,
    questions: list[str] | None = None,
    detail: str = "",
) -> Iterator[None]:
    """Runs the action's body, then appends its access-log line with the outcome (an error's type)."""
    with logged_action(
        audit,
        user=who.user,
        key_id=who.key_id,
        matter=who.matter,
        action=action,
        document=document,
        question=questions,
        detail=detail,
    ):
        yield


def matter_record(matters: MatterStore, who: Caller, doc_id: str) -> MatterDocument:
    """Returns the matter's record of the document; 404 for a malformed id or one the matter does not hold."""
    record = matters.get(who.matter, doc_id) if _DOC_ID.match(doc_id) else None
    if record is None:
        raise HTTPException(
            404,
            detail=f"no document with id {doc_id[:80]!r} in matter {who.matter!r}: upload the PDF first "
            "(POST /v1/documents returns its id, the SHA-256 of the file)",
        )
    return record


def document_gone(doc_id: str) -> HTTPException:
    """Returns the 404 for a document the matter lists but the store no longer holds."""
    return HTTPException(404, detail=f"document {doc_id[:12]} is no longer stored: upload the PDF again")


def open_document(dp: DocPipe, matters: MatterStore, who: Caller, doc_id: str, password: str | None) -> Document:
    """Returns the matter's view of the document; an encrypted one needs its password or a key that proved
    it (a grant)."""
    record = matter_record(matters, who, doc_id)
    authorized = not record.encrypted or (is_key(who) and who.key_id in record.granted)
    if not authorized and not password:
        raise PasswordRequiredError(f"{record.name} is encrypted", path=record.name)
    doc = dp.document(doc_id, password=password, authorized=authorized, name=record.name, matter=who.matter)
    if doc is None:
        raise document_gone(doc_id)
    return doc


def check_questions(options: ServeOptions, questions: list[str]) -> list[str]:
    """Returns the questions when this server takes them (how many, how long); ConfigError saying what to
    change otherwise."""
    if not questions:
        raise ConfigError('no question given: send "question" or a non-empty "questions" list')
    if len(questions) > options.max_questions:
        raise ConfigError(
            f"{len(questions)} questions in one request; this server takes at most {options.max_questions}: "
            "split them over several requests"
        )
    for number, question in enumerate(questions, 1):
        check_question(question, which=f"question {number}")
        if len(question) > options.max_question_chars:
            raise ConfigError(
                f"question {number} is {len(question)} characters long; keep it under {options.max_question_chars}"
            )
    return questions


def checked_name(name: str) -> str:
    """Returns the collection name; a bad one (``..``, a slash, a dot first, too long) is a 400."""
    try:
        return check_collection_name(name)
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def open_collection(dp: DocPipe, who: Caller, name: str) -> Collection:
    """Returns the matter's collection of that name; 404 when the matter has none."""
    coll = dp.collection(checked_name(name), matter=who.matter)
    if not coll.exists:
        raise HTTPException(
            404,
            detail=f"no collection {name[:80]!r} in matter {who.matter!r}: GET /v1/collections lists them, "
            "POST /v1/collections creates one",
        )
    return coll
