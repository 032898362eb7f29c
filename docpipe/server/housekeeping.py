"""Deletion and retention across every place a document leaves traces: its matters' records, the stored
answers and reports, review jobs and their grids, the answer cache and the content-addressed store (PDF,
extracted text, indexes).
The server's DELETE routes, its retention sweep and ``docpipe rm`` all go through `Housekeeper`."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe.access.matters import MatterStore
from docpipe.server.jobs import JobRunner, JobStore
from docpipe.server.storage import ResultStore

if TYPE_CHECKING:
    from docpipe.access.log import AccessLog
    from docpipe.pipeline import DocPipe

__all__ = ["Housekeeper", "Removed"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Removed:
    """What one deletion removed, counted by kind (added up over several documents with ``+=``)."""

    documents: int = 0
    results: int = 0
    purged: int = 0
    cached_answers: int = 0
    review_jobs: int = 0

    def __iadd__(self, other: Removed) -> Removed:
        self.documents += other.documents
        self.results += other.results
        self.purged += other.purged
        self.cached_answers += other.cached_answers
        self.review_jobs += other.review_jobs
        return self


class Housekeeper:
    """Returns what it removed; removes a document from a matter, a whole matter, or a document everywhere.

    The store underneath is shared by content: a file leaves it (PDF, text, indexes, cached answers) only
    when no matter holds it any more. While another matter still does, the cached answers about it go anyway
    (cheap to recompute; they may quote what the leaving matter asked about).
    """

    def __init__(
        self,
        dp: DocPipe,
        matters: MatterStore | None = None,
        results: ResultStore | None = None,
        jobs: JobRunner | JobStore | None = None,
        audit: AccessLog | None = None,
    ) -> None:
        self.dp = dp
        # Where the retention sweep says what it deleted: no user asked for it, so no route logs it.
        self.audit = audit
        self.matters = matters or MatterStore(dp.store.root)
        self.results = results or ResultStore(dp.store.root / "serve", sealer=dp.store.sealer)
        # Review jobs: their grids quote the documents. A server passes its runner (unfinished jobs are
        # cancelled first); `docpipe rm` deletes the records.
        self.jobs: JobRunner | JobStore = jobs or JobStore(dp.store.root / "jobs", sealer=dp.store.sealer)
        # Uploads under way in this process, by document id, and whether the store lacked the document when
        # the first of them started.
        self._uploading: Counter[str] = Counter()
        self._fresh: dict[str, bool] = {}
        self._upload_lock = threading.Lock()

    @contextlib.contextmanager
    def upload(self, doc_id: str) -> Iterator[None]:
        """Runs an upload's ingestion and matter record. When they fail, what the upload left in the store goes
        (the PDF and its text are kept before the index, which a full disk can refuse), unless the store held
        the document before, a matter holds it, or another upload of it is still under way here: otherwise the
        contract would stay on disk where neither a DELETE (no matter holds it) nor the sweep reaches it."""
        with self.uploads([doc_id]) as failed:
            try:
                yield
            except BaseException:
                failed.add(doc_id)
                raise

    @contextlib.contextmanager
    def uploads(self, doc_ids: list[str], *, raising_fails_all: bool = True) -> Iterator[set[str]]:
        """`upload` for several files at once (a collection add, where one file failing does not raise): the
        caller adds the ids of the files that failed to the set it is given; when the block raises, all of them
        count as failed, unless `raising_fails_all` is False (some may have become members of a collection
        before the error: only those named failed go)."""
        ids = list(dict.fromkeys(doc_ids))
        with self._upload_lock:
            for doc_id in ids:
                if not self._uploading[doc_id]:
                    self._fresh[doc_id] = not self.dp.store.doc_dir(doc_id).exists()
                self._uploading[doc_id] += 1
        failed: set[str] = set()
        try:
            yield failed
        except BaseException:
            if raising_fails_all:
                failed.update(ids)
            raise
        finally:
            with self._upload_lock:
                for doc_id in ids:
                    self._uploading[doc_id] -= 1
                    if self._uploading[doc_id]:
                        continue
                    del self._uploading[doc_id]
                    fresh = self._fresh.pop(doc_id)
                    if (
                        doc_id in failed
                        and fresh
                        and not self.matters.holders(doc_id)
                        and self.dp.store.delete_document(doc_id)
                    ):
                        logger.info("removed what a failed upload of %s left in the store", doc_id[:12])

    def _settle(self, doc_id: str) -> Removed:
        if self.matters.holders(doc_id):
            return Removed(cached_answers=self.dp.forget_answers(doc_id))
        cached = self.dp.forget_answers(doc_id)
        return Removed(purged=int(self.dp.store.delete_document(doc_id)), cached_answers=cached)

    def _leave_collections(self, matter: str, doc_id: str) -> None:
        for coll in self.dp.collections(matter=matter):
            if any(member.id == doc_id for member in coll.documents):
                coll.remove(doc_id)  # its card and pooled vectors leave the collection's index too

    def remove(self, matter: str, doc_id: str) -> Removed:
        """Removes the document from `matter` (its record, answers and reports, its place in the matter's
        collections, the review jobs that quote it), then settles the store."""
        jobs = self._forget_jobs(matter=matter, document=doc_id)
        self._leave_collections(matter, doc_id)
        held = self.matters.remove(matter, doc_id)
        removed = Removed(
            documents=int(held), results=self.results.delete_document(doc_id, matter=matter), review_jobs=jobs
        )
        removed += self._settle(doc_id)
        return removed

    def _forget_jobs(self, **which: Any) -> int:
        if isinstance(self.jobs, JobRunner):
            return self.jobs.forget(**which)
        return self.jobs.forget(collection_holds=self._held_by_collection(which.get("document")), **which)

    def _held_by_collection(self, doc_id: str | None) -> Any:
        def holds(job: Any) -> bool:
            coll = self.dp.collection(job.collection, matter=job.matter)
            return doc_id is not None and coll.exists and doc_id in coll

        return holds

    def delete_matter(self, matter: str) -> Removed:
        """Removes the whole matter: its documents' records, its collections, its review jobs, its answers and
        reports, then settles the store for each of its documents."""
        jobs = self._forget_jobs(matter=matter)
        for coll in self.dp.collections(matter=matter):
            coll.delete()  # also drops the pipeline's loaded copy of the collection's index
        ids = self.matters.delete_matter(matter)
        removed = Removed(
            documents=len(ids),
            results=self.results.delete_matter(matter),
            cached_answers=self.dp.forget_matter(matter),
            review_jobs=jobs,
        )
        for doc_id in ids:
            removed += self._settle(doc_id)
        return removed

    def purge(self, doc_id: str) -> Removed:
        """Removes the document from every matter and from the store: nothing of it is left."""
        removed = Removed(review_jobs=self._forget_jobs(document=doc_id))
        for matter in self.matters.matters():
            self._leave_collections(matter, doc_id)
        for matter in self.matters.holders(doc_id):
            removed += Removed(documents=int(self.matters.remove(matter, doc_id)))
        removed.results += self.results.delete_document(doc_id)
        removed.cached_answers += self.dp.forget_answers(doc_id)
        removed.purged += int(self.dp.delete_document(doc_id))
        return removed

    def sweep(self, max_age_s: float) -> Removed:
        """Removes what is older than `max_age_s`: stored answers and reports, cached answers, and documents
        uploaded into a matter that long ago (with what they left in the store)."""
        cutoff = time.time() - max_age_s
        removed = Removed(
            results=self.results.sweep(max_age_s),
            cached_answers=self.dp.sweep_answers(max_age_s),
            review_jobs=self._forget_jobs(finished_before=cutoff),
        )
        for matter in self.matters.matters():
            for record in self.matters.documents(matter):
                if record.added < cutoff:
                    removed += self.remove(matter, record.id)
                    if self.audit is not None:
                        self.audit.record(
                            user="retention",
                            key_id="retention",
                            matter=matter,
                            action="retention_purge",
                            document=record.id,
                            detail=f"uploaded {(time.time() - record.added) / 86400:.1f} days ago; "
                            f"the policy keeps {max_age_s / 86400:g} days",
                        )
        logger.info("retention sweep: %s", removed)
        return removed
