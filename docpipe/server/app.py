"""The FastAPI app: its state (the pipeline, stores, access log, job runner), the routers of
`docpipe.server.routers` and the error handlers, the Gradio workbench mounted at ``/ui``, the body guard, the
Host allow-list, the metrics and access-log middleware, the lifespan (warm the engine up, run the review jobs
and the retention sweep, close the engine); and `serve`, which runs it with connection limits and a header
deadline."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from docpipe.access.keys import KeyStore
from docpipe.access.log import AccessLog
from docpipe.access.matters import MatterStore
from docpipe.access.scope import adopt_own_store
from docpipe.errors import ConfigError, DependencyError, DocpipeError
from docpipe.playbook.schema import MAX_PLAYBOOK_BYTES
from docpipe.server.errors import BodyLimit, error_body, install_error_handlers, route_of, send_json
from docpipe.server.housekeeping import Housekeeper
from docpipe.server.jobs import JobRunner, JobStore
from docpipe.server.options import ServeOptions, check_exposure, is_loopback
from docpipe.server.protocol import head_deadline_protocol
from docpipe.server.storage import ResultStore
from docpipe.storage.store import private_umask
from docpipe.version import __version__

try:  # the serve extra; create_app says how to install it when missing
    # At module level: FastAPI reads the endpoints' (string) annotations in this module's namespace.
    from fastapi.responses import RedirectResponse
except ImportError:  # pragma: no cover
    pass

if TYPE_CHECKING:
    from fastapi import FastAPI

    from docpipe.pipeline import DocPipe
    from docpipe.server.metrics import Metrics

__all__ = ["create_app", "serve"]

logger = logging.getLogger(__name__)
# One line per request: client address, method, route template, status, seconds. Never the raw path or the
# query string (document ids, workbench file names, ?name=), which uvicorn's own access log would show.
access_logger = logging.getLogger("docpipe.access")


class _Observe:
    """Counts every request by method, route template (not the raw path) and status, with its latency, and
    writes the access line."""

    def __init__(self, app: Any, *, metrics: Metrics, ui_path: str | None) -> None:
        self.app = app
        self.metrics = metrics
        self.ui_path = ui_path

    def _route(self, scope: dict[str, Any]) -> str:
        path = scope.get("path", "")
        if self.ui_path and (path == self.ui_path or path.startswith(self.ui_path + "/")):
            return self.ui_path  # Gradio's own routes: one label, not one per file or event
        return route_of(scope)

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
            seconds = time.perf_counter() - started
            method, route = scope.get("method", ""), self._route(scope)
            self.metrics.observe_request(method, route, status, seconds, error)
            client = scope.get("client") or ("-", 0)
            access_logger.info('%s - "%s %s" %d %.3fs', client[0], method, route, status, seconds)


class _TrustedHosts:
    """Answers 400 to a request whose Host header is not one of `allowed` (a DNS-rebinding page reaches a
    loopback server under its own name), and 403 to a state-changing request whose Origin is another site's
    (a cross-site form post to a token-less loopback server). ``"*"`` in `allowed` turns the check off."""

    def __init__(self, app: Any, *, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = frozenset(allowed)
        self.any = "*" in self.allowed

    def _ok(self, host: str | None) -> bool:
        return self.any or (host is not None and host in self.allowed)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw_host = headers.get(b"host", b"").decode("latin-1")
        if not self._ok(_host_of(raw_host)):
            scope["docpipe.error"] = "bad_host"
            message = (
                f"this server does not answer to the host name {raw_host[:100]!r}: open it as one of "
                f"{', '.join(sorted(self.allowed))}, or start it with that name allowed (allowed_hosts)"
            )
            await self._refuse(scope, send, 400, "bad_host", message)
            return
        origin = headers.get(b"origin")
        if origin is not None and scope.get("method", "GET") not in ("GET", "HEAD", "OPTIONS"):
            text = origin.decode("latin-1")
            if not self._ok(_host_of(text.partition("://")[2])):
                scope["docpipe.error"] = "cross_site"
                message = (
                    f"cross-site request from {text[:100]!r} refused: call the API from a program (no Origin "
                    "header) or from the workbench this server serves"
                )
                await self._refuse(scope, send, 403, "cross_site", message)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: dict[str, Any], send: Any, status: int, kind: str, message: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await send_json(send, status, error_body(kind, message))


def _host_of(value: str) -> str | None:
    """Returns the host name of a Host header (or of an origin without its scheme), lower case, IPv6 in
    brackets, without the port; None when it is malformed.

    >>> _host_of("LocalHost:8000"), _host_of("[::1]:8000"), _host_of("127.0.0.1"), _host_of("a b")
    ('localhost', '[::1]', '127.0.0.1', None)
    """
    value = value.strip().lower()
    if value.startswith("["):
        host, sep, rest = value.partition("]")
        host, port = host + sep, rest.removeprefix(":")
    else:
        host, _, port = value.partition(":")
    if not host or (port and not port.isdigit()) or any(ch in host for ch in " /\\@?#"):
        return None
    return host.rstrip(".")


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
        raise DependencyError(
            "docpipe serve needs FastAPI and uvicorn: pip install 'docpipe-contracts[serve]'"
        ) from exc

    from docpipe.server.metrics import Metrics
    from docpipe.server.routers import ROUTERS

    options = options or ServeOptions()
    app = FastAPI(
        title="docpipe",
        version=__version__,
        summary="Ask questions of long contracts; answers cite the pages they come from.",
        description=_API_DESCRIPTION,
        lifespan=_lifespan,
    )
    _set_state(app, dp, options, metrics or Metrics())
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    if options.ui:
        _mount_ui(app, dp, options)
    _add_middleware(app, options)
    return app


def _set_state(app: FastAPI, dp: DocPipe, options: ServeOptions, metrics: Metrics) -> None:
    """Puts on ``app.state`` what the routes' dependencies (`docpipe.server.deps`) and the lifespan read."""
    app.state.dp = dp
    app.state.options = options
    app.state.metrics = metrics
    app.state.results = results = ResultStore(dp.store.root / "serve", sealer=dp.store.sealer)
    app.state.started = time.time()
    # Matters, per-user keys and the access log live in the store, beside the documents they govern.
    app.state.keys = KeyStore(dp.store.root)
    app.state.matters = MatterStore(dp.store.root)
    # What the command line and the library ingested is the store's own matter's: filed before any request.
    adopt_own_store(dp.store, dp.settings.extraction.extractor)
    app.state.audit = AccessLog(dp.store.root, key_file=dp.settings.audit_key_file)
    app.state.audit.prepare()  # the wrong audit key fails here, not at the first request
    # Review jobs run here, one at a time; the lifespan starts and stops the runner.
    app.state.jobs = JobRunner(dp, JobStore(dp.store.root / "jobs", sealer=dp.store.sealer))
    # Deleting a document or matter cancels the jobs quoting it.
    app.state.housekeeper = Housekeeper(dp, app.state.matters, results, jobs=app.state.jobs, audit=app.state.audit)
    app.state.analyses = asyncio.Semaphore(max(1, options.max_concurrent_analyses))


