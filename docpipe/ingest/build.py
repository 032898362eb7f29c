"""A document's search index: made from its PDF or Word file (read from a path or bytes, extracted text, clause-aware sections, embedder-sized passages,
their embeddings in FAISS), kept in the store under the document id and the index fingerprint, and loaded back.

Functions over explicit arguments (store, embedder, settings, fingerprint); `docpipe.ingest.indexes` keeps
the loaded indexes and the extraction slots and calls them. The extraction record stored per document says
whether opening the PDF needed a password and holds a slow hash of the password that did (`password_check`):
`docpipe.access.gate` hands stored text out only to a caller who can open the PDF.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import EmptyFileError, FileMissingError, InputError
from docpipe.events import emit as emit_metric
from docpipe.retrieve.fusion import SearchIndex
from docpipe.types import Document, Page, PageStatus, Passage

if TYPE_CHECKING:
    import numpy as np

    from docpipe.embed.base import Embedder
    from docpipe.retrieve.dense import DenseIndex
    from docpipe.settings import ExtractionSettings, RetrievalSettings, Settings
    from docpipe.storage.store import Store

__all__ = [
    "EMBED_BATCH",
    "BatchProgress",
    "Prepared",
    "Source",
    "build_index",
    "embed_batches",
    "extract",
    "finish_index",
    "load_index",
    "password_check",
    "prepare_index",
    "read_source",
    "search_index",
    "stored_label",
    "stored_parts",
    "view",
]

logger = logging.getLogger(__name__)

# What a document (PDF or Word .docx) can be given as: a path, or its bytes.
Source = str | Path | bytes | bytearray | memoryview
Progress = Callable[[str], None]
#: Hears (0, batches in all) before the first batch of passages is embedded, then (batches done, batches in all).
BatchProgress = Callable[[int, int], None]

#: Texts (passages, then sentences) per call to the embedder when a document is indexed (and when a collection
#: is filled): the step of embedding progress. Above what the embedder reads with NumPy while its bulk backend is
#: not loaded (`NUMPY_BATCH_LIMIT`), so a long document's batches stay bulk work.
EMBED_BATCH = 128


def read_source(source: Source, name: str | None) -> tuple[bytes, str]:
    """Returns the document's bytes and the name to show for it (`name`, else the file's name, else
    ``document.pdf``); raises an `InputError` subclass for a missing file, a folder, an object of another type
    or an empty file. Whether the bytes are a PDF or a Word file is decided when they are extracted (`extract`)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        label = name or "document.pdf"
    elif isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        label = name or path.name
        if not path.exists():
            raise FileMissingError(f"no such file: {path}", path=str(path))
        if path.is_dir():
            raise InputError(f"{path} is a folder: give the PDF or .docx file inside it", path=str(path))
        data = path.read_bytes()
    else:
        raise InputError(
            f"cannot ingest an object of type {type(source).__name__}: pass a file path or the document's bytes",
        )
    if not data:
        raise EmptyFileError(f"{label} is empty (0 bytes): check the upload or the path", path=label)
    return data, label


def password_check(doc_id: str, password: str) -> str:
    """Returns the PBKDF2 of `password` salted with the document id, as stored beside an encrypted PDF's text."""
    # Slow on purpose: the store must not make guessing a document's password cheap.
    return hashlib.pbkdf2_hmac("sha256", password.encode(), doc_id.encode(), 100_000).hex()


