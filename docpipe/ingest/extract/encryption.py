"""Encryption as the extraction worker sees it: the `EncryptionStatus` it reports, and the errors for a PDF the
given password does not open, one whose encryption dictionary is broken, and a check that could not finish.
The check itself runs in the worker (`docpipe.ingest.extract.pages.read_encryption`); the caller never parses
the PDF. Imports only docpipe.errors and, in the worker, pypdf.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe.errors import (
    EncryptionCheckError,
    ExtractionError,
    ExtractionTimeoutError,
    MalformedPDFError,
    PasswordRequiredError,
    WrongPasswordError,
)
from docpipe.ingest.extract.common import describe_error, other_extractor

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings


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


def locked(name: str, data: bytes, *, wrong_password: bool) -> ExtractionError:
    """Returns the error for an encrypted document that the given (or empty) password does not open."""
    problem = encryption_problem(data)
    if problem:
        return broken_encryption(name, problem)
    if wrong_password:
        return WrongPasswordError(
            f"the password does not open {name}: check it (the user or the owner password both work)", path=name
        )
    return PasswordRequiredError(
        f"{name} is encrypted: pass the password (--password on the command line, password= in Python)", path=name
    )


def broken_encryption(name: str, problem: str) -> MalformedPDFError:
    return MalformedPDFError(
        f"{name} cannot be decrypted: its encryption dictionary is broken ({problem}): re-export it from the "
        "program that made it, or try `qpdf --decrypt in.pdf out.pdf`",
        path=name,
        reason=f"broken encryption dictionary: {problem}",
    )


def encryption_problem(data: bytes) -> str:
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
        return describe_error(exc)
    return ""


def check_failed(name: str, extractor: str, reason: str) -> EncryptionCheckError:
    return EncryptionCheckError(
        f"could not check whether {name} is encrypted, so it is treated as locked ({reason.rstrip('.')}). "
        f"Try --extractor {other_extractor(extractor)}, or upload a copy repaired and decrypted with "
        "`qpdf --decrypt --password=PASSWORD in.pdf out.pdf`",
        path=name,
        extractor=extractor,
        reason=reason,
    )


def check_reason(exc: ExtractionError, settings: ExtractionSettings) -> str:
    """Returns a short reason for an encryption check the worker could not finish."""
    if isinstance(exc, ExtractionTimeoutError):
        return f"the check took longer than {settings.timeout_s:g} s"
    if "returncode" in exc.context:
        return (
            f"the worker ended without an answer (exit status {exc.context['returncode']}): out of memory "
            f"under the {settings.memory_limit_mb} MB cap, or a crash in {settings.extractor}"
        )
    return exc.message
