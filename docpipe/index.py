"""The per-document search index: FAISS over passage embeddings plus BM25 over the same passages."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

from docpipe.errors import DependencyError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BM25", "DenseIndex", "tokenize"]

_TOKEN = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_STOPWORDS = frozenset(
    """a an and are as at be been by for from has have if in into is it its of on or such that the their
    then there these this those to was were which will with shall may any all each other""".split()
)


def tokenize(text: str) -> list[str]:
    """Returns BM25 terms: lower-cased words and numbers ("12.3" stays whole), stopwords dropped."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class BM25:
    """Returns Okapi BM25 scores of a query against a fixed list of texts.

    >>> BM25(["change of control", "governing law"]).scores("Change of Control")[0] > 0
    True
    """

    def __init__(self, texts: list[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self._docs = [Counter(tokenize(t)) for t in texts]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        df: Counter[str] = Counter()
        for doc in self._docs:
            df.update(doc.keys())
        n = len(self._docs)
        self._idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}
        self._k1, self._b = k1, b
        self._postings: dict[str, list[int]] = {}
        for i, doc in enumerate(self._docs):
            for term in doc:
                self._postings.setdefault(term, []).append(i)

    def scores(self, query: str) -> list[float]:
        out = [0.0] * len(self._docs)
        for term in set(tokenize(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for i in self._postings[term]:
                tf = self._docs[i][term]
                norm = self._k1 * (1 - self._b + self._b * self._lengths[i] / (self._avg or 1))
                out[i] += idf * tf * (self._k1 + 1) / (tf + norm)
        return out


class DenseIndex:
    """Returns inner-product search over L2-normalised vectors (cosine similarity) with FAISS."""

    def __init__(self, vectors: np.ndarray) -> None:
        try:
            import faiss
        except ImportError as exc:  # pragma: no cover - core dependency
            raise DependencyError("faiss is not installed: pip install faiss-cpu") from exc
        self.size = int(vectors.shape[0])
        self._index = faiss.IndexFlatIP(int(vectors.shape[1]))
        if self.size:
            self._index.add(vectors)

    def search(self, query: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Returns (scores, ids) of the `k` nearest passages (all when k is None), best first."""
        k = self.size if k is None else min(k, self.size)
        if k == 0:
            import numpy as np

            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        scores, ids = self._index.search(query.reshape(1, -1), k)
        return scores[0], ids[0]

    def serialize(self) -> bytes:
        import faiss

        return faiss.serialize_index(self._index).tobytes()

    @classmethod
    def deserialize(cls, data: bytes) -> DenseIndex:
        import faiss
        import numpy as np

        self = cls.__new__(cls)
        self._index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        self.size = int(self._index.ntotal)
        return self
