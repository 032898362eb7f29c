"""`IndexCache`: the documents' search indexes a process holds, loaded from the store or built, and the
extraction slots every build waits for.

One per `DocPipe`. It keeps the last `KEEP_LOADED` indexes in memory; a document the store holds is loaded
(no extraction, no embedding); one it does not hold waits for an extraction slot (`extraction.max_concurrent`,
shared by every caller of the object: API, workbench, CLI), is extracted in a worker process and embedded.
Whoever asks is checked by the `Gate` it was given (`docpipe.access.gate.AccessGate.check`) and sees the
document under the name they gave: the store keeps one copy of the bytes, named by whoever stored them first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from docpipe.errors import InputError
from docpipe.ingest import build
from docpipe.ingest.slots import ExtractionSlots
from docpipe.types import scoped_matter

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder
    from docpipe.ingest.build import BatchProgress
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings
    from docpipe.storage.store import Store
    from docpipe.types import Document

__all__ = ["KEEP_LOADED", "Gate", "IndexCache", "unnamed"]

Progress = Callable[[str], None]

#: Indexes kept in memory, the most recently used.
KEEP_LOADED = 16


class Gate(Protocol):
    """Returns when the caller may read `doc`'s stored text, else raises (`AccessGate.check`)."""

    def __call__(self, doc: Document, password: str | None, data: bytes | None, *, name: str) -> None: ...


def unnamed(doc_id: str) -> str:
    """Returns what a document is called to a caller who gave no name: never the name another caller stored."""
    return f"document {doc_id[:12]}"


def _quiet(_stage: str) -> None:
    pass


class IndexCache:
    """The indexes of one `DocPipe` (see the module docstring)."""

    def __init__(
        self,
        *,
        store: Store,
        settings: Settings,
        fingerprint: str,
        embedder: Callable[[], Embedder],
        gate: Gate,
    ) -> None:
        self.store = store
        self.settings = settings
        self.fingerprint = fingerprint
        self._embedder = embedder
        self.gate = gate
        extraction = settings.extraction
        #: Every extraction waits for one of these; documents already in the store never do.
        self.slots = ExtractionSlots(extraction.max_concurrent, wait_s=extraction.queue_wait_s)
        self._loaded: OrderedDict[str, SearchIndex] = OrderedDict()
        self._lock = threading.Lock()

    def held(self, doc_id: str) -> SearchIndex | None:
        """Returns the document's index from memory or the store (None when neither holds it), unchecked:
        the caller checks access before handing anything of it out."""
        with self._lock:
            index = self._loaded.get(doc_id)
        if index is None:
            index = build.load_index(
                doc_id,
                store=self.store,
                embedder=self._embedder(),
                retrieval=self.settings.retrieval,
                fingerprint=self.fingerprint,
            )
        return index

    def remember(self, index: SearchIndex) -> None:
        """Keeps `index` in memory, the most recent; the least recently used beyond `KEEP_LOADED` go."""
        with self._lock:
            self._loaded[index.doc.id] = index
            self._loaded.move_to_end(index.doc.id)
            while len(self._loaded) > KEEP_LOADED:
                self._loaded.popitem(last=False)

    def forget(self, doc_id: str) -> None:
        """Drops the document's index from memory (the store is the caller's business)."""
        with self._lock:
            self._loaded.pop(doc_id, None)

    def from_bytes(
        self,
        doc_id: str,
        data: bytes,
        label: str,
        password: str | None,
        *,
        progress: Progress = _quiet,
        owner: str | None = None,
        embed_progress: BatchProgress | None = None,
    ) -> SearchIndex:
        """Returns the index of the document `data` (whose id is `doc_id`), loaded or built, seen under `label`.

        A build waits for an extraction slot (`owner`, e.g. a server's user, holds at most all but one of them)
        and raises `BusyError` after `extraction.queue_wait_s`."""
        index = self.held(doc_id)
        built = False
        if index is None:
            with self.slots.take(label, owner=owner):
                index = self.held(doc_id)  # built while this caller waited?
                if index is None:
                    index = self.build(doc_id, data, label, password, progress=progress, embed_progress=embed_progress)
                    built = True  # its password was checked on the way
        # The same bytes may be stored under another caller's name (of another matter, even): this caller
        # sees, and hears errors about, the document under the name it gave.
        if not built:
            self.gate(index.doc, password, data, name=label)
        self.remember(index)
        return build.view(index, replace(index.doc, name=label))

    def document(
        self,
        doc_id: str,
        *,
        password: str | None = None,
        authorized: bool = False,
        name: str | None = None,
        matter: str | None = None,
    ) -> Document | None:
        """Returns the stored document with this id seen under `name` and scoped to `matter` (see
        `DocPipe.document`), or None when the store does not hold it (or `doc_id` is not a document id)."""
        if not isinstance(doc_id, str) or len(doc_id) != 64 or doc_id.strip("0123456789abcdef"):
            return None
        index = self.stored(doc_id, password=password, authorized=authorized, name=name)
        if index is None:
            return None
        return replace(index.doc, name=name or index.doc.name, matter=scoped_matter(matter))

    def stored(self, doc_id: str, *, password: str | None, authorized: bool, name: str | None) -> SearchIndex | None:
        """Returns the index of a document the store holds (None when it does not), checked unless
        `authorized`; the store's PDF is extracted again when only its bytes are left (that index is seen under
        `name`)."""
        index = self.held(doc_id)
        if index is None:
            source = self.store.load_source(doc_id)
            if source is None:
                return None
            return self.from_bytes(doc_id, source, name or unnamed(doc_id), password)
        if not authorized and index.doc.password_check:
            # Named as this caller knows it: the stored name is the first uploader's, maybe of another matter.
            self.gate(index.doc, password, self.store.load_source(doc_id), name=name or unnamed(doc_id))
        self.remember(index)
        return index

    def of_document(self, doc: Document, password: str | None) -> SearchIndex:
        """Returns the index of `doc` seen under its own name and matter: loaded, or built again from the
        stored PDF; a `Document` that did not come from opening the PDF with its password is checked."""
        index = self.held(doc.id)
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
            assert source is not None
            index = self.build(doc.id, source, doc.name, password)
        elif source is not None:
            self.gate(index.doc, password, source, name=doc.name)
        self.remember(index)
        return build.view(index, doc)

    def build(
        self,
        doc_id: str,
        data: bytes,
        label: str,
        password: str | None,
        *,
        progress: Progress = _quiet,
        embed_progress: BatchProgress | None = None,
    ) -> SearchIndex:
        """Returns the index built from `data`: extracted (or the stored extraction), checked, embedded, stored."""
        doc = build.extract(
            self.store,
            doc_id,
            data,
            label,
            password,
            settings=self.settings.extraction,
            fingerprint=self.fingerprint,
            progress=progress,
        )
        self.gate(doc, password, data, name=label)
        return build.build_index(
            doc,
            store=self.store,
            embedder=self._embedder(),
            settings=self.settings,
            fingerprint=self.fingerprint,
            progress=progress,
            embed_progress=embed_progress,
        )
