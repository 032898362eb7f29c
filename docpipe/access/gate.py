"""The gate on an encrypted PDF's stored text: it is handed out only to a caller who can open the PDF.

The store keeps, beside the text of a PDF that needed a password, a slow hash of the password that opened it
(`docpipe.ingest.build.password_check`). `AccessGate.check` lets a caller through when the document was not
encrypted, or when their password matches that hash or, failing that, opens the PDF itself (the PDF's other
password: user vs owner), asked of a sandboxed extraction worker. Proving a password starts a worker, so the
gate holds its own extraction slots: guesses cannot spawn processes without bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from docpipe.errors import PasswordRequiredError, WrongPasswordError
from docpipe.ingest.build import password_check
from docpipe.ingest.slots import ExtractionSlots

if TYPE_CHECKING:
    from docpipe.settings import ExtractionSettings
    from docpipe.types import Document

__all__ = ["AccessGate", "check_access"]


class AccessGate:
    """Checks a caller's password against a stored document (see the module docstring), proving a second
    password in at most `settings.max_concurrent` workers at a time."""

    def __init__(self, settings: ExtractionSettings) -> None:
        self.settings = settings
        self.slots = ExtractionSlots(settings.max_concurrent, wait_s=settings.queue_wait_s)

    def check(self, doc: Document, password: str | None, data: bytes | None, *, name: str) -> None:
        """Returns when the caller may read `doc`'s stored text; raises as `check_access` does. Errors name
        the document `name`, as this caller knows it."""
        check_access(doc, password, data, name=name, slots=self.slots, settings=self.settings)


def check_access(
    doc: Document,
    password: str | None,
    data: bytes | None,
    *,
    name: str,
    slots: ExtractionSlots,
    settings: ExtractionSettings,
) -> None:
    """Returns when the caller may read `doc`'s stored text: it was not encrypted, or `password` opens the PDF
    (the one stored, or the PDF's other password, asked of a sandboxed extraction worker holding one of `slots`);
    raises `PasswordRequiredError` or `WrongPasswordError` otherwise.

    The errors call the document `name`, the name this caller gave it, never `doc.name`: the store keeps one
    copy of the bytes under the name of whoever uploaded them first, perhaps in another matter, and naming it
    would tell a caller what another matter calls the file, and that it holds it."""
    check = doc.password_check
    if not check:
        return
    if password is None:
        raise PasswordRequiredError(
            f"{name} is encrypted: pass the password (--password on the command line, password= in Python)",
            path=name,
        )
    if password_check(doc.id, password) == check:
        return
    # The stored check covers the password used first; the PDF's other password (user vs owner) also opens
    # it. Asked of a sandboxed extraction worker (never parsed here); a check that cannot finish raises.
    if data:
        from docpipe.ingest.extract import encryption_status

        with slots.take(name):
            status = encryption_status(data, password, settings=settings, name=name)
        if status.password_opens:
            return
    raise WrongPasswordError(
        f"the password does not open {name}: check it (the user or the owner password both work)",
        path=name,
    )
