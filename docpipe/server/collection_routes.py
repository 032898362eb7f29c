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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from docpipe.errors import ConfigError, InputError
from docpipe.names import clean_upload_name
from docpipe.server.access import Caller
from docpipe.server.models import (
    _ERRORS,
    AddByIds,
    AddReportOut,
    AskRequest,
    CollectionAskResponse,
    CollectionCreate,
    CollectionDeleted,
    CollectionDocuments,
    CollectionList,
    CollectionOut,
    SearchRequest,
    SearchResponse,
)
from docpipe.storage.collections import check_collection_name
from docpipe.storage.store import make_private_dir

try:  # the serve extra; create_app says how to install it when missing
    # At module level: FastAPI reads the endpoints' (string) annotations in this module's namespace.
    from fastapi import Header, Request, Response
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as _HTTPException
except ImportError:  # pragma: no cover
    _HTTPException = Exception  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from fastapi import FastAPI

    from docpipe.collection.handle import Collection
    from docpipe.server.routes import RouteKit

__all__ = ["COLLECTION_UPLOAD_PATH", "install_collection_routes"]

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


def display_name(raw: object) -> str:
    """Returns the upload's display name (`clean_upload_name`), shortened to fit a file name.

    >>> display_name("../../x.pdf"), len(display_name("é" * 120).encode()) <= 200
    ('x.pdf', True)
    """
    name = clean_upload_name(raw)
    while len(name.encode()) > _MAX_NAME_BYTES:
        name = name[:-1]
    return name


