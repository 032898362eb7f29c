"""The document endpoints of a matter: upload, list, read, delete, ask (also streamed), analyze, and the
stored answers and reports::

    POST   /v1/documents                    upload a PDF (raw body or multipart field "file") (write)
    GET    /v1/documents[/{id}]             the matter's documents, or one
    DELETE /v1/documents/{id}               the document, its answers and reports (write)
    POST   /v1/documents/{id}/ask           {"question": ...} or {"questions": [...]} -> answers, each with an id
    POST   /v1/documents/{id}/analyze       {"categories": [...]} -> a contract report, with its id
    GET    /v1/answers/{id}, /v1/reports/{id}   a stored answer or report of the matter

Every route sees only the caller's matter, and every action on contract content is written to the access log.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import uuid
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Header, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from docpipe.errors import ConfigError, EmptyFileError, InputError
from docpipe.names import clean_upload_name
from docpipe.server.access import Caller
from docpipe.server.deps import (
    AnalysisSlotsDep,
    AuditDep,
    DocPipeDep,
    HousekeeperDep,
    MattersDep,
    MetricsDep,
    OptionsDep,
    Reader,
    ResultsDep,
    Writer,
    check_questions,
    document_gone,
    is_key,
    logged,
    matter_record,
    open_document,
)
from docpipe.server.models import (
    ERROR_RESPONSES,
    UPLOAD_BODY,
    AnalyzeRequest,
    AnswerOut,
    AskResponse,
    Deleted,
    DocumentAskRequest,
    DocumentInfo,
    DocumentList,
    ReportOut,
)
from docpipe.server.sse import EventStream, sse
from docpipe.storage.store import make_private_dir
from docpipe.summary import document_summary

if TYPE_CHECKING:
    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterDocument, MatterStore
    from docpipe.pipeline import DocPipe
    from docpipe.server.options import ServeOptions
    from docpipe.server.storage import ResultStore
    from docpipe.types import Answer, Document

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["documents"], responses=ERROR_RESPONSES)

_PASSWORD_HEADER = "The PDF's password, if it is encrypted."


# -- upload -------------------------------------------------------------------------------------------------
@router.post(
    "/documents",
    response_model=DocumentInfo,
    summary="Upload a PDF",
    openapi_extra=UPLOAD_BODY,
    description="Ingests the PDF into the matter (extract, section, index; cached by content) and returns "
    "its id. The file name is used for display only; the PDF is stored under its SHA-256.",
)
async def upload(
    request: Request,
    who: Writer,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    housekeeper: HousekeeperDep,
    metrics: MetricsDep,
    name: str | None = Query(None, description="Display name for a raw-body upload, e.g. contract.pdf."),
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> dict[str, Any]:
    # Spooled to a private file as it arrives: waiting uploads hold disk, not memory.
    spool_dir = dp.store.root / "tmp"
    make_private_dir(spool_dir)
    fd, spool = tempfile.mkstemp(dir=spool_dir, prefix="upload-", suffix=".pdf")
    try:
        with os.fdopen(fd, "wb") as out:
            label, password, digest = await _receive(request, out, name, x_document_password)
        with logged(audit, who, "upload", digest):
            # A user's uploads take at most all but one extraction slot: slow ones cannot lock others out.
            owner = who.user if is_key(who) else None
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
                        grant=is_key(who),
                    )
                return doc, record

            doc, record = await run_in_threadpool(ingest)
    finally:
        os.unlink(spool)
    metrics.documents.inc()
    return document_summary(doc, name=record.name)


async def _receive(
    request: Request, out: Any, name: str | None, password: str | None
) -> tuple[str | None, str | None, str]:
    """Writes the upload's bytes to `out` and returns its label, its password (the header's, or the multipart
    field's) and its SHA-256 (the document id, for the access log even when ingesting fails)."""
    hashed = hashlib.sha256()
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
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
    if not out.tell():
        raise EmptyFileError('the upload is empty (0 bytes): send the PDF as the body or the field "file"')
    return label, password, hashed.hexdigest()


