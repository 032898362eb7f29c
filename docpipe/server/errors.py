"""Errors over HTTP: a `DocpipeError` becomes a status and ``{"error": {"type": ..., "message": ...}}`` whose
message says what to fix; the body-size limit answers 413 before a too-large body is read."""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

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
    NotAPDFError,
    NoTextError,
    PasswordRequiredError,
    StoreError,
    WrongPasswordError,
)

try:  # the serve extra; create_app says how to install it when missing
    from starlette.exceptions import HTTPException as _HTTPException
except ImportError:  # pragma: no cover
    _HTTPException = Exception  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from fastapi import FastAPI, Request

__all__ = ["BodyTooLarge", "error_status"]

logger = logging.getLogger(__name__)


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
