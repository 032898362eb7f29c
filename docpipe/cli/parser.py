"""The `docpipe` command line's arguments: one sub-command per action, the common options on each."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypeAlias

from docpipe.cli.check import add_check_commands
from docpipe.cli.options import engine_options as _engine
from docpipe.cli.options import matter_option as _matter
from docpipe.cli.options import password_options as _password
from docpipe.cli.options import with_pdfs_option as _with_pdfs
from docpipe.version import __version__

__all__ = ["build_parser"]

_ASK_OR_COLLECTION = "a PDF, or with --collection the question"

# What `add_subparsers` returns: the sub-commands of `docpipe` (generic only to the type checker).
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _common(*, top: bool) -> argparse.ArgumentParser:
    # Sub-commands take the same options; their defaults are suppressed so that
    # `docpipe --debug ask ...` is not overwritten by the sub-command's own default.
    default: Any = None if top else argparse.SUPPRESS
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--preset", default=default, help="settings preset: default, cpu-demo, fast, test")
    common.add_argument("--extractor", default=default, choices=["pypdf", "pypdfium2"], help="PDF text extractor")
    common.add_argument(
        "--home", default=default, type=Path, help="store folder (default: $DOCPIPE_HOME or the user cache dir)"
    )
    common.add_argument(
        "--config",
        default=default,
        type=Path,
        metavar="PATH",
        help="TOML config file (default: $DOCPIPE_CONFIG, else config.toml in the user config dir if present)",
    )
    common.add_argument(
        "--debug", default=False if top else argparse.SUPPRESS, action="store_true", help="show tracebacks"
    )
    # -v and -q only before the command: after `ask` and `review`, -q is another question.
    loudness = common.add_mutually_exclusive_group()
    short: tuple[tuple[str, ...], tuple[str, ...]] = (("-v",), ("-q",)) if top else ((), ())
    loudness.add_argument(
        *short[0], "--verbose", default=False if top else argparse.SUPPRESS, action="store_true", help="info logs"
    )
    loudness.add_argument(
        *short[1], "--quiet", default=False if top else argparse.SUPPRESS, action="store_true", help="errors only"
    )
    return common


def _executor(p: argparse.ArgumentParser) -> None:
    """Where the work runs: here, or as Ray Data pipelines on a Ray cluster (the ``ray`` settings section)."""
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local (default), or ray: Ray Data pipelines on the cluster at --ray-address (a local Ray when "
        "unset; pip install 'docpipe-contracts[ray]'); the store must be on storage every node sees",
    )
    p.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster: auto, HOST:PORT or ray://HOST:10001")


def _host(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")


def _upload_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-upload-mb", type=float, default=50, help="largest upload, in MB (default 50)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of `docpipe`: its sub-commands and their options."""
    common = _common(top=False)
    parser = argparse.ArgumentParser(
        prog="docpipe",
        description="Ask questions of long contracts; answers cite the pages they come from.",
        parents=[_common(top=True)],
    )
    parser.add_argument("--version", action="version", version=f"docpipe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _ingest_command(sub, common)
    _asking_commands(sub, common)
    _review_command(sub, common)
    _terms_command(sub, common)
    _mark_command(sub, common)
    add_check_commands(sub, common)
    _config_command(sub, common)
    _serving_commands(sub, common)
    _keys_command(sub, common)
    _store_commands(sub, common)
    _listing_commands(sub, common)
    _eval_commands(sub, common)
    return parser


def _ingest_command(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the ``ingest`` command."""
    p = sub.add_parser("ingest", parents=[common], help="extract, section and index PDFs (cached by content)")
    p.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="PDFs; with --collection also folders (searched recursively)",
    )
    p.add_argument(
        "--collection",
        metavar="NAME",
        help="add them to this collection (created when new): 1-63 letters, digits, '.', '_' or '-'",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --collection: PDFs extracted at once (default $DOCPIPE_EXTRACTION__MAX_CONCURRENT or 2)",
    )
    _executor(p)
    _matter(p)
    _password(p, "password for encrypted PDFs")
    p.add_argument("--json", action="store_true", help="print JSON")


def _asking_commands(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the commands that ask one contract or a collection: ``search``, ``ask``, ``analyze``."""
    p = sub.add_parser("search", parents=[common], help="show the sections that match a question")
    p.add_argument("file", nargs="?", metavar="FILE", help=_ASK_OR_COLLECTION)
    p.add_argument("question", nargs="?", metavar="QUESTION")
    p.add_argument("--collection", metavar="NAME", help="search this collection instead of one PDF")
    _matter(p)
    p.add_argument("-k", type=int, help="sections to retrieve (default 4)")
    _password(p, "password for an encrypted PDF")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--budget", type=int, help="token budget for the returned sections (default 16384)")

    p = sub.add_parser("ask", parents=[common], help="answer questions with citations (one engine batch)")
    p.add_argument("file", nargs="?", metavar="FILE", help=_ASK_OR_COLLECTION)
    p.add_argument("question", nargs="?", metavar="QUESTION")
    _matter(p)
    p.add_argument(
        "--collection",
        metavar="NAME",
        help="ask this collection instead of one PDF: the contract a question names, or the best of all",
    )
    p.add_argument("-q", "--question", dest="more", action="append", default=[], help="another question (repeat)")
    p.add_argument("--questions-file", type=Path, help="a file with one question per line")
    each = p.add_mutually_exclusive_group()
    each.add_argument(
        "--each",
        dest="each",
        action="store_const",
        const=True,
        help="with --collection: ask each contract and answer as lists (found / to check / nothing found), as "
        '"which contracts ...?" questions are by default',
    )
    each.add_argument(
        "--no-each",
        dest="each",
        action="store_const",
        const=False,
        help='with --collection: answer even a "which contracts ...?" question from the best passages of a few',
    )
    p.add_argument("-k", type=int, help="sections to retrieve (default 4)")
    p.add_argument("--mode", choices=["auto", "think", "no_think"], help="Qwen3 thinking mode (default auto)")
    _engine(p)
    p.add_argument("--no-cache", action="store_true", help="do not read or write the answer cache")
    p.add_argument(
        "--show-thinking",
        action="store_true",
        help="print the model's thinking (on a terminal, dimmed as it is written; else after the answer)",
    )
    p.add_argument(
        "--no-stream",
        action="store_true",
        help="on a terminal, print the answer when it is finished instead of as it is written",
    )
    p.add_argument("--manifest", type=Path, help="write the answers' audit manifests (JSON) to this file")
    _password(p, "password for an encrypted PDF")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "analyze", parents=[common], help="run the 41-category clause checklist over a contract (one engine batch)"
    )
    p.add_argument("file", type=Path, metavar="FILE", nargs="?")
    _matter(p)
    p.add_argument("--format", choices=["md", "json", "csv"], default="md", help="report format (default md)")
    p.add_argument("--categories", help="comma-separated checklist categories (default all 41; see --list-categories)")
    p.add_argument("--list-categories", action="store_true", help="print the checklist's categories and exit")
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="think", help="Qwen3 thinking mode")
    p.add_argument("--no-references", action="store_true", help="do not add definitions and cross-referenced sections")
    _engine(p)
    p.add_argument("--no-cache", action="store_true", help="do not read or write the answer cache")
    _password(p, "password for an encrypted PDF")
    p.add_argument("-o", "--output", type=Path, help="write the report to this file instead of printing it")
    p.add_argument("--manifest", type=Path, help="also write the audit manifest (JSON) to this file")


