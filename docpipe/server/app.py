"""The FastAPI app: the API's routes and error handlers, the Gradio workbench mounted at ``/ui``, the body
limit and the metrics middleware, the lifespan (warm the engine up, close it); and `serve`, which runs it."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from typing import TYPE_CHECKING, Any

from docpipe.errors import DependencyError, DocpipeError
from docpipe.server.errors import _BodyLimit, _install_error_handlers
from docpipe.server.options import TOKEN_ENV, ServeOptions
from docpipe.server.routes import _install_routes
from docpipe.server.storage import ResultStore

try:  # the serve extra; create_app says how to install it when missing
    # At module level: FastAPI reads the endpoints' (string) annotations in this module's namespace.
    from fastapi.responses import RedirectResponse
except ImportError:  # pragma: no cover
    pass

if TYPE_CHECKING:
    from fastapi import FastAPI

    from docpipe.metrics import Metrics
    from docpipe.pipeline import DocPipe

__all__ = ["create_app", "serve"]

logger = logging.getLogger(__name__)


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


# -- running ------------------------------------------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
