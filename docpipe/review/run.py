"""Filling a review grid: every document's cells planned, looked up in the cell cache, and the rest sent to the
engine as one stream of batches at bulk priority.

Per document (row): its index is opened (a document that cannot be read fails its row, with the reason, and
the grid goes on); every column's sections are retrieved (the columns' queries are embedded once for the whole
grid); then, with a language model, one request per cell:

- layout ``shared`` (``auto``'s choice for cells that answer directly): the cells of a document share one
  context: the whole document when it fits
  `review.shared_budget_tokens` (and the model's window), else the sections retrieved for all its columns
  taken best-first in turn until the budget is full, in document order. The system prompt and that context come first and the cell's question last, so the engine's
  prefix cache computes a document's context once for all its cells;
- layout ``per_cell`` (``auto``'s choice for cells that think, the default): each cell gets only its own
  column's sections. A thinking cell is decode-bound, and decode reads the cell's whole context at every token:
  a shared context several times longer costs more decode than its prefix cache saves (benchmarks/GPU.md).

Each cell is cached by content (`docpipe.answer.core.answer_cache_key`: the document, the question, the sections
given, mode, model and revision, sampling, prompt version, index fingerprint, matter), as soon as its batch
returns: a grid killed halfway and run again recomputes only the cells it lacks. Cells go to the engine in
batches of `review.batch_size` in document order, two batches in flight, so the engine never idles between
them and an interactive question (a lower priority value) goes ahead of the grid's waiting batches. Without a
language model each cell is read offline (`docpipe.review.offline`), cached the same way.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from docpipe.analysis.checklist import select_categories
from docpipe.answer.core import (
    answer_cache_key,
    build_request,
    cache_put,
    check_question,
    context_budget,
    generative_answer,
)
from docpipe.answer.prompts import PROMPT_VERSION, REVIEW_PROMPT_VERSION, parse_review, review_question
from docpipe.audit import model_revision
from docpipe.errors import ConfigError, DocpipeError
from docpipe.retrieve.fusion import select_context
from docpipe.review.grid import Cell, Column, ReviewGrid, ReviewManifest, Row
from docpipe.review.offline import cached_cell, offline_row
from docpipe.version import __version__

if TYPE_CHECKING:
    from docpipe.answer.answering import Answering
    from docpipe.engine.base import Engine, GenerationRequest, GenerationResult
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings
    from docpipe.types import Document, Hit

__all__ = [
    "MAX_COLUMNS",
    "MAX_QUESTION_CHARS",
    "EngineIdentity",
    "PendingCell",
    "ReviewCancelled",
    "ReviewProgress",
    "columns_for",
    "finish_grid",
    "model_cell",
    "resolve_layout",
    "row_contexts",
    "row_requests",
    "run_grid",
]

logger = logging.getLogger(__name__)

MAX_COLUMNS = 200  # a grid is read by a person: more columns than this is a mistake, not a review
MAX_QUESTION_CHARS = 2000  # a column's question goes into every row's prompts: a question, not a document
_IN_FLIGHT = 2  # engine batches submitted at once: one running, one ready to start
# Qwen3 tokens of a section's label and tags in the prompt (id, pages, heading), beside its text: measured
# about 50 on CUAD contracts (benchmarks/review_grid.py), so a shared context stays within its budget.
SECTION_MARKUP_TOKENS = 50


class ReviewCancelled(DocpipeError):
    """The grid was cancelled before it finished; the cells already done are in the cell cache."""


@dataclass(frozen=True, slots=True)
class ReviewProgress:
    """Where a running grid stands: cells done (from the cache or computed, failed ones included) of `total`,
    and the cell just finished (`row`, `column` indexes into the grid's rows and columns) so a view can fill
    it in."""

    done: int
    total: int
    cached: int
    failed: int
    document: str = ""
    row: int = -1
    column: int = -1
    cell: Cell | None = None


def columns_for(
    questions: Sequence[str] | None = None,
    *,
    checklist: bool = False,
    categories: Sequence[str] | None = None,
    columns: Sequence[Column] | None = None,
    key_terms: bool | Sequence[str] = False,
) -> list[Column]:
    """Returns the grid's columns: the built-in key terms (`key_terms` True for all, or their ids), the checklist
    categories named (all 41 with `checklist` and no names), the given `columns` (typed, e.g. from a columns
    file), then the free `questions` in the order given, each typed by a ``::kind`` suffix
    (``"Governing law?::jurisdiction"``); a `ConfigError` for none, a duplicate or too many."""
    from docpipe.terms.catalog import key_term_columns
    from docpipe.terms.columns import parse_question

    chosen: list[Column] = []
    if key_terms:
        try:
            chosen.extend(key_term_columns(None if key_terms is True else list(key_terms)))
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from None
    if categories or checklist:
        for c in select_categories(list(categories) if categories else None):
            chosen.append(Column(c.name, c.question, c.query, group=c.group, note=c.note, category=True))
    chosen.extend(columns or ())
    for question in questions or ():
        text = check_question(question, which="a question")
        if len(text) > MAX_QUESTION_CHARS:
            raise ConfigError(
                f"a question of {len(text)} characters: keep each column's question under {MAX_QUESTION_CHARS}"
            )
        asked, kind, options = parse_question(text)
        asked = check_question(asked, which="a question")
        chosen.append(Column(" ".join(asked.split()), asked, asked, kind=kind, options=options))
    if not chosen:
        raise ConfigError(
            'a review needs columns: give questions (-q "..."), --checklist, --categories NAME, --columns FILE '
            "or the key terms"
        )
    keys = [c.key.casefold() for c in chosen]
    repeated = sorted({c.key for c in chosen if keys.count(c.key.casefold()) > 1})
    if repeated:
        raise ConfigError(f"the same column is asked twice: {', '.join(repeated)}; give each question once")
    if len(chosen) > MAX_COLUMNS:
        raise ConfigError(f"{len(chosen)} columns: a grid takes at most {MAX_COLUMNS}; split the questions")
    return chosen


@dataclass(frozen=True, slots=True)
class EngineIdentity:
    """What a grid's prompts, budgets and cache keys need of its engine (name, model, context window) without
    the engine itself: the Ray executor's engines live in its generation actors."""

    name: str
    model: str
    max_model_len: int | None = None


@dataclass(slots=True)
class PendingCell:
    """A cell waiting for the engine."""

    row: int
    column: int
    question: str
    request: GenerationRequest
    key: str
    hits: list[Hit]
    doc: Document


def run_grid(
    rows: list[Row],
    columns: list[Column],
    open_index: Callable[[int], SearchIndex],
    *,
    answering: Answering,
    use_cache: bool = True,
    mode: str = "think",
    layout: str | None = None,
    progress: Callable[[ReviewProgress], None] | None = None,
    cancel: threading.Event | None = None,
    collection: str = "",
    matter: str | None = None,
) -> ReviewGrid:
    """Returns the grid of `rows` x `columns` (see the module docstring). `open_index(r)` opens row r's index
    (a `DocpipeError` fails that row); an offline row's work runs with the document's stored sentence
    embeddings (`Answering.offline`); `use_cache` False neither reads nor writes the cell cache; `cancel` set stops
    the grid between batches with `ReviewCancelled`."""
    engine, embedder, settings, fingerprint = (
        answering.engine,
        answering.embedder,
        answering.settings,
        answering.fingerprint,
    )
    cache = answering.cache_for(use_cache)
    layout = resolve_layout(layout, settings, mode)
    started = time.perf_counter()
    created = _now()
    total = len(rows) * len(columns)
    cells: list[list[Cell | None]] = [[None] * len(columns) for _ in rows]
    counts = {"done": 0, "cached": 0, "failed": 0}
    tokens = {"prompt": 0, "completion": 0}
    prefix_cached: list[int] = []  # per computed cell, when the engine reports what its prefix cache served
    lock = threading.Lock()

    def record(r: int, c: int, cell: Cell, document: str) -> None:
        with lock:
            cells[r][c] = cell
            counts["done"] += 1
            counts["cached"] += cell.cached
            counts["failed"] += cell.status == "failed"
            snapshot = ReviewProgress(
                counts["done"], total, counts["cached"], counts["failed"], document, row=r, column=c, cell=cell
            )
        if progress is not None:
            progress(snapshot)

    def check_cancel() -> None:
        if cancel is not None and cancel.is_set():
            raise ReviewCancelled(
                f"review cancelled after {counts['done']} of {total} cells; run it again to resume from the cache"
            )

    # Offline key terms are read from words: a grid of them alone embeds nothing (and loads no embedder).
    needs_vectors = engine is not None or any(not c.term for c in columns)
    vectors = embedder.embed([c.query for c in columns]) if needs_vectors else [None] * len(columns)
    per_cell_budget = min(settings.analysis.budget_tokens, context_budget(settings, engine))
    shared_budget = _shared_budget(settings, engine)
    batch_size = settings.review.batch_size or settings.engine.max_batch_size
    pool = ThreadPoolExecutor(max_workers=_IN_FLIGHT, thread_name_prefix="docpipe-review") if engine else None
    in_flight: list[tuple[list[PendingCell], Future[list[GenerationResult]]]] = []
    batch: list[PendingCell] = []

    def collect(items: list[PendingCell], future: Future[list[GenerationResult]]) -> None:
        assert engine is not None
        try:
            results = future.result()
        except DocpipeError as exc:  # the engine refused the batch: its cells fail, the grid goes on
            for item in items:
                record(item.row, item.column, Cell("failed", note=f"The engine failed: {exc}"), item.doc.name)
            return
        for item, result in zip(items, results):
            with lock:
                tokens["prompt"] += result.prompt_tokens
                tokens["completion"] += result.completion_tokens
                # What the engine's prefix cache served (vLLM: RequestOutput.num_cached_tokens; a server's
                # usage.prompt_tokens_details.cached_tokens), when the engine reports it.
                cached_tokens = result.extra.get("cached_tokens")
                if cached_tokens is not None:
                    prefix_cached.append(int(cached_tokens))
            cell = model_cell(item, result, engine=engine, fingerprint=fingerprint)
            if cache is not None and cell.status != "failed":
                cache_put(cache, item.key, cell.to_dict(), item.doc)
            record(item.row, item.column, cell, item.doc.name)

    def submit(items: list[PendingCell]) -> None:
        assert engine is not None and pool is not None
        while len(in_flight) >= _IN_FLIGHT:
            collect(*in_flight.pop(0))
        check_cancel()
        in_flight.append((items, pool.submit(engine.generate, [i.request for i in items])))

    try:
        for r, row in enumerate(rows):
            check_cancel()
            if row.error:
                for c in range(len(columns)):
                    record(r, c, Cell("failed", note=row.error), row.name)
                continue
            try:
                index = open_index(r)
            except DocpipeError as exc:
                rows[r] = replace(row, error=str(exc))
                for c in range(len(columns)):
                    record(r, c, Cell("failed", note=str(exc)), row.name)
                continue
            doc = index.doc
            rows[r] = Row(doc.id, doc.name)
            # Offline, a key term is read from the whole document by its reader: it needs no retrieval.
            contexts = row_contexts(
                index, columns, vectors, settings=settings, budget=per_cell_budget, skip_terms=engine is None
            )
            if engine is None:
                work = functools.partial(
                    offline_row, r, index, columns, contexts, vectors, embedder, settings, fingerprint, cache, record
                )
                if any(c.kind in ("text", "yes_no") and not c.term for c in columns):
                    answering.offline(index, work)  # the checklist's picker reads the stored sentence vectors
                else:
                    work()  # typed readers read words, not vectors: no sentence table to load or make
                continue
            for item in row_requests(
                r, index, columns, contexts, engine=engine, settings=settings, fingerprint=fingerprint,
                mode=mode, layout=layout, shared_budget=shared_budget,
            ):  # fmt: skip
                cell = cached_cell(cache, item.key)
                if cell is not None:
                    record(r, item.column, cell, doc.name)
                    continue
                batch.append(item)
                if len(batch) >= batch_size:
                    submit(batch)
                    batch = []
        if batch:
            submit(batch)
        while in_flight:
            collect(*in_flight.pop(0))
    finally:
        if pool is not None:
            # Stopped early (cancelled, or an error): a batch the engine already runs is waited for and its cells
            # cached, so a rerun does not compute them again; batches not started are dropped.
            for items, future in in_flight:
                if not future.cancel():
                    try:
                        collect(items, future)
                    except Exception as exc:  # noqa: BLE001 - the grid is already stopping for another reason
                        logger.warning("a review batch finished with an error while the grid stopped: %s", exc)
            pool.shutdown(wait=True)
    return finish_grid(
        rows,
        columns,
        cells,
        engine=engine,
        settings=settings,
        fingerprint=fingerprint,
        mode=mode,
        layout=layout,
        tokens=tokens,
        prefix_cached=prefix_cached,
        started=started,
        created=created,
        collection=collection,
        matter=matter,
    )


def finish_grid(
    rows: list[Row],
    columns: list[Column],
    cells: list[list[Cell | None]],
    *,
    engine: Engine | EngineIdentity | None,
    settings: Settings,
    fingerprint: str,
    mode: str,
    layout: str,
    tokens: dict[str, int],
    prefix_cached: list[int],
    started: float,
    created: str,
    collection: str,
    matter: str | None,
) -> ReviewGrid:
    """Returns the finished grid and its manifest (what made it: engine, model, prompts, settings, documents,
    tokens, which cells came from the cache)."""
    total = len(rows) * len(columns)
    finished = [[cell for cell in row if cell is not None] for row in cells]
    if engine is not None and any(c.term for c in columns):
        from docpipe.terms.derive import derive_row

        for row_cells in finished:  # a model's key terms: computed dates from the row's verified values
            if len(row_cells) == len(columns):
                derive_row(columns, row_cells)
    manifest = ReviewManifest(
        engine=engine.name if engine else "extractive",
        model=engine.model if engine else None,
        model_revision=model_revision(
            settings.engine, engine.name if engine else None, engine.model if engine else None
        ),
        mode=mode if engine else "extractive",
        layout=layout if engine else "per_cell",
        prompt_version=f"{REVIEW_PROMPT_VERSION}+{PROMPT_VERSION}" if engine else "",
        settings_fingerprint=settings.settings_fingerprint(),
        index_fingerprint=fingerprint,
        collection=collection,
        matter=matter,
        documents_sha256=tuple(r.document_id for r in rows),
        created=created,
        finished=_now(),
        seconds=round(time.perf_counter() - started, 3),
        cells=total,
        cached_cells=[(r, c) for r, row in enumerate(finished) for c, cell in enumerate(row) if cell.cached],
        prompt_tokens=tokens["prompt"],
        completion_tokens=tokens["completion"],
        prefix_cached_tokens=sum(prefix_cached) if prefix_cached else None,
        docpipe_version=__version__,
    )
    grid = ReviewGrid(rows=rows, columns=columns, cells=finished, manifest=manifest)
    logger.info("review grid %d x %d in %.1f s: %s", len(rows), len(columns), manifest.seconds, grid.summary())
    return grid


def resolve_layout(layout: str | None, settings: Settings, mode: str) -> str:
    """Returns the prompt layout the grid uses: `layout`, else the settings', with ``auto`` resolved by `mode`."""
    layout = layout or settings.review.layout
    if layout not in ("auto", "shared", "per_cell"):
        raise ConfigError(f"unknown layout {layout!r}: use auto, shared or per_cell")
    if layout == "auto":
        # Cells that think are decode-bound: each running cell reads its whole context at every generated
        # token, so a 13k-token shared context costs more decode than its prefix cache saves in prefill
        # (benchmarks/GPU.md). Cells that answer directly are prefill-bound: the shared context wins.
        layout = "per_cell" if mode != "no_think" else "shared"
    return layout


def row_contexts(
    index: SearchIndex,
    columns: list[Column],
    vectors: Any,
    *,
    settings: Settings,
    budget: int,
    skip_terms: bool = False,
) -> list[list[Hit]]:
    """Returns, per column, the sections retrieved from the row's document for its question (none for a
    built-in key term with `skip_terms`: offline, its reader reads the whole document)."""
    return [
        []
        if skip_terms and column.term
        else select_context(
            index,
            column.query,
            retrieval=settings.retrieval,
            chunking=settings.chunking,
            k=settings.analysis.k,
            budget_tokens=budget,
            expand=settings.analysis.expand_references,
            query=vector,
        )
        for column, vector in zip(columns, vectors)
    ]


def row_requests(
    r: int,
    index: SearchIndex,
    columns: list[Column],
    contexts: list[list[Hit]],
    *,
    engine: Engine | EngineIdentity,
    settings: Settings,
    fingerprint: str,
    mode: str,
    layout: str,
    shared_budget: int,
) -> list[PendingCell]:
    """Returns row `r`'s cells as engine requests at bulk priority, each with its cell-cache key: a shared
    context for all of them (`layout` shared) or each column's own sections. A typed column's request asks for
    JSON of its kind's schema (`docpipe.terms.model.typed_request`), which its cache key holds."""
    from docpipe.engine.base import PRIORITY_BULK
    from docpipe.terms.model import typed_question, typed_request

    doc = index.doc
    shared = _shared_context(index, contexts, shared_budget) if layout == "shared" else None
    items = []
    for c, column in enumerate(columns):
        hits = shared if shared is not None else contexts[c]
        if column.kind != "text":
            question = typed_question(column)
            request = typed_request(column, hits, doc, settings=settings.engine, mode=mode)
        else:
            question = review_question(column.key, column.question, column.note)
            request = replace(
                build_request(question, hits, doc, settings=settings.engine, mode=mode, analysis=True),  # type: ignore[arg-type]
                priority=PRIORITY_BULK,
            )
        key = answer_cache_key(
            doc,
            request,
            question,
            hits,
            engine=engine,
            settings=settings.engine,
            fingerprint=fingerprint,
        )
        items.append(PendingCell(r, c, question, request, key, hits, doc))
    return items


def _shared_budget(settings: Settings, engine: Engine | EngineIdentity | None) -> int:
    """Returns the token budget of a document's shared context: `review.shared_budget_tokens`, within what the
    model's window leaves beside instructions, thinking and answer."""
    widened = settings.model_copy(
        update={
            "retrieval": settings.retrieval.model_copy(update={"budget_tokens": settings.review.shared_budget_tokens})
        }
    )
    return context_budget(widened, engine)


def _order(hit: Hit) -> tuple[int, int, str]:
    digits = "".join(ch for ch in hit.section_id if ch.isdigit())
    return (int(digits) if digits else 0, hit.page_start, hit.section_id)


def _shared_context(index: SearchIndex, contexts: list[list[Hit]], budget: int) -> list[Hit]:
    """Returns one context for all of a document's cells: the whole document when it fits `budget` tokens (no
    retrieval miss is possible then); otherwise each column's sections taken in turn, best first (the first of
    every column, then the second ...), each section once, while they fit. In document order."""
    if sum(s.n_tokens + SECTION_MARKUP_TOKENS for s in index.doc.sections) <= budget:
        return index.sections()
    ranked = [sorted(hits, key=lambda h: (h.role != "front_matter", h.rank)) for hits in contexts]
    chosen: dict[str, Hit] = {}
    used = 0
    depth = max((len(hits) for hits in ranked), default=0)
    for level in range(depth):
        for hits in ranked:
            if level >= len(hits) or hits[level].section_id in chosen:
                continue
            hit = hits[level]
            cost = hit.n_tokens + SECTION_MARKUP_TOKENS
            if used + cost > budget:
                continue
            chosen[hit.section_id] = hit
            used += cost
    return sorted(chosen.values(), key=_order)


def model_cell(
    item: PendingCell, result: GenerationResult, *, engine: Engine | EngineIdentity, fingerprint: str
) -> Cell:
    """Returns the cell of the model's reply: its quotes checked against the sections the cell was given; never
    ``present`` without a verified quote. A typed cell's JSON reply is read by `docpipe.terms.model`, its value
    checked against what the readers find in its quote."""
    from docpipe.terms.model import typed_column, typed_model_cell

    searched = [h.section_id for h in item.hits]
    if result.error:
        return Cell("failed", note=f"The engine failed on this cell: {result.error}", searched=searched)
    typed = typed_column(item.request)
    if typed is not None:
        return typed_model_cell(typed, result, item.hits, item.doc)
    answer = generative_answer(
        item.question, result, item.hits, item.doc, engine=engine.name, model=engine.model, fingerprint=fingerprint
    )
    status, short, note = parse_review(answer.text)
    verified = [q for q in answer.citations if q.verified]
    if status == "present" and not verified:
        status = "uncertain"
        note = "The model reported such a clause, but none of its quotes is in the sections it was given. " + note
    elif status == "absent":
        note = note or f"Searched {len(item.hits)} sections; no such clause."
    elif status is None:
        status = "uncertain"
        note = "The model's reply did not follow the review format: read it and the sections searched."
    citations = [replace(q, document_id=item.doc.id, document_name=item.doc.name) for q in answer.citations]
    return Cell(
        status,  # type: ignore[arg-type]
        answer=short if status != "absent" else (short or "not stated"),
        quotes=citations,
        note=note.strip(),
        searched=searched,
        thinking=result.thinking,
    )


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")