# -- the matter's documents ---------------------------------------------------------------------------------
@router.get("/documents", response_model=DocumentList, summary="The matter's documents")
def list_documents(who: Reader, matters: MattersDep, audit: AuditDep) -> dict[str, Any]:
    """Returns the documents of the matter: id, the name it was uploaded under here, when and by whom."""
    with logged(audit, who, "list_documents"):
        docs = matters.documents(who.matter)
    return {
        "matter": who.matter,
        "documents": [
            {"id": d.id, "name": d.name, "added": d.added, "added_by": d.added_by, "encrypted": d.encrypted}
            for d in docs
        ],
    }


@router.get("/documents/{doc_id}", response_model=DocumentInfo, summary="One document")
def get_document(doc_id: str, who: Reader, dp: DocPipeDep, matters: MattersDep, audit: AuditDep) -> dict[str, Any]:
    """Returns the document's pages, sections and warnings (no contract text)."""
    record = matter_record(matters, who, doc_id)
    with logged(audit, who, "read_document", doc_id):
        doc = dp.document(doc_id, authorized=True, name=record.name, matter=who.matter)
        if doc is None:
            raise document_gone(doc_id)
    return document_summary(doc, name=record.name)


@router.delete("/documents/{doc_id}", response_model=Deleted, summary="Delete a document")
def delete_document(
    doc_id: str, who: Writer, matters: MattersDep, audit: AuditDep, housekeeper: HousekeeperDep
) -> dict[str, Any]:
    """Removes the document from the matter with its answers and reports; when no other matter holds the
    same file, its PDF, extracted text, indexes and cached answers leave the store too."""
    matter_record(matters, who, doc_id)
    with logged(audit, who, "delete_document", doc_id):
        removed = housekeeper.remove(who.matter, doc_id)
    return {
        "matter": who.matter,
        "deleted": doc_id,
        "documents": removed.documents,
        "answers_and_reports": removed.results,
        "purged": removed.purged,
        "review_jobs": removed.review_jobs,
    }


# -- ask and analyze ----------------------------------------------------------------------------------------
class _Asking:
    """What an ask of one document needs, bound to its request: the pipeline, the stores and the caller."""

    def __init__(
        self,
        dp: DocPipe,
        matters: MatterStore,
        audit: AccessLog,
        results: ResultStore,
        options: ServeOptions,
        who: Caller,
        doc_id: str,
    ) -> None:
        self.dp, self.matters, self.audit, self.results = dp, matters, audit, results
        self.options, self.who, self.doc_id = options, who, doc_id

    def store(self, answer: Answer) -> dict[str, Any]:
        record = {**answer.to_dict(), "id": uuid.uuid4().hex}
        self.results.save("answers", record["id"], record, matter=self.who.matter, document_id=self.doc_id)
        return record

    def answers(self, body: DocumentAskRequest) -> dict[str, Any]:
        questions = check_questions(self.options, body.all_questions())
        with logged(self.audit, self.who, "ask", self.doc_id, questions):
            doc = open_document(self.dp, self.matters, self.who, self.doc_id, body.password)
            answers = self.dp.ask_many(doc, questions, k=body.k, mode=body.mode, use_cache=body.use_cache)
            out = [self.store(answer) for answer in answers]
        return {"document_id": self.doc_id, "answers": out}

    def events(self, body: DocumentAskRequest) -> Generator[bytes, None, None]:
        """Yields the streamed ask as server-sent events. The first step checks and opens the document and
        yields nothing (its errors are HTTP errors); the access log line is written when the stream ends,
        however it ends (``GeneratorExit``: the client left)."""
        questions = check_questions(self.options, body.all_questions())
        if len(questions) > 1:
            raise ConfigError(
                f'"stream": true answers one question, not {len(questions)}: send "question" (or a one-item '
                '"questions"), or the questions without "stream" to have them answered as one batch'
            )
        with logged(self.audit, self.who, "ask", self.doc_id, questions):
            doc = open_document(self.dp, self.matters, self.who, self.doc_id, body.password)
            yield b""
            events = self.dp.ask_stream(doc, questions[0], k=body.k, mode=body.mode, use_cache=body.use_cache)
            try:
                for event in events:
                    if event.kind == "done" and event.answer is not None:
                        yield sse("done", self.store(event.answer))
                    elif event.text:
                        yield sse(event.kind, {"text": event.text})
            finally:
                events.close()  # type: ignore[attr-defined]  # a generator: closing it cancels the engine's request


