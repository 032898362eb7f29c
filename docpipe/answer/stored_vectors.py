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

__all__ = ["SENTENCE_VECTORS", "with_stored_vectors"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Beside a stored index: the sentence embeddings of the sections offline answers have quoted from.
SENTENCE_VECTORS = "sentences.npz"
# In an index's sentence cache: how many sections' embeddings the store already holds.
_SAVED = "saved:"


def with_stored_vectors(store: Store, fingerprint: str, index: SearchIndex, answer: Callable[[], T]) -> T:
    """Returns what `answer` (offline answers or checklist candidates) returns, run with the sentence embeddings
    `store` holds for `index`'s document under `fingerprint`; those it added are stored afterwards. A damaged
    file is ignored (the embeddings are made again)."""
    from docpipe.answer import extractive

    cache = index.sentence_cache
    name = f"{store.index_dir(index.doc.id, fingerprint).name}/{SENTENCE_VECTORS}"
    path = store.doc_dir(index.doc.id) / name
    if _SAVED not in cache:
        try:
            stored = store.read_file(index.doc.id, name)
            if stored is not None:
                extractive.load_vectors(stored, cache)
        except (OSError, ValueError, KeyError) as exc:
            logger.warning("ignoring unreadable %s (%s); its embeddings are made again", path, exc)
        cache[_SAVED] = extractive.stored_sections(cache)
    result = answer()
    count = extractive.stored_sections(cache)
    if count > cache[_SAVED]:
        try:
            store.write_file(index.doc.id, name, extractive.dump_vectors(cache))
            cache[_SAVED] = count
        except OSError as exc:
            logger.warning("cannot store sentence embeddings at %s (%s)", path, exc)
    return result
