"""The commands that serve: ``docpipe serve`` (the REST API, metrics and the workbench) and ``docpipe ui``
(the workbench alone). Both take the engine options of ``ask`` and ``analyze`` (``--engine``, ``--model``,
``--url``) and the common ones (``--preset``, ``--home``, ``--config``): the pipeline they serve is built
from the same settings as every other command's."""

from __future__ import annotations

import logging
import os
import sys

from docpipe.errors import ConfigError, DependencyError

__all__ = ["cmd_serve", "cmd_ui"]

logger = logging.getLogger("docpipe.cli")


def cmd_ui(dp, args) -> int:
    """``docpipe ui``: the workbench over `dp` (its settings built from the options, as for every command),
    served by Gradio on ``--host``/``--port`` until interrupted."""
    from docpipe.access.login import UI_AUTH_ENV, parse_login

    if args.auth is not None and args.auth_file is not None:
        raise ConfigError("give the login once: --auth-file or --auth, not both")
    if args.auth is not None and sys.stderr.isatty():
        logger.warning(
            "a login on the command line is visible to every user of this machine (ps): use --auth-file or $%s",
            UI_AUTH_ENV,
        )
    login = args.auth
    if args.auth_file is not None:
        from docpipe.access.secret_files import read_secret_file

        login = read_secret_file(args.auth_file, what="login")
    auth = parse_login(login or os.environ.get(UI_AUTH_ENV), option="--auth")
    try:
        from docpipe.ui.app import serve_workbench
    except ImportError as exc:
        raise DependencyError(f"the workbench needs Gradio: pip install 'docpipe-contracts[ui]' ({exc})") from None
    from docpipe.engine import resolve_backend

    engine = dp.settings.engine
    backend = resolve_backend(engine)  # as /v1/health says it: no model named when none answers
    model = f", model {engine.model}" if backend in ("vllm", "openai") else ""
    served = f", server {engine.url}" if engine.url else ""
    print(f"docpipe ui: engine {backend}{model}{served}; store {dp.store.root}", file=sys.stderr)
    serve_workbench(
        dp,
        auth,
        host=args.host,
        port=args.port,
        max_upload_mb=args.max_upload_mb,
        max_pages=args.max_pages,
        concurrency=args.concurrency,
        max_queue=args.max_queue,
    )
    return 0


def cmd_serve(dp, args) -> int:
    from docpipe.access.keys import KeyStore
    from docpipe.server import ServeOptions, serve
    from docpipe.server.options import resolve_metrics_token, resolve_token, resolve_ui_auth

    if args.token or args.ui_auth:
        logging.getLogger("docpipe.serve").warning(
            "a secret on the command line is visible to every user of this machine (ps): use --token-file / "
            "--ui-auth-file or the environment (DOCPIPE_SERVE_TOKEN, DOCPIPE_UI_AUTH)"
        )
    keys = KeyStore(dp.store.root)
    options = ServeOptions(
        host=args.host,
        port=args.port,
        token=resolve_token(args.token, token_file=args.token_file),
        access=keys if keys.configured() else None,
        insecure=args.insecure,
        allowed_hosts=tuple(args.allowed_host) if args.allowed_host else None,
        max_upload_mb=args.max_upload_mb,
        max_json_kb=args.max_json_kb,
        max_questions=args.max_questions,
        ui=not args.no_ui,
        ui_auth=resolve_ui_auth(args.ui_auth, auth_file=args.ui_auth_file),
        log_level=args.log_level,
        metrics_token=resolve_metrics_token(args.metrics_token_file),
        metrics_port=args.metrics_port,
        retention_days=args.retention_days,
    )
    where = f"http://{args.host}:{args.port}"
    ui = f", workbench {where}{options.ui_path}/" if options.ui else ""
    auth = (
        "per-user API keys" if options.access else "the server token" if options.token else "none (this machine only)"
    )
    print(f"docpipe serve: API {where}/v1 (docs {where}/docs{ui}); authentication: {auth}", file=sys.stderr)
    return serve(dp, options)
