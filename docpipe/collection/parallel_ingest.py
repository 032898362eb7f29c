"""Many files ingested at once for a collection: up to `workers` at a time are read, extracted (each in a
worker process holding an extraction slot) and cut into passages, while the calling thread embeds the passages
of finished documents in batches across documents (`EMBED_BATCH`) and stores each index.

`ParallelIngest.run` is what `Collection.add` runs on this machine (`docpipe.collection.ray_ingest` is the Ray
executor's). Every file is heard of as it ends (`on_done(name, document or None, error, extracted)`); one that
fails never stops the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from docpipe.collection.reports import AddProgress
from docpipe.errors import BusyError, DocpipeError, PasswordRequiredError, WrongPasswordError
from docpipe.ingest import build
from docpipe.storage.store import sha256_hex

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder
    from docpipe.ingest.build import Prepared, Source
    from docpipe.ingest.indexes import IndexCache
    from docpipe.types import Document

__all__ = ["EMBED_BATCH", "ParallelIngest"]

logger = logging.getLogger(__name__)

#: Passage texts gathered from several documents before they are embedded (batches across small documents),
#: `build.EMBED_BATCH` at a time.
EMBED_BATCH = 256

# What preparing one file came to: ("skip", name, doc id), ("ready", name, Document) when the store held its
# index, ("prepared", name, Prepared) when its passages wait to be embedded.
Outcome = tuple[str, str, Any]


def _quiet(_stage: str) -> None:
    pass


class ParallelIngest:
    """One add of many files (see the module docstring). `skip(doc_id)` True passes a file to `on_skip`
    untouched; an encrypted file that `password` does not open is tried with the passwords `ask_password` gave
    for earlier files, then `ask_password(name)` is asked (one call at a time) until its answer opens it or is
    empty. `owner` (a server's user) is told to come back when no extraction slot is free; a local add waits."""

    def __init__(
        self,
        indexes: IndexCache,
        embedder: Embedder,
        *,
        password: str | None,
        progress: Callable[[AddProgress], None] | None,
        on_done: Callable[[str, Document | None, str, bool], None],
        skip: Callable[[str], bool],
        on_skip: Callable[[str, str], None],
        owner: str | None = None,
        ask_password: Callable[[str], str | None] | None = None,
    ) -> None:
        self.indexes = indexes
        self.embedder = embedder  # loaded once, before the threads
        self.password = password
        self.tell = progress or (lambda _event: None)
        self.on_done = on_done
        self.skip = skip
        self.on_skip = on_skip
        self.owner = owner
        self.ask_password = ask_password
        self.total = self.finished = self.embedded = self.known_texts = 0
        self.pending: list[tuple[str, Prepared]] = []
        self._asking = threading.Lock()
        self._answered: list[str] = []  # what ask_password gave, tried on each encrypted file before asking again

    def run(self, files: Sequence[tuple[Source, str]], workers: int) -> None:
        """Ingests `files`, `workers` at a time (see the class docstring)."""
        self.total = len(files)
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="docpipe-ingest") as pool:
            futures = {pool.submit(self.prepare, source, label): label for source, label in files}
            running = set(futures)
            while running:
                ended, running = wait(running, return_when=FIRST_COMPLETED)
                for future in ended:
                    self._take(futures[future], future)
                if self.pending and (sum(len(p.to_embed) for _, p in self.pending) >= EMBED_BATCH or not running):
                    self.embed_pending()

    def _take(self, label: str, future: Future[Outcome]) -> None:
        """Hands one prepared file on: skipped, ready (reported), or its passages queued for embedding."""
        try:
            kind, label, item = future.result()
        except DocpipeError as exc:
            self.finish(label, None, str(exc), False)
            return
        except Exception as exc:  # one file's surprise must not lose the others
            logger.exception("ingesting %s failed", label)
            self.finish(label, None, f"unexpected error ({type(exc).__name__}: {exc})", False)
            return
        if kind == "skip":
            self.on_skip(label, item)
            self.finished += 1
            self.tell(AddProgress("file", self.finished, self.total, label))
        elif kind == "ready":
            self.finish(label, item, "", False)
        else:
            self.pending.append((label, item))
            self.known_texts += len(item.to_embed)

    def prepare(self, source: Source, label: str) -> Outcome:
        """Reads one file and opens it (see `open_file`), asking for passwords as the class docstring says."""
        data, label = build.read_source(source, label)
        doc_id = sha256_hex(data)
        if self.skip(doc_id):
            return "skip", label, doc_id
        secret: str | None = self.password
        tried: set[str | None] = set()
        while True:
            try:
                return self.open_file(data, label, doc_id, secret)
            except (PasswordRequiredError, WrongPasswordError):
                if self.ask_password is None:
                    raise
                tried.add(secret)
                with self._asking:
                    secret = next((known for known in self._answered if known not in tried), None)
                    if secret is None:
                        secret = self.ask_password(label)
                        if secret:
                            self._answered.append(secret)
                if not secret:
                    raise

    def open_file(self, data: bytes, label: str, doc_id: str, password: str | None) -> Outcome:
        """Returns the document when the store holds its index, else its extraction cut into passages."""
        indexes = self.indexes
        index = indexes.held(doc_id)
        if index is not None:
            indexes.gate(index.doc, password, data, name=label)
            return "ready", label, index.doc
        while True:
            try:
                with indexes.slots.take(label, owner=self.owner):
                    index = indexes.held(doc_id)  # built by another caller meanwhile?
                    if index is not None:
                        indexes.gate(index.doc, password, data, name=label)
                        return "ready", label, index.doc
                    doc = build.extract(
                        indexes.store,
                        doc_id,
                        data,
                        label,
                        password,
                        settings=indexes.settings.extraction,
                        fingerprint=indexes.fingerprint,
                        progress=_quiet,
                    )
                break
            except BusyError:
                if self.owner is not None:
                    raise  # a server's user is told to come back (the file fails as busy), never held
                continue  # a local batch waits its turn instead of failing
        indexes.gate(doc, password, data, name=label)
        prepared = build.prepare_index(doc, embedder=self.embedder, settings=indexes.settings, progress=_quiet)
        return "prepared", label, prepared

    def finish(self, label: str, doc: Document | None, error: str, extracted: bool) -> None:
        """Reports one file as ended."""
        self.finished += 1
        self.on_done(label, doc, error, extracted)
        self.tell(AddProgress("file", self.finished, self.total, label, error))

    def embed_pending(self) -> None:
        """Embeds the queued documents' passages in batches across them and stores each index."""
        texts = [t for _, p in self.pending for t in p.to_embed]
        before = self.embedded

        def batch_done(done: int, _total: int) -> None:
            if done:
                self.embedded = before + min(done * build.EMBED_BATCH, len(texts))
                self.tell(AddProgress("embed", self.embedded, self.known_texts))

        vectors = build.embed_batches(self.embedder, texts, embed_progress=batch_done)
        row = 0
        indexes = self.indexes
        for label, prepared in self.pending:
            rows = vectors[row : row + len(prepared.to_embed)]
            row += len(prepared.to_embed)
            try:
                index = build.finish_index(
                    prepared,
                    rows,
                    store=indexes.store,
                    embedder=self.embedder,
                    settings=indexes.settings,
                    fingerprint=indexes.fingerprint,
                )
            except DocpipeError as exc:
                self.finish(label, None, str(exc), False)
                continue
            indexes.remember(index)
            self.finish(label, index.doc, "", True)
        self.pending.clear()
