"""The ``/v1/collections`` endpoints: a matter's named sets of documents, filled by uploading several PDFs at
once or by the ids of documents the matter holds, then searched and asked as one.

A collection lives inside the matter of the caller's key (`DocPipe.collection(name, matter=...)`): a key of
another matter gets 404 for it, exactly as for a name no matter uses. Every document added to a collection is
also a document of the matter (its record, with a grant for an encrypted PDF opened with its password), so
it is listed, asked and deleted like any upload; deleting it from the matter takes it out of the collections.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from docpipe.errors import InputError
from docpipe.names import clean_upload_name
from docpipe.server.access import Caller
from docpipe.server.deps import (
    AuditDep,
    DocPipeDep,
    HousekeeperDep,
    MattersDep,
    MetricsDep,
    OptionsDep,
    Reader,
    ResultsDep,
    Writer,
    check_questions,
    checked_name,
    is_key,
    logged,
    matter_record,
    open_collection,
)
from docpipe.server.models import (
    ERROR_RESPONSES,
    AddByIds,
    AddReportOut,
    CollectionAskRequest,
    CollectionAskResponse,
    CollectionCreate,
    CollectionDeleted,
    CollectionDocuments,
    CollectionList,
    CollectionOut,
    SearchRequest,
    SearchResponse,
)
from docpipe.storage.store import make_private_dir

if TYPE_CHECKING:
    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterStore
    from docpipe.pipeline import DocPipe
    from docpipe.server.options import ServeOptions

__all__ = ["COLLECTION_UPLOAD_PATH", "display_name", "router"]

#: The route that takes several PDFs in one body (the body guard gives it the multi-file size limit).
COLLECTION_UPLOAD_PATH = re.compile(r"/v1/collections/[^/]+/documents/?")
_DOC_ID = re.compile(r"[0-9a-f]{64}")
# A display name becomes the name of a spooled file (the collection names members by their file's name):
# it must fit a file system's 255-byte limit however many bytes its characters take.
_MAX_NAME_BYTES = 200

_ADD_BODY = {
    "requestBody": {
        "required": True,
        "description": 'PDFs as multipart/form-data, each in a field "file" (repeat it; optional "password", and '
        '"ids" fields naming documents already in the matter), or application/json {"ids": [...], "password": ...}.',
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        "ids": {"type": "array", "items": {"type": "string"}},
                        "password": {"type": "string"},
                    },
                }
            },
            "application/json": {"schema": AddByIds.model_json_schema()},
        },
    }
}

router = APIRouter(prefix="/v1", tags=["collections"], responses=ERROR_RESPONSES)


def display_name(raw: object) -> str:
    """Returns the upload's display name (`clean_upload_name`), shortened to fit a file name.

    >>> display_name("../../x.pdf"), len(display_name("é" * 120).encode()) <= 200
    ('x.pdf', True)
    """
    name = clean_upload_name(raw)
    while len(name.encode()) > _MAX_NAME_BYTES:
        name = name[:-1]
    return name


# -- the matter's collections -------------------------------------------------------------------------------
@router.get("/collections", response_model=CollectionList, summary="The matter's collections")
def list_collections(who: Reader, dp: DocPipeDep, audit: AuditDep) -> dict[str, Any]:
    """Returns the collections of the matter, with their document counts."""
    with logged(audit, who, "list_collections"):
        found = dp.collections(matter=who.matter)
    return {
        "matter": who.matter,
        "collections": [{"matter": who.matter, "name": c.name, "documents": len(c)} for c in found],
    }


@router.post(
    "/collections",
    response_model=CollectionOut,
    status_code=201,
    summary="Create a collection",
    responses={200: {"model": CollectionOut, "description": "The collection existed already"}},
)
def create_collection(
    body: CollectionCreate, response: Response, who: Writer, dp: DocPipeDep, matters: MattersDep, audit: AuditDep
) -> dict[str, Any]:
    """Creates an empty collection in the matter (201); one that exists is left as it is (200)."""
    coll = dp.collection(checked_name(body.name), matter=who.matter)
    with logged(audit, who, "create_collection", detail=f"collection {coll.name}"):
        if coll.exists:
            response.status_code = 200
        else:
            matters.ensure(who.matter, user=who.user)
            coll.create()
    return {"matter": who.matter, "name": coll.name, "documents": len(coll)}


@router.get("/collections/{name}", response_model=CollectionDocuments, summary="A collection's documents")
def get_collection(name: str, who: Reader, dp: DocPipeDep, audit: AuditDep) -> dict[str, Any]:
    """Returns the collection's documents: id, the name each goes by there, when it was added, pages."""
    coll = open_collection(dp, who, name)
    with logged(audit, who, "list_collection", detail=f"collection {coll.name}"):
        return {"matter": who.matter, "name": coll.name, "documents": [m.to_dict() for m in coll.documents]}


