"""`DocPipe`: the one object the CLI, the UI, the notebooks and the tests use to ingest, search and ask.

The facade only: it holds the settings and the store, and composes the objects that each own one job, handing
each call to the one whose job it is:

- `indexes` (`docpipe.ingest.indexes.IndexCache`): the documents' indexes, loaded or built, and the extraction
  slots; every caller checked by the access gate (`docpipe.access.gate.AccessGate`).
- `answering` (`docpipe.answer.answering.Answering`): the engine, embedder, settings, fingerprint, answer cache
  and stored sentence embeddings, built once on first use; every answer goes through it.
- `collection_service` (`docpipe.collection.service.CollectionService`): collections, and the work over them.
- `review()` and `analyze()`: functions over those (`docpipe.review.review`, `docpipe.analysis.analyze`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from docpipe.access.gate import AccessGate
from docpipe.access.store_key import store_sealer
from docpipe.answer import core
from docpipe.answer.answering import Answering
from docpipe.answer.stored_vectors import StoredSentences
from docpipe.collection.handle import AddProgress, AddReport, Collection
from docpipe.collection.service import CollectionService
from docpipe.errors import ConfigError
from docpipe.ingest import build
from docpipe.ingest.build import BatchProgress, Source
from docpipe.ingest.indexes import IndexCache
from docpipe.retrieve.fusion import SearchIndex, context_limits, fit_budget, select_context
from docpipe.settings import Settings, load_settings
from docpipe.storage.collections import Member
from docpipe.storage.store import Store, sha256_hex
from docpipe.types import Answer, Document, Hit

if TYPE_CHECKING:
    from collections.abc import Callable

    from docpipe.analysis.report import ContractReport
    from docpipe.answer.cache import AnswerCache
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.answer.streaming import AnswerEvent
    from docpipe.cells import Column
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine
    from docpipe.playbook import Playbook, PlaybookReport
    from docpipe.review.grid import ReviewGrid
    from docpipe.review.run import ReviewProgress

__all__ = ["AddProgress", "AddReport", "Collection", "DocPipe", "Member", "Source"]

logger = logging.getLogger(__name__)

DocLike = Document | str | Path | bytes


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
        if embedder is not None and self.settings.embedding.model != embedder.name:
            # A custom embedder must not share index entries with the configured one.
            self.settings = self.settings.model_copy(
                update={"embedding": self.settings.embedding.model_copy(update={"model": embedder.name})}
            )
        self.store = Store(self.settings.store_root(), sealer=store_sealer(self.settings))
        self.fingerprint = self.settings.index_fingerprint()
        self._embedder = embedder
        self._engine: Engine | None | _Unset = _UNSET if engine is None else engine
        self._owns_engine = engine is None  # an engine passed in belongs to the caller, who closes it
        self._cache: AnswerCache | None = None
        self._answering: Answering | None = None
        # Lazy parts are created once even when several threads (UI users, API callers) arrive together.
        self._init_lock = threading.RLock()
        #: The gate on encrypted PDFs' stored text; proving a second password holds one of its own slots.
        self.gate = AccessGate(self.settings.extraction)
        #: The documents' indexes and the extraction slots every caller of this object shares.
        self.indexes = IndexCache(
            store=self.store,
            settings=self.settings,
            fingerprint=self.fingerprint,
            embedder=lambda: self.embedder,
            gate=self.gate.check,
        )
        #: The collections and the work over them (`dp.collection(name)` hands out their handles).
        self.collection_service = CollectionService(
            settings=self.settings,
            fingerprint=self.fingerprint,
            indexes=self.indexes,
            embedder=lambda: self.embedder,
            answering=lambda: self.answering,
        )

    # -- the parts, loaded on first use ------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """Returns the embedder, loaded on first use (it imports torch for real models)."""
        with self._init_lock:
            if self._embedder is None:
                from docpipe.embed.base import load_embedder

                self._embedder = load_embedder(self.settings.embedding)
            return self._embedder

    @property
    def engine(self) -> Engine | None:
        """Returns the answer engine the settings select (loaded on first use), or None: extractive answers."""
        with self._init_lock:
            if isinstance(self._engine, _Unset):
                from docpipe.engine import load_engine

                self._engine = load_engine(self.settings.engine, cache_root=self.store.root / "vllm-cache")
            return self._engine

    @property
    def cache(self) -> AnswerCache:
        """Returns the answer cache `settings.cache_url` names (default: SQLite under the store; the
        ``DOCPIPE_CACHE_URL`` variable sets it through the settings), opened on first use."""
        return self._open_cache()

    def _open_cache(self) -> AnswerCache:
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

    @property
    def answering(self) -> Answering:
        """Returns what every answer shares (`Answering`): built on first use, with the engine loaded."""
        with self._init_lock:
            if self._answering is None:
                self._answering = Answering(
                    engine=self.engine,
                    embedder=self.embedder,
                    settings=self.settings,
                    fingerprint=self.fingerprint,
                    cache=self._open_cache,
                    sentences=StoredSentences(self.store, self.fingerprint),
                )
            return self._answering

    def close(self) -> None:
        """Releases the answer engine docpipe loaded (an in-process vLLM engine holds the GPU) and the
        answer cache. The object stays usable: they are opened again on next use. An engine
        passed to the constructor is left to its owner."""
        with self._init_lock:
            engine = None
            if self._owns_engine:
                engine, self._engine = self._engine, _UNSET
            cache, self._cache = self._cache, None
            self._answering = None
        for part in (engine, cache):
            close = getattr(part, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> DocPipe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ---------------------------------------------------------------------------
    def ingest(
        self,
        source: Source,
        *,
        password: str | None = None,
        name: str | None = None,
        progress: Callable[[str], None] | None = None,
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
        index = self.indexes.from_bytes(
            sha256_hex(data),
            data,
            label,
            password,
            progress=progress or (lambda _stage: None),
            owner=owner,
            embed_progress=embed_progress,
        )
        return index.doc

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
        return self.indexes.document(doc_id, password=password, authorized=authorized, name=name, matter=matter)

    def index(self, doc: DocLike, *, password: str | None = None) -> SearchIndex:
        """Returns the document's `SearchIndex` (its passages, dense and BM25 scores, defined terms and
        cross-references), loaded from the store or built; a `Document` is seen under its own name and matter.
        An encrypted PDF needs its `password`, as in `ingest`."""
        if isinstance(doc, Document):
            return self.indexes.of_document(doc, password)
        data, label = build.read_source(doc, None)
        return self.indexes.from_bytes(sha256_hex(data), data, label, password)

    def delete_document(self, doc_id: str) -> bool:
        """Returns True when anything of the document was stored; afterwards nothing is: its PDF, extracted
        text, indexes and cached answers are gone from the store and the answer cache, and it is no longer a
        member of any collection (those of every matter included)."""
        self.indexes.forget(doc_id)
        removed = self.forget_answers(doc_id)
        member = False
        for records in self.collection_service.all_records():
            for name in records.containing(doc_id):
                member = bool(records.remove(name, [doc_id])) or member
        return self.store.delete_document(doc_id) or bool(removed) or member

    def forget_answers(self, doc_id: str) -> int:
        """Returns how many cached answers about the document were removed from the answer cache."""
        return int(core.cache_call(self._open_cache, "delete_document", doc_id) or 0)

    def forget_matter(self, matter: str) -> int:
        """Returns how many cached answers asked in `matter` were removed from the answer cache."""
        return int(core.cache_call(self._open_cache, "delete_matter", matter) or 0)

    def sweep_answers(self, max_age_s: float) -> int:
        """Returns how many cached answers older than `max_age_s` were removed (a retention policy)."""
        return int(core.cache_call(self._open_cache, "sweep", max_age_s) or 0)

    # -- collections -------------------------------------------------------------------------
    def collection(self, name: str, *, matter: str | None = None) -> Collection:
        """Returns the collection `name` (created on its first `add`); in `matter` when given, where only that
        matter sees it. A name is 1-63 letters, digits, '.', '_' or '-'."""
        return self.collection_service.get(name, matter=matter)

    def collections(self, *, matter: str | None = None) -> list[Collection]:
        """Returns the collections (of `matter` when given), by name."""
        return self.collection_service.all(matter=matter)

    # -- questions ---------------------------------------------------------------------------
    def rank(self, doc: DocLike | Collection, question: str, *, password: str | None = None) -> list[Hit]:
        """Returns every section that matches `question`, best first, with no budget applied (over a
        collection: those of the contracts it names, or of the contracts whose passages rank best)."""
        core.check_question(question)
        if isinstance(doc, Collection):
            return self.collection_service.rank(doc, question, password=password).hits
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
    ) -> list[Hit]:
        """Returns the sections that go to the model with `question`, in document order: the top `k`
        that fit in the budget, plus the document's front matter (title, parties, date) when pinned, plus
        (with `expand`, default `retrieval.expand_references`) the definitions and cross-referenced sections
        those sections use, in the budget left (their `role` says which).

        Over a collection: the context of the contract the question names (searched without the words that
        name it), or the best sections of the contracts it names or, naming none, of the whole collection,
        each contract's front matter first, grouped by contract."""
        if isinstance(doc, Collection):
            return self.collection_service.context(
                doc, question, k=k, budget_tokens=budget_tokens, password=password, expand=expand
            ).hits
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
        )

    # -- answers -----------------------------------------------------------------------------
    def ask(
        self,
        doc: DocLike | Collection,
        question: str,
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        password: str | None = None,
        use_cache: bool = True,
        each: bool | None = None,
    ) -> Answer:
        """Returns an `Answer` with checked citations: from the configured language model, else extractive.

        `mode` is ``auto`` (think for analysis questions), ``think`` or ``no_think``; Qwen3's ``/think`` and
        ``/no_think`` in the question are honoured in ``auto``. `each`: see `ask_many`.
        """
        return self.ask_many(doc, [question], k=k, mode=mode, password=password, use_cache=use_cache, each=each)[0]

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
        each: bool | None = None,
    ) -> list[Answer]:
        """Returns one `Answer` per question, in order; the questions go to the engine as one batch.

        Over a collection a question that names one contract is answered from it alone (the answer's
        `collection` is set, its citations name the contract); one that names several, or none, is answered
        from the best sections of several contracts, every citation naming its own. A question about every
        contract ("Which contracts ...?", or any question with `each` True; never with `each` False) is asked of
        each contract as one review-grid column and answered as lists (`Answer.each`, `docpipe.review.each`)."""
        if isinstance(questions, str):
            raise ConfigError("ask_many takes a list of questions; use ask() for one question")
        if isinstance(doc, Collection):
            return self._ask_collection(doc, list(questions), k, mode, password, use_cache, each)
        index = self.index(doc, password=password)
        return self.answering.answer(index, questions, k=k, mode=mode, use_cache=use_cache, analysis=analysis)

    def _ask_collection(
        self,
        coll: Collection,
        questions: list[str],
        k: int | None,
        mode: ThinkingMode | None,
        password: str | None,
        use_cache: bool,
        each: bool | None,
    ) -> list[Answer]:
        from docpipe.review.each import answer_each, each_columns, each_question

        for question in questions:
            core.check_question(question, which="a question")
        per_contract = [None if each is False else each_question(q) for q in questions]
        if each:
            per_contract = [asked or q for asked, q in zip(per_contract, questions)]
        answers: list[Answer | None] = [None] * len(questions)
        pooled = [n for n, asked in enumerate(per_contract) if asked is None]
        if pooled:
            got = self.collection_service.ask(
                coll, [questions[n] for n in pooled], k=k, mode=mode, password=password, use_cache=use_cache
            )
            for n, answer in zip(pooled, got):
                answers[n] = answer
        asked_each = {n: asked for n, asked in enumerate(per_contract) if asked is not None}
        if asked_each:
            distinct = list(dict.fromkeys(asked_each.values()))
            grid = self.review(
                coll,
                columns=each_columns(distinct, self.answering.embedder, self.settings),
                mode=mode or "auto",
                password=password,
                use_cache=use_cache,
            )
            for n, asked in asked_each.items():
                answers[n] = answer_each(
                    questions[n], grid, distinct.index(asked), collection=coll.name, settings=self.settings
                )
        return [answer for answer in answers if answer is not None]

    def ask_stream(
        self,
        doc: DocLike | Collection,
        question: str,
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        password: str | None = None,
        use_cache: bool = True,
        each: bool | None = None,
    ) -> Iterator[AnswerEvent]:
        """Returns an iterator of `AnswerEvent`: ``thinking`` and ``answer`` text pieces as the engine writes
        them, then one ``done`` event with the `Answer` that `ask` gives (engines that cannot stream, and cache
        hits, give that alone). Stop iterating at any time: the engine's request is cancelled."""
        if isinstance(doc, Collection):
            from docpipe.answer.streaming import AnswerEvent

            answer = self.ask(doc, question, k=k, mode=mode, password=password, use_cache=use_cache, each=each)
            yield AnswerEvent("done", answer=answer)
            return
        index = self.index(doc, password=password)
        yield from self.answering.stream(index, question, k=k, mode=mode, use_cache=use_cache)

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
        over `doc`, every category in one engine batch, in thinking mode by default. With a language model each
        finding is present / absent / uncertain with verified quotes; without one, a candidate (best-matching
        sentences) or not_found. `expand` (default `analysis.expand_references`) brings definitions and
        cross-referenced sections into each context."""
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
        return analyze(
            index, chosen, answering=self.answering, mode=mode, use_cache=use_cache, expand=expand, started=started
        )

    def review(
        self,
        docs: Collection | Document | Source | Sequence[Document | Source],
        *,
        questions: Sequence[str] | None = None,
        checklist: bool = False,
        categories: Sequence[str] | None = None,
        columns: Sequence[Column] | None = None,
        key_terms: bool | Sequence[str] = False,
        mode: str = "think",
        layout: str | None = None,
        password: str | None = None,
        use_cache: bool = True,
        progress: Callable[[ReviewProgress], None] | None = None,
        cancel: threading.Event | None = None,
        executor: str = "local",
    ) -> ReviewGrid:
        """Returns the `ReviewGrid` of `docs` (a collection, documents, files or folders, searched recursively)
        against `questions` and/or the clause checklist (`checklist` for all 41 categories, `categories` for
        those named): one row per document, one column per question, every cell answered.

        With a language model each cell is present / absent / uncertain with a short answer and verified
        quotes (thinking by default: `mode`); without one, candidate / not_found with the best-matching
        clauses. A document that cannot be read gets a row of failed cells saying why; the others go on. Cells
        are cached by content as they finish, so a grid run again computes only what it lacks. `progress` is
        called after every cell; `cancel` (set from another thread) stops the grid between engine batches.
        Typed columns (`columns`, or ``"Governing law?::jurisdiction"``) hold a normalized value read from the
        cell's verified quotes (`Cell.value`); `key_terms` adds the built-in key terms (see `terms`).
        `executor` ``"ray"`` fills a collection's grid as a Ray Data pipeline (`docpipe.review.ray_grid`).
        """
        from docpipe.analysis.analyze import check_mode
        from docpipe.review.review import check_ray_target, review
        from docpipe.review.run import columns_for

        check_mode(mode)
        grid_columns = columns_for(
            questions, checklist=checklist, categories=categories, columns=columns, key_terms=key_terms
        )
        if executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {executor!r}: use local or ray")
        if executor == "ray":
            from docpipe.review.ray_grid import review_on_ray

            coll = check_ray_target(docs)
            return review_on_ray(
                self,
                coll,
                grid_columns,
                mode=mode,
                layout=layout,
                password=password,
                use_cache=use_cache,
                progress=progress,
                cancel=cancel,
            )
        return review(
            docs,
            grid_columns,
            indexes=self.indexes,
            answering=self.answering,
            mode=mode,
            layout=layout,
            password=password,
            use_cache=use_cache,
            progress=progress,
            cancel=cancel,
        )

    def terms(
        self,
        docs: Collection | Document | Source | Sequence[Document | Source],
        *,
        terms: Sequence[str] | None = None,
        mode: str = "think",
        password: str | None = None,
        use_cache: bool = True,
        progress: Callable[[ReviewProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ReviewGrid:
        """Returns the key-terms table of `docs`: a `ReviewGrid` whose columns are the built-in key terms (all, or
        the ids in `terms`; `docpipe.terms.catalog`): title, parties, agreement, effective and expiration dates,
        initial term, renewal, the notice that stops it and its last day, governing law, courts, liability cap,
        termination for convenience. Each cell holds a normalized value (`Cell.value`) with the verified quotes it was read from (a computed
        one its working in `Cell.derivation`); a value its quotes do not give is never shown (``uncertain``).
        Without a language model deterministic readers read them (`docpipe.terms.key_terms`)."""
        return self.review(
            docs,
            key_terms=list(terms) if terms else True,
            mode=mode,
            password=password,
            use_cache=use_cache,
            progress=progress,
            cancel=cancel,
        )

    def check(
        self,
        playbook: Playbook | str | Path,
        docs: Collection | Document | Source | Sequence[Document | Source],
        *,
        mode: str = "think",
        password: str | None = None,
        progress: Callable[[ReviewProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> PlaybookReport:
        """Returns `playbook` (a `Playbook` or a TOML file's path) held against `docs`: a verdict per contract and
        rule (meets / deviates / missing / needs review) with its quotes; the cells are a cached review grid's."""
        from docpipe.playbook import Playbook, load_playbook
        from docpipe.playbook.run import check

        book = playbook if isinstance(playbook, Playbook) else load_playbook(playbook)
        return check(self, book, docs, mode=mode, password=password, progress=progress, cancel=cancel)


class _Unset:
    pass


_UNSET = _Unset()
