"""`DocPipe`: the one object the CLI, the UI, the notebooks and the tests use to ingest, search and ask.

The facade only: it holds the settings, the store, the loaded indexes, the lazily loaded embedder, engine and
answer cache, and the extraction slots, and hands them as explicit arguments to the stages that do the work:
`docpipe.retrieve.build` (index build, load, access), `docpipe.retrieve.fusion` (ranking and context),
`docpipe.answer.core` (requests, cache keys, the cached batch, finished answers), `docpipe.answer.streaming`
and `docpipe.analysis.analyze`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from docpipe.answer import core
from docpipe.errors import ConfigError, InputError
from docpipe.ingest.collections import CollectionStore, Member, check_collection_name
from docpipe.ingest.slots import ExtractionSlots
from docpipe.ingest.store import Store, atomic_write, sha256_hex
from docpipe.retrieve import build
from docpipe.retrieve.build import Source
from docpipe.retrieve.collection import CollectionIndex, Route, collection_context, lift, strip_naming
from docpipe.retrieve.fusion import SearchIndex, context_limits, fit_budget, select_context
from docpipe.settings import Settings, load_settings
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

T = TypeVar("T")

#: A question that names no contract is answered from the sections of at most this many contracts, those
#: whose passages rank best in the collection's pooled index.
POOLED_DOCUMENTS = 8

#: Beside a stored index: the sentence embeddings of the sections offline answers have quoted from.
SENTENCE_VECTORS = "sentences.npz"
# In an index's sentence cache: how many sections' embeddings the store's copy holds.
_SAVED = "saved:"


class DocPipe:
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
        self.store = Store(self.settings.store_root())
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
        owner: str | None = None,
    ) -> Document:
        """Returns the ingested `Document` (pages with statuses, sections), from the store when it is there.

        A document not in the store waits for an extraction slot (`extraction.max_concurrent`, shared by
        every caller of this object; `owner`, e.g. a server's user, holds at most all but one of them) and
        raises `BusyError` after `extraction.queue_wait_s`. Raises a `DocpipeError` subclass for input that
        cannot be read: missing, empty, not a PDF, encrypted without the right password, malformed, no text
        layer, over the time bound.
        """
        data, label = build.read_source(source, name)
        doc_id = sha256_hex(data)
        return self._load_or_build(doc_id, data, label, password, progress or (lambda _stage: None), owner).doc

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
            index = self._load_or_build(doc_id, source, name or "document.pdf", password, lambda _s: None)
        elif not authorized and index.doc.password_check:
            self._check_access(index.doc, password, self.store.load_source(doc_id))
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

    def _all_collection_stores(self) -> list[CollectionStore]:
        """Returns the collection stores of the library and of every matter folder in the home."""
        stores = [self._collection_store(None)]
        matters = self.store.root / "matters"
        if matters.is_dir():
            stores += [
                CollectionStore(folder / "collections") for folder in sorted(matters.iterdir()) if folder.is_dir()
            ]
        return stores

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
    ) -> SearchIndex:
        key = (doc_id, self.fingerprint)
        index = self._loaded.get(key)
        if index is None:
            index = self._load_index(doc_id)
        if index is not None:
            self._check_access(index.doc, password, data)
            self._remember(key, index)
            return index
        with self._slots.take(label, owner=owner):
            index = self._loaded.get(key) or self._load_index(doc_id)  # built while this caller waited?
            if index is not None:
                self._check_access(index.doc, password, data)
            else:
                index = self._build_index(doc_id, data, label, password, progress)
        self._remember(key, index)
        return index

    def _check_access(self, doc: Document, password: str | None, data: bytes | None) -> None:
        """Hands stored text of a password-protected PDF out only to a caller who can open the PDF."""
        build.check_access(doc, password, data, slots=self._password_checks, settings=self.settings.extraction)

    def _build_index(
        self, doc_id: str, data: bytes, label: str, password: str | None, progress: Progress
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
        self._check_access(doc, password, data)
        return build.build_index(
            doc,
            store=self.store,
            embedder=self.embedder,
            settings=settings,
            fingerprint=self.fingerprint,
            progress=progress,
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
                self._check_access(index.doc, password, source)
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
            if engine is not None and settings.max_batch_size > 1:
                # Callers in threads (UI, API users) share engine batches instead of queueing one by one.
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
                self._cache = open_cache(settings.cache_url, store_root=self.store.root, ttl_s=settings.cache_ttl_s)
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
        """Runs `answer` (offline answers or checklist candidates) with the sentence embeddings the store holds
        for `index`'s document, then stores those it added: asking again, even from a new process, embeds
        nothing. A damaged file is ignored (the embeddings are made again)."""
        from docpipe.answer import extractive

        cache = index.sentence_cache
        path = self.store.index_dir(index.doc.id, self.fingerprint) / SENTENCE_VECTORS
        if _SAVED not in cache:
            try:
                extractive.load_vectors(path.read_bytes(), cache)
            except FileNotFoundError:
                pass
            except (OSError, ValueError, KeyError) as exc:
                logger.warning("ignoring unreadable %s (%s); its embeddings are made again", path, exc)
            cache[_SAVED] = extractive.stored_sections(cache)
        result = answer()
        count = extractive.stored_sections(cache)
        if count > cache[_SAVED]:
            try:
                atomic_write(path, extractive.dump_vectors(cache))
                cache[_SAVED] = count
            except OSError as exc:
                logger.warning("cannot store sentence embeddings at %s (%s)", path, exc)
        return result

    # -- collections ---------------------------------------------------------------------------
    def collection(self, name: str, *, matter: str | None = None) -> Collection:
        """Returns the collection `name` (created on its first `add`); in `matter` when given, where only that
        matter sees it. A name is 1-63 letters, digits, '.', '_' or '-'."""
        return Collection(self, name, matter=matter)

    def collections(self, *, matter: str | None = None) -> list[Collection]:
        """Returns the collections (of `matter` when given), by name."""
        return [Collection(self, name, matter=matter) for name in self._collection_store(matter).names()]

    def _collection_store(self, matter: str | None) -> CollectionStore:
        if matter is None:
            return CollectionStore(self.store.root / "collections")
        from docpipe.access.keys import check_matter_name

        return CollectionStore(self.store.root / "matters" / check_matter_name(matter) / "collections")

    def _collection_index(self, coll: Collection) -> CollectionIndex:
        """Returns the collection's routing cards and pooled index, brought up to its members and saved when
        that changed anything (a new member's vectors are read from its own index, never embedded again)."""
        key = (str(coll._records.root), coll.name, self.fingerprint)
        with self._collection_lock:
            cindex = self._collection_indexes.get(key)
            if cindex is None:
                folder = coll._records.folder(coll.name) / f"index-{self.fingerprint}"
                cindex = CollectionIndex.load(folder, self.embedder)
            if cindex.sync(coll.documents, self._stored_vectors):
                cindex.save()
            self._collection_indexes[key] = cindex
            return cindex

    def _forget_collection(self, coll: Collection) -> None:
        with self._collection_lock:
            self._collection_indexes.pop((str(coll._records.root), coll.name, self.fingerprint), None)

    def _stored_vectors(self, doc_id: str) -> tuple[str, Any] | None:
        parts = build.stored_parts(doc_id, store=self.store, fingerprint=self.fingerprint)
        return None if parts is None else (parts[0].text, parts[2])

    def _stored_passage_texts(self, doc_id: str) -> list[str] | None:
        parts = build.stored_parts(doc_id, store=self.store, fingerprint=self.fingerprint)
        return None if parts is None else parts[1]

    def _member_index(self, coll: Collection, doc_id: str, password: str | None) -> SearchIndex:
        return self.index(coll.document(doc_id, password=password), password=password)

    def _collection_rank(
        self, coll: Collection, question: str, *, k: int, password: str | None
    ) -> tuple[Route, list[Hit], dict[str, tuple[str, Any]], dict[str, SearchIndex]]:
        """Returns (the route, the ranked hits of the contracts the question names or, naming none, of the
        whole collection best first, the query searched in each named document with its embedding, the
        indexes used)."""
        core.check_question(question)
        if not coll.exists or not coll.documents:
            raise InputError(
                f"collection {coll.name} holds no documents: add some first "
                f"(docpipe ingest --collection {coll.name} FOLDER_OR_FILES...)"
            )
        cindex = self._collection_index(coll)
        query = self.embedder.embed([question])[0]
        route = cindex.route(question, query)
        indexes: dict[str, SearchIndex] = {}
        queries: dict[str, tuple[str, Any]] = {}
        hits: list[Hit] = []
        if route.named:
            stripped = {d: strip_naming(question, cindex.card_of(d), cindex.rare) for d in route.named}
            vectors = dict(zip(route.named, self.embedder.embed([stripped[d] for d in route.named])))
            for doc_id in route.named:
                index = indexes[doc_id] = self._member_index(coll, doc_id, password)
                queries[doc_id] = (stripped[doc_id], vectors[doc_id])
                hits += index.rank(stripped[doc_id], vectors[doc_id])
        else:
            with self._collection_lock:
                if cindex.build_bm25(self._stored_passage_texts):
                    cindex.save()
            by_doc: dict[str, list[tuple[int, float]]] = {}
            for doc_id, pid, score in cindex.pooled(question, query):
                if doc_id in by_doc or len(by_doc) < POOLED_DOCUMENTS:
                    by_doc.setdefault(doc_id, []).append((pid, score))
            for doc_id, passages in by_doc.items():
                index = indexes[doc_id] = self._member_index(coll, doc_id, password)
                hits += lift(index, passages)
        hits.sort(key=lambda h: -h.score)
        return route, hits, queries, indexes

    def _collection_context(
        self,
        coll: Collection,
        question: str,
        *,
        k: int | None,
        budget_tokens: int | None,
        password: str | None,
        expand: bool | None = None,
    ) -> tuple[Route, list[Hit], dict[str, tuple[str, Any]], dict[str, SearchIndex]]:
        """Returns the route, the context (see `DocPipe.context`), the queries searched (with their
        embeddings) and the indexes used."""
        k, budget = context_limits(self.settings.retrieval, k, budget_tokens)
        route, ranked, queries, indexes = self._collection_rank(coll, question, k=k, password=password)
        if len(route.named) == 1:
            doc_id = route.named[0]
            text, vector = queries[doc_id]
            context = select_context(
                indexes[doc_id],
                text,
                retrieval=self.settings.retrieval,
                chunking=self.settings.chunking,
                k=k,
                budget_tokens=budget,
                expand=expand,
                query=vector,
            )
            return route, context, queries, indexes
        pin = self.settings.retrieval.pin_front_matter
        limit = self.settings.chunking.front_matter_tokens
        fronts = {d: (i.front_matter(limit) if pin else None) for d, i in indexes.items()}
        order = {d: {s.id: n for n, s in enumerate(i.doc.sections)} for d, i in indexes.items()}
        by_doc: dict[str, list[Hit]] = {}
        for hit in ranked:
            by_doc.setdefault(hit.document_id, []).append(hit)
        context = collection_context(by_doc, fronts, budget_tokens=budget, k=k, order=order)
        return route, context, queries, indexes

    def _ask_collection(
        self,
        coll: Collection,
        questions: list[str],
        *,
        k: int | None,
        mode: ThinkingMode | None,
        password: str | None,
        use_cache: bool,
    ) -> list[Answer]:
        """Returns one answer per question over `coll` (see `ask_many`): the questions that name one contract
        go, grouped by contract, through that contract's own answering (cache included) with the naming words
        left out of retrieval; the others are answered over several contracts in one engine batch."""
        from docpipe.answer.collection import collection_extractive, collection_generative, collection_request

        for question in questions:
            core.check_question(question, which="a question")
        if not coll.exists or not coll.documents:
            raise InputError(
                f"collection {coll.name} holds no documents: add some first "
                f"(docpipe ingest --collection {coll.name} FOLDER_OR_FILES...)"
            )
        cindex = self._collection_index(coll)
        engine = self.engine
        answers: list[Answer | None] = [None] * len(questions)
        single: dict[str, list[tuple[int, str]]] = {}
        several: list[int] = []
        for n, (question, vector) in enumerate(zip(questions, self.embedder.embed(list(questions)))):
            route = cindex.route(question, vector)
            if len(route.named) == 1:
                doc_id = route.named[0]
                single.setdefault(doc_id, []).append((n, strip_naming(question, cindex.card_of(doc_id), cindex.rare)))
            else:
                several.append(n)
        for doc_id, items in single.items():
            doc = coll.document(doc_id, password=password)
            got = self.ask_many(
                doc,
                [questions[n] for n, _ in items],
                k=k,
                mode=mode,
                password=password,
                use_cache=use_cache,
                _queries=[query for _, query in items],
            )
            for (n, _), answer in zip(items, got):
                answer.collection = coll.name
                answers[n] = answer
        if several:
            budget = core.context_budget(self.settings, engine)
            depth = k if k is not None else (self.settings.engine.extractive_k if engine is None else None)
            planned = [
                self._collection_context(coll, questions[n], k=depth, budget_tokens=budget, password=password)
                for n in several
            ]
            if any(not indexes for _, _, _, indexes in planned):
                raise InputError(
                    f"no document of collection {coll.name} could be searched: they are no longer in the store at "
                    f"{self.store.root}; add the files again (docpipe ingest --collection {coll.name} ...)"
                )
            if engine is None:
                vectors = self.embedder.embed([questions[n] for n in several])
                for n, (_, context, _, indexes), vector in zip(several, planned, vectors):
                    documents = {d: (index.doc, index.sentence_cache) for d, index in indexes.items()}
                    answers[n] = collection_extractive(
                        questions[n],
                        context,
                        documents,
                        self.embedder,
                        settings=self.settings,
                        collection=coll.name,
                        fingerprint=self.fingerprint,
                        query=vector,
                    )
            else:
                thinking = mode or self.settings.engine.thinking
                requests = [
                    collection_request(questions[n], context, settings=self.settings, mode=thinking)
                    for n, (_, context, _, _) in zip(several, planned)
                ]
                results = engine.generate(requests)
                for n, (_, context, _, indexes), request, result in zip(several, planned, requests, results):
                    answers[n] = collection_generative(
                        questions[n],
                        result,
                        context,
                        {d: index.doc for d, index in indexes.items()},
                        engine=engine,
                        request=request,
                        settings=self.settings,
                        collection=coll.name,
                        fingerprint=self.fingerprint,
                    )
        return answers  # type: ignore[return-value]

    def _ingest_files(
        self,
        files: Sequence[tuple[Source, str]],
        *,
        password: str | None,
        workers: int | None,
        progress: Callable[[AddProgress], None] | None,
        on_done: Callable[[str, Document | None, str, bool], None],
        skip: Callable[[str], bool],
        on_skip: Callable[[str, str], None],
        owner: str | None = None,
    ) -> None:
        """Ingests `files`: up to `workers` at a time are read, extracted (each in a worker process holding an
        extraction slot) and cut into passages, while this thread embeds the passages of finished documents
        in batches across documents (`EMBED_BATCH`) and stores each index. `on_done(name, document or None,
        error, extracted)` hears of every file as it ends; files whose id `skip` accepts are passed to
        `on_skip` untouched."""
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        from docpipe.errors import BusyError, DocpipeError

        tell = progress or (lambda _event: None)
        workers = max(1, workers if workers is not None else self.settings.extraction.max_concurrent)
        embedder = self.embedder  # loaded once, before the threads
        quiet: Progress = lambda _stage: None  # noqa: E731
        total = len(files)
        finished = 0
        embedded = 0
        known_passages = 0

        def prepare(source: Source, label: str) -> tuple[str, str, Any]:
            data, label = build.read_source(source, label)
            doc_id = sha256_hex(data)
            if skip(doc_id):
                return "skip", label, doc_id
            index = self._loaded.get((doc_id, self.fingerprint)) or self._load_index(doc_id)
            if index is not None:
                self._check_access(index.doc, password, data)
                return "ready", label, index.doc
            while True:
                try:
                    with self._slots.take(label, owner=owner):
                        index = self._load_index(doc_id)  # built by another caller meanwhile?
                        if index is not None:
                            self._check_access(index.doc, password, data)
                            return "ready", label, index.doc
                        doc = build.extract(
                            self.store,
                            doc_id,
                            data,
                            label,
                            password,
                            settings=self.settings.extraction,
                            fingerprint=self.fingerprint,
                            progress=quiet,
                        )
                    break
                except BusyError:
                    if owner is not None:
                        raise  # a server's user is told to come back (the file fails as busy), never held
                    continue  # a local batch waits its turn instead of failing
            self._check_access(doc, password, data)
            return (
                "prepared",
                label,
                build.prepare_index(doc, embedder=embedder, settings=self.settings, progress=quiet),
            )

        def finish_file(label: str, doc: Document | None, error: str, extracted: bool) -> None:
            nonlocal finished
            finished += 1
            on_done(label, doc, error, extracted)
            tell(AddProgress("file", finished, total, label, error))

        pending: list[tuple[str, build.Prepared]] = []

        def embed_pending() -> None:
            nonlocal embedded
            texts = [t for _, p in pending for t in p.texts]
            chunks = []
            for start in range(0, len(texts), EMBED_BATCH):
                chunks.append(embedder.embed(texts[start : start + EMBED_BATCH]))
                embedded += len(chunks[-1])
                tell(AddProgress("embed", embedded, known_passages))
            import numpy as np

            vectors = np.vstack(chunks) if chunks else np.zeros((0, embedder.dim), dtype=np.float32)
            row = 0
            for label, prepared in pending:
                rows = vectors[row : row + len(prepared.texts)]
                row += len(prepared.texts)
                try:
                    index = build.finish_index(
                        prepared,
                        rows,
                        store=self.store,
                        embedder=embedder,
                        settings=self.settings,
                        fingerprint=self.fingerprint,
                    )
                except DocpipeError as exc:
                    finish_file(label, None, str(exc), False)
                    continue
                self._remember((index.doc.id, self.fingerprint), index)
                finish_file(label, index.doc, "", True)
            pending.clear()

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="docpipe-ingest") as pool:
            futures = {pool.submit(prepare, source, label): label for source, label in files}
            running = set(futures)
            while running:
                ended, running = wait(running, return_when=FIRST_COMPLETED)
                for future in ended:
                    label = futures[future]
                    try:
                        kind, label, item = future.result()
                    except DocpipeError as exc:
                        finish_file(label, None, str(exc), False)
                        continue
                    except Exception as exc:  # one file's surprise must not lose the others
                        logger.exception("ingesting %s failed", label)
                        finish_file(label, None, f"unexpected error ({type(exc).__name__}: {exc})", False)
                        continue
                    if kind == "skip":
                        on_skip(label, item)
                        finished += 1
                        tell(AddProgress("file", finished, total, label))
                    elif kind == "ready":
                        finish_file(label, item, "", False)
                    else:
                        pending.append((label, item))
                        known_passages += len(item.texts)
                if pending and (sum(len(p.texts) for _, p in pending) >= EMBED_BATCH or not running):
                    embed_pending()

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


# -- collections -------------------------------------------------------------------------------------

#: Passage texts gathered from several documents before one embedding call (batches across small documents).
EMBED_BATCH = 256
#: File names a folder given to `Collection.add` contributes (searched recursively, case-insensitive).
DOCUMENT_SUFFIXES = (".pdf",)


@dataclass(frozen=True, slots=True)
class AddProgress:
    """One step of `Collection.add`: a file finished (``file``: `done` of `total` files, `error` when it
    failed) or a batch of passages embedded (``embed``: `done` of `total` passages known so far)."""

    kind: str
    done: int
    total: int
    name: str = ""
    error: str = ""


@dataclass(slots=True)
class AddReport:
    """What `Collection.add` did: documents added to the collection, those it held already, and the files
    that failed with the reason (none of them stops the others), with the pages newly extracted and the time."""

    collection: str
    added: list[Member] = field(default_factory=list)
    present: list[Member] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    extracted_pages: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        """Returns the report as lines for a person: counts, then each failure with its reason."""
        lines = [
            f"collection {self.collection}: {len(self.added)} added, {len(self.present)} already in it, "
            f"{len(self.failed)} failed ({self.extracted_pages} pages extracted in {self.seconds:.1f} s)"
        ]
        lines += [f"  failed: {name}: {reason}" for name, reason in self.failed]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "added": [m.to_dict() for m in self.added],
            "present": [m.to_dict() for m in self.present],
            "failed": [{"file": name, "reason": reason} for name, reason in self.failed],
            "extracted_pages": self.extracted_pages,
            "seconds": round(self.seconds, 3),
        }