@router.delete("/collections/{name}", response_model=CollectionDeleted, summary="Delete a collection")
def delete_collection(name: str, who: Writer, dp: DocPipeDep, audit: AuditDep) -> dict[str, Any]:
    """Deletes the collection and its index; its documents stay in the matter."""
    coll = open_collection(dp, who, name)
    with logged(audit, who, "delete_collection", detail=f"collection {coll.name}"):
        count = len(coll)
        coll.delete()
    return {"matter": who.matter, "deleted": coll.name, "documents": count}


@router.delete(
    "/collections/{name}/documents/{doc_id}",
    response_model=CollectionDeleted,
    summary="Take a document out of a collection",
)
def remove_document(name: str, doc_id: str, who: Writer, dp: DocPipeDep, audit: AuditDep) -> dict[str, Any]:
    """Takes the document out of the collection; it stays in the matter (DELETE /v1/documents/{id} deletes it)."""
    coll = open_collection(dp, who, name)
    if not _DOC_ID.fullmatch(doc_id) or not any(m.id == doc_id for m in coll.documents):
        raise HTTPException(
            404,
            detail=f"no document with id {doc_id[:80]!r} in collection {coll.name!r}: "
            f"GET /v1/collections/{coll.name} lists its documents",
        )
    with logged(audit, who, "remove_from_collection", doc_id, detail=f"collection {coll.name}"):
        removed = coll.remove(doc_id)
    return {"matter": who.matter, "deleted": doc_id, "documents": int(removed)}


# -- adding documents ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Batch:
    """The files of one add, spooled under `folder`, and what was refused on the way."""

    folder: Path
    password: str | None
    ids: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)  # display name -> SHA-256, for the access log


@router.post(
    "/collections/{name}/documents",
    response_model=AddReportOut,
    summary="Add documents to a collection",
    openapi_extra=_ADD_BODY,
    description="Uploads PDFs into the collection (and the matter), and/or adds documents the matter holds "
    "by id. A file that fails (not a PDF, too large, encrypted without its password) is reported in "
    "`failed` with the reason; the others are added. Ids not in the matter: 404, nothing is added.",
)
async def add_documents(
    name: str,
    request: Request,
    who: Writer,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    housekeeper: HousekeeperDep,
    metrics: MetricsDep,
    options: OptionsDep,
    x_document_password: str | None = Header(None, description="The password of encrypted PDFs among them."),
) -> dict[str, Any]:
    coll = open_collection(dp, who, name)
    spool_dir = dp.store.root / "tmp"
    make_private_dir(spool_dir)
    batch = _Batch(Path(tempfile.mkdtemp(dir=spool_dir, prefix="collection-")), x_document_password)  # 0700
    try:
        await _receive(request, batch, options)
        if not batch.files and not batch.failed and not batch.ids:
            raise InputError(
                'nothing to add: send PDFs in the multipart field "file", or the ids of documents of the matter'
            )
        _copy_by_ids(batch, dp, matters, who)
        owner = who.user if is_key(who) else None  # a user's files take at most all but one slot
        # A file that fails leaves nothing in the store (as an upload's does): no matter would hold it, so
        # neither a DELETE nor the retention sweep could reach what it left there.
        with (
            housekeeper.uploads(list(batch.digests.values()), raising_fails_all=False) as gone,
            logged(audit, who, "collection_add", detail=f"collection {coll.name}"),
        ):
            report = await run_in_threadpool(coll.add, batch.files, password=batch.password or None, owner=owner)
            await run_in_threadpool(_record_in_matter, dp, matters, who, report.added, report.present, is_key(who))
            gone.update(batch.digests[label] for label, _reason in report.failed if label in batch.digests)
    finally:
        shutil.rmtree(batch.folder, ignore_errors=True)
    failed = batch.failed + [
        (label, _without_paths(reason, batch.folder, dp.store.root)) for label, reason in report.failed
    ]
    if report.added:
        metrics.documents.inc(len(report.added))
    _log_outcomes(audit, who, coll.name, report, failed, batch.digests)
    return {
        "matter": who.matter,
        "collection": coll.name,
        "added": [m.to_dict() for m in report.added],
        "present": [m.to_dict() for m in report.present],
        "failed": [{"file": label, "reason": reason} for label, reason in failed],
        "extracted_pages": report.extracted_pages,
        "seconds": round(report.seconds, 3),
    }


