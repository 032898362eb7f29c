"""The sentence embeddings offline answers make, kept beside a document's index in the store: loaded before an
offline answer or checklist runs, and the ones it added written back after, so asking again, even from a new
process, embeds nothing. Sealed like every other file of the document when the store has a key."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.storage.store import Store

__all__ = ["SENTENCE_VECTORS", "StoredSentences"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Beside a stored index: the sentence embeddings of the sections offline answers have quoted from.
SENTENCE_VECTORS = "sentences.npz"


class StoredSentences:
    """The sentence embeddings `store` holds for documents indexed under `fingerprint`."""

    def __init__(self, store: Store, fingerprint: str) -> None:
        self.store = store
        self.fingerprint = fingerprint

    def around(self, index: SearchIndex, work: Callable[[], T]) -> T:
        """Returns what `work` (offline answers or checklist candidates over `index`) returns, run with the
        sentence embeddings the store holds for its document; those it added are stored afterwards. A damaged
        file is ignored (the embeddings are made again)."""
        from docpipe.answer import extractive

        cache, store, doc_id = index.sentence_cache, self.store, index.doc.id
        name = f"{store.index_dir(doc_id, self.fingerprint).name}/{SENTENCE_VECTORS}"
        path = store.doc_dir(doc_id) / name
        if cache.saved is None:
            try:
                stored = store.read_file(doc_id, name)
                if stored is not None:
                    extractive.load_vectors(stored, cache)
            except (OSError, ValueError, KeyError) as exc:
                logger.warning("ignoring unreadable %s (%s); its embeddings are made again", path, exc)
            cache.saved = extractive.stored_sections(cache)
        result = work()
        count = extractive.stored_sections(cache)
        if count > cache.saved:
            try:
                store.write_file(doc_id, name, extractive.dump_vectors(cache))
                cache.saved = count
            except OSError as exc:
                logger.warning("cannot store sentence embeddings at %s (%s)", path, exc)
        return result
