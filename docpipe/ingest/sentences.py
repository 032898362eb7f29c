"""The texts offline answers score, for a whole document: every sentence of every section's clauses, and every
section's heading path. `document_texts` lists them so they are embedded in one batched pass (at ingestion, or
on a document's first offline use) into the `docpipe.embed.table.VectorTable` kept beside its index.

The offline clause picker (`docpipe.answer.extractive`) cuts sections with the same `clause_spans` and
`MAX_CLAUSE_CHARS` and names headings with the same `heading_text`, so what a question needs is in the table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from docpipe.embed.table import VectorTable, maker
from docpipe.ingest.clauses import clause_spans
from docpipe.types import Section

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder
    from docpipe.settings import Settings
    from docpipe.storage.store import Store

__all__ = [
    "MAX_CLAUSE_CHARS",
    "SENTENCE_VECTORS",
    "at_ingestion",
    "document_texts",
    "heading_text",
    "read_table",
    "section_sentences",
    "write_table",
]

logger = logging.getLogger(__name__)

#: Beside a stored index (``index-<fingerprint>/``): the document's sentence embeddings, a `VectorTable`. Written
#: apart from the index's manifest, since offline answers add to it.
SENTENCE_VECTORS = "sentences.npz"

#: Longest quoted clause, in characters (a longer paragraph is quoted as runs of whole sentences).
MAX_CLAUSE_CHARS = 700


def heading_text(heading_path: Sequence[str]) -> str:
    """Returns the text a section's heading path is embedded as ("Termination > Termination for Convenience")."""
    return " > ".join(heading_path) or "Untitled"


def section_sentences(text: str) -> list[str]:
    """Returns the sentences of `text`'s clauses, in order, as the clause picker reads them."""
    return [text[a:b] for clause in clause_spans(text, max_chars=MAX_CLAUSE_CHARS) for a, b in clause.sentences]


def document_texts(sections: Iterable[Section]) -> list[str]:
    """Returns every text offline answers over `sections` embed, each once: sentences, then heading paths."""
    sentences: dict[str, None] = {}
    headings: dict[str, None] = {}
    for section in sections:
        sentences.update(dict.fromkeys(section_sentences(section.text)))
        headings[heading_text(section.heading_path)] = None
    return list(sentences) + [h for h in headings if h not in sentences]


def at_ingestion(settings: Settings) -> bool:
    """Returns True when ingestion embeds the sentences (`embedding.sentence_vectors`): ``ingest``, or ``auto``
    while no language model is configured (a server URL, a vLLM model folder, or the vllm/openai backend:
    `docpipe.engine.resolve_backend`, the GPU left out), whose answers would not read them."""
    from docpipe.engine import resolve_backend

    chosen = settings.embedding.sentence_vectors
    if chosen != "auto":
        return chosen == "ingest"
    return resolve_backend(settings.engine, gpu=False) not in ("vllm", "openai")


def _name(store: Store, doc_id: str, fingerprint: str) -> str:
    return f"{store.index_dir(doc_id, fingerprint).name}/{SENTENCE_VECTORS}"


def read_table(store: Store, doc_id: str, fingerprint: str, embedder: Embedder) -> VectorTable:
    """Returns the document's stored sentence table; an empty one when there is none, or when it is damaged or
    made by another embedder (then it is logged and made again)."""
    made_by = maker(fingerprint, embedder)
    name = _name(store, doc_id, fingerprint)
    try:
        stored = store.read_file(doc_id, name)
        if stored is not None:
            return VectorTable.load(stored, made_by=made_by, dim=embedder.dim)
    except (OSError, ValueError) as exc:
        logger.warning("ignoring %s (%s); its embeddings are made again", store.doc_dir(doc_id) / name, exc)
    return VectorTable(made_by, dim=embedder.dim)


def write_table(store: Store, doc_id: str, fingerprint: str, table: VectorTable) -> bool:
    """Stores the document's sentence table beside its index; False (logged) when it cannot be written: it is
    then written again by the next offline use that adds to it."""
    name = _name(store, doc_id, fingerprint)
    try:
        store.write_file(doc_id, name, table.dump())
    except OSError as exc:
        logger.warning("cannot store sentence embeddings at %s (%s)", store.doc_dir(doc_id) / name, exc)
        return False
    return True
