"""The commands over collections (named sets of stored documents) and the store's listing: ``ingest
--collection``, ``collections``, ``ls``, ``rm --collection``, the collection side of ``ask`` and ``search``,
and dropping documents deleted from the store from every collection that held them.

Collections on the command line are the store's own (``<home>/collections``), not a matter's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.cli.matter import file_members, matter_collection, owner_scope
from docpipe.cli.output import EXIT_ERROR, emit
from docpipe.errors import ConfigError, InputError

if TYPE_CHECKING:
    from docpipe.collection.handle import AddProgress, Collection
    from docpipe.pipeline import DocPipe

__all__ = [
    "cmd_collections",
    "cmd_ls",
    "drop_gone",
    "rm_result",
    "existing_collection",
    "ingest_collection",
    "memberships",
    "rm_collection",
    "short",
    "stored_record",
]

#: Characters of a document id shown to people (`docpipe ls`); any 8 or more select a document.
SHORT_ID = 12
# Extractors whose stored text `ls` can read a document's name and page count from.
_EXTRACTORS = ("pypdf", "pypdfium2")


def short(doc_id: str) -> str:
    return doc_id[:SHORT_ID]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _when(timestamp: float) -> str:
    """Returns `timestamp` in this machine's time zone, named: "2026-12-06 14:09 CET"."""
    return datetime.fromtimestamp(timestamp, UTC).astimezone().strftime("%Y-%m-%d %H:%M %Z") if timestamp else "-"


def existing_collection(dp: DocPipe, args: Any, name: str) -> Collection:
    """Returns the collection `name` of the command's matter when it exists; a `ConfigError` for a name that
    cannot be one, an `InputError` listing the matter's collections otherwise."""
    return matter_collection(dp, args, name)


# -- ingest ---------------------------------------------------------------------------------------
class _AddBars:
    """Two progress bars on stderr for `Collection.add`: files finished, passages embedded."""

    def __init__(self) -> None:
        from tqdm import tqdm

        options: dict[str, Any] = {"file": sys.stderr, "dynamic_ncols": True, "leave": False, "total": 0}
        self.files = tqdm(desc="files", unit="file", position=0, **options)
        self.passages = tqdm(desc="embedded", unit="passage", position=1, **options)

    def __call__(self, event: AddProgress) -> None:
        bar = self.files if event.kind == "file" else self.passages
        bar.total = max(event.total, event.done)
        bar.n = event.done
        if event.name:
            bar.set_postfix_str(event.name[:40], refresh=False)
        bar.refresh()

    def close(self) -> None:
        self.passages.close()
        self.files.close()


def ingest_collection(dp: DocPipe, args: Any, *, ask_password: Callable[[str], str | None] | None = None) -> int:
    """``docpipe ingest --collection NAME FOLDER_OR_FILES...``: adds them, prints the report; exit status 1
    when any file failed (the others are added all the same). `ask_password` is asked for the password of an
    encrypted file the given one does not open (`Collection.add`)."""
    coll = matter_collection(dp, args, args.collection, existing=False)
    if args.workers is not None and args.workers < 1:
        raise ConfigError("--workers must be at least 1 (leave it out for the configured number)")
    bars = _AddBars() if sys.stderr.isatty() and not args.json and not args.quiet else None
    on_ray = getattr(args, "executor", "local") == "ray"
    if on_ray and args.workers is not None:
        raise ConfigError("--workers sizes the local executor; on Ray set DOCPIPE_RAY__* (see docs/deployment.md)")
    try:
        report = coll.add(
            [str(path) for path in args.files],
            password=args.password,
            workers=None if on_ray else args.workers,
            progress=bars,
            ask_password=None if on_ray else ask_password,
            executor=args.executor if on_ray else "local",
        )
    finally:
        if bars is not None:
            bars.close()
    _file_and_log(dp, args, coll, report)
    if args.json:
        emit(report.to_dict())
    else:
        print(report.summary())
        if report.added or report.present:
            print(f'ask it: docpipe ask --collection {coll.name} "QUESTION"', file=sys.stderr)
    return 0 if report.ok else EXIT_ERROR


def _file_and_log(dp: DocPipe, args: Any, coll: Collection, report: Any) -> None:
    """Files the added (and already present) members in the command's matter and writes one access-log line
    per file, ``ok``, ``present`` or ``failed``, as a server's add does."""
    scope = owner_scope(dp, args)
    file_members(dp, args, [*report.added, *report.present])
    detail = f"collection {coll.name}"
    for members, outcome in ((report.added, "ok"), (report.present, "present")):
        for member in members:
            scope.record("collection_add", member.id, outcome=outcome, detail=detail)
    for _failure in report.failed:
        scope.record("collection_add", outcome="failed", detail=detail)