def extract(
    store: Store,
    doc_id: str,
    data: bytes,
    label: str,
    password: str | None,
    *,
    settings: ExtractionSettings,
    fingerprint: str,
    progress: Progress,
) -> Document:
    """Returns the document's pages (no sections yet) from the store's extraction record for this extractor,
    else extracted now in a sandboxed worker and stored with the source bytes. A PDF is told from a Word file
    by its bytes or a ``.docx`` name (`document_kind`; anything else raises `NotAPDFError`); a Word file's
    "pages" are its paragraphs (`Document.kind` ``docx``), extracted by python-docx whatever the PDF
    extractor. Its `password_check` is set when opening the PDF needed `password`; the caller checks access
    before handing the text out."""
    from docpipe.ingest.extract.docx import READER, document_kind

    kind = document_kind(data, label)
    extractor = READER if kind == "docx" else settings.extractor
    record = store.load_extraction(doc_id, extractor)
    # Records from before the sandboxed encryption check (no "needs_password") are extracted again: the old
    # check failed open on PDFs pypdf could not parse.
    if record is None or "needs_password" not in record or _ocr_changed(record, settings):
        record = _extract_record(store, doc_id, data, label, password, kind=kind, settings=settings, progress=progress)
    pages = [Page.from_dict(p) for p in record["pages"]]
    return Document(
        id=doc_id,
        name=label,
        pages=pages,
        extractor=record["extractor"],
        fingerprint=fingerprint,
        password_check=record.get("password_check"),
        kind=kind,
    )


def stored_label(store: Store, doc_id: str, extractor: str) -> tuple[str, bool]:
    """Returns the name a stored document was first ingested under ("" when no extraction record is left) and
    whether it is an encrypted PDF, read from its extraction record by `extractor` or another reader. A
    document with no record is taken as encrypted: its text then needs a password, never less."""
    from docpipe.ingest.extract.docx import READER

    for reader in dict.fromkeys((extractor, "pypdf", "pypdfium2", READER)):
        record = store.load_extraction(doc_id, reader)
        if record is not None:
            return str(record.get("name", "")), record.get("password_check") is not None
    return "", True


def _extract_record(
    store: Store,
    doc_id: str,
    data: bytes,
    label: str,
    password: str | None,
    *,
    kind: str,
    settings: ExtractionSettings,
    progress: Progress,
) -> dict[str, Any]:
    from docpipe.ingest.extract import extract_document
    from docpipe.ingest.extract.docx import READER, extract_docx

    extractor = READER if kind == "docx" else settings.extractor
    progress(f"extracting with {extractor}")
    # The worker that reads the text also says whether opening needed a password: one parse, sandboxed,
    # and a check that cannot finish fails the extraction rather than leaving the text unlocked.
    if kind == "docx":
        extraction = extract_docx(data, settings=settings, name=label)
    else:
        extraction = extract_document(data, password=password, settings=settings, name=label)
    needs_password = extraction.encryption.needs_password
    record = {
        "name": label,
        "kind": kind,
        "extractor": extractor,
        "pages": [p.to_dict() for p in extraction.pages],  # an OCR page keeps its confidence and word boxes
        "ocr": settings.ocr_in_effect() if kind != "docx" else None,
        "password_check": password_check(doc_id, password) if password and needs_password else None,
        "needs_password": needs_password,
    }
    store.save_source(doc_id, data)
    store.save_extraction(doc_id, extractor, record)
    return record


def _ocr_changed(record: dict[str, Any], settings: ExtractionSettings) -> bool:
    """Returns True when OCR would now give the stored record's pages other text: it was made with other OCR
    (none, or another engine or dpi) and has pages without text or read by OCR. A record of a Word file, or of a
    PDF whose pages all have a text layer, stays."""
    if record.get("kind") == "docx" or record.get("ocr") == settings.ocr_in_effect():
        return False
    return any(p["status"] in (PageStatus.NO_TEXT.value, PageStatus.OCR.value) for p in record["pages"])


@dataclass(slots=True)
class Prepared:
    """A document made ready for embedding: sections set, passages cut, the texts the embedder reads for the
    passages (`texts`) and, when made at ingestion, for the sentence table (`sentences`)."""

    doc: Document
    passages: list[Passage]
    texts: list[str]
    sentences: list[str] = field(default_factory=list)

    @property
    def to_embed(self) -> list[str]:
        """Returns every text to embed, passages first: `finish_index` takes their vectors in this order."""
        return self.texts + self.sentences


