"""`docpipe serve`: one uvicorn process with the REST API under ``/v1``, Prometheus metrics at ``/metrics``
and the Gradio workbench at ``/ui``, all over the same `DocPipe` (so the UI's and the API's questions share
engine batches and caches). The top layer beside the CLI: it may import everything below it, and mounts
``docpipe.ui``.

Routes (JSON in and out; the OpenAPI description is at ``/openapi.json``, browsable at ``/docs``); every route
but health acts for a caller (an API key, the single token, or the local user) in a matter (``X-Matter``)::

    GET    /v1/matters                      your matters and your role in each
    DELETE /v1/matters/{matter}             the matter and everything in it (admin)
    POST   /v1/documents                    upload a PDF (raw body or multipart field "file") (write)
    GET    /v1/documents[/{id}]             the matter's documents, or one
    DELETE /v1/documents/{id}               the document, its answers and reports (write)
    POST   /v1/documents/{id}/ask           {"question": ...} or {"questions": [...]} -> answers, each with an id
    POST   /v1/documents/{id}/analyze       {"categories": [...]} -> a contract report, with its id
    GET    /v1/answers/{id}, /v1/reports/{id}   a stored answer or report of the matter
    GET    /v1/health                       liveness (no key needed)
    GET    /metrics                         Prometheus text format (a metrics token, or loopback only)

Safety (see the README's Security section): per-user keys and matters, an append-only access log, no exposed
address without authentication, a Host allow-list and Origin check, limits on connections, heads, bodies and
extraction, private files, deletion and retention. Errors are ``{"error": {"type": ..., "message": ...}}``;
the message says what to fix.

Modules: `options` (how the server runs), `app` (the FastAPI app, the workbench mount, the lifespan, the
observing middleware, `serve`), `protocol` (the h11 protocol with a head deadline), `access` (caller and
matter of a request), `deps` (what the routes share: the app's state, the caller in a matter, the access log,
as FastAPI dependencies), `routers` (the endpoints, one router per area), `models` and `review_models` (their
request and response models), `sse` (server-sent events of a streamed ask), `errors` (docpipe errors as HTTP
statuses, the body limit), `storage` (stored answers and reports), `jobs` (review and key-terms jobs),
`job_requests` (what a job is asked, checked: typed columns, key terms), `housekeeping`
(deletion and retention), `metrics` (Prometheus).
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
