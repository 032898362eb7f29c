"""`docpipe check`: a playbook held against a collection, files or a folder, the report written as XLSX, CSV, JSON
or Markdown; and `docpipe eval-playbook`, the same over a CUAD data room scored against its experts' answers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from docpipe.cli.options import engine_options, matter_option, password_options, with_pdfs_option
from docpipe.cli.output import EXIT_ERROR, emit

__all__ = ["add_check_commands", "cmd_check", "cmd_eval_playbook"]


def add_check_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``check`` and ``eval-playbook`` to the sub-commands `sub`."""
    p = sub.add_parser(
        "check",
        parents=[common],
        help="hold a playbook (the firm's positions, TOML) against contracts: meets / deviates / missing / needs "
        "review per contract and rule, with quotes and pages, as XLSX/CSV/JSON/Markdown",
    )
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="PDFs or folders (or give --collection)")
    p.add_argument("--playbook", type=Path, required=True, metavar="FILE", help="the playbook (see docs/playbook.md)")
    p.add_argument("--collection", metavar="NAME", help="check this collection's documents")
    matter_option(p)
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="think", help="Qwen3 thinking mode")
    engine_options(p)
    password_options(p, "password for encrypted PDFs")
    p.add_argument("-o", "--output", type=Path, help="write the report here; the format follows the suffix")
    p.add_argument("--format", choices=["xlsx", "csv", "json", "md"], help="output format (default: by -o, else md)")
    with_pdfs_option(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON (the same as --format json)")

    p = sub.add_parser(
        "eval-playbook",
        parents=[common],
        help="score a playbook's verdicts over a CUAD data room against its experts' answers (terms.jsonl): trust "
        "of meets, catch of deviations, workload, beside an all-needs-review anchor",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="folder with terms.jsonl, manifest.csv and pdf/")
    p.add_argument("--playbook", type=Path, required=True, metavar="FILE", help="the playbook to score")
    p.add_argument("--collection", default="eval-collection", metavar="NAME", help="collection to build and check")
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="auto", help="Qwen3 thinking mode")
    engine_options(p)
    p.add_argument("--workers", type=int, metavar="N", help="extractions at once while the collection is built")
    p.add_argument("-o", "--output", type=Path, help="also write the playbook's report here (.xlsx .csv .json .md)")
    p.add_argument("--json", action="store_true", help="print JSON")


def cmd_check(dp: Any, args: Any) -> int:
    """`docpipe check`: the playbook's report over a collection or files."""
    from docpipe.cli.review import _format, _logged_run, _source
    from docpipe.errors import ConfigError
    from docpipe.playbook import load_playbook

    if bool(args.collection) == bool(args.paths):
        raise ConfigError(
            "check a collection or files: docpipe check --playbook FILE --collection NAME "
            "or docpipe check --playbook FILE FILES_OR_FOLDER..."
        )
    playbook = load_playbook(args.playbook)  # before any work: a bad playbook must not cost a grid
    fmt = _format(args)
    source = _source(dp, args, "check")
    report = _logged_run(
        dp,
        args,
        "check",
        source,
        lambda bar: dp.check(playbook, source, mode=args.mode, password=args.password, progress=bar),
    )
    write_report(dp, report, args.output, fmt, with_pdfs=args.with_pdfs)
    failed = [row for row in report.rows if row.error]
    for row in failed:
        print(f"  could not be read: {row.name}: {row.error}", file=sys.stderr)
    return EXIT_ERROR if failed else 0


def write_report(dp: Any, report: Any, output: Path | None, fmt: str, *, with_pdfs: bool = False) -> None:
    """Writes `report` to `output` (0600) in `fmt`, or prints it; the summary line goes to stderr."""
    from docpipe.storage.store import atomic_write

    if fmt == "xlsx":
        assert output is not None
        pdfs = None
        if with_pdfs:
            from docpipe.review.pdfs import copy_pdfs

            pdfs = copy_pdfs(dp.store, report.rows, output)
        report.to_xlsx(output, pdfs=pdfs)
    else:
        text = {"md": report.to_markdown, "csv": report.to_csv, "json": report.to_json}[fmt]()
        if output is not None:
            atomic_write(output, (text if text.endswith("\n") else text + "\n").encode())
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if output is not None or fmt != "md":  # a Markdown report printed starts with the same line
        print((f"wrote {output}: " if output is not None else "") + report.summary_text(), file=sys.stderr)


def cmd_eval_playbook(dp: Any, args: Any) -> int:
    """`docpipe eval-playbook`: the playbook's figures over a CUAD data room (`docpipe.eval.playbook`)."""
    from docpipe.cli.review import _FORMATS
    from docpipe.errors import ConfigError
    from docpipe.eval.playbook import evaluate_playbook, format_playbook_report
    from docpipe.playbook import load_playbook

    playbook = load_playbook(args.playbook)
    fmt = ""
    if args.output is not None:
        fmt = _FORMATS.get(args.output.suffix.lower(), "")
        if not fmt:
            raise ConfigError(f"cannot tell the format of {args.output.name}: name it .xlsx, .csv, .json or .md")
    reports: list[Any] = []
    figures = evaluate_playbook(
        dp,
        args.folder,
        playbook,
        collection=args.collection,
        mode=args.mode,
        workers=args.workers,
        progress=sys.stderr.isatty() and not args.json,
        report_out=reports,
    )
    if args.output is not None:
        write_report(dp, reports[0], args.output, fmt)
    if args.json:
        emit(figures)
    else:
        print(format_playbook_report(figures))
    return 0
