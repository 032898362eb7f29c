"""The answer core: the steps every way of answering shares (`DocPipe.ask`, `ask_many`, `ask_stream`,
`analyze`, grids), as functions over explicit arguments (the document's index, the engine, the answer cache,
the settings, the index fingerprint), never over a `DocPipe`; `docpipe.answer.answering.Answering` holds
those arguments and runs the steps in order.

- `check_question`: the one check that a question is not empty.
- `context_budget`: the retrieval budget, shrunk to what fits the engine's context window.
- `plan_answers`: retrieval for a batch of questions (one embedding call), plus each question's engine request
  (`build_request`) and answer-cache key (`answer_cache_key`) when there is an engine.
- `generate_cached`: cache look-ups, one engine batch for the misses, each result finished and stored under its
  document and matter unless the engine failed on it. `generate_answers` runs it for answers; analysis runs
  it for checklist findings.
- `generative_answer`, `finish_answer`, `stamp`: an engine result made a checked `Answer` with its provenance;
  `extractive_answers` when there is no engine.
- `cache_call`, `cache_put`, `cached_answer`: the answer cache, whose failures are logged and skipped, and an
  answer read back from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from docpipe.answer.extractive import extractive_answer, prime_sentences
from docpipe.answer.prompts import PROMPT_VERSION, SYSTEM_PROMPT, build_user_prompt, extract_quotes, wants_thinking
from docpipe.answer.verify import locate_quote, verify_quote
from docpipe.audit import model_revision
from docpipe.engine.base import DIRECT_SAMPLING, THINKING_SAMPLING, GenerationRequest
from docpipe.errors import ConfigError, StoreError
from docpipe.events import emit as emit_metric
from docpipe.retrieve.fusion import select_context
from docpipe.types import Answer, Citation, Document, Hit

if TYPE_CHECKING:
    from docpipe.answer.cache import AnswerCache
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine, GenerationResult
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import EngineSettings, Settings

__all__ = [
    "AnswerPlan",
    "CacheOpener",
    "answer_cache_key",
    "build_request",
    "cache_call",
    "cache_put",
    "cached_answer",
    "check_question",
    "context_budget",
    "extractive_answers",
    "finish_answer",
    "generate_answers",
    "generate_cached",
    "generative_answer",
    "grounded_request",
    "plan_answers",
    "stamp",
    "with_document",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Opens (or returns the open) answer cache; called only when the cache is used, so a cache that cannot be
# opened costs nothing to callers with use_cache=False and is skipped like any other cache failure.
CacheOpener = Callable[[], "AnswerCache"]

# System prompt, section labels and the question, in tokens, with room to spare.
PROMPT_OVERHEAD_TOKENS = 1024


def check_question(question: str | None, *, which: str = "the question") -> str:
    """Returns `question` as given when it holds more than whitespace; otherwise raises a `ConfigError` that
    names it (`which`: "the question", "a question", "question 3") and says what to do.

    >>> check_question("Who pays?")
    'Who pays?'
    >>> check_question("  ", which="question 2")
    Traceback (most recent call last):
    docpipe.errors.ConfigError: question 2 is empty: ask something about the document
    """
    if not question or not question.strip():
        raise ConfigError(f"{which} is empty: ask something about the document")
    return question


def context_budget(settings: Settings, engine: object | None) -> int:
    """Returns the context budget in tokens (`retrieval.budget_tokens`), shrunk to what fits the engine's
    context window beside the prompt's instructions, the thinking budget and the answer; a `ConfigError`
    when the window leaves no room for contract text. `engine` is read only for its ``max_model_len``."""
    budget = settings.retrieval.budget_tokens
    window = getattr(engine, "max_model_len", None)
    if not window:
        return budget
    engine_settings = settings.engine
    reserve = engine_settings.max_answer_tokens + (engine_settings.max_thinking_tokens or 0) + PROMPT_OVERHEAD_TOKENS
    if window - reserve < 256:
        raise ConfigError(
            f"the model's context window ({window} tokens) leaves no room for contract text after "
            f"{reserve} tokens of instructions, thinking and answer: raise DOCPIPE_ENGINE__MAX_MODEL_LEN "
            "or lower DOCPIPE_ENGINE__MAX_THINKING_TOKENS / MAX_ANSWER_TOKENS"
        )
    return min(budget, window - reserve)


def build_request(
    question: str,
    hits: list[Hit],
    doc: Document,
    *,
    settings: EngineSettings,
    mode: ThinkingMode,
    analysis: bool = False,
) -> GenerationRequest:
    """Returns the engine request for `question` over the sections `hits`: the grounded prompt, thinking on or
    off (`mode`, with ``auto`` thinking for analysis questions), Qwen3's sampling for that mode, the seed and
    the token limits from `settings`."""
    prompt = build_user_prompt(question, hits, document_name=doc.name, document_id=doc.id)
    return grounded_request(question, SYSTEM_PROMPT, prompt, settings=settings, mode=mode, analysis=analysis)


def grounded_request(
    question: str,
    system: str,
    prompt: str,
    *,
    settings: EngineSettings,
    mode: ThinkingMode,
    analysis: bool = False,
) -> GenerationRequest:
    """Returns the engine request of a system prompt and a user `prompt` asking `question`: thinking on or off
    (`mode`), Qwen3's sampling for that mode, the seed and the token limits from `settings` (one contract's
    prompt in `build_request`, several contracts' in `docpipe.answer.collection`)."""
    thinking = wants_thinking(question, mode, analysis=analysis)
    base = THINKING_SAMPLING if thinking else DIRECT_SAMPLING
    # Without a budget the thinking comes out of max_tokens too.
    thinking_room = 0 if settings.max_thinking_tokens or not thinking else 4096
    sampling = replace(base, seed=settings.seed, max_tokens=settings.max_answer_tokens + thinking_room)
    return GenerationRequest(
        messages=({"role": "system", "content": system}, {"role": "user", "content": prompt}),
        thinking=thinking,
        sampling=sampling,
        max_thinking_tokens=settings.max_thinking_tokens if thinking else None,
    )


