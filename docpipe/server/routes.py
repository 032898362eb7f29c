"""The ``/v1`` endpoints: matters, upload, list, delete, ask, analyze, stored answers and reports, health
(collections are in `docpipe.server.collection_routes`).

Every route but health acts for a caller in a matter (`docpipe.server.access`): it sees only that matter's
documents, answers and reports, and every action on contract content is written to the access log."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.answer.core import check_question
from docpipe.errors import ConfigError, DocpipeError, EmptyFileError, InputError, PasswordRequiredError
from docpipe.names import clean_upload_name
from docpipe.server.access import MATTER_HEADER, AccessDenied, Caller, authenticate, choose_matter
from docpipe.server.models import (
    _ERRORS,
    _UPLOAD_BODY,
    AnalyzeRequest,
    AnswerOut,
    AskResponse,
    Deleted,
    DocumentAskRequest,
    DocumentInfo,
    DocumentList,
    Health,
    MattersOut,
    ReportOut,
)
from docpipe.server.options import TOKEN_ENV, ServeOptions
from docpipe.storage.store import make_private_dir
from docpipe.summary import document_summary

try:  # the serve extra; create_app says how to install it when missing
    # At module level: FastAPI reads the endpoints' (string) annotations in this module's namespace.
    from fastapi import Depends, Header, Query, Request
    from fastapi.security import HTTPAuthorizationCredentials
    from starlette.exceptions import HTTPException as _HTTPException
    from starlette.responses import StreamingResponse as _StreamingResponse
except ImportError:  # pragma: no cover
    _HTTPException = Exception  # type: ignore[assignment,misc]
    _StreamingResponse = object  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from fastapi import FastAPI

    from docpipe.access.keys import KeyStore, Principal
    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterDocument, MatterStore
    from docpipe.pipeline import DocPipe
    from docpipe.server.housekeeping import Housekeeper
    from docpipe.server.metrics import Metrics
    from docpipe.server.storage import ResultStore
    from docpipe.types import Answer, Document

_DOC_ID = re.compile(r"^[0-9a-f]{64}$")

logger = logging.getLogger(__name__)


def _http(exc: AccessDenied) -> Exception:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return _HTTPException(exc.status, detail=exc.message, headers=headers)


def _is_key(caller: Caller) -> bool:
    """Returns True for a per-user key (grants are per key; the shared token and the local user get none)."""
    return caller.key_id not in ("local", "token")


def _sse(event: str, data: dict[str, Any]) -> bytes:
    """Returns one server-sent event (JSON data on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _sse_error(exc: BaseException) -> bytes:
    """Returns the ``error`` event for a stream that failed after it started: the body an HTTP error would
    have had (`docpipe.server.errors`); an unexpected error's details go to the log, not to the client."""
    from docpipe.server.errors import _http_message, error_status

    if isinstance(exc, DocpipeError):
        status, kind = error_status(exc)
        if status >= 500:
            logger.warning("a streamed ask failed: %s: %s", type(exc).__name__, exc)
        return _sse("error", {"error": {"type": kind, "message": _http_message(exc)}})
    reference = uuid.uuid4().hex[:12]
    logger.error("unexpected error %s in a streamed ask", reference, exc_info=(type(exc), exc, exc.__traceback__))
    message = f"unexpected server error (reference {reference}): see the server log"
    return _sse("error", {"error": {"type": "internal_error", "message": message}})


class _EventStream(_StreamingResponse):
    """A text/event-stream response of `events` (server-sent events from a generator run in worker threads).
    When the client disconnects the generator is closed at once (which cancels the engine's request), not when
    the next piece fails to send; a failure on the way becomes an ``error`` event."""

    def __init__(self, events: Generator[bytes, None, None]) -> None:
        # A proxy in front must pass each event on as it comes (nginx buffers unless told not to).
        super().__init__(
            (), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )
        self.events = events

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import anyio
        from starlette.concurrency import run_in_threadpool

        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})

        async def pump() -> None:
            end = object()
            try:
                try:
                    while (chunk := await run_in_threadpool(next, self.events, end)) is not end:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except OSError:  # the client is gone (uvicorn's ClientDisconnected)
                    return
                except Exception as exc:  # noqa: BLE001 - the status is sent: the error goes in the stream
                    await send({"type": "http.response.body", "body": _sse_error(exc), "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                tasks.cancel_scope.cancel()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(pump)
                tasks.start_soon(watch)
        finally:
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(self.events.close)


@dataclass(frozen=True, slots=True)
class RouteKit:
    """What the routes of `_install_routes` share with the route modules beside it (`collection_routes`,
    `review_routes`):
    the pipeline and stores, the role dependencies, and the helpers that keep every route to one matter."""

    dp: DocPipe
    options: ServeOptions
    matters: MatterStore
    audit: AccessLog
    results: ResultStore
    metrics: Metrics
    spool_dir: Path
    reader: Any
    writer: Any
    logged: Callable[..., contextlib.AbstractContextManager[None]]
    matter_record: Callable[[Caller, str], MatterDocument]
    open_document: Callable[[Caller, str, str | None], Document]
    check_questions: Callable[[list[str]], list[str]]


def _install_routes(app: FastAPI) -> None:
    from fastapi import APIRouter
    from fastapi.security import HTTPBearer
    from starlette.concurrency import run_in_threadpool

    from docpipe import __version__

    dp: DocPipe = app.state.dp
    options: ServeOptions = app.state.options
    results: ResultStore = app.state.results
    metrics: Metrics = app.state.metrics
    keys: KeyStore = app.state.keys
    matters: MatterStore = app.state.matters
    audit: AccessLog = app.state.audit
    housekeeper: Housekeeper = app.state.housekeeper
    spool_dir = dp.store.root / "tmp"

    bearer = HTTPBearer(
        auto_error=False,
        description=f"A per-user API key (docpipe keys create) or the server's token ({TOKEN_ENV}).",
    )

    def principal_of(credentials: HTTPAuthorizationCredentials | None):
        header = f"Bearer {credentials.credentials}" if credentials is not None else None
        try:
            return authenticate(keys, options.token, header)
        except AccessDenied as exc:
            raise _http(exc) from None

    def in_matter(request: Request, principal: Principal, requested: str | None, role: str) -> Caller:
        """Returns the caller in the requested matter; a known user refused a matter (no grant: 404, too
        low a role: 403) is written to the access log as ``denied``, with the route as the action and why."""
        try:
            return choose_matter(principal, requested, role)
        except AccessDenied as exc:
            if exc.matter is not None:  # 400s are malformed requests, not attempts on a matter
                route = request.scope.get("route")
                audit.record(
                    user=principal.user,
                    key_id=principal.key_id,
                    matter=exc.matter,
                    action=getattr(route, "name", None) or "request",
                    outcome="denied",
                    detail=exc.message,
                )
            raise _http(exc) from None

    def caller(role: str):
        def dependency(
            request: Request,
            credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
            x_matter: str | None = Header(
                None, alias=MATTER_HEADER, description="The matter to act in (default: your key's only matter)."
            ),
            matter: str | None = Query(None, description=f"The matter, if not in the {MATTER_HEADER} header."),
        ) -> Caller:
            return in_matter(request, principal_of(credentials), x_matter or matter, role)

        return dependency

    reader, writer = Depends(caller("read")), Depends(caller("write"))
    api = APIRouter(prefix="/v1", tags=["documents"], responses=_ERRORS)
    public = APIRouter(prefix="/v1", tags=["service"])

    @contextlib.contextmanager
    def logged(
        who: Caller,
        action: str,
        document: str | None = None,
        questions: list[str] | None = None,
        detail: str = "",
    ) -> Iterator[None]:
        """Runs the action's body, then appends its access-log line with the outcome (an error's type)."""
        outcome = "ok"
        try:
            yield
        except BaseException as exc:
            outcome = type(exc).__name__
            raise
        finally:
            audit.record(
                user=who.user,
                key_id=who.key_id,
                matter=who.matter,
                action=action,
                document=document,
                question=questions,
                outcome=outcome,
                detail=detail,
            )

    def matter_record(who: Caller, doc_id: str) -> MatterDocument:
        record = matters.get(who.matter, doc_id) if _DOC_ID.match(doc_id) else None
        if record is None:
            raise _HTTPException(
                404,
                detail=f"no document with id {doc_id[:80]!r} in matter {who.matter!r}: upload the PDF first "
                "(POST /v1/documents returns its id, the SHA-256 of the file)",
            )
        return record

    def open_document(who: Caller, doc_id: str, password: str | None) -> Document:
        """Returns the matter's view of the document; an encrypted one needs its password or a key that
        proved it (a grant)."""
        record = matter_record(who, doc_id)
        authorized = not record.encrypted or (_is_key(who) and who.key_id in record.granted)
        if not authorized and not password:
            raise PasswordRequiredError(f"{record.name} is encrypted", path=record.name)
        doc = dp.document(doc_id, password=password, authorized=authorized, name=record.name, matter=who.matter)
        if doc is None:
            raise _HTTPException(404, detail=f"document {doc_id[:12]} is no longer stored: upload the PDF again")
        return doc

    def check_questions(questions: list[str]) -> list[str]:
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

    # -- matters ---------------------------------------------------------------------------------------
    @api.get("/matters", response_model=MattersOut, summary="Your matters")
    def list_matters(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> dict[str, Any]:
        """Returns the matters your key may use, with your role and their document counts."""
        principal = principal_of(credentials)
        names = set(principal.matters()) | (set(matters.matters()) if principal.everywhere else set())
        return {
            "user": principal.user,
            "matters": [
                {"name": m, "role": principal.role(m), "documents": len(matters.documents(m))} for m in sorted(names)
            ],
        }

    @api.delete("/matters/{matter_name}", response_model=Deleted, summary="Delete a matter")
    def delete_matter(
        matter_name: str, request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> dict:
        """Deletes everything of the matter: its documents (and their PDF, text, indexes and cached answers
        when no other matter holds the same file), answers and reports. Needs the admin role."""
        who = in_matter(request, principal_of(credentials), matter_name, "admin")
        with logged(who, "delete_matter"):
            removed = housekeeper.delete_matter(who.matter)
        return {
            "matter": who.matter,
            "deleted": who.matter,
            "documents": removed.documents,
            "answers_and_reports": removed.results,
            "purged": removed.purged,
            "review_jobs": removed.review_jobs,
        }

    # -- documents -------------------------------------------------------------------------------------
    @api.post(
        "/documents",
        response_model=DocumentInfo,
        summary="Upload a PDF",
        openapi_extra=_UPLOAD_BODY,
        description="Ingests the PDF into the matter (extract, section, index; cached by content) and returns "
        "its id. The file name is used for display only; the PDF is stored under its SHA-256.",
    )
    async def upload(
        request: Request,
        name: str | None = Query(None, description="Display name for a raw-body upload, e.g. contract.pdf."),
        x_document_password: str | None = Header(None, description="The PDF's password, if it is encrypted."),
        who: Caller = writer,
    ) -> dict[str, Any]:
        content_type = request.headers.get("content-type", "")
        password = x_document_password
        # Spooled to a private file as it arrives: waiting uploads hold disk, not memory.
        make_private_dir(spool_dir)
        fd, spool = tempfile.mkstemp(dir=spool_dir, prefix="upload-", suffix=".pdf")
        hashed = hashlib.sha256()  # the document id, for the access log even when ingesting fails
        try:
            with os.fdopen(fd, "wb") as out:
                if content_type.startswith("multipart/form-data"):
                    async with request.form(max_files=1, max_fields=8) as form:
                        upload_file = form.get("file")
                        if upload_file is None or isinstance(upload_file, str):
                            raise InputError('the multipart upload has no file: send the PDF in the field "file"')
                        while chunk := await upload_file.read(1 << 20):
                            out.write(chunk)
                            hashed.update(chunk)
                        label = name or upload_file.filename
                        field = form.get("password")
                        if isinstance(field, str) and field:
                            password = field
                else:
                    async for chunk in request.stream():
                        out.write(chunk)
                        hashed.update(chunk)
                    label = name
                size = out.tell()
            if not size:
                raise EmptyFileError('the upload is empty (0 bytes): send the PDF as the body or the field "file"')
            digest = hashed.hexdigest()
            with logged(who, "upload", digest):
                # A user's uploads take at most all but one extraction slot: slow ones cannot lock others out.
                owner = who.user if _is_key(who) else None
                display = clean_upload_name(label)

                def ingest() -> tuple[Document, MatterDocument]:
                    with housekeeper.upload(digest):  # a failed upload leaves nothing in the store
                        doc = dp.ingest(spool, password=password or None, name=display, owner=owner)
                        record = matters.add(
                            who.matter,
                            doc.id,
                            name=display,
                            user=who.user,
                            key_id=who.key_id,
                            encrypted=doc.encrypted,
                            grant=_is_key(who),
                        )
                    return doc, record

                doc, record = await run_in_threadpool(ingest)
        finally:
            os.unlink(spool)
        metrics.documents.inc()
        return document_summary(doc, name=record.name)

    @api.get("/documents", response_model=DocumentList, summary="The matter's documents")
    def list_documents(who: Caller = reader) -> dict[str, Any]:
        """Returns the documents of the matter: id, the name it was uploaded under here, when and by whom."""
        with logged(who, "list_documents"):
            docs = matters.documents(who.matter)
        return {
            "matter": who.matter,
            "documents": [
                {"id": d.id, "name": d.name, "added": d.added, "added_by": d.added_by, "encrypted": d.encrypted}
                for d in docs
            ],
        }

    @api.get("/documents/{doc_id}", response_model=DocumentInfo, summary="One document")
    def get_document(doc_id: str, who: Caller = reader) -> dict[str, Any]:
        """Returns the document's pages, sections and warnings (no contract text)."""
        record = matter_record(who, doc_id)
        with logged(who, "read_document", doc_id):
            doc = dp.document(doc_id, authorized=True, name=record.name, matter=who.matter)
            if doc is None:
                raise _HTTPException(404, detail=f"document {doc_id[:12]} is no longer stored: upload the PDF again")
        return document_summary(doc, name=record.name)

    @api.delete("/documents/{doc_id}", response_model=Deleted, summary="Delete a document")
    def delete_document(doc_id: str, who: Caller = writer) -> dict[str, Any]:
        """Removes the document from the matter with its answers and reports; when no other matter holds the
        same file, its PDF, extracted text, indexes and cached answers leave the store too."""
        matter_record(who, doc_id)
        with logged(who, "delete_document", doc_id):
            removed = housekeeper.remove(who.matter, doc_id)
        return {
            "matter": who.matter,
            "deleted": doc_id,
            "documents": removed.documents,
            "answers_and_reports": removed.results,
            "purged": removed.purged,
            "review_jobs": removed.review_jobs,
        }

    def store_answer(who: Caller, doc_id: str, answer: Answer) -> dict[str, Any]:
        record = {**answer.to_dict(), "id": uuid.uuid4().hex}
        results.save("answers", record["id"], record, matter=who.matter, document_id=doc_id)
        return record

    def ask_sync(who: Caller, doc_id: str, body: DocumentAskRequest) -> dict[str, Any]:
        questions = check_questions(body.all_questions())
        with logged(who, "ask", doc_id, questions):
            doc = open_document(who, doc_id, body.password)
            answers = dp.ask_many(doc, questions, k=body.k, mode=body.mode, use_cache=body.use_cache)
            out = [store_answer(who, doc_id, answer) for answer in answers]
        return {"document_id": doc_id, "answers": out}

    def ask_events(who: Caller, doc_id: str, body: DocumentAskRequest) -> Generator[bytes, None, None]:
        """Yields the streamed ask as server-sent events. The first step checks and opens the document and
        yields nothing (its errors are HTTP errors); the access log line is written when the stream ends,
        however it ends (``GeneratorExit``: the client left)."""
        questions = check_questions(body.all_questions())
        if len(questions) > 1:
            raise ConfigError(
                f'"stream": true answers one question, not {len(questions)}: send "question" (or a one-item '
                '"questions"), or the questions without "stream" to have them answered as one batch'
            )
        with logged(who, "ask", doc_id, questions):
            doc = open_document(who, doc_id, body.password)
            yield b""
            events = dp.ask_stream(doc, questions[0], k=body.k, mode=body.mode, use_cache=body.use_cache)
            try:
                for event in events:
                    if event.kind == "done" and event.answer is not None:
                        yield _sse("done", store_answer(who, doc_id, event.answer))
                    elif event.text:
                        yield _sse(event.kind, {"text": event.text})
            finally:
                events.close()  # type: ignore[attr-defined]  # a generator: closing it cancels the engine's request

    @api.post(
        "/documents/{doc_id}/ask",
        response_model=AskResponse,
        summary="Ask questions",
        responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}},
    )
    async def ask(doc_id: str, body: DocumentAskRequest, who: Caller = reader) -> Any:
        """Returns one answer per question, in order, with checked citations; each answer is stored by its id.
        With ``"stream": true`` (one question), the answer comes as server-sent events (see the body's
        ``stream``)."""
        if not body.stream:
            return await run_in_threadpool(ask_sync, who, doc_id, body)
        events = ask_events(who, doc_id, body)
        await run_in_threadpool(next, events)  # checks, opens the document: errors are answered as usual
        return _EventStream(events)

    def analyze_sync(who: Caller, doc_id: str, body: AnalyzeRequest) -> dict[str, Any]:
        with logged(who, "analyze", doc_id, list(body.categories or [])):
            doc = open_document(who, doc_id, body.password)
            report = dp.analyze(doc, body.categories, mode=body.mode, use_cache=body.use_cache)
            record = report.to_dict()
            results.save("reports", str(record["id"]), record, matter=who.matter, document_id=doc_id)
        return record

    @api.post("/documents/{doc_id}/analyze", response_model=ReportOut, summary="Analyse a contract")
    async def analyze(doc_id: str, body: AnalyzeRequest, who: Caller = reader) -> dict[str, Any]:
        """Returns the clause checklist report (all categories, or those named); stored by its id.
        Runs behind interactive questions in the engine's queue."""
        async with app.state.analyses:
            return await run_in_threadpool(analyze_sync, who, doc_id, body)

    def stored(kind: str, key: str, who: Caller, password: str | None) -> dict[str, Any]:
        record = results.load(kind, key, matter=who.matter)
        if record is None:
            what = kind[:-1]
            raise _HTTPException(
                404,
                detail=f"no {what} with id {key[:80]!r} in matter {who.matter!r}: use an id an "
                f"{'ask' if what == 'answer' else 'analyze'} returned",
            )
        # An answer over a collection quotes several documents: each must still be in the matter.
        quoted = [str(record.get("document_id") or "")] if record.get("document_id") else []
        quoted += [str(d) for d in record.get("document_ids") or [] if d and d not in quoted]
        with logged(who, f"read_{kind[:-1]}", quoted[0] if len(quoted) == 1 else None):
            # The answer quotes the contract: an encrypted PDF's answers need what its text needs.
            for doc_id in quoted or [""]:
                open_document(who, doc_id, password)
        return record

    @api.get("/answers/{answer_id}", response_model=AnswerOut, summary="A stored answer")
    def get_answer(
        answer_id: str,
        x_document_password: str | None = Header(None, description="The PDF's password, if it is encrypted."),
        who: Caller = reader,
    ) -> dict[str, Any]:
        return stored("answers", answer_id, who, x_document_password)

    @api.get("/reports/{report_id}", response_model=ReportOut, summary="A stored report")
    def get_report(
        report_id: str,
        x_document_password: str | None = Header(None, description="The PDF's password, if it is encrypted."),
        who: Caller = reader,
    ) -> dict[str, Any]:
        return stored("reports", report_id, who, x_document_password)

    @public.get("/health", response_model=Health, summary="Liveness")
    def health() -> dict[str, Any]:
        """Returns ok while the server runs (no token needed; says nothing about documents)."""
        from docpipe.engine import resolve_backend

        engine = dp.settings.engine
        backend = resolve_backend(engine)  # "auto" as it resolves here: no model is named that does not answer
        return {
            "status": "ok",
            "version": __version__,
            "engine": backend,
            "model": engine.model if backend in ("vllm", "openai") else None,
            "uptime_s": round(time.time() - app.state.started, 3),
        }

    from docpipe.server.collection_routes import install_collection_routes
    from docpipe.server.openai_routes import install_openai_routes
    from docpipe.server.review_routes import install_review_routes

    kit = RouteKit(
        dp=dp,
        options=options,
        matters=matters,
        audit=audit,
        results=results,
        metrics=metrics,
        spool_dir=spool_dir,
        reader=reader,
        writer=writer,
        logged=logged,
        matter_record=matter_record,
        open_document=open_document,
        check_questions=check_questions,
    )
    install_collection_routes(app, kit)
    install_openai_routes(app, kit)
    app.state.jobs = install_review_routes(app, kit)
    app.include_router(api)
    app.include_router(public)
