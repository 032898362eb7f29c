"""`CollectionService`: the collections of one `DocPipe` and the work over them. It makes the `Collection`
handles (which hold it), keeps each collection's routing cards and pooled index (`docpipe.retrieve.collection`)
up to its members, adds many files at once (`docpipe.collection.parallel_ingest`), and searches and answers
over a collection: a question that names one contract goes to that contract alone, through the same answering
as any question about one document (`Answering.answer`, cache included); one that names several or none is
answered from the best sections of several contracts.

Built from the services it uses: the documents' indexes (`IndexCache`) and what answering shares
(`Answering`, asked for only when answering: retrieval alone loads no engine).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.answer import core
from docpipe.collection.handle import AddProgress, Collection
from docpipe.collection.parallel_ingest import ParallelIngest
from docpipe.errors import InputError
from docpipe.ingest import build
from docpipe.retrieve.cards import strip_naming
from docpipe.retrieve.collection import CollectionIndex, Route
from docpipe.retrieve.crossdoc import collection_context, lift
from docpipe.retrieve.fusion import SearchIndex, context_limits, select_context
from docpipe.storage.collections import CollectionStore
from docpipe.types import OWN_MATTER, scoped_matter

if TYPE_CHECKING:
    from docpipe.answer.answering import Answering
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.embed.base import Embedder
    from docpipe.ingest.build import Source
    from docpipe.ingest.indexes import IndexCache
    from docpipe.settings import Settings
    from docpipe.types import Answer, Document, Hit

__all__ = ["POOLED_DOCUMENTS", "CollectionService", "RoutedContext"]

logger = logging.getLogger(__name__)

#: A question that names no contract is answered from the sections of at most this many contracts, those
#: whose passages rank best in the collection's pooled index.
POOLED_DOCUMENTS = 8


@dataclass(frozen=True, slots=True)
class RoutedContext:
    """A question's way through a collection: its `route` (the contracts it names), the `hits` (ranked, or the
    context selected), the query searched in each named contract with its embedding, and the indexes used."""

    route: Route
    hits: list[Hit]
    queries: dict[str, tuple[str, Any]]
    indexes: dict[str, SearchIndex]


class CollectionService:
    """The collections of one `DocPipe` (see the module docstring)."""

    def __init__(
        self,
        *,
        settings: Settings,
        fingerprint: str,
        indexes: IndexCache,
        embedder: Callable[[], Embedder],
        answering: Callable[[], Answering],
    ) -> None:
        self.settings = settings
        self.fingerprint = fingerprint
        self.indexes = indexes
        self.store = indexes.store
        self._embedder = embedder
        self._answering = answering
        self._loaded: dict[tuple[str, str, str], CollectionIndex] = {}
        self._lock = threading.RLock()

    @property
    def store_root(self) -> Path:
        return self.store.root

    # -- the handles and their records ---------------------------------------------------------
    def get(self, name: str, *, matter: str | None = None) -> Collection:
        """Returns the collection `name` (created on its first `add`), in `matter` when given (the store's own
        matter, ``"default"``, is the library's: its handle has no matter)."""
        return Collection(self, name, matter=scoped_matter(matter))

    def all(self, *, matter: str | None = None) -> list[Collection]:
        """Returns the collections (of `matter` when given), by name."""
        matter = scoped_matter(matter)
        return [Collection(self, name, matter=matter) for name in self.records(matter).names()]

    def records(self, matter: str | None) -> CollectionStore:
        """Returns the member records of the store's own collections (`matter` None or ``"default"``: those
        of the command line, the library, and a server or workbench without keys), or of `matter`'s."""
        matter = scoped_matter(matter)
        if matter is None:
            self._adopt_own_matter_folder()
            return CollectionStore(self.store.root / "collections")
        from docpipe.access.keys import check_matter_name

        return CollectionStore(self.store.root / "matters" / check_matter_name(matter) / "collections")

    def _adopt_own_matter_folder(self) -> None:
        """Moves the collections a server without keys kept in ``matters/default/collections`` (before the
        store's own matter was one with the library's) to the library's folder; a name held by both stays
        where it is (the log says so) for its owner to rename."""
        old = self.store.root / "matters" / OWN_MATTER / "collections"
        if not old.is_dir():
            return
        with self._lock:
            new = self.store.root / "collections"
            new.mkdir(mode=0o700, exist_ok=True)
            for folder in sorted(p for p in old.iterdir() if p.is_dir() and not p.name.startswith(".")):
                target = new / folder.name
                if target.exists():
                    logger.warning("left %s where it is: %s exists in the store's own collections", folder, target)
                    continue
                folder.rename(target)
                logger.info("the collection %s of the server's default matter is now the store's own", target.name)
            try:
                old.rmdir()
            except OSError:
                pass  # what could not be moved stays, and is said above

    def all_records(self) -> list[CollectionStore]:
        """Returns the collection records of the store's own collections and of every other matter's."""
        stores = [self.records(None)]
        matters = self.store.root / "matters"
        if matters.is_dir():
            stores += [
                CollectionStore(folder / "collections")
                for folder in sorted(matters.iterdir())
                if folder.is_dir() and folder.name != OWN_MATTER
            ]
        return stores

    def document(
        self, doc_id: str, *, password: str | None = None, name: str | None = None, matter: str | None = None
    ) -> Document | None:
        """Returns a member's stored document seen under `name` in `matter` (see `DocPipe.document`)."""
        return self.indexes.document(doc_id, password=password, name=name, matter=matter)

    def ingest_files(
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
        ask_password: Callable[[str], str | None] | None = None,
    ) -> None:
        """Ingests `files` in parallel (`ParallelIngest`; `workers` default `extraction.max_concurrent`)."""
        run = ParallelIngest(
            self.indexes,
            self._embedder(),
            password=password,
            progress=progress,
            on_done=on_done,
            skip=skip,
            on_skip=on_skip,
            owner=owner,
            ask_password=ask_password,
        )
        run.run(files, workers if workers is not None else self.settings.extraction.max_concurrent)

    # -- the collection's own index ------------------------------------------------------------
    def _key(self, coll: Collection) -> tuple[str, str, str]:
        return (str(coll.records.root), coll.name, self.fingerprint)

    def sync(self, coll: Collection) -> CollectionIndex:
        """Returns the collection's routing cards and pooled index, brought up to its members and saved when
        that changed anything (a new member's vectors are read from its own index, never embedded again)."""
        key = self._key(coll)
        with self._lock:
            cindex = self._loaded.get(key)
            if cindex is None:
                folder = coll.records.folder(coll.name) / f"index-{self.fingerprint}"
                cindex = CollectionIndex.load(folder, self._embedder(), sealer=self.store.sealer)
            if cindex.sync(coll.documents, self.stored_vectors):
                cindex.save()
            self._loaded[key] = cindex
            return cindex

    def forget(self, coll: Collection) -> None:
        """Drops the collection's index from memory (before the collection is deleted)."""
        with self._lock:
            self._loaded.pop(self._key(coll), None)

    def stored_vectors(self, doc_id: str) -> tuple[str, Any] | None:
        """Returns a stored document's text and passage vectors (None when the store lacks them)."""
        parts = build.stored_parts(doc_id, store=self.store, fingerprint=self.fingerprint)
        return None if parts is None else (parts[0].text, parts[2])

    def stored_passage_texts(self, doc_id: str) -> list[str] | None:
        """Returns a stored document's passage texts (None when the store lacks them)."""
        parts = build.stored_parts(doc_id, store=self.store, fingerprint=self.fingerprint, vectors=False)
        return None if parts is None else parts[1]

    def _member_index(self, coll: Collection, doc_id: str, password: str | None) -> SearchIndex:
        return self.indexes.of_document(coll.document(doc_id, password=password), password)

    @staticmethod
    def _check_members(coll: Collection) -> None:
        if not coll.exists or not coll.documents:
            raise InputError(
                f"collection {coll.name} holds no documents: add some first "
                f"(docpipe ingest --collection {coll.name} FOLDER_OR_FILES...)"
            )

    # -- search --------------------------------------------------------------------------------
    def rank(self, coll: Collection, question: str, *, password: str | None, one_named: bool = True) -> RoutedContext:
        """Returns the route and the ranked hits of the contracts the question names or, naming none, of the
        whole collection, best first, with the query searched in each named contract. With `one_named` False a
        question naming one contract gets no hits (the caller selects that contract's context itself)."""
        core.check_question(question)
        self._check_members(coll)
        cindex = self.sync(coll)
        embedder = self._embedder()
        query = embedder.embed([question])[0]
        route = cindex.route(question, query)
        indexes: dict[str, SearchIndex] = {}
        queries: dict[str, tuple[str, Any]] = {}
        hits: list[Hit] = []
        if route.named:
            stripped = {d: strip_naming(question, cindex.card_of(d), cindex.rare) for d in route.named}
            vectors = dict(zip(route.named, embedder.embed([stripped[d] for d in route.named])))
            for doc_id in route.named:
                index = indexes[doc_id] = self._member_index(coll, doc_id, password)
                queries[doc_id] = (stripped[doc_id], vectors[doc_id])
                if one_named or len(route.named) > 1:
                    hits += index.rank(stripped[doc_id], vectors[doc_id])
        else:
            with self._lock:
                if cindex.build_bm25(self.stored_passage_texts):
                    cindex.save()
            by_doc: dict[str, list[tuple[int, float]]] = {}
            for doc_id, pid, score in cindex.pooled(question, query):
                if doc_id in by_doc or len(by_doc) < POOLED_DOCUMENTS:
                    by_doc.setdefault(doc_id, []).append((pid, score))
            for doc_id, passages in by_doc.items():
                index = indexes[doc_id] = self._member_index(coll, doc_id, password)
                hits += lift(index, passages)
        hits.sort(key=lambda h: -h.score)
        return RoutedContext(route, hits, queries, indexes)

    def context(
        self,
        coll: Collection,
        question: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        password: str | None = None,
        expand: bool | None = None,
    ) -> RoutedContext:
        """Returns the question's route and its context over the collection (see `DocPipe.context`)."""
        settings = self.settings
        k, budget = context_limits(settings.retrieval, k, budget_tokens)
        ranked = self.rank(coll, question, password=password, one_named=False)
        route, indexes = ranked.route, ranked.indexes
        if len(route.named) == 1:
            doc_id = route.named[0]
            text, vector = ranked.queries[doc_id]
            context = select_context(
                indexes[doc_id],
                text,
                retrieval=settings.retrieval,
                chunking=settings.chunking,
                k=k,
                budget_tokens=budget,
                expand=expand,
                query=vector,
            )
            return RoutedContext(route, context, ranked.queries, indexes)
        pin = settings.retrieval.pin_front_matter
        limit = settings.chunking.front_matter_tokens
        fronts = {d: (i.front_matter(limit) if pin else None) for d, i in indexes.items()}
        order = {d: {s.id: n for n, s in enumerate(i.doc.sections)} for d, i in indexes.items()}
        by_doc: dict[str, list[Hit]] = {}
        for hit in ranked.hits:
            by_doc.setdefault(hit.document_id, []).append(hit)
        context = collection_context(by_doc, fronts, budget_tokens=budget, k=k, order=order)
        return RoutedContext(route, context, ranked.queries, indexes)

    # -- answers -------------------------------------------------------------------------------
    def ask(
        self,
        coll: Collection,
        questions: list[str],
        *,
        k: int | None,
        mode: ThinkingMode | None,
        password: str | None,
        use_cache: bool,
    ) -> list[Answer]:
        """Returns one answer per question over `coll` (see `DocPipe.ask_many`): the questions that name one
        contract go, grouped by contract, through that contract's own answering (cache included) with the
        naming words left out of retrieval; the others are answered over several contracts in one engine batch."""
        for question in questions:
            core.check_question(question, which="a question")
        self._check_members(coll)
        cindex = self.sync(coll)
        answering = self._answering()
        answers: list[Answer | None] = [None] * len(questions)
        single: dict[str, list[tuple[int, str]]] = {}
        several: list[int] = []
        for n, (question, vector) in enumerate(zip(questions, answering.embedder.embed(list(questions)))):
            route = cindex.route(question, vector)
            if len(route.named) == 1:
                doc_id = route.named[0]
                single.setdefault(doc_id, []).append((n, strip_naming(question, cindex.card_of(doc_id), cindex.rare)))
            else:
                several.append(n)
        for doc_id, items in single.items():
            index = self._member_index(coll, doc_id, password)
            got = answering.answer(
                index,
                [questions[n] for n, _ in items],
                k=k,
                mode=mode,
                use_cache=use_cache,
                queries=[query for _, query in items],
            )
            for (n, _), answer in zip(items, got):
                answer.collection = coll.name
                answers[n] = answer
        if several:
            for n, answer in zip(
                several, self._ask_several(coll, [questions[n] for n in several], answering, k, mode, password)
            ):
                answers[n] = answer
        return [answer for answer in answers if answer is not None]

    def _ask_several(
        self,
        coll: Collection,
        questions: list[str],
        answering: Answering,
        k: int | None,
        mode: ThinkingMode | None,
        password: str | None,
    ) -> list[Answer]:
        """Returns the answers to questions that name several contracts or none, from the best sections of
        several contracts, every citation naming its own."""
        from docpipe.answer.collection import collection_extractive, collection_generative, collection_request

        engine, settings = answering.engine, self.settings
        budget = core.context_budget(settings, engine)
        depth = k if k is not None else (settings.engine.extractive_k if engine is None else None)
        planned = [self.context(coll, q, k=depth, budget_tokens=budget, password=password) for q in questions]
        if any(not p.indexes for p in planned):
            raise InputError(
                f"no document of collection {coll.name} could be searched: they are no longer in the store at "
                f"{self.store.root}; add the files again (docpipe ingest --collection {coll.name} ...)"
            )
        if engine is None:
            vectors = answering.embedder.embed(questions)
            indexes = {d: index for p in planned for d, index in p.indexes.items()}
            for index in indexes.values():  # each contract's stored sentence table, read once
                answering.sentences.load(index)
            answers = [
                collection_extractive(
                    question,
                    p.hits,
                    {d: (index.doc, index.sentence_cache) for d, index in p.indexes.items()},
                    answering.embedder,
                    settings=settings,
                    collection=coll.name,
                    fingerprint=self.fingerprint,
                    query=vector,
                )
                for question, p, vector in zip(questions, planned, vectors)
            ]
            for index in indexes.values():
                answering.sentences.save(index)
            return answers
        thinking = mode or settings.engine.thinking
        requests = [collection_request(q, p.hits, settings=settings, mode=thinking) for q, p in zip(questions, planned)]
        results = engine.generate(requests)
        return [
            collection_generative(
                question,
                result,
                p.hits,
                {d: index.doc for d, index in p.indexes.items()},
                engine=engine,
                request=request,
                settings=settings,
                collection=coll.name,
                fingerprint=self.fingerprint,
            )
            for question, p, request, result in zip(questions, planned, requests, results)
        ]
