"""Stored answers and reports: JSON files under ``<store>/serve/``, written atomically, named by a hash of
their id, so they survive a restart and no id can become a path."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from docpipe.errors import StoreError
from docpipe.store import atomic_write, sha256_hex

__all__ = ["ResultStore"]

logger = logging.getLogger(__name__)

_MAX_ID_CHARS = 200


class ResultStore:
    """Returns and keeps answers and reports as JSON files; a file's name is the SHA-256 of the id, so a
    client's id never becomes a path."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / f"{sha256_hex(key.encode())}.json"

    def save(self, kind: str, key: str, data: dict[str, Any]) -> None:
        try:
            atomic_write(self._path(kind, key), json.dumps(data, ensure_ascii=False).encode())
        except OSError as exc:
            raise StoreError(f"cannot store the {kind[:-1]} under {self.root}: {exc}", path=str(self.root)) from exc

    def load(self, kind: str, key: str) -> dict[str, Any] | None:
        if not key or len(key) > _MAX_ID_CHARS:
            return None
        try:
            data = json.loads(self._path(kind, key).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("stored %s %s is unreadable: %s", kind[:-1], key, exc)
            return None
        return data if isinstance(data, dict) and data.get("id") == key else None