def _add_middleware(app: FastAPI, options: ServeOptions) -> None:
    """Adds the body guard, the Host allow-list and the observer (the last added is the outermost)."""
    from docpipe.server.routers.collections import COLLECTION_UPLOAD_PATH
    from docpipe.server.routers.review_jobs import CHECK_BODY_BYTES, CHECK_PATH

    ui_path = options.ui_path if options.ui else None
    app.add_middleware(
        BodyLimit,
        upload_bytes=options.max_upload_bytes,
        json_bytes=options.max_json_bytes,
        upload_path="/v1/documents",
        ui_path=ui_path,
        grace_s=options.body_timeout_s,
        min_bytes_per_s=options.body_min_bytes_per_s,
        batch_upload_path=COLLECTION_UPLOAD_PATH,
        batch_upload_bytes=options.max_batch_upload_bytes,
        route_limits=(
            (
                CHECK_PATH,
                CHECK_BODY_BYTES,
                f"a playbook is at most {MAX_PLAYBOOK_BYTES // 1024} KiB of TOML: split it into several playbooks",
            ),
        ),
    )
    app.add_middleware(_TrustedHosts, allowed=options.allowed_host_names())
    # Added last = outermost: the observer sees the 400s of the host check and the 413s of the body guard.
    app.add_middleware(_Observe, metrics=app.state.metrics, ui_path=ui_path)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Warms the engine up, starts the review-job runner and the retention sweep; on the way out stops them
    and closes the engine."""
    import anyio.to_thread
    from starlette.concurrency import run_in_threadpool

    dp, options, metrics = app.state.dp, app.state.options, app.state.metrics
    # Blocking work (ingestion, questions) runs in threads; enough that concurrent askers reach the
    # batcher together.
    anyio.to_thread.current_default_thread_limiter().total_tokens = max(8, options.threads)
    metrics.attach()
    sweeper = asyncio.create_task(_sweep_forever(app, options.retention_days)) if options.retention_days else None
    try:
        await run_in_threadpool(_warm_up, dp)
        # Review jobs a stopped server left are taken up again (they resume from the cell cache).
        retention_s = options.retention_days * 86400.0 if options.retention_days else None
        await run_in_threadpool(lambda: app.state.jobs.start(retention_s=retention_s))
        yield
    finally:
        if sweeper is not None:
            sweeper.cancel()
        await run_in_threadpool(app.state.jobs.stop)  # the running grid stays queued for the next start
        metrics.detach()
        await run_in_threadpool(_close_engine, dp)


_API_DESCRIPTION = """\
Upload a contract (PDF), ask questions about it, get answers whose quotes are checked against the pages.

* Authentication: when the server has a token, send `Authorization: Bearer <token>` on every `/v1` route
  except `/v1/health`.