def _review_command(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the ``review`` command: a grid of contracts against questions."""
    p = sub.add_parser(
        "review",
        parents=[common],
        help="a review grid: every contract of a collection, files or a folder against questions or the "
        "checklist, as XLSX/CSV/JSON/Markdown",
    )
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="PDFs or folders (or give --collection)")
    p.add_argument("--collection", metavar="NAME", help="review this collection's documents")
    _matter(p)
    p.add_argument("-q", "--question", action="append", default=[], help="a column's question (repeat)")
    p.add_argument("--questions-file", type=Path, help="a file with one question per line")
    p.add_argument(
        "--columns", type=Path, metavar="FILE", help="typed columns from a TOML file (key, question, kind, options)"
    )
    p.add_argument("--key-terms", action="store_true", help="a column for each built-in key term (see docpipe terms)")
    p.add_argument("--checklist", action="store_true", help="a column for each of the 41 checklist categories")
    p.add_argument(
        "--categories", help="comma-separated checklist categories as columns (see analyze --list-categories)"
    )
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="think", help="Qwen3 thinking mode")
    p.add_argument(
        "--layout",
        choices=["auto", "shared", "per_cell"],
        help="shared: a document's cells share one context, computed once by the prefix cache; per_cell: each "
        "cell only its own sections; auto (default): per_cell when cells think, shared when they do not",
    )
    _engine(p)
    _executor(p)
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cell cache")
    _password(p, "password for encrypted PDFs")
    p.add_argument("-o", "--output", type=Path, help="write the grid here; the format follows the suffix")
    p.add_argument("--format", choices=["xlsx", "csv", "json", "md"], help="output format (default: by -o, else md)")
    p.add_argument("--manifest", type=Path, help="also write the grid's audit manifest (JSON) to this file")
    _with_pdfs(p)
    p.add_argument("--ics", type=Path, metavar="FILE", help="also write expirations and notice deadlines as iCalendar")
    p.add_argument("--json", action="store_true", help="print the grid as JSON (the same as --format json)")


def _terms_command(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the ``terms`` command: the key-terms table of contracts."""
    p = sub.add_parser(
        "terms",
        parents=[common],
        help="key terms of contracts (parties, dates, term, renewal and notice, law, cap ...): typed values with "
        "their quotes, as XLSX/CSV/JSON/Markdown, deadlines as iCalendar",
    )
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="PDFs or folders (or give --collection)")
    p.add_argument("--collection", metavar="NAME", help="the key terms of this collection's documents")
    _matter(p)
    p.add_argument("--terms", metavar="IDS", help="comma-separated key terms to read (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the key terms and exit")
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="think", help="Qwen3 thinking mode")
    _engine(p)
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cell cache")
    _password(p, "password for encrypted PDFs")
    p.add_argument("-o", "--output", type=Path, help="write the table here; the format follows the suffix")
    _with_pdfs(p)
    p.add_argument("--format", choices=["xlsx", "csv", "json", "md"], help="output format (default: by -o, else md)")
    p.add_argument("--ics", type=Path, metavar="FILE", help="also write expirations and notice deadlines as iCalendar")
    p.add_argument("--json", action="store_true", help="print the table as JSON (the same as --format json)")


