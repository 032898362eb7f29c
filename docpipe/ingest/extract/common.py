"""Small helpers both sides of the extraction worker share: one-line reasons for library exceptions, the
other extractor to suggest, and the errors for a malformed document or one that needs more memory than the
worker may use. Imports only docpipe.errors.
"""

from __future__ import annotations

from typing import Any

from docpipe.errors import ExtractionError, MalformedPDFError


def other_extractor(extractor: str) -> str:
    return "pypdfium2" if extractor == "pypdf" else "pypdf"


def describe_error(exc: BaseException) -> str:
    """Returns a one-line reason for a library exception."""
    if isinstance(exc, RecursionError):
        return "its objects are nested too deeply"
    message = " ".join(str(exc).split()).rstrip(".")
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def malformed(name: str, extractor: str, reason: str, **context: Any) -> MalformedPDFError:
    return MalformedPDFError(
        f"{name} could not be read: {reason}. Try --extractor {other_extractor(extractor)}, or repair it with "
        "`qpdf in.pdf out.pdf`",
        path=name,
        extractor=extractor,
        reason=reason,
        **context,
    )


def out_of_memory(name: str, extractor: str, memory_limit_mb: int) -> ExtractionError:
    return ExtractionError(
        f"{name} needs more memory than the extraction worker may use ({memory_limit_mb} MB): it may be a "
        "decompression bomb; if it is a genuinely large document, raise DOCPIPE_EXTRACTION__MEMORY_LIMIT_MB",
        path=name,
        extractor=extractor,
        memory_limit_mb=memory_limit_mb,
    )


def field_value(value: str) -> str:
    """Returns the value worth reporting, or "" for an empty or unchecked field."""
    value = " ".join(value.split())
    return "" if value == "Off" else value


def limit_memory(memory_limit_mb: int) -> None:
    """Caps this process's address space, so a decompression bomb fails fast."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_limit_mb * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
