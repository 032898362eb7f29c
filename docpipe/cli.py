"""The `docpipe` command: a thin layer over `DocPipe`. Errors become one line and a non-zero exit code."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from docpipe.errors import DocpipeError

__all__ = ["main"]

EXIT_ERROR = 1


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
        "--debug", default=False if top else argparse.SUPPRESS, action="store_true", help="show tracebacks"
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common(top=False)
    parser = argparse.ArgumentParser(
        prog="docpipe",
        description="Ask questions of long contracts; answers cite the pages they come from.",
        parents=[_common(top=True)],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("ingest", parents=[common], help="extract, section and index PDFs (cached by content)")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p.add_argument("--password", help="password for encrypted PDFs")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("search", parents=[common], help="show the sections that match a question")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument("-k", type=int, help="sections to retrieve (default 4)")
    p.add_argument("--password", help="password for an encrypted PDF")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--budget", type=int, help="token budget for the returned sections (default 16384)")

    p = sub.add_parser("ask", parents=[common], help="answer questions with citations (one engine batch)")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("question", nargs="?", metavar="QUESTION")
    p.add_argument("-q", "--question", dest="more", action="append", default=[], help="another question (repeat)")
    p.add_argument("--questions-file", type=Path, help="a file with one question per line")
    p.add_argument("-k", type=int, help="sections to retrieve (default 4)")
    p.add_argument("--mode", choices=["auto", "think", "no_think"], help="Qwen3 thinking mode (default auto)")
    p.add_argument("--engine", choices=["auto", "extractive", "vllm", "openai", "echo"], help="answer engine")
    p.add_argument("--model", help="answering model: HF id or local folder (default Qwen/Qwen3-14B)")
    p.add_argument("--url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the answer cache")
    p.add_argument("--show-thinking", action="store_true", help="print the model's thinking after the answer")
    p.add_argument("--manifest", type=Path, help="write the answers' audit manifests (JSON) to this file")
    p.add_argument("--password", help="password for an encrypted PDF")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser(
        "analyze", parents=[common], help="run the 41-category clause checklist over a contract (one engine batch)"
    )
    p.add_argument("file", type=Path, metavar="FILE", nargs="?")
    p.add_argument("--format", choices=["md", "json", "csv"], default="md", help="report format (default md)")
    p.add_argument(
        "--categories", help="comma-separated checklist categories (default all 41; see --list-categories)"
    )
    p.add_argument("--list-categories", action="store_true", help="print the checklist's categories and exit")
    p.add_argument("--mode", choices=["think", "no_think", "auto"], default="think", help="Qwen3 thinking mode")
    p.add_argument("--no-references", action="store_true", help="do not add definitions and cross-referenced sections")
    p.add_argument("--engine", choices=["auto", "extractive", "vllm", "openai", "echo"], help="answer engine")
    p.add_argument("--model", help="answering model: HF id or local folder (default Qwen/Qwen3-14B)")
    p.add_argument("--url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the answer cache")
    p.add_argument("--password", help="password for an encrypted PDF")
    p.add_argument("-o", "--output", type=Path, help="write the report to this file instead of printing it")
    p.add_argument("--manifest", type=Path, help="also write the audit manifest (JSON) to this file")

    p = sub.add_parser(
        "ui", help="open the contract workbench in the browser (Gradio; pip install 'docpipe[ui]')", add_help=False
    )
    p.add_argument("ui_args", nargs=argparse.REMAINDER, help="options of the workbench (docpipe ui --help)")

    p = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the REST API (/v1), metrics (/metrics) and the workbench (/ui) (pip install 'docpipe[serve]')",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--token", help=argparse.SUPPRESS  # visible in `ps`: kept for old scripts, --token-file or the env instead
    )
    p.add_argument(
        "--token-file", type=Path,
        help="file holding the server's single bearer token (or env DOCPIPE_SERVE_TOKEN); per-user keys: docpipe keys",
    )
    p.add_argument(
        "--insecure", action="store_true",
        help="allow a non-loopback address without API keys or workbench login (never on a shared network)",
    )
    p.add_argument(
        "--retention-days", type=float,
        help="delete answers, reports and uploaded documents older than this many days (swept hourly)",
    )
    p.add_argument("--max-upload-mb", type=float, default=50, help="largest PDF upload, in MB (default 50)")
    p.add_argument("--max-json-kb", type=float, default=1024, help="largest JSON request, in KB (default 1024)")
    p.add_argument("--max-questions", type=int, default=64, help="most questions per ask request (default 64)")
    p.add_argument("--no-ui", action="store_true", help="serve the API only, without the Gradio workbench")
    p.add_argument("--ui-auth", help=argparse.SUPPRESS)  # visible in `ps`: --ui-auth-file or the env instead
    p.add_argument(
        "--ui-auth-file", type=Path, help="file holding user:password for the workbench login (or env DOCPIPE_UI_AUTH)"
    )
    p.add_argument(
        "--allowed-host", action="append", metavar="NAME",
        help="a Host name the server answers to (repeat; default: localhost, 127.0.0.1, ::1 and the bound address)",
    )
    p.add_argument(
        "--metrics-port", type=int, help="serve /metrics on 127.0.0.1:PORT only, in a listener of its own"
    )
    p.add_argument(
        "--metrics-token-file", type=Path, help="file holding a bearer token for /metrics (or DOCPIPE_METRICS_TOKEN)"
    )
    p.add_argument("--engine", choices=["auto", "extractive", "vllm", "openai", "echo"], help="answer engine")
    p.add_argument("--model", help="answering model: HF id or local folder (default Qwen/Qwen3-14B)")
    p.add_argument("--url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8001/v1")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"], help="server log")

    p = sub.add_parser("keys", parents=[common], help="create, list and revoke per-user API keys for docpipe serve")
    keys = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    k = keys.add_parser("create", parents=[common], help="create a key (printed once; only its hash is kept)")
    k.add_argument("--user", required=True, help="who the key is for, e.g. alice")
    k.add_argument(
        "--matter", dest="grants", action="append", default=[], metavar="MATTER[:ROLE]",
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

    p = sub.add_parser("matters", parents=[common], help="list the matters and their documents")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("audit", parents=[common], help="read the access log: who did what to which document, when")
    p.add_argument("--matter", help="only this matter")
    p.add_argument("--user", help="only this user")
    p.add_argument("--document", help="only this document (id or its first characters)")
    p.add_argument("--since", help="only from this ISO date or time on, e.g. 2026-12-01")
    p.add_argument("--verify", action="store_true", help="check the log's hash chain: no line removed or changed")
    p.add_argument("--json", action="store_true", help="print JSON lines")

    p = sub.add_parser(
        "rm", parents=[common], help="delete documents: their PDF, text, indexes, answers, reports and cache entries"
    )
    p.add_argument("targets", nargs="*", metavar="FILE_OR_ID", help="a PDF (hashed to find it) or a document id")
    p.add_argument("--matter", help="remove from this matter only (the file stays while another matter holds it)")
    p.add_argument("--delete-matter", action="store_true", help="delete the whole --matter with everything in it")
    p.add_argument("--json", action="store_true", help="print JSON")

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
    p.add_argument("--engine", choices=["auto", "extractive", "vllm", "openai", "echo"], help="answer engine")
    p.add_argument("--model", help="answering model: HF id or local folder")
    p.add_argument("--url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _settings(args: argparse.Namespace):
    from docpipe.settings import Settings, load_settings

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
    if args.preset:
        return Settings.preset(args.preset, **overrides)
    settings = load_settings()
    if overrides:
        data = settings.model_dump()
        for key, value in overrides.items():
            data[key] = {**data[key], **value} if isinstance(value, dict) else value
        settings = load_settings(**data)
    return settings


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True, leave=False)


def _emit(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _doc_summary(doc) -> dict[str, Any]:
    return {
        "id": doc.id,
        "name": doc.name,
        "pages": len(doc.pages),
        "sections": len(doc.sections),
        "extractor": doc.extractor,
        "page_statuses": {str(k): v for k, v in doc.page_statuses.items()},
        "warnings": doc.warnings,
    }


def _cmd_ingest(dp, args) -> int:
    bar = _progress(len(args.files), sys.stderr.isatty() and not args.json)
    results, failed = [], 0
    for path in args.files:
        if bar is not None:
            bar.set_description(path.name[:40])
        try:
            doc = dp.ingest(path, password=args.password, progress=(lambda s: bar.set_postfix_str(s)) if bar else None)
            results.append(_doc_summary(doc))
        except DocpipeError as exc:
            failed += 1
            results.append({"name": str(path), "error": str(exc), "error_type": type(exc).__name__})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if args.json:
        _emit(results)
    else:
        for item in results:
            if "error" in item:
                print(f"FAILED  {item['name']}: {item['error']}")
                continue
            print(f"ok      {item['name']}: {item['pages']} pages, {item['sections']} sections, id {item['id'][:12]}")
            for warning in item["warnings"]:
                print(f"        warning: {warning}")
    return EXIT_ERROR if failed else 0


def _cmd_search(dp, args) -> int:
    hits = dp.search(args.file, args.question, k=args.k, budget_tokens=args.budget, password=args.password)
    if args.json:
        _emit([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("No section matches the question.")
    for hit in hits:
        print(f"[{hit.section_id}] {' > '.join(hit.heading_path)} ({hit.pages}, {hit.n_tokens} tokens, score {hit.score:.4f})")
        print(textwrap.indent(textwrap.shorten(hit.text, 400, placeholder=" ..."), "    "))
    return 0


def _questions(args) -> list[str]:
    from docpipe.errors import ConfigError, FileMissingError

    questions = ([args.question] if args.question else []) + list(args.more)
    if args.questions_file:
        try:
            lines = args.questions_file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise FileMissingError(f"no such questions file: {args.questions_file}") from None
        questions += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not questions:
        raise ConfigError("no question given: docpipe ask FILE \"QUESTION\" (or -q, --questions-file)")
    return questions


def _print_answer(answer, *, show_thinking: bool) -> None:
    print(f"Q: {answer.question}\n")
    print(answer.text or "(no answer text)")
    if answer.citations:
        print("\nSources:")
        for number, c in enumerate(answer.citations, 1):
            mark = "quote verified on the page" if c.verified else "NOT VERIFIED against the page text"
            where = f"section {c.section_id} ({c.heading}), {c.pages}" if c.section_id else "not in the given sections"
            print(f"  {number}. {where}: {mark}")
    if answer.thinking:
        if show_thinking:
            print("\nThinking:\n" + textwrap.indent(answer.thinking, "  "))
        else:
            print(f"\n(The model thought first: {len(answer.thinking)} characters; --show-thinking prints them.)")
    if answer.notice:
        print("\n" + textwrap.fill(answer.notice, 100))


def _cmd_ask(dp, args) -> int:
    questions = _questions(args)
    answers = dp.ask_many(args.file, questions, k=args.k, mode=args.mode, password=args.password, use_cache=not args.no_cache)
    if args.manifest:
        manifests = [a.manifest().to_dict() for a in answers]
        args.manifest.write_text(json.dumps(manifests, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.json:
        _emit(answers[0].to_dict() if len(answers) == 1 and args.question and not args.more else [a.to_dict() for a in answers])
        return 0
    for number, answer in enumerate(answers):
        if number:
            print("\n" + "-" * 80 + "\n")
        _print_answer(answer, show_thinking=args.show_thinking)
    return 0


def _cmd_eval(dp, args) -> int:
    from docpipe.eval.retrieval import evaluate_retrieval, format_report

    try:
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        from docpipe.errors import ConfigError

        raise ConfigError(f"--budgets must be comma-separated integers, got {args.budgets!r}") from None
    report = evaluate_retrieval(
        dp,
        args.folder,
        budgets=budgets,
        limit=args.limit,
        baseline=not args.no_baseline,
        progress=sys.stderr.isatty() and not args.json,
    )
    if args.json:
        _emit(report)
    else:
        print(format_report(report))
    return 0


def _cmd_analyze(dp, args) -> int:
    from docpipe.analysis.checklist import CHECKLIST

    if args.list_categories:
        for category in CHECKLIST:
            print(f"{category.name}: {category.question}")
        return 0
    if args.file is None:
        from docpipe.errors import ConfigError

        raise ConfigError("give the contract to analyse: docpipe analyze FILE (or --list-categories)")
    categories = args.categories.split(",") if args.categories else None
    report = dp.analyze(
        args.file,
        categories,
        mode=args.mode,
        password=args.password,
        use_cache=not args.no_cache,
        expand=False if args.no_references else None,
    )
    text = {"md": report.to_markdown, "json": report.to_json, "csv": report.to_csv}[args.format]()
    if args.manifest:
        args.manifest.write_text(report.manifest.to_json() + "\n", encoding="utf-8")
    if args.output:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(report.findings)} categories, report {report.id})", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _cmd_eval_analysis(dp, args) -> int:
    from docpipe.eval.analysis import evaluate_analysis, format_analysis_report

    progress = sys.stderr.isatty() and not args.json
    expand = False if args.no_references else None
    report = evaluate_analysis(dp, args.folder, limit=args.limit, expand=expand, mode=args.mode, progress=progress)
    other = None
    if args.compare_references and not args.no_references:
        other = evaluate_analysis(dp, args.folder, limit=args.limit, expand=False, mode=args.mode, progress=progress)
    if args.json:
        _emit({**report, "without_references": other} if other else report)
    else:
        print(format_analysis_report(report, other))
    return 0


def _cmd_keys(dp, args) -> int:
    from datetime import UTC, datetime

    from docpipe.access.keys import KeyStore, parse_grants

    keys = KeyStore(dp.store.root)
    if args.keys_command == "create":
        secret, key = keys.create(args.user, parse_grants(args.grants), note=args.note)
        if args.json:
            _emit({**key.to_dict(), "key": secret})
        else:
            grants = ", ".join(f"{m}:{r}" for m, r in key.grants.items())
            print(secret)
            print(f"key {key.key_id} for {key.user} ({grants}): shown once, keep it safe; "
                  f"revoke with docpipe keys revoke {key.key_id}", file=sys.stderr)
        return 0
    if args.keys_command == "revoke":
        key = keys.revoke(args.key_id)
        print(f"revoked key {key.key_id} of {key.user}")
        return 0
    listed = keys.keys()
    if args.json:
        _emit([k.to_dict() for k in listed])
        return 0
    if not listed:
        print("No keys: docpipe keys create --user NAME --matter MATTER[:read|write|admin]")
    for key in listed:
        made = datetime.fromtimestamp(key.created, UTC).strftime("%Y-%m-%d %H:%M")
        state = "revoked" if key.revoked else "active"
        grants = ", ".join(f"{m}:{r}" for m, r in key.grants.items())
        note = f"  {key.note}" if key.note else ""
        print(f"{key.key_id}  {state:8} {key.user:16} {grants}  (created {made} UTC){note}")
    return 0


def _cmd_matters(dp, args) -> int:
    from docpipe.access.matters import MatterStore

    store = MatterStore(dp.store.root)
    data = [
        {"matter": m, "documents": [{"id": d.id, "name": d.name, "added_by": d.added_by} for d in store.documents(m)]}
        for m in store.matters()
    ]
    if args.json:
        _emit(data)
        return 0
    if not data:
        print("No matters yet: documents uploaded to docpipe serve go into one (X-Matter, or the key's only matter).")
    for item in data:
        print(f"{item['matter']}: {len(item['documents'])} documents")
        for doc in item["documents"]:
            print(f"    {doc['id'][:12]}  {doc['name']}  (added by {doc['added_by']})")
    return 0


def _cmd_audit(dp, args) -> int:
    from docpipe.access.log import AccessLog

    log = AccessLog(dp.store.root)
    if args.verify:
        intact, lines, broken = log.verify()
        if not intact:
            print(f"docpipe: error: the access log is broken at line {broken} of {lines}: a line was removed or "
                  f"changed ({log.path})", file=sys.stderr)
            return EXIT_ERROR
        print(f"access log intact: {lines} lines, each naming the one before")
        return 0
    entries = log.read(matter=args.matter, user=args.user, document=args.document, since=args.since)
    for entry in entries:
        if args.json:
            print(json.dumps(entry, ensure_ascii=False, sort_keys=True))
            continue
        doc = (entry.get("document") or "")[:12] or "-"
        asked = f" questions {len(entry['questions_sha256'])}" if entry.get("questions_sha256") else ""
        print(f"{entry['time']}  {entry['user']:12} {entry['matter']:16} {entry['action']:16} {doc:12} "
              f"{entry['outcome']}{asked}")
    return 0


def _cmd_rm(dp, args) -> int:
    from dataclasses import asdict

    from docpipe.errors import ConfigError, FileMissingError
    from docpipe.access.keys import check_matter_name
    from docpipe.server.housekeeping import Housekeeper, Removed

    keeper = Housekeeper(dp)
    if args.matter:
        check_matter_name(args.matter)
    if args.delete_matter:
        if not args.matter or args.targets:
            raise ConfigError("--delete-matter deletes a whole matter: docpipe rm --matter NAME --delete-matter")
        removed = keeper.delete_matter(args.matter)
    else:
        if not args.targets:
            raise ConfigError("name what to delete: docpipe rm FILE_OR_ID... (or --matter NAME --delete-matter)")
        removed = Removed()
        for target in args.targets:
            doc_id = _doc_id_of(target, dp)
            if doc_id is None:
                raise FileMissingError(
                    f"no stored document matches {target!r}: give the PDF or its id (docpipe matters)"
                )
            removed += keeper.remove(args.matter, doc_id) if args.matter else keeper.purge(doc_id)
    if args.json:
        _emit(asdict(removed))
    else:
        print(f"removed {removed.documents} matter records, {removed.results} answers and reports, "
              f"{removed.cached_answers} cached answers; {removed.purged} documents left the store")
    return 0


def _doc_id_of(target: str, dp) -> str | None:
    """Returns the id a target names: a PDF's SHA-256, a full id, or an unambiguous id prefix (12+ chars)."""
    from docpipe.errors import ConfigError
    from docpipe.ingest.store import sha256_hex

    path = Path(target)
    if path.is_file():
        return sha256_hex(path.read_bytes())
    lowered = target.lower()
    if len(lowered) < 12 or lowered.strip("0123456789abcdef"):
        return None
    from docpipe.access.matters import MatterStore

    ids = [d for d in dp.store.document_ids() if d.startswith(lowered)]
    matters = MatterStore(dp.store.root)
    ids += [d.id for m in matters.matters() for d in matters.documents(m) if d.id.startswith(lowered)]
    ids = sorted(set(ids))
    if len(ids) > 1:
        raise ConfigError(f"{target!r} matches {len(ids)} documents: give more of the id")
    return ids[0] if ids else None


