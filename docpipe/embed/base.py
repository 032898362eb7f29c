"""The embedder protocol, and `load_embedder`, the choice among the backends the settings name: what the
pipeline needs from an embedder (its name, dimension, the tokens it really reads and how it splits text into
them, so passages can be sized to what it reads: MiniLM reads 256 word-pieces and silently drops the rest).
The backends, `HashingEmbedder` (`docpipe.embed.hashing`) and `SentenceTransformerEmbedder`
(`docpipe.embed.sentence_transformers`), are importable from here too; `OpenVinoEmbedder`
(`docpipe.embed.openvino`, the same weights on OpenVINO) loads when the settings choose it. Imports no model
library.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from docpipe.embed.hashing import HashingEmbedder
from docpipe.embed.sentence_transformers import PACKAGED_MINILM, SentenceTransformerEmbedder

if TYPE_CHECKING:
    import numpy as np

    from docpipe.settings import EmbeddingSettings

log = logging.getLogger(__name__)

__all__ = ["PACKAGED_MINILM", "Embedder", "HashingEmbedder", "SentenceTransformerEmbedder", "load_embedder"]


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


def load_embedder(settings: EmbeddingSettings) -> Embedder:
    """Returns the embedder the settings name (``hashing`` needs no model), on the backend
    `EmbeddingSettings.vector_backend` resolves: the one the index fingerprint was computed for."""
    backend = settings.vector_backend()
    if backend == "hashing":
        return HashingEmbedder()
    if backend == "openvino":
        from docpipe.embed.openvino import OpenVinoEmbedder, supports

        if settings.backend == "openvino" or supports(settings.model):
            return OpenVinoEmbedder(settings.model, batch_size=settings.batch_size)
        # auto, and a model the openvino backend does not build: torch, under the fingerprint auto gave (a
        # stable key of its own, never shared with vectors of another kind).
        log.info("embedding model %s is not a plain BERT encoder: torch embeds it", settings.model)
    return SentenceTransformerEmbedder(settings.model, device=settings.device, batch_size=settings.batch_size)
