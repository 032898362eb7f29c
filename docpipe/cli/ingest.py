"""``docpipe ingest``: PDFs and Word files into the store (or, with ``--collection``, into a collection; see
`docpipe.cli.collections`), with progress bars on a terminal and the password conventions of the other
commands: ``--password-file``, ``$DOCPIPE_PASSWORD``, or a prompt for each encrypted file when a terminal is
attached and no password was given."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from docpipe.cli.collections import ingest_collection
from docpipe.cli.config import should_prompt
from docpipe.cli.matter import owner_scope
from docpipe.cli.output import EXIT_ERROR, emit
from docpipe.errors import DocpipeError, PasswordRequiredError, WrongPasswordError

__all__ = ["IngestBars", "PasswordPrompt", "ingest_files"]


class PasswordPrompt:
    """Asks the person at the terminal for an encrypted file's password (not echoed); an empty answer (or
    end of input) gives up on the file. Progress bars on stderr are cleared while the prompt shows."""

    def __call__(self, name: str) -> str | None:
        import getpass

        from tqdm import tqdm

        with tqdm.external_write_mode(file=sys.stderr):
            try:
                answer = getpass.getpass(f"password for {name} (empty: skip it): ")
            except EOFError:
                return None
        return answer or None


class IngestBars:
    """Progress on stderr while files are ingested one by one: a bar over the files (the stage of the current
    one beside it) and, while a document is embedded, a bar over its embedding batches."""

    def __init__(self, files: int) -> None:
        from tqdm import tqdm

        self._options: dict[str, Any] = {"file": sys.stderr, "dynamic_ncols": True, "leave": False}
        self.files = tqdm(total=files, unit="file", position=0, **self._options)
        self.batches: Any = None  # a second bar, while a document is embedded

    def start(self, name: str) -> None:
        self.files.set_description(name[:40])

    def stage(self, text: str) -> None:
        self.files.set_postfix_str(text)

    def embedded(self, done: int, total: int) -> None:
        from tqdm import tqdm

        if self.batches is None:
            self.batches = tqdm(total=total, desc="embedding", unit="batch", position=1, **self._options)
        self.batches.n = done
        self.batches.refresh()

    def file_done(self) -> None:
        if self.batches is not None:
            self.batches.close()
            self.batches = None
        self.files.update(1)

    def close(self) -> None:
        if self.batches is not None:
            self.batches.close()
        self.files.close()


def _ingested(doc) -> dict[str, Any]:
    from docpipe.summary import document_summary

    # The CLI's JSON has listed each page warning as its message since the first release.
    summary = document_summary(doc)
    return {**summary, "warnings": [warning["message"] for warning in summary["warnings"]]}


def _ingest_one(dp, path: Path, args, bars: IngestBars | None, ask: PasswordPrompt | None, typed: list[str]):
    """Returns the ingested document. An encrypted file that the given password does not open is tried with
    the passwords typed for earlier files, then `ask` is asked until the answer opens it (or is empty)."""
    secret: str | None = args.password
    tried: set[str | None] = set()
    while True:
        try:
            doc = dp.ingest(
                path,
                password=secret,
                progress=bars.stage if bars is not None else None,
                embed_progress=bars.embedded if bars is not None else None,
            )
        except (PasswordRequiredError, WrongPasswordError):
            if ask is None:
                raise
            tried.add(secret)
            secret = next((known for known in typed if known not in tried), None) or ask(path.name)
            if secret is None:
                raise
            continue
        if secret is not None and secret != args.password and secret not in typed:
            typed.append(secret)
        return doc


def ingest_files(dp, args) -> int:
    """``docpipe ingest FILE...`` (or ``--collection``): prints one line per file (or, with ``--json``, one
    item per file); exit status 1 when any failed (the others are ingested all the same)."""
    ask = PasswordPrompt() if should_prompt(args) else None
    if args.collection is not None:
        return ingest_collection(dp, args, ask_password=ask)
    if args.workers is not None or args.executor != "local":
        from docpipe.errors import ConfigError

        option = "--workers" if args.workers is not None else "--executor ray"
        raise ConfigError(f"{option} applies to a --collection ingest (a data room): add --collection NAME")
    from docpipe.terms.about import about

    scope = owner_scope(dp, args)
    bars = IngestBars(len(args.files)) if sys.stderr.isatty() and not args.json and not args.quiet else None
    results: list[dict[str, Any]] = []
    failed = 0
    typed: list[str] = []  # passwords typed at the prompt that opened a file: tried first on the next ones
    try:
        for path in args.files:
            if bars is not None:
                bars.start(path.name)
            try:
                doc = _ingest_one(dp, path, args, bars, ask, typed)
                scope.file(doc.id, path.name, encrypted=doc.encrypted)  # the matter's document, as an upload
                about(dp.store, doc)  # its title and parties, for `docpipe ls`
                scope.record("upload", doc.id, detail=path.name)
                results.append(_ingested(doc))
            except DocpipeError as exc:
                failed += 1
                scope.record("upload", outcome=type(exc).__name__, detail=path.name)
                results.append({"name": str(path), "error": str(exc), "error_type": type(exc).__name__})
            if bars is not None:
                bars.file_done()
    finally:
        if bars is not None:
            bars.close()
    if args.json:
        emit(results)
    else:
        for item in results:
            if "error" in item:
                print(f"FAILED  {item['name']}: {item['error']}")
                continue
            print(f"ok      {item['name']}: {item['pages']} pages, {item['sections']} sections, id {item['id'][:12]}")
            for warning in item["warnings"]:
                print(f"        warning: {warning}")
    return EXIT_ERROR if failed else 0
