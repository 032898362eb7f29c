"""The documents of an exported grid, copied beside it so its citations link into them (``--with-pdfs``).

`copy_pdfs` writes each row's stored file into ``<export stem>-pdfs/`` beside the export (0700 folder, 0600
files: they are the contracts), under a name made from the document's own name: its last path part only, letters,
digits, space, ``.``, ``_``, ``-`` and ``()`` kept, everything else ``_``, never led by a dot, a space or a sign
a spreadsheet reads as a formula, at most 80 characters, de-duplicated without regard to case (``msa.pdf``,
``msa-2.pdf``). So a document named ``../../evil.pdf`` is ``evil.pdf`` inside the folder and ``=cmd|x.pdf`` is
``cmd_x.pdf``. `pdf_target` is the relative link a citation's page cell gets: ``<folder>/<name>.pdf#page=N``,
percent-encoded, never an absolute path.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import quote

from docpipe.storage.store import atomic_write, make_private_dir, tighten_mode

if TYPE_CHECKING:
    from collections.abc import Iterable

    from docpipe.review.cells import Row
    from docpipe.storage.store import Store

__all__ = ["copy_pdfs", "pdf_folder", "pdf_target", "safe_file_stem"]

_UNSAFE = re.compile(r"[^A-Za-z0-9 ._()-]+")
_LEAD = re.compile(r"^[\s.=+\-@_]+")
_MAX_STEM = 80


def pdf_folder(export: Path) -> Path:
    """Returns the folder `copy_pdfs` fills beside `export`: ``<stem>-pdfs``."""
    export = Path(export)
    return export.with_name(f"{safe_file_stem(export.stem, fallback='grid')}-pdfs")


def safe_file_stem(name: str, *, fallback: str) -> str:
    """Returns `name` (a document's name, maybe a path) as a file name stem that stays in its folder (see
    the module docstring); `fallback` when nothing is left.

    >>> safe_file_stem("../../evil.pdf", fallback="x"), safe_file_stem("=cmd|x.pdf", fallback="x")
    ('evil', 'cmd_x')
    """
    base = re.split(r"[/\\]", name)[-1]
    stem = base[:-4] if base.lower().endswith((".pdf", ".doc")) else base
    stem = stem[:-5] if stem.lower().endswith(".docx") else stem
    stem = _LEAD.sub("", _UNSAFE.sub("_", stem))[:_MAX_STEM].rstrip(" .")
    return stem or fallback


def copy_pdfs(store: Store, rows: Iterable[Row], export: Path) -> dict[str, str]:
    """Returns {document id: the file's path relative to `export`'s folder} after copying each row's stored file
    (PDF, or a Word file as ``.docx``) into `pdf_folder(export)`; a row without a stored file (a failed row,
    a document no longer stored) has no entry, so its citations link nowhere."""
    folder = pdf_folder(export)
    taken: set[str] = set()
    links: dict[str, str] = {}
    for row in rows:
        if not row.document_id or row.document_id in links:
            continue
        data = store.load_source(row.document_id)
        if data is None:
            continue
        suffix = ".pdf" if b"%PDF" in data[:1024] else ".docx"  # a PDF may have bytes before its header
        stem = safe_file_stem(row.name, fallback=row.document_id[:12])
        name, n = stem + suffix, 1
        while name.lower() in taken:
            n += 1
            name = f"{stem}-{n}{suffix}"
        taken.add(name.lower())
        make_private_dir(folder)
        tighten_mode(folder, 0o700)  # left open by an earlier export or by hand: it holds the contracts
        atomic_write(folder / name, data)
        links[row.document_id] = str(PurePosixPath(folder.name, name))
    return links


def pdf_target(path: str, page: int | None) -> str:
    """Returns the relative link to `path` (from `copy_pdfs`), at `page` of a PDF when given.

    >>> pdf_target("grid-pdfs/Master services.pdf", 9)
    'grid-pdfs/Master%20services.pdf#page=9'
    """
    target = quote(path, safe="/()._-")
    return f"{target}#page={page}" if page and page > 0 and path.lower().endswith(".pdf") else target
