"""`docpipe review`: a review grid (documents x questions) over a collection, files or a folder, written as
XLSX, CSV, JSON or Markdown, with a progress bar of cells and a summary of what failed and why."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from docpipe.cli.config import questions_file
from docpipe.cli.matter import matter_collection, owner_scope
from docpipe.cli.output import EXIT_ERROR

__all__ = ["cmd_review", "cmd_terms"]

_FORMATS = {".xlsx": "xlsx", ".csv": "csv", ".json": "json", ".md": "md"}


class _CellBar:
    """A progress bar of cells done / total on stderr (cells from the cache count as done)."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(desc="cells", unit="cell", file=sys.stderr, dynamic_ncols=True, leave=False, total=0)

    def __call__(self, event: Any) -> None:
        self.bar.total = event.total
        self.bar.n = event.done
        postfix = f"{event.cached} cached" + (f", {event.failed} failed" if event.failed else "")
        self.bar.set_postfix_str(f"{postfix} | {event.document[:30]}", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def _review_questions(args) -> list[str]:
    return list(args.question) + (questions_file(args.questions_file) if args.questions_file else [])


def _format(args) -> str:
    from docpipe.errors import ConfigError

    if getattr(args, "json", False) and args.format not in (None, "json"):
        raise ConfigError(f"--json and --format {args.format} disagree: give one of them")
    if getattr(args, "json", False):
        chosen = "json"
    elif args.format:
        chosen = args.format
    elif args.output is not None:
        chosen = _FORMATS.get(args.output.suffix.lower(), "")
        if not chosen:
            raise ConfigError(
                f"cannot tell the format of {args.output.name}: name it .xlsx, .csv, .json or .md, or give --format"
            )
    else:
        chosen = "md"
    if chosen == "xlsx" and args.output is None:
        raise ConfigError("an Excel workbook is not printed: give -o grid.xlsx (or --format md/csv/json)")
    if getattr(args, "with_pdfs", False) and chosen != "xlsx":
        raise ConfigError("--with-pdfs links an Excel workbook's citations to the PDFs: give -o grid.xlsx")
    return chosen


def cmd_review(dp, args) -> int:
    from docpipe.errors import ConfigError

    if bool(args.collection) == bool(args.paths):
        raise ConfigError(
            "review either a collection or files: docpipe review --collection NAME -q ... "
            "or docpipe review FILES_OR_FOLDER... -q ..."
        )
    fmt = _format(args)  # before any work: a bad output name must not cost a grid
    columns = None
    if args.columns is not None:
        from docpipe.terms.columns import load_columns

        columns = load_columns(args.columns)
    source = _source(dp, args, "review")
    categories = [c for c in args.categories.split(",") if c.strip()] if args.categories else None
    grid = _logged_run(
        dp,
        args,
        "review",
        source,
        lambda bar: dp.review(
            source,
            questions=_review_questions(args),
            checklist=args.checklist,
            categories=categories,
            columns=columns,
            key_terms=args.key_terms,
            mode=args.mode,
            layout=args.layout,
            password=args.password,
            use_cache=not args.no_cache,
            progress=bar,
            executor=args.executor,
        ),
    )
    return _write(dp, grid, args, fmt, what="questions")


def cmd_terms(dp, args) -> int:
    """`docpipe terms`: the key-terms table of a collection, files or a folder."""
    from docpipe.errors import ConfigError
    from docpipe.terms.catalog import KEY_TERMS

    if args.list:
        for term in KEY_TERMS:
            print(f"{term.id:30s} {term.kind:13s} {term.header}")
        return 0
    if bool(args.collection) == bool(args.paths):
        raise ConfigError(
            "read the key terms of a collection or of files: docpipe terms --collection NAME "
            "or docpipe terms FILES_OR_FOLDER..."
        )
    fmt = _format(args)
    terms = [t.strip() for t in args.terms.split(",") if t.strip()] if args.terms else None
    source = _source(dp, args, "terms")
    grid = _logged_run(
        dp,
        args,
        "terms",
        source,
        lambda bar: dp.terms(
            source, terms=terms, mode=args.mode, password=args.password, use_cache=not args.no_cache, progress=bar
        ),
    )
    return _write(dp, grid, args, fmt, what="key terms")


def _source(dp: Any, args: Any, command: str) -> Any:
    """Returns what the grid reads: the matter's collection, or the paths (in the store's own matter only: a
    matter's documents are reviewed as its collection, so that its cells stay its own)."""
    from docpipe.errors import ConfigError

    if args.collection:
        return matter_collection(dp, args, args.collection)
    if not owner_scope(dp, args).own:
        raise ConfigError(
            f"with --matter, {command} a collection of the matter: docpipe ingest --matter {args.matter} "
            f"--collection NAME FILES..., then docpipe {command} --matter {args.matter} --collection NAME"
        )
    return list(args.paths)


def _logged_run(dp: Any, args: Any, action: str, source: Any, work: Any) -> Any:
    """Runs the grid with its access-log line: a collection's, or one per document of the files reviewed."""
    scope = owner_scope(dp, args)
    if not isinstance(source, list):
        with scope.logged(action, detail=f"collection {source.name}"):
            return _run(work)
    from docpipe.ingest.build import stored_label

    grid = _run(work)
    for row in grid.rows:
        if row.document_id:  # "" when the file could not be read
            _name, encrypted = stored_label(dp.store, row.document_id, dp.settings.extraction.extractor)
            scope.file(row.document_id, row.name, encrypted=encrypted)
        scope.record(action, row.document_id or None, outcome="failed" if row.error else "ok", detail=row.name)
    return grid


def _run(work: Any) -> Any:
    bar = _CellBar() if sys.stderr.isatty() else None
    try:
        return work(bar)
    except KeyboardInterrupt:
        print("docpipe: the cells done so far are cached: run the same command again to resume", file=sys.stderr)
        raise
    finally:
        if bar is not None:
            bar.close()


def _write(dp: Any, grid: Any, args: Any, fmt: str, *, what: str) -> int:
    from docpipe.storage.store import atomic_write

    if getattr(args, "manifest", None):
        atomic_write(Path(args.manifest), (_json(grid.manifest.to_dict()) + "\n").encode())
    if fmt == "xlsx":
        pdfs = None
        if args.with_pdfs:
            from docpipe.review.pdfs import copy_pdfs

            pdfs = copy_pdfs(dp.store, grid.rows, Path(args.output))
        grid.to_xlsx(args.output, pdfs=pdfs)
    else:
        text = {"md": grid.to_markdown, "csv": grid.to_csv, "json": grid.to_json}[fmt]()
        if args.output is not None:
            atomic_write(Path(args.output), text.encode())
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    summary = grid.summary()
    where = f"wrote {args.output}: " if args.output is not None else ""
    if args.ics is not None:
        from docpipe.terms.calendar import deadlines_ics

        atomic_write(Path(args.ics), deadlines_ics(grid))
        where += f"wrote {args.ics}: "
    if where or fmt != "md":  # a Markdown table printed ends with the same summary already
        print(where + grid.summary_text(what), file=sys.stderr)
        for failure in summary["failures"]:
            print(f"  failed: {failure}", file=sys.stderr)
    return EXIT_ERROR if summary["failed"] else 0


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, ensure_ascii=False)
