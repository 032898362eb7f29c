"""The `docpipe` command: a thin layer over `DocPipe`. Errors become one line and a non-zero exit code
(a traceback only with ``--debug``).

Modules: `parser` (the arguments), `commands` (search, ask, analyze, the evaluations), `ingest` (ingest, its
progress bars and password prompts), `serving` (serve, ui), `admin` (keys, matters, audit, rm), `collections`
(collections, ls, and the ``--collection`` side of ingest, ask, search and rm), `review` (review grids),
`config` (``config show``, and what every command shares: the password, questions from stdin), `output`
(``--json`` and the exit code of a failure). With ``--json`` each command prints the one shape
docs/cli-json.md documents. Imports nothing heavy at import time: ``docpipe --help`` stays instant.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from docpipe.cli import admin, check, collections, commands, config, ingest, marks, review, serving
from docpipe.cli.output import EXIT_ERROR
from docpipe.cli.parser import build_parser
from docpipe.errors import DocpipeError

if TYPE_CHECKING:
    from docpipe.settings import Settings

__all__ = ["main", "settings_from_args"]


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Returns the settings a command runs with: the preset, then its options (``--engine``, ``--model``,
    ``--url``, ``--home``, ``--extractor``), the environment, the config file. ``ui --max-pages`` caps the
    pages a document may have (the extractor refuses a longer one before reading its pages)."""
    from docpipe.settings import Settings

    # The environment, then the config file, fill in what neither the preset nor the options set.
    settings = Settings.preset(args.preset or "default", config_file=args.config, **_overrides(args))
    cap = getattr(args, "max_pages", None)
    if cap is not None and settings.extraction.max_pages > cap:
        overrides = _overrides(args)
        overrides["extraction"] = {**overrides.get("extraction", {}), "max_pages": cap}
        settings = Settings.preset(args.preset or "default", config_file=args.config, **overrides)
    return settings


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
    if getattr(args, "ray_address", None):
        overrides["ray"] = {"address": args.ray_address}
    if args.home:
        overrides["home"] = args.home
    return overrides


_COMMANDS = {
    "ingest": ingest.ingest_files,
    "search": commands.cmd_search,
    "ask": commands.cmd_ask,
    "eval-retrieval": commands.cmd_eval,
    "analyze": commands.cmd_analyze,
    "eval-analysis": commands.cmd_eval_analysis,
    "eval-answers": commands.cmd_eval_answers,
    "eval-collection": commands.cmd_eval_collection,
    "eval-terms": commands.cmd_eval_terms,
    "serve": serving.cmd_serve,
    "ui": serving.cmd_ui,
    "keys": admin.cmd_keys,
    "matters": admin.cmd_matters,
    "audit": admin.cmd_audit,
    "rm": admin.cmd_rm,
    "collections": collections.cmd_collections,
    "ls": collections.cmd_ls,
    "review": review.cmd_review,
    "terms": review.cmd_terms,
    "mark": marks.cmd_mark,
    "check": check.cmd_check,
    "eval-playbook": check.cmd_eval_playbook,
}


def main(argv: list[str] | None = None) -> int:
    """Runs the `docpipe` command line on `argv` (default: the process arguments); returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
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

        dp = DocPipe(settings_from_args(args))
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
