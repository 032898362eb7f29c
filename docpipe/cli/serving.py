"""The commands that serve: ``docpipe serve`` (the REST API, metrics and the workbench) and ``docpipe ui``
(the workbench alone). Both take the engine options of ``ask`` and ``analyze`` (``--engine``, ``--model``,
``--url``) and the common ones (``--preset``, ``--home``, ``--config``): the pipeline they serve is built
from the same settings as every other command's."""

from __future__ import annotations

import logging
import os
import sys

from docpipe.errors import ConfigError, DependencyError

__all__: list[str] = []

logger = logging.getLogger("docpipe.cli")


def _cmd_ui(dp, args) -> int:
    """``docpipe ui``: the workbench over `dp` (its settings built from the options, as for every command),
    served by Gradio on ``--host``/``--port`` until interrupted."""
    from docpipe.access.login import UI_AUTH_ENV, is_loopback, parse_login

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
        from docpipe.ui.access import WorkbenchAccess
        from docpipe.ui.app import build_app, launch_kwargs
    except ImportError as exc:
        raise DependencyError(f"the workbench needs Gradio: pip install 'docpipe-contracts[ui]' ({exc})") from None
    if not is_loopback(args.host) and auth is None:
        logger.warning("serving on %s without --auth: anyone who can reach this address can upload and ask", args.host)
    access = WorkbenchAccess(dp, auth)
    demo = build_app(
        dp,
        max_upload_mb=args.max_upload_mb,
        max_pages=args.max_pages,
        concurrency=args.concurrency,
        max_queue=args.max_queue,
        access=access,
    )
    engine = dp.settings.engine
    served = f", server {engine.url}" if engine.url else ""
    print(f"docpipe ui: engine {engine.backend}, model {engine.model}{served}; store {dp.store.root}", file=sys.stderr)
    demo.launch(
        server_name=args.host,
        server_port=args.port,
        auth=access.auth(),
        max_threads=max(40, args.concurrency + 8),
        **launch_kwargs(max_upload_mb=args.max_upload_mb, store_root=dp.store.root),
    )
    return 0


def _cmd_serve(dp, args) -> int:
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