class Collection:
    """A named set of documents in the store, asked as one (`DocPipe.collection`).

    `DocPipe.search`, `context`, `ask`, `ask_many` and `ask_stream` take a collection where they take a
    document: the question goes to the contracts it names (title, parties, file name) or, naming none, is
    ranked across all of them, and every hit and citation names its document.

    >>> coll = dp.collection("deal-x")                          # doctest: +SKIP
    >>> print(coll.add("dataroom/").summary())                    # doctest: +SKIP
    collection deal-x: 231 added, 0 already in it, 0 failed (4325 pages extracted in 512.0 s)
    """

    def __init__(self, pipeline: DocPipe, name: str, *, matter: str | None = None) -> None:
        self._dp = pipeline
        self.name = check_collection_name(name)
        self.matter = matter
        self._records = pipeline._collection_store(matter)

    def __repr__(self) -> str:
        where = f", matter={self.matter!r}" if self.matter else ""
        return f"Collection({self.name!r}{where}, {len(self)} documents)"

    @property
    def exists(self) -> bool:
        return self._records.exists(self.name)

    @property
    def documents(self) -> list[Member]:
        """Returns the members (id, name in the collection, when added, pages), in the order they were added."""
        return self._records.members(self.name)

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.documents)

    def __contains__(self, doc: object) -> bool:
        return self._find(doc) is not None

    def _find(self, doc: object) -> Member | None:
        members = self.documents
        if isinstance(doc, Member):
            doc = doc.id
        elif isinstance(doc, Document):
            doc = doc.id
        if not isinstance(doc, str):
            return None
        exact = [m for m in members if m.id == doc or m.name == doc]
        if exact:
            return exact[0]
        if len(doc) >= 8 and all(c in "0123456789abcdef" for c in doc):
            prefixed = [m for m in members if m.id.startswith(doc)]
            if len(prefixed) == 1:
                return prefixed[0]
        return None

    def document(self, doc: Member | Document | str, *, password: str | None = None) -> Document:
        """Returns a member as a `Document` seen under its name in the collection (a member may be given by
        id, id prefix of 8+ characters, or name); an `InputError` names the collection when it is not in it."""
        member = self._find(doc)
        if member is None:
            raise InputError(
                f"{str(getattr(doc, 'name', doc))[:80]!r} is not in collection {self.name}: "
                f"`docpipe ls --collection {self.name}` lists its documents"
            )
        found = self._dp.document(member.id, password=password, name=member.name, matter=self.matter)
        if found is None:
            raise InputError(
                f"{member.name} ({member.id[:12]}) of collection {self.name} is no longer in the store at "
                f"{self._dp.store.root}: remove it (docpipe rm --collection {self.name} {member.id[:12]}) and add "
                "the file again"
            )
        return found

    def create(self) -> bool:
        """Creates the collection, empty; returns False when it existed already (it is left as it is)."""
        return self._records.create(self.name)

    def add(
        self,
        sources: Source | Sequence[Source],
        *,
        password: str | None = None,
        workers: int | None = None,
        progress: Callable[[AddProgress], None] | None = None,
        owner: str | None = None,
    ) -> AddReport:
        """Adds PDFs to the collection and returns an `AddReport`: folders are searched recursively for
        ``.pdf`` files; documents already in the store are not extracted or embedded again (a document may be
        in several collections). Extraction runs in up to `workers` worker processes (default
        `extraction.max_concurrent`), embedding batched across documents; `progress` hears of every file and
        embedding batch. A file that fails is reported with the reason and the others go on; every document is
        recorded as soon as it is ingested, so an interrupted run, run again, skips what it finished."""
        started = time.perf_counter()
        report = AddReport(self.name)  # the collection is created with its first member (see `create`)
        files, missing = _expand_sources(sources)
        report.failed += missing
        known = {m.id for m in self.documents}

        def done(label: str, doc: Document | None, error: str, extracted: bool) -> None:
            if doc is None:
                report.failed.append((label, error))
                return
            member = Member(doc.id, label, pages=len(doc.pages))
            added, _ = self._records.add(self.name, [member])
            if added:
                report.added.append(member)
            else:
                report.present.append(next(m for m in self.documents if m.id == doc.id))
            if extracted:
                report.extracted_pages += len(doc.pages)

        self._dp._ingest_files(
            files,
            password=password,
            workers=workers,
            progress=progress,
            on_done=done,
            skip=lambda doc_id: doc_id in known,
            owner=owner,
            on_skip=lambda label, doc_id: report.present.append(next(m for m in self.documents if m.id == doc_id)),
        )
        self._dp._collection_index(self)  # cards and pooled vectors of the new members, saved
        report.seconds = time.perf_counter() - started
        return report

    def remove(self, doc: Member | Document | str) -> bool:
        """Removes a document from the collection (it stays in the store and in other collections); returns
        False when it was not a member."""
        member = self._find(doc)
        if member is None:
            return False
        removed = self._records.remove(self.name, [member.id])
        if removed:
            self._dp._collection_index(self)
        return bool(removed)

    def delete(self) -> bool:
        """Deletes the collection (its documents stay in the store); returns False when it did not exist."""
        self._dp._forget_collection(self)
        return self._records.delete(self.name)


