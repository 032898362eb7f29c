"""`docpipe serve`: one uvicorn process with the REST API under ``/v1``, Prometheus metrics at ``/metrics``
and the Gradio workbench at ``/ui``, all over the same `DocPipe` (so the UI's and the API's questions share
engine batches and caches).

Routes (JSON in and out; the OpenAPI description is at ``/openapi.json``, browsable at ``/docs``)::

    POST /v1/documents                 upload a PDF (raw body or multipart field "file") -> id, pages, sections
    POST /v1/documents/{id}/ask        {"question": ...} or {"questions": [...]} -> answers, each with an id
    POST /v1/documents/{id}/analyze    {"categories": [...]} -> a contract report, with its id
    GET  /v1/answers/{answer_id}       a stored answer
    GET  /v1/reports/{report_id}       a stored report
    GET  /v1/health                    liveness (no token needed)
    GET  /metrics                      Prometheus text format (no token needed)

Safety: binds 127.0.0.1 unless told otherwise; with a token (``--token`` or ``DOCPIPE_SERVE_TOKEN``) every
``/v1`` route but ``/v1/health`` needs ``Authorization: Bearer <token>``; bodies over the limit get 413
before they are read (``Content-Length``) or as soon as they pass it (chunked); an upload's file name is
only a display name (base name, no control or markup characters): the PDF is stored under its SHA-256.
Answers and reports are JSON files under ``<store>/serve/``, written atomically, named by a hash of their
id, so they survive a restart and no id can become a path.

Errors are ``{"error": {"type": ..., "message": ...}}``; the message says what to fix.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import secrets
import time
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from docpipe.errors import (
    ConfigError,
    DependencyError,
    DocpipeError,
    EmptyFileError,
    EngineError,
    EngineUnavailableError,
    ExtractionError,
    ExtractionTimeoutError,
    FileMissingError,
    InputError,
    MalformedPDFError,
    NoTextError,
    NotAPDFError,
    PasswordRequiredError,
    StoreError,
    WrongPasswordError,
)
from docpipe.store import atomic_write, sha256_hex

try:  # the serve extra; create_app says how to install it when missing
    # At module level: FastAPI reads the endpoints' (string) annotations in this module's namespace.
    from fastapi import Depends, Header, Query, Request
    from fastapi.responses import RedirectResponse, Response
    from fastapi.security import HTTPAuthorizationCredentials
    from starlette.exceptions import HTTPException as _HTTPException
except ImportError:  # pragma: no cover
    _HTTPException = Exception  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from fastapi import FastAPI

    from docpipe.metrics import Metrics
    from docpipe.pipeline import DocPipe

__all__ = [
    "TOKEN_ENV",
    "UI_AUTH_ENV",
    "ServeOptions",
    "create_app",
    "error_status",
    "parse_ui_auth",
    "resolve_token",
    "serve",
]

logger = logging.getLogger(__name__)

TOKEN_ENV = "DOCPIPE_SERVE_TOKEN"
UI_AUTH_ENV = "DOCPIPE_UI_AUTH"
_DOC_ID = re.compile(r"^[0-9a-f]{64}$")
_MAX_ID_CHARS = 200
_NAME_UNSAFE = re.compile(r'[<>"`]')


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Returns nothing; holds how `docpipe serve` runs: address, token, limits, the workbench."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    max_upload_mb: float = 50.0
    max_json_kb: float = 1024.0
    max_questions: int = 64
    max_question_chars: int = 2000
    max_concurrent_ingests: int = 2
    max_concurrent_analyses: int = 2
    threads: int = 64
    ui: bool = True
    ui_path: str = "/ui"
    ui_auth: tuple[str, str] | None = None
    log_level: str = "info"

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("the token is too short: use at least 16 random characters (openssl rand -hex 24)")
        if self.max_upload_mb <= 0 or self.max_json_kb <= 0 or self.max_questions < 1 or self.threads < 1:
            raise ConfigError("--max-upload-mb, --max-json-kb and --max-questions must be positive")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be between 0 and 65535, got {self.port}")
        if not self.ui_path.startswith("/") or self.ui_path.rstrip("/") in ("", "/v1", "/metrics", "/docs"):
            raise ConfigError(f"the workbench path {self.ui_path!r} must start with / and not hide an API route")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_json_bytes(self) -> int:
        return int(self.max_json_kb * 1024)


# -- errors -----------------------------------------------------------------------------------------------
# Most specific first: the first class the error is an instance of decides.
_STATUS: list[tuple[type[DocpipeError], int, str]] = [
    (NotAPDFError, 415, "not_a_pdf"),
    (EmptyFileError, 400, "empty_file"),
    (FileMissingError, 404, "not_found"),
    (InputError, 400, "bad_input"),
    (PasswordRequiredError, 422, "password_required"),
    (WrongPasswordError, 403, "wrong_password"),
    (MalformedPDFError, 422, "malformed_pdf"),
    (NoTextError, 422, "no_text"),
    (ExtractionTimeoutError, 422, "extraction_timeout"),
    (ExtractionError, 422, "extraction_failed"),
    (EngineUnavailableError, 503, "engine_unavailable"),
    (EngineError, 502, "engine_error"),
    (DependencyError, 500, "server_misconfigured"),
    (StoreError, 500, "store_error"),
]


def error_status(exc: DocpipeError) -> tuple[int, str]:
    """Returns the HTTP status and error type for a docpipe error.

    >>> error_status(NotAPDFError("not a PDF: upload a PDF file"))
    (415, 'not_a_pdf')
    >>> error_status(ConfigError("the question is empty: ask something about the document"))
    (422, 'invalid_request')
    """
    if isinstance(exc, ConfigError):
        # The engine's settings (URL, key, model) are the operator's to fix, not the caller's.
        return (502, "engine_misconfigured") if "url" in exc.context else (422, "invalid_request")
    for cls, status, kind in _STATUS:
        if isinstance(exc, cls):
            return status, kind
    return 500, "docpipe_error"


def _http_message(exc: DocpipeError) -> str:
    """Returns the error's message, with the fix said in HTTP terms where the library's names the CLI's."""
    name = getattr(exc, "path", None) or "the document"
    if isinstance(exc, PasswordRequiredError):
        return (f"{name} is encrypted: send its password (the X-Document-Password header or the multipart field "
                '"password" on upload; "password" in the JSON body of ask and analyze)')
    if isinstance(exc, WrongPasswordError):
        return f"the password does not open {name}: check it (the user or the owner password both work)"
    if isinstance(exc, EngineUnavailableError):
        return f"the answer engine is unavailable, try again in a moment ({exc})"
    return str(exc)


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message}}


