"""`DocPipe`: the one object the CLI, the UI, the notebooks and the tests use to ingest, search and ask."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from docpipe.answer.compose import Answer, extractive_answer, generative_answer
from docpipe.types import Document, Page, PageStatus, Passage
from docpipe.errors import (
    ConfigError,
    EmptyFileError,
    FileMissingError,
    InputError,
    PasswordRequiredError,
    WrongPasswordError,
)
from docpipe.metrics import emit as emit_metric
from docpipe.retrieve.fusion import Hit, SearchIndex, fit_budget
from docpipe.settings import Settings, load_settings
from docpipe.ingest.slots import ExtractionSlots
from docpipe.ingest.store import Store, sha256_hex

if TYPE_CHECKING:
    from docpipe.analysis.analyze import ContractReport
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine
    from docpipe.answer.prompts import ThinkingMode

__all__ = ["DocPipe", "Source"]

logger = logging.getLogger(__name__)

Source = Union[str, Path, bytes, bytearray, memoryview]
DocLike = Union[Document, str, Path, bytes]
Progress = Callable[[str], None]

_KEEP_LOADED = 16
# System prompt, section labels and the question, in tokens, with room to spare.
_PROMPT_OVERHEAD_TOKENS = 1024


def _read_source(source: Source, name: str | None) -> tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        label = name or "document.pdf"
    elif isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        label = name or path.name
        if not path.exists():
            raise FileMissingError(f"no such file: {path}", path=str(path))
        if path.is_dir():
            raise InputError(f"{path} is a folder: give the PDF file inside it", path=str(path))
        data = path.read_bytes()
    else:
        raise InputError(
            f"cannot ingest an object of type {type(source).__name__}: pass a file path or the PDF's bytes",
        )
    if not data:
        raise EmptyFileError(f"{label} is empty (0 bytes): check the upload or the path", path=label)
    return data, label


def _password_check(doc_id: str, password: str) -> str:
    # Slow on purpose: the store must not make guessing a document's password cheap.
    return hashlib.pbkdf2_hmac("sha256", password.encode(), doc_id.encode(), 100_000).hex()


class DocPipe:
    """Returns documents, search hits and answers for contracts: the public entry point.

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
        self._cache = None
        # Lazy parts are created once even when several threads (UI users, API callers) arrive together.
        self._init_lock = threading.RLock()
        # One limit on concurrent extractions for every caller of this object (API, workbench, CLI): each
        # runs a worker process; documents already in the store never wait for a slot.
        extraction = self.settings.extraction
        self._slots = ExtractionSlots(extraction.max_concurrent, wait_s=extraction.queue_wait_s)
        # Proving a second password starts a worker too: guesses must not spawn processes without bound.
        self._password_checks = ExtractionSlots(extraction.max_concurrent, wait_s=extraction.queue_wait_s)
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
        data, label = _read_source(source, name)
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
        text, indexes and cached answers are gone from the store and the answer cache."""
        with self._init_lock:
            for key in [k for k in self._loaded if k[0] == doc_id]:
                del self._loaded[key]
        removed = self.forget_answers(doc_id)
        return self.store.delete_document(doc_id) or bool(removed)

    def forget_answers(self, doc_id: str) -> int:
        """Returns how many cached answers about the document were removed from the answer cache."""
        return int(self._cache_call("delete_document", doc_id) or 0)

    def forget_matter(self, matter: str) -> int:
        """Returns how many cached answers asked in `matter` were removed from the answer cache."""
        return int(self._cache_call("delete_matter", matter) or 0)

    def sweep_answers(self, max_age_s: float) -> int:
        """Returns how many cached answers older than `max_age_s` were removed (a retention policy)."""
        return int(self._cache_call("sweep", max_age_s) or 0)

    def _load_or_build(
        self, doc_id: str, data: bytes, label: str, password: str | None, progress: Progress,
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
        check = doc.password_check
        if not check:
            return
        if password is None:
            raise PasswordRequiredError(
                f"{doc.name} is encrypted: pass the password (--password on the command line, password= in Python)",
                path=doc.name,
            )
        if _password_check(doc.id, password) == check:
            return
        # The stored check covers the password used first; the PDF's other password (user vs owner) also opens
        # it. Asked of a sandboxed extraction worker (never parsed here); a check that cannot finish raises.
        if data:
            from docpipe.ingest.extract import encryption_status

            with self._password_checks.take(doc.name):
                status = encryption_status(data, password, settings=self.settings.extraction, name=doc.name)
            if status.password_opens:
                return
        raise WrongPasswordError(
            f"the password does not open {doc.name}: check it (the user or the owner password both work)",
            path=doc.name,
        )

    def _extract(self, doc_id: str, data: bytes, label: str, password: str | None, progress: Progress) -> dict:
        extractor = self.settings.extraction.extractor
        record = self.store.load_extraction(doc_id, extractor)
        # Records from before the sandboxed encryption check (no "needs_password") are extracted again: the old
        # check failed open on PDFs pypdf could not parse.
        if record is not None and "needs_password" in record:
            return record
        from docpipe.ingest.extract import extract_document

        progress(f"extracting with {extractor}")
        # The worker that reads the text also says whether opening needed a password: one parse, sandboxed,
        # and a check that cannot finish fails the extraction rather than leaving the text unlocked.
        extraction = extract_document(data, password=password, settings=self.settings.extraction, name=label)
        needs_password = extraction.encryption.needs_password
        record = {
            "name": label,
            "extractor": extractor,
            "pages": [
                {"number": p.number, "text": p.text, "status": p.status.value, "detail": p.detail}
                for p in extraction.pages
            ],
            "password_check": _password_check(doc_id, password) if password and needs_password else None,
            "needs_password": needs_password,
        }
        self.store.save_source(doc_id, data)
        self.store.save_extraction(doc_id, extractor, record)
        return record

    def _build_index(
        self, doc_id: str, data: bytes, label: str, password: str | None, progress: Progress
    ) -> SearchIndex:
        from docpipe.retrieve.dense import DenseIndex
        from docpipe.ingest.passages import embedding_text, make_passages
        from docpipe.ingest.sections import split_sections
        from docpipe.ingest.tokens import get_token_counter

        record = self._extract(doc_id, data, label, password, progress)
        pages = [Page(p["number"], p["text"], PageStatus(p["status"]), p.get("detail", "")) for p in record["pages"]]
        doc = Document(
            id=doc_id,
            name=label,
            pages=pages,
            extractor=record["extractor"],
            fingerprint=self.fingerprint,
            password_check=record.get("password_check"),
        )
        self._check_access(doc, password, data)
        progress("splitting into sections")
        counter = get_token_counter(self.settings.chunking.tokenizer)
        doc.sections = split_sections(doc, counter, self.settings.chunking)
        embedder = self.embedder
        passages = make_passages(doc.sections, doc.text, embedder, overlap=self.settings.chunking.passage_overlap)
        progress(f"embedding {len(passages)} passages")
        sections = {s.id: s for s in doc.sections}
        vectors = embedder.embed([embedding_text(p, sections[p.section_id], embedder) for p in passages])
        dense = DenseIndex(vectors, index_type=self.settings.retrieval.index_type)
        files = {
            "document.json": json.dumps(doc.to_dict()).encode(),
            "passages.json": json.dumps([[p.section_id, p.start, p.end] for p in passages]).encode(),
            "dense.faiss": dense.serialize(),
        }
        self.store.save_index(
            doc_id, self.fingerprint, files, {"embedder": embedder.name, "passages": len(passages)}
        )
        logger.info("ingested %s: %d pages, %d sections, %d passages", label, len(pages), len(doc.sections), len(passages))
        emit_metric("pages_ingested", pages=len(pages))
        return self._search_index(doc, passages, dense)

    def _load_index(self, doc_id: str) -> SearchIndex | None:
        files = self.store.load_index(doc_id, self.fingerprint)
        if files is None:
            return None
        from docpipe.retrieve.dense import DenseIndex

        try:
            data = json.loads(files["document.json"])
            doc = Document.from_dict(data)
            text = doc.text
            passages = [
                Passage(i, sid, start, end, text[start:end])
                for i, (sid, start, end) in enumerate(json.loads(files["passages.json"]))
            ]
            dense = DenseIndex.deserialize(files["dense.faiss"])
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            logger.warning("stored index for %s is unreadable (%s); rebuilding it", doc_id, exc)
            self.store.drop_index(doc_id, self.fingerprint)
            return None
        return self._search_index(doc, passages, dense)

    def _search_index(self, doc: Document, passages: list[Passage], dense) -> SearchIndex:
        return SearchIndex(
            doc=doc,
            passages=passages,
            dense=dense,
            embedder=self.embedder,
            hybrid=self.settings.retrieval.hybrid,
            rrf_k=self.settings.retrieval.rrf_k,
        )

    def _remember(self, key: tuple[str, str], index: SearchIndex) -> None:
        self._loaded[key] = index
        self._loaded.move_to_end(key)
        while len(self._loaded) > _KEEP_LOADED:
            self._loaded.popitem(last=False)

    def _index_for(self, doc: DocLike, password: str | None = None) -> SearchIndex:
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
            return _view(index, doc)
        data, label = _read_source(doc, None)
        return self._load_or_build(sha256_hex(data), data, label, password, lambda _s: None)

    # -- questions ---------------------------------------------------------------------------
    def rank(self, doc: DocLike, question: str, *, password: str | None = None) -> list[Hit]:
        """Returns every section that matches `question`, best first, with no budget applied."""
        if not question or not question.strip():
            raise ConfigError("the question is empty: ask something about the document")
        return self._index_for(doc, password).rank(question)

    def search(
        self,
        doc: DocLike,
        question: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        password: str | None = None,
    ) -> list[Hit]:
        """Returns the top `k` sections for `question` (default 4) that fit in the token budget together."""
        k, budget = self._limits(k, budget_tokens)
        return fit_budget(self.rank(doc, question, password=password), budget, k)

    def _limits(self, k: int | None, budget_tokens: int | None) -> tuple[int, int]:
        k = self.settings.retrieval.k if k is None else k
        budget = self.settings.retrieval.budget_tokens if budget_tokens is None else budget_tokens
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        if budget < 1:
            raise ConfigError(f"the token budget must be at least 1, got {budget}")
        return k, budget

    def context(
        self,
        doc: DocLike,
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
        those sections use, in the budget left (their `role` says which)."""
        index = self._index_for(doc, password)
        if not question or not question.strip():
            raise ConfigError("the question is empty: ask something about the document")
        k, budget = self._limits(k, budget_tokens)
        front = self.settings.chunking.front_matter_tokens
        pinned = index.front_matter(front) if self.settings.retrieval.pin_front_matter else None
        chosen = fit_budget(index.rank(question, _query), budget, k, pinned=pinned)
        if self.settings.retrieval.expand_references if expand is None else expand:
            from docpipe.retrieve.references import supporting_hits
            from docpipe.ingest.tokens import get_token_counter

            left = budget - sum(h.n_tokens for h in chosen)
            counter = get_token_counter(self.settings.chunking.tokenizer)
            chosen += supporting_hits(
                chosen, index.doc, index.references, budget_tokens=left, count_tokens=counter.count
            )
        position = {s.id: i for i, s in enumerate(index.doc.sections)}
        return sorted(chosen, key=lambda h: (position[h.section_id], h.passage_start))

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
    def cache(self):
        """Returns the answer cache (SQLite under the store, or DOCPIPE_CACHE_URL), opened on first use."""
        with self._init_lock:
            return self._open_cache()

    def _open_cache(self):
        if self._cache is None:
            from docpipe.answer.cache import open_cache

            url = os.environ.get("DOCPIPE_CACHE_URL") or self.settings.cache_url
            self._cache = open_cache(url, store_root=self.store.root, ttl_s=self.settings.cache_ttl_s)
        return self._cache

    def ask(
        self,
        doc: DocLike,
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
        doc: DocLike,
        questions: list[str],
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        password: str | None = None,
        use_cache: bool = True,
        analysis: bool = False,
    ) -> list[Answer]:
        """Returns one `Answer` per question, in order; the questions go to the engine as one batch."""
        if isinstance(questions, str):
            raise ConfigError("ask_many takes a list of questions; use ask() for one question")
        index = self._index_for(doc, password)
        engine = self.engine
        budget = self._context_budget(engine)
        for question in questions:
            if not question or not question.strip():
                raise ConfigError("a question is empty: ask something about the document")
        # One embedding call for all questions: most of retrieval's time is the question embedding.
        vectors = self.embedder.embed(list(questions)) if questions else []
        contexts = [
            self.context(index.doc, q, k=k, budget_tokens=budget, _query=v) for q, v in zip(questions, vectors)
        ]
        if engine is None:
            from docpipe.answer.compose import prime_sentences

            prime_sentences([h for hits in contexts for h in hits], self.embedder, index.sentence_cache)
            return [
                self._stamp(extractive_answer(
                    q,
                    hits,
                    index.doc,
                    self.embedder,
                    sentences=self.settings.engine.extractive_sentences,
                    fingerprint=self.fingerprint,
                    cache=index.sentence_cache,
                    query=v,
                ), index.doc)
                for q, hits, v in zip(questions, contexts, vectors)
            ]
        requests = [
            self._request(q, hits, index.doc, mode or self.settings.engine.thinking, analysis)
            for q, hits in zip(questions, contexts)
        ]
        keys = [self._cache_key(index.doc, r, q, hits) for q, r, hits in zip(questions, requests, contexts)]
        answers: list[Answer | None] = [None] * len(questions)
        if use_cache:
            for i, key in enumerate(keys):
                stored = self._cache_call("get", key)
                if stored is not None:
                    answers[i] = Answer.from_dict(stored)
        todo = [i for i, a in enumerate(answers) if a is None]
        if use_cache:
            emit_metric("answer_cache", hits=len(answers) - len(todo), misses=len(todo))
        results = engine.generate([requests[i] for i in todo]) if todo else []
        for i, result in zip(todo, results):
            answers[i] = self._finish(
                questions[i], result, contexts[i], requests[i], keys[i], index.doc, use_cache=use_cache
            )
        return answers  # type: ignore[return-value]

    def _finish(
        self, question: str, result, hits: list[Hit], request, key: str, doc: Document, *, use_cache: bool
    ) -> Answer:
        """Returns the checked, stamped answer for one engine result, cached unless the engine failed
        (`ask_many` and `ask_stream` both end here)."""
        engine = self.engine
        assert engine is not None
        answer = generative_answer(
            question, result, hits, doc, engine=engine.name, model=engine.model, fingerprint=self.fingerprint
        )
        answer.thinking_enabled = request.thinking
        answer = self._stamp(answer, doc)
        if use_cache and not result.error:
            self._cache_call("put", key, answer.to_dict(), document_id=doc.id, matter=doc.matter)
        return answer

    def analyze(
        self,
        doc: DocLike,
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
        from docpipe.analysis.analyze import analyze

        return analyze(
            self, doc, categories, mode=mode, password=password, use_cache=use_cache, expand=expand
        )

    def close(self) -> None:
        """Returns nothing; releases the answer engine docpipe loaded (an in-process vLLM engine holds the
        GPU) and the answer cache. The object stays usable: they are opened again on next use. An engine
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

    def _stamp(self, answer: Answer, doc: Document) -> Answer:
        """Returns `answer` with what its audit manifest needs beyond the answer itself."""
        from docpipe.audit import model_revision
        from docpipe.answer.prompts import PROMPT_VERSION

        answer.document_name = doc.name
        answer.settings_fingerprint = self.settings.settings_fingerprint()
        answer.model_revision = model_revision(self.settings.engine, answer.engine, answer.model)
        answer.prompt_version = PROMPT_VERSION if answer.mode == "generative" else ""
        return answer

    def _context_budget(self, engine: Engine | None) -> int:
        """Returns the context budget, shrunk to what fits the engine's context window beside the prompt's
        instructions, the thinking budget and the answer."""
        budget = self.settings.retrieval.budget_tokens
        window = getattr(engine, "max_model_len", None)
        if not window:
            return budget
        settings = self.settings.engine
        reserve = settings.max_answer_tokens + (settings.max_thinking_tokens or 0) + _PROMPT_OVERHEAD_TOKENS
        if window - reserve < 256:
            raise ConfigError(
                f"the model's context window ({window} tokens) leaves no room for contract text after "
                f"{reserve} tokens of instructions, thinking and answer: raise DOCPIPE_ENGINE__MAX_MODEL_LEN "
                "or lower DOCPIPE_ENGINE__MAX_THINKING_TOKENS / MAX_ANSWER_TOKENS"
            )
        return min(budget, window - reserve)

    def _cache_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Returns the cache's reply; a failing cache is logged and skipped: it must not cost the answer."""
        from docpipe.errors import StoreError

        try:
            return getattr(self.cache, method)(*args, **kwargs)
        except StoreError as exc:
            logger.warning("answer cache unavailable (%s); answering without it", exc)
            return None

    def _request(self, question: str, hits: list[Hit], doc: Document, mode: ThinkingMode, analysis: bool):
        from docpipe.engine.base import DIRECT_SAMPLING, THINKING_SAMPLING, GenerationRequest
        from docpipe.answer.prompts import SYSTEM_PROMPT, build_user_prompt, wants_thinking

        settings = self.settings.engine
        thinking = wants_thinking(question, mode, analysis=analysis)
        base = THINKING_SAMPLING if thinking else DIRECT_SAMPLING
        # Without a budget the thinking comes out of max_tokens too.
        thinking_room = 0 if settings.max_thinking_tokens or not thinking else 4096
        sampling = replace(base, seed=settings.seed, max_tokens=settings.max_answer_tokens + thinking_room)
        return GenerationRequest(
            messages=(
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": build_user_prompt(question, hits, document_name=doc.name, document_id=doc.id)},
            ),
            thinking=thinking,
            sampling=sampling,
            max_thinking_tokens=settings.max_thinking_tokens if thinking else None,
        )

    def _cache_key(self, doc: Document, request, question: str, hits: list[Hit]) -> str:
        from docpipe.audit import model_revision
        from docpipe.answer.cache import cache_key
        from docpipe.answer.prompts import PROMPT_VERSION

        engine = self.engine
        extra = {
            "fingerprint": self.fingerprint,
            "sections": [h.section_id for h in hits],
            # New weights under the same model name must not be served the old weights' answers.
            "model_revision": model_revision(self.settings.engine, engine.name if engine else None,
                                             engine.model if engine else None),
        }
        if doc.matter is not None:
            extra["matter"] = doc.matter  # cache hits never cross a matter
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

    # -- streamed answers (the logic is in docpipe/answer/streaming.py) -------------------------------
    if TYPE_CHECKING:  # for the annotations below only
        from docpipe.answer.streaming import AnswerEvent

    def ask_stream(
        self,
        doc: DocLike,
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
        from docpipe.answer.streaming import ask_stream

        return ask_stream(self, doc, question, k=k, mode=mode, password=password, use_cache=use_cache)


def _view(index: SearchIndex, doc: Document) -> SearchIndex:
    """Returns `index` seen through `doc`: its display name and matter, the shared index underneath."""
    if doc.name == index.doc.name and doc.matter == index.doc.matter:
        return index
    view = copy.copy(index)
    view.doc = replace(index.doc, name=doc.name, matter=doc.matter)
    return view


class _Unset:
    pass


_UNSET = _Unset()
