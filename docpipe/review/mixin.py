"""`ReviewMixin`: `DocPipe.review`, the review grid over a collection, a list of documents or a folder.

`DocPipe` inherits the mixin; this module never imports `docpipe.pipeline` (it sits below it), so the facade's
own attributes and methods it uses are declared for the type checker only. The grid itself is filled by
`docpipe.review.run`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from docpipe.analysis.analyze import check_mode
from docpipe.collection.handle import Collection, expand_sources
from docpipe.errors import ConfigError, InputError
from docpipe.review.grid import ReviewGrid, Row
from docpipe.review.run import ReviewProgress, columns_for, run_grid
from docpipe.types import Document

if TYPE_CHECKING:
    from docpipe.answer.cache import AnswerCache
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine
    from docpipe.ingest.build import Source
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings

__all__ = ["ReviewMixin"]


class ReviewMixin:
    """The review-grid method of `DocPipe` (see the module docstring)."""

    if TYPE_CHECKING:  # the facade's own, which these methods use
        settings: Settings
        fingerprint: str

        @property
        def embedder(self) -> Embedder: ...

        @property
        def engine(self) -> Engine | None: ...

        def index(self, doc: Any, *, password: str | None = None) -> SearchIndex: ...

        def ingest(
            self,
            source: Source,
            *,
            password: str | None = None,
            name: str | None = None,
            progress: Callable[[str], None] | None = None,
            owner: str | None = None,
        ) -> Document: ...

        def _answer_cache(self) -> AnswerCache: ...

        def _with_stored_vectors(self, index: SearchIndex, answer: Callable[[], Any]) -> Any: ...

    def review(
        self,
        docs: Collection | Document | Source | Sequence[Document | Source],
        *,
        questions: Sequence[str] | None = None,
        checklist: bool = False,
        categories: Sequence[str] | None = None,
        mode: str = "think",
        layout: str | None = None,
        password: str | None = None,
        use_cache: bool = True,
        progress: Callable[[ReviewProgress], None] | None = None,
        cancel: threading.Event | None = None,
        executor: str = "local",
    ) -> ReviewGrid:
        """Returns the `ReviewGrid` of `docs` (a collection, documents, files or folders, searched recursively)
        against `questions` and/or the clause checklist (`checklist` for all 41 categories, `categories` for
        those named): one row per document, one column per question, every cell answered.

        With a language model each cell is present / absent / uncertain with a short answer and verified
        quotes (thinking by default: `mode`); without one, candidate / not_found with the best-matching
        clauses. A document that cannot be read (no such file, wrong password, no text layer ...) gets a row of
        failed cells saying why; the others go on. Cells are cached by content as they finish, so a grid run
        again (after a crash, or with one more document) computes only what it lacks. `progress` is called
        after every cell; `cancel` (set from another thread) stops the grid between engine batches.

        `executor` ``"ray"`` fills a collection's grid as a Ray Data pipeline on the cluster the settings name
        (`docpipe.review.ray_grid`): the same cells, cached in the same cell cache.
        """
        check_mode(mode)
        columns = columns_for(questions, checklist=checklist, categories=categories)
        if executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {executor!r}: use local or ray")
        if executor == "ray":
            if not isinstance(docs, Collection):
                raise ConfigError(
                    "the Ray executor reviews a collection: add the files with `docpipe ingest --collection NAME "
                    "--executor ray FILES`, then review the collection"
                )
            if not docs.documents:
                self._review_rows(docs, password)  # the empty collection's error, as the local executor gives it
            from docpipe.review.ray_grid import review_on_ray

            return review_on_ray(
                self,
                docs,
                columns,
                mode=mode,
                layout=layout,
                password=password,
                use_cache=use_cache,
                progress=progress,
                cancel=cancel,
            )
        rows, opener = self._review_rows(docs, password)
        engine = self.engine
        collection = docs.name if isinstance(docs, Collection) else ""
        matter = docs.matter if isinstance(docs, Collection) else None
        return run_grid(
            rows,
            columns,
            opener,
            engine=engine,
            embedder=self.embedder,
            settings=self.settings,
            fingerprint=self.fingerprint,
            cache=self._answer_cache if use_cache else None,
            mode=mode,
            layout=layout,
            offline=self._with_stored_vectors,
            progress=progress,
            cancel=cancel,
            collection=collection,
            matter=matter,
        )

    def _review_rows(
        self, docs: Collection | Document | Source | Sequence[Document | Source], password: str | None
    ) -> tuple[list[Row], Callable[[int], SearchIndex]]:
        """Returns the grid's rows (a path that is missing or holds no PDF is a failed row already) and the
        function that opens row r's index, ingesting a file on first use."""
        if isinstance(docs, Collection):
            coll = docs
            members = coll.documents
            if not members:
                raise InputError(
                    f"collection {coll.name} has no documents: add some with "
                    f"`docpipe ingest --collection {coll.name} FILES_OR_FOLDER`"
                )
            rows = [Row(m.id, m.name) for m in members]
            return rows, lambda r: self.index(coll.document(members[r].id, password=password), password=password)
        items = (
            [docs]
            if isinstance(docs, (Document, str, bytes, bytearray, memoryview)) or not isinstance(docs, Sequence)
            else list(docs)
        )
        rows = []
        sources: list[Any] = []
        for item in items:
            if isinstance(item, Document):
                rows.append(Row(item.id, item.name))
                sources.append(item)
                continue
            files, missing = expand_sources(item)  # type: ignore[arg-type]
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
                return self.index(source, password=password)
            file, label = source
            return self.index(self.ingest(file, password=password, name=label), password=password)

        return rows, open_index
