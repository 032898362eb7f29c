"""The display name of an uploaded file, one rule for the REST API and the workbench.

A browser or an API client sends any string as a file name. docpipe stores a PDF under the SHA-256 of its
bytes, never under this name, so the name only has to be safe to show and to log: the base name alone (POSIX
and Windows separators), no control or format characters (NUL, newlines, the right-to-left override U+202E,
zero-width characters), no markup characters, no leading dots, at most `MAX_NAME_CHARS` characters.
Imports nothing from docpipe.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath, PureWindowsPath

__all__ = ["DEFAULT_NAME", "MAX_NAME_CHARS", "clean_upload_name"]

DEFAULT_NAME = "document.pdf"
MAX_NAME_CHARS = 120
_MARKUP = re.compile(r'[<>"`]')


def clean_upload_name(raw: object) -> str:
    """Returns the name to show for an upload called `raw`; `DEFAULT_NAME` when nothing of it is left.

    >>> clean_upload_name("../../etc/passwd.pdf"), clean_upload_name("C:\\\\Users\\\\x\\\\deal.pdf")
    ('passwd.pdf', 'deal.pdf')
    >>> clean_upload_name('a"><script>.pdf'), clean_upload_name("\\u202efdp.exe"), clean_upload_name("...")
    ('ascript.pdf', 'fdp.exe', 'document.pdf')
    """
    name = PureWindowsPath(PurePosixPath(str(raw or "")).name).name
    # Category C: control (Cc), format (Cf: bidi overrides, zero-width), surrogate, private use, unassigned.
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _MARKUP.sub("", name).strip().lstrip(".").strip()
    return (name or DEFAULT_NAME)[:MAX_NAME_CHARS]
