"""`VectorTable`: embeddings looked up by the text they embed, kept beside a document's index.

Offline answers score every sentence of the sections they retrieved (`docpipe.answer.extractive`). Those
sentences are embedded once per document, in one batched pass of the bulk embedder (`docpipe.ingest.sentences`
lists them), and stored; a question then only looks its sentences up. Keyed by a digest of the text rather than
by section, so any cut of a section (a cross-referenced clause, a later change to how clauses are cut) finds
every sentence it shares with the stored ones, and only the rest is embedded.

On disk: an ``.npz`` of plain arrays (never pickles) holding the digests, the unit vectors and who made them
(`VectorTable.made_by`: the index fingerprint and the embedder's name, backend and width). A table read under
another maker is refused, so vectors of one embedder are never scored against another's questions.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from docpipe.embed.base import Embedder

__all__ = ["VectorTable", "digest", "maker"]

_DIGEST_BYTES = 16


def digest(text: str) -> bytes:
    """Returns the key a text's vector is kept under (BLAKE2b, 128 bits: no collision among a document's)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_BYTES).digest()


def maker(fingerprint: str, embedder: Embedder) -> str:
    """Returns who makes a document's vectors: the index fingerprint, and the embedder's name, backend and width
    (the fingerprint already covers them; the rest guards a table moved or written by hand)."""
    backend = getattr(embedder, "backend", "")  # not in the Embedder protocol: users' own embedders may lack it
    return f"{fingerprint}:{embedder.name}:{backend}:{embedder.dim}"


class VectorTable:
    """Unit vectors by text, made by one embedder (`made_by`); safe to read and grow from several threads.

    >>> import numpy as np
    >>> table = VectorTable("fp:hashing:384", dim=2)
    >>> table.add(["a clause."], np.array([[1.0, 0.0]], dtype=np.float32))
    >>> table.missing(["a clause.", "another."]), table.rows(["a clause."]).tolist()
    (['another.'], [[1.0, 0.0]])
    """

    def __init__(self, made_by: str, *, dim: int) -> None:
        import numpy as np

        self.made_by = made_by
        self.dim = dim
        #: True once it holds every text `docpipe.ingest.sentences.document_texts` lists for its document.
        self.complete = False
        self._rows: dict[bytes, int] = {}
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def missing(self, texts: Sequence[str]) -> list[str]:
        """Returns the texts of `texts` the table has no vector for, each once, in first-seen order."""
        rows = self._rows
        return list(dict.fromkeys(t for t in texts if digest(t) not in rows))

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keeps `vectors` (one row per text of `texts`); a text already held keeps its first vector."""
        import numpy as np

        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        if len(texts) and (vectors.ndim != 2 or vectors.shape[1] != self.dim):
            raise ValueError(f"vectors of shape {vectors.shape}, the table holds width {self.dim}")
        with self._lock:
            new: dict[bytes, int] = {}
            for n, text in enumerate(texts):
                key = digest(text)
                if key not in self._rows and key not in new:
                    new[key] = n
            if not new:
                return
            base = len(self._vectors)
            self._vectors = np.concatenate([self._vectors, np.asarray(vectors, dtype=np.float32)[list(new.values())]])
            for offset, key in enumerate(new):
                self._rows[key] = base + offset

    def merge(self, other: VectorTable) -> None:
        """Adds the vectors `other` holds and this table lacks (both must be of one embedder's width)."""
        import numpy as np

        if other.dim != self.dim:
            raise ValueError(f"cannot merge vectors of width {other.dim} into a table of width {self.dim}")
        with other._lock:
            theirs = [(key, row) for key, row in other._rows.items() if key not in self._rows]
            vectors = other._vectors[[row for _, row in theirs]] if theirs else None
        if vectors is None:
            return
        with self._lock:
            base = len(self._vectors)
            self._vectors = np.concatenate([self._vectors, vectors])
            for offset, (key, _) in enumerate(theirs):
                self._rows.setdefault(key, base + offset)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        """Returns the vectors of `texts`, one row each (a `KeyError` names a text the table lacks)."""
        import numpy as np

        rows = self._rows
        try:
            index = [rows[digest(t)] for t in texts]
        except KeyError:
            lacking = next(t for t in texts if digest(t) not in rows)
            raise KeyError(f"no vector for {lacking[:60]!r}") from None
        # Read after the lookup: `add` grows the vectors before it files their keys, so every row found is here.
        vectors = self._vectors
        return vectors[index] if index else np.zeros((0, self.dim), dtype=np.float32)

    def dump(self) -> bytes:
        """Returns the table as ``.npz`` bytes (`load` reads them back)."""
        import numpy as np

        with self._lock:
            keys = np.frombuffer(b"".join(self._rows), dtype=np.uint8).reshape(len(self._rows), _DIGEST_BYTES)
            order = np.fromiter(self._rows.values(), dtype=np.int64, count=len(self._rows))
            vectors = self._vectors[order]
            meta = json.dumps({"made_by": self.made_by, "dim": self.dim, "complete": self.complete})
        buffer = io.BytesIO()
        np.savez(buffer, meta=np.array(meta), digests=keys, vectors=vectors)
        return buffer.getvalue()

    @classmethod
    def load(cls, data: bytes, *, made_by: str, dim: int) -> VectorTable:
        """Returns the table `dump` wrote; a `ValueError` for a damaged file, or one made by another embedder
        than `made_by` (its vectors are not this embedder's)."""
        import numpy as np

        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                meta = json.loads(str(arrays["meta"]))
                keys = np.asarray(arrays["digests"], dtype=np.uint8)
                vectors = np.asarray(arrays["vectors"], dtype=np.float32)
        except (zipfile.BadZipFile, EOFError, KeyError, TypeError, ValueError, OSError) as exc:
            raise ValueError(f"not a table of sentence embeddings ({exc})") from exc
        if not isinstance(meta, dict) or meta.get("made_by") != made_by or meta.get("dim") != dim:
            found = meta.get("made_by") if isinstance(meta, dict) else None
            raise ValueError(f"sentence embeddings made by {found!r}, not by {made_by!r}")
        if keys.ndim != 2 or keys.shape[1] != _DIGEST_BYTES or vectors.shape != (len(keys), dim):
            raise ValueError(f"sentence embeddings of shape {vectors.shape} for {len(keys)} digests")
        table = cls(made_by, dim=dim)
        table._vectors = np.ascontiguousarray(vectors)
        table._rows = {bytes(key): n for n, key in enumerate(keys)}
        table.complete = bool(meta.get("complete"))
        return table
