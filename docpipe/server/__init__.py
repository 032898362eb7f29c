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

Modules: `options` (how the server runs: `ServeOptions`, the token, the workbench login), `app` (the FastAPI
app, the workbench mount, the lifespan, the metrics middleware, `serve`), `routes` (the ``/v1`` endpoints),
`models` (their request and response models), `errors` (docpipe errors as HTTP statuses and JSON, the
body-size limit), `storage` (stored answers and reports by id).
"""

from __future__ import annotations

from docpipe.server.app import create_app, serve
from docpipe.server.errors import error_status
from docpipe.server.options import (
    TOKEN_ENV,
    UI_AUTH_ENV,
    ServeOptions,
    parse_ui_auth,
    resolve_token,
)

# Not in __all__ (nor were they before the split), but importable from here as they were.
from docpipe.server.options import check_token as check_token
from docpipe.server.storage import ResultStore as ResultStore

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