def prepare_index(doc: Document, *, embedder: Embedder, settings: Settings, progress: Progress) -> Prepared:
    """Returns `doc` split into sections (set on `doc`) and passages sized to `embedder`, with the text the
    embedder reads for each passage and (`docpipe.ingest.sentences.at_ingestion`) the sentences offline answers
    score: everything of an index but the embeddings."""
    from docpipe.ingest.passages import embedding_text, make_passages
    from docpipe.ingest.sections import split_sections
    from docpipe.ingest.sentences import at_ingestion, document_texts
    from docpipe.tokens import get_token_counter

    progress("splitting into sections")
    counter = get_token_counter(settings.chunking.tokenizer)
    doc.sections = split_sections(doc, counter, settings.chunking)
    passages = make_passages(doc.sections, doc.text, embedder, overlap=settings.chunking.passage_overlap)
    sections = {s.id: s for s in doc.sections}
    texts = [embedding_text(p, sections[p.section_id], embedder) for p in passages]
    sentences = document_texts(doc.sections) if at_ingestion(settings) else []
    return Prepared(doc, passages, texts, sentences)


def finish_index(
    prepared: Prepared,
    vectors: np.ndarray,
    *,
    store: Store,
    embedder: Embedder,
    settings: Settings,
    fingerprint: str,
) -> SearchIndex:
    """Returns the search index of a prepared document given the embeddings of `prepared.to_embed` (`vectors`,
    one row per text: the passages', then the sentences'), saved in the store under the document id and
    `fingerprint`, with the sentence table beside it when the sentences were embedded."""
    from docpipe.retrieve.dense import DenseIndex

    doc, passages = prepared.doc, prepared.passages
    if len(vectors) != len(prepared.texts) + len(prepared.sentences):
        raise ValueError(f"{len(vectors)} vectors for {len(prepared.to_embed)} texts of {doc.name}")
    sentence_vectors = vectors[len(prepared.texts) :]
    vectors = vectors[: len(prepared.texts)]
    dense = DenseIndex(vectors, index_type=settings.retrieval.index_type)
    files = {
        "document.json": json.dumps(doc.to_dict()).encode(),
        "passages.json": json.dumps([[p.section_id, p.start, p.end] for p in passages]).encode(),
        "dense.faiss": dense.serialize(),
    }
    store.save_index(doc.id, fingerprint, files, {"embedder": embedder.name, "passages": len(passages)})
    index = search_index(doc, passages, dense, embedder=embedder, retrieval=settings.retrieval)
    if prepared.sentences:
        _save_sentences(index, prepared.sentences, sentence_vectors, store=store, fingerprint=fingerprint)
    logger.info(
        "ingested %s: %d pages, %d sections, %d passages", doc.name, len(doc.pages), len(doc.sections), len(passages)
    )
    emit_metric("pages_ingested", pages=len(doc.pages))
    return index


def _save_sentences(
    index: SearchIndex, texts: list[str], vectors: np.ndarray, *, store: Store, fingerprint: str
) -> None:
    """Stores the document's sentence table (`docpipe.embed.table.VectorTable`) beside its index, and hands it
    to the loaded index, so offline answers in this process read it too. One that cannot be written does not
    fail the ingestion: the index is stored, and the table is written on the first offline use."""
    from docpipe.embed.table import VectorTable, maker
    from docpipe.ingest.sentences import write_table

    table = VectorTable(maker(fingerprint, index.embedder), dim=index.embedder.dim)
    table.add(texts, vectors)
    table.complete = True
    index.sentence_cache.table = table
    index.sentence_cache.saved = len(table) if write_table(store, index.doc.id, fingerprint, table) else -1


def build_index(
    doc: Document,
    *,
    store: Store,
    embedder: Embedder,
    settings: Settings,
    fingerprint: str,
    progress: Progress,
    embed_progress: BatchProgress | None = None,
) -> SearchIndex:
    """Returns the search index of an extracted `doc`, made and stored: its sections (set on `doc`), passages
    sized to `embedder`, their embeddings in a dense index; saved under the document id and `fingerprint`.
    `progress` hears each stage by name, `embed_progress` each batch of passages embedded (`embed_batches`)."""
    prepared = prepare_index(doc, embedder=embedder, settings=settings, progress=progress)
    progress(
        f"embedding {len(prepared.passages)} passages"
        + (f" and {len(prepared.sentences)} sentences" if prepared.sentences else "")
    )
    vectors = embed_batches(embedder, prepared.to_embed, embed_progress=embed_progress)
    return finish_index(prepared, vectors, store=store, embedder=embedder, settings=settings, fingerprint=fingerprint)


