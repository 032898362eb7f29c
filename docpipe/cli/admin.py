"""The commands that administer a store: API keys, matters, the access log, and deleting documents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from docpipe.cli.collections import (
    collection_ids,
    drop_gone,
    memberships,
    rm_collection,
    rm_result,
    short,
    stored_record,
)
from docpipe.cli.output import EXIT_ERROR, emit

__all__ = ["cmd_audit", "cmd_keys", "cmd_matters", "cmd_rm"]


def cmd_keys(dp, args) -> int:
    from datetime import UTC, datetime

    from docpipe.access.keys import KeyStore, parse_grants

    if args.keys_command in ("store-key", "seal-store"):
        return _store_key(dp, args)
    keys = KeyStore(dp.store.root)
    if args.keys_command == "create":
        secret, key = keys.create(args.user, parse_grants(args.grants), note=args.note)
        if args.json:
            emit({**key.to_dict(), "key": secret})
        else:
            grants = ", ".join(f"{m}:{r}" for m, r in key.grants.items())
            print(secret)
            print(
                f"key {key.key_id} for {key.user} ({grants}): shown once, keep it safe; "
                f"revoke with docpipe keys revoke {key.key_id}",
                file=sys.stderr,
            )
        return 0
    if args.keys_command == "revoke":
        key = keys.revoke(args.key_id)
        print(f"revoked key {key.key_id} of {key.user}")
        return 0
    listed = keys.keys()
    if args.json:
        emit([k.to_dict() for k in listed])
        return 0
    if not listed:
        print("No keys: docpipe keys create --user NAME --matter MATTER[:read|write|admin]")
    for key in listed:
        made = datetime.fromtimestamp(key.created, UTC).strftime("%Y-%m-%d %H:%M")
        state = "revoked" if key.revoked else "active"
        grants = ", ".join(f"{m}:{r}" for m, r in key.grants.items())
        note = f"  {key.note}" if key.note else ""
        print(f"{key.key_id}  {state:8} {key.user:16} {grants}  (created {made} UTC){note}")
    return 0


def _store_key(dp, args) -> int:
    """Encryption at rest (docs/encryption-at-rest.md): a new key file, or the store's plain files sealed."""
    if args.keys_command == "store-key":
        from docpipe.access.store_key import write_store_key

        key_id = write_store_key(args.out)
        print(
            f"store key {key_id} written to {args.out} (mode 600): set DOCPIPE_STORE_KEY_FILE={args.out}, then "
            "docpipe keys seal-store seals what the store already holds. Back it up: without it the sealed "
            "store cannot be read",
            file=sys.stderr,
        )
        return 0
    sealed = dp.store.seal_plain_files()
    print(f"sealed {sealed} plain file(s) of the store at {dp.store.root}")
    return 0


def cmd_matters(dp, args) -> int:
    from docpipe.access.matters import MatterStore

    store = MatterStore(dp.store.root)
    data: list[dict[str, Any]] = [
        {"matter": m, "documents": [{"id": d.id, "name": d.name, "added_by": d.added_by} for d in store.documents(m)]}
        for m in store.matters()
    ]
    if args.json:
        emit(data)
        return 0
    if not data:
        print("No matters yet: documents uploaded to docpipe serve go into one (X-Matter, or the key's only matter).")
    for item in data:
        print(f"{item['matter']}: {len(item['documents'])} documents")
        for doc in item["documents"]:
            print(f"    {doc['id'][:12]}  {doc['name']}  (added by {doc['added_by']})")
    return 0


def cmd_audit(dp, args) -> int:
    from docpipe.access.log import AccessLog

    log = AccessLog(dp.store.root, key_file=dp.settings.audit_key_file)
    if args.verify or args.head or args.expect_head:
        return _verify_audit(log, args)
    entries = log.read(
        matter=args.matter, user=args.user, document=args.document, since=args.since, question=args.question
    )
    for entry in entries:
        if args.json:
            print(json.dumps(entry, ensure_ascii=False, sort_keys=True))
            continue
        doc = (entry.get("document") or "")[:12] or "-"
        hashes = entry.get("questions_hmac") or entry.get("questions_sha256")
        asked = f" questions {len(hashes)}" if hashes else ""
        print(
            f"{entry['time']}  {entry['user']:12} {entry['matter']:16} {entry['action']:16} {doc:12} "
            f"{entry['outcome']}{asked}"
        )
    return 0


