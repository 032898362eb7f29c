"""Word (.docx) bytes in, numbered paragraphs out: the extraction stage for Word files.

A Word file has no pages, so its "pages" are its paragraphs and table rows, numbered from 1 in document order
(empty ones skipped), each as docpipe shows it: the list number Word draws in front of it rendered from
``numbering.xml`` ("12.3 Termination for Convenience. ...", "(a) ..."), a table row as its cells joined with
``" | "``. Citations then give the section heading and paragraph number (``¶ 7``, see `Document.unit`).

`document_kind` tells a PDF from a Word file by its bytes (a ZIP holding ``word/document.xml``) or its
``.docx`` name, and refuses everything else with `NotAPDFError`; an encrypted Word file (an OLE compound file
holding an ``EncryptedPackage`` stream) is refused at once with `EncryptedWordFileError`. `extract_docx` reads
a Word file in the same sandboxed worker as PDFs (time bound, memory cap, lower priority); in the worker,
`read_docx` checks the ZIP before reading any of it (entry count, total uncompressed size, compression ratio:
a zip bomb is refused from its directory) and refuses XML parts that declare a DTD (Word never writes one:
billion laughs and external entities stop there, and python-docx parses with ``resolve_entities=False``
anyway). Relationships with ``TargetMode="External"`` are never followed (python-docx records them as
strings), so a Word file cannot make docpipe fetch anything.

python-docx opens the package (relationships, styles, numbering part); the paragraphs, tables and list
numbers are read from its XML here, because python-docx does not render list numbers and docx2python renders
its own ("1)", "a)") instead of the document's ("1.1", "(a)"). Imports only docpipe.errors, docpipe.types, this
package and, in the worker, python-docx.
"""

from __future__ import annotations

import io
import logging
import re
import time
import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from docpipe.errors import (
    EmptyFileError,
    EncryptedWordFileError,
    ExtractionError,
    ExtractionTimeoutError,
    MalformedPDFError,
    NotAPDFError,
    TooMuchTextError,
)
from docpipe.ingest.extract.api import Extraction
from docpipe.ingest.extract.encryption import EncryptionStatus
from docpipe.ingest.extract.worker import raise_worker_error, replay_worker_log, run_worker, worker_request
from docpipe.types import Page, PageStatus

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings

__all__ = ["DOCX_MEDIA_TYPE", "READER", "document_kind", "extract_docx", "read_docx"]

logger = logging.getLogger(__name__)

DOCX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
#: The reader named in messages and stored as a Word document's extractor.
READER = "python-docx"

_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAIN_PART = "word/document.xml"
# An encrypted Office file is an OLE compound file with these streams (MS-OFFCRYPTO); names are UTF-16LE.
_ENCRYPTED_STREAMS = ("EncryptedPackage".encode("utf-16-le"), "EncryptionInfo".encode("utf-16-le"))
_PDF_HEADER_WINDOW = 1024  # as the PDF check: readers accept a header anywhere in the first 1024 bytes

