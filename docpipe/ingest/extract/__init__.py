"""PDF bytes in, numbered pages of text out: the extraction stage.

`extract_pages` runs the extractor (pypdf or pypdfium2) in a fresh worker process, so one pathological
file costs at most `ExtractionSettings.timeout_s` seconds and `memory_limit_mb` of address space, and a
crash inside pdfium's C++ cannot take the caller down. The worker runs `worker_nice` levels below its
caller, so a crafted upload that keeps it busy for the whole time bound leaves the CPU to interactive
questions, and it stops as soon as the text passes `max_page_chars` or `max_chars`, so a small PDF that
expands to megabytes of text is refused before that text crosses the pipe. `encryption_status` asks the
same kind of worker whether a PDF is encrypted and whether a password opens it: the untrusted bytes are
never parsed in the caller's process, and a check that cannot finish raises instead of answering "no".

The worker is a plain ``python -I -c`` child rather than a multiprocessing process (see `worker`): a script
that calls `extract_pages` needs no ``if __name__ == "__main__"`` guard, and a notebook with torch loaded
pays nothing for it. Modules: `api` (these functions, in the caller), `worker` (both sides of the process
boundary), `pages` (reading every page, in the worker), `pypdf_reader` and `pdfium_reader`, `docx` (Word
files, in the caller) and `docx_reader` (in the worker), `encryption` (the status and its errors), `budget`
(the text caps), `common`. The package imports only docpipe.types,
docpipe.errors and, in the worker, the chosen backend: the worker imports it without docpipe/__init__.py.
"""

from __future__ import annotations

from docpipe.ingest.extract.api import EXTRACTORS, Extraction, encryption_status, extract_document, extract_pages
from docpipe.ingest.extract.encryption import EncryptionStatus

__all__ = ["EXTRACTORS", "EncryptionStatus", "Extraction", "encryption_status", "extract_document", "extract_pages"]