def embed_batches(embedder: Embedder, texts: list[str], *, embed_progress: BatchProgress | None = None) -> np.ndarray:
    """Returns the embeddings of `texts`, one row each, computed `EMBED_BATCH` texts at a time in the order
    given, whether anyone listens or not: the vectors never depend on `embed_progress`, which hears (0, batches in
    all) before the first batch and (batches done, batches in all) after each."""
    import numpy as np

    total = -(-len(texts) // EMBED_BATCH)
    if embed_progress is not None and total:
        embed_progress(0, total)
    parts = []
    for done, start in enumerate(range(0, len(texts), EMBED_BATCH), 1):
        parts.append(embedder.embed(texts[start : start + EMBED_BATCH]))
        if embed_progress is not None:
            embed_progress(done, total)
    return np.vstack(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)


def load_index(
    doc_id: str, *, store: Store, embedder: Embedder, retrieval: RetrievalSettings, fingerprint: str
) -> SearchIndex | None:
    """Returns the stored search index of the document under `fingerprint`, or None when there is none; an
    unreadable one is dropped from the store (it is rebuilt on next use)."""
    parts = _stored(doc_id, store=store, fingerprint=fingerprint)
    if parts is None:
        return None
    doc, passages, dense = parts
    return search_index(doc, passages, dense, embedder=embedder, retrieval=retrieval)


def stored_parts(
    doc_id: str, *, store: Store, fingerprint: str, vectors: bool = True
) -> tuple[Document, list[str], np.ndarray | None] | None:
    """Returns the stored document, its passage texts and (with `vectors`) their vectors (one row each),
    without building a search index (no BM25): what a collection's pooled index needs of a member. None when
    not stored."""
    import faiss
    import numpy as np

    parts = _stored(doc_id, store=store, fingerprint=fingerprint)
    if parts is None:
        return None
    doc, passages, dense = parts
    if not vectors:
        return doc, [p.text for p in passages], None
    raw = dense.faiss_index
    size = int(raw.ntotal)
    if size == 0:
        rows = np.zeros((0, raw.d), dtype=np.float32)
    else:
        if isinstance(raw, faiss.IndexIVF):
            raw.make_direct_map()
        elif isinstance(raw, faiss.IndexHNSW):
            raw = faiss.downcast_index(raw.storage)
        rows = np.asarray(raw.reconstruct_n(0, size), dtype=np.float32)
    return doc, [p.text for p in passages], rows


def _stored(doc_id: str, *, store: Store, fingerprint: str) -> tuple[Document, list[Passage], DenseIndex] | None:
    files = store.load_index(doc_id, fingerprint)
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
        store.drop_index(doc_id, fingerprint)
        return None
    return doc, passages, dense


def search_index(
    doc: Document, passages: list[Passage], dense: DenseIndex, *, embedder: Embedder, retrieval: RetrievalSettings
) -> SearchIndex:
    """Returns the `SearchIndex` over `doc`'s passages: dense scores, plus BM25 when `retrieval.hybrid`."""
    return SearchIndex(
        doc=doc,
        passages=passages,
        dense=dense,
        embedder=embedder,
        hybrid=retrieval.hybrid,
        rrf_k=retrieval.rrf_k,
    )


def view(index: SearchIndex, doc: Document) -> SearchIndex:
    """Returns `index` seen through `doc`: its display name and matter, the shared index underneath."""
    if doc.name == index.doc.name and doc.matter == index.doc.matter:
        return index
    seen = copy.copy(index)
    seen.doc = replace(index.doc, name=doc.name, matter=doc.matter)
    return seen
