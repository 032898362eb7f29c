"""The ``/v1`` endpoints (upload, ask, analyze, stored answers and reports, health) and ``/metrics``."""

from __future__ import annotations

import re
import time
import unicodedata
import uuid
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

from docpipe.errors import ConfigError, EmptyFileError, InputError
from docpipe.server.models import (
    _ERRORS,
    _UPLOAD_BODY,
    AnalyzeRequest,
    AnswerOut,
    AskRequest,
    AskResponse,
    DocumentInfo,
    Health,
    ReportOut,
)
from docpipe.server.options import TOKEN_ENV, ServeOptions, check_token

try:  # the serve extra; create_app says how to install it when missing
    # At module level: FastAPI reads the endpoints' (string) annotations in this module's namespace.
    from fastapi import Depends, Header, Query, Request
    from fastapi.responses import Response
    from fastapi.security import HTTPAuthorizationCredentials
    from starlette.exceptions import HTTPException as _HTTPException
except ImportError:  # pragma: no cover
    _HTTPException = Exception  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from fastapi import FastAPI

    from docpipe.metrics import Metrics
    from docpipe.pipeline import DocPipe
    from docpipe.server.storage import ResultStore

_DOC_ID = re.compile(r"^[0-9a-f]{64}$")
_NAME_UNSAFE = re.compile(r'[<>"`]')


def _safe_name(raw: str | None) -> str:
    """Returns a display name for an upload: the base name only, no control or markup characters, <= 120 chars.

    >>> _safe_name("../../etc/passwd.pdf"), _safe_name("C:\\\\Users\\\\x\\\\deal.pdf"), _safe_name('a"><b.pdf')
    ('passwd.pdf', 'deal.pdf', 'ab.pdf')
    """
    name = PureWindowsPath(PurePosixPath(str(raw or "")).name).name
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _NAME_UNSAFE.sub("", name).strip().lstrip(".")
    return (name or "document.pdf")[:120]


def _doc_info(doc: Any) -> dict[str, Any]:
    return {
        "id": doc.id,
        "name": doc.name,
        "pages": len(doc.pages),
        "sections": len(doc.sections),
        "extractor": doc.extractor,
        "encrypted": bool(doc.password_check),
        "warnings": [
            {"page": page.number, "status": page.status.value, "message": page.describe()}
            for page in doc.pages
            if not page.ok
        ],
    }


