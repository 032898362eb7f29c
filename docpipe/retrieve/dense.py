"""The per-document search index: FAISS over passage embeddings plus BM25 over the same passages."""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Literal

from docpipe.errors import ConfigError, DependencyError

if TYPE_CHECKING:
    import faiss
    import numpy as np

__all__ = ["AUTO_FLAT_BELOW", "BM25", "DenseIndex", "IndexType", "bm25_terms", "choose_index_type", "tokenize"]

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_STOPWORDS = frozenset(
    """a an and are as at be been by for from has have if in into is it its of on or such that the their
    then there these this those to was were which will with shall may any all each other""".split()
)


def tokenize(text: str) -> list[str]:
    """Returns lower-cased words and numbers ("12.3" stays whole), stopwords dropped."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


#: Words longer than this also count by their first `STEM_CHARS` letters in BM25 ("exclusivity" meets
#: "exclusive", "terminate" meets "termination"), beside the word itself, so exact matches still weigh more.
#: Measured (README, "Collections"): recall within 4k tokens 0.840 -> 0.862 on the data-room questions
#: that name their contract (773 sampled), and on cuad-dev's questions 0.853/0.929/0.955/0.985 ->
#: 0.861/0.921/0.951/0.981 at 2k/4k/8k/16k (one or two of 266 pairs either way).
STEM_CHARS = 6


def bm25_terms(text: str) -> list[str]:
    """Returns BM25 terms: `tokenize`'s words, and for each longer than `STEM_CHARS` letters its stem mark.

    >>> bm25_terms("Exclusivity of the exclusive licence, clause 12.3")
    ['exclusivity', 'exclus~', 'exclusive', 'exclus~', 'licence', 'licenc~', 'clause', '12.3']
    """
    terms: list[str] = []
    for word in tokenize(text):
        terms.append(word)
        if len(word) > STEM_CHARS and not word[0].isdigit():
            terms.append(word[:STEM_CHARS] + "~")
    return terms


class BM25:
    """Returns Okapi BM25 scores of a query against a fixed list of texts.

    >>> BM25(["change of control", "governing law"]).scores("Change of Control")[0] > 0
    True
    """

    def __init__(self, texts: list[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self._docs = [Counter(bm25_terms(t)) for t in texts]
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
        for term in set(bm25_terms(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for i in self._postings[term]:
                tf = self._docs[i][term]
                norm = self._k1 * (1 - self._b + self._b * self._lengths[i] / (self._avg or 1))
                out[i] += idf * tf * (self._k1 + 1) / (tf + norm)
        return out


IndexType = Literal["auto", "flat", "hnsw", "ivf"]

#: `auto` keeps the exact flat index below this many vectors and uses `AUTO_APPROXIMATE` from it on.
#: Measured by benchmarks/index_speed.py (384-dim clustered vectors, one query, 2 CPU cores; README,
#: "Benchmarks"): IVF first answers faster than flat at recall@10 >= 0.95 between 1,000 and 3,000 vectors,
#: but by hundredths of a millisecond, within noise and not worth its training time; from 10,000 it is
#: 4-6x faster, from 30,000 over 25x. IVF beat HNSW at every size, in search and in build time.
AUTO_FLAT_BELOW = 10_000
AUTO_APPROXIMATE: Literal["hnsw", "ivf"] = "ivf"

# HNSW: faiss's defaults for M and efConstruction. efSearch 128 gave recall@10 0.96 at 100,000 vectors and
# 256 gave 0.97; at 1,000,000 both gave 0.96, where the graph (efConstruction 40) is the limit.
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 256
# IVF: 4 sqrt(N) lists (faiss's rule of thumb), of which `IVF_NPROBE` are scanned per query: 8 fell
# below recall@10 0.95 from 30,000 vectors on, 16 kept 0.98 up to 1,000,000.
IVF_NPROBE = 16
_IVF_MIN_TRAIN_PER_LIST = 39  # faiss warns (on stderr) when k-means gets fewer points per centroid
_IVF_TRAIN_PER_LIST = 50
_IVF_KMEANS_ITERATIONS = 10


def choose_index_type(size: int, requested: IndexType = "auto") -> Literal["flat", "hnsw", "ivf"]:
    """Returns the index type used for `size` vectors: `requested`, or for ``auto`` flat below
    `AUTO_FLAT_BELOW` and `AUTO_APPROXIMATE` from there on.

    >>> choose_index_type(500), choose_index_type(AUTO_FLAT_BELOW), choose_index_type(500, "hnsw")
    ('flat', 'ivf', 'hnsw')
    """
    if requested != "auto":
        return requested
    return "flat" if size < AUTO_FLAT_BELOW else AUTO_APPROXIMATE


def ivf_lists(size: int) -> int:
    """Returns the number of IVF lists for `size` vectors: 4 sqrt(N), with enough points to train each."""
    return max(1, min(int(4 * math.sqrt(size)), size // _IVF_MIN_TRAIN_PER_LIST))


class DenseIndex:
    """Returns inner-product search over L2-normalised vectors (cosine similarity) with FAISS.

    The index is exact (flat) for small collections and approximate (HNSW graph or IVF lists) for large
    ones; `index_type` says which one was built.

    >>> import numpy as np
    >>> vectors = np.eye(4, dtype=np.float32)
    >>> index = DenseIndex(vectors)
    >>> index.index_type, index.search(vectors[2], k=1)[1].tolist()
    ('flat', [2])
    """

    def __init__(self, vectors: np.ndarray, *, index_type: IndexType = "auto") -> None:
        try:
            import faiss
        except ImportError as exc:  # pragma: no cover - core dependency
            raise DependencyError("faiss is not installed: pip install faiss-cpu") from exc
        import numpy as np

        if index_type not in ("auto", "flat", "hnsw", "ivf"):
            raise ConfigError(f"unknown index type {index_type!r}: choose auto, flat, hnsw or ivf")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.size = int(vectors.shape[0])
        dim = int(vectors.shape[1])
        # Nothing to approximate in an empty index, and IVF could not be trained on it.
        kind = choose_index_type(self.size, index_type) if self.size else "flat"
        index: faiss.Index
        if kind == "hnsw":
            hnsw = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            hnsw.hnsw.efSearch = HNSW_EF_SEARCH
            index = hnsw
        elif kind == "ivf":
            lists = ivf_lists(self.size)
            index = faiss.index_factory(dim, f"IVF{lists},Flat", faiss.METRIC_INNER_PRODUCT)
            ivf = faiss.extract_index_ivf(index)  # the same object, typed as the IVF index it is
            ivf.cp.niter = _IVF_KMEANS_ITERATIONS
            # ivf_lists() already leaves enough points per list; below that (tiny N, one list) faiss would
            # print a warning to stderr, and the library never prints.
            ivf.cp.min_points_per_centroid = 1
            # A random sample, not a prefix: vectors arrive grouped by document.
            sample = min(self.size, _IVF_TRAIN_PER_LIST * lists)
            rows = np.sort(np.random.default_rng(0).choice(self.size, size=sample, replace=False))
            index.train(vectors[rows])
            ivf.nprobe = min(IVF_NPROBE, lists)
        else:
            index = faiss.IndexFlatIP(dim)
        if self.size:
            index.add(vectors)
        self._index = index
        self.index_type: Literal["flat", "hnsw", "ivf"] = kind
        logger.debug("dense index: %s over %d vectors", kind, self.size)

    @property
    def faiss_index(self) -> faiss.Index:
        """Returns the underlying FAISS index, for tuning (``hnsw.efSearch``, ``nprobe``) and benchmarks."""
        return self._index

    def search(self, query: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Returns (scores, ids) of the `k` nearest passages (all when k is None), best first.

        Asking for every passage (k None or >= size) ranks them exactly, whatever the index type.
        """
        import numpy as np

        k = self.size if k is None else min(k, self.size)
        if k == 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        scores, ids = self._search(np.asarray(query, dtype=np.float32).reshape(1, -1), k)
        found = ids[0] >= 0  # an approximate index can find fewer than k
        return scores[0][found], ids[0][found]

    def search_batch(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Returns (scores, ids), one row of `k` per query, best first; id -1 where fewer than k were found."""
        import numpy as np

        k = min(k, self.size)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if k <= 0:
            return np.zeros((len(queries), 0), dtype=np.float32), np.zeros((len(queries), 0), dtype=np.int64)
        return self._search(queries, k)

    def _search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        index = self._index
        if k < self.size or self.index_type == "flat":
            return index.search(queries, k)
        # A full ranking from an approximate index would miss passages: scan everything instead.
        if isinstance(index, faiss.IndexHNSW):  # index_type "hnsw"
            return faiss.downcast_index(index.storage).search(queries, k)
        params = faiss.SearchParametersIVF()
        params.nprobe = faiss.extract_index_ivf(index).nlist
        return index.search(queries, k, params=params)

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
        if isinstance(self._index, faiss.IndexHNSW):
            self.index_type = "hnsw"
        elif isinstance(self._index, faiss.IndexIVF):
            self.index_type = "ivf"
        else:
            self.index_type = "flat"
        return self