def _mark_command(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the ``mark`` command: a reviewer's mark on one cell of a grid."""
    p = sub.add_parser(
        "mark",
        parents=[common],
        help="mark a grid cell accepted, corrected or flagged, with a comment (or clear its mark); grids and "
        "exports of the matter show it",
    )
    p.add_argument(
        "document", metavar="DOCUMENT", help="with --collection: a member's name or id (prefix); else a PDF or an id"
    )
    p.add_argument("column", metavar="COLUMN", help="the grid column's key, as its header shows it")
    p.add_argument("--collection", metavar="NAME", help="the document is a member of this collection")
    _matter(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--accept", action="store_true", help="the cell is right")
    what.add_argument("--correct", metavar="VALUE", help="the cell is wrong: VALUE is right")
    what.add_argument("--flag", action="store_true", help="the cell needs another look")
    what.add_argument("--clear", action="store_true", help="remove the cell's mark")
    p.add_argument("--comment", metavar="TEXT", default="", help="what the reviewer has to say about the cell")
    p.add_argument("--json", action="store_true", help="print JSON")


def _config_command(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds ``config show``."""
    p = sub.add_parser("config", parents=[common], help="show the effective settings and where each comes from")
    config = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    c = config.add_parser("show", parents=[common], help="every setting, its value and its source (TOML or --json)")
    c.add_argument("--json", action="store_true", help="print JSON")


def _serving_commands(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the commands that serve: ``ui`` (the workbench) and ``serve`` (the REST API)."""
    p = sub.add_parser(
        "ui",
        parents=[common],
        help="open the contract workbench in the browser (Gradio; pip install 'docpipe-contracts[ui]')",
    )
    _host(p)
    p.add_argument("--port", type=int, help="port (default: Gradio's 7860 or the next free one)")
    p.add_argument("--auth", help="user:password for the login (visible in ps: prefer --auth-file or $DOCPIPE_UI_AUTH)")
    p.add_argument("--auth-file", type=Path, metavar="PATH", help="file holding user:password on one line (mode 600)")
    _upload_limit(p)
    p.add_argument("--max-pages", type=int, default=2000, help="most pages per document (default 2000)")
    p.add_argument("--concurrency", type=int, default=16, help="requests handled at once (default 16)")
    p.add_argument("--max-queue", type=int, default=64, help="requests waiting at most (default 64)")
    _engine(p)

    p = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the REST API (/v1), metrics (/metrics) and the workbench (/ui) (pip install 'docpipe-contracts[serve]')",
    )
    _host(p)
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--token",
        help=argparse.SUPPRESS,  # visible in `ps`: kept for old scripts, --token-file or the env instead
    )
    p.add_argument(
        "--token-file",
        type=Path,
        help="file holding the server's single bearer token (or env DOCPIPE_SERVE_TOKEN); per-user keys: docpipe keys",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback address without API keys or workbench login (never on a shared network)",
    )
    p.add_argument(
        "--retention-days",
        type=float,
        help="delete answers, reports and uploaded documents older than this many days (swept hourly)",
    )
    _upload_limit(p)
    p.add_argument("--max-json-kb", type=float, default=1024, help="largest JSON request, in KB (default 1024)")
    p.add_argument("--max-questions", type=int, default=64, help="most questions per ask request (default 64)")
    p.add_argument("--no-ui", action="store_true", help="serve the API only, without the Gradio workbench")
    p.add_argument("--ui-auth", help=argparse.SUPPRESS)  # visible in `ps`: --ui-auth-file or the env instead
    p.add_argument(
        "--ui-auth-file", type=Path, help="file holding user:password for the workbench login (or env DOCPIPE_UI_AUTH)"
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a Host name the server answers to (repeat; default: localhost, 127.0.0.1, ::1 and the bound address)",
    )
    p.add_argument("--metrics-port", type=int, help="serve /metrics on 127.0.0.1:PORT only, in a listener of its own")
    p.add_argument(
        "--metrics-token-file", type=Path, help="file holding a bearer token for /metrics (or DOCPIPE_METRICS_TOKEN)"
    )
    _engine(p)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"], help="server log")


def _keys_command(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds ``keys``: per-user API keys and the store key."""
    p = sub.add_parser("keys", parents=[common], help="create, list and revoke per-user API keys for docpipe serve")
    keys = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    k = keys.add_parser("create", parents=[common], help="create a key (printed once; only its hash is kept)")
    k.add_argument("--user", required=True, help="who the key is for, e.g. alice")
    k.add_argument(
        "--matter",
        dest="grants",
        action="append",
        default=[],
        metavar="MATTER[:ROLE]",
        help="a matter the key may use, with role read (default), write or admin; '*' is every matter (repeat)",
    )
    k.add_argument("--note", default="", help="a note kept with the key, e.g. the client or the laptop")
    k.add_argument("--json", action="store_true", help="print JSON")
    k = keys.add_parser("list", parents=[common], help="list the keys (never their secrets)")
    k.add_argument("--json", action="store_true", help="print JSON")
    k = keys.add_parser(
        "revoke", parents=[common], help="revoke a key: it stops working at once, also in a running server"
    )
    k.add_argument("key_id", metavar="KEY_ID", help="the key's id (docpipe keys list)")
    k = keys.add_parser(
        "store-key", parents=[common], help="make a store key file for encryption at rest (never overwrites one)"
    )
    k.add_argument("--out", type=Path, required=True, help="the key file to create (mode 600)")
    keys.add_parser("seal-store", parents=[common], help="seal the store's plain files with the store key in effect")


def _store_commands(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the commands over what the store holds: ``matters``, ``audit``, ``rm``."""
    p = sub.add_parser("matters", parents=[common], help="list the matters and their documents")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("audit", parents=[common], help="read the access log: who did what to which document, when")
    p.add_argument("--matter", help="only this matter")
    p.add_argument("--user", help="only this user")
    p.add_argument("--document", help="only this document (id or its first characters)")
    p.add_argument("--since", help="only from this ISO date or time on, e.g. 2026-12-01")
    p.add_argument(
        "--question",
        action="append",
        default=[],
        metavar="QUESTION",
        help="only entries that asked this question, found by its keyed hash (repeat; '-' reads them from stdin)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the log: hash chain, each line's MAC and number, the checkpoint (nothing removed, changed "
        "or forged; docs/access-log.md)",
    )
    p.add_argument(
        "--head",
        action="store_true",
        help="verify, then print LINES:SHA256 of the log's end, to keep outside the store for --expect-head",
    )
    p.add_argument(
        "--expect-head",
        metavar="LINES:SHA256",
        help="verify, and fail unless the log still holds this line (as --head printed it earlier)",
    )
    p.add_argument("--json", action="store_true", help="print JSON lines (with --verify: the verdict as JSON)")

    p = sub.add_parser(
        "rm",
        parents=[common],
        help="delete documents (PDF, text, indexes, answers, cache entries; also from every collection), "
        "or remove them from a matter or a collection",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="FILE_OR_ID",
        help="a PDF (hashed to find it), a document id or 8+ characters of one (docpipe ls); "
        "with --collection also the name the document has there",
    )
    p.add_argument("--matter", help="remove from this matter only (the file stays while another matter holds it)")
    p.add_argument("--delete-matter", action="store_true", help="delete the whole --matter with everything in it")
    p.add_argument(
        "--collection", metavar="NAME", help="remove the documents from this collection only (they stay in the store)"
    )
    p.add_argument(
        "--all", action="store_true", help="with --collection: delete the collection itself (its documents stay)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def _listing_commands(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds ``collections`` and ``ls``."""
    p = sub.add_parser("collections", parents=[common], help="list the collections: documents and pages of each")
    _matter(p)
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "ls", parents=[common], help="list the documents in the store, in a matter (--matter) or in a collection"
    )
    p.add_argument("--collection", metavar="NAME", help="list this collection's documents")
    p.add_argument(
        "--matter",
        metavar="NAME",
        help="list this matter's documents (default: every document in the store; with --collection, the "
        "matter's collection)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def _eval_commands(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """Adds the evaluations on CUAD-format labelled data."""
    p = sub.add_parser(
        "eval-retrieval",
        parents=[common],
        help="measure retrieval recall at context budgets on CUAD-format labelled data",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="folder with annotations.jsonl and pdf/")
    p.add_argument("--budgets", default="2048,4096,8192,16384", help="comma-separated token budgets")
    p.add_argument("--limit", type=int, help="evaluate only the first N contracts")
    p.add_argument("--no-baseline", action="store_true", help="skip the naive whole-chunk baseline")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "eval-collection",
        parents=[common],
        help="measure retrieval over a data room: the right contract first, recall and other-contract share "
        "at context budgets, beside a naive pooled baseline",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="folder with annotations.jsonl, manifest.csv and pdf/")
    p.add_argument("--collection", default="eval-collection", metavar="NAME", help="collection to build and ask")
    p.add_argument("--budgets", default="2048,4096,8192,16384", help="comma-separated token budgets")
    p.add_argument("--limit", type=int, help="ask only the first N questions (every contract stays in)")
    p.add_argument("--workers", type=int, metavar="N", help="extractions at once while the collection is built")
    p.add_argument("--no-baseline", action="store_true", help="skip the naive 500-character pooled baseline")
    p.add_argument(
        "--each",
        action="store_true",
        help='score "which contracts ...?" questions (one per CUAD Yes/No category), asked of each contract and '
        "answered from pooled passages, against terms.jsonl's labels (--limit: the first N categories)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "eval-terms",
        parents=[common],
        help="score the key terms (dates, renewal, notice, governing law, parties) against CUAD's expert answers, "
        "beside a naive regex anchor",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="folder with terms.jsonl, manifest.csv and pdf/")
    p.add_argument("--collection", default="eval-terms", metavar="NAME", help="collection to build and read")
    p.add_argument("--limit", type=int, metavar="N", help="evaluate only the first N contracts of the manifest")
    p.add_argument("--misses", type=int, default=0, metavar="N", help="list up to N misses per field")
    p.add_argument("--workers", type=int, metavar="N", help="extractions at once while the collection is built")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "eval-answers",
        parents=[common],
        help="score answers to plain-language questions against CUAD-format labels, beside a naive anchor",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="folder with annotations.jsonl and pdf/")
    p.add_argument(
        "--questions", type=Path, required=True, metavar="FILE", help="JSON object: category name -> question"
    )
    p.add_argument("--per-category", type=int, metavar="N", help="ask only the first N records of each category")
    p.add_argument("--limit", type=int, help="evaluate only the first N contracts")
    _engine(p)
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "eval-analysis",
        parents=[common],
        help="score the clause checklist against CUAD-format labels (presence, quotes, retrieval per category)",
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="folder with annotations.jsonl and pdf/")
    p.add_argument("--limit", type=int, help="evaluate only the first N contracts")
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="think", help="Qwen3 thinking mode")
    p.add_argument(
        "--compare-references", action="store_true", help="also run without definitions/cross-references, side by side"
    )
    p.add_argument("--no-references", action="store_true", help="run without definitions and cross-references")
    _engine(p)
    p.add_argument("--json", action="store_true", help="print JSON")
