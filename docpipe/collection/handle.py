"""`Collection`, the handle on a named set of stored documents (add, list, remove, delete), and how files and
folders become the documents to add (`expand_sources`). The work is the `CollectionService`'s
(`docpipe.collection.service`), which the handle holds; it sees the service through the `CollectionWork`
protocol, which mypy checks the service against wherever a handle is made.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from docpipe.collection.reports import AddProgress, AddReport
from docpipe.errors import ConfigError, InputError
from docpipe.ingest.build import Source
from docpipe.storage.collections import Member, check_collection_name
from docpipe.types import Document

if TYPE_CHECKING:
    from docpipe.settings import Settings
    from docpipe.storage.collections import CollectionStore

__all__ = ["DOCUMENT_SUFFIXES", "AddProgress", "AddReport", "Collection", "CollectionWork", "expand_sources"]

#: File names a folder given to `Collection.add` contributes (searched recursively, case-insensitive).
DOCUMENT_SUFFIXES = (".pdf", ".docx")


class CollectionWork(Protocol):
    """What a `Collection` asks of the service that holds it (`docpipe.collection.service.CollectionService`)."""

    settings: Settings
    fingerprint: str

    @property
    def store_root(self) -> Path: ...

    def records(self, matter: str | None) -> CollectionStore: ...

    def document(
        self, doc_id: str, *, password: str | None = None, name: str | None = None, matter: str | None = None
    ) -> Document | None: ...

    def sync(self, coll: Collection) -> Any: ...

    def forget(self, coll: Collection) -> None: ...

    def ingest_files(
        self,
        files: Sequence[tuple[Source, str]],
        *,
        password: str | None,
        workers: int | None,
        progress: Callable[[AddProgress], None] | None,
        on_done: Callable[[str, Document | None, str, bool], None],
        skip: Callable[[str], bool],
        on_skip: Callable[[str, str], None],
        owner: str | None = None,
        ask_password: Callable[[str], str | None] | None = None,
    ) -> None: ...


# Finished members are recorded in batches (see Collection.add): at most this many files, or seconds, apart.
_RECORD_BATCH = 64
_RECORD_SECONDS = 2.0


class Collection:
    """A named set of documents in the store, asked as one (`DocPipe.collection`).

    `DocPipe.search`, `context`, `ask`, `ask_many` and `ask_stream` take a collection where they take a
    document: the question goes to the contracts it names (title, parties, file name) or, naming none, is
    ranked across all of them, and every hit and citation names its document.

    >>> coll = dp.collection("deal-x")                          # doctest: +SKIP
    >>> print(coll.add("collection/").summary())                    # doctest: +SKIP
    collection deal-x: 231 added, 0 already in it, 0 failed (4325 pages extracted in 512.0 s)
    """

    def __init__(self, service: CollectionWork, name: str, *, matter: str | None = None) -> None:
        self.service = service
        self.name = check_collection_name(name)
        self.matter = matter
        #: The records of the collections this one lives among (the library's, or its matter's).
        self.records = service.records(matter)

    def __repr__(self) -> str:
        where = f", matter={self.matter!r}" if self.matter else ""
        return f"Collection({self.name!r}{where}, {len(self)} documents)"

    @property
    def exists(self) -> bool:
        return self.records.exists(self.name)

    @property
    def documents(self) -> list[Member]:
        """Returns the members (id, name in the collection, when added, pages), in the order they were added."""
        return self.records.members(self.name)

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.documents)

    def __contains__(self, doc: object) -> bool:
        return self._find(doc) is not None

    def _find(self, doc: object) -> Member | None:
        members = self.documents
        if isinstance(doc, Member):
            doc = doc.id
        elif isinstance(doc, Document):
            doc = doc.id
        if not isinstance(doc, str):
            return None
        exact = [m for m in members if m.id == doc or m.name == doc]
        if exact:
            return exact[0]
        if len(doc) >= 8 and all(c in "0123456789abcdef" for c in doc):
            prefixed = [m for m in members if m.id.startswith(doc)]
            if len(prefixed) == 1:
                return prefixed[0]
        return None

    def document(self, doc: Member | Document | str, *, password: str | None = None) -> Document:
        """Returns a member as a `Document` seen under its name in the collection (a member may be given by
        id, id prefix of 8+ characters, or name); an `InputError` names the collection when it is not in it."""
        member = self._find(doc)
        if member is None:
            raise InputError(
                f"{str(getattr(doc, 'name', doc))[:80]!r} is not in collection {self.name}: "
                f"`docpipe ls --collection {self.name}` lists its documents"
            )
        found = self.service.document(member.id, password=password, name=member.name, matter=self.matter)
        if found is None:
            raise InputError(
                f"{member.name} ({member.id[:12]}) of collection {self.name} is no longer in the store at "
                f"{self.service.store_root}: remove it (docpipe rm --collection {self.name} {member.id[:12]}) and add "
                "the file again"
            )
        return found

    def create(self) -> bool:
        """Creates the collection, empty; returns False when it existed already (it is left as it is)."""
        return self.records.create(self.name)

    def add(
        self,
        sources: Source | Sequence[Source],
        *,
        password: str | None = None,
        workers: int | None = None,
        progress: Callable[[AddProgress], None] | None = None,
        owner: str | None = None,
        ask_password: Callable[[str], str | None] | None = None,
        executor: str = "local",
    ) -> AddReport:
        """Adds PDFs and Word files to the collection and returns an `AddReport`: folders are searched recursively
        for ``.pdf`` and ``.docx`` files; documents already in the store are not extracted or embedded again (a document may be
        in several collections). Extraction runs in up to `workers` worker processes (default
        `extraction.max_concurrent`), embedding batched across documents; `progress` hears of every file and
        embedding batch. A file that fails is reported with the reason and the others go on; every document is
        recorded as soon as it is ingested, so an interrupted run, run again, skips what it finished.

        An encrypted PDF that `password` does not open fails, unless `ask_password` is given: it is called with
        the file's name (one call at a time) until its answer opens the PDF, or is empty or None; a password it
        gave is tried first on the encrypted files after (a data room often has one password).

        `executor` ``"ray"`` runs the same ingestion as a Ray Data pipeline on the cluster the settings name
        (``ray.address``; a local Ray when unset), on a store every node sees (`docpipe.collection.ray_ingest`)."""
        if executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {executor!r}: use local or ray")
        if executor == "ray" and (ask_password is not None or owner is not None or workers is not None):
            raise ConfigError(
                "the Ray executor takes one password= for the whole add (no prompt, owner or worker count): "
                "Ray sizes the stages (settings ray.*)"
            )
        started = time.perf_counter()
        report = AddReport(self.name)  # the collection is created with its first member (see `create`)
        files, missing = expand_sources(sources)
        report.failed += missing
        members = {m.id: m for m in self.documents}  # read once: a data room's record is long
        known = set(members)
        finished: list[Member] = []  # ingested, not yet recorded
        last_recorded = time.monotonic()

        def record(*, now: bool = False) -> None:
            """Records the finished members in one rewrite of the collection's record: every `_RECORD_BATCH`
            files or `_RECORD_SECONDS`, and at the end (also when the add stops early). One write per file made
            adding N files cost N rewrites of an N-member record (hours at 100,000 files). A run killed outright
            loses at most those seconds of records; their indexes are stored, so a rerun adds them unextracted."""
            nonlocal last_recorded
            due = len(finished) >= _RECORD_BATCH or time.monotonic() - last_recorded >= _RECORD_SECONDS
            if not finished or not (now or due):
                return
            batch = finished[:]
            finished.clear()
            last_recorded = time.monotonic()
            added = set(self.records.add(self.name, batch)[0])
            for member in batch:
                if member.id in added:
                    added.discard(member.id)  # the same file twice in one add: the second is already there
                    report.added.append(member)
                    members[member.id] = member
                else:
                    report.present.append(members.get(member.id, member))

        def done(label: str, doc: Document | None, error: str, extracted: bool) -> None:
            if doc is None:
                report.failed.append((label, error))
                return
            finished.append(Member(doc.id, label, pages=len(doc.pages)))
            if extracted:
                report.extracted_pages += len(doc.pages)
            record()

        def present(_label: str, doc_id: str) -> None:
            report.present.append(members[doc_id])

        if progress is not None and files:
            progress(AddProgress("file", 0, len(files)))  # the total before the first file ends, for a bar
        try:
            self._run_add(files, executor, password, workers, progress, owner, ask_password, known, done, present)
        finally:
            record(now=True)
        self.service.sync(self)  # cards and pooled vectors of the new members, saved
        report.seconds = time.perf_counter() - started
        return report

    def _run_add(
        self,
        files: list[tuple[Source, str]],
        executor: str,
        password: str | None,
        workers: int | None,
        progress: Callable[[AddProgress], None] | None,
        owner: str | None,
        ask_password: Callable[[str], str | None] | None,
        known: set[str],
        done: Callable[[str, Document | None, str, bool], None],
        present: Callable[[str, str], None],
    ) -> None:
        """Runs the add on the executor named; `done` and `present` hear of every file."""
        if executor == "ray":
            from docpipe.collection.ray_ingest import ingest_on_ray

            ingest_on_ray(
                files,
                settings=self.service.settings,
                fingerprint=self.service.fingerprint,
                password=password,
                known=known,
                on_done=done,
                on_skip=present,
                progress=progress,
            )
        else:
            self.service.ingest_files(
                files,
                password=password,
                workers=workers,
                progress=progress,
                on_done=done,
                skip=lambda doc_id: doc_id in known,
                owner=owner,
                on_skip=present,
                ask_password=ask_password,
            )

    def remove(self, doc: Member | Document | str) -> bool:
        """Removes a document from the collection (it stays in the store and in other collections); returns
        False when it was not a member."""
        member = self._find(doc)
        if member is None:
            return False
        removed = self.records.remove(self.name, [member.id])
        if removed:
            self.service.sync(self)
            self._drop_other_indexes()
        return bool(removed)

    def _drop_other_indexes(self) -> None:
        """The collection's indexes built under other settings (a server's embedder, when `docpipe rm` runs
        with another) still hold the card, text included, of a member that left: they go, and whoever uses
        one next builds it again from the members' stored vectors."""
        current = f"index-{self.service.fingerprint}"
        for folder in self.records.folder(self.name).glob("index-*"):
            if folder.name != current and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)

    def delete(self) -> bool:
        """Deletes the collection (its documents stay in the store); returns False when it did not exist."""
        self.service.forget(self)
        return self.records.delete(self.name)


