"""The store key for encryption at rest: read from the settings (``store_key_file``, a private file, or
``store_key``, DOCPIPE_STORE_KEY) and turned into the `Sealer` the store and the other writers of contract text
use; and a new key file made safely. The key is never logged or put in a message.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from docpipe.access.secret_files import read_secret_file
from docpipe.errors import ConfigError, StoreKeyError
from docpipe.storage.sealing import Sealer, new_key_text, parse_key

if TYPE_CHECKING:
    from docpipe.settings import Settings

__all__ = ["store_sealer", "write_store_key"]

logger = logging.getLogger(__name__)


def store_sealer(settings: Settings) -> Sealer | None:
    """Returns the sealer of the store key the settings name, or None when they name none (no encryption at
    rest). ConfigError when both the key and a key file are set, or the file is missing or readable by other
    users; StoreKeyError when what it holds is not a key."""
    secret = settings.store_key.get_secret_value() if settings.store_key is not None else None
    path = settings.store_key_file
    if secret and path is not None:
        raise ConfigError(
            "both a store key (DOCPIPE_STORE_KEY) and a store key file (DOCPIPE_STORE_KEY_FILE) are set: keep one"
        )
    if path is not None:
        secret = read_secret_file(Path(path).expanduser(), what="store key")
    if not secret:
        return None
    sealer = Sealer(parse_key(secret))
    logger.debug("store encrypted at rest with the key %s", sealer.key_id.hex())
    return sealer


def write_store_key(path: str | os.PathLike[str]) -> str:
    """Writes a new random store key to `path` (created mode 600; an existing file is never overwritten: losing
    a key loses the data it sealed) and returns its key id.

    >>> import tempfile; path = Path(tempfile.mkdtemp()) / "store.key"
    >>> len(write_store_key(path)), oct(path.stat().st_mode & 0o777)
    (16, '0o600')
    """
    path = Path(path).expanduser()
    text = new_key_text()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise StoreKeyError(
            f"{path} exists: a store key is never overwritten (the data it sealed would be lost); "
            "choose another file name"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot create the store key file {path} ({exc.strerror}): check the folder") from exc
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        os.fchmod(handle.fileno(), 0o600)  # O_CREAT's mode passes through the umask; make it exactly 600
        handle.write(text + "\n")
    return Sealer(bytes.fromhex(text)).key_id.hex()
