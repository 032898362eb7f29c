"""The commands that ask contracts: search, ask, analyze and the evaluations. Each is a few lines over a
`DocPipe` method, printing text or, with ``--json``, JSON in the one shape docs/cli-json.md gives per command."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from docpipe.cli.collections import existing_collection
from docpipe.cli.config import questions_file
from docpipe.cli.matter import matter_document, owner_scope
from docpipe.cli.output import emit

__all__ = [
    "cmd_analyze",
    "cmd_ask",
    "cmd_eval",
    "cmd_eval_analysis",
    "cmd_eval_answers",
    "cmd_eval_collection",
    "cmd_eval_terms",
    "cmd_search",
]


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
        return matter_document(dp, args, Path(args.file), password=args.password)
    # A path here is a PDF given besides --collection: say so rather than ask the path as a question.
    if args.question is not None or (args.file and Path(args.file).exists()):
        raise ConfigError(
            f'give a PDF or --collection, not both: docpipe {command} --collection {args.collection} "QUESTION"'
        )
    args.question = args.file
    return existing_collection(dp, args, args.collection)


def _logged(dp, args, action: str, target, questions: list[str]):
    """The access-log line of asking `target` (a document of the command's matter, or its collection)."""
    from docpipe.collection.handle import Collection

    scope = owner_scope(dp, args)
    if isinstance(target, Collection):
        return scope.logged(action, None, questions, detail=f"collection {target.name}")
    return scope.logged(action, target.id, questions)


def cmd_search(dp, args) -> int:
    from docpipe.errors import ConfigError

    target = _target(dp, args, "search")
    if args.question is None:
        raise ConfigError('no question given: docpipe search FILE "QUESTION" (or --collection NAME "QUESTION")')
    with _logged(dp, args, "search", target, [args.question]):
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


_EXTRACTIVE_HEADER = "Extractive answer (no language model configured):"


def _print_answer(answer, *, show_thinking: bool, header: bool = True, notice: bool = True) -> None:
    """Prints the answer; without `header` its first line when it is the offline answers' header, without
    `notice` its notice (several answers print each once: the header first, the notice last)."""
    _print_heading(answer)
    text = answer.text or "(no answer text)"
    if not header and text.startswith(_EXTRACTIVE_HEADER):
        text = text.split("\n", 1)[1].lstrip("\n") if "\n" in text else text
    print(text)
    _print_sources(answer, show_thinking=show_thinking, notice=notice)


def _print_heading(answer) -> None:
    print(f"Q: {answer.question}\n")
    if answer.each is not None:
        return  # the text says it was asked of each contract
    if answer.collection and not answer.document_ids:
        print(
            f"Collection {answer.collection}: answered from {answer.document_name} ({answer.document_id[:12]}), "
            "the contract the question names.\n"
        )
    elif answer.collection:
        print(f"Collection {answer.collection}: answered from {len(answer.document_ids)} contracts.\n")


def _print_sources(answer, *, show_thinking: bool, thinking_shown: bool = False, notice: bool = True) -> None:
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
    if answer.notice and notice:
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
        target,
        question,
        k=args.k,
        mode=args.mode,
        password=args.password,
        use_cache=not args.no_cache,
        each=getattr(args, "each", None),
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


def cmd_ask(dp, args) -> int:
    from docpipe.collection.handle import Collection
    from docpipe.errors import ConfigError
    from docpipe.storage.store import atomic_write

    target = _target(dp, args, "ask")
    if args.each is not None and not isinstance(target, Collection):
        flag = "--each" if args.each else "--no-each"
        raise ConfigError(f"{flag} is for a collection's contracts: ask with --collection NAME")
    questions = _questions(args)
    streaming = _streams(args, questions)
    with _logged(dp, args, "ask", target, questions):
        if streaming:
            answers = [_stream_answer(dp, target, questions[0], args)]
        else:
            answers = dp.ask_many(
                target,
                questions,
                k=args.k,
                mode=args.mode,
                password=args.password,
                use_cache=not args.no_cache,
                each=args.each,
            )
    if args.manifest:
        manifests = [a.manifest().to_dict() for a in answers]
        atomic_write(Path(args.manifest), (json.dumps(manifests, indent=2, ensure_ascii=False) + "\n").encode())
    if args.json:
        emit([a.to_dict() for a in answers])  # a list for one question too: one shape for scripts
        return 0
    if streaming:
        return 0
    last = len(answers) - 1
    for number, answer in enumerate(answers):
        if number:
            print("\n" + "-" * 80 + "\n")
        # The offline header and the notice are said once for the command: the first answer's header, the notice
        # after the last answer (when it is the same for every answer).
        same_notice = all(a.notice == answer.notice for a in answers)
        _print_answer(
            answer,
            show_thinking=args.show_thinking,
            header=number == 0,
            notice=number == last or not same_notice,
        )
    return 0


def _budgets(text: str) -> list[int]:
    """Returns the token budgets of a ``--budgets`` option; a ConfigError when they are not integers."""
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        from docpipe.errors import ConfigError

        raise ConfigError(f"--budgets must be comma-separated integers, got {text!r}") from None


def cmd_eval(dp, args) -> int:
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
        baseline = {"recall_at_budget": None, **report["baseline"]}  # null with --no-baseline: the same keys
        emit({**report, "baseline": baseline})
    else:
        print(format_report(report))
    return 0


def cmd_eval_collection(dp, args) -> int:
    from docpipe.eval.collection import evaluate_collection, format_collection_report

    if args.each:
        return _eval_each(dp, args)
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
        emit({**report, "naive": report.get("naive")})  # null with --no-baseline: the same keys either way
    else:
        print(format_collection_report(report))
    return 0


def _eval_each(dp, args) -> int:
    from docpipe.eval.each import evaluate_each, format_each_report

    report = evaluate_each(
        dp,
        args.folder,
        collection=args.collection,
        limit=args.limit,
        pooled=not args.no_baseline,
        workers=args.workers,
        progress=sys.stderr.isatty() and not args.json,
    )
    if args.json:
        emit(report)
    else:
        print(format_each_report(report))
    return 0


def cmd_eval_terms(dp, args) -> int:
    from docpipe.errors import ConfigError
    from docpipe.eval.terms import evaluate_terms, format_terms_report

    if args.misses < 0:
        raise ConfigError("--misses must be 0 or more")
    report = evaluate_terms(
        dp,
        args.folder,
        collection=args.collection,
        limit=args.limit,
        misses=args.misses,
        workers=args.workers,
        progress=sys.stderr.isatty() and not args.json,
    )
    if args.json:
        emit(report)
    else:
        print(format_terms_report(report))
    return 0


def cmd_analyze(dp, args) -> int:
    from docpipe.analysis.checklist import CHECKLIST
    from docpipe.storage.store import atomic_write

    if args.list_categories:
        for category in CHECKLIST:
            print(f"{category.name}: {category.question}")
        return 0
    if args.file is None:
        from docpipe.errors import ConfigError

        raise ConfigError("give the contract to analyse: docpipe analyze FILE (or --list-categories)")
    categories = args.categories.split(",") if args.categories else None
    doc = matter_document(dp, args, Path(args.file), password=args.password)
    with owner_scope(dp, args).logged("analyze", doc.id, categories):
        report = dp.analyze(
            doc,
            categories,
            mode=args.mode,
            password=args.password,
            use_cache=not args.no_cache,
            expand=False if args.no_references else None,
        )
    text = {"md": report.to_markdown, "json": report.to_json, "csv": report.to_csv}[args.format]()
    if args.manifest:
        atomic_write(Path(args.manifest), (report.manifest.to_json() + "\n").encode())
    if args.output:
        atomic_write(Path(args.output), text.encode())
        print(f"wrote {args.output} ({len(report.findings)} categories, report {report.id})", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_eval_analysis(dp, args) -> int:
    from docpipe.eval.analysis import evaluate_analysis, format_analysis_report

    progress = sys.stderr.isatty() and not args.json
    expand = False if args.no_references else None
    report = evaluate_analysis(dp, args.folder, limit=args.limit, expand=expand, mode=args.mode, progress=progress)
    other = None
    if args.compare_references and not args.no_references:
        other = evaluate_analysis(dp, args.folder, limit=args.limit, expand=False, mode=args.mode, progress=progress)
    if args.json:
        emit({**report, "without_references": other})  # null unless --compare-references
    else:
        print(format_analysis_report(report, other))
    return 0


def cmd_eval_answers(dp, args) -> int:
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