def _verify_audit(log, args) -> int:
    """``audit --verify`` / ``--head`` / ``--expect-head``: the verdict in one line, non-zero when not intact."""
    from docpipe.errors import ConfigError

    expect = None
    if args.expect_head:
        lines, _, head = args.expect_head.partition(":")
        if not lines.isdigit() or len(head) != 64 or any(c not in "0123456789abcdefABCDEF" for c in head):
            raise ConfigError(
                f"--expect-head {args.expect_head[:80]!r} is not LINES:SHA256: give what docpipe audit --head printed"
            )
        expect = (int(lines), head)
    result = log.verify(expect_head=expect)
    if args.json:
        emit(result.to_dict())
    if not result.intact:
        print(f"docpipe: error: the access log is not intact: {result.problem} ({log.path})", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        return 0
    if result.legacy:
        first, last = result.legacy
        print(
            f"docpipe: note: unkeyed legacy lines {first}..{last} (written before the log was signed): only their "
            "hash chain is checked",
            file=sys.stderr,
        )
    if not result.anchored and result.lines:
        print(
            "docpipe: warning: no checkpoint anchors the log's end (nothing was signed yet): lines removed from "
            "the end would go unnoticed",
            file=sys.stderr,
        )
    if result.note:
        print(f"docpipe: note: {result.note}", file=sys.stderr)
    if args.head:
        print(f"{result.lines}:{result.head}")
        return 0
    anchored = ", signed, its end matching the checkpoint" if result.anchored else ""
    lines = f"{result.lines} line" + ("" if result.lines == 1 else "s")
    print(f"access log intact: {lines}, each naming the one before{anchored}")
    return 0


def cmd_rm(dp, args) -> int:
    """Deletes documents from the store, a matter, or a collection (see `docpipe.cli.collections`).

    A document deleted from the store (or leaving it because its last matter let it go) is also removed
    from every collection that held it: a collection never keeps a member whose text is gone."""
    from dataclasses import asdict

    from docpipe.access.keys import check_matter_name
    from docpipe.access.matters import MatterStore
    from docpipe.errors import ConfigError

    if args.collection is not None or args.all:
        return rm_collection(dp, args)
    if args.matter:
        check_matter_name(args.matter)
    if args.delete_matter:
        if not args.matter or args.targets:
            raise ConfigError("--delete-matter deletes a whole matter: docpipe rm --matter NAME --delete-matter")
        ids = [d.id for d in MatterStore(dp.store.root).documents(args.matter)]
    elif not args.targets:
        raise ConfigError(
            "name what to delete: docpipe rm FILE_OR_ID... (docpipe ls lists the ids), "
            "or --collection NAME DOC... / --matter NAME --delete-matter"
        )
    else:
        ids = list(dict.fromkeys(_known_id(target, dp) for target in args.targets))  # all checked before any goes
    from docpipe.server.housekeeping import Housekeeper, Removed

    keeper = Housekeeper(dp)
    before = set(dp.store.document_ids())
    records = {d: stored_record(dp, d) for d in ids}
    held = memberships(dp, ids)
    holders = {d: keeper.matters.holders(d) for d in ids}
    if args.delete_matter:
        removed = keeper.delete_matter(args.matter)
    else:
        removed = Removed()
        for doc_id in ids:
            removed += keeper.remove(args.matter, doc_id) if args.matter else keeper.purge(doc_id)
    _log_removal(dp, args, holders)
    drop_gone(dp, ids)
    stored = set(dp.store.document_ids())
    still = memberships(dp, ids)
    deleted = [
        {**records[d], "collections": [c for c in held[d] if c not in still[d]]}
        for d in ids
        if d in before and d not in stored
    ]
    if args.json:
        gone = [{k: v for k, v in d.items() if k != "added"} for d in deleted]
        emit(rm_result(deleted=gone, counts=asdict(removed)))
    else:
        for item in deleted:
            also = f", removed from collection {', '.join(item['collections'])}" if item["collections"] else ""
            print(f"deleted {short(item['id'])} {item['name'] or '-'} ({item['pages']} pages){also}")
        print(
            f"removed {removed.documents} matter records, {removed.results} answers and reports, "
            f"{removed.cached_answers} cached answers, {removed.review_jobs} review jobs; "
            f"{removed.purged} documents left the store"
        )
    return 0


def _log_removal(dp, args, holders: dict[str, list[str]]) -> None:
    """Writes who deleted what to the access log, as the server does for its DELETE routes: the login name
    of whoever ran `docpipe rm` (key id "cli"), one line per matter that held each document."""
    import getpass
    import os

    from docpipe.access.log import AccessLog

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (a container's)
        user = f"uid-{os.getuid()}"
    log = AccessLog(dp.store.root, key_file=dp.settings.audit_key_file)
    if args.delete_matter:
        log.record(user=user, key_id="cli", matter=args.matter, action="delete_matter", detail="docpipe rm")
        return
    for doc_id, matters in holders.items():
        for matter in matters:
            if args.matter in (None, matter):
                log.record(
                    user=user,
                    key_id="cli",
                    matter=matter,
                    action="delete_document",
                    document=doc_id,
                    detail="docpipe rm" if args.matter else "docpipe rm: from every matter and the store",
                )


def _known_id(target: str, dp) -> str:
    """Returns the id of a document docpipe knows (in the store, a matter or a collection) that `target`
    names: a PDF file, an id, or 8+ characters of one; a `FileMissingError` saying how to list ids otherwise."""
    from docpipe.access.matters import MatterStore
    from docpipe.errors import FileMissingError

    matters = MatterStore(dp.store.root)
    known = set(dp.store.document_ids())
    known |= {d.id for m in matters.matters() for d in matters.documents(m)}
    known |= collection_ids(dp)
    doc_id = _doc_id_of(target, known)
    if doc_id is None or doc_id not in known:
        raise FileMissingError(
            f"no stored document matches {target[:80]!r}: give the PDF, its id or 8+ characters of it "
            "(docpipe ls lists the store's documents, docpipe matters a matter's)"
        )
    return doc_id


def _doc_id_of(target: str, known: set[str]) -> str | None:
    """Returns the id a target names: a PDF's SHA-256, a full id, or an unambiguous prefix (8+ hex
    characters) of a known id."""
    from docpipe.errors import ConfigError
    from docpipe.storage.store import sha256_hex

    path = Path(target)
    if path.is_file():
        return sha256_hex(path.read_bytes())
    lowered = target.lower()
    if len(lowered) < 8 or lowered.strip("0123456789abcdef"):
        return None
    ids = sorted(d for d in known if d.startswith(lowered))
    if len(ids) > 1:
        raise ConfigError(f"{target!r} matches {len(ids)} documents: give more of the id")
    return ids[0] if ids else None
