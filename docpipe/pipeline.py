"""`DocPipe`: the one object the CLI, the UI, the notebooks and the tests use to ingest, search and ask.

The facade only: it holds the settings, the store, the loaded indexes, the lazily loaded embedder, engine and
answer cache, and the extraction slots, and hands them as explicit arguments to the stages that do the work:
`docpipe.ingest.build` (index build, load, access), `docpipe.retrieve.fusion` (ranking and context),
`docpipe.answer.core` (requests, cache keys, the cached batch, finished answers), `docpipe.answer.streaming`
and `docpipe.analysis.analyze`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from docpipe.access.store_key import store_sealer
from docpipe.answer import core
from docpipe.answer.stored_vectors import with_stored_vectors
from docpipe.collection.handle import AddProgress, AddReport, Collection
from docpipe.collection.mixin import CollectionMixin
from docpipe.errors import ConfigError, InputError
from docpipe.ingest import build
from docpipe.ingest.build import BatchProgress, Source
from docpipe.ingest.slots import ExtractionSlots
from docpipe.retrieve.collection import CollectionIndex
from docpipe.retrieve.fusion import SearchIndex, context_limits, fit_budget, select_context
from docpipe.review.mixin import ReviewMixin
from docpipe.settings import Settings, load_settings
from docpipe.storage.collections import Member
from docpipe.storage.store import Store, sha256_hex
from docpipe.types import Answer, Document, Hit

if TYPE_CHECKING:
    from docpipe.analysis.report import ContractReport
    from docpipe.answer.cache import AnswerCache
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.answer.streaming import AnswerEvent
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine

__all__ = ["AddProgress", "AddReport", "Collection", "DocPipe", "Member", "Source"]

logger = logging.getLogger(__name__)

DocLike = Document | str | Path | bytes
Progress = Callable[[str], None]

_KEEP_LOADED = 16


def _unnamed(doc_id: str) -> str:
    """Returns what a document is called to a caller who gave no name: never the name another caller stored."""
    return f"document {doc_id[:12]}"


T = TypeVar("T")


class DocPipe(CollectionMixin, ReviewMixin):
    """Documents, search hits, answers and checklist reports for contracts: the public entry point.

    >>> dp = DocPipe(Settings.preset("test"))               # doctest: +SKIP
    >>> doc = dp.ingest("samples/master_services_agreement.pdf")  # doctest: +SKIP
    >>> dp.ask(doc, "What is the notice period for termination for convenience?").citations[0].pages  # doctest: +SKIP
    'p. 9'
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.settings = settings if settings is not None else load_settings()
        self.store = Store(self.settings.store_root(), sealer=store_sealer(self.settings))
        self._embedder = embedder
        self._loaded: OrderedDict[tuple[str, str], SearchIndex] = OrderedDict()
        self._engine: Engine | None | _Unset = _UNSET if engine is None else engine
        self._owns_engine = engine is None  # an engine passed in belongs to the caller, who closes it
        self._cache: AnswerCache | None = None
        # Lazy parts are created once even when several threads (UI users, API callers) arrive together.
        self._init_lock = threading.RLock()
        # One limit on concurrent extractions for every caller of this object (API, workbench, CLI): each
        # runs a worker process; documents already in the store never wait for a slot.
        extraction = self.settings.extraction
        self._slots = ExtractionSlots(extraction.max_concurrent, wait_s=extraction.queue_wait_s)
        # Proving a second password starts a worker too: guesses must not spawn processes without bound.
        self._password_checks = ExtractionSlots(extraction.max_concurrent, wait_s=extraction.queue_wait_s)
        self._collection_indexes: dict[tuple[str, str, str], CollectionIndex] = {}
        self._collection_lock = threading.RLock()
        if embedder is not None and self.settings.embedding.model != embedder.name:
            # A custom embedder must not share index entries with the configured one.
            self.settings = self.settings.model_copy(
                update={"embedding": self.settings.embedding.model_copy(update={"model": embedder.name})}
            )
        self.fingerprint = self.settings.index_fingerprint()

    @property
    def embedder(self) -> Embedder:
        """Returns the embedder, loaded on first use (it imports torch for real models)."""
        with self._init_lock:
            if self._embedder is None:
                from docpipe.embed.base import load_embedder

                self._embedder = load_embedder(self.settings.embedding)
            return self._embedder

    # -- ingestion ---------------------------------------------------------------------------
    def ingest(
        self,
        source: Source,
        *,
        password: str | None = None,
        name: str | None = None,
        progress: Progress | None = None,
        embed_progress: BatchProgress | None = None,
        owner: str | None = None,
    ) -> Document:
        """Returns the ingested `Document` (pages with statuses, sections), from the store when it is there.

        `progress` hears each stage by name (``extracting with pypdfium2``, ``embedding 412 passages``);
        `embed_progress` hears (batches done, batches in all) as the passages are embedded, the slow stage, from
        (0, all) on. Neither is called for a document the store holds; the vectors never depend on them.

        A document not in the store waits for an extraction slot (`extraction.max_concurrent`, shared by
        every caller of this object; `owner`, e.g. a server's user, holds at most all but one of them) and
        raises `BusyError` after `extraction.queue_wait_s`. Raises a `DocpipeError` subclass for input that
        cannot be read: missing, empty, not a PDF, encrypted without the right password, malformed, no text
        layer, over the time bound.
        """
        data, label = build.read_source(source, name)
        doc_id = sha256_hex(data)
        stages = progress or (lambda _stage: None)
        return self._load_or_build(doc_id, data, label, password, stages, owner, embed_progress).doc

    def document(
        self,
        doc_id: str,
        *,
        password: str | None = None,
        authorized: bool = False,
        name: str | None = None,
        matter: str | None = None,
    ) -> Document | None:
        """Returns the stored document with this id (None when the store does not hold it), seen under
        `name` and scoped to `matter` when given: asking through it caches answers per matter and names
        the document as that matter knows it.

        An encrypted PDF's text needs its `password`, unless `authorized` says the caller checked the
        right to it already (a server's per-key grant); a wrong or missing password raises as `ingest` does.
        """
        if not isinstance(doc_id, str) or len(doc_id) != 64 or doc_id.strip("0123456789abcdef"):
            return None
        index = self._loaded.get((doc_id, self.fingerprint)) or self._load_index(doc_id)
        if index is None:
            source = self.store.load_source(doc_id)
            if source is None:
                return None
            index = self._load_or_build(doc_id, source, name or _unnamed(doc_id), password, lambda _s: None)
        elif not authorized and index.doc.password_check:
            # Named as this caller knows it: the stored name is the first uploader's, maybe of another matter.
            self._check_access(index.doc, password, self.store.load_source(doc_id), name=name or _unnamed(doc_id))
        self._remember((doc_id, self.fingerprint), index)
        return replace(index.doc, name=name or index.doc.name, matter=matter)

    def delete_document(self, doc_id: str) -> bool:
        """Returns True when anything of the document was stored; afterwards nothing is: its PDF, extracted
        text, indexes and cached answers are gone from the store and the answer cache, and it is no longer a
        member of any collection (those of every matter included)."""
        with self._init_lock:
            for key in [k for k in self._loaded if k[0] == doc_id]:
                del self._loaded[key]
        removed = self.forget_answers(doc_id)
        member = False
        for records in self._all_collection_stores():
            for name in records.containing(doc_id):
                member = bool(records.remove(name, [doc_id])) or member
        return self.store.delete_document(doc_id) or bool(removed) or member

    def forget_answers(self, doc_id: str) -> int:
        """Returns how many cached answers about the document were removed from the answer cache."""
        return int(core.cache_call(self._answer_cache, "delete_document", doc_id) or 0)

    def forget_matter(self, matter: str) -> int:
        """Returns how many cached answers asked in `matter` were removed from the answer cache."""
        return int(core.cache_call(self._answer_cache, "delete_matter", matter) or 0)

    def sweep_answers(self, max_age_s: float) -> int:
        """Returns how many cached answers older than `max_age_s` were removed (a retention policy)."""
        return int(core.cache_call(self._answer_cache, "sweep", max_age_s) or 0)

    def _load_or_build(
        self,
        doc_id: str,
        data: bytes,
        label: str,
        password: str | None,
        progress: Progress,
        owner: str | None = None,
        embed_progress: BatchProgress | None = None,
    ) -> SearchIndex:
        key = (doc_id, self.fingerprint)
        index = self._loaded.get(key)
        if index is None:
            index = self._load_index(doc_id)
        built = False
        if index is None:
            with self._slots.take(label, owner=owner):
                index = self._loaded.get(key) or self._load_index(doc_id)  # built while this caller waited?
                if index is None:
                    index = self._build_index(doc_id, data, label, password, progress, embed_progress)
                    built = True  # its password was checked on the way
        # The same bytes may be stored under another caller's name (of another matter, even): this caller
        # sees, and hears errors about, the document under the name it gave.
        if not built:
            self._check_access(index.doc, password, data, name=label)
        self._remember(key, index)
        return build.view(index, replace(index.doc, name=label))

    def _check_access(self, doc: Document, password: str | None, data: bytes | None, *, name: str) -> None:
        """Hands stored text of a password-protected PDF out only to a caller who can open the PDF; errors name
        the document `name`, as this caller knows it."""
        build.check_access(
            doc, password, data, name=name, slots=self._password_checks, settings=self.settings.extraction
        )

    def _build_index(
        self,
        doc_id: str,
        data: bytes,
        label: str,
        password: str | None,
        progress: Progress,
        embed_progress: BatchProgress | None = None,
    ) -> SearchIndex:
        settings = self.settings
        doc = build.extract(
            self.store,
            doc_id,
            data,
            label,
            password,
            settings=settings.extraction,
            fingerprint=self.fingerprint,
            progress=progress,
        )
        self._check_access(doc, password, data, name=label)
        return build.build_index(
            doc,
            store=self.store,
            embedder=self.embedder,
            settings=settings,
            fingerprint=self.fingerprint,
            progress=progress,
            embed_progress=embed_progress,
        )

    def _load_index(self, doc_id: str) -> SearchIndex | None:
        return build.load_index(
            doc_id,
            store=self.store,
            embedder=self.embedder,
            retrieval=self.settings.retrieval,
            fingerprint=self.fingerprint,
        )

    def _remember(self, key: tuple[str, str], index: SearchIndex) -> None:
        self._loaded[key] = index
        self._loaded.move_to_end(key)
        while len(self._loaded) > _KEEP_LOADED:
            self._loaded.popitem(last=False)

    def index(self, doc: DocLike, *, password: str | None = None) -> SearchIndex:
        """Returns the document's `SearchIndex` (its passages, dense and BM25 scores, defined terms and
        cross-references), loaded from the store or built; a `Document` is seen under its own name and matter.
        An encrypted PDF needs its `password`, as in `ingest`."""
        if isinstance(doc, Document):
            index = self._loaded.get((doc.id, self.fingerprint)) or self._load_index(doc.id)
            source = None
            if index is None or (index.doc.password_check and doc.password_check != index.doc.password_check):
                # Rebuilding, or a Document that did not come from opening the PDF: the bytes decide.
                source = self.store.load_source(doc.id)
                if source is None:
                    raise InputError(
                        f"document {doc.name} ({doc.id[:12]}) is not in the store at {self.store.root}: "
                        "ingest the PDF again"
                    )
            if index is None:
                index = self._build_index(doc.id, source, doc.name, password, lambda _s: None)
            elif source is not None:
                self._check_access(index.doc, password, source, name=doc.name)
            self._remember((doc.id, self.fingerprint), index)
            return build.view(index, doc)
        data, label = build.read_source(doc, None)
        return self._load_or_build(sha256_hex(data), data, label, password, lambda _s: None)

    # -- questions ---------------------------------------------------------------------------
    def rank(self, doc: DocLike | Collection, question: str, *, password: str | None = None) -> list[Hit]:
        """Returns every section that matches `question`, best first, with no budget applied (over a
        collection: those of the contracts it names, or of the contracts whose passages rank best)."""
        core.check_question(question)
        if isinstance(doc, Collection):
            return self._collection_rank(doc, question, k=self.settings.retrieval.k, password=password)[1]
        return self.index(doc, password=password).rank(question)

    def search(
        self,
        doc: DocLike | Collection,
        question: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        password: str | None = None,
    ) -> list[Hit]:
        """Returns the top `k` sections for `question` (default 4) that fit in the token budget together; over
        a collection each hit names its document (`Hit.document_id`, `document_name`)."""
        k, budget = context_limits(self.settings.retrieval, k, budget_tokens)
        return fit_budget(self.rank(doc, question, password=password), budget, k)

    def context(
        self,
        doc: DocLike | Collection,
        question: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        password: str | None = None,
        expand: bool | None = None,
        _query: Any = None,
    ) -> list[Hit]:
        """Returns the sections that go to the model with `question`, in document order: the top `k`
        that fit in the budget, plus the document's front matter (title, parties, date) when pinned, plus
        (with `expand`, default `retrieval.expand_references`) the definitions and cross-referenced sections
        those sections use, in the budget left (their `role` says which).

        Over a collection: the context of the contract the question names (searched without the words that
        name it), or the best sections of the contracts it names or, naming none, of the whole collection,
        each contract's front matter first, grouped by contract."""
        if isinstance(doc, Collection):
            return self._collection_context(
                doc, question, k=k, budget_tokens=budget_tokens, password=password, expand=expand
            )[1]
        index = self.index(doc, password=password)
        core.check_question(question)
        return select_context(
            index,
            question,
            retrieval=self.settings.retrieval,
            chunking=self.settings.chunking,
            k=k,
            budget_tokens=budget_tokens,
            expand=expand,
            query=_query,
        )

    # -- answers -----------------------------------------------------------------------------
    @property
    def engine(self) -> Engine | None:
        """Returns the answer engine the settings select (loaded on first use), or None: extractive answers."""
        with self._init_lock:
            return self._load_engine()

    def _load_engine(self) -> Engine | None:
        if self._engine is _UNSET:
            from docpipe.engine import load_engine
            from docpipe.engine.batcher import BatchingEngine

            settings = self.settings.engine
            engine = load_engine(settings, cache_root=self.store.root / "vllm-cache")
            batches_itself = getattr(engine, "continuous_batching", False)
            if engine is not None and settings.max_batch_size > 1 and not batches_itself:
                # An engine that runs one batch at a time (vllm.LLM; the echo engine stands in for it) has
                # callers in threads (UI, API users) share its batches instead of queueing one by one, the
                # most urgent first. An engine that takes requests as they come (a model server, AsyncLLM:
                # continuous batching, priority scheduling) gets them straight away: a batcher would hold a
                # question behind a running batch.
                engine = BatchingEngine(
                    engine, max_batch_size=settings.max_batch_size, batch_timeout_ms=settings.batch_timeout_ms
                )
            self._engine = engine
        return self._engine  # type: ignore[return-value]

    @property
    def cache(self) -> AnswerCache:
        """Returns the answer cache `settings.cache_url` names (default: SQLite under the store; the
        ``DOCPIPE_CACHE_URL`` variable sets it through the settings), opened on first use."""
        return self._answer_cache()

    def _answer_cache(self) -> AnswerCache:
        with self._init_lock:
            if self._cache is None:
                from docpipe.answer.cache import open_cache

                settings = self.settings
                cache = open_cache(settings.cache_url, store_root=self.store.root, ttl_s=settings.cache_ttl_s)
                if self.store.sealer is not None:  # answers quote the contract: sealed like the store
                    from docpipe.answer.cache.sealed import SealedCache

                    cache = SealedCache(cache, self.store.sealer)
                self._cache = cache
            return self._cache

    def ask(
        self,
        doc: DocLike | Collection,
        question: str,
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        password: str | None = None,
        use_cache: bool = True,
    ) -> Answer:
        """Returns an `Answer` with checked citations: from the configured language model, else extractive.

        `mode` is ``auto`` (think for analysis questions), ``think`` or ``no_think``; Qwen3's ``/think`` and
        ``/no_think`` in the question are honoured in ``auto``.
        """
        return self.ask_many(doc, [question], k=k, mode=mode, password=password, use_cache=use_cache)[0]

    def ask_many(
        self,
        doc: DocLike | Collection,
        questions: list[str],
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        password: str | None = None,
        use_cache: bool = True,
        analysis: bool = False,
        _queries: list[str] | None = None,
    ) -> list[Answer]:
        """Returns one `Answer` per question, in order; the questions go to the engine as one batch.

        Over a collection a question that names one contract is answered from it alone (the answer's
        `collection` is set, its citations name the contract); one that names several, or none, is answered
        from the best sections of several contracts, every citation naming its own."""
        if isinstance(questions, str):
            raise ConfigError("ask_many takes a list of questions; use ask() for one question")
        if isinstance(doc, Collection):
            return self._ask_collection(doc, questions, k=k, mode=mode, password=password, use_cache=use_cache)
        index = self.index(doc, password=password)
        engine = self.engine
        plan = core.plan_answers(
            index,
            questions,
            engine=engine,
            embedder=self.embedder,
            settings=self.settings,
            fingerprint=self.fingerprint,
            k=k,
            mode=mode,
            analysis=analysis,
            queries=_queries,
        )
        if engine is None:
            return self._with_stored_vectors(
                index,
                lambda: core.extractive_answers(
                    index, plan, embedder=self.embedder, settings=self.settings, fingerprint=self.fingerprint
                ),
            )
        return core.generate_answers(
            plan,
            index.doc,
            engine=engine,
            settings=self.settings,
            fingerprint=self.fingerprint,
            cache=self._answer_cache if use_cache else None,
        )

    def analyze(
        self,
        doc: DocLike | Collection,
        categories: list[str] | None = None,
        *,
        mode: ThinkingMode = "think",
        password: str | None = None,
        use_cache: bool = True,
        expand: bool | None = None,
    ) -> ContractReport:
        """Returns a `ContractReport`: the clause checklist (all 41 CUAD categories, or those named) run
        over `doc`, every category in one engine batch, in thinking mode by default.

        With a language model each finding is present / absent / uncertain with verified quotes; without
        one, each is a candidate for review (best-matching sentences) or not_found. `expand` (default
        `analysis.expand_references`) brings definitions and cross-referenced sections into each context.
        """
        from docpipe.analysis.analyze import analyze, check_mode
        from docpipe.analysis.checklist import select_categories

        if isinstance(doc, Collection):
            raise ConfigError(
                f"analyze runs the checklist over one document: pick one of collection {doc.name} with "
                f"dp.collection({doc.name!r}).document(NAME)"
            )
        check_mode(mode)  # before any work: a bad mode must not cost an extraction
        started = time.perf_counter()
        chosen = select_categories(categories)
        index = self.index(doc, password=password)
        run = lambda: analyze(  # noqa: E731
            index,
            chosen,
            engine=self.engine,
            embedder=self.embedder,
            settings=self.settings,
            fingerprint=self.fingerprint,
            cache=self._answer_cache,
            mode=mode,
            use_cache=use_cache,
            expand=expand,
            started=started,
        )
        return run() if self.engine is not None else self._with_stored_vectors(index, run)

    def _with_stored_vectors(self, index: SearchIndex, answer: Callable[[], T]) -> T:
        """Returns what `answer` returns, run with the sentence embeddings this store holds for the document
        (`docpipe.answer.stored_vectors`)."""
        return with_stored_vectors(self.store, self.fingerprint, index, answer)

    def close(self) -> None:
        """Releases the answer engine docpipe loaded (an in-process vLLM engine holds the GPU) and the
        answer cache. The object stays usable: they are opened again on next use. An engine
        passed to the constructor is left to its owner."""
        with self._init_lock:
            engine = None
            if self._owns_engine:
                engine, self._engine = self._engine, _UNSET
            cache, self._cache = self._cache, None
        for part in (engine, cache):
            close = getattr(part, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> DocPipe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask_stream(
        self,
        doc: DocLike | Collection,
        question: str,
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        password: str | None = None,
        use_cache: bool = True,
    ) -> Iterator[AnswerEvent]:
        """Returns an iterator of `AnswerEvent`: ``thinking`` and ``answer`` text pieces as the engine writes
        them, then one ``done`` event whose ``answer`` is the `Answer` that `ask` gives (checked citations,
        notice, answer cache). Engines that cannot stream (extractive, the in-process batch vLLM) and cache
        hits give the ``done`` event only. Stop iterating at any time: the engine's request is cancelled.
        """
        from docpipe.answer.streaming import AnswerEvent, stream_answer, streaming_engine

        engine = self.engine
        if isinstance(doc, Collection) or engine is None or streaming_engine(engine) is None:
            answer = self.ask(doc, question, k=k, mode=mode, password=password, use_cache=use_cache)
            yield AnswerEvent("done", answer=answer)
            return
        yield from stream_answer(
            self.index(doc, password=password),
            question,
            engine=engine,
            embedder=self.embedder,
            settings=self.settings,
            fingerprint=self.fingerprint,
            cache=self._answer_cache,
            k=k,
            mode=mode,
            use_cache=use_cache,
        )


class _Unset:
    pass


_UNSET = _Unset()
