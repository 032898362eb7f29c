"""What an ingested document is, as plain data: one summary for the CLI's ``ingest``, the REST API's document
routes and the workbench's upload result. Counts and per-page warnings only, never contract text.
Imports only docpipe.types (for the type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docpipe.types import Document

__all__ = ["document_summary"]


def document_summary(doc: Document, *, name: str | None = None) -> dict[str, Any]:
    """Returns id, name (`name` if given: the name a matter knows it by), pages, sections, extractor,
    encrypted, page_statuses (``{"1": "ok", ...}``), pages_with_text and warnings (one
    ``{"page", "status", "message"}`` per page that did not extract cleanly).

    >>> from docpipe.types import Document, Page, PageStatus
    >>> doc = Document(id="ab" * 32, name="x.pdf", pages=[Page(1, "Hi"), Page(2, "", PageStatus.NO_TEXT)])
    >>> summary = document_summary(doc)
    >>> summary["pages"], summary["pages_with_text"], summary["warnings"][0]["message"]
    (2, 1, 'page 2: no text layer')
    """
    return {
        "id": doc.id,
        "name": doc.name if name is None else name,
        "pages": len(doc.pages),
        "sections": len(doc.sections),
        "extractor": doc.extractor,
        "encrypted": doc.encrypted,
        "page_statuses": {str(number): status for number, status in doc.page_statuses.items()},
        "pages_with_text": sum(1 for page in doc.pages if page.ok),
        "warnings": [
            {"page": page.number, "status": page.status.value, "message": page.describe()}
            for page in doc.pages
            if not page.ok
        ],
    }
