"""`docpipe mark`: a reviewer's mark on one cell of a grid (accepted, corrected with the value, flagged; with a
comment), or its removal, in the command's matter (`docpipe.review.marks`), as the store's owner; the mark is
written to the access log as a mark over the API is. Grids of the matter run or exported afterwards show it."""

from __future__ import annotations

import getpass
import re
from pathlib import Path
from typing import Any

from docpipe.cli.matter import matter_collection, owner_scope
from docpipe.cli.output import emit

__all__ = ["cmd_mark"]

_ID = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(r"[0-9a-f]{6,63}")
_LISTED = 10


def cmd_mark(dp: Any, args: Any) -> int:
    from docpipe.errors import ConfigError
    from docpipe.review.marks import MarkStore

    scope = owner_scope(dp, args)
    doc_id, name = _document(dp, args, scope)
    marks = MarkStore.of(dp.store)
    if args.clear:
        if args.comment:
            raise ConfigError("--comment goes with a mark: give --accept, --correct VALUE or --flag, or drop it")
        with scope.logged("unmark", document=doc_id, detail=f"cleared: {args.column[:120]}"):
            cleared = marks.clear(scope.matter, doc_id, args.column)
        mark = None
    else:
        status = "corrected" if args.correct is not None else "accepted" if args.accept else "flagged"
        with scope.logged("mark", document=doc_id, detail=f"{status}: {args.column[:120]}"):
            mark = marks.set(
                scope.matter,
                doc_id,
                args.column,
                status=status,
                value=args.correct,
                comment=args.comment or "",
                user=_reviewer(),
            )
        cleared = False
    if args.json:
        emit(
            {
                "matter": scope.matter,
                "document_id": doc_id,
                "document": name,
                "column": args.column,
                "mark": None if mark is None else {**_fields(mark.to_dict()), "when": mark.when},
                "cleared": cleared,
            }
        )
    elif mark is not None:
        print(f"marked {name} / {args.column}: {mark.text}")
    else:
        print(f"{'cleared the mark on' if cleared else 'there was no mark on'} {name} / {args.column}")
    return 0


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("status", "value", "comment", "user", "time")}


def _reviewer() -> str:
    """Returns who marks from the command line: the operating-system account (the store's owner acts)."""
    try:
        return getpass.getuser() or "owner"
    except (KeyError, OSError):  # no name for this uid (a container's)
        return "owner"


def _document(dp: Any, args: Any, scope: Any) -> tuple[str, str]:
    """Returns (id, name) of the document marked: a member of `--collection` by name, id or id prefix; else a
    PDF file (its SHA-256) or an id, which the matter must hold (the store's own matter: the store)."""
    from docpipe.errors import InputError
    from docpipe.storage.store import sha256_hex

    given = args.document
    if args.collection:
        coll = matter_collection(dp, args, args.collection)
        members = [(m.id, m.name) for m in coll.documents]
        for match in (
            lambda i, n: i == given or n == given,
            lambda i, n: n.casefold() == given.casefold(),
            lambda i, n: bool(_PREFIX.fullmatch(given)) and i.startswith(given),
        ):
            found = [(i, n) for i, n in members if match(i, n)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise InputError(
                    f"{given[:80]!r} names {len(found)} documents of collection {coll.name}: give its id "
                    f"(docpipe ls --collection {coll.name})"
                )
        names = ", ".join(n for _, n in members[:_LISTED]) + (", ..." if len(members) > _LISTED else "")
        raise InputError(
            f"no document {given[:80]!r} in collection {coll.name}: give a member's name or id ({names or 'none'})"
        )
    path = Path(given)
    if path.is_file():
        doc_id, name = sha256_hex(path.read_bytes()), path.name
    elif _ID.fullmatch(given):
        doc_id, name = given, given[:12]
    else:
        raise InputError(
            f"{given[:80]!r} is neither a file nor a document id: give the PDF, its id (docpipe ls), or "
            "--collection NAME and the document's name there"
        )
    record = scope.matters.get(scope.matter, doc_id)
    if record is not None:
        return doc_id, record.name
    if scope.own and dp.store.doc_dir(doc_id).is_dir():
        return doc_id, name
    flag = "" if scope.own else f" --matter {scope.matter}"
    raise InputError(
        f"{name} is not in matter {scope.matter!r}: review or ingest it there first (docpipe ingest{flag} FILE)"
    )
