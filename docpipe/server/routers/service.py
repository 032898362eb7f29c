"""The service routes: ``GET /metrics`` (Prometheus, guarded) and ``GET /v1/health`` (liveness, no key)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from docpipe.engine import resolve_backend
from docpipe.server.deps import DocPipeDep, MetricsDep, OptionsDep, StartedDep
from docpipe.server.errors import error_response
from docpipe.server.models import Health
from docpipe.server.options import METRICS_TOKEN_ENV, METRICS_TOKEN_FILE_ENV, is_loopback
from docpipe.version import __version__

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format"},
        401: {"description": "Missing or wrong metrics token"},
        404: {"description": "Metrics are not served to this client here"},
    },
)
def guarded_metrics(request: Request, options: OptionsDep, metrics: MetricsDep) -> Response:
    """Returns the Prometheus metrics: needs the metrics token (``DOCPIPE_METRICS_TOKEN``) when one is set;
    without one, answers loopback clients of a loopback-bound server only."""
    if options.metrics_port is not None:
        return error_response(
            request,
            404,
            "not_found",
            f"metrics are served on http://127.0.0.1:{options.metrics_port}/metrics (--metrics-port), not here",
        )
    if options.metrics_token is not None:
        scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(
            given.strip().encode(), options.metrics_token.encode()
        ):
            return error_response(
                request,
                401,
                "unauthorized",
                f"/metrics needs Authorization: Bearer <the metrics token> (the server's {METRICS_TOKEN_ENV})",
                {"WWW-Authenticate": "Bearer"},
            )
    elif not (is_loopback(options.host) and request.client is not None and is_loopback(request.client.host)):
        return error_response(
            request,
            404,
            "not_found",
            "/metrics answers only this machine when no metrics token "
            f"is set: give the server {METRICS_TOKEN_ENV} or {METRICS_TOKEN_FILE_ENV} and send it "
            "as a bearer token, or use --metrics-port",
        )
    body, content_type = metrics.render()
    return Response(body, media_type=content_type)


@router.get("/v1/health", response_model=Health, summary="Liveness")
def health(dp: DocPipeDep, started: StartedDep) -> dict[str, Any]:
    """Returns ok while the server runs (no token needed; says nothing about documents)."""
    engine = dp.settings.engine
    backend = resolve_backend(engine)  # "auto" as it resolves here: no model is named that does not answer
    return {
        "status": "ok",
        "version": __version__,
        "engine": backend,
        "model": engine.model if backend in ("vllm", "openai") else None,
        "uptime_s": round(time.time() - started, 3),
    }