# -- listing --------------------------------------------------------------------------------------
def cmd_collections(dp: DocPipe, args: Any) -> int:
    data: list[dict[str, Any]] = []
    for coll in dp.collections(matter=owner_scope(dp, args).library_matter):
        members = coll.documents
        data.append({"name": coll.name, "documents": len(members), "pages": sum(m.pages for m in members)})
    if args.json:
        emit(data)
        return 0
    if not data:
        print("No collections yet: docpipe ingest --collection NAME FOLDER_OR_FILES...")
    for item in data:
        print(f"{item['name']}  {_count(item['documents'], 'document')}, {_count(item['pages'], 'page')}")
    return 0


def stored_record(dp: DocPipe, doc_id: str) -> dict[str, Any]:
    """Returns what the store tells of a document without opening its index: id, name (the file name it was
    first ingested under), pages (None when no text is stored), added (when its PDF was stored)."""
    extractors = (dp.settings.extraction.extractor, *_EXTRACTORS)
    record = next(
        (r for r in (dp.store.load_extraction(doc_id, e) for e in dict.fromkeys(extractors)) if r is not None), None
    )
    try:
        added = (dp.store.doc_dir(doc_id) / "source.pdf").stat().st_mtime
    except OSError:
        added = 0.0
    return {
        "id": doc_id,
        "name": str(record.get("name", "")) if record else "",
        "pages": len(record["pages"]) if record else None,
        "added": added,
    }


def cmd_ls(dp: DocPipe, args: Any) -> int:
    scope = owner_scope(dp, args)
    held: dict[str, list[str]] = {}
    for each in dp.collections(matter=scope.library_matter):
        for member in each.documents:
            held.setdefault(member.id, []).append(each.name)
    if args.collection is not None:
        coll = existing_collection(dp, args, args.collection)
        scope.record("list_collection", detail=f"collection {coll.name}")
        # The same fields as the store's listing: the name and time are the collection's own.
        rows: list[dict[str, Any]] = [
            {"id": m.id, "name": m.name, "pages": m.pages, "added": m.added, "collections": held.get(m.id, [])}
            for m in coll.documents
        ]
        empty = f"Collection {coll.name} holds no documents: docpipe ingest --collection {coll.name} FOLDER_OR_FILES..."
    elif args.matter is not None:
        scope.record("list_documents")
        rows = [
            {**stored_record(dp, d.id), "name": d.name, "added": d.added, "collections": held.get(d.id, [])}
            for d in scope.documents()
        ]
        empty = f"No documents in matter {scope.matter!r}: docpipe ingest --matter {scope.matter} FILE..."
    else:
        rows = [{**stored_record(dp, d), "collections": held.get(d, [])} for d in dp.store.document_ids()]
        empty = f"No documents in the store at {dp.store.root}: docpipe ingest FILE... (or --collection NAME FOLDER)"
    rows.sort(key=lambda row: ((row["name"] or "").casefold(), row["id"]))  # by name, as a reviewer looks for them
    for row in rows:
        row.update(describe(dp, row["id"]))
    if args.json:
        emit(rows)
        return 0
    if not rows:
        print(empty)
    for row in rows:
        pages = "?" if row["pages"] is None else row["pages"]
        # A collection's own listing needs no "[collection]" on every line.
        where = f"  [{', '.join(row['collections'])}]" if row["collections"] and args.collection is None else ""
        print(f"{short(row['id'])}  {pages:>5} pages  {_when(row['added'])}  {row['name'] or '-'}{where}")
        if row["title"] or row["parties"]:
            print(f"              {row['title'] or '(no title)'}: {'; '.join(row['parties']) or '(no parties found)'}")
    return 0


def describe(dp: DocPipe, doc_id: str) -> dict[str, Any]:
    """Returns a stored contract's title and parties (kept beside it; read now when not). An encrypted PDF's
    are only those read when it was ingested with its password: listing does not open it."""
    from docpipe.ingest.build import stored_label
    from docpipe.terms.about import about, stored_about

    kept = stored_about(dp.store, doc_id)
    if kept is not None:
        return kept
    _name, encrypted = stored_label(dp.store, doc_id, dp.settings.extraction.extractor)
    doc = None if encrypted else dp.document(doc_id, authorized=True)
    return about(dp.store, doc) if doc is not None else {"title": "", "parties": []}