# A contract's package holds a few dozen parts and, with its images, some megabytes; an XML part compresses
# 5-20 times. Deflate reaches about 1,000 times on repeated bytes: a part that expands more than `_MAX_RATIO`
# times past `_RATIO_FLOOR` is a zip bomb.
_MAX_ENTRIES = 5_000
_MAX_UNCOMPRESSED = 256 << 20
_MAX_RATIO = 100
_RATIO_FLOOR = 1 << 20
_MAX_PARAGRAPHS = 200_000

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
# Inside a paragraph: deleted text (tracked changes), text boxes (their own paragraphs, drawn elsewhere),
# the second copy of alternate content, and properties hold nothing that is read as the paragraph's text.
_SKIPPED = frozenset(
    {
        f"{_W}pPr",
        f"{_W}rPr",
        f"{_W}del",
        f"{_W}moveFrom",
        f"{_W}txbxContent",
        f"{_W}instrText",
        f"{_W}delText",
        _MC_FALLBACK,
    }
)
_TEXT = {f"{_W}t": None, f"{_W}tab": " ", f"{_W}br": "\n", f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-"}
_BLOCK_CONTAINERS = frozenset({f"{_W}sdt", f"{_W}sdtContent", f"{_W}customXml", f"{_W}ins", f"{_W}moveTo"})
_SPACES = re.compile(r"[ \t\u00a0]+")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def document_kind(data: bytes, name: str) -> str:
    """Returns ``"pdf"`` or ``"docx"`` for the document in `data` called `name`: a PDF by its header, a Word
    file by its bytes (a ZIP holding ``word/document.xml``) or its ``.docx`` name (a broken one is then
    refused as a broken Word file, not as "not a PDF"). Raises `EmptyFileError`, `EncryptedWordFileError` for an
    encrypted Word file, and `NotAPDFError` for anything else, saying what the bytes look like."""
    if not data:
        raise EmptyFileError(f"{name} is empty (0 bytes): check that the file was written completely", path=name)
    if b"%PDF-" in data[:_PDF_HEADER_WINDOW]:
        return "pdf"
    if data.startswith(_OLE_MAGIC) and all(stream in data for stream in _ENCRYPTED_STREAMS):
        raise encrypted(name)
    word_name = name.lower().endswith(".docx")
    if data.startswith(_ZIP_MAGIC) and (_MAIN_PART.encode() in data or word_name):
        return "docx"
    if word_name and not data.startswith(_OLE_MAGIC):
        return "docx"
    raise NotAPDFError(
        f"{name} is not a PDF or a Word (.docx) file (it starts with {_described(data)}): convert it to PDF "
        "(or save it as .docx) first",
        path=name,
    )


def _described(data: bytes) -> str:
    head = repr(data[:16])
    if data.startswith(_ZIP_MAGIC):
        return f"{head}, a ZIP archive but not a Word document: an .xlsx, .pptx or .odt?"
    if data.startswith(_OLE_MAGIC):
        return f"{head}, an old Office file: a .doc (save it as .docx) or .xls?"
    if data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return f"{head}, an HTML page"
    if data.startswith(b"{\\rtf"):
        return f"{head}, an RTF document (save it as .docx)"
    return head


def encrypted(name: str) -> EncryptedWordFileError:
    """Returns the error for a password-protected Word file, which docpipe does not decrypt."""
    return EncryptedWordFileError(
        f"{name} is an encrypted (password-protected) Word file, which docpipe cannot open: open it in Word and "
        "save an unprotected copy (File > Info > Protect Document > Encrypt with Password: clear the password), "
        "or save it as PDF, and ingest that",
        path=name,
        kind="docx",
    )


def _malformed(name: str, reason: str) -> MalformedPDFError:
    return MalformedPDFError(
        f"{name} is not a readable Word file: {reason}. Open it in Word and save it again as .docx (or as PDF)",
        path=name,
        extractor=READER,
        reason=reason,
    )


def extract_docx(
    data: bytes,
    *,
    settings: ExtractionSettings | None = None,
    name: str = "document.docx",
) -> Extraction:
    """Returns the paragraphs of the Word file in `data` as pages (numbered from 1, see the module docstring)
    and an `EncryptionStatus` of "not encrypted", read in a sandboxed extraction worker with the time and
    memory bounds of `settings`, as `extract_document` reads a PDF.

    Raises `EncryptedWordFileError` for an encrypted Word file, `MalformedPDFError` for a broken one (not a ZIP,
    no ``word/document.xml``, an XML part declaring a DTD), `ExtractionError` for a zip bomb, `NoTextError`
    when no paragraph holds text and `TooMuchTextError` past ``max_page_chars`` in one paragraph or
    ``max_chars`` in all; the message says how to fix it.
    """
    if settings is None:
        from docpipe.settings import ExtractionSettings  # pydantic is heavy; the worker imports this module

        settings = ExtractionSettings()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"extract_docx takes the file's bytes, not {type(data).__name__}: pass path.read_bytes()")
    data = bytes(data)
    if not data:
        raise EmptyFileError(f"{name} is empty (0 bytes): check that the file was written completely", path=name)
    if data.startswith(_OLE_MAGIC) and all(stream in data for stream in _ENCRYPTED_STREAMS):
        raise encrypted(name)
    request = worker_request(data, None, name, settings, op="docx")
    started = time.monotonic()
    try:
        reply = run_worker(request, name=name, extractor=READER, timeout_s=settings.timeout_s)
    except ExtractionTimeoutError:
        raise
    except ExtractionError as exc:
        if "returncode" not in exc.context:
            raise
        raise ExtractionError(
            f"the extraction worker for {name} ended without an answer ({exc.context['returncode']}): it most likely "
            f"ran out of memory (limit {settings.memory_limit_mb} MB). Save the file again as .docx, or raise "
            "DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB for a genuinely large document",
            path=name,
            extractor=READER,
            returncode=exc.context["returncode"],
        ) from exc
    replay_worker_log(reply.get("log", []), reply.get("dropped", 0), name)
    if "error" in reply:
        raise_worker_error(reply["error"])
    pages = [Page(number, text, PageStatus(status), detail) for number, text, status, detail in reply["pages"]]
    logger.info("extracted %s with %s: %s paragraphs in %.2f s", name, READER, len(pages), time.monotonic() - started)
    return Extraction(pages, EncryptionStatus(False, False, None))