class NamedEngine(Protocol):
    """What a cache key reads of an engine: an `Engine`, or a stand-in naming one that runs elsewhere."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...


def answer_cache_key(
    doc: Document,
    request: GenerationRequest,
    question: str,
    hits: list[Hit],
    *,
    engine: NamedEngine | None,
    settings: EngineSettings,
    fingerprint: str,
) -> str:
    """Returns the answer-cache key of `request`: the document, question, mode, model and its revision, prompt
    version, sampling, the index `fingerprint`, the sections given, the JSON schema the reply must follow (when
    it has one) and, for a matter's view of the document, the matter (cache hits never cross a matter)."""
    from docpipe.answer.cache import cache_key

    extra: dict[str, Any] = {
        "fingerprint": fingerprint,
        "sections": [h.section_id for h in hits],
        # New weights under the same model name must not be served the old weights' answers.
        "model_revision": model_revision(settings, engine.name if engine else None, engine.model if engine else None),
    }
    if doc.matter is not None:
        extra["matter"] = doc.matter
    if request.json_schema is not None:
        # A reply bound to a schema (a typed cell's kind and options) is never served for another schema or none.
        extra["json_schema"] = request.json_schema
    return cache_key(
        document_id=doc.id,
        question=question,
        mode="think" if request.thinking else "no_think",
        model=engine.model if engine else "",
        prompt_version=PROMPT_VERSION,
        sampling={**request.sampling.as_dict(), "max_thinking_tokens": request.max_thinking_tokens},
        engine=engine.name if engine else "",
        extra=extra,
    )


def cache_call(cache: CacheOpener, method: str, *args: Any, **kwargs: Any) -> Any:
    """Returns the answer cache's reply to `method` (``get``, ``put``, ``delete_document`` ...), or None when the
    cache fails (cannot be opened or reached: a `StoreError`), which is logged: a cache must not cost the answer."""
    try:
        return getattr(cache(), method)(*args, **kwargs)
    except StoreError as exc:
        logger.warning("answer cache unavailable (%s); answering without it", exc)
        return None


def cache_put(cache: CacheOpener, key: str, value: dict[str, Any], doc: Document) -> None:
    """Stores `value` under `key`, filed under the document and its matter: deleting either removes it."""
    cache_call(cache, "put", key, value, document_id=doc.id, matter=doc.matter)


@dataclass(frozen=True, slots=True)
class AnswerPlan:
    """A batch of questions made ready for the engine: per question its context (sections in document order),
    its embedding and, when there is an engine, its request and answer-cache key (else both lists are empty)."""

    questions: list[str]
    vectors: Any  # one row per question
    contexts: list[list[Hit]]
    requests: list[GenerationRequest]
    keys: list[str]