def checked_name(name: str) -> str:
    """Returns the collection name; a bad one (``..``, a slash, a dot first, too long) is a 400."""
    try:
        return check_collection_name(name)
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def install_collection_routes(app: FastAPI, kit: RouteKit) -> None:
    from fastapi import APIRouter
    from starlette.concurrency import run_in_threadpool

    from docpipe.server.routes import _is_key

    dp, options = kit.dp, kit.options
    api = APIRouter(prefix="/v1", tags=["collections"], responses=_ERRORS)

    def open_collection(who: Caller, name: str) -> Collection:
        coll = dp.collection(checked_name(name), matter=who.matter)
        if not coll.exists:
            raise _HTTPException(
                404,
                detail=f"no collection {name[:80]!r} in matter {who.matter!r}: GET /v1/collections lists them, "
                "POST /v1/collections creates one",
            )
        return coll

    def members_out(coll: Collection) -> list[dict[str, Any]]:
        return [m.to_dict() for m in coll.documents]

    @api.get("/collections", response_model=CollectionList, summary="The matter's collections")
    def list_collections(who: Caller = kit.reader) -> dict[str, Any]:
        """Returns the collections of the matter, with their document counts."""
        with kit.logged(who, "list_collections"):
            found = dp.collections(matter=who.matter)
        return {
            "matter": who.matter,
            "collections": [{"matter": who.matter, "name": c.name, "documents": len(c)} for c in found],
        }

    @api.post(
        "/collections",
        response_model=CollectionOut,
        status_code=201,
        summary="Create a collection",
        responses={200: {"model": CollectionOut, "description": "The collection existed already"}},
    )
    def create_collection(body: CollectionCreate, response: Response, who: Caller = kit.writer) -> dict[str, Any]:
        """Creates an empty collection in the matter (201); one that exists is left as it is (200)."""
        coll = dp.collection(checked_name(body.name), matter=who.matter)
        with kit.logged(who, "create_collection", detail=f"collection {coll.name}"):
            if coll.exists:
                response.status_code = 200
            else:
                kit.matters.ensure(who.matter, user=who.user)
                coll.create()
        return {"matter": who.matter, "name": coll.name, "documents": len(coll)}

    @api.get("/collections/{name}", response_model=CollectionDocuments, summary="A collection's documents")
    def get_collection(name: str, who: Caller = kit.reader) -> dict[str, Any]:
        """Returns the collection's documents: id, the name each goes by there, when it was added, pages."""
        coll = open_collection(who, name)
        with kit.logged(who, "list_collection", detail=f"collection {coll.name}"):
            return {"matter": who.matter, "name": coll.name, "documents": members_out(coll)}

    @api.delete("/collections/{name}", response_model=CollectionDeleted, summary="Delete a collection")
    def delete_collection(name: str, who: Caller = kit.writer) -> dict[str, Any]:
        """Deletes the collection and its index; its documents stay in the matter."""
        coll = open_collection(who, name)
        with kit.logged(who, "delete_collection", detail=f"collection {coll.name}"):
            count = len(coll)
            coll.delete()
        return {"matter": who.matter, "deleted": coll.name, "documents": count}

    @api.delete(
        "/collections/{name}/documents/{doc_id}",
        response_model=CollectionDeleted,
        summary="Take a document out of a collection",
    )
    def remove_document(name: str, doc_id: str, who: Caller = kit.writer) -> dict[str, Any]:
        """Takes the document out of the collection; it stays in the matter (DELETE /v1/documents/{id} deletes it)."""
        coll = open_collection(who, name)
        if not _DOC_ID.fullmatch(doc_id) or not any(m.id == doc_id for m in coll.documents):
            raise _HTTPException(
                404,
                detail=f"no document with id {doc_id[:80]!r} in collection {coll.name!r}: "
                f"GET /v1/collections/{coll.name} lists its documents",
            )
        with kit.logged(who, "remove_from_collection", doc_id, detail=f"collection {coll.name}"):
            removed = coll.remove(doc_id)
        return {"matter": who.matter, "deleted": doc_id, "documents": int(removed)}

    @api.post(
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
        x_document_password: str | None = Header(None, description="The password of encrypted PDFs among them."),
        who: Caller = kit.writer,
    ) -> dict[str, Any]:
        coll = open_collection(who, name)
        make_private_dir(kit.spool_dir)
        batch = Path(tempfile.mkdtemp(dir=kit.spool_dir, prefix="collection-"))  # 0700
        try:
            password = x_document_password
            files: list[Path] = []
            failed: list[tuple[str, str]] = []
            digests: dict[str, str] = {}  # display name -> SHA-256, for the access log
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                async with request.form(
                    max_files=options.max_upload_files, max_fields=options.max_upload_files + 64
                ) as form:
                    ids = [v for v in form.getlist("ids") if isinstance(v, str)]
                    field = form.get("password")
                    if isinstance(field, str) and field:
                        password = field
                    for number, upload in enumerate(form.getlist("file")):
                        if isinstance(upload, str):
                            raise InputError('a "file" field holds text: send each PDF as a file part')
                        label = display_name(upload.filename)
                        if (upload.size or 0) > options.max_upload_bytes:
                            failed.append((label, _too_large(upload.size or 0, options.max_upload_bytes)))
                            continue
                        target = batch / f"u{number}" / label
                        target.parent.mkdir(mode=0o700)
                        hashed = hashlib.sha256()
                        with target.open("wb") as out:
                            while chunk := await upload.read(1 << 20):
                                out.write(chunk)
                                hashed.update(chunk)
                            size = out.tell()
                        if not size:
                            failed.append((label, "the file is empty (0 bytes): upload the PDF itself"))
                            continue
                        digests[label] = hashed.hexdigest()
                        files.append(target)
            else:
                try:
                    body = AddByIds.model_validate_json(await request.body())
                except ValidationError as exc:
                    raise RequestValidationError(exc.errors()) from None
                ids, password = body.ids, body.password or password
            if not files and not failed and not ids:
                raise InputError(
                    'nothing to add: send PDFs in the multipart field "file", or the ids of documents of the matter'
                )
            # Every id must name a document of this matter (404 otherwise), before anything is added.
            for record in [kit.matter_record(who, doc_id) for doc_id in dict.fromkeys(ids)]:
                data = dp.store.load_source(record.id)
                if data is None:
                    failed.append((record.name, "the document is no longer stored: upload the PDF again"))
                    continue
                target = batch / f"id-{record.id[:16]}" / display_name(record.name)
                target.parent.mkdir(mode=0o700)
                target.write_bytes(data)
                digests[target.name] = record.id
                files.append(target)
            owner = who.user if _is_key(who) else None  # a user's files take at most all but one slot
            # A file that fails leaves nothing in the store (as an upload's does): no matter would hold it, so
            # neither a DELETE nor the retention sweep could reach what it left there.
            with (
                app.state.housekeeper.uploads(list(digests.values()), raising_fails_all=False) as gone,
                kit.logged(who, "collection_add", detail=f"collection {coll.name}"),
            ):
                report = await run_in_threadpool(coll.add, files, password=password or None, owner=owner)
                await run_in_threadpool(_record_in_matter, kit, who, report.added, report.present, _is_key(who))
                gone.update(digests[label] for label, _reason in report.failed if label in digests)
        finally:
            shutil.rmtree(batch, ignore_errors=True)
        failed += [(label, _without_paths(reason, batch, dp.store.root)) for label, reason in report.failed]
        if report.added:
            kit.metrics.documents.inc(len(report.added))
        for member, outcome in [(m, "ok") for m in report.added] + [(m, "present") for m in report.present]:
            kit.audit.record(
                user=who.user,
                key_id=who.key_id,
                matter=who.matter,
                action="collection_add",
                document=member.id,
                outcome=outcome,
                detail=f"collection {coll.name}",
            )
        for label, _reason in failed:
            kit.audit.record(
                user=who.user,
                key_id=who.key_id,
                matter=who.matter,
                action="collection_add",
                document=digests.get(label),
                outcome="failed",
                detail=f"collection {coll.name}",
            )
        return {
            "matter": who.matter,
            "collection": coll.name,
            "added": [m.to_dict() for m in report.added],
            "present": [m.to_dict() for m in report.present],
            "failed": [{"file": label, "reason": reason} for label, reason in failed],
            "extracted_pages": report.extracted_pages,
            "seconds": round(report.seconds, 3),
        }

    def search_sync(who: Caller, name: str, body: SearchRequest) -> dict[str, Any]:
        coll = open_collection(who, name)
        [query] = kit.check_questions([body.query])
        with kit.logged(who, "search", None, [query], detail=f"collection {coll.name}"):
            hits = dp.search(coll, query, k=body.k, password=body.password)
        return {
            "matter": who.matter,
            "collection": coll.name,
            "hits": [{**hit.to_dict(), "pages": hit.pages} for hit in hits],
        }

    @api.post("/collections/{name}/search", response_model=SearchResponse, summary="Search a collection")
    async def search(name: str, body: SearchRequest, who: Caller = kit.reader) -> dict[str, Any]:
        """Returns the best sections for the query across the collection (or in the contract it names);
        each hit names its document."""
        return await run_in_threadpool(search_sync, who, name, body)

    def ask_sync(who: Caller, name: str, body: AskRequest) -> dict[str, Any]:
        coll = open_collection(who, name)
        questions = kit.check_questions(body.all_questions())
        with kit.logged(who, "ask", None, questions, detail=f"collection {coll.name}"):
            answers = dp.ask_many(
                coll, questions, k=body.k, mode=body.mode, password=body.password, use_cache=body.use_cache
            )
            out = []
            for answer in answers:
                record = {**answer.to_dict(), "id": uuid.uuid4().hex}
                quoted = [*answer.document_ids, *(c.document_id for c in answer.citations)]
                # Filed under every document it quotes: deleting any of them deletes the answer.
                kit.results.save(
                    "answers",
                    record["id"],
                    record,
                    matter=who.matter,
                    document_id=answer.document_id or None,
                    document_ids=quoted,
                )
                out.append(record)
        return {"matter": who.matter, "collection": coll.name, "answers": out}

    @api.post("/collections/{name}/ask", response_model=CollectionAskResponse, summary="Ask a collection")
    async def ask(name: str, body: AskRequest, who: Caller = kit.reader) -> dict[str, Any]:
        """Returns one answer per question, in order: a question that names a contract is answered from it,
        others across the collection; every citation names its document. Each answer is stored by its id."""
        return await run_in_threadpool(ask_sync, who, name, body)

    app.include_router(api)


def _record_in_matter(kit: RouteKit, who: Caller, added: list[Any], present: list[Any], grant: bool) -> None:
    """Makes the collection's new documents documents of the matter too; an encrypted one opened with its
    password grants the key (as an upload does). Members the collection held already get no grant: their
    password was not checked by this request."""
    for members, may_grant in ((added, grant), (present, False)):
        for member in members:
            doc = kit.dp.document(member.id, authorized=True)
            kit.matters.add(
                who.matter,
                member.id,
                name=member.name,
                user=who.user,
                key_id=who.key_id,
                encrypted=bool(doc is not None and doc.encrypted),
                grant=may_grant,
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