def _safe_name(raw: str | None) -> str:
    """Returns a display name for an upload: the base name only, no control or markup characters, <= 120 chars.

    >>> _safe_name("../../etc/passwd.pdf"), _safe_name("C:\\\\Users\\\\x\\\\deal.pdf"), _safe_name('a"><b.pdf')
    ('passwd.pdf', 'deal.pdf', 'ab.pdf')
    """
    name = PureWindowsPath(PurePosixPath(str(raw or "")).name).name
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _NAME_UNSAFE.sub("", name).strip().lstrip(".")
    return (name or "document.pdf")[:120]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- stored results ---------------------------------------------------------------------------------------
class ResultStore:
    """Returns and keeps answers and reports as JSON files; a file's name is the SHA-256 of the id, so a
    client's id never becomes a path."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / f"{sha256_hex(key.encode())}.json"

    def save(self, kind: str, key: str, data: dict[str, Any]) -> None:
        try:
            atomic_write(self._path(kind, key), json.dumps(data, ensure_ascii=False).encode())
        except OSError as exc:
            raise StoreError(f"cannot store the {kind[:-1]} under {self.root}: {exc}", path=str(self.root)) from exc

    def load(self, kind: str, key: str) -> dict[str, Any] | None:
        if not key or len(key) > _MAX_ID_CHARS:
            return None
        try:
            data = json.loads(self._path(kind, key).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("stored %s %s is unreadable: %s", kind[:-1], key, exc)
            return None
        return data if isinstance(data, dict) and data.get("id") == key else None


class BodyTooLarge(_HTTPException):  # type: ignore[misc,valid-type]
    """The streamed body passed the size limit. An HTTPException, so FastAPI's body parsing passes it on."""

    def __init__(self, message: str) -> None:
        super().__init__(413, detail=message)


# -- ASGI middleware ----------------------------------------------------------------------------------------
async def _send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
    })
    await send({"type": "http.response.body", "body": payload})


