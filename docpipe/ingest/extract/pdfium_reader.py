"""The pypdfium2 reader, run inside the extraction worker: opens the PDF with pdfium (the empty or the given
password), reports its encryption status, and gives each page's text (its character count is booked
before the text is copied out) and filled form-field values. pypdfium2 is imported only when a reader is opened.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from docpipe.ingest.extract.common import describe_error, field_value, malformed
from docpipe.ingest.extract.encryption import broken_encryption, encryption_problem, locked

if TYPE_CHECKING:
    from docpipe.ingest.extract.budget import TextBudget

logger = logging.getLogger(__name__)


class PdfiumReader:
    """A PDF opened with pypdfium2: its `status` (encrypted, needs_password, password_opens), and each page's
    text and form-field values through `page`. Raises the locked or malformed error on opening."""

    def __init__(self, data: bytes, password: str | None, name: str) -> None:
        import pypdfium2.raw as pdfium_c

        self.name = name
        self.raw = pdfium_c
        doc, self.status = self._open(data, password, name)
        if doc is None:
            raise locked(name, data, wrong_password=bool(password))
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
                logger.debug("form fields of %s not read: %s", name, describe_error(exc))

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
                    problem = encryption_problem(data) or "unsupported security handler"
                    raise broken_encryption(name, problem) from None
                raise malformed(name, "pypdfium2", describe_error(exc)) from None
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
                    raise malformed(name, "pypdfium2", describe_error(exc)) from None
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

    def page(self, index: int, budget: TextBudget) -> tuple[str, list[tuple[str, str]]]:
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
            c.FPDF_FORMFIELD_CHECKBOX,
            c.FPDF_FORMFIELD_RADIOBUTTON,
            c.FPDF_FORMFIELD_COMBOBOX,
            c.FPDF_FORMFIELD_LISTBOX,
            c.FPDF_FORMFIELD_TEXTFIELD,
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
                    value = field_value(self._wide(c.FPDFAnnot_GetFormFieldValue, annotation))
                    if value:
                        fields.append((self._wide(c.FPDFAnnot_GetFormFieldName, annotation) or "unnamed", value))
                finally:
                    c.FPDFPage_CloseAnnot(annotation)
        except Exception as exc:  # form values are a bonus; never lose the page's text over them
            logger.debug("form fields of page %s of %s not read: %s", index + 1, self.name, describe_error(exc))
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
