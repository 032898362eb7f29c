"""Dense index types (flat, HNSW, IVF) and the automatic choice by size: real FAISS, no model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from docpipe import DocPipe, Settings
from docpipe.errors import ConfigError
from docpipe.retrieve.dense import AUTO_APPROXIMATE, AUTO_FLAT_BELOW, DenseIndex, choose_index_type
from docpipe.settings import load_settings

DIM = 384
TYPES = ("flat", "hnsw", "ivf")


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int, *, clusters: int = 256) -> np.ndarray:
    """Returns `n` unit vectors around `clusters` shared centres (a fixed mixture; `seed` draws the points).

    Embeddings cluster by topic; uniform random 384-dim vectors do not: their nearest neighbours are barely
    nearer than anyone else, and no index but flat finds them at a sensible cost.
    """
    centres = unit(np.random.default_rng(99).standard_normal((clusters, DIM)))
    spectrum = np.arange(1, DIM + 1, dtype=np.float32) ** -0.5
    spectrum /= np.linalg.norm(spectrum)
    rng = np.random.default_rng(seed)
    return unit(centres[rng.integers(0, clusters, n)] + rng.standard_normal((n, DIM)).astype(np.float32) * spectrum)


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / truth.shape[1] for a, b in zip(found.tolist(), truth.tolist())]))


@pytest.fixture(scope="module")
def planted() -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """Returns (vectors, queries, the 5 planted neighbours of each query) over a random background."""
    rng = np.random.default_rng(3)
    background = unit(rng.standard_normal((3000, DIM)))
    queries = unit(rng.standard_normal((20, DIM)))
    vectors = [background]
    planted_ids = []
    for i, query in enumerate(queries):
        near = unit(query + 0.3 * unit(rng.standard_normal((5, DIM))))  # cosine ~0.96 to the query
        planted_ids.append(list(range(len(background) + 5 * i, len(background) + 5 * i + 5)))
        vectors.append(near)
    return np.concatenate(vectors), queries, planted_ids


@pytest.fixture(scope="module")
def planted_indexes(planted) -> dict[str, DenseIndex]:
    """Returns an index of each type over the planted set (built once: HNSW takes seconds on a busy CPU)."""
    return {index_type: DenseIndex(planted[0], index_type=index_type) for index_type in TYPES}


@pytest.mark.parametrize("index_type", TYPES)
def test_each_type_finds_the_planted_neighbours(planted, planted_indexes, index_type: str) -> None:
    vectors, queries, planted_ids = planted
    index = planted_indexes[index_type]
    assert index.index_type == index_type
    assert index.size == len(vectors)
    for query, expected in zip(queries, planted_ids):
        scores, ids = index.search(query, k=5)
        assert sorted(ids.tolist()) == expected
        assert list(scores) == sorted(scores, reverse=True)
    _, batch = index.search_batch(queries, 5)
    assert [sorted(row) for row in batch.tolist()] == planted_ids


@pytest.mark.parametrize("index_type", TYPES)
def test_asking_for_every_passage_ranks_all_exactly(planted, planted_indexes, index_type: str) -> None:
    # Retrieval ranks all of a document's passages (k=None): an approximate index must not drop any.
    vectors, queries, _ = planted
    exact_scores, exact_ids = planted_indexes["flat"].search(queries[0])
    scores, ids = planted_indexes[index_type].search(queries[0])
    assert len(ids) == len(vectors)
    assert sorted(ids.tolist()) == list(range(len(vectors)))
    np.testing.assert_allclose(scores, exact_scores, atol=1e-5)
    assert ids[:10].tolist() == exact_ids[:10].tolist()


@pytest.fixture(scope="module")
def clustered_set() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (20,000 vectors, 200 held-out queries, their exact top 10)."""
    vectors, queries = clustered(20_000, seed=1), clustered(200, seed=2)
    _, truth = DenseIndex(vectors, index_type="flat").search_batch(queries, 10)
    return vectors, queries, truth