def expand_sources(sources: Source | Sequence[Source]) -> tuple[list[tuple[Source, str]], list[tuple[str, str]]]:
    """Returns (the files to ingest with the name each goes by: a file given by path its file name, a file
    found in a folder (searched recursively) its path inside that folder, so two ``contract.pdf`` of two
    sub-folders stay apart; bytes as ``document-N.pdf``; in a stable order without repeats), and the paths
    that do not exist or hold no PDF, with the reason."""
    items: Sequence[Source] = (
        [sources] if isinstance(sources, (str, Path, bytes, bytearray, memoryview)) else list(sources)
    )
    files: list[tuple[Source, str]] = []
    missing: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n, item in enumerate(items, 1):
        if isinstance(item, (bytes, bytearray, memoryview)):
            files.append((item, f"document-{n}.pdf"))
            continue
        path = Path(item).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in DOCUMENT_SUFFIXES and p.is_file())
            if not found:
                missing.append((str(path), f"the folder holds no {' or '.join(DOCUMENT_SUFFIXES)} file"))
            chosen = [(p, p.relative_to(path).as_posix()) for p in found]
        elif path.exists():
            chosen = [(path, path.name)]
        else:
            missing.append((str(path), "no such file or folder"))
            continue
        for file, label in chosen:
            key = str(file.resolve())
            if key not in seen:
                seen.add(key)
                files.append((file, label))
    return files, missing