def plan_answers(
    index: SearchIndex,
    questions: Sequence[str],
    *,
    engine: Engine | None,
    embedder: Embedder,
    settings: Settings,
    fingerprint: str,
    k: int | None = None,
    mode: ThinkingMode | None = None,
    analysis: bool = False,
    queries: Sequence[str] | None = None,
) -> AnswerPlan:
    """Returns the plan for answering `questions` about `index`'s document: every question checked, embedded in
    one call (most of retrieval's time is the question embedding), its context selected within the budget
    that fits `engine` and, with an engine, its request (`mode`, default `engine.thinking`) and cache key.

    `queries` (one per question) is what retrieval searches for instead of the question itself: a question
    asked of a collection with the words naming the contract taken out (`docpipe.retrieve.collection`)."""
    budget = context_budget(settings, engine)
    for question in questions:
        check_question(question, which="a question")
    questions = list(questions)
    searched = list(queries) if queries is not None else questions
    if len(searched) != len(questions):
        raise ConfigError(f"{len(searched)} retrieval queries for {len(questions)} questions: give one per question")
    vectors: Any = embedder.embed(searched) if questions else []  # one row per question
    if k is None and engine is None:
        # No model reads the context: the clause picker looks further than a prompt would hold.
        k = settings.engine.extractive_k
    contexts = [
        select_context(
            index, q, retrieval=settings.retrieval, chunking=settings.chunking, k=k, budget_tokens=budget, query=v
        )
        for q, v in zip(searched, vectors)
    ]
    requests: list[GenerationRequest] = []
    keys: list[str] = []
    if engine is not None:
        doc = index.doc
        thinking = mode or settings.engine.thinking
        requests = [
            build_request(q, hits, doc, settings=settings.engine, mode=thinking, analysis=analysis)
            for q, hits in zip(questions, contexts)
        ]
        keys = [
            answer_cache_key(doc, r, q, hits, engine=engine, settings=settings.engine, fingerprint=fingerprint)
            for q, r, hits in zip(questions, requests, contexts)
        ]
    return AnswerPlan(questions, vectors, contexts, requests, keys)


def generate_cached(
    engine: Engine,
    requests: Sequence[GenerationRequest],
    keys: Sequence[str],
    *,
    doc: Document,
    finish: Callable[[int, GenerationResult], T],
    load: Callable[[dict[str, Any]], T],
    dump: Callable[[T], dict[str, Any]],
    cache: CacheOpener | None,
    metric: str | None = None,
) -> list[T]:
    """Returns one item per request, in order: `load` of the cached value where `keys[i]` is in the answer
    cache, else `finish(i, result)` of the engine's result, the misses sent to `engine` as one batch. A finished
    item is stored (`dump`) under `doc` and its matter unless the engine failed on it. With `cache` None the
    cache is neither read nor written; `metric` names the hits/misses event to emit (`docpipe.events`)."""
    items: list[T | None] = [None] * len(requests)
    if cache is not None:
        for i, key in enumerate(keys):
            stored = cache_call(cache, "get", key)
            if stored is not None:
                items[i] = load(stored)
    todo = [i for i, item in enumerate(items) if item is None]
    if cache is not None and metric:
        emit_metric(metric, hits=len(items) - len(todo), misses=len(todo))
    results = engine.generate([requests[i] for i in todo]) if todo else []
    for i, result in zip(todo, results):
        item = finish(i, result)
        items[i] = item
        if cache is not None and not result.error:
            cache_put(cache, keys[i], dump(item), doc)
    return items  # type: ignore[return-value]


def cached_answer(stored: dict[str, Any], doc: Document) -> Answer:
    """Returns an answer read back from the answer cache, named as this caller sees `doc` (the cache may hold
    it under another upload's name): `generate_answers` and the streamed answer both read it so."""
    return with_document(Answer.from_dict(stored), doc)


def with_document(answer: Answer, doc: Document) -> Answer:
    """Returns `answer` naming `doc` as it is seen (its name in this matter or collection), on the answer
    and on its citations of that document (or of none yet)."""
    answer.document_name = doc.name
    answer.citations = [
        replace(c, document_id=doc.id, document_name=doc.name) if c.document_id in ("", doc.id) else c
        for c in answer.citations
    ]
    return answer


def stamp(answer: Answer, doc: Document, *, settings: Settings) -> Answer:
    """Returns `answer` with what its audit manifest needs beyond the answer itself: the document's name, the
    settings fingerprint, the model revision and (for a model's answer) the prompt version."""
    with_document(answer, doc)
    answer.settings_fingerprint = settings.settings_fingerprint()
    answer.model_revision = model_revision(settings.engine, answer.engine, answer.model)
    answer.prompt_version = PROMPT_VERSION if answer.mode == "generative" else ""
    return answer