@pytest.mark.parametrize("index_type", ["hnsw", "ivf"])
def test_approximate_recall_against_flat(clustered_set, index_type: str) -> None:
    vectors, queries, truth = clustered_set
    index = DenseIndex(vectors, index_type=index_type)
    _, found = index.search_batch(queries, 10)
    assert recall_at(found, truth) >= 0.95
    single = np.stack([index.search(q, k=10)[1] for q in queries[:20]])
    assert recall_at(single, truth[:20]) >= 0.95


@pytest.mark.parametrize("index_type", TYPES)
def test_serialize_round_trip(planted, planted_indexes, index_type: str) -> None:
    queries = planted[1]
    index = planted_indexes[index_type]
    copy = DenseIndex.deserialize(index.serialize())
    assert (copy.index_type, copy.size) == (index_type, index.size)
    for got, want in zip(copy.search_batch(queries, 10), index.search_batch(queries, 10)):
        np.testing.assert_array_equal(got, want)
    # The search effort travels with the index, so a loaded index keeps its recall.
    if index_type == "hnsw":
        assert copy.faiss_index.hnsw.efSearch == index.faiss_index.hnsw.efSearch
    if index_type == "ivf":
        assert copy.faiss_index.nprobe == index.faiss_index.nprobe > 1


def test_auto_is_flat_for_small_and_approximate_from_the_crossover() -> None:
    assert choose_index_type(0) == choose_index_type(300) == choose_index_type(AUTO_FLAT_BELOW - 1) == "flat"
    assert choose_index_type(AUTO_FLAT_BELOW) == choose_index_type(10**7) == AUTO_APPROXIMATE
    assert choose_index_type(10**7, "flat") == "flat"
    assert choose_index_type(10, "hnsw") == "hnsw"
    # A contract's passages (hundreds) stay exact.
    assert DenseIndex(clustered(600, seed=4)).index_type == "flat"
    assert DenseIndex(clustered(AUTO_FLAT_BELOW, seed=5)).index_type == AUTO_APPROXIMATE


@pytest.mark.parametrize("index_type", TYPES)
def test_tiny_and_empty_indexes(index_type: str) -> None:
    vectors = clustered(7, seed=6)
    index = DenseIndex(vectors, index_type=index_type)
    assert index.search(vectors[3], k=1)[1].tolist() == [3]
    assert len(index.search(vectors[3], k=50)[1]) == 7
    empty = DenseIndex(np.zeros((0, DIM), dtype=np.float32), index_type=index_type)
    assert empty.size == 0 and len(empty.search(vectors[0])[1]) == 0
    assert DenseIndex.deserialize(empty.serialize()).size == 0


def test_unknown_index_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="auto, flat, hnsw or ivf"):
        DenseIndex(clustered(5, seed=7), index_type="annoy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="index_type"):
        load_settings(retrieval={"index_type": "annoy"})


def test_setting_reaches_the_pipeline(tmp_path: Path, sample_pdf: Path) -> None:
    assert Settings().retrieval.index_type == "auto"
    flat = DocPipe(Settings.preset("test", home=tmp_path / "flat"))
    ivf = DocPipe(Settings.preset("test", home=tmp_path / "ivf", retrieval={"index_type": "ivf"}))
    question = "What is the notice period for termination for convenience?"
    doc = ivf.ingest(sample_pdf)
    stored = ivf.store.load_index(doc.id, ivf.fingerprint)
    assert stored is not None
    assert DenseIndex.deserialize(stored["dense.faiss"]).index_type == "ivf"
    # Retrieval ranks every passage, so the approximate index changes nothing in what is found.
    assert [h.section_id for h in ivf.search(sample_pdf, question, k=4)] == [
        h.section_id for h in flat.search(sample_pdf, question, k=4)
    ]


def test_a_forced_index_type_gets_its_own_stored_index(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    auto = DocPipe(Settings.preset("test", home=home))
    hnsw = DocPipe(Settings.preset("test", home=home, retrieval={"index_type": "hnsw"}))
    assert auto.fingerprint != hnsw.fingerprint
    doc = auto.ingest(sample_pdf)
    hnsw.ingest(sample_pdf)  # not served the flat index stored under the same store
    assert DenseIndex.deserialize(hnsw.store.load_index(doc.id, hnsw.fingerprint)["dense.faiss"]).index_type == "hnsw"
