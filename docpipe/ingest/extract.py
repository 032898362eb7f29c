"""PDF bytes in, numbered pages of text out: the extraction stage.

`extract_pages` runs the extractor (pypdf or pypdfium2) in a fresh worker process, so one pathological
file costs at most `ExtractionSettings.timeout_s` seconds and `memory_limit_mb` of address space, and a
crash inside pdfium's C++ cannot take the caller down. The worker runs `worker_nice` levels below its
caller, so a crafted upload that keeps it busy for the whole time bound leaves the CPU to interactive
questions, and it stops as soon as the text passes `max_page_chars` or `max_chars`, so a small PDF that
expands to megabytes of text is refused before that text crosses the pipe. `encryption_status` asks the
same kind of worker whether a PDF is encrypted and whether a password opens it: the untrusted bytes are
never parsed in the caller's process, and a check that cannot finish raises instead of answering "no".

The worker is a plain ``python -I -c`` child rather than a multiprocessing process. Like the "spawn"
start method it is exec'd straight after fork, which is safe in a parent holding torch/OpenMP threads;
unlike "spawn" and "forkserver" it does not re-import the caller's ``__main__`` (a script that calls
`extract_pages` needs no ``if __name__ == "__main__"`` guard, and a notebook with torch loaded pays
nothing for it). It imports only this module, `docpipe.types`, `docpipe.errors` and the chosen
backend. Requests and replies cross the pipes as plain pickled data; an error comes back as
(class name, message, context) and is raised here as the matching `DocpipeError` subclass.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe import errors
from docpipe.types import Page, PageStatus
from docpipe.errors import (
    ConfigError,
    DependencyError,
    DocpipeError,
    EmptyFileError,
    EncryptionCheckError,
    ExtractionError,
    ExtractionTimeoutError,
    InputError,
    MalformedPDFError,
    NotAPDFError,
    NoTextError,
    PasswordRequiredError,
    TooMuchTextError,
    WrongPasswordError,
)

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings

__all__ = ["EXTRACTORS", "EncryptionStatus", "Extraction", "encryption_status", "extract_document", "extract_pages"]

logger = logging.getLogger(__name__)

EXTRACTORS = ("pypdf", "pypdfium2")

# Readers (Acrobat included) accept a header anywhere in the first 1024 bytes; junk before it is common.
_HEADER_WINDOW = 1024
_FORM_FIELD_PREFIX = "[form field]"
_MAX_FORWARDED_RECORDS = 100
# The worker also arms its own alarm, so it dies even if the parent was killed before it could kill it.
_WORKER_ALARM_GRACE_S = 10

_KNOWN_FORMATS = (
    (b"PK\x03\x04", "a ZIP archive: a .docx, .xlsx or .odt?"),
    (b"\xd0\xcf\x11\xe0", "an old Office file: a .doc or .xls?"),
    (b"{\\rtf", "an RTF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"%!PS", "a PostScript file"),
)

# The child's first lines. It ignores Ctrl-C (the parent owns the worker's life and kills it), moves
# stdout to stderr so that a stray print, from Python or from C, cannot corrupt the reply, and takes the
# caller's sys.path from the request (-I drops the environment and the current directory). It registers
# a bare `docpipe` package so that importing this module skips docpipe/__init__.py, which loads the
# whole pipeline (pydantic and more) and would add its import time to every extraction.
_BOOTSTRAP = """\
import os, pickle, signal, sys, types
signal.signal(signal.SIGINT, signal.SIG_IGN)
reply_fd = os.dup(1)
os.dup2(2, 1)
request = pickle.load(sys.stdin.buffer)
sys.path[:] = request["sys_path"]
package = types.ModuleType("docpipe")
package.__path__ = [request["package_dir"]]
sys.modules["docpipe"] = package
from docpipe.ingest.extract import _worker_main
_worker_main(request, reply_fd)
"""


@dataclass(frozen=True)
class EncryptionStatus:
    """What opening a PDF showed about its encryption, as the extraction worker saw it.

    `encrypted`: the PDF has an encryption dictionary (a PDF with only an owner password has one, yet
    opens for anyone). `needs_password`: it does not open with the empty user password, so its text
    belongs only to callers who know a password. `password_opens`: the password that was given opens it,
    as the user or the owner password (None when none was given; False when the PDF has no password).

    >>> from pathlib import Path
    >>> status = encryption_status(Path("r6-both-passwords.pdf").read_bytes(), "bar")  # doctest: +SKIP
    >>> status.needs_password, status.password_opens  # doctest: +SKIP
    (True, True)
    """

    encrypted: bool
    needs_password: bool
    password_opens: bool | None = None


@dataclass(frozen=True)
class Extraction:
    """The pages of a PDF and what opening it showed about its encryption (see `extract_document`)."""

    pages: list[Page]
    encryption: EncryptionStatus


def extract_pages(
    data: bytes,
    *,
    password: str | None = None,
    settings: ExtractionSettings | None = None,
    name: str = "document",
) -> list[Page]:
    """Returns the pages of the PDF in `data`, numbered from 1, each with its text and status.

    A page whose extraction fails is kept with status ``ERROR`` and the reason in ``detail``; a page
    without text gets ``NO_TEXT``. Filled form-field values are appended to the text of the page that
    shows them, as ``[form field] Name: value`` lines. `name` (usually the file name) is used in
    messages. Raises an `InputError` for empty or non-PDF bytes, and an `ExtractionError` subclass for
    encrypted, malformed, text-less, too-slow or too-large documents; the message always says how to fix it.
    """
    return extract_document(data, password=password, settings=settings, name=name).pages


def extract_document(
    data: bytes,
    *,
    password: str | None = None,
    settings: ExtractionSettings | None = None,
    name: str = "document",
) -> Extraction:
    """Returns the pages of the PDF in `data` (as `extract_pages` does) with its `EncryptionStatus`.

    The status comes from the same worker and the same parse that read the text: whether the PDF needed
    the password that opened it (``encryption.needs_password``) is known without parsing it again.
    Raises as `extract_pages` does; `TooMuchTextError` when the text passes ``max_page_chars`` on one
    page or ``max_chars`` in all.
    """
    settings = _checked_settings(settings)
    data = _checked_bytes(data, name, "extract_document")
    request = _request(data, password, name, settings, op="extract")
    started = time.monotonic()
    reply = _run_worker(request, name=name, extractor=settings.extractor, timeout_s=settings.timeout_s)
    _replay_worker_log(reply.get("log", []), reply.get("dropped", 0), name)
    if "error" in reply:
        _raise_error(reply["error"])

    pages = [Page(number, text, PageStatus(status), detail) for number, text, status, detail in reply["pages"]]
    no_text = [page.number for page in pages if page.status is PageStatus.NO_TEXT]
    failed = [page for page in pages if page.status is PageStatus.ERROR]
    for page in failed:
        logger.warning("%s: %s", name, page.describe())
    logger.info(
        "extracted %s with %s: %s pages (%s without text, %s failed) in %.2f s",
        name, settings.extractor, len(pages), len(no_text), len(failed), time.monotonic() - started,
    )
    return Extraction(pages, EncryptionStatus(*reply["encryption"]))


def encryption_status(
    data: bytes,
    password: str | None = None,
    *,
    settings: ExtractionSettings | None = None,
    name: str = "document",
) -> EncryptionStatus:
    """Returns whether the PDF in `data` is encrypted, opens without a password, and opens with `password`.

    The PDF is parsed only inside an extraction worker (the configured extractor, with the same time
    bound, memory cap and priority as extraction), never in the caller. It fails closed: when the check
    cannot finish (the parser fails, the worker crashes, runs out of memory or time) it raises
    `EncryptionCheckError` (also for a broken encryption dictionary), never a status that would let a
    locked PDF's text out. A missing crypto package raises `DependencyError`, and bytes that are not a
    PDF an `InputError`. A caller holding text of the PDF must treat every exception as "locked".
    """
    settings = _checked_settings(settings)
    data = _checked_bytes(data, name, "encryption_status")
    request = _request(data, password, name, settings, op="encryption")
    try:
        reply = _run_worker(request, name=name, extractor=settings.extractor, timeout_s=settings.timeout_s)
        _replay_worker_log(reply.get("log", []), reply.get("dropped", 0), name)
        if "error" in reply:
            _raise_error(reply["error"])
    except (EncryptionCheckError, DependencyError):
        raise
    except ExtractionError as exc:  # timed out, died or out of memory: nothing was learned, nothing may be assumed
        raise _check_failed(name, settings.extractor, _check_reason(exc, settings)) from exc
    return EncryptionStatus(*reply["encryption"])


def _check_reason(exc: ExtractionError, settings: ExtractionSettings) -> str:
    """Returns a short reason for an encryption check the worker could not finish."""
    if isinstance(exc, ExtractionTimeoutError):
        return f"the check took longer than {settings.timeout_s:g} s"
    if "returncode" in exc.context:
        return (
            f"the worker ended without an answer (exit status {exc.context['returncode']}): out of memory "
            f"under the {settings.memory_limit_mb} MB cap, or a crash in {settings.extractor}"
        )
    return exc.message


# ---------------------------------------------------------------------------------------------------
# Parent side


def _checked_settings(settings: ExtractionSettings | None) -> ExtractionSettings:
    if settings is None:
        # Imported here: pydantic is heavy, and the worker imports this module too.
        from docpipe.settings import ExtractionSettings

        settings = ExtractionSettings()
    if settings.extractor not in EXTRACTORS:
        raise ConfigError(
            f"unknown extractor {settings.extractor!r}: choose one of {', '.join(EXTRACTORS)}",
            extractor=settings.extractor,
        )
    return settings


def _checked_bytes(data: Any, name: str, function: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{function} takes the PDF's bytes, not {type(data).__name__}: pass path.read_bytes()")
    data = bytes(data)
    _check_pdf_bytes(data, name)
    return data


def _request(
    data: bytes, password: str | None, name: str, settings: ExtractionSettings, *, op: str
) -> dict[str, Any]:
    return {
        "op": op,
        "sys_path": list(sys.path),
        "package_dir": os.path.dirname(os.path.abspath(__file__)),
        "data": data,
        "password": password,
        "name": name,
        "extractor": settings.extractor,
        "max_pages": settings.max_pages,
        "max_chars": settings.max_chars,
        "max_page_chars": settings.max_page_chars,
        "memory_limit_mb": settings.memory_limit_mb,
        "timeout_s": settings.timeout_s,
        "nice": settings.worker_nice,
    }


def _check_failed(name: str, extractor: str, reason: str) -> EncryptionCheckError:
    return EncryptionCheckError(
        f"could not check whether {name} is encrypted, so it is treated as locked ({reason.rstrip('.')}). "
        f"Try --extractor {_other(extractor)}, or upload a copy repaired and decrypted with "
        "`qpdf --decrypt --password=PASSWORD in.pdf out.pdf`",
        path=name, extractor=extractor, reason=reason,
    )


def _check_pdf_bytes(data: bytes, name: str) -> None:
    """Returns nothing; raises `EmptyFileError` or `NotAPDFError` for input no extractor should see."""
    if not data:
        raise EmptyFileError(f"{name} is empty (0 bytes): check that the file was written completely", path=name)
    if b"%PDF-" not in data[:_HEADER_WINDOW]:
        head = data[:16]
        kind = next((label for magic, label in _KNOWN_FORMATS if data.startswith(magic)), "")
        if not kind and data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
            kind = "an HTML page"
        described = f"{head!r}, {kind}" if kind else f"{head!r}"
        raise NotAPDFError(
            f"{name} is not a PDF (it starts with {described}): convert it to PDF first", path=name
        )


def _run_worker(request: dict[str, Any], *, name: str, extractor: str, timeout_s: float) -> dict[str, Any]:
    """Returns the worker's reply (a dict with "pages" or "error"), killing the worker at `timeout_s`."""
    if not sys.executable:
        raise ExtractionError(
            f"cannot extract {name}: sys.executable is not set, so no extraction worker can be started",
            path=name,
        )
    payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise ExtractionError(f"cannot start the extraction worker for {name}: {exc}", path=name) from exc
    logger.debug("extraction worker %s started for %s (%s)", proc.pid, name, extractor)
    try:
        out, err = proc.communicate(payload, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ExtractionTimeoutError(_timeout_message(name, extractor, timeout_s), path=name,
                                     extractor=extractor, timeout_s=timeout_s) from None
    except BaseException:
        # KeyboardInterrupt and friends: never leave a worker behind.
        proc.kill()
        proc.wait()
        raise
    elapsed = time.monotonic() - started
    stderr = err.decode("utf-8", "replace").strip()
    if stderr:
        logger.debug("extraction worker %s for %s wrote to stderr:\n%s", proc.pid, name, stderr[-4000:])
    if out:
        try:
            reply: dict[str, Any] = pickle.loads(out)
            logger.debug("extraction worker %s for %s answered in %.2f s", proc.pid, name, elapsed)
            return reply
        except Exception as exc:  # a reply cut short by a crash mid-write
            logger.debug("unreadable reply from extraction worker %s: %s", proc.pid, exc)
    raise _worker_died(name, extractor, proc.returncode, stderr, request["memory_limit_mb"])


def _timeout_message(name: str, extractor: str, timeout_s: float) -> str:
    fix = "use --extractor pypdfium2 (much faster) or " if extractor == "pypdf" else ""
    return (
        f"extracting {name} with {extractor} took longer than {timeout_s:g} s: {fix}"
        "raise DOCPIPE_EXTRACTION__TIMEOUT_S"
    )


def _worker_died(
    name: str, extractor: str, returncode: int | None, stderr: str, memory_limit_mb: int
) -> ExtractionError:
    """Returns the error for a worker that ended without a reply (killed by a signal or crashed)."""
    if returncode is not None and returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with code {returncode} without an answer"
    # faulthandler's first line ("Fatal Python error: Aborted") says more than the traceback under it.
    fatal = next((line.strip() for line in stderr.splitlines() if line.startswith("Fatal Python error")), "")
    return ExtractionError(
        f"the extraction worker for {name} {how}{f' ({fatal[:200]})' if fatal else ''}. It most likely ran out of "
        f"memory (limit {memory_limit_mb} MB: a decompression bomb?) or hit a bug in {extractor}: "
        f"try --extractor {_other(extractor)}, raise DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB for a genuinely "
        "large document, or repair it with `qpdf in.pdf out.pdf`",
        path=name,
        extractor=extractor,
        returncode=returncode,
        stderr=stderr[-4000:],
    )


def _raise_error(error: dict[str, Any]) -> None:
    """Returns nothing; raises the `DocpipeError` subclass the worker named, with its message and context."""
    cls = getattr(errors, error["type"], None) if error["type"] in errors.__all__ else None
    if not (isinstance(cls, type) and issubclass(cls, DocpipeError)):
        cls = ExtractionError
    raise cls(error["message"], **error["context"])


def _replay_worker_log(records: list[tuple[str, int, str]], dropped: int, name: str) -> None:
    """Returns nothing; re-logs the worker's records: ours as they were, the libraries' at DEBUG."""
    for record_name, level, message in records:
        if record_name == "docpipe" or record_name.startswith("docpipe."):
            logging.getLogger(record_name).log(level, "%s", message)
        else:
            logger.debug("%s: %s said: %s", name, record_name, message)
    if dropped:
        logger.debug("%s: %s more log records from the extraction worker were dropped", name, dropped)


def _other(extractor: str) -> str:
    return "pypdfium2" if extractor == "pypdf" else "pypdf"


# ---------------------------------------------------------------------------------------------------
# Worker side (runs in the child process)


class _Collector(logging.Handler):
    """Returns nothing; keeps the worker's log records so the parent can re-log them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, int, str]] = []
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) >= _MAX_FORWARDED_RECORDS:
            self.dropped += 1
            return
        try:
            self.records.append((record.name, record.levelno, record.getMessage()))
        except Exception:
            self.handleError(record)


def _worker_main(request: dict[str, Any], reply_fd: int) -> None:
    """Returns nothing; runs one extraction in the worker and writes the pickled reply to `reply_fd`."""
    import faulthandler

    faulthandler.enable()  # a crash in C code leaves a Python traceback in the stderr the parent logs
    nice = _lower_priority(request["nice"])
    if hasattr(signal, "alarm"):
        signal.alarm(int(request["timeout_s"]) + _WORKER_ALARM_GRACE_S)
    collector = _Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    root.setLevel(logging.WARNING)
    logging.getLogger("docpipe").setLevel(logging.DEBUG)
    logging.captureWarnings(True)
    # Freed on MemoryError so that there is room left to build and send the error reply.
    reserve = bytearray(4 << 20)
    name = request["name"]
    logger.debug("extraction worker %s for %s runs at nice %s", os.getpid(), name, nice)
    reply: dict[str, Any]
    try:
        # Before the cap: mapping the backend's shared libraries needs address space of its own.
        __import__("pypdf" if request["extractor"] == "pypdf" else "pypdfium2")
        _limit_memory(request["memory_limit_mb"])
        if request["op"] == "encryption":
            status = _encryption_status(request["data"], request["password"], name, request["extractor"])
            reply = {"encryption": status}
        else:
            pages, status = _extract(
                request["data"], password=request["password"], name=name, extractor=request["extractor"],
                max_pages=request["max_pages"], memory_limit_mb=request["memory_limit_mb"],
                budget=_TextBudget(name, request["extractor"], request["max_chars"], request["max_page_chars"]),
            )
            reply = {"pages": pages, "encryption": status}
    except DocpipeError as exc:
        reply = {"error": _error_as_data(exc)}
    except MemoryError:
        del reserve
        reply = {"error": _error_as_data(_out_of_memory(name, request["extractor"], request["memory_limit_mb"]))}
    except Exception as exc:
        logger.debug("unexpected error while extracting %s", name, exc_info=True)
        reply = {"error": _error_as_data(ExtractionError(
            f"extracting {name} with {request['extractor']} failed unexpectedly ({type(exc).__name__}: {exc}): "
            f"try --extractor {_other(request['extractor'])}",
            path=name, extractor=request["extractor"],
        ))}
    reply["log"] = collector.records
    reply["dropped"] = collector.dropped
    with os.fdopen(reply_fd, "wb") as out:
        pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)


def _lower_priority(increment: int) -> int | None:
    """Returns this process's nice value after lowering its CPU priority by `increment` (None if unknown)."""
    try:
        return os.nice(increment)
    except (AttributeError, OSError):  # not on Windows; an unprivileged process can always go lower elsewhere
        return None


def _limit_memory(memory_limit_mb: int) -> None:
    """Returns nothing; caps this process's address space, so a decompression bomb fails fast."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_limit_mb * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _error_as_data(exc: DocpipeError) -> dict[str, Any]:
    """Returns the error as plain data that can cross the process boundary."""
    simple = (str, int, float, bool, type(None))
    context = {key: value for key, value in exc.context.items() if isinstance(value, simple) and key != "message"}
    return {"type": type(exc).__name__, "message": exc.message, "context": context}


def _out_of_memory(name: str, extractor: str, memory_limit_mb: int) -> ExtractionError:
    return ExtractionError(
        f"{name} needs more memory than the extraction worker may use ({memory_limit_mb} MB): it may be a "
        "decompression bomb; if it is a genuinely large document, raise DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB",
        path=name, extractor=extractor, memory_limit_mb=memory_limit_mb,
    )


class _TextBudget:
    """Returns nothing; counts extracted characters and raises `TooMuchTextError` once a cap is passed.

    `spend` is called while a page's text is still being produced (by pypdf's text visitor, or with
    pdfium's character count before the text is copied out), so an oversized page is stopped early;
    `close_page` books the page's final text.
    """

    def __init__(self, name: str, extractor: str, max_chars: int, max_page_chars: int) -> None:
        self.name, self.extractor = name, extractor
        self.max_chars, self.max_page_chars = max_chars, max_page_chars
        self.total = 0
        self.page = 0
        self.number = 0

    def start_page(self, number: int) -> None:
        self.number, self.page = number, 0

    def spend(self, chars: int) -> None:
        self.page += chars
        self._check(self.page)

    def close_page(self, chars: int) -> None:
        self._check(chars)
        self.total += chars

    def _check(self, page_chars: int) -> None:
        if page_chars > self.max_page_chars:
            raise TooMuchTextError(
                f"page {self.number} of {self.name} holds more than {self.max_page_chars:,} characters of text "
                "(the densest contract pages hold about 6,500): it looks crafted to exhaust the server. If it is "
                "genuine, raise DOCPIPE_EXTRACTION__MAX_PAGE_CHARS",
                path=self.name, extractor=self.extractor, page=self.number, max_page_chars=self.max_page_chars,
            )
        if self.total + page_chars > self.max_chars:
            raise TooMuchTextError(
                f"the text of {self.name} exceeds {self.max_chars:,} characters (reached on page {self.number}): "
                "split the PDF, or raise DOCPIPE_EXTRACTION__MAX_CHARS",
                path=self.name, extractor=self.extractor, page=self.number, max_chars=self.max_chars,
            )


def _extract(
    data: bytes,
    *,
    password: str | None,
    name: str,
    extractor: str,
    max_pages: int,
    memory_limit_mb: int,
    budget: _TextBudget,
) -> tuple[list[tuple[int, str, str, str]], tuple[bool, bool, bool | None]]:
    """Returns ``(number, text, status, detail)`` for every page and the encryption status as a tuple, or
    raises the document-level error."""
    reader: _PypdfReader | _PdfiumReader
    reader = _PypdfReader(data, password, name) if extractor == "pypdf" else _PdfiumReader(data, password, name)
    count = reader.page_count()
    if count > max_pages:
        raise InputError(
            f"{name} has {count} pages, more than the limit of {max_pages}: split it, or raise "
            "DOCPIPE_EXTRACTION__MAX_PAGES",
            path=name, pages=count, max_pages=max_pages,
        )
    pages: list[tuple[int, str, str, str]] = []
    failures: list[tuple[int, BaseException]] = []
    seen_fields: set[str] = set()
    for index in range(count):
        number = index + 1
        budget.start_page(number)
        try:
            text, fields = reader.page(index, budget)
            text = _normalise(text)
        except TooMuchTextError:
            raise
        except Exception as exc:  # one bad page must not lose the others
            failures.append((number, exc))
            detail = f"out of memory (limit {memory_limit_mb} MB)" if isinstance(exc, MemoryError) else _reason(exc)
            pages.append((number, "", PageStatus.ERROR.value, detail))
            continue
        text = _with_form_fields(text, fields, seen_fields)
        budget.close_page(len(text))
        if text.strip():
            pages.append((number, text, PageStatus.OK.value, ""))
        else:
            pages.append((number, "", PageStatus.NO_TEXT.value, ""))
    reader.close()
    if not any(status == PageStatus.OK.value for _, _, status, _ in pages):
        raise _no_usable_page(name, extractor, count, failures, memory_limit_mb)
    return pages, reader.status


def _encryption_status(data: bytes, password: str | None, name: str, extractor: str) -> tuple[bool, bool, bool | None]:
    """Returns (encrypted, needs_password, password_opens) as the extractor sees them, or raises.

    Any failure to decide is an error (`EncryptionCheckError` unless a more specific one applies), never
    a guess: the caller holds the PDF's text and must not hand it out on a guess.
    """
    try:
        if extractor == "pypdf":
            return _PypdfReader.check(data, password, name)
        return _PdfiumReader.check(data, password, name)
    except (EncryptionCheckError, DependencyError):
        raise
    except DocpipeError as exc:
        raise _check_failed(name, extractor, str(exc.context.get("reason") or exc.message)) from None
    except Exception as exc:
        raise _check_failed(name, extractor, _reason(exc)) from None


def _no_usable_page(
    name: str, extractor: str, count: int, failures: list[tuple[int, BaseException]], memory_limit_mb: int
) -> DocpipeError:
    """Returns the error for a document where no page yielded text."""
    if count == 0:
        return _malformed(name, extractor, "it has no pages")
    if not failures:
        return NoTextError(
            f"no page of {name} has a text layer (scanned or image-only?): run OCR first, e.g. "
            "`ocrmypdf in.pdf out.pdf`",
            path=name, extractor=extractor, pages=count,
        )
    number, exc = failures[0]
    if isinstance(exc, MemoryError):
        return _out_of_memory(name, extractor, memory_limit_mb)
    if type(exc).__name__ == "DependencyError":
        return DependencyError(
            f"{extractor} needs a missing program or package to decode page {number} of {name} ({_reason(exc)}): "
            f"install it, or try --extractor {_other(extractor)}",
            path=name, extractor=extractor, page=number,
        )
    return _malformed(name, extractor, f"no page could be extracted (page {number}: {_reason(exc)})", page=number)


def _malformed(name: str, extractor: str, reason: str, **context: Any) -> MalformedPDFError:
    return MalformedPDFError(
        f"{name} could not be read: {reason}. Try --extractor {_other(extractor)}, or repair it with "
        "`qpdf in.pdf out.pdf`",
        path=name, extractor=extractor, reason=reason, **context,
    )


def _reason(exc: BaseException) -> str:
    """Returns a one-line reason for a library exception."""
    if isinstance(exc, RecursionError):
        return "its objects are nested too deeply"
    message = " ".join(str(exc).split()).rstrip(".")
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


_DROPPED_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def _normalise(text: str) -> str:
    """Returns `text` with uniform line ends and without control characters; nothing is reflowed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0b", "\n").replace("\x0c", "\n")
    text = _DROPPED_CONTROLS.sub("", text)
    # Lone surrogates (broken font maps) would make the text impossible to write as UTF-8 later.
    return _SURROGATES.sub("\ufffd", text)


def _with_form_fields(text: str, fields: list[tuple[str, str]], seen: set[str]) -> str:
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


def _field_value(value: str) -> str:
    """Returns the value worth reporting, or "" for an empty or unchecked field."""
    value = " ".join(value.split())
    return "" if value == "Off" else value


def _locked(name: str, data: bytes, *, wrong_password: bool) -> ExtractionError:
    """Returns the error for an encrypted document that the given (or empty) password does not open."""
    problem = _encryption_problem(data)
    if problem:
        return _broken_encryption(name, problem)
    if wrong_password:
        return WrongPasswordError(
            f"the password does not open {name}: check it (the user or the owner password both work)", path=name
        )
    return PasswordRequiredError(
        f"{name} is encrypted: pass the password (--password on the command line, password= in Python)", path=name
    )


def _broken_encryption(name: str, problem: str) -> MalformedPDFError:
    return MalformedPDFError(
        f"{name} cannot be decrypted: its encryption dictionary is broken ({problem}): re-export it from the "
        "program that made it, or try `qpdf --decrypt in.pdf out.pdf`",
        path=name, reason=f"broken encryption dictionary: {problem}",
    )


def _encryption_problem(data: bytes) -> str:
    """Returns what is wrong with the document's /Encrypt dictionary, or "" if nothing visible is."""
    try:
        import pypdf
        from pypdf.generic import DictionaryObject

        trailer = pypdf.PdfReader(io.BytesIO(data)).trailer
    except Exception:  # cannot look inside: let the caller report what it saw
        return ""
    try:
        encrypt = trailer.get("/Encrypt")
        encrypt = encrypt.get_object() if encrypt is not None else None
        if not isinstance(encrypt, DictionaryObject):
            return "" if encrypt is None else "/Encrypt is not a dictionary"
        handler = encrypt.get("/Filter")
        if handler != "/Standard":
            return f"it uses the {handler} security handler, which docpipe cannot open"
        revision = int(encrypt.get("/R", 0))
        if revision not in (2, 3, 4, 5, 6):
            return f"unknown revision /R {revision}"
        expected = 48 if revision >= 5 else 32
        for key in ("/O", "/U"):
            value: Any = encrypt.get(key)
            size = len(value.original_bytes) if hasattr(value, "original_bytes") else -1
            if size < expected:
                return f"{key} is {size} bytes, expected {expected}" if size >= 0 else f"{key} is missing"
    except Exception as exc:
        return _reason(exc)
    return ""


class _PypdfReader:
    """Returns nothing; opens a PDF with pypdf and yields each page's text and form-field values."""

    def __init__(self, data: bytes, password: str | None, name: str) -> None:
        self.name = name
        self.reader = self._open(data, name)
        self.status = self._status(self.reader, data, password, name)
        _, needs_password, password_opens = self.status
        if needs_password and not password_opens:
            raise _locked(name, data, wrong_password=bool(password))
        if password and password_opens is False and self.status[0]:
            logger.warning("the password does not open %s, but it opens without one: ignoring it", name)
        self.has_form = self._has_form()

    @classmethod
    def check(cls, data: bytes, password: str | None, name: str) -> tuple[bool, bool, bool | None]:
        """Returns (encrypted, needs_password, password_opens) without extracting anything."""
        return cls._status(cls._open(data, name), data, password, name)

    @staticmethod
    def _open(data: bytes, name: str) -> Any:
        import pypdf
        from pypdf.errors import DependencyError as PypdfDependencyError

        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            reader.is_encrypted  # noqa: B018 - reads the trailer, which is what fails on a broken file
        except PypdfDependencyError as exc:
            raise _needs_crypto(name, exc) from None
        except Exception as exc:
            problem = _encryption_problem(data) if b"/Encrypt" in data else ""
            if problem:
                raise _broken_encryption(name, problem) from None
            raise _malformed(name, "pypdf", _reason(exc)) from None
        return reader

    @staticmethod
    def _status(reader: Any, data: bytes, password: str | None, name: str) -> tuple[bool, bool, bool | None]:
        """Returns (encrypted, needs_password, password_opens), leaving `reader` decrypted when it can be."""
        from pypdf import PasswordType
        from pypdf.errors import DependencyError as PypdfDependencyError

        if not reader.is_encrypted:
            return False, False, False if password else None
        try:
            # A failed decrypt keeps the key of an earlier success, so the order does not matter.
            opens_empty = reader.decrypt("") is not PasswordType.NOT_DECRYPTED
            password_opens = reader.decrypt(password) is not PasswordType.NOT_DECRYPTED if password else None
        except PypdfDependencyError as exc:
            raise _needs_crypto(name, exc) from None
        except Exception as exc:
            raise _broken_encryption(name, _encryption_problem(data) or _reason(exc)) from None
        return True, not opens_empty, password_opens

    def _has_form(self) -> bool:
        try:
            root: Any = self.reader.trailer["/Root"].get_object()
            form: Any = root.get("/AcroForm")
            return form is not None and bool(form.get_object().get("/Fields"))
        except Exception:
            return False

    def page_count(self) -> int:
        try:
            return len(self.reader.pages)
        except Exception as exc:
            raise _malformed(self.name, "pypdf", _reason(exc)) from None

    def page(self, index: int, budget: _TextBudget) -> tuple[str, list[tuple[str, str]]]:
        page = self.reader.pages[index]
        # The visitor sees each piece of text as pypdf completes it, so an oversized page stops early.
        text = page.extract_text(visitor_text=lambda text, *_: budget.spend(len(text)))
        return text, self._fields(page, index) if self.has_form else []

    def _fields(self, page: Any, index: int) -> list[tuple[str, str]]:
        try:
            annotations = page.get("/Annots")
            annotations = annotations.get_object() if annotations is not None else []
            fields = []
            for annotation in annotations:
                widget = annotation.get_object()
                if widget.get("/Subtype") == "/Widget":
                    field = _pypdf_field(widget)
                    if field:
                        fields.append(field)
            return fields
        except Exception as exc:  # form values are a bonus; never lose the page's text over them
            logger.debug("form fields of page %s of %s not read: %s", index + 1, self.name, _reason(exc))
            return []

    def close(self) -> None:
        self.reader.close()


def _pypdf_field(widget: Any) -> tuple[str, str] | None:
    """Returns (fully qualified name, value) of the field a pypdf widget belongs to, or None if empty."""
    from pypdf.generic import ArrayObject, NameObject

    names: list[str] = []
    value: Any = None
    field_type: Any = None
    node, visited = widget, 0
    while node is not None and visited < 32:  # /Parent chains can loop in broken files
        visited += 1
        if "/T" in node:
            names.append(str(node["/T"]))
        if value is None and "/V" in node:
            value = node["/V"]
        if field_type is None and "/FT" in node:
            field_type = node["/FT"]
        parent = node.get("/Parent")
        node = parent.get_object() if parent is not None else None
    if field_type == "/Sig" or value is None:
        return None
    value = value.get_object()
    if isinstance(value, NameObject):
        text = str(value)[1:]
    elif isinstance(value, ArrayObject):
        text = ", ".join(str(item) for item in value if isinstance(item, str))
    elif isinstance(value, str):
        text = str(value)
    else:
        return None
    text = _field_value(text)
    return (".".join(reversed(names)) or "unnamed", text) if text else None


def _needs_crypto(name: str, exc: BaseException) -> DependencyError:
    return DependencyError(
        f"decrypting {name} with pypdf needs the cryptography package ({_reason(exc)}): pip install cryptography",
        path=name,
    )


class _PdfiumReader:
    """Returns nothing; opens a PDF with pypdfium2 and yields each page's text and form-field values."""

    def __init__(self, data: bytes, password: str | None, name: str) -> None:
        import pypdfium2.raw as pdfium_c

        self.name = name
        self.raw = pdfium_c
        doc, self.status = self._open(data, password, name)
        if doc is None:
            raise _locked(name, data, wrong_password=bool(password))
        self.doc = doc
        if password and self.status[2] is False and self.status[0]:
            logger.warning("the password does not open %s, but it opens without one: ignoring it", name)
        self.form = None
        # Forms must be set up before the first page is loaded, and only then are field values readable.
        if pdfium_c.FPDF_GetFormType(self.doc.raw) != pdfium_c.FORMTYPE_NONE:
            try:
                self.doc.init_forms()
                self.form = self.doc.formenv.raw if self.doc.formenv is not None else None
            except Exception as exc:
                logger.debug("form fields of %s not read: %s", name, _reason(exc))

    @classmethod
    def check(cls, data: bytes, password: str | None, name: str) -> tuple[bool, bool, bool | None]:
        """Returns (encrypted, needs_password, password_opens) without extracting anything."""
        doc, status = cls._open(data, password, name)
        if doc is not None:
            doc.close()
        return status

    @staticmethod
    def _open(data: bytes, password: str | None, name: str) -> tuple[Any, tuple[bool, bool, bool | None]]:
        """Returns the document opened with the empty or the given password (None if neither opens it) and
        (encrypted, needs_password, password_opens)."""
        import pypdfium2 as pdfium
        import pypdfium2.raw as pdfium_c

        doc = None
        try:
            doc = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if exc.err_code != pdfium_c.FPDF_ERR_PASSWORD:
                if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
                    problem = _encryption_problem(data) or "unsupported security handler"
                    raise _broken_encryption(name, problem) from None
                raise _malformed(name, "pypdfium2", _reason(exc)) from None
        if doc is not None and pdfium_c.FPDF_GetSecurityHandlerRevision(doc.raw) == -1:
            return doc, (False, False, False if password else None)
        opens_empty = doc is not None
        password_opens = None
        if password:
            try:
                # pdfium tries the password as the user password, then as the owner password.
                unlocked = pdfium.PdfDocument(data, password=password)
            except pdfium.PdfiumError as exc:
                if exc.err_code != pdfium_c.FPDF_ERR_PASSWORD:
                    raise _malformed(name, "pypdfium2", _reason(exc)) from None
                password_opens = False
            else:
                password_opens = True
                if doc is None:
                    doc = unlocked
                else:
                    unlocked.close()
        return doc, (True, not opens_empty, password_opens)

    def page_count(self) -> int:
        return len(self.doc)

    def page(self, index: int, budget: _TextBudget) -> tuple[str, list[tuple[str, str]]]:
        page = self.doc[index]
        try:
            textpage = page.get_textpage()
            try:
                budget.spend(textpage.count_chars())  # before the text is copied out of pdfium
                # pdfium reports some hyphens (at what it takes for line breaks) as U+FFFE.
                text = textpage.get_text_range().replace("\ufffe", "-")
            finally:
                textpage.close()
            return text, self._fields(page, index) if self.form is not None else []
        finally:
            page.close()

    def _fields(self, page: Any, index: int) -> list[tuple[str, str]]:
        c = self.raw
        wanted = {
            c.FPDF_FORMFIELD_CHECKBOX, c.FPDF_FORMFIELD_RADIOBUTTON, c.FPDF_FORMFIELD_COMBOBOX,
            c.FPDF_FORMFIELD_LISTBOX, c.FPDF_FORMFIELD_TEXTFIELD,
        }
        fields = []
        try:
            for number in range(c.FPDFPage_GetAnnotCount(page.raw)):
                annotation = c.FPDFPage_GetAnnot(page.raw, number)
                if not annotation:
                    continue
                try:
                    if c.FPDFAnnot_GetSubtype(annotation) != c.FPDF_ANNOT_WIDGET:
                        continue
                    if c.FPDFAnnot_GetFormFieldType(self.form, annotation) not in wanted:
                        continue
                    value = _field_value(self._wide(c.FPDFAnnot_GetFormFieldValue, annotation))
                    if value:
                        fields.append((self._wide(c.FPDFAnnot_GetFormFieldName, annotation) or "unnamed", value))
                finally:
                    c.FPDFPage_CloseAnnot(annotation)
        except Exception as exc:  # form values are a bonus; never lose the page's text over them
            logger.debug("form fields of page %s of %s not read: %s", index + 1, self.name, _reason(exc))
        return fields

    def _wide(self, function: Any, annotation: Any) -> str:
        """Returns the UTF-16 string a pdfium ``(form, annot, buffer, length)`` getter writes."""
        import ctypes

        size = function(self.form, annotation, None, 0)
        if size <= 2:
            return ""
        buffer = ctypes.create_string_buffer(size)
        function(self.form, annotation, ctypes.cast(buffer, ctypes.POINTER(self.raw.FPDF_WCHAR)), size)
        return buffer.raw[: size - 2].decode("utf-16-le", errors="replace")

    def close(self) -> None:
        self.doc.close()