@router.post(
    "/documents/{doc_id}/ask",
    response_model=AskResponse,
    summary="Ask questions",
    responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}},
)
async def ask(
    doc_id: str,
    body: DocumentAskRequest,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    results: ResultsDep,
    options: OptionsDep,
) -> Any:
    """Returns one answer per question, in order, with checked citations; each answer is stored by its id.
    With ``"stream": true`` (one question), the answer comes as server-sent events (see the body's
    ``stream``)."""
    asking = _Asking(dp, matters, audit, results, options, who, doc_id)
    if not body.stream:
        return await run_in_threadpool(asking.answers, body)
    events = asking.events(body)
    await run_in_threadpool(next, events)  # checks, opens the document: errors are answered as usual
    return EventStream(events)


@router.post("/documents/{doc_id}/analyze", response_model=ReportOut, summary="Analyse a contract")
async def analyze(
    doc_id: str,
    body: AnalyzeRequest,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    results: ResultsDep,
    slots: AnalysisSlotsDep,
) -> dict[str, Any]:
    """Returns the clause checklist report (all categories, or those named); stored by its id.
    Runs behind interactive questions in the engine's queue."""

    def analyze_sync() -> dict[str, Any]:
        with logged(audit, who, "analyze", doc_id, list(body.categories or [])):
            doc = open_document(dp, matters, who, doc_id, body.password)
            report = dp.analyze(doc, body.categories, mode=body.mode, use_cache=body.use_cache)
            record = report.to_dict()
            results.save("reports", str(record["id"]), record, matter=who.matter, document_id=doc_id)
        return record

    async with slots:
        return await run_in_threadpool(analyze_sync)


# -- stored answers and reports -----------------------------------------------------------------------------
def _stored(
    kind: str,
    key: str,
    who: Caller,
    password: str | None,
    *,
    dp: DocPipe,
    matters: MatterStore,
    results: ResultStore,
    audit: AccessLog,
) -> dict[str, Any]:
    record = results.load(kind, key, matter=who.matter)
    if record is None:
        what = kind[:-1]
        raise HTTPException(
            404,
            detail=f"no {what} with id {key[:80]!r} in matter {who.matter!r}: use an id an "
            f"{'ask' if what == 'answer' else 'analyze'} returned",
        )
    # An answer over a collection quotes several documents: each must still be in the matter.
    quoted = [str(record.get("document_id") or "")] if record.get("document_id") else []
    quoted += [str(d) for d in record.get("document_ids") or [] if d and d not in quoted]
    with logged(audit, who, f"read_{kind[:-1]}", quoted[0] if len(quoted) == 1 else None):
        # The answer quotes the contract: an encrypted PDF's answers need what its text needs.
        for doc_id in quoted or [""]:
            open_document(dp, matters, who, doc_id, password)
    return record


@router.get("/answers/{answer_id}", response_model=AnswerOut, summary="A stored answer")
def get_answer(
    answer_id: str,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    results: ResultsDep,
    audit: AuditDep,
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> dict[str, Any]:
    return _stored("answers", answer_id, who, x_document_password, dp=dp, matters=matters, results=results, audit=audit)


@router.get("/reports/{report_id}", response_model=ReportOut, summary="A stored report")
def get_report(
    report_id: str,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    results: ResultsDep,
    audit: AuditDep,
    x_document_password: str | None = Header(None, description=_PASSWORD_HEADER),
) -> dict[str, Any]:
    return _stored("reports", report_id, who, x_document_password, dp=dp, matters=matters, results=results, audit=audit)
