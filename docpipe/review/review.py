"""`review`: the review grid over a collection, a list of documents or files and folders, on this machine.

A function over the services it uses: the documents' indexes (`docpipe.ingest.indexes.IndexCache`) and what
answering shares (`docpipe.answer.answering.Answering`). `DocPipe.review` calls it, or, with the Ray
executor, `docpipe.review.ray_grid.review_on_ray`. The grid itself is filled by `docpipe.review.run`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from docpipe.collection.handle import Collection, expand_sources
from docpipe.errors import ConfigError, InputError
from docpipe.ingest import build
from docpipe.review.grid import ReviewGrid, Row
from docpipe.review.marks import DEFAULT_MATTER, MarkStore
from docpipe.review.run import ReviewProgress, run_grid
from docpipe.storage.store import sha256_hex
from docpipe.types import Document

if TYPE_CHECKING:
    from docpipe.answer.answering import Answering
    from docpipe.ingest.build import Source
    from docpipe.ingest.indexes import IndexCache
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.review.grid import Column
    from docpipe.storage.store import Store

__all__ = ["Reviewable", "check_ray_target", "review", "review_rows", "with_marks"]

#: What a grid reviews: a collection, a document, a file or folder, or a list of documents, files and folders.
Reviewable: TypeAlias = "Collection | Document | Source | Sequence[Document | Source]"


def review(
    docs: Reviewable,
    columns: list[Column],
    *,
    indexes: IndexCache,
    answering: Answering,
    mode: str,
    layout: str | None,
    password: str | None,
    use_cache: bool,
    progress: Callable[[ReviewProgress], None] | None,
    cancel: threading.Event | None,
) -> ReviewGrid:
    """Returns the grid of `docs` x `columns` (see `DocPipe.review`): each row's index opened (a file ingested)
    when the grid reaches it, a row that cannot be opened failed with the reason."""
    rows, opener = review_rows(docs, indexes=indexes, password=password)
    grid = run_grid(
        rows,
        columns,
        opener,
        answering=answering,
        use_cache=use_cache,
        mode=mode,
        layout=layout,
        progress=progress,
        cancel=cancel,
        collection=docs.name if isinstance(docs, Collection) else "",
        matter=docs.matter if isinstance(docs, Collection) else None,
    )
    return with_marks(grid, indexes.store, _matter(docs))


def with_marks(grid: ReviewGrid, store: Store, matter: str | None) -> ReviewGrid:
    """Returns `grid` holding the reviewers' marks its matter (``default`` for None) keeps on its cells
    (`docpipe.review.marks`): a rerun of the same documents and columns shows them again."""
    return grid.attach_marks(MarkStore.of(store).marks(matter or DEFAULT_MATTER, [r.document_id for r in grid.rows]))


def _matter(docs: Reviewable) -> str | None:
    """Returns the matter the reviewed documents are seen in: a collection's, or the one all documents share."""
    if isinstance(docs, Collection):
        return docs.matter
    items = [docs] if isinstance(docs, Document) or not isinstance(docs, Sequence) else list(docs)
    matters = {item.matter for item in items if isinstance(item, Document)}
    return matters.pop() if len(matters) == 1 else None


def check_ray_target(docs: Reviewable) -> Collection:
    """Returns `docs` when the Ray executor can review it: a collection with documents."""
    if not isinstance(docs, Collection):
        raise ConfigError(
            "the Ray executor reviews a collection: add the files with `docpipe ingest --collection NAME "
            "--executor ray FILES`, then review the collection"
        )
    if not docs.documents:
        raise _empty(docs)
    return docs


def _empty(coll: Collection) -> InputError:
    return InputError(
        f"collection {coll.name} has no documents: add some with "
        f"`docpipe ingest --collection {coll.name} FILES_OR_FOLDER`"
    )


def review_rows(
    docs: Reviewable, *, indexes: IndexCache, password: str | None
) -> tuple[list[Row], Callable[[int], SearchIndex]]:
    """Returns the grid's rows (a path that is missing or holds no PDF is a failed row already) and the
    function that opens row r's index, ingesting a file on first use."""
    if isinstance(docs, Collection):
        coll = docs
        members = coll.documents
        if not members:
            raise _empty(coll)
        rows = [Row(m.id, m.name) for m in members]
        return rows, lambda r: indexes.of_document(coll.document(members[r].id, password=password), password)
    items = (
        [docs]
        if isinstance(docs, (Document, str, bytes, bytearray, memoryview)) or not isinstance(docs, Sequence)
        else list(docs)
    )
    rows = []
    sources: list[Document | tuple[Source, str] | None] = []
    for item in items:
        if isinstance(item, Document):
            rows.append(Row(item.id, item.name))
            sources.append(item)
            continue
        files, missing = expand_sources(item)  # type: ignore[arg-type]  # bytes were kept whole above
        for source, label in files:
            rows.append(Row("", label))
            sources.append((source, label))
        rows.extend(Row("", path, error=reason) for path, reason in missing)
        sources.extend(None for _ in missing)
    if not rows:
        raise InputError("nothing to review: give a collection, documents, files or a folder of PDFs")

    def open_index(r: int) -> SearchIndex:
        source = sources[r]
        if isinstance(source, Document):
            return indexes.of_document(source, password)
        assert source is not None  # a failed row is never opened
        data, label = build.read_source(*source)
        return indexes.from_bytes(sha256_hex(data), data, label, password)

    return rows, open_index