def generative_answer(
    question: str,
    result: GenerationResult,
    hits: list[Hit],
    doc: Document,
    *,
    engine: str,
    model: str,
    fingerprint: str = "",
) -> Answer:
    """Returns the model's answer with its quotes checked: each double-quoted span is looked up in the
    sections the model was given (`hits`); a quote that is not there is kept but flagged ``verified=False``,
    even when the same words are elsewhere in the document."""
    citations: list[Citation] = []
    elsewhere = 0
    for quote, section_id in extract_quotes(result.text):
        found = locate_quote(quote, hits, doc, section_id=section_id)
        if found is not None:
            hit = found.hit
            marks = doc.citation_marks(found.page_start, found.page_end)
            citations.append(
                Citation(hit.section_id, hit.heading, found.page_start, found.page_end, quote, True, **marks)
            )
            continue
        cited = next((h for h in hits if h.section_id == section_id), None)
        elsewhere += verify_quote(quote, doc)[0]
        citations.append(
            Citation(
                section_id=section_id or "",
                heading=cited.heading if cited else "",
                page_start=cited.page_start if cited else 0,
                page_end=cited.page_end if cited else 0,
                quote=quote,
                verified=False,
                unit=doc.unit,
            )
        )
    notice = None
    if result.error:
        notice = f"The engine failed on this question: {result.error}"
    elif not result.text:
        notice = "The model returned no answer text" + (
            " (its thinking was cut by the thinking budget)." if result.thinking_truncated else "."
        )
    elif any(not c.verified for c in citations):
        notice = (
            "Some quotes were not found in the sections given to the model and are marked unverified: "
            "do not rely on them."
        )
        if elsewhere:
            notice += (
                f" {elsewhere} of them {'is' if elsewhere == 1 else 'are'} elsewhere in the document, in sections "
                "the model was not given, so the answer cannot have read them in context."
            )
    elif not citations:
        notice = "The answer quotes nothing from the document: check it against the cited sections."
    return Answer(
        question=question,
        text=result.text,
        mode="generative",
        citations=citations,
        engine=engine,
        document_id=doc.id,
        fingerprint=fingerprint,
        section_ids=[h.section_id for h in hits],
        thinking=result.thinking,
        model=model,
        notice=notice,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )


def finish_answer(
    question: str,
    result: GenerationResult,
    hits: list[Hit],
    request: GenerationRequest,
    doc: Document,
    *,
    engine: Engine,
    settings: Settings,
    fingerprint: str,
) -> Answer:
    """Returns the checked, stamped answer for one engine result (`ask_many` and `ask_stream` both end here;
    storing it in the answer cache is the caller's step)."""
    answer = generative_answer(
        question, result, hits, doc, engine=engine.name, model=engine.model, fingerprint=fingerprint
    )
    answer.thinking_enabled = request.thinking
    return stamp(answer, doc, settings=settings)


def generate_answers(
    plan: AnswerPlan,
    doc: Document,
    *,
    engine: Engine,
    settings: Settings,
    fingerprint: str,
    cache: CacheOpener | None,
) -> list[Answer]:
    """Returns one `Answer` per planned question, in order: cached ones from `cache` (None: no cache), the rest
    from one engine batch, checked, stamped and cached (the ``answer_cache`` metric counts hits and misses)."""

    def finish(i: int, result: GenerationResult) -> Answer:
        return finish_answer(
            plan.questions[i],
            result,
            plan.contexts[i],
            plan.requests[i],
            doc,
            engine=engine,
            settings=settings,
            fingerprint=fingerprint,
        )

    return generate_cached(
        engine,
        plan.requests,
        plan.keys,
        doc=doc,
        finish=finish,
        load=lambda stored: cached_answer(stored, doc),
        dump=Answer.to_dict,
        cache=cache,
        metric="answer_cache",
    )


def extractive_answers(
    index: SearchIndex, plan: AnswerPlan, *, embedder: Embedder, settings: Settings, fingerprint: str
) -> list[Answer]:
    """Returns one extractive `Answer` per planned question (no language model): the clauses of its context
    that best answer it, quoted verbatim, or "nothing found" when none scores `Settings.extractive_floor`;
    every context's sentences are embedded in one call first."""
    prime_sentences([h for hits in plan.contexts for h in hits], embedder, index.sentence_cache)
    options, floor = settings.engine, settings.extractive_floor()
    return [
        stamp(
            extractive_answer(
                q,
                hits,
                index.doc,
                embedder,
                clauses=options.extractive_clauses,
                min_score=floor,
                fingerprint=fingerprint,
                cache=index.sentence_cache,
                query=v,
            ),
            index.doc,
            settings=settings,
        )
        for q, hits, v in zip(plan.questions, plan.contexts, plan.vectors)
    ]
