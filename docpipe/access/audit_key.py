"""The access log's secret: 32 random bytes in a private file, from which the keys that sign the log's lines,
sign its checkpoint and hash its questions are derived (HMAC-SHA256, one label per use, so no value made for
one use is valid for another).

The file holds the secret as 64 hex digits on one line, mode 600. By default it is
``<store>/access/audit.key``, beside the API keys and apart from the log (``<store>/audit/``); the setting
``audit_key_file`` (DOCPIPE_AUDIT_KEY_FILE) puts it elsewhere, e.g. on a mount the store's other writers
cannot reach. It is created on first use; a file other users can read is refused.

>>> import tempfile; path = Path(tempfile.mkdtemp()) / "audit.key"
>>> key = AuditKey.load_or_create(path); key == AuditKey.load(path), len(key.key_id), oct(path.stat().st_mode)
(True, 16, '0o100600')
>>> key.question("What is the governing law?") == key.question("What is the governing law?")
True
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from docpipe.access.secret_files import read_secret_file
from docpipe.errors import ConfigError, StoreError
from docpipe.storage.store import make_private_dir

__all__ = ["AuditKey"]

_SECRET_BYTES = 32
# Labels of the derived keys: changing one invalidates every value made with it, hence the version.
_LINE = b"docpipe access-log line v1"
_CHECKPOINT = b"docpipe access-log checkpoint v1"
_QUESTION = b"docpipe access-log question v1"
_KEY_ID = b"docpipe access-log key id v1"


def _derive(secret: bytes, label: bytes) -> bytes:
    return hmac.new(secret, label, hashlib.sha256).digest()


class AuditKey:
    """Returns MACs and question hashes under one access-log secret; equal when the secrets are."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) != _SECRET_BYTES:
            raise ConfigError(f"an audit key is {_SECRET_BYTES} bytes (64 hex digits), not {len(secret)}")
        self._line = _derive(secret, _LINE)
        self._checkpoint = _derive(secret, _CHECKPOINT)
        self._question = _derive(secret, _QUESTION)
        # Names the key in the log without revealing it: tells "signed with another key" from "forged".
        self.key_id = _derive(secret, _KEY_ID)[:8].hex()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AuditKey) and hmac.compare_digest(self._line, other._line)

    __hash__ = None  # type: ignore[assignment]

    def line_mac(self, body: bytes) -> str:
        """Returns the hex MAC of a log line's canonical form without its ``mac`` field."""
        return hmac.new(self._line, body, hashlib.sha256).hexdigest()

    def checkpoint_mac(self, body: bytes) -> str:
        """Returns the hex MAC of the checkpoint's canonical form without its ``mac`` field."""
        return hmac.new(self._checkpoint, body, hashlib.sha256).hexdigest()

    def question(self, question: str) -> str:
        """Returns the keyed hash of a question as asked (UTF-8, surrogates replaced): equal questions give
        equal hashes, and confirming a guess needs the key."""
        return hmac.new(self._question, question.encode("utf-8", "replace"), hashlib.sha256).hexdigest()

    # -- the file -----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> AuditKey:
        """Returns the key in `path`. ConfigError when it is missing, readable by others, or not a key."""
        text = read_secret_file(path, what="audit key").strip()
        try:
            secret = bytes.fromhex(text)
        except ValueError:
            secret = b""
        if len(secret) != _SECRET_BYTES:
            raise ConfigError(
                f"the audit key file {path} does not hold 64 hex digits: restore the key the log was signed "
                "with (see docs/access-log.md)"
            )
        return cls(secret)

    @classmethod
    def load_or_create(cls, path: Path) -> AuditKey:
        """Returns the key in `path`, creating a new random one (mode 600, its folder 700) when there is none.
        Processes that race to create it all end up with the one that won."""
        path = Path(path)
        if path.exists():
            return cls.load(path)
        try:
            make_private_dir(path.parent)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as exc:
            raise StoreError(
                f"cannot create the audit key {path} ({exc.strerror}): create its folder, or set "
                "DOCPIPE_AUDIT_KEY_FILE to a writable place",
                path=str(path),
            ) from exc
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(secrets.token_bytes(_SECRET_BYTES).hex() + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            # link() never replaces: a key another process made first wins, and nobody sees a half-written one.
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot create the audit key {path} ({exc.strerror})", path=str(path)) from exc
        finally:
            Path(tmp).unlink(missing_ok=True)
        return cls.load(path)
