"""The texts offline answers score, for a whole document: every sentence of every section's clauses, and every
section's heading path. `document_texts` lists them so they are embedded in one batched pass (at ingestion, or
on a document's first offline use) into the `docpipe.embed.table.VectorTable` kept beside its index.

The offline clause picker (`docpipe.answer.extractive`) cuts sections with the same `clause_spans` and
`MAX_CLAUSE_CHARS` and names headings with the same `heading_text`, so what a question needs is in the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from docpipe.ingest.clauses import clause_spans
from docpipe.types import Section

__all__ = ["MAX_CLAUSE_CHARS", "SENTENCE_VECTORS", "document_texts", "heading_text", "section_sentences"]

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