def _expand_sources(sources: Source | Sequence[Source]) -> tuple[list[tuple[Source, str]], list[tuple[str, str]]]:
    """Returns (the files to ingest with the name each goes by: a file given by path its file name, a file
    found in a folder (searched recursively) its path inside that folder, so two ``contract.pdf`` of two
    sub-folders stay apart; bytes as ``document-N.pdf``; in a stable order without repeats), and the paths
    that do not exist or hold no PDF, with the reason."""
    items: Sequence[Source] = (
        [sources] if isinstance(sources, (str, Path, bytes, bytearray, memoryview)) else list(sources)
    )
    files: list[tuple[Source, str]] = []
    missing: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n, item in enumerate(items, 1):
        if isinstance(item, (bytes, bytearray, memoryview)):
            files.append((item, f"document-{n}.pdf"))
            continue
        path = Path(item).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in DOCUMENT_SUFFIXES and p.is_file())
            if not found:
                missing.append((str(path), f"the folder holds no {'/'.join(DOCUMENT_SUFFIXES)} file"))
            chosen = [(p, p.relative_to(path).as_posix()) for p in found]
        elif path.exists():
            chosen = [(path, path.name)]
        else:
            missing.append((str(path), "no such file or folder"))
            continue
        for file, label in chosen:
            key = str(file.resolve())
            if key not in seen:
                seen.add(key)
                files.append((file, label))
    return files, missing
