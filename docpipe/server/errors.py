"""Errors over HTTP: a `DocpipeError` becomes a status and ``{"error": {"type": ..., "message": ...}}`` whose
message says what to fix (and never shows a server path); the body guard answers 413 before a too-large body
is read, 415 before an upload of the wrong type is read, and 408 when a body trickles in too slowly."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import re
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from docpipe.errors import (
    BusyError,
    ConfigError,
    DependencyError,
    DocpipeError,
    EmptyFileError,
    EncryptedWordFileError,
    EncryptionCheckError,
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
    StoreKeyError,
    TooMuchTextError,
    WrongPasswordError,
)

try:  # the serve extra; create_app says how to install it when missing
    from starlette.exceptions import HTTPException as _HTTPException
except ImportError:  # pragma: no cover
    _HTTPException = Exception  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from fastapi import FastAPI, Request, Response
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = [
    "BodyLimit",
    "BodyTimeout",
    "BodyTooLarge",
    "error_body",
    "error_response",
    "error_status",
    "http_message",
    "install_error_handlers",
    "route_of",
    "send_json",
]

logger = logging.getLogger(__name__)


# -- errors -----------------------------------------------------------------------------------------------
# Most specific first: the first class the error is an instance of decides.
_STATUS: list[tuple[type[DocpipeError], int, str]] = [
    (NotAPDFError, 415, "not_a_pdf"),
    (EmptyFileError, 400, "empty_file"),
    (FileMissingError, 404, "not_found"),
    (InputError, 400, "bad_input"),
    (EncryptedWordFileError, 422, "encrypted_word_file"),
    (PasswordRequiredError, 422, "password_required"),
    (WrongPasswordError, 403, "wrong_password"),
    (MalformedPDFError, 422, "malformed_pdf"),
    (NoTextError, 422, "no_text"),
    (ExtractionTimeoutError, 422, "extraction_timeout"),
    (TooMuchTextError, 422, "too_much_text"),
    (EncryptionCheckError, 422, "encryption_unknown"),
    (ExtractionError, 422, "extraction_failed"),
    (EngineUnavailableError, 503, "engine_unavailable"),
    (BusyError, 503, "busy"),
    (EngineError, 502, "engine_error"),
    (DependencyError, 500, "server_misconfigured"),
    (StoreKeyError, 500, "server_misconfigured"),
    (StoreError, 500, "store_error"),
]


# A write the disk (or a quota, or a file-size limit) refused: the server is out of storage, not broken.
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _out_of_space(exc: BaseException) -> bool:
    """Returns True when `exc`, or an OSError it was raised from, says the disk is full."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, OSError) and current.errno in _NO_SPACE:
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


def error_status(exc: DocpipeError) -> tuple[int, str]:
    """Returns the HTTP status and error type for a docpipe error.

    >>> error_status(NotAPDFError("not a PDF: upload a PDF file"))
    (415, 'not_a_pdf')
    >>> error_status(ConfigError("the question is empty: ask something about the document"))
    (422, 'invalid_request')
    """
    if _out_of_space(exc):
        return 507, "insufficient_storage"
    if isinstance(exc, ConfigError):
        # The engine's settings (URL, key, model) are the operator's to fix, not the caller's.
        return (502, "engine_misconfigured") if "url" in exc.context else (422, "invalid_request")
    for cls, status, kind in _STATUS:
        if isinstance(exc, cls):
            return status, kind
    return 500, "docpipe_error"


def http_message(exc: DocpipeError) -> str:
    """Returns the error's message, with the fix said in HTTP terms where the library's names the CLI's."""
    name = getattr(exc, "path", None) or "the document"
    if isinstance(exc, PasswordRequiredError):
        return (
            f"{name} is encrypted: send its password (the X-Document-Password header or the multipart field "
            '"password" on upload; "password" in the JSON body of ask and analyze)'
        )
    if isinstance(exc, WrongPasswordError):
        return f"the password does not open {name}: check it (the user or the owner password both work)"
    if isinstance(exc, EngineUnavailableError):
        return f"the answer engine is unavailable, try again in a moment ({exc})"
    if _out_of_space(exc):
        return _NO_SPACE_MESSAGE
    if isinstance(exc, StoreKeyError):
        # Which variable or key file to set is the operator's business (the log has it), not a client's.
        return (
            "the server cannot open its encrypted store: its operator must start it with the store key; "
            "the cause is in the server log"
        )
    if isinstance(exc, StoreError):
        # The library's message names the store's folder: the operator's to see (in the log), not a client's.
        return (
            "the server cannot read or write its store: try again later; the operator finds the cause in the server log"
        )
    return str(exc)


_NO_SPACE_MESSAGE = (
    "the server has no room left to store this: try again later; the operator must free disk "
    "space (the server log says where)"
)


def error_body(kind: str, message: str) -> dict[str, Any]:
    """Returns the body of every error the server answers: ``{"error": {"type": kind, "message": message}}``."""
    return {"error": {"type": kind, "message": message}}


