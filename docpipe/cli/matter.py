"""The matter a command acts in (``--matter``; the store's own matter when none is named), as the store's owner:
the documents it adds are filed there, what it reads must be held there, and each command that touches the
matter's documents writes its access-log line (`docpipe.access.scope`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

__all__ = ["file_members", "matter_collection", "matter_document", "owner_scope"]


def owner_scope(dp: Any, args: Any) -> Any:
    """Returns the command's `OwnerScope` (made once per command, kept on `args`)."""
    scope = getattr(args, "_scope", None)
    if scope is None:
        from docpipe.access.scope import OwnerScope

        scope = OwnerScope.open(dp.store.root, getattr(args, "matter", None), audit_key_file=dp.settings.audit_key_file)
        args._scope = scope
    return scope


def matter_collection(dp: Any, args: Any, name: str, *, existing: bool = True) -> Any:
    """Returns the collection `name` of the command's matter; with `existing`, an InputError listing the
    matter's collections when it has none of that name."""
    from docpipe.errors import InputError

    scope = owner_scope(dp, args)
    coll = dp.collection(name, matter=scope.library_matter)  # checks the name before anything reads or writes
    if coll.exists or not existing:
        return coll
    names = [c.name for c in dp.collections(matter=scope.library_matter)]
    where = "" if scope.own else f" in matter {scope.matter!r}"
    known = f"the collections are {', '.join(names)} (docpipe collections)" if names else "there are no collections yet"
    flag = "" if scope.own else f" --matter {scope.matter}"
    raise InputError(
        f"no collection named {name!r}{where}: {known}; make one with "
        f"docpipe ingest{flag} --collection {name} FOLDER_OR_FILES..."
    )


def file_members(dp: Any, args: Any, members: list[Any]) -> None:
    """Files a collection's new (and present) members in the command's matter, as a server's add does."""
    from docpipe.terms.about import about, stored_about

    scope = owner_scope(dp, args)
    for member in members:
        if scope.holds(member.id) and stored_about(dp.store, member.id) is not None:
            continue  # filed and described by an earlier add: a rerun opens nothing again
        doc = dp.document(member.id, authorized=True)
        scope.file(member.id, member.name, encrypted=bool(doc is not None and doc.encrypted))
        if doc is not None:
            about(dp.store, doc)  # its title and parties, for `docpipe ls`


def matter_document(dp: Any, args: Any, path: Path, *, password: str | None = None) -> Any:
    """Returns the PDF at `path` ingested (cached by content), filed in the command's matter and seen as that
    matter's document (its answers cached apart from another matter's)."""
    from docpipe.terms.about import about
    from docpipe.types import scoped_matter

    scope = owner_scope(dp, args)
    doc = dp.ingest(path, password=password)
    scope.file(doc.id, Path(path).name, encrypted=doc.encrypted)
    about(dp.store, doc)
    return replace(doc, matter=scoped_matter(scope.matter))
