"""The sentence embeddings offline answers read, kept beside a document's index in the store
(`docpipe.ingest.sentences.SENTENCE_VECTORS`, a `docpipe.embed.table.VectorTable`).

Ingestion writes the whole document's table in the same batched pass that embeds its passages (setting
`embedding.sentence_vectors`, ``ingest``). An index stored without one (made before tables existed, or with
``first_use``) gets it on its first offline use, in one batched pass over every section. An offline answer then
only looks its sentences up; the few it cannot find (a clause cut differently) are embedded and written back,
so asking again, even from a new process, embeds nothing but the question. Sealed like every other file of the
document when the store has a key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from docpipe.answer import extractive
from docpipe.ingest.sentences import SENTENCE_VECTORS, document_texts, read_table, write_table

if TYPE_CHECKING:
    from docpipe.embed.table import VectorTable
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.storage.store import Store

__all__ = ["SENTENCE_VECTORS", "StoredSentences"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class StoredSentences:
    """The sentence embeddings `store` holds for documents indexed under `fingerprint`."""

    def __init__(self, store: Store, fingerprint: str) -> None:
        self.store = store
        self.fingerprint = fingerprint

    def around(self, index: SearchIndex, work: Callable[[], T]) -> T:
        """Returns what `work` (offline answers or checklist candidates over `index`) returns, run with the
        document's sentence table (`load`); what it added is stored afterwards (`save`)."""
        self.load(index)
        result = work()
        self.save(index)
        return result

    def load(self, index: SearchIndex) -> VectorTable:
        """Returns the document's sentence table, read from the store once per loaded index; when the store holds
        none, or one that does not cover the document, it is completed in one batched pass and stored. A
        damaged file, or one made by another embedder, is ignored (the table is made again)."""
        cache = index.sentence_cache
        with cache.lock:
            if cache.saved is not None:
                return extractive.sentence_table(cache, index.embedder)
            table = read_table(self.store, index.doc.id, self.fingerprint, index.embedder)
            if not table.complete:
                texts = table.missing(document_texts(index.doc.sections))
                if texts:
                    logger.info("embedding %d sentences of %s for offline answers", len(texts), index.doc.name)
                    table.add(texts, index.embedder.embed(texts))
                table.complete = True
                cache.saved = -1  # not in the store yet
            else:
                cache.saved = len(table)
            extractive.put_table(cache, table)
        self.save(index)
        return table

    def save(self, index: SearchIndex) -> None:
        """Stores the document's sentence table when it holds more than the store's copy."""
        cache = index.sentence_cache
        table = extractive.sentence_table(cache, index.embedder)
        count = len(table)
        if cache.saved is None or count <= cache.saved:
            return
        if write_table(self.store, index.doc.id, self.fingerprint, table):
            cache.saved = count