def _run_ui(argv: list[str]) -> int:
    try:
        from ui.app import main as ui_main
    except ImportError as exc:
        print(f"docpipe: error: the workbench needs Gradio: pip install 'docpipe[ui]' ({exc})", file=sys.stderr)
        return EXIT_ERROR
    return ui_main(argv) or 0


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
        "per-user API keys" if options.access
        else "the server token" if options.token
        else "none (this machine only)"
    )
    print(f"docpipe serve: API {where}/v1 (docs {where}/docs{ui}); authentication: {auth}", file=sys.stderr)
    return serve(dp, options)


_COMMANDS = {
    "ingest": _cmd_ingest,
    "search": _cmd_search,
    "ask": _cmd_ask,
    "eval-retrieval": _cmd_eval,
    "analyze": _cmd_analyze,
    "eval-analysis": _cmd_eval_analysis,
    "serve": _cmd_serve,
    "keys": _cmd_keys,
    "matters": _cmd_matters,
    "audit": _cmd_audit,
    "rm": _cmd_rm,
}


def main(argv: list[str] | None = None) -> int:
    """Returns the process exit code for the `docpipe` command line."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ui"]:
        # The workbench has its own options (host, port, auth, limits); hand them over untouched.
        return _run_ui(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "ui":
        return _run_ui(args.ui_args)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="docpipe: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    if not args.debug:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from docpipe.pipeline import DocPipe

        dp = DocPipe(_settings(args))
        return _COMMANDS[args.command](dp, args)
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
