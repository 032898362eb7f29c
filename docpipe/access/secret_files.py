"""Secrets read from private files: the server's token and workbench login, the CLI's PDF password. A file
other users can read is refused, since a secret there is no secret. Imports only docpipe.errors, so the CLI
can use it without the server's packages."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from docpipe.errors import ConfigError

__all__ = ["read_secret_file"]


def read_secret_file(path: str | os.PathLike[str], *, what: str = "secret") -> str:
    """Returns the secret in `path` (one line; the trailing newline dropped). ConfigError when the file is
    missing, empty, or readable by other users than its owner (a secret there is no secret).

    >>> import tempfile; folder = Path(tempfile.mkdtemp()); (folder / "t").write_text("s3cret\\n")
    7
    >>> (folder / "t").chmod(0o600); read_secret_file(folder / "t")
    's3cret'
    """
    path = Path(path)
    try:
        info = path.stat()
        data = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"the {what} file {path} does not exist: create it (mode 600) or fix the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the {what} file {path} ({exc}): check the path and its permissions") from exc
    if os.name == "posix" and stat.S_IMODE(info.st_mode) & 0o077:
        raise ConfigError(
            f"the {what} file {path} can be read by other users (mode {stat.S_IMODE(info.st_mode):o}): "
            f"run chmod 600 {path}"
        )
    secret = data.rstrip("\r\n")
    if not secret.strip() or "\n" in secret:
        raise ConfigError(f"the {what} file {path} must hold the {what} on one line")
    return secret