async def _receive(request: Request, batch: _Batch, options: ServeOptions) -> None:
    """Spools the multipart body's files into the batch (a file too large or empty is a failure, not an
    error) with its ids and password; or reads the JSON body's ids and password."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        try:
            body = AddByIds.model_validate_json(await request.body())
        except ValidationError as exc:
            raise RequestValidationError(exc.errors()) from None
        batch.ids, batch.password = body.ids, body.password or batch.password
        return
    async with request.form(max_files=options.max_upload_files, max_fields=options.max_upload_files + 64) as form:
        batch.ids = [v for v in form.getlist("ids") if isinstance(v, str)]
        password = form.get("password")
        if isinstance(password, str) and password:
            batch.password = password
        for number, upload in enumerate(form.getlist("file")):
            if isinstance(upload, str):
                raise InputError('a "file" field holds text: send each PDF as a file part')
            label = display_name(upload.filename)
            if (upload.size or 0) > options.max_upload_bytes:
                batch.failed.append((label, _too_large(upload.size or 0, options.max_upload_bytes)))
                continue
            target = batch.folder / f"u{number}" / label
            target.parent.mkdir(mode=0o700)
            hashed = hashlib.sha256()
            with target.open("wb") as out:
                while chunk := await upload.read(1 << 20):
                    out.write(chunk)
                    hashed.update(chunk)
                size = out.tell()
            if not size:
                batch.failed.append((label, "the file is empty (0 bytes): upload the PDF itself"))
                continue
            batch.digests[label] = hashed.hexdigest()
            batch.files.append(target)


def _copy_by_ids(batch: _Batch, dp: DocPipe, matters: MatterStore, who: Caller) -> None:
    """Spools the stored PDFs of the batch's ids. Every id must name a document of this matter (404
    otherwise), before anything is added."""
    for record in [matter_record(matters, who, doc_id) for doc_id in dict.fromkeys(batch.ids)]:
        data = dp.store.load_source(record.id)
        if data is None:
            batch.failed.append((record.name, "the document is no longer stored: upload the PDF again"))
            continue
        target = batch.folder / f"id-{record.id[:16]}" / display_name(record.name)
        target.parent.mkdir(mode=0o700)
        target.write_bytes(data)
        batch.digests[target.name] = record.id
        batch.files.append(target)


def _record_in_matter(
    dp: DocPipe, matters: MatterStore, who: Caller, added: list[Any], present: list[Any], grant: bool
) -> None:
    """Makes the collection's new documents documents of the matter too; an encrypted one opened with its
    password grants the key (as an upload does). Members the collection held already get no grant: their
    password was not checked by this request."""
    for members, may_grant in ((added, grant), (present, False)):
        for member in members:
            doc = dp.document(member.id, authorized=True)
            matters.add(
                who.matter,
                member.id,
                name=member.name,
                user=who.user,
                key_id=who.key_id,
                encrypted=bool(doc is not None and doc.encrypted),
                grant=may_grant,
            )


def _log_outcomes(
    audit: AccessLog, who: Caller, collection: str, report: Any, failed: list[tuple[str, str]], digests: dict[str, str]
) -> None:
    """Writes one access-log line per file of the add: ``ok`` (added), ``present`` (held already), ``failed``."""
    for member, outcome in [(m, "ok") for m in report.added] + [(m, "present") for m in report.present]:
        audit.record(
            user=who.user,
            key_id=who.key_id,
            matter=who.matter,
            action="collection_add",
            document=member.id,
            outcome=outcome,
            detail=f"collection {collection}",
        )
    for label, _reason in failed:
        audit.record(
            user=who.user,
            key_id=who.key_id,
            matter=who.matter,
            action="collection_add",
            document=digests.get(label),
            outcome="failed",
            detail=f"collection {collection}",
        )


def _too_large(size: int, limit: int) -> str:
    return (
        f"the file is {size / 1048576:.1f} MB, over this server's upload limit of {limit / 1048576:.3g} MB: "
        "split it, or start the server with a larger --max-upload-mb"
    )


def _without_paths(reason: str, *folders: Path) -> str:
    """Returns a failure reason without the server's folders in it (a client sees file names only)."""
    for folder in folders:
        reason = re.sub(re.escape(str(folder)) + r"[^\s:'\"]*/", "", reason)
        reason = reason.replace(str(folder), "the server's store")
    return reason


