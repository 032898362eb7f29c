"""A deterministic hashing embedder that needs no model and no torch: hashed bag-of-words (and word-pair)
vectors, for tests, demos and users' own tests. Imports only NumPy, when it embeds.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Returns hashed bag-of-words vectors: deterministic, no model, no torch.

    >>> e = HashingEmbedder(dim=64)
    >>> v = e.embed(["notice of termination", "termination notice"])
    >>> round(float(v[0] @ v[1]), 2) > 0.5
    True
    """

    #: What computes its vectors (as `docpipe.embed.openvino.OpenVinoEmbedder.backend` says for its own).
    backend = "hashing"

    def __init__(self, dim: int = 384, max_tokens: int = 128) -> None:
        self.dim = dim
        self.max_tokens = max_tokens
        self.name = f"hashing-{dim}"

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = [w.lower() for w in _WORD.findall(text)][: self.max_tokens]
            for feature in words + [a + " " + b for a, b in zip(words, words[1:])]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)
