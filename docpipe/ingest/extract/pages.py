"""Inside the extraction worker: reads every page of a document with the chosen reader into plain
``(number, text, status, detail)`` tuples (one failed page never loses the others), normalises line ends and
control characters, appends filled form-field values, and decides the document-level error when no page
gives text. Also answers the encryption check with the same readers.
"""

from __future__ import annotations

import re

from docpipe.errors import (
    DependencyError,
    DocpipeError,
    EncryptionCheckError,
    InputError,
    NoTextError,
    TooMuchTextError,
)
from docpipe.ingest.extract.budget import TextBudget
from docpipe.ingest.extract.common import describe_error, malformed, other_extractor, out_of_memory
from docpipe.ingest.extract.encryption import check_failed
from docpipe.ingest.extract.pdfium_reader import PdfiumReader
from docpipe.ingest.extract.pypdf_reader import PypdfReader
from docpipe.types import PageStatus

_FORM_FIELD_PREFIX = "[form field]"

_DROPPED_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")

_SURROGATES = re.compile(r"[\ud800-\udfff]")


def read_pages(
    data: bytes,
    *,
    password: str | None,
    name: str,
    extractor: str,
    max_pages: int,
    memory_limit_mb: int,
    budget: TextBudget,
) -> tuple[list[tuple[int, str, str, str]], tuple[bool, bool, bool | None]]:
    """Returns ``(number, text, status, detail)`` for every page and the encryption status as a tuple, or
    raises the document-level error."""
    reader: PypdfReader | PdfiumReader
    reader = PypdfReader(data, password, name) if extractor == "pypdf" else PdfiumReader(data, password, name)
    count = reader.page_count()
    if count > max_pages:
        raise InputError(
            f"{name} has {count} pages, more than the limit of {max_pages}: split it, or raise "
            "DOCPIPE_EXTRACTION__MAX_PAGES",
            path=name,
            pages=count,
            max_pages=max_pages,
        )
    pages: list[tuple[int, str, str, str]] = []
    failures: list[tuple[int, BaseException]] = []
    seen_fields: set[str] = set()
    for index in range(count):
        number = index + 1
        budget.start_page(number)
        try:
            text, fields = reader.page(index, budget)
            text = normalise_text(text)
        except TooMuchTextError:
            raise
        except Exception as exc:  # one bad page must not lose the others
            failures.append((number, exc))
            detail = (
                f"out of memory (limit {memory_limit_mb} MB)" if isinstance(exc, MemoryError) else describe_error(exc)
            )
            pages.append((number, "", PageStatus.ERROR.value, detail))
            continue
        text = with_form_fields(text, fields, seen_fields)
        budget.close_page(len(text))
        if text.strip():
            pages.append((number, text, PageStatus.OK.value, ""))
        else:
            pages.append((number, "", PageStatus.NO_TEXT.value, ""))
    reader.close()
    if not any(status == PageStatus.OK.value for _, _, status, _ in pages):
        raise no_usable_page(name, extractor, count, failures, memory_limit_mb)
    return pages, reader.status


def read_encryption(data: bytes, password: str | None, name: str, extractor: str) -> tuple[bool, bool, bool | None]:
    """Returns (encrypted, needs_password, password_opens) as the extractor sees them, or raises.

    Any failure to decide is an error (`EncryptionCheckError` unless a more specific one applies), never
    a guess: the caller holds the PDF's text and must not hand it out on a guess.
    """
    try:
        if extractor == "pypdf":
            return PypdfReader.check(data, password, name)
        return PdfiumReader.check(data, password, name)
    except (EncryptionCheckError, DependencyError):
        raise
    except DocpipeError as exc:
        raise check_failed(name, extractor, str(exc.context.get("reason") or exc.message)) from None
    except Exception as exc:
        raise check_failed(name, extractor, describe_error(exc)) from None


def no_usable_page(
    name: str, extractor: str, count: int, failures: list[tuple[int, BaseException]], memory_limit_mb: int
) -> DocpipeError:
    """Returns the error for a document where no page yielded text."""
    if count == 0:
        return malformed(name, extractor, "it has no pages")
    if not failures:
        return NoTextError(
            f"no page of {name} has a text layer (scanned or image-only?): run OCR first, e.g. "
            "`ocrmypdf in.pdf out.pdf`",
            path=name,
            extractor=extractor,
            pages=count,
        )
    number, exc = failures[0]
    if isinstance(exc, MemoryError):
        return out_of_memory(name, extractor, memory_limit_mb)
    if type(exc).__name__ == "DependencyError":
        return DependencyError(
            f"{extractor} needs a missing program or package to decode page {number} of {name} ({describe_error(exc)}): "
            f"install it, or try --extractor {other_extractor(extractor)}",
            path=name,
            extractor=extractor,
            page=number,
        )
    return malformed(name, extractor, f"no page could be extracted (page {number}: {describe_error(exc)})", page=number)


def normalise_text(text: str) -> str:
    """Returns `text` with uniform line ends and without control characters; nothing is reflowed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0b", "\n").replace("\x0c", "\n")
    text = _DROPPED_CONTROLS.sub("", text)
    # Lone surrogates (broken font maps) would make the text impossible to write as UTF-8 later.
    return _SURROGATES.sub("\ufffd", text)


def with_form_fields(text: str, fields: list[tuple[str, str]], seen: set[str]) -> str:
    """Returns `text` with a ``[form field] name: value`` line for each field value it does not show yet."""
    lines = []
    for field_name, value in fields:
        if field_name in seen:  # radio buttons: one field, several widgets
            continue
        seen.add(field_name)
        if value not in text:
            lines.append(f"{_FORM_FIELD_PREFIX} {field_name}: {value}")
    if not lines:
        return text
    separator = "" if not text or text.endswith("\n") else "\n"
    return text + separator + "\n".join(lines)