# -- in the worker ---------------------------------------------------------------------------------------------
def read_docx(data: bytes, *, name: str, max_chars: int, max_page_chars: int) -> list[tuple[int, str, str, str]]:
    """Returns ``(number, text, "ok", "")`` for every non-empty paragraph and table row of the Word file, in
    document order, or raises the document-level error. Runs in the extraction worker."""
    if data.startswith(_OLE_MAGIC) and all(stream in data for stream in _ENCRYPTED_STREAMS):
        raise encrypted(name)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise _malformed(name, f"it is not a valid ZIP package (corrupt or truncated: {exc})") from None
    with archive:
        _check_archive(archive, name)
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
    except PackageNotFoundError as exc:
        raise _malformed(name, f"it is not a Word package ({exc})") from None
    except ValueError as exc:  # python-docx: the main part is not a Word document (.docm, .dotx, .xlsx ...)
        raise _malformed(name, " ".join(str(exc).split())) from None
    except KeyError as exc:
        raise _malformed(name, f"a part it refers to is missing ({exc})") from None
    except Exception as exc:  # lxml's XMLSyntaxError and the like: a part that is not well-formed XML
        raise _malformed(name, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    numbers = _Numbering(document)
    pages: list[tuple[int, str, str, str]] = []
    total = 0
    for text in _blocks(document.element.body, numbers):
        text = _clean(text)
        if not text:
            continue
        number = len(pages) + 1
        total += len(text)
        if len(text) > max_page_chars:
            raise TooMuchTextError(
                f"paragraph {number} of {name} holds more than {max_page_chars:,} characters (a long contract "
                "paragraph holds a few thousand): it looks crafted to exhaust the server. If it is genuine, raise "
                "DOCPIPE_EXTRACTION__MAX_PAGE_CHARS",
                path=name,
                extractor=READER,
                page=number,
                max_page_chars=max_page_chars,
            )
        if total > max_chars or number > _MAX_PARAGRAPHS:
            raise TooMuchTextError(
                f"the text of {name} exceeds {max_chars:,} characters or {_MAX_PARAGRAPHS:,} paragraphs (reached at "
                f"paragraph {number}): split the document, or raise DOCPIPE_EXTRACTION__MAX_CHARS",
                path=name,
                extractor=READER,
                page=number,
                max_chars=max_chars,
            )
        pages.append((number, text, PageStatus.OK.value, ""))
    if not pages:
        from docpipe.errors import NoTextError

        raise NoTextError(
            f"{name} holds no text (an empty document, or only images?): check the file, or save it as PDF and "
            "ingest that",
            path=name,
            extractor=READER,
        )
    return pages


def _check_archive(archive: zipfile.ZipFile, name: str) -> None:
    """Refuses a ZIP that is a bomb (from its directory, before reading any part), lacks the main document,
    or holds an XML part that declares a DTD."""
    entries = archive.infolist()
    if len(entries) > _MAX_ENTRIES:
        raise _bomb(name, f"it holds {len(entries):,} ZIP entries (a Word file holds dozens; at most {_MAX_ENTRIES:,})")
    total = sum(entry.file_size for entry in entries)
    if total > _MAX_UNCOMPRESSED:
        raise _bomb(name, f"it expands to {total / 2**20:,.0f} MB (at most {_MAX_UNCOMPRESSED >> 20} MB)")
    for entry in entries:
        # zipfile stops at the declared size (and then fails the CRC), so the directory's sizes are binding.
        if entry.file_size > _RATIO_FLOOR and entry.file_size > _MAX_RATIO * max(entry.compress_size, 1):
            ratio = entry.file_size / max(entry.compress_size, 1)
            raise _bomb(name, f"its part {entry.filename[:80]} expands {ratio:,.0f} times (at most {_MAX_RATIO})")
    names = {entry.filename for entry in entries}
    if _MAIN_PART not in names:
        raise _malformed(name, f"it has no {_MAIN_PART} (not a Word document, or a damaged one)")
    for entry in entries:
        if entry.filename.endswith((".xml", ".rels")) and _declares_dtd(archive.read(entry)):
            raise _malformed(
                name,
                f"its part {entry.filename[:80]} declares a DTD, which Word never writes (entity expansion or an "
                "external entity: a crafted file?)",
            )


def _declares_dtd(xml: bytes) -> bool:
    return any(
        marker.encode(encoding) in xml
        for marker in ("<!DOCTYPE", "<!ENTITY")
        for encoding in ("utf-8", "utf-16-le", "utf-16-be")
    )


def _bomb(name: str, reason: str) -> ExtractionError:
    return ExtractionError(
        f"{name} is refused: {reason}. It looks like a zip bomb; if it is a genuine document, save it again "
        "without embedded media, or as PDF",
        path=name,
        extractor=READER,
        reason=reason,
    )


def _clean(text: str) -> str:
    lines = [_SPACES.sub(" ", line).strip() for line in _CONTROLS.sub("", text).split("\n")]
    return "\n".join(line for line in lines if line)


def _blocks(container: Any, numbers: _Numbering) -> Iterator[str]:
    """Yields the text of each paragraph (its list number in front) and table row under `container`, in order."""
    for child in container.iterchildren():
        tag = child.tag
        if tag == f"{_W}p":
            yield _paragraph(child, numbers)
        elif tag == f"{_W}tbl":
            for row in child.iterchildren(f"{_W}tr"):
                cells = [" ".join(_clean(t) for t in _blocks(cell, numbers)) for cell in _cells(row)]
                if any(cells):
                    yield " | ".join(cell.strip() for cell in cells)
        elif tag in _BLOCK_CONTAINERS:
            yield from _blocks(child, numbers)


def _cells(row: Any) -> Iterator[Any]:
    for child in row.iterchildren():
        if child.tag == f"{_W}tc":
            yield child
        elif child.tag in _BLOCK_CONTAINERS:  # cells inside a content control
            yield from _cells(child)


def _paragraph(p: Any, numbers: _Numbering) -> str:
    parts: list[str] = []
    _collect(p, parts)
    text = "".join(parts)
    label = numbers.label(p)
    return f"{label} {text}" if label and text.strip() else text


def _collect(element: Any, parts: list[str]) -> None:
    for child in element.iterchildren():
        tag = child.tag
        if not isinstance(tag, str) or tag in _SKIPPED:
            continue
        if tag in _TEXT:
            replacement = _TEXT[tag]
            parts.append(child.text or "" if replacement is None else replacement)
        else:
            _collect(child, parts)


# -- list numbers --------------------------------------------------------------------------------------------
_ROMAN: tuple[tuple[int, str], ...] = tuple(
    zip((1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1), "m cm d cd c xc l xl x ix v iv i".split())
)
_LEVEL_REFERENCE = re.compile(r"%([1-9])")


def _roman(value: int) -> str:
    out = []
    for amount, letters in _ROMAN:
        while value >= amount:
            out.append(letters)
            value -= amount
    return "".join(out)


def _letters(value: int) -> str:
    # Word repeats the letter past z: aa, bb, ...
    return chr(ord("a") + (value - 1) % 26) * ((value - 1) // 26 + 1) if value > 0 else ""


def _formatted(value: int, fmt: str) -> str:
    if fmt == "lowerLetter":
        return _letters(value)
    if fmt == "upperLetter":
        return _letters(value).upper()
    if fmt == "lowerRoman":
        return _roman(value)
    if fmt == "upperRoman":
        return _roman(value).upper()
    if fmt == "decimalZero":
        return f"{value:02d}"
    if fmt == "none":
        return ""
    return str(value)


class _Level:
    __slots__ = ("fmt", "legal", "start", "style", "text")

    def __init__(self, element: Any) -> None:
        def value(tag: str, default: str) -> str:
            found = element.find(f"{_W}{tag}")
            return default if found is None else found.get(f"{_W}val", default)

        self.start = _int(value("start", "1"), 1)
        self.fmt = value("numFmt", "decimal")
        self.text = value("lvlText", "")
        self.style = value("pStyle", "")
        found = element.find(f"{_W}isLgl")
        self.legal = found is not None and found.get(f"{_W}val", "1") not in ("0", "false", "off")


def _int(value: str | None, default: int) -> int:
    try:
        return int(value or "")
    except ValueError:
        return default


class _Numbering:
    """Word's list numbers: each numbered paragraph's label ("12.3", "(a)") as Word draws it, counted in
    document order from ``numbering.xml`` (levels, start values and overrides, legal numbering, numbers that a
    paragraph style brings)."""

    def __init__(self, document: Any) -> None:
        self.abstract: dict[str, dict[int, _Level]] = {}
        self.nums: dict[str, tuple[str, dict[int, _Level], dict[int, int]]] = {}
        self.style_numbers: dict[str, tuple[str | None, int | None]] = {}
        self.based_on: dict[str, str] = {}
        self.counters: dict[str, dict[int, int]] = {}
        self.restarted: set[tuple[str, int]] = set()
        try:
            root = document.part.numbering_part.element
        except (NotImplementedError, KeyError, AttributeError):
            root = None
        if root is not None:
            for abstract in root.iterchildren(f"{_W}abstractNum"):
                levels = {_int(lvl.get(f"{_W}ilvl"), 0): _Level(lvl) for lvl in abstract.iterchildren(f"{_W}lvl")}
                self.abstract[abstract.get(f"{_W}abstractNumId", "")] = levels
            for num in root.iterchildren(f"{_W}num"):
                ref = num.find(f"{_W}abstractNumId")
                overrides: dict[int, _Level] = {}
                starts: dict[int, int] = {}
                for override in num.iterchildren(f"{_W}lvlOverride"):
                    ilvl = _int(override.get(f"{_W}ilvl"), 0)
                    start = override.find(f"{_W}startOverride")
                    if start is not None:
                        starts[ilvl] = _int(start.get(f"{_W}val"), 1)
                    level = override.find(f"{_W}lvl")
                    if level is not None:
                        overrides[ilvl] = _Level(level)
                abstract_id = "" if ref is None else ref.get(f"{_W}val", "")
                self.nums[num.get(f"{_W}numId", "")] = (abstract_id, overrides, starts)
        styles = document.styles.element
        for style in styles.iterchildren(f"{_W}style"):
            style_id = style.get(f"{_W}styleId", "")
            based = style.find(f"{_W}basedOn")
            if based is not None:
                self.based_on[style_id] = based.get(f"{_W}val", "")
            num_pr = style.find(f"{_W}pPr/{_W}numPr")
            if num_pr is not None:
                self.style_numbers[style_id] = _num_pr(num_pr)

    def label(self, p: Any) -> str:
        """Returns the list number of paragraph `p` ("" when it has none) and counts it."""
        p_pr = p.find(f"{_W}pPr")
        num_id: str | None = None
        ilvl: int | None = None
        if p_pr is not None and (num_pr := p_pr.find(f"{_W}numPr")) is not None:
            num_id, ilvl = _num_pr(num_pr)
        style = p_pr.find(f"{_W}pStyle") if p_pr is not None else None
        style_id = style.get(f"{_W}val", "") if style is not None else ""
        if num_id is None:
            num_id, style_ilvl = self._style_number(style_id)
            ilvl = ilvl if ilvl is not None else style_ilvl
        if not num_id or num_id == "0" or num_id not in self.nums:
            return ""
        abstract_id, overrides, starts = self.nums[num_id]
        levels = {**self.abstract.get(abstract_id, {}), **overrides}
        if ilvl is None:  # a style's numbering names its level by the style the level points to
            ilvl = next((k for k, lvl in sorted(levels.items()) if lvl.style and lvl.style == style_id), 0)
        level = levels.get(ilvl)
        if level is None:
            return ""
        counters = self.counters.setdefault(abstract_id, {})
        if ilvl in starts and (num_id, ilvl) not in self.restarted:
            self.restarted.add((num_id, ilvl))
            counters[ilvl] = starts[ilvl] - 1
        counters[ilvl] = counters.get(ilvl, levels[ilvl].start - 1) + 1
        for deeper in [k for k in counters if k > ilvl]:
            del counters[deeper]
        if level.fmt == "bullet":
            return ""

        def reference(match: re.Match[str]) -> str:
            referenced = int(match.group(1)) - 1
            other = levels.get(referenced)
            start = other.start if other else 1
            value = counters.get(referenced, start)
            fmt = "decimal" if level.legal and referenced != ilvl else (other.fmt if other else "decimal")
            return _formatted(value, fmt)

        return _LEVEL_REFERENCE.sub(reference, level.text).strip()

    def _style_number(self, style_id: str) -> tuple[str | None, int | None]:
        seen: set[str] = set()
        while style_id and style_id not in seen:
            seen.add(style_id)
            if style_id in self.style_numbers:
                return self.style_numbers[style_id]
            style_id = self.based_on.get(style_id, "")
        return None, None


def _num_pr(num_pr: Any) -> tuple[str | None, int | None]:
    num_id = num_pr.find(f"{_W}numId")
    ilvl = num_pr.find(f"{_W}ilvl")
    return (
        None if num_id is None else num_id.get(f"{_W}val"),
        None if ilvl is None else _int(ilvl.get(f"{_W}val"), 0),
    )
