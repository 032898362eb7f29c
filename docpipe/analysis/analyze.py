"""Contract analysis: the clause checklist (`docpipe.analysis.checklist`) run over one contract as one engine batch.

Each category is retrieved on its own (question plus the wording such clauses use, within
`analysis.budget_tokens`, with the definitions and cross-referenced sections the retrieved clauses lean on),
then all categories go to the engine together, in thinking mode, through the answer core's cached batch
(`docpipe.answer.core.generate_cached`: findings are cached under their document and matter). A finding is
``present`` only when a quote backing it is found verbatim in one of the sections the model was given for it;
``absent`` means the listed sections were searched and held no such clause; anything else is ``uncertain``.
Without a language model the report lists, per category, the best-matching clauses as ``candidate`` (for a
reviewer, not a finding) or ``not_found``. The report itself is `docpipe.analysis.report`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from docpipe.analysis.checklist import Category
from docpipe.analysis.report import CategoryFinding, ContractReport, Status
from docpipe.answer.core import (
    CacheOpener,
    answer_cache_key,
    build_request,
    context_budget,
    generate_cached,
    generative_answer,
)
from docpipe.answer.extractive import extractive_answer, prime_sentences
from docpipe.audit import AuditManifest
from docpipe.errors import ConfigError
from docpipe.retrieve.fusion import select_context
from docpipe.types import Citation
from docpipe.version import __version__

if TYPE_CHECKING:
    from docpipe.answer.answering import Answering
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine, GenerationResult
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings
    from docpipe.types import Document, Hit

__all__ = ["analyze", "candidate_finding", "check_mode"]

logger = logging.getLogger(__name__)

MODES = ("think", "no_think", "auto")


def check_mode(mode: str) -> str:
    """Returns `mode` when analysis knows it (``think``, ``no_think``, ``auto``); a `ConfigError` otherwise."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}: use think (the default for analysis), no_think or auto")
    return mode


def analyze(
    index: SearchIndex,
    categories: list[Category],
    *,
    answering: Answering,
    mode: str = "think",
    use_cache: bool = True,
    expand: bool | None = None,
    started: float | None = None,
) -> ContractReport:
    """Returns the checklist report for `categories` (from `select_categories`) over `index`'s document (see
    the module docstring): judged by `answering.engine`, or candidates when it is None (read with the
    document's stored sentence embeddings). `expand` defaults to `analysis.expand_references`; `started` is
    the `time.perf_counter()` the report's `seconds` count from (default: now), so a caller can count loading
    the document too. `DocPipe.analyze` calls this."""
    from docpipe.answer.prompts import ANALYSIS_PROMPT_VERSION, PROMPT_VERSION
    from docpipe.audit import model_revision

    check_mode(mode)
    started = time.perf_counter() if started is None else started
    engine, embedder, settings, fingerprint = (
        answering.engine,
        answering.embedder,
        answering.settings,
        answering.fingerprint,
    )
    options = settings.analysis
    document = index.doc
    budget = min(options.budget_tokens, context_budget(settings, engine))
    expand = options.expand_references if expand is None else expand
    vectors = embedder.embed([c.query for c in categories])
    contexts = [
        select_context(
            index,
            c.query,
            retrieval=settings.retrieval,
            chunking=settings.chunking,
            k=options.k,
            budget_tokens=budget,
            expand=expand,
            query=v,
        )
        for c, v in zip(categories, vectors)
    ]
    if engine is None:

        def candidates() -> list[CategoryFinding]:
            # Every category's sentences in one embedding call, then each category reads them from the cache.
            prime_sentences([h for hits in contexts for h in hits], embedder, index.sentence_cache)
            return [
                candidate_finding(index, c, hits, v, embedder=embedder, settings=settings)
                for c, hits, v in zip(categories, contexts, vectors)
            ]

        findings = answering.offline(index, candidates)
    else:
        findings = _judge(
            document,
            categories,
            contexts,
            engine=engine,
            settings=settings,
            fingerprint=fingerprint,
            mode=mode,
            cache=answering.cache_for(use_cache),
        )
    # Analysis thinks unless told not to (wants_thinking with analysis=True).
    thinking = engine is not None and mode != "no_think"
    manifest = AuditManifest(
        kind="report",
        document_sha256=document.id,
        document_name=document.name,
        engine=engine.name if engine else "extractive",
        model=engine.model if engine else None,
        model_revision=model_revision(
            settings.engine, engine.name if engine else None, engine.model if engine else None
        ),
        thinking=thinking,
        # The checklist's questions ride on the cited-QA system prompt: a change to either changes output.
        prompt_version=f"{ANALYSIS_PROMPT_VERSION}+{PROMPT_VERSION}" if engine else "",
        settings_fingerprint=settings.settings_fingerprint(),
        index_fingerprint=fingerprint,
        section_ids=tuple(dict.fromkeys(h.section_id for hits in contexts for h in hits)),
        docpipe_version=__version__,
    )
    report = ContractReport(
        document_id=document.id,
        document_name=document.name,
        mode="generative" if engine else "extractive",
        findings=findings,
        manifest=manifest,
        seconds=round(time.perf_counter() - started, 3),
    )
    logger.info("analysed %s: %d categories in %.1f s", document.name, len(findings), report.seconds)
    return report


