"""The text budget of one extraction: counts characters while pages are read in the worker and stops the
document with `TooMuchTextError` as soon as one page passes ``max_page_chars`` or the whole passes ``max_chars``,
so a small PDF that expands to megabytes of text is refused before that text crosses the pipe.
"""

from __future__ import annotations

from docpipe.errors import TooMuchTextError


class TextBudget:
    """Counts extracted characters and raises `TooMuchTextError` once a cap is passed.

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
                path=self.name,
                extractor=self.extractor,
                page=self.number,
                max_page_chars=self.max_page_chars,
            )
        if self.total + page_chars > self.max_chars:
            raise TooMuchTextError(
                f"the text of {self.name} exceeds {self.max_chars:,} characters (reached on page {self.number}): "
                "split the PDF, or raise DOCPIPE_EXTRACTION__MAX_CHARS",
                path=self.name,
                extractor=self.extractor,
                page=self.number,
                max_chars=self.max_chars,
            )
