"""Embedders: the NumPy query path matches sentence-transformers; the hashing embedder is deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from docpipe import HashingEmbedder
from docpipe.embed.sentence_transformers import PACKAGED_MINILM, SentenceTransformerEmbedder

TEXTS = [
    "What is the notice period for termination for convenience?",
    "Either Party may terminate this Agreement upon ninety (90) days' prior written notice.",
    "x",
    "Société Générale — “Confidential Information” means ™ data; 12.3(b)(ii)",
    "The Supplier shall keep records of every shipment. " * 80,  # longer than 256 word-pieces: truncated
]


@pytest.mark.integration
def test_numpy_path_matches_sentence_transformers() -> None:
    embedder = SentenceTransformerEmbedder(PACKAGED_MINILM)
    assert embedder._model is None  # constructing it did not load torch
    fast = embedder.embed(TEXTS)
    assert embedder._model is None
    reference = embedder._load_torch_model().encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert fast.shape == (len(TEXTS), 384) and fast.dtype == np.float32
    assert np.abs(fast - reference).max() < 1e-5
    assert (fast * reference).sum(1).min() > 0.99999
    # Once torch is loaded it serves every call, with the same vectors.
    assert np.abs(embedder.embed(TEXTS) - fast).max() < 1e-5


@pytest.mark.integration
def test_token_spans_are_what_the_model_reads() -> None:
    embedder = SentenceTransformerEmbedder(PACKAGED_MINILM)
    assert embedder.max_tokens == 254
    text = "Termination for Convenience. Either Party may terminate."
    spans = embedder.token_spans(text)
    assert [text[a:b] for a, b in spans][:4] == ["Termination", "for", "Convenience", "."]
    tokenizer = embedder._load_torch_model().tokenizer
    assert len(spans) == len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_hashing_embedder_is_deterministic_and_normalised() -> None:
    a = HashingEmbedder().embed(TEXTS)
    b = HashingEmbedder().embed(TEXTS)
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    v = HashingEmbedder().embed(["written notice of termination", "termination notice in writing", "pizza dough"])
    assert v[0] @ v[1] > 0.2 > abs(v[0] @ v[2])  # shared words count, unrelated text does not


def test_the_numpy_passs_erf_is_scipys_to_float32_rounding() -> None:
    from scipy.special import erf

    from docpipe.embed._bert_numpy import _erf

    x = np.linspace(-8, 8, 200_001, dtype=np.float32)
    # The formula is within 1.5e-7 of erf; computed in float32, as the forward pass does, within 6e-7.
    assert np.abs(_erf(x.astype(np.float64)) - erf(x.astype(np.float64))).max() < 1.5e-7
    assert np.abs(_erf(x).astype(np.float64) - erf(x.astype(np.float64))).max() < 6e-7
    assert _erf(x).dtype == np.float32
