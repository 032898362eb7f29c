"""Embedding backends: OpenVINO runs the packaged MiniLM's own weights, gives torch's vectors (to float32
rounding in f32, cosine >= 0.9999 in bfloat16), reads exactly the tokens torch reads, has an index fingerprint
of its own, and says how to install it when it is missing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from docpipe.embed.base import load_embedder
from docpipe.embed.openvino import OpenVinoEmbedder, available
from docpipe.embed.sentence_transformers import PACKAGED_MINILM, SentenceTransformerEmbedder, resolve_model
from docpipe.errors import ConfigError, DependencyError
from docpipe.settings import EmbeddingSettings, Settings

TEXTS = [
    "What is the notice period for termination for convenience?",
    "12.3 Termination for Convenience. Either Party may terminate this Agreement upon ninety (90) days' prior "
    "written notice to the other Party.",
    "x",
    "Société Générale — “Confidential Information” means ™ data; 12.3(b)(ii)",
    "The Supplier shall keep records of every shipment. " * 80,  # longer than 256 word-pieces: truncated
    "Governing Law. This Agreement is governed by the laws of the State of New York.",
    "Licensee shall pay Licensor a royalty of five percent (5%) of Net Sales, payable quarterly.",
]
# Lowest cosine to torch measured in bfloat16 over 647 real passages (the sample contract and two CUAD
# contracts): 0.99997. The bound leaves room for other CPUs' kernels, and is far above a wrong vector.
BF16_COSINE = 0.9999

pytestmark = pytest.mark.skipif(not available(), reason="openvino is a dependency: pip install openvino")


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    embedder = SentenceTransformerEmbedder(PACKAGED_MINILM)
    model = embedder._load_torch_model()
    return model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)


@pytest.mark.integration
def test_openvino_vectors_agree_with_torch(torch_vectors: np.ndarray) -> None:
    embedder = OpenVinoEmbedder(PACKAGED_MINILM)
    embedder.compile()  # from here on every text goes through OpenVINO, not the NumPy forward pass
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * torch_vectors).sum(1)
    assert cosines.min() >= BF16_COSINE, cosines
    if embedder.precision == "f32":  # a CPU without bfloat16 units
        assert np.abs(vectors - torch_vectors).max() < 1e-5


@pytest.mark.integration
def test_openvino_in_f32_is_torch_to_rounding(torch_vectors: np.ndarray) -> None:
    # The graph itself, without bfloat16 in the way: any wrong operation shows here as a large difference.
    embedder = OpenVinoEmbedder(PACKAGED_MINILM, precision="f32")
    embedder.compile()
    assert embedder.precision == "f32"
    assert np.abs(embedder.embed(TEXTS) - torch_vectors).max() < 1e-5


@pytest.mark.integration
def test_rows_follow_the_input_order_across_sorted_batches() -> None:
    # Batches are filled longest first; each row must still land where its text was.
    embedder = OpenVinoEmbedder(PACKAGED_MINILM, batch_size=2)
    embedder.compile()
    together = embedder.embed(TEXTS)
    alone = np.concatenate([embedder.embed([t]) for t in TEXTS])
    assert ((together * alone).sum(1) >= BF16_COSINE).all()
    reversed_rows = embedder.embed(TEXTS[::-1])[::-1]
    assert ((together * reversed_rows).sum(1) >= BF16_COSINE).all()
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.integration
def test_a_lone_question_goes_through_numpy_and_equals_the_batch_vector() -> None:
    # A fresh `docpipe ask` embeds its question with the NumPy pass; the sentences it is scored against were
    # embedded in batches by OpenVINO at ingestion. Same vector within the backends' tolerance (BF16_COSINE;
    # float32 rounding where OpenVINO runs in f32), and a batch goes to OpenVINO, not to NumPy.
    embedder = OpenVinoEmbedder(PACKAGED_MINILM)
    lone = np.vstack([embedder.embed([text]) for text in TEXTS])
    assert not embedder._bulk_loaded()
    batch = embedder.embed(TEXTS * 3)[: len(TEXTS)]  # more than NUMPY_BATCH_LIMIT texts: compiled and batched
    assert len(TEXTS) * 3 > embedder.NUMPY_BATCH_LIMIT and embedder._bulk_loaded()
    assert (lone * batch).sum(1).min() >= BF16_COSINE
    if embedder.precision == "f32":
        assert np.abs(lone - batch).max() < 1e-5


@pytest.mark.integration
def test_questions_from_numpy_rank_openvino_passages_as_torch_does(torch_vectors: np.ndarray) -> None:
    # A fresh process embeds a question with the NumPy forward pass (float32) and searches passages that
    # OpenVINO wrote at ingestion (bfloat16): the ranking must be torch's.
    embedder = OpenVinoEmbedder(PACKAGED_MINILM)
    question = embedder.embed([TEXTS[0]])  # nothing compiled yet: the NumPy path
    assert not embedder._bulk_loaded()
    embedder.compile()
    passages = embedder.embed(TEXTS[1:])
    assert list(np.argsort(-(passages @ question[0]))) == list(np.argsort(-(torch_vectors[1:] @ torch_vectors[0])))


@pytest.mark.integration
def test_token_spans_and_max_tokens_are_torchs() -> None:
    fast = OpenVinoEmbedder(PACKAGED_MINILM)
    reference = SentenceTransformerEmbedder(PACKAGED_MINILM)
    assert fast.max_tokens == reference.max_tokens == 254
    assert (fast.name, fast.dim) == (reference.name, reference.dim)
    for text in TEXTS:
        assert fast.token_spans(text) == reference.token_spans(text)


def test_fingerprint_names_the_backend_only_when_vectors_differ() -> None:
    torch_fp = Settings(embedding={"backend": "torch"}).index_fingerprint()
    openvino_fp = Settings(embedding={"backend": "openvino"}).index_fingerprint()
    assert openvino_fp != torch_fp
    assert Settings().embedding.vector_backend() == "openvino"  # auto, with the package installed
    assert Settings().index_fingerprint() == openvino_fp
    # Another device is torch's: auto then shares torch's entries (same vectors).
    assert Settings(embedding={"device": "cuda"}).index_fingerprint() == torch_fp
    # The hashing embedder has no backend: the setting does not split its entries.
    hashing = {"model": "hashing"}
    assert (
        Settings(embedding={**hashing, "backend": "openvino"}).index_fingerprint()
        == Settings(embedding={**hashing, "backend": "torch"}).index_fingerprint()
    )


@pytest.mark.integration
def test_load_embedder_follows_the_backend() -> None:
    assert load_embedder(EmbeddingSettings()).backend == "openvino"
    assert load_embedder(EmbeddingSettings(backend="torch")).backend == "torch"


def test_missing_openvino_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # what an environment without the package sees
    with pytest.raises(DependencyError, match=r"pip install openvino"):
        OpenVinoEmbedder(PACKAGED_MINILM)
    with pytest.raises(DependencyError, match=r"pip install openvino"):
        load_embedder(EmbeddingSettings(backend="openvino"))
    # auto falls back to torch, and its fingerprint is torch's.
    assert EmbeddingSettings().vector_backend() == "torch"
    assert Settings().index_fingerprint() == Settings(embedding={"backend": "torch"}).index_fingerprint()


@pytest.mark.integration
def test_a_model_openvino_does_not_build(tmp_path: Path) -> None:
    # The same folder, declared with another activation: not the forward pass the graph computes.
    folder = tmp_path / "model"
    shutil.copytree(resolve_model(PACKAGED_MINILM), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(ConfigError, match="backend 'torch'"):
        OpenVinoEmbedder(str(folder))
    assert load_embedder(EmbeddingSettings(model=str(folder))).backend == "torch"
