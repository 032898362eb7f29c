"""What a stored contract is, in a line: its title and its parties, read by the offline key-term readers and kept
beside the document (``docs/<id>/about.json``, sealed like its other files) so that a listing of a data room
(`docpipe ls`) shows them without reading every contract again. Read again when the readers change
(`READER_VERSION`)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from docpipe.terms.catalog import key_term_columns
from docpipe.terms.key_terms import READER_VERSION, read_key_terms

if TYPE_CHECKING:
    from docpipe.storage.store import Store
    from docpipe.types import Document

__all__ = ["ABOUT_FILE", "about", "stored_about"]

logger = logging.getLogger(__name__)

ABOUT_FILE = "about.json"
_TERMS = ["document_title", "parties"]


def stored_about(store: Store, doc_id: str) -> dict[str, Any] | None:
    """Returns the kept title and parties of a document (``{"title": str, "parties": [str]}``), or None when
    none are kept by the current readers."""
    try:
        raw = store.read_file(doc_id, ABOUT_FILE)
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError) as exc:
        logger.warning("the title and parties of %s are unreadable (%s): read again", doc_id[:12], exc)
        return None
    if not isinstance(data, dict) or data.get("readers") != READER_VERSION:
        return None
    return {"title": str(data.get("title", "")), "parties": [str(p) for p in data.get("parties", [])]}


def about(store: Store, doc: Document) -> dict[str, Any]:
    """Returns the document's title and parties (kept ones, else read now and kept): ``""`` and ``[]`` where
    the readers found none."""
    kept = stored_about(store, doc.id)
    if kept is not None:
        return kept
    title, parties = read_key_terms(doc, key_term_columns(_TERMS))
    found = {
        "title": title.value.display if title.value is not None else "",
        "parties": _names(parties.value.normalized) if parties.value is not None else [],
    }
    try:
        store.write_file(doc.id, ABOUT_FILE, json.dumps({**found, "readers": READER_VERSION}).encode())
    except OSError as exc:  # a read-only store still lists
        logger.warning("could not keep the title and parties of %s: %s", doc.id[:12], exc)
    return found


def _names(normalized: Any) -> list[str]:
    """Returns the parties' names from a parties value's normalized form (a list of names, or of records)."""
    if isinstance(normalized, list):
        return [str(p.get("name", "")) if isinstance(p, dict) else str(p) for p in normalized if p]
    return [str(normalized)] if normalized else []