# -- search and ask -----------------------------------------------------------------------------------------
@router.post("/collections/{name}/search", response_model=SearchResponse, summary="Search a collection")
async def search(
    name: str, body: SearchRequest, who: Reader, dp: DocPipeDep, audit: AuditDep, options: OptionsDep
) -> dict[str, Any]:
    """Returns the best sections for the query across the collection (or in the contract it names);
    each hit names its document."""

    def search_sync() -> dict[str, Any]:
        coll = open_collection(dp, who, name)
        [query] = check_questions(options, [body.query])
        with logged(audit, who, "search", None, [query], detail=f"collection {coll.name}"):
            hits = dp.search(coll, query, k=body.k, password=body.password)
        return {
            "matter": who.matter,
            "collection": coll.name,
            "hits": [{**hit.to_dict(), "pages": hit.pages} for hit in hits],
        }

    return await run_in_threadpool(search_sync)


@router.post("/collections/{name}/ask", response_model=CollectionAskResponse, summary="Ask a collection")
async def ask(
    name: str,
    body: CollectionAskRequest,
    who: Reader,
    dp: DocPipeDep,
    audit: AuditDep,
    results: ResultsDep,
    options: OptionsDep,
) -> dict[str, Any]:
    """Returns one answer per question, in order: a question that names a contract is answered from it,
    others across the collection; every citation names its document. Each answer is stored by its id."""

    def ask_sync() -> dict[str, Any]:
        coll = open_collection(dp, who, name)
        questions = check_questions(options, body.all_questions())
        with logged(audit, who, "ask", None, questions, detail=f"collection {coll.name}"):
            answers = dp.ask_many(
                coll,
                questions,
                k=body.k,
                mode=body.mode,
                password=body.password,
                use_cache=body.use_cache,
                each=body.each,
            )
            out = []
            for answer in answers:
                record = {**answer.to_dict(), "id": uuid.uuid4().hex}
                quoted = [*answer.document_ids, *(c.document_id for c in answer.citations)]
                # Filed under every document it quotes: deleting any of them deletes the answer.
                results.save(
                    "answers",
                    record["id"],
                    record,
                    matter=who.matter,
                    document_id=answer.document_id or None,
                    document_ids=quoted,
                )
                out.append(record)
        return {"matter": who.matter, "collection": coll.name, "answers": out}

    return await run_in_threadpool(ask_sync)
