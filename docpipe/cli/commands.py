"""The commands that work on contracts: ingest, search, ask, analyze, the two evaluations, the workbench and
the server. Each is a few lines over a `DocPipe` method, printing text or, with ``--json``, JSON."""

from __future__ import annotations

import json
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from docpipe.errors import DocpipeError

__all__ = ["EXIT_ERROR", "emit", "run_ui"]

EXIT_ERROR = 1


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True, leave=False)


def emit(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _ingested(doc) -> dict[str, Any]:
    from docpipe.summary import document_summary

    # The CLI's JSON has listed each page warning as its message since the first release.
    summary = document_summary(doc)
    return {**summary, "warnings": [warning["message"] for warning in summary["warnings"]]}


def _cmd_ingest(dp, args) -> int:
    if args.collection is not None:
        from docpipe.cli.collections import ingest_collection

        return ingest_collection(dp, args)
    if args.workers is not None:
        from docpipe.errors import ConfigError

        raise ConfigError("--workers sets how many PDFs a --collection ingest extracts at once: add --collection NAME")
    bar = _progress(len(args.files), sys.stderr.isatty() and not args.json)
    results, failed = [], 0
    for path in args.files:
        if bar is not None:
            bar.set_description(path.name[:40])
        try:
            doc = dp.ingest(path, password=args.password, progress=(lambda s: bar.set_postfix_str(s)) if bar else None)
            results.append(_ingested(doc))
        except DocpipeError as exc:
            failed += 1
            results.append({"name": str(path), "error": str(exc), "error_type": type(exc).__name__})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
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


def _target(dp, args, command: str):
    """Returns what `ask` or `search` asks: the PDF (a path) or the collection ``--collection`` names; with
    ``--collection`` the one positional argument is the question (moved to `args.question`)."""
    from docpipe.errors import ConfigError, FileMissingError

    if args.collection is None:
        if args.file is None:
            raise ConfigError(
                f'give a PDF or a collection: docpipe {command} FILE "QUESTION" or '
                f'docpipe {command} --collection NAME "QUESTION"'
            )
        if args.question is None and not Path(args.file).exists():
            # Most likely a question meant for a collection, --collection forgotten.
            raise FileMissingError(
                f'no such file: {args.file[:80]!r}: docpipe {command} FILE "QUESTION", or '
                f'docpipe {command} --collection NAME "QUESTION" to ask a collection'
            )
        return Path(args.file)
    from docpipe.cli.collections import existing_collection

    # A path here is a PDF given besides --collection: say so rather than ask the path as a question.
    if args.question is not None or (args.file and Path(args.file).exists()):
        raise ConfigError(
            f'give a PDF or --collection, not both: docpipe {command} --collection {args.collection} "QUESTION"'
        )
    args.question = args.file
    return existing_collection(dp, args.collection)


def _cmd_search(dp, args) -> int:
    from docpipe.errors import ConfigError

    target = _target(dp, args, "search")
    if args.question is None:
        raise ConfigError('no question given: docpipe search FILE "QUESTION" (or --collection NAME "QUESTION")')
    hits = dp.search(target, args.question, k=args.k, budget_tokens=args.budget, password=args.password)
    if args.json:
        emit([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("No section matches the question.")
    for hit in hits:
        document = f"{hit.document_name} ({hit.document_id[:12]}) " if args.collection is not None else ""
        print(
            f"{document}[{hit.section_id}] {' > '.join(hit.heading_path)} "
            f"({hit.pages}, {hit.n_tokens} tokens, score {hit.score:.4f})"
        )
        print(textwrap.indent(textwrap.shorten(hit.text, 400, placeholder=" ..."), "    "))
    return 0


def questions_file(path: Path) -> list[str]:
    """Returns the questions of a file, one per line (blank lines and lines starting with # skipped)."""
    from docpipe.errors import FileMissingError

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise FileMissingError(f"no such questions file: {path}") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _questions(args) -> list[str]:
    from docpipe.errors import ConfigError

    questions = ([args.question] if args.question else []) + list(args.more)
    if args.questions_file:
        questions += questions_file(args.questions_file)
    if not questions:
        raise ConfigError(
            'no question given: docpipe ask FILE "QUESTION" or docpipe ask --collection NAME "QUESTION" '
            "(or -q, --questions-file)"
        )
    return questions


def _print_answer(answer, *, show_thinking: bool) -> None:
    _print_heading(answer)
    print(answer.text or "(no answer text)")
    _print_sources(answer, show_thinking=show_thinking)


def _print_heading(answer) -> None:
    print(f"Q: {answer.question}\n")
    if answer.collection and not answer.document_ids:
        print(
            f"Collection {answer.collection}: answered from {answer.document_name} ({answer.document_id[:12]}), "
            "the contract the question names.\n"
        )
    elif answer.collection:
        print(f"Collection {answer.collection}: answered from {len(answer.document_ids)} contracts.\n")


def _print_sources(answer, *, show_thinking: bool, thinking_shown: bool = False) -> None:
    """Prints what follows the answer's text: its checked citations, its thinking (or how long it was; nothing
    when `thinking_shown`, already streamed) and its notice."""
    if answer.citations:
        print("\nSources:")
        for number, c in enumerate(answer.citations, 1):
            mark = "quote verified on the page" if c.verified else "NOT VERIFIED against the page text"
            if c.verified and c.unit == "paragraph":
                mark = "quote verified in the Word file (it has no pages: section and paragraph given)"
            if c.verified and c.ocr:
                mark += " (read by OCR from a scan: check it against the scanned page)"
            where = f"section {c.section_id} ({c.heading}), {c.pages}" if c.section_id else "not in the given sections"
            if answer.collection:
                doc_id = c.document_id or answer.document_id
                where = f"{c.document_name or answer.document_name} ({doc_id[:12]}), {where}"
            print(f"  {number}. {where}: {mark}")
    if answer.thinking and not thinking_shown:
        if show_thinking:
            print("\nThinking:\n" + textwrap.indent(answer.thinking, "  "))
        else:
            print(f"\n(The model thought first: {len(answer.thinking)} characters; --show-thinking prints them.)")
    if answer.notice:
        print("\n" + textwrap.fill(answer.notice, 100))


def _streams(args, questions: list[str]) -> bool:
    """Returns True when the answer is printed as the engine writes it: one question, to a terminal, not --json."""
    return len(questions) == 1 and not args.json and not args.no_stream and sys.stdout.isatty()


def _stream_answer(dp, target, question: str, args):
    """Prints the answer (and, with --show-thinking, the thinking, dimmed) as the engine writes it, then the
    checked citations as `_print_answer` prints them; returns the finished answer. An engine that does not
    stream, a collection and a cached answer come whole, printed exactly as without streaming."""
    import contextlib

    out = sys.stdout
    dim, plain = ("", "") if os.environ.get("NO_COLOR") else ("\x1b[2m", "\x1b[0m")
    state = "start"  # then "thinking" or "answer", as pieces arrive
    streamed, thought = "", False
    answer = None
    events = dp.ask_stream(
        target, question, k=args.k, mode=args.mode, password=args.password, use_cache=not args.no_cache
    )
    with contextlib.closing(events):
        for event in events:
            if event.kind == "done":
                answer = event.answer
                break
            if event.kind == "thinking" and not args.show_thinking:
                continue
            if state == "start":
                out.write(f"Q: {question}\n\n")
            if event.kind == "thinking":
                thought = True
                if state != "thinking":
                    out.write("Thinking:\n  " + dim)
                out.write(event.text.replace("\n", "\n  "))
            else:
                if state == "thinking":
                    out.write(plain + "\n\n")
                streamed += event.text
                out.write(event.text)
            state = event.kind
            out.flush()
    if state == "thinking":  # the stream stopped before any answer text
        out.write(plain + "\n\n")
    if answer is None:
        from docpipe.errors import EngineError

        raise EngineError("the answer stream ended without an answer: ask again, or add --no-stream")
    if state == "start":
        _print_answer(answer, show_thinking=args.show_thinking)
        return answer
    if streamed.strip() != answer.text:
        # The engine's final text is the answer of record (see AnswerEvent); say so rather than leave the draft.
        out.write("\n\nThe final answer:\n" + (answer.text or "(no answer text)"))
    elif not streamed:
        out.write("(no answer text)")
    out.write("\n")
    out.flush()
    _print_sources(answer, show_thinking=args.show_thinking, thinking_shown=thought)
    return answer


def _cmd_ask(dp, args) -> int:
    target = _target(dp, args, "ask")
    questions = _questions(args)
    streaming = _streams(args, questions)
    if streaming:
        answers = [_stream_answer(dp, target, questions[0], args)]
    else:
        answers = dp.ask_many(
            target, questions, k=args.k, mode=args.mode, password=args.password, use_cache=not args.no_cache
        )
    if args.manifest:
        manifests = [a.manifest().to_dict() for a in answers]
        args.manifest.write_text(json.dumps(manifests, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.json:
        emit(
            answers[0].to_dict()
            if len(answers) == 1 and args.question and not args.more
            else [a.to_dict() for a in answers]
        )
        return 0
    if streaming:
        return 0
    for number, answer in enumerate(answers):
        if number:
            print("\n" + "-" * 80 + "\n")
        _print_answer(answer, show_thinking=args.show_thinking)
    return 0


def _budgets(text: str) -> list[int]:
    """Returns the token budgets of a ``--budgets`` option; a ConfigError when they are not integers."""
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        from docpipe.errors import ConfigError

        raise ConfigError(f"--budgets must be comma-separated integers, got {text!r}") from None


def _cmd_eval(dp, args) -> int:
    from docpipe.eval.retrieval import evaluate_retrieval, format_report

    budgets = _budgets(args.budgets)
    report = evaluate_retrieval(
        dp,
        args.folder,
        budgets=budgets,
        limit=args.limit,
        baseline=not args.no_baseline,
        progress=sys.stderr.isatty() and not args.json,
    )
    if args.json:
        emit(report)
    else:
        print(format_report(report))
    return 0


def _cmd_eval_collection(dp, args) -> int:
    from docpipe.eval.collection import evaluate_collection, format_collection_report

    budgets = _budgets(args.budgets)
    report = evaluate_collection(
        dp,
        args.folder,
        collection=args.collection,
        budgets=budgets,
        limit=args.limit,
        naive=not args.no_baseline,
        workers=args.workers,
        progress=sys.stderr.isatty() and not args.json,
    )
    if args.json:
        emit(report)
    else:
        print(format_collection_report(report))
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
        emit({**report, "without_references": other} if other else report)
    else:
        print(format_analysis_report(report, other))
    return 0


def _cmd_eval_answers(dp, args) -> int:
    from docpipe.errors import ConfigError
    from docpipe.eval.answers import evaluate_answers, format_answers_report, load_questions

    if args.per_category is not None and args.per_category < 1:
        raise ConfigError("--per-category must be at least 1 (leave it out to ask every record)")
    questions = load_questions(args.questions)
    progress = sys.stderr.isatty() and not args.json
    report = evaluate_answers(
        dp, args.folder, questions, per_category=args.per_category, limit=args.limit, progress=progress
    )
    if args.json:
        emit(report)
    else:
        print(format_answers_report(report))
    return 0


def run_ui(argv: list[str]) -> int:
    try:
        from docpipe.ui.app import main as ui_main
    except ImportError as exc:
        print(
            f"docpipe: error: the workbench needs Gradio: pip install 'docpipe-contracts[ui]' ({exc})", file=sys.stderr
        )
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
        "per-user API keys" if options.access else "the server token" if options.token else "none (this machine only)"
    )
    print(f"docpipe serve: API {where}/v1 (docs {where}/docs{ui}); authentication: {auth}", file=sys.stderr)
    return serve(dp, options)
