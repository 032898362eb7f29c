"""Reading a Word (.docx) file in the extraction worker: `read_docx` turns the bytes into numbered paragraphs
(see `docpipe.ingest.extract.docx` for what a Word file's "pages" are).

`read_docx` checks the ZIP before reading any of it (entry count, total uncompressed size, compression ratio:
a zip bomb is refused from its directory) and refuses XML parts that declare a DTD (Word never writes one:
billion laughs and external entities stop there, and python-docx parses with ``resolve_entities=False``
anyway). Relationships with ``TargetMode="External"`` are never followed (python-docx records them as
strings), so a Word file cannot make docpipe fetch anything.

python-docx opens the package (relationships, styles, numbering part); the paragraphs, tables and list
numbers are read from its XML here, because python-docx does not render list numbers and docx2python renders
its own ("1)", "a)") instead of the document's ("1.1", "(a)"). Imports only docpipe.errors, docpipe.types and,
when reading, python-docx.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from docpipe.errors import EncryptedWordFileError, ExtractionError, MalformedPDFError, NoTextError, TooMuchTextError
from docpipe.types import PageStatus

__all__ = ["MAIN_PART", "OLE_MAGIC", "READER", "encrypted", "is_encrypted", "read_docx"]

#: The reader named in messages and stored as a Word document's extractor.
READER = "python-docx"

#: The first bytes of an OLE compound file: an old Office file, or an encrypted new one.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# An encrypted Office file is an OLE compound file with these streams (MS-OFFCRYPTO); names are UTF-16LE.
_ENCRYPTED_STREAMS = ("EncryptedPackage".encode("utf-16-le"), "EncryptionInfo".encode("utf-16-le"))
#: The part every Word package holds: the document body.
MAIN_PART = "word/document.xml"

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


def is_encrypted(data: bytes) -> bool:
    """Whether `data` is an encrypted (password-protected) Office file, told by its OLE streams."""
    return data.startswith(OLE_MAGIC) and all(stream in data for stream in _ENCRYPTED_STREAMS)


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


def read_docx(data: bytes, *, name: str, max_chars: int, max_page_chars: int) -> list[tuple[int, str, str, str]]:
    """Returns ``(number, text, "ok", "")`` for every non-empty paragraph and table row of the Word file, in
    document order, or raises the document-level error. Runs in the extraction worker."""
    if is_encrypted(data):
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
    if MAIN_PART not in names:
        raise _malformed(name, f"it has no {MAIN_PART} (not a Word document, or a damaged one)")
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
