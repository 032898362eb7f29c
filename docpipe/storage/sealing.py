"""Encryption at rest for the store: a `Sealer` seals bytes with AES-256-GCM under the store key, and opens
them again, bound to the place they live (a sealed file copied to another name does not open there).

A sealed blob is::

    magic (7 bytes, b"\\x00DPSEAL") | version (1) | key id (8) | nonce (12) | ciphertext | GCM tag (16)

The magic starts with a NUL byte, which no PDF, JSON, FAISS or NumPy file docpipe writes starts with, so a reader
tells sealed from plain files without a key. The key id is an HMAC of a fixed label under the key: it names the
key that sealed a file (a wrong key is reported as such, not as damage) and says nothing about the key itself.
The associated data is the header and the blob's place (``docs/<doc id>/<file>``), so the header cannot be
changed and a blob cannot be moved to another document or file name unnoticed. The nonce is random per write
(96 bits: a key can seal far more files than a store ever holds before a repeat is a concern).

`open_blob` is what every reader calls: a plain blob comes back as it is (a store made before the key was set
stays readable), a sealed one is opened, and a sealed one without the key, or under another key, raises
`StoreKeyError` saying how to fix it, so callers never mistake it for damage and rebuild over it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from typing import TYPE_CHECKING

from docpipe.errors import SealedDataError, StoreKeyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["KEY_BYTES", "Sealer", "is_sealed", "new_key_text", "open_blob", "parse_key", "seal_blob"]

MAGIC = b"\x00DPSEAL"
VERSION = 1
KEY_BYTES = 32
_KEY_ID_BYTES = 8
_NONCE_BYTES = 12
_HEADER = len(MAGIC) + 1 + _KEY_ID_BYTES
_TAG_BYTES = 16
_KEY_ID_LABEL = b"docpipe store key id v1"

FIX = (
    "set DOCPIPE_STORE_KEY_FILE to the key file that sealed the store (a file of mode 600), or DOCPIPE_STORE_KEY "
    "to that key"
)


def parse_key(text: str) -> bytes:
    """Returns the 32 key bytes written in `text`: 64 hex digits or base64 (standard or URL-safe) of 32 bytes.
    Raises StoreKeyError for anything else, without echoing the text (it may be a key).

    >>> len(parse_key("00" * 32)), len(parse_key(base64.b64encode(bytes(32)).decode()))
    (32, 32)
    """
    text = text.strip()
    key: bytes | None = None
    if len(text) == 2 * KEY_BYTES:
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = None
    if key is None:
        try:
            padded = text + "=" * (-len(text) % 4)
            key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            key = None
    if key is None or len(key) != KEY_BYTES:
        raise StoreKeyError(
            f"the store key is not {KEY_BYTES} bytes written as 64 hex digits or base64: make one with "
            "docpipe keys store-key --out FILE"
        )
    return key


def new_key_text() -> str:
    """Returns a new random store key as 64 hex digits (what a key file holds)."""
    return secrets.token_hex(KEY_BYTES)


class Sealer:
    """Seals and opens blobs under one store key (AES-256-GCM); `key_id` names the key, never reveals it.

    >>> sealer = Sealer(bytes(range(32)))
    >>> blob = sealer.seal(b"ninety (90) days", "docs/x/extract.json")
    >>> b"ninety" in blob, sealer.open(blob, "docs/x/extract.json")
    (False, b'ninety (90) days')
    """

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise StoreKeyError(
                f"the store key must be {KEY_BYTES} bytes, not {len(key)}: make one with "
                "docpipe keys store-key --out FILE"
            )
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead: AESGCM = AESGCM(key)
        self.key_id: bytes = hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).digest()[:_KEY_ID_BYTES]

    def __repr__(self) -> str:  # never the key
        return f"Sealer(key_id={self.key_id.hex()})"

    def seal(self, data: bytes, where: str) -> bytes:
        """Returns `data` sealed for the place `where` (a store-relative name)."""
        header = MAGIC + bytes([VERSION]) + self.key_id
        nonce = os.urandom(_NONCE_BYTES)
        return header + nonce + self._aead.encrypt(nonce, data, _associated(header, where))

    def open(self, blob: bytes, where: str) -> bytes:
        """Returns the plain bytes of `blob` (as is when it is not sealed). StoreKeyError when another key
        sealed it; SealedDataError (a ValueError: damage) when it was changed or moved from another place."""
        return open_blob(blob, where, self)


def is_sealed(blob: bytes) -> bool:
    """Returns True when `blob` starts with the sealed-file magic."""
    return blob[: len(MAGIC)] == MAGIC


def seal_blob(data: bytes, where: str, sealer: Sealer | None) -> bytes:
    """Returns `data` sealed for `where` when there is a sealer, else `data` itself (a store without a key)."""
    return data if sealer is None else sealer.seal(data, where)


def open_blob(blob: bytes, where: str, sealer: Sealer | None) -> bytes:
    """Returns the plain bytes of `blob`: as is when it is not sealed, opened when it is.

    StoreKeyError when it is sealed and there is no key, or another key sealed it (never to be taken for
    damage: the data is there, the key is missing). SealedDataError (a ValueError) when the key is right but
    the blob was changed, cut short or moved from another place: damage, which callers rebuild.
    """
    if not is_sealed(blob):
        return blob
    if len(blob) < _HEADER + _NONCE_BYTES + _TAG_BYTES:
        raise SealedDataError(f"sealed file {where} is cut short")
    version, key_id = blob[len(MAGIC)], blob[len(MAGIC) + 1 : _HEADER]
    if version != VERSION:
        raise StoreKeyError(f"{where} is sealed in format {version}, which this docpipe does not know: upgrade docpipe")
    if sealer is None:
        raise StoreKeyError(
            f"docpipe's store is encrypted at rest ({where} is sealed with the store key {key_id.hex()}) "
            f"and no store key is set: {FIX}",
            key_id=key_id.hex(),
        )
    if not hmac.compare_digest(key_id, sealer.key_id):
        raise StoreKeyError(
            f"{where} is sealed with the store key {key_id.hex()}, but the key in effect is "
            f"{sealer.key_id.hex()}: {FIX}",
            key_id=key_id.hex(),
        )
    from cryptography.exceptions import InvalidTag

    header, nonce = blob[:_HEADER], blob[_HEADER : _HEADER + _NONCE_BYTES]
    try:
        return sealer._aead.decrypt(nonce, blob[_HEADER + _NONCE_BYTES :], _associated(header, where))
    except InvalidTag:
        raise SealedDataError(
            f"sealed file {where} does not open under its key: it was changed, cut or moved from another place"
        ) from None


def _associated(header: bytes, where: str) -> bytes:
    return header + b"\x00" + where.encode("utf-8")
