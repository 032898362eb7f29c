"""`CollectionMixin`: the `DocPipe` methods that ingest many files at once (parallel extraction, embedding
batched across documents), keep each collection's routing and pooled index (`docpipe.retrieve.collection`)
up to its members, and search and answer over a collection.

`DocPipe` inherits the mixin; this module never imports `docpipe.pipeline` (it sits below it), so the
facade's own attributes and methods the mixin uses are declared for the type checker only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from docpipe.answer import core
from docpipe.collection.handle import AddProgress, Collection
from docpipe.errors import InputError
from docpipe.ingest import build
from docpipe.ingest.build import Source
from docpipe.retrieve.cards import strip_naming
from docpipe.retrieve.collection import CollectionIndex, Route
from docpipe.retrieve.crossdoc import collection_context, lift
from docpipe.retrieve.fusion import SearchIndex, context_limits, select_context
from docpipe.storage.collections import CollectionStore
from docpipe.storage.store import sha256_hex
from docpipe.types import Answer, Document, Hit

if TYPE_CHECKING:
    from collections import OrderedDict

    from docpipe.answer.prompts import ThinkingMode
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine
    from docpipe.ingest.slots import ExtractionSlots
    from docpipe.settings import Settings
    from docpipe.storage.store import Store

__all__ = ["EMBED_BATCH", "POOLED_DOCUMENTS", "CollectionMixin"]

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]

#: A question that names no contract is answered from the sections of at most this many contracts, those
#: whose passages rank best in the collection's pooled index.
POOLED_DOCUMENTS = 8
#: Passage texts gathered from several documents before they are embedded (batches across small documents),
#: `build.EMBED_BATCH` at a time.
EMBED_BATCH = 256


class CollectionMixin:
    """The collection methods of `DocPipe` (see the module docstring)."""

    if TYPE_CHECKING:  # the facade's own, which these methods use
        settings: Settings
        store: Store
        fingerprint: str
        _slots: ExtractionSlots
        _loaded: OrderedDict[tuple[str, str], SearchIndex]
        _collection_indexes: dict[tuple[str, str, str], CollectionIndex]
        _collection_lock: Any

        @property
        def embedder(self) -> Embedder: ...

        @property
        def engine(self) -> Engine | None: ...

        def index(self, doc: Any, *, password: str | None = None) -> SearchIndex: ...

        def document(
            self,
            doc_id: str,
            *,
            password: str | None = None,
            authorized: bool = False,
            name: str | None = None,
            matter: str | None = None,
        ) -> Document | None: ...

        def ask_many(
            self,
            doc: Any,
            questions: list[str],
            *,
            k: int | None = None,
            mode: ThinkingMode | None = None,
            password: str | None = None,
            use_cache: bool = True,
            analysis: bool = False,
            _queries: list[str] | None = None,
        ) -> list[Answer]: ...

        def _load_index(self, doc_id: str) -> SearchIndex | None: ...

        def _check_access(self, doc: Document, password: str | None, data: bytes | None, *, name: str) -> None: ...

        def _remember(self, key: tuple[str, str], index: SearchIndex) -> None: ...

    def _all_collection_stores(self) -> list[CollectionStore]:
        """Returns the collection stores of the library and of every matter folder in the home."""
        stores = [self._collection_store(None)]
        matters = self.store.root / "matters"
        if matters.is_dir():
            stores += [
                CollectionStore(folder / "collections") for folder in sorted(matters.iterdir()) if folder.is_dir()
            ]
        return stores

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
                cindex = CollectionIndex.load(folder, self.embedder, sealer=self.store.sealer)
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
        parts = build.stored_parts(doc_id, store=self.store, fingerprint=self.fingerprint, vectors=False)
        return None if parts is None else parts[1]

    def _member_index(self, coll: Collection, doc_id: str, password: str | None) -> SearchIndex:
        return self.index(coll.document(doc_id, password=password), password=password)

    def _collection_rank(
        self, coll: Collection, question: str, *, k: int, password: str | None, one_named: bool = True
    ) -> tuple[Route, list[Hit], dict[str, tuple[str, Any]], dict[str, SearchIndex]]:
        """Returns (the route, the ranked hits of the contracts the question names or, naming none, of the
        whole collection best first, the query searched in each named document with its embedding, the
        indexes used). With `one_named` False a question naming one contract gets no hits (the caller
        selects that contract's context itself, which ranks it)."""
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
                if one_named or len(route.named) > 1:
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
        route, ranked, queries, indexes = self._collection_rank(coll, question, k=k, password=password, one_named=False)
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
        ask_password: Callable[[str], str | None] | None = None,
    ) -> None:
        """Ingests `files`: up to `workers` at a time are read, extracted (each in a worker process holding an
        extraction slot) and cut into passages, while this thread embeds the passages of finished documents
        in batches across documents (`EMBED_BATCH`) and stores each index. `on_done(name, document or None,
        error, extracted)` hears of every file as it ends; files whose id `skip` accepts are passed to
        `on_skip` untouched. An encrypted file that `password` does not open is tried with the passwords
        `ask_password` gave for earlier files, then `ask_password(name)` is asked (one call at a time) until
        the answer opens it or is empty."""
        import threading
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        from docpipe.errors import BusyError, DocpipeError, PasswordRequiredError, WrongPasswordError

        tell = progress or (lambda _event: None)
        workers = max(1, workers if workers is not None else self.settings.extraction.max_concurrent)
        embedder = self.embedder  # loaded once, before the threads
        quiet: Progress = lambda _stage: None  # noqa: E731
        total = len(files)
        finished = 0
        embedded = 0
        known_passages = 0

        asking = threading.Lock()
        answered: list[str] = []  # what ask_password gave, tried on each encrypted file before asking again

        def prepare(source: Source, label: str) -> tuple[str, str, Any]:
            data, label = build.read_source(source, label)
            doc_id = sha256_hex(data)
            if skip(doc_id):
                return "skip", label, doc_id
            secret: str | None = password
            tried: set[str | None] = set()
            while True:
                try:
                    opened = open_file(data, label, doc_id, secret)
                except (PasswordRequiredError, WrongPasswordError):
                    if ask_password is None:
                        raise
                    tried.add(secret)
                    with asking:
                        secret = next((known for known in answered if known not in tried), None)
                        if secret is None:
                            secret = ask_password(label)
                            if secret:
                                answered.append(secret)
                    if not secret:
                        raise
                    continue
                return opened

        def open_file(data: bytes, label: str, doc_id: str, password: str | None) -> tuple[str, str, Any]:
            index = self._loaded.get((doc_id, self.fingerprint)) or self._load_index(doc_id)
            if index is not None:
                self._check_access(index.doc, password, data, name=label)
                return "ready", label, index.doc
            while True:
                try:
                    with self._slots.take(label, owner=owner):
                        index = self._load_index(doc_id)  # built by another caller meanwhile?
                        if index is not None:
                            self._check_access(index.doc, password, data, name=label)
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
            self._check_access(doc, password, data, name=label)
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
            before = embedded

            def batch_done(done: int, _total: int) -> None:
                nonlocal embedded
                if done:
                    embedded = before + min(done * build.EMBED_BATCH, len(texts))
                    tell(AddProgress("embed", embedded, known_passages))

            vectors = build.embed_batches(embedder, texts, embed_progress=batch_done)
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
