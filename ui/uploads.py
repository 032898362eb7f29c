"""Reading the files Gradio's upload route stored, and nothing else: a path from an API call is never trusted.
Then deleting Gradio's copy once the document is in docpipe's store (or refused for good).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from docpipe import DocpipeError

__all__ = ["UploadRefused", "UploadTooLarge", "read_upload", "remove_folder", "remove_upload"]


class UploadRefused(DocpipeError):
    """A file path given to the workbench that is not a file this app's upload route stored."""


class UploadTooLarge(UploadRefused):
    """An upload over the size limit: refused before it is read."""


def read_upload(path: str, *, uploaded: set[str] | frozenset[str], upload_root: str | Path, max_bytes: int) -> bytes:
    """Returns the bytes of an upload, at most `max_bytes`; raises `UploadRefused` for anything but a regular
    file that Gradio's upload route stored (`uploaded`, the paths it returned) inside `upload_root`.

    A path from an API call is never trusted: with Gradio's own check off (``mount_gradio_app`` never marks the
    app launched), it names any file on the server. Checked before opening: listed as uploaded, inside the
    upload folder once symlinks are resolved, not a symlink, a regular file within the size limit; then opened
    without following links or blocking (a FIFO or device put in its place is refused, never read).
    """
    path = os.fspath(path)
    if path not in uploaded:
        raise UploadRefused("this file was not uploaded through this page: choose it with the file picker")
    root = os.path.realpath(upload_root)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root or real == root:
        raise UploadRefused("this file is not in the upload folder: choose it with the file picker")
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        raise UploadRefused(
            "the upload is no longer on the server (uploads are removed once ingested, and after an hour): "
            "choose the file again and click Ingest"
        ) from None
    if not stat.S_ISREG(before.st_mode):
        raise UploadRefused("this is not a regular file: choose a PDF file with the file picker")
    if before.st_size > max_bytes:
        raise UploadTooLarge(
            f"the file is {before.st_size / 1048576:.1f} MB, over the upload limit of {max_bytes / 1048576:.3g} MB: "
            "split it or ask the administrator to raise --max-upload-mb"
        )
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        # The same file that was checked, not one swapped in since.
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise UploadRefused("the upload changed while it was being read: upload it again")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UploadTooLarge(f"the file is over the upload limit of {max_bytes / 1048576:.3g} MB")
    return data


def remove_upload(path: str, *, upload_root: str | Path) -> None:
    """Deletes an upload Gradio stored (after `read_upload` accepted it), and its folder when that is empty;
    a path outside the upload folder is left alone, whoever names it."""
    parent = os.path.dirname(os.path.abspath(path))
    root = os.path.realpath(upload_root)
    if os.path.commonpath([root, os.path.realpath(parent)]) != root:
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    if os.path.realpath(parent) != root and os.path.commonpath([root, os.path.realpath(parent)]) == root:
        with contextlib.suppress(OSError):  # not empty: another upload with the same content is in it
            os.rmdir(parent)


def remove_folder(folder: str | None) -> None:
    """Deletes a session's report folder; Gradio calls it when the session ends."""
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
