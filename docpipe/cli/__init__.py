"""The `docpipe` command: a thin layer over `DocPipe`. Errors become one line and a non-zero exit code
(a traceback only with ``--debug``).

Modules: `parser` (the arguments), `commands` (ingest, search, ask, analyze, the evaluations, ui, serve),
`admin` (keys, matters, audit, rm), `collections` (collections, ls, and the ``--collection`` side of ingest,
ask, search and rm), `review` (review grids), `config` (``config show``, and what every command shares: the
password, questions from stdin). Imports nothing heavy at import time: ``docpipe --help`` stays instant.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from docpipe.cli import admin, collections, commands, config, review
from docpipe.cli.commands import EXIT_ERROR
from docpipe.cli.parser import build_parser
from docpipe.errors import DocpipeError

__all__ = ["main"]


def _settings(args: argparse.Namespace):
    from docpipe.settings import Settings

    # The environment, then the config file, fill in what neither the preset nor the options set.
    return Settings.preset(args.preset or "default", config_file=args.config, **_overrides(args))


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.extractor:
        overrides["extraction"] = {"extractor": args.extractor}
    engine = {
        key: value
        for key, value in (
            ("backend", getattr(args, "engine", None)),
            ("model", getattr(args, "model", None)),
            ("url", getattr(args, "url", None)),
        )
        if value
    }
    if engine:
        overrides["engine"] = engine
    if args.home:
        overrides["home"] = args.home
    return overrides


_COMMANDS = {
    "ingest": commands._cmd_ingest,
    "search": commands._cmd_search,
    "ask": commands._cmd_ask,
    "eval-retrieval": commands._cmd_eval,
    "analyze": commands._cmd_analyze,
    "eval-analysis": commands._cmd_eval_analysis,
    "eval-answers": commands._cmd_eval_answers,
    "eval-collection": commands._cmd_eval_collection,
    "serve": commands._cmd_serve,
    "keys": admin._cmd_keys,
    "matters": admin._cmd_matters,
    "audit": admin._cmd_audit,
    "rm": admin._cmd_rm,
    "collections": collections._cmd_collections,
    "ls": collections._cmd_ls,
    "review": review._cmd_review,
}


def main(argv: list[str] | None = None) -> int:
    """Runs the `docpipe` command line on `argv` (default: the process arguments); returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ui"]:
        # The workbench has its own options (host, port, auth, limits); hand them over untouched.
        return commands.run_ui(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "ui":
        return commands.run_ui(args.ui_args)
    level = (
        logging.DEBUG
        if args.debug
        else logging.INFO
        if args.verbose
        else logging.ERROR
        if args.quiet
        else logging.WARNING
    )
    # The handler has the level too: bm25s sets its own logger to DEBUG when imported, past the root's level.
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("docpipe: %(levelname)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    if not args.debug:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        if args.command == "config":
            return config.show(args, _overrides(args))
        if hasattr(args, "password"):
            args.password = config.resolve_password(args.password, password_file=args.password_file)
        config.read_stdin_questions(args)
        from docpipe.pipeline import DocPipe

        dp = DocPipe(_settings(args))
        return config.with_password_prompt(_COMMANDS[args.command], dp, args)
    except DocpipeError as exc:
        if args.debug:
            raise
        print(f"docpipe: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("docpipe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