def _install_routes(app: FastAPI) -> None:
    from fastapi import APIRouter
    from fastapi.security import HTTPBearer
    from starlette.concurrency import run_in_threadpool

    from docpipe import __version__

    dp: DocPipe = app.state.dp
    options: ServeOptions = app.state.options
    results: ResultStore = app.state.results
    metrics: Metrics = app.state.metrics

    bearer = HTTPBearer(auto_error=False, description=f"The server's token (--token or {TOKEN_ENV}).")

    def require_token(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        given = f"Bearer {credentials.credentials}" if credentials is not None else None
        if not check_token(options.token, given):
            message = (
                "missing bearer token: send the header Authorization: Bearer <token> (the server's --token)"
                if credentials is None
                else "wrong bearer token: check the token the server was started with"
            )
            raise _HTTPException(401, detail=message, headers={"WWW-Authenticate": "Bearer"})

    api = APIRouter(
        prefix="/v1",
        tags=["documents"],
        dependencies=[Depends(require_token)] if options.token is not None else [],
        responses=_ERRORS,
    )
    public = APIRouter(prefix="/v1", tags=["service"])

    def load_source(doc_id: str) -> bytes:
        source = dp.store.load_source(doc_id) if _DOC_ID.match(doc_id) else None
        if source is None:
            raise _HTTPException(
                404,
                detail=f"no document with id {doc_id[:80]!r} on this server: upload the PDF first "
                "(POST /v1/documents returns its id, the SHA-256 of the file)",
            )
        return source

    def check_questions(questions: list[str]) -> list[str]:
        if not questions:
            raise ConfigError('no question given: send "question" or a non-empty "questions" list')
        if len(questions) > options.max_questions:
            raise ConfigError(
                f"{len(questions)} questions in one request; this server takes at most {options.max_questions}: "
                "split them over several requests"
            )
        for number, question in enumerate(questions, 1):
            if not question or not question.strip():
                raise ConfigError(f"question {number} is empty: ask something about the document")
            if len(question) > options.max_question_chars:
                raise ConfigError(
                    f"question {number} is {len(question)} characters long; keep it under "
                    f"{options.max_question_chars}"
                )
        return questions

    @api.post(
        "/documents",
        response_model=DocumentInfo,
        summary="Upload a PDF",
        openapi_extra=_UPLOAD_BODY,
        description="Ingests the PDF (extract, section, index; cached by content) and returns its id. "
        "The file name is used for display only; the PDF is stored under its SHA-256.",
    )
    async def upload(
        request: Request,
        name: str | None = Query(None, description="Display name for a raw-body upload, e.g. contract.pdf."),
        x_document_password: str | None = Header(None, description="The PDF's password, if it is encrypted."),
    ) -> dict[str, Any]:
        content_type = request.headers.get("content-type", "")
        password = x_document_password
        if content_type.startswith("multipart/form-data"):
            async with request.form(max_files=1, max_fields=8) as form:
                upload_file = form.get("file")
                if upload_file is None or isinstance(upload_file, str):
                    raise InputError('the multipart upload has no file: send the PDF in the field "file"')
                data = await upload_file.read()
                label = name or upload_file.filename
                field = form.get("password")
                if isinstance(field, str) and field:
                    password = field
        else:
            data = await request.body()
            label = name
        if not data:
            raise EmptyFileError("the upload is empty (0 bytes): send the PDF as the body or the field \"file\"")
        async with app.state.ingests:  # extraction runs a worker process per document: a few at a time
            doc = await run_in_threadpool(dp.ingest, data, password=password or None, name=_safe_name(label))
        metrics.documents.inc()
        return _doc_info(doc)

    def ask_sync(doc_id: str, body: AskRequest) -> dict[str, Any]:
        questions = check_questions(body.all_questions())
        source = load_source(doc_id)
        answers = dp.ask_many(
            source, questions, k=body.k, mode=body.mode, password=body.password, use_cache=body.use_cache
        )
        out = []
        for answer in answers:
            record = {**answer.to_dict(), "id": uuid.uuid4().hex}
            results.save("answers", record["id"], record)
            out.append(record)
        return {"document_id": doc_id, "answers": out}

    @api.post("/documents/{doc_id}/ask", response_model=AskResponse, summary="Ask questions")
    async def ask(doc_id: str, body: AskRequest) -> dict[str, Any]:
        """Returns one answer per question, in order, with checked citations; each answer is stored by its id."""
        return await run_in_threadpool(ask_sync, doc_id, body)

    def analyze_sync(doc_id: str, body: AnalyzeRequest) -> dict[str, Any]:
        source = load_source(doc_id)
        report = dp.analyze(
            source, body.categories, mode=body.mode, password=body.password, use_cache=body.use_cache
        )
        record = report.to_dict()
        results.save("reports", str(record["id"]), record)
        return record

    @api.post("/documents/{doc_id}/analyze", response_model=ReportOut, summary="Analyse a contract")
    async def analyze(doc_id: str, body: AnalyzeRequest) -> dict[str, Any]:
        """Returns the clause checklist report (all categories, or those named); stored by its id.
        Runs behind interactive questions in the engine's queue."""
        if not callable(getattr(dp, "analyze", None)):
            raise _HTTPException(501, detail="contract analysis is not available in this docpipe version")
        async with app.state.analyses:
            return await run_in_threadpool(analyze_sync, doc_id, body)

    @api.get("/answers/{answer_id}", response_model=AnswerOut, summary="A stored answer")
    def get_answer(answer_id: str) -> dict[str, Any]:
        record = results.load("answers", answer_id)
        if record is None:
            raise _HTTPException(404, detail=f"no answer with id {answer_id[:80]!r}: use an id an ask returned")
        return record

    @api.get("/reports/{report_id}", response_model=ReportOut, summary="A stored report")
    def get_report(report_id: str) -> dict[str, Any]:
        record = results.load("reports", report_id)
        if record is None:
            raise _HTTPException(404, detail=f"no report with id {report_id[:80]!r}: use an id an analyze returned")
        return record

    @public.get("/health", response_model=Health, summary="Liveness")
    def health() -> dict[str, Any]:
        """Returns ok while the server runs (no token needed; says nothing about documents)."""
        engine = dp.settings.engine
        return {
            "status": "ok",
            "version": __version__,
            "engine": engine.backend,
            "model": engine.model if engine.backend not in ("echo", "extractive") else None,
            "uptime_s": round(time.time() - app.state.started, 3),
        }

    @app.get("/metrics", tags=["service"], summary="Prometheus metrics", response_class=Response,
             responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
    def prometheus() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    app.include_router(api)
    app.include_router(public)
