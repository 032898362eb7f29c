"""The pypdf reader, run inside the extraction worker: opens the PDF (decrypting it with the empty or the given
password), reports its encryption status, and gives each page's text and filled form-field values. pypdf
is imported only when a reader is opened.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING, Any

from docpipe.errors import DependencyError
from docpipe.ingest.extract.common import describe_error, field_value, malformed
from docpipe.ingest.extract.encryption import broken_encryption, encryption_problem, locked

if TYPE_CHECKING:
    from docpipe.ingest.extract.budget import TextBudget

logger = logging.getLogger(__name__)


class PypdfReader:
    """A PDF opened with pypdf: its `status` (encrypted, needs_password, password_opens), and each page's
    text and form-field values through `page`. Raises the locked or malformed error on opening."""

    def __init__(self, data: bytes, password: str | None, name: str) -> None:
        self.name = name
        self.reader = self._open(data, name)
        self.status = self._status(self.reader, data, password, name)
        _, needs_password, password_opens = self.status
        if needs_password and not password_opens:
            raise locked(name, data, wrong_password=bool(password))
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
            raise needs_crypto(name, exc) from None
        except Exception as exc:
            problem = encryption_problem(data) if b"/Encrypt" in data else ""
            if problem:
                raise broken_encryption(name, problem) from None
            raise malformed(name, "pypdf", describe_error(exc)) from None
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
            raise needs_crypto(name, exc) from None
        except Exception as exc:
            raise broken_encryption(name, encryption_problem(data) or describe_error(exc)) from None
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
            raise malformed(self.name, "pypdf", describe_error(exc)) from None

    def page(self, index: int, budget: TextBudget) -> tuple[str, list[tuple[str, str]]]:
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
                    field = pypdf_field(widget)
                    if field:
                        fields.append(field)
            return fields
        except Exception as exc:  # form values are a bonus; never lose the page's text over them
            logger.debug("form fields of page %s of %s not read: %s", index + 1, self.name, describe_error(exc))
            return []

    def close(self) -> None:
        self.reader.close()


def pypdf_field(widget: Any) -> tuple[str, str] | None:
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
    text = field_value(text)
    return (".".join(reversed(names)) or "unnamed", text) if text else None


def needs_crypto(name: str, exc: BaseException) -> DependencyError:
    return DependencyError(
        f"decrypting {name} with pypdf needs the cryptography package ({describe_error(exc)}): pip install cryptography",
        path=name,
    )