class _BodyLimit:
    """Refuses bodies over the limit with 413: at once when Content-Length says so (nothing is read), else
    as soon as the streamed body passes it. Uploads (`upload_path`, and everything under `ui_path`: Gradio's
    own uploads) get `upload_bytes`, everything else `json_bytes`."""

    def __init__(
        self, app: Any, *, upload_bytes: int, json_bytes: int, upload_path: str, ui_path: str | None
    ) -> None:
        self.app = app
        self.upload_bytes = upload_bytes
        self.json_bytes = json_bytes
        self.upload_path = upload_path
        self.ui_prefix = ui_path.rstrip("/") + "/" if ui_path else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        uploading = path.rstrip("/") == self.upload_path or (self.ui_prefix and path.startswith(self.ui_prefix))
        limit, flag = (self.upload_bytes, "--max-upload-mb") if uploading else (self.json_bytes, "--max-json-kb")
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_json(send, 400, _error_body("bad_request", "the Content-Length header is not a number"))
                return
            if size > limit:
                scope["docpipe.error"] = "body_too_large"
                await _send_json(send, 413, _error_body("body_too_large", _too_large(size, limit, flag)))
                return
        received = 0

        async def limited() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(_too_large(None, limit, flag))
            return message

        await self.app(scope, limited, send)


def _too_large(size: int | None, limit: int, flag: str) -> str:
    what = f"the body is {size / 1048576:.1f} MB" if size is not None else "the body is over the limit"
    return (f"{what}; this server takes at most {limit / 1048576:.2f} MB here: send less (split the document or "
            f"the questions), or start the server with a larger {flag}")