* Errors: `{"error": {"type": ..., "message": ...}}`; the message says what to fix. 400 bad input,
  401 missing/wrong token, 403 wrong document password or cross-site request, 404 unknown id, 408 body too
  slow, 413 body too large, 415 not a PDF (or not sent as application/pdf or multipart/form-data),
  422 unreadable PDF / password required / invalid request, 502 engine error, 503 engine unavailable,
  507 the server's disk is full.
* Priority: questions go to the engine ahead of bulk analysis.
"""


def _mount_ui(app: FastAPI, dp: DocPipe, options: ServeOptions) -> None:
    try:
        import gradio as gr
    except ImportError as exc:
        raise DependencyError(
            f"the workbench needs Gradio: pip install 'docpipe-contracts[ui]', or serve the API alone with --no-ui ({exc})"
        ) from exc
    try:
        from docpipe.ui.access import WorkbenchAccess
        from docpipe.ui.app import build_app, launch_kwargs
    except ImportError as exc:
        raise DependencyError(
            f"cannot load the workbench (docpipe.ui: {exc}): reinstall docpipe with the ui extra "
            "(pip install 'docpipe-contracts[ui]'), or serve the API alone with --no-ui"
        ) from exc
    pages = dp.settings.extraction.max_pages
    # The workbench is behind the same API keys as /v1 (or the --ui-auth login), and keeps to their matters.
    access = WorkbenchAccess(dp, options.ui_auth)
    demo = build_app(dp, max_upload_mb=options.max_upload_mb, max_pages=pages, access=access)
    kwargs = launch_kwargs(max_upload_mb=options.max_upload_mb, store_root=dp.store.root)
    gr.mount_gradio_app(
        app,
        demo,
        path=options.ui_path,
        server_name=options.host,
        server_port=options.port,
        auth=access.auth(),
        **kwargs,
    )
    # Gradio checks that a file named in an API call was uploaded (and not in blocked_paths) only once the app
    # is marked launched, which mount_gradio_app never does (gradio 6.31): without this, an API call naming
    # /etc/passwd has it copied into Gradio's cache and /dev/zero is copied forever, before any handler runs.
    demo.has_launched = True

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(options.ui_path + "/")


_SWEEP_EVERY_S = 3600.0


async def _sweep_forever(app: FastAPI, retention_days: float) -> None:
    """Applies the retention policy at start and then hourly: answers, reports, cached answers and uploaded
    documents older than `retention_days` go (`Housekeeper.sweep`)."""
    from starlette.concurrency import run_in_threadpool

    while True:
        try:
            removed = await run_in_threadpool(app.state.housekeeper.sweep, retention_days * 86400.0)
            logger.info("retention (%g days): removed %s", retention_days, removed)
        except Exception:  # noqa: BLE001 - a failed sweep is retried next hour, the server keeps serving
            logger.exception("the retention sweep failed; it runs again in an hour")
        await asyncio.sleep(_SWEEP_EVERY_S)


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
def _configure_access_log(level: str) -> None:
    """Gives our access line a handler like uvicorn's own (whose access log is off: it shows raw paths)."""
    if not access_logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        access_logger.addHandler(handler)
        access_logger.propagate = False
    access_logger.setLevel(level.upper())


def serve(dp: DocPipe, options: ServeOptions) -> int:
    """Returns the exit code after serving until interrupted (Ctrl-C or SIGTERM).

    Refuses (ConfigError) a non-loopback address without authentication, or with the workbench but no
    login, unless ``options.insecure``."""
    try:
        import uvicorn
    except ImportError as exc:
        raise DependencyError("docpipe serve needs uvicorn: pip install 'docpipe-contracts[serve]'") from exc
    check_exposure(options)
    # Everything the server writes (store, answers, access log, Gradio's copies) is for its owner only.
    private_umask()
    if options.insecure and not is_loopback(options.host):
        logger.warning("serving %s with --insecure: check that only trusted machines can reach it", options.host)
    app = create_app(dp, options)
    _configure_access_log(options.log_level)
    metrics_server = _start_metrics_listener(app, options.metrics_port) if options.metrics_port else None
    try:
        uvicorn.run(
            app,
            host=options.host,
            port=options.port,
            log_level=options.log_level,
            timeout_graceful_shutdown=10,
            server_header=False,
            access_log=False,
            http=head_deadline_protocol(options.header_timeout_s, options.max_header_kb * 1024),
            h11_max_incomplete_event_size=options.max_header_kb * 1024,
            limit_concurrency=options.limit_concurrency,
            timeout_keep_alive=options.keep_alive_s,  # type: ignore[arg-type]  # call_later takes a float
        )
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
    return 0


def _start_metrics_listener(app: FastAPI, port: int) -> Any:
    """Returns prometheus_client's WSGI server, started on 127.0.0.1:`port` in a thread of its own."""
    from prometheus_client import start_wsgi_server

    try:
        server, _thread = start_wsgi_server(port, addr="127.0.0.1", registry=app.state.metrics.registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on 127.0.0.1:{port} ({exc.strerror}): choose another --metrics-port"
        ) from exc
    logger.info("metrics on http://127.0.0.1:%d/metrics", port)
    return server