def _searched(hits: list[Hit]) -> list[dict[str, Any]]:
    return [{"section_id": h.section_id, "heading": h.heading, "pages": h.pages, "role": h.role} for h in hits]


def candidate_finding(
    index: SearchIndex,
    category: Category,
    hits: list[Hit],
    query: Any,
    *,
    embedder: Embedder,
    settings: Settings,
    min_score: float | None = None,
) -> CategoryFinding:
    """Returns the offline finding for `category` over `hits` (no language model): the best-matching clauses
    as ``candidate`` when the best scores at least `min_score` (by default `analysis.min_candidate_score`), else
    ``not_found``. `query` is the embedding of `category.query`."""
    options = settings.analysis
    answer = extractive_answer(
        category.query,
        hits,
        index.doc,
        embedder,
        clauses=options.candidate_clauses,
        cache=index.sentence_cache,
        query=query,
    )
    best = answer.citations[0].score if answer.citations else None
    if best is not None and best >= (options.min_candidate_score if min_score is None else min_score):
        status: Status = "candidate"
        quotes = answer.citations
        note = "Best-matching clauses, for review (the matching sentence is marked): no language model judged them."
    else:
        status, quotes = "not_found", []
        note = f"No clause resembling this one in the {len(hits)} sections searched."
    return CategoryFinding(
        category=category.name,
        group=category.group,
        question=category.question,
        status=status,
        quotes=quotes,
        note=note,
        searched=_searched(hits),
        score=round(best, 4) if best is not None else None,
        hits=hits,
    )


def _judge(
    doc: Document,
    chosen: list[Category],
    contexts: list[list[Hit]],
    *,
    engine: Engine,
    settings: Settings,
    fingerprint: str,
    mode: str,
    cache: CacheOpener | None,
) -> list[CategoryFinding]:
    """Returns the model's findings: every category in one engine batch (cached ones from `cache`), each quote
    checked against the sections given for that category (a quote from elsewhere in the document is
    unverified)."""
    from docpipe.answer.prompts import analysis_question
    from docpipe.engine.base import PRIORITY_ANALYSIS

    questions = [analysis_question(c.name, c.question, c.note) for c in chosen]
    requests = [
        replace(
            build_request(q, hits, doc, settings=settings.engine, mode=mode, analysis=True),  # type: ignore[arg-type]
            priority=PRIORITY_ANALYSIS,
        )
        for q, hits in zip(questions, contexts)
    ]
    keys = [
        answer_cache_key(doc, r, q, hits, engine=engine, settings=settings.engine, fingerprint=fingerprint)
        for q, r, hits in zip(questions, requests, contexts)
    ]

    def finish(i: int, result: GenerationResult) -> CategoryFinding:
        answer = generative_answer(
            questions[i], result, contexts[i], doc, engine=engine.name, model=engine.model, fingerprint=fingerprint
        )
        finding = _finding(chosen[i], answer.text, answer.citations, contexts[i], result.error)
        finding.thinking = result.thinking
        return finding

    # Findings quote the contract: cached under the document and matter, so deleting either removes them.
    findings = generate_cached(
        engine,
        requests,
        keys,
        doc=doc,
        finish=finish,
        load=CategoryFinding.from_dict,
        dump=CategoryFinding.to_dict,
        cache=cache,
    )
    for finding, hits in zip(findings, contexts):
        finding.hits = hits
    return findings


def _finding(
    category: Category, text: str, citations: list[Citation], hits: list[Hit], error: str | None
) -> CategoryFinding:
    from docpipe.answer.prompts import parse_finding

    status, note = parse_finding(text)
    verified = [c for c in citations if c.verified]
    if error:
        result: Status = "uncertain"
        note = f"The engine failed on this category: {error}"
    elif status == "present" and not verified:
        result = "uncertain"
        note = "The model reported such a clause, but none of its quotes is in the sections it was given. " + note
    elif status == "absent":
        result = "absent"
        note = note or f"Searched {len(hits)} sections; no such clause."
    elif status is None:
        result = "uncertain"
        note = "The model's reply did not follow the checklist format: read it and the sections searched."
    else:
        result = status  # type: ignore[assignment]
    return CategoryFinding(
        category=category.name,
        group=category.group,
        question=category.question,
        status=result,
        quotes=citations,
        note=note.strip(),
        searched=_searched(hits),
    )