class _Observe:
    """Counts every request by method, route template (not the raw path) and status, with its latency."""

    def __init__(self, app: Any, *, metrics: Metrics, ui_path: str | None) -> None:
        self.app = app
        self.metrics = metrics
        self.ui_path = ui_path

    def _route(self, scope: dict[str, Any]) -> str:
        path = scope.get("path", "")
        if self.ui_path and (path == self.ui_path or path.startswith(self.ui_path + "/")):
            return self.ui_path  # Gradio's own routes: one label, not one per file or event
        route = scope.get("route")
        template = getattr(route, "path", None)
        return template if isinstance(template, str) else "unmatched"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        self.metrics.in_flight.inc()

        async def watch(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.metrics.in_flight.dec()
            error = scope.get("docpipe.error") or (f"http_{status}" if status >= 400 else None)
            self.metrics.observe_request(
                scope.get("method", ""), self._route(scope), status, time.perf_counter() - started, error
            )


# -- the app ------------------------------------------------------------------------------------------------
def create_app(dp: DocPipe, options: ServeOptions | None = None, *, metrics: Metrics | None = None) -> FastAPI:
    """Returns the FastAPI app: the REST API, /metrics and (with ``options.ui``) the workbench at ``/ui``.

    >>> from docpipe import DocPipe, Settings                                   # doctest: +SKIP
    >>> app = create_app(DocPipe(Settings.preset("test")), ServeOptions(ui=False))  # doctest: +SKIP
    >>> import uvicorn; uvicorn.run(app, host="127.0.0.1", port=8000)          # doctest: +SKIP
    """
    try:
        from fastapi import FastAPI
    except ImportError as exc:
        raise DependencyError("docpipe serve needs FastAPI and uvicorn: pip install 'docpipe[serve]'") from exc
    from contextlib import asynccontextmanager

    from docpipe import __version__
    from docpipe.metrics import Metrics

    options = options or ServeOptions()
    metrics = metrics or Metrics()
    results = ResultStore(dp.store.root / "serve")
    started = time.time()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        import anyio.to_thread
        from starlette.concurrency import run_in_threadpool

        # Blocking work (ingestion, questions) runs in threads; enough that concurrent askers reach the
        # batcher together.
        anyio.to_thread.current_default_thread_limiter().total_tokens = max(8, options.threads)
        metrics.attach()
        try:
            await run_in_threadpool(_warm_up, dp)
            yield
        finally:
            metrics.detach()
            await run_in_threadpool(_close_engine, dp)

    app = FastAPI(
        title="docpipe",
        version=__version__,
        summary="Ask questions of long contracts; answers cite the pages they come from.",
        description=_API_DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.dp = dp
    app.state.options = options
    app.state.metrics = metrics
    app.state.results = results
    app.state.started = started
    app.state.ingests = asyncio.Semaphore(max(1, options.max_concurrent_ingests))
    app.state.analyses = asyncio.Semaphore(max(1, options.max_concurrent_analyses))
    _install_error_handlers(app)
    _install_routes(app)
    if options.ui:
        _mount_ui(app, dp, options)
    # Added last = outermost: the observer sees the 413s the body limit sends.
    app.add_middleware(
        _BodyLimit,
        upload_bytes=options.max_upload_bytes,
        json_bytes=options.max_json_bytes,
        upload_path="/v1/documents",
        ui_path=options.ui_path if options.ui else None,
    )
    app.add_middleware(_Observe, metrics=metrics, ui_path=options.ui_path if options.ui else None)
    return app


_API_DESCRIPTION = """\
Upload a contract (PDF), ask questions about it, get answers whose quotes are checked against the pages.

* Authentication: when the server has a token, send `Authorization: Bearer <token>` on every `/v1` route
  except `/v1/health`.
* Errors: `{"error": {"type": ..., "message": ...}}`; the message says what to fix. 400 bad input,
  401 missing/wrong token, 403 wrong document password, 404 unknown id, 413 body too large, 415 not a PDF,
  422 unreadable PDF / password required / invalid request, 502 engine error, 503 engine unavailable.
* Priority: questions go to the engine ahead of bulk analysis.
"""


def _install_error_handlers(app: FastAPI) -> None:
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    def respond(request: Request, status: int, kind: str, message: str, headers: dict[str, str] | None = None):
        request.scope["docpipe.error"] = kind
        return JSONResponse(_error_body(kind, message), status_code=status, headers=headers)

    @app.exception_handler(DocpipeError)
    async def docpipe_error(request: Request, exc: DocpipeError):
        status, kind = error_status(exc)
        if status >= 500:
            logger.warning("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        headers = {"Retry-After": "10"} if status == 503 else None
        return respond(request, status, kind, _http_message(exc), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        problems = []
        for error in exc.errors()[:10]:
            where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        message = "invalid request: " + "; ".join(problems) + " (the request formats are at /docs)"
        return respond(request, 422, "invalid_request", message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        kind = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(
            exc.status_code, f"http_{exc.status_code}"
        )
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}: the API is described at /docs"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}: the API is described at /docs"
        return respond(request, exc.status_code, kind, detail, dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        # Sent by Starlette's outermost middleware; the traceback goes to the log, not to the client.
        reference = uuid.uuid4().hex[:12]
        logger.exception("unexpected error %s in %s %s", reference, request.method, request.url.path)
        return JSONResponse(
            _error_body("internal_error", f"unexpected server error (reference {reference}): see the server log"),
            status_code=500,
        )


def _mount_ui(app: FastAPI, dp: DocPipe, options: ServeOptions) -> None:
    try:
        import gradio as gr
    except ImportError as exc:
        raise DependencyError(
            f"the workbench needs Gradio: pip install 'docpipe[ui]', or serve the API alone with --no-ui ({exc})"
        ) from exc
    try:
        from ui.app import build_app, launch_kwargs
    except ImportError as exc:
        raise DependencyError(
            f"cannot load the workbench (ui.app: {exc}): is the ui package installed beside docpipe? "
            "Or serve the API alone with --no-ui"
        ) from exc
    pages = dp.settings.extraction.max_pages
    demo = build_app(dp, max_upload_mb=options.max_upload_mb, max_pages=pages)
    kwargs = launch_kwargs(max_upload_mb=options.max_upload_mb)
    gr.mount_gradio_app(
        app, demo, path=options.ui_path, server_name=options.host, server_port=options.port,
        auth=options.ui_auth, **kwargs,
    )

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(options.ui_path + "/")


def _warm_up(dp: DocPipe) -> None:
    """Loads the engine before the first request; a failure is logged and retried on first use."""
    try:
        engine = dp.engine
        logger.info("answer engine: %s", f"{engine.name} ({engine.model})" if engine else "extractive (no model)")
    except DocpipeError as exc:
        logger.warning("the answer engine is not available yet (%s); requests will try again", exc)


def _close_engine(dp: DocPipe) -> None:
    try:
        dp.close()
    except Exception:  # noqa: BLE001 - shutting down regardless
        logger.debug("closing the engine failed", exc_info=True)


# -- request and response models (the OpenAPI description is built from these) ----------------------------
Mode = Literal["auto", "think", "no_think"]


class ErrorDetail(BaseModel):
    type: str = Field(description="Stable error code, e.g. not_a_pdf, password_required, engine_unavailable.")
    message: str = Field(description="What went wrong and how to fix it.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class PageWarning(BaseModel):
    page: int = Field(description="Page number, from 1.")
    status: str = Field(description="The page's extraction status, e.g. no_text (scanned) or error.")
    message: str = Field(description="One line for a person, e.g. 'page 7: no text layer'.")


class DocumentInfo(BaseModel):
    id: str = Field(description="The document's id: the SHA-256 of the PDF's bytes.")
    name: str = Field(description="Display name (the upload's base name; never used as a path).")
    pages: int
    sections: int = Field(description="Clause-aware sections found.")
    extractor: str
    encrypted: bool = Field(description="True when asking needs the password again.")
    warnings: list[PageWarning] = Field(description="Pages that did not extract cleanly.")


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str | None = Field(None, description="One question.", examples=[
        "What is the notice period for termination for convenience?"])
    questions: list[str] | None = Field(None, description="Several questions, answered as one engine batch.")
    mode: Mode | None = Field(None, description="Thinking mode: auto (think for analysis questions), think, no_think.")
    k: int | None = Field(None, ge=1, le=64, description="Sections to retrieve per question (default 4).")
    password: str | None = Field(None, description="The PDF's password, for encrypted documents.")
    use_cache: bool = Field(True, description="Read and write the answer cache.")

    @model_validator(mode="after")
    def _one_form(self) -> AskRequest:
        if (self.question is None) == (self.questions is None):
            raise ValueError('send either "question" (a string) or "questions" (a list of strings)')
        return self

    def all_questions(self) -> list[str]:
        return [self.question] if self.question is not None else list(self.questions or [])


class CitationOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    section_id: str
    heading: str
    page_start: int
    page_end: int
    pages: str
    quote: str = Field(description="Verbatim quote from the contract.")
    verified: bool = Field(description="True when the quote was found on the stored page text.")
    score: float = 0.0


class AnswerOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The stored answer's id: GET /v1/answers/{id} returns it again.")
    question: str
    text: str = Field(description="The answer (the model's thinking is never part of it).")
    mode: str = Field(description="generative or extractive (no language model configured).")
    citations: list[CitationOut]
    engine: str
    model: str | None = None
    document_id: str
    section_ids: list[str]
    thinking: str | None = Field(None, description="The model's reasoning, kept apart for audit.")
    thinking_enabled: bool = False
    notice: str | None = None
    created: float


class AskResponse(BaseModel):
    document_id: str
    answers: list[AnswerOut]


class AnalyzeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    categories: list[str] | None = Field(
        None, max_length=200, description="Checklist categories to analyse (default: all), e.g. Governing Law."
    )
    mode: Mode = Field("think", description="Thinking mode for the analysis (default think).")
    password: str | None = Field(None, description="The PDF's password, for encrypted documents.")
    use_cache: bool = Field(True, description="Read and write the answer cache.")


class ReportOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The report's id: GET /v1/reports/{id} returns it again.")
    document_id: str
    document_name: str
    mode: str
    findings: list[dict[str, Any]]
    manifest: dict[str, Any]
    seconds: float


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    engine: str = Field(description="The configured engine backend (auto, vllm, openai, echo, extractive).")
    model: str | None
    uptime_s: float


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "Bad input (empty file, malformed request)"),
        (401, "Missing or wrong bearer token"),
        (404, "Unknown document, answer or report"),
        (413, "Body too large"),
        (415, "Not a PDF"),
        (422, "Unreadable PDF, password required, or invalid request"),
        (503, "The answer engine is unavailable: try again"),
    )
}

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": "The PDF: the raw body (Content-Type: application/pdf), or multipart/form-data with the "
        'field "file" (and optionally "password").',
        "content": {
            "application/pdf": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "password": {"type": "string"},
                    },
                }
            },
        },
    }
}


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