# -- removal --------------------------------------------------------------------------------------
def rm_result(
    *,
    collection: str | None = None,
    removed: list[dict[str, Any]] | None = None,
    collection_deleted: bool = False,
    deleted: list[dict[str, Any]] | None = None,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Returns what ``rm --json`` prints, the same keys whichever form of rm ran (docs/cli-json.md): the
    documents that left the store (`deleted`) and what went with them (`counts`), or the collection's
    documents taken out of it (`removed`) and whether the collection itself was deleted."""
    zero = dict.fromkeys(("documents", "results", "purged", "cached_answers", "review_jobs"), 0)
    return {
        **zero,
        **(counts or {}),
        "deleted": deleted or [],
        "collection": collection,
        "removed": removed or [],
        "collection_deleted": collection_deleted,
    }


def rm_collection(dp: DocPipe, args: Any) -> int:
    """``docpipe rm --collection NAME DOC...`` (the documents stay in the store) and ``... --all`` (the
    collection itself goes; its documents stay)."""
    if args.collection is None:
        raise ConfigError("--all deletes a whole collection: docpipe rm --collection NAME --all")
    if args.matter or args.delete_matter:
        raise ConfigError(
            "--collection works on the store's own collections, not a matter's: leave out --matter / --delete-matter"
        )
    if args.all and args.targets:
        raise ConfigError(
            "--all deletes the whole collection: give either documents or --all (docpipe rm --collection NAME --all)"
        )
    coll = existing_collection(dp, args, args.collection)
    if args.all:
        members = coll.documents
        count = len(members)
        coll.delete()
        if args.json:
            gone = [{"id": m.id, "name": m.name} for m in members]
            emit(rm_result(collection=coll.name, removed=gone, collection_deleted=True))
        else:
            print(f"deleted collection {coll.name}; its {_count(count, 'document')} stay in the store (docpipe ls)")
        return 0
    if not args.targets:
        raise ConfigError(
            f"name the documents to remove: docpipe rm --collection {coll.name} DOC... (an id, 8+ characters of "
            f"one, or the name docpipe ls --collection {coll.name} shows), or --all to delete the collection"
        )
    members = coll.documents
    chosen = []
    for target in args.targets:
        member = _member_of(coll, target)
        if member is None:
            raise InputError(
                f"{target[:80]!r} is not in collection {coll.name}: docpipe ls --collection {coll.name} lists its "
                "documents (give an id, 8+ characters of one, or a name)"
            )
        chosen.append(member)
    removed = [m for m in dict.fromkeys(m.id for m in chosen) if coll.remove(m)]
    names = {m.id: m.name for m in members}
    if args.json:
        emit(rm_result(collection=coll.name, removed=[{"id": d, "name": names[d]} for d in removed]))
    else:
        for doc_id in removed:
            print(f"removed {short(doc_id)} {names[doc_id]} from collection {coll.name} (it stays in the store)")
    return 0


def _member_of(coll: Collection, target: str) -> Any:
    """Returns the member a target names: its id, 8+ characters of it, its name in the collection, or a PDF
    file (hashed); None when none is in the collection."""
    from docpipe.storage.store import sha256_hex

    members = coll.documents
    found = [m for m in members if m.id == target] or [m for m in members if m.name == target]
    if len(found) > 1:
        # Files of one name from different folders: a name alone must not pick one of them.
        raise ConfigError(
            f"{len(found)} documents of collection {coll.name} are named {target!r}: give the id "
            f"(docpipe ls --collection {coll.name})"
        )
    lowered = target.lower()
    if not found and len(lowered) >= 8 and not lowered.strip("0123456789abcdef"):
        found = [m for m in members if m.id.startswith(lowered)]
        if len(found) > 1:
            raise ConfigError(
                f"{target!r} matches {len(found)} documents of collection {coll.name}: give more of the id"
            )
    if not found and Path(target).is_file():
        digest = sha256_hex(Path(target).read_bytes())
        found = [m for m in members if m.id == digest]
    return found[0] if found else None


def collection_ids(dp: DocPipe) -> set[str]:
    """Returns the ids of every member of every collection (the store's and the matters')."""
    return {m.id for coll in _every_collection(dp) for m in coll.documents}


def _every_collection(dp: DocPipe) -> list[Collection]:
    from docpipe.access.matters import MatterStore
    from docpipe.types import OWN_MATTER

    found = list(dp.collections())  # the store's own matter's
    for matter in MatterStore(dp.store.root).matters():
        if matter == OWN_MATTER:
            continue
        try:
            found += dp.collections(matter=matter)
        except ConfigError:
            continue  # a folder that is not a matter's
    return found


def memberships(dp: DocPipe, doc_ids: list[str]) -> dict[str, list[str]]:
    """Returns document id -> the collections that hold it (a matter's as ``matter/name``)."""
    wanted = set(doc_ids)
    held: dict[str, list[str]] = {d: [] for d in doc_ids}
    for coll in _every_collection(dp):
        label = f"{coll.matter}/{coll.name}" if coll.matter else coll.name
        for member in coll.documents:
            if member.id in wanted:
                held[member.id].append(label)
    return held


def drop_gone(dp: DocPipe, doc_ids: list[str]) -> None:
    """Removes the documents the store no longer holds from every collection (the store's and the matters'),
    so no collection keeps a member whose text is gone."""
    stored = set(dp.store.document_ids())
    gone = {d for d in doc_ids if d not in stored}
    if not gone:
        return
    for coll in _every_collection(dp):
        for member in coll.documents:
            if member.id in gone:
                coll.remove(member.id)