def error_response(
    request: Request, status: int, kind: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """Returns the JSON error response, and marks the request with `kind` for the metrics and the access line."""
    from fastapi.responses import JSONResponse

    request.scope["docpipe.error"] = kind
    return JSONResponse(error_body(kind, message), status_code=status, headers=headers)


class BodyTooLarge(_HTTPException):
    """The streamed body passed the size limit. An HTTPException, so FastAPI's body parsing passes it on."""

    def __init__(self, message: str) -> None:
        super().__init__(413, detail=message)


class BodyTimeout(_HTTPException):
    """The body arrived too slowly (408); the connection is closed after the answer."""

    def __init__(self, message: str) -> None:
        super().__init__(408, detail=message, headers={"Connection": "close"})


# -- ASGI middleware ----------------------------------------------------------------------------------------
async def send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    """Sends `body` as the whole JSON response, from an ASGI middleware (before the app has a request)."""
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


_UPLOAD_TYPES = (
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",  # .docx
    "multipart/form-data",
)
_BATCH_TYPES = ("multipart/form-data", "application/json")


class BodyLimit:
    """Guards request bodies before the app reads them.

    - Size: over the limit gets 413, at once when Content-Length says so (nothing is read), else as soon as the
      streamed body passes it. Uploads (`upload_path`, and everything under `ui_path`: Gradio's own uploads)
      get `upload_bytes`, everything else `json_bytes`.
    - Type: a POST to `upload_path` must be application/pdf, .docx or multipart/form-data, else 415 before the body is
      read (a cross-site "simple request" with text/plain or a urlencoded form is refused). A POST to a path
      `batch_upload_path` matches (several PDFs into a collection) must be multipart/form-data, which gets
      `batch_upload_bytes`, or application/json (ids), which gets `json_bytes`. A POST to a path of
      `route_limits` (pattern, bytes, what the route takes) gets the smaller of its bytes and `json_bytes`, and a
      413 saying what the route takes.
    - Time: after `grace_s` from the app's first read, the body must have come at `min_bytes_per_s` on average,
      else 408 and the connection is closed (a body trickled in to hold a connection open forever)."""

    def __init__(
        self,
        app: Any,
        *,
        upload_bytes: int,
        json_bytes: int,
        upload_path: str,
        ui_path: str | None,
        grace_s: float = 30.0,
        min_bytes_per_s: int = 16 * 1024,
        batch_upload_path: re.Pattern[str] | None = None,
        batch_upload_bytes: int = 0,
        route_limits: tuple[tuple[re.Pattern[str], int, str], ...] = (),
    ) -> None:
        self.app = app
        self.upload_bytes = upload_bytes
        self.json_bytes = json_bytes
        self.upload_path = upload_path
        self.batch_upload_path = batch_upload_path
        self.batch_upload_bytes = batch_upload_bytes
        self.route_limits = route_limits
        self.ui_prefix = ui_path.rstrip("/") + "/" if ui_path else None
        self.grace_s = grace_s
        self.min_bytes_per_s = min_bytes_per_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        headers = dict(scope.get("headers") or [])
        if scope.get("method") == "POST" and path.rstrip("/") == self.upload_path:
            media = headers.get(b"content-type", b"").decode("latin-1").partition(";")[0].strip().lower()
            if media not in _UPLOAD_TYPES:
                scope["docpipe.error"] = "unsupported_media_type"
                message = (
                    "uploads must be Content-Type: application/pdf (the PDF as the body), the Word (.docx) media "
                    "type application/vnd.openxmlformats-officedocument.wordprocessingml.document, or "
                    f'multipart/form-data (the file in the field "file"), not {media[:60] or "none"!r}'
                )
                await send_json(send, 415, error_body("unsupported_media_type", message))
                return
        uploading = path.rstrip("/") == self.upload_path or (self.ui_prefix and path.startswith(self.ui_prefix))
        limit, flag = (self.upload_bytes, "--max-upload-mb") if uploading else (self.json_bytes, "--max-json-kb")
        if scope.get("method") == "POST" and self.batch_upload_path and self.batch_upload_path.fullmatch(path):
            media = headers.get(b"content-type", b"").decode("latin-1").partition(";")[0].strip().lower()
            if media not in _BATCH_TYPES:
                scope["docpipe.error"] = "unsupported_media_type"
                message = (
                    'adding to a collection takes multipart/form-data (PDFs in the field "file", repeated) or '
                    f'application/json ({{"ids": [...]}}), not {media[:60] or "none"!r}'
                )
                await send_json(send, 415, error_body("unsupported_media_type", message))
                return
            if media == "multipart/form-data":
                limit, flag = self.batch_upload_bytes, "--max-upload-mb"
        takes = ""
        for pattern, most, takes_what in self.route_limits if scope.get("method") == "POST" else ():
            if pattern.fullmatch(path) and most < limit:
                limit, takes = most, takes_what
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await send_json(send, 400, error_body("bad_request", "the Content-Length header is not a number"))
                return
            if size > limit:
                scope["docpipe.error"] = "body_too_large"
                await send_json(send, 413, error_body("body_too_large", _too_large(size, limit, flag, takes)))
                return
        received = 0
        first_read: float | None = None
        complete = False

        async def limited() -> dict[str, Any]:
            nonlocal received, first_read, complete
            if complete:  # the body is in; later reads wait for a disconnect, as long as the response takes
                return await receive()
            now = time.monotonic()
            first_read = now if first_read is None else first_read
            deadline = first_read + self.grace_s + received / self.min_bytes_per_s
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - now))
            except TimeoutError:
                scope["docpipe.error"] = "body_timeout"
                raise BodyTimeout(
                    f"the body arrived too slowly ({received} bytes in {time.monotonic() - first_read:.0f} s; this "
                    f"server wants {self.min_bytes_per_s // 1024} KB/s after the first {self.grace_s:g} s): "
                    "send it again over a faster connection"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if received > limit:
                    raise BodyTooLarge(_too_large(None, limit, flag, takes))
            else:
                complete = True
            return message

        await self.app(scope, limited, send)


def _too_large(size: int | None, limit: int, flag: str, takes: str = "") -> str:
    if takes:  # a route's own bound, which no server flag raises
        what = f"the body is {size / 1024:,.0f} KiB" if size is not None else "the body is over the limit"
        return f"{what}; this route takes at most {limit / 1024:,.0f} KiB: {takes}"
    what = f"the body is {size / 1048576:.1f} MB" if size is not None else "the body is over the limit"
    return (
        f"{what}; this server takes at most {limit / 1048576:.2f} MB here: send less (split the document or "
        f"the questions), or start the server with a larger {flag}"
    )


def route_of(scope: Mapping[str, Any]) -> str:
    """Returns the request's route template (``/v1/documents/{doc_id}/ask``), never the raw path: logs and
    metrics must not carry document ids or workbench file names."""
    template = getattr(scope.get("route"), "path", None)
    return template if isinstance(template, str) else "unmatched"


def install_error_handlers(app: FastAPI) -> None:
    """Answers docpipe errors, invalid requests, lone surrogates, a full disk, HTTP errors and anything
    unexpected with the error body (`error_body`) and the status that says whose fix it is."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    app.add_exception_handler(DocpipeError, _docpipe_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(UnicodeEncodeError, _bad_unicode)  # type: ignore[arg-type]
    app.add_exception_handler(OSError, _os_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)


async def _docpipe_error(request: Request, exc: DocpipeError) -> Response:
    status, kind = error_status(exc)
    if status >= 500:
        logger.warning("%s %s failed: %s: %s", request.method, route_of(request.scope), type(exc).__name__, exc)
    retry = getattr(exc, "retry_after_s", 10)
    headers = {"Retry-After": str(int(retry))} if status == 503 else None
    return error_response(request, status, kind, http_message(exc), headers)


async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    problems, unicode = [], False
    for error in exc.errors()[:10]:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
        unicode = unicode or error.get("type") == "bad_unicode"
    if unicode:
        return error_response(request, 400, "bad_unicode", "; ".join(problems))
    message = "invalid request: " + "; ".join(problems) + " (the request formats are at /docs)"
    return error_response(request, 422, "invalid_request", message)


async def _bad_unicode(request: Request, exc: UnicodeEncodeError) -> Response:
    # Text that cannot be encoded reached the pipeline: a lone surrogate ("\ud800" in JSON) from the client.
    if "surrogate" not in str(exc.reason):
        return await _unexpected(request, exc)
    return error_response(
        request,
        400,
        "bad_unicode",
        "the request holds text that is not valid Unicode (a lone "
        "surrogate such as \\ud800): send well-formed UTF-8 text",
    )


async def _os_error(request: Request, exc: OSError) -> Response:
    if isinstance(exc, DocpipeError):
        return await _docpipe_error(request, exc)
    if not _out_of_space(exc):
        return await _unexpected(request, exc)
    logger.error("%s %s: the disk is full: %s", request.method, route_of(request.scope), exc)
    return error_response(request, 507, "insufficient_storage", _NO_SPACE_MESSAGE)


_HTTP_KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "body_timeout",
    413: "body_too_large",
}


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
    kind = _HTTP_KINDS.get(exc.status_code, f"http_{exc.status_code}")
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path}: the API is described at /docs"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}: the API is described at /docs"
    return error_response(request, exc.status_code, kind, detail, dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Sent by Starlette's outermost middleware; the traceback goes to the log, not to the client.
    from fastapi.responses import JSONResponse

    reference = uuid.uuid4().hex[:12]
    logger.error(
        "unexpected error %s in %s %s",
        reference,
        request.method,
        route_of(request.scope),
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    return JSONResponse(
        error_body("internal_error", f"unexpected server error (reference {reference}): see the server log"),
        status_code=500,
    )