# -- running ------------------------------------------------------------------------------------------------
def resolve_token(token: str | None) -> str | None:
    """Returns the bearer token from the argument or ``DOCPIPE_SERVE_TOKEN``; None when neither is set."""
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    return token or None


def serve(dp: DocPipe, options: ServeOptions) -> int:
    """Returns the exit code after serving until interrupted (Ctrl-C or SIGTERM)."""
    try:
        import uvicorn
    except ImportError as exc:
        raise DependencyError("docpipe serve needs uvicorn: pip install 'docpipe[serve]'") from exc
    if not _is_loopback(options.host):
        if options.token is None:
            logger.warning("serving on %s without a token: anyone who can reach it can upload and ask "
                           "(set --token or %s)", options.host, TOKEN_ENV)
        if options.ui and options.ui_auth is None:
            logger.warning("the workbench at %s on %s has no login: add --ui-auth user:password or --no-ui",
                           options.ui_path, options.host)
    app = create_app(dp, options)
    uvicorn.run(
        app, host=options.host, port=options.port, log_level=options.log_level,
        timeout_graceful_shutdown=10, server_header=False,
    )
    return 0


def check_token(expected: str | None, header: str | None) -> bool:
    """Returns True when no token is configured or `header` is ``Bearer <the token>`` (constant time)."""
    if expected is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), expected.encode())


def parse_ui_auth(value: str | None) -> tuple[str, str] | None:
    """Returns (user, password) from ``user:password``; None for empty; ConfigError for anything else."""
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ConfigError(f"--ui-auth / {UI_AUTH_ENV} must look like user:password")
    return user, password

