"""Reciprocal-rank fusion (`SearchIndex.rank`) and budget fitting (`fit_budget`) on hand-built indexes: each
test fixes the dense and BM25 rankings it needs, so the expected order follows from the RRF formula alone."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from docpipe.embed.base import HashingEmbedder
from docpipe.retrieve.dense import BM25, DenseIndex
from docpipe.retrieve.fusion import SearchIndex, fit_budget
from docpipe.types import Document, Hit, Page, Passage, Section

QUESTION = "indemnity"


def _index(spec: list[tuple[str, float, str]], *, rrf_k: int = 60, hybrid: bool = True) -> SearchIndex:
    """Returns an index over passages given as (section id, dense score, text), in that passage order.

    Passage i's vector makes its cosine with the query exactly its dense score, so the dense ranking is fixed
    by the spec; the text decides the BM25 ranking for `QUESTION`.
    """
    section_ids = list(dict.fromkeys(sid for sid, _, _ in spec))
    offset, passages, body = 0, [], {sid: [] for sid in section_ids}
    for i, (sid, _, text) in enumerate(spec):
        passages.append(Passage(index=i, section_id=sid, start=offset, end=offset + len(text), text=text))
        body[sid].append(text)
        offset += len(text) + 1
    sections = [
        Section(id=sid, heading=sid, heading_path=(sid,), start=0, end=1, page_start=1, page_end=1,
                n_tokens=10, text=" ".join(body[sid]))
        for sid in section_ids
    ]  # fmt: skip
    vectors = np.array([[score, math.sqrt(1 - score**2)] for _, score, _ in spec], dtype=np.float32)
    doc = Document(id="ab" * 32, name="t.pdf", pages=[Page(1, "x")], sections=sections)
    dense = DenseIndex(vectors, index_type="flat")
    return SearchIndex(doc, passages, dense, HashingEmbedder(dim=2), hybrid=hybrid, rrf_k=rrf_k)


def _rank(index: SearchIndex) -> list[Hit]:
    return index.rank(QUESTION, np.array([1.0, 0.0], dtype=np.float32))


def _bm25_order(index: SearchIndex) -> list[int]:
    scores = BM25([p.text for p in index.passages]).scores(QUESTION)
    return sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])


def test_agreement_of_both_rankings_beats_one_first_place() -> None:
    index = _index([("a", 0.9, "notice period"), ("b", 0.8, "indemnity"), ("c", 0.1, "governing law")])

    hits = _rank(index)

    # a: dense 1st only; b: dense 2nd and BM25 1st, so 1/62 + 1/61 > 1/61.
    assert [h.section_id for h in hits] == ["b", "a", "c"]
    assert [h.rank for h in hits] == [0, 1, 2]
    assert hits[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert hits[1].score == pytest.approx(1 / 61)
    assert (hits[0].dense_rank, hits[0].bm25_rank) == (1, 0)
    assert (hits[1].dense_rank, hits[1].bm25_rank) == (0, None)  # no query word: no lexical rank at all


def test_k_weighs_agreement_against_a_single_first_place() -> None:
    # x is dense 1st with no lexical match; y is 4th in both rankings: 1/(k+1) against 2/(k+4), so y wins
    # exactly when k > 2.
    spec = [
        ("x", 0.99, "notice period"),
        ("p", 0.90, "indemnity indemnity indemnity"),
        ("q", 0.80, "indemnity indemnity indemnity for losses"),
        ("r", 0.70, "the indemnity indemnity for losses and claims"),
        ("y", 0.60, "the indemnity for all losses and claims arising"),
    ]
    assert _bm25_order(_index(spec)) == [1, 2, 3, 4]  # the setup: y is 4th lexically, as it is densely

    assert [h.section_id for h in _rank(_index(spec, rrf_k=60))][:2] == ["p", "q"]
    assert [h.section_id for h in _rank(_index(spec, rrf_k=60))].index("y") < 4  # y above x
    assert [h.section_id for h in _rank(_index(spec, rrf_k=60))].index("x") == 4
    order_k1 = [h.section_id for h in _rank(_index(spec, rrf_k=1))]
    assert order_k1.index("x") < order_k1.index("y")
    assert _rank(_index(spec, rrf_k=1))[order_k1.index("x")].score == pytest.approx(1 / 2)


def test_ties_go_to_the_earlier_passage_not_the_dense_winner_or_the_section_id() -> None:
    # Passage 0 is dense 2nd and BM25 1st, passage 1 dense 1st and BM25 2nd: the same fused score.
    index = _index([("zeta", 0.5, "indemnity indemnity"), ("alpha", 0.9, "indemnity and other things")])
    assert _bm25_order(index) == [0, 1]

    hits = _rank(index)

    assert hits[0].score == hits[1].score
    assert [h.section_id for h in hits] == ["zeta", "alpha"]


def test_a_section_appears_once_with_its_best_passage() -> None:
    index = _index(
        [
            ("a", 0.1, "general provisions"),  # a's weak passage
            ("b", 0.5, "payment terms"),
            ("a", 0.9, "indemnity for third-party claims"),  # a's strong passage
        ]
    )

    hits = _rank(index)

    assert [h.section_id for h in hits] == ["a", "b"]
    best = index.passages[2]
    assert (hits[0].passage_start, hits[0].passage_end) == (best.start, best.end)
    assert hits[0].score == pytest.approx(1 / 61 + 1 / 61)  # the strong passage's score, not a sum over a's


def test_dense_only_ranks_by_cosine_without_lexical_ranks() -> None:
    index = _index([("a", 0.2, "indemnity"), ("b", 0.7, "notice"), ("c", 0.4, "law")], hybrid=False)

    hits = _rank(index)

    assert [h.section_id for h in hits] == ["b", "c", "a"]
    assert [h.score for h in hits] == pytest.approx([0.7, 0.4, 0.2], abs=1e-6)
    assert all(h.bm25_rank is None for h in hits)


# -- fit_budget --------------------------------------------------------------------------------------------


def _hit(section_id: str, n_tokens: int, rank: int = 0, role: str = "match") -> Hit:
    return Hit(section_id=section_id, heading=section_id, heading_path=(section_id,), page_start=1, page_end=1,
               text=section_id, score=1.0 / (rank + 2), n_tokens=n_tokens, rank=rank, role=role)  # fmt: skip


def _ids(hits: list[Hit]) -> list[str]:
    return [h.section_id for h in hits]


def test_budget_keeps_rank_order_and_never_overflows() -> None:
    hits = [_hit("a", 50, 0), _hit("b", 40, 1), _hit("c", 30, 2)]
    assert _ids(fit_budget(hits, 100)) == ["a", "b"]  # c would make 120
    assert _ids(fit_budget(hits, 120)) == ["a", "b", "c"]  # exactly the budget fits
    assert _ids(fit_budget(list(reversed(hits)), 100)) == ["c", "b"]  # the given order, not the size


def test_a_section_too_large_is_skipped_and_smaller_ones_still_get_their_turn() -> None:
    hits = [_hit("a", 80, 0), _hit("b", 50, 1), _hit("c", 20, 2), _hit("d", 1, 3)]
    assert _ids(fit_budget(hits, 100)) == ["a", "c"]
    assert _ids(fit_budget(hits, 101)) == ["a", "c", "d"]
    assert fit_budget(hits, 0) == [] and fit_budget([], 100) == []


def test_k_caps_the_number_of_sections() -> None:
    hits = [_hit(s, 10, i) for i, s in enumerate("abcde")]
    assert _ids(fit_budget(hits, 1000, k=2)) == ["a", "b"]
    assert _ids(fit_budget(hits, 1000, k=None)) == list("abcde")
    assert _ids(fit_budget(hits, 25, k=4)) == ["a", "b"]  # the budget binds first


def test_pinned_front_matter_comes_first_when_it_takes_at_most_a_quarter() -> None:
    front = _hit("s000", 25, -1, role="front_matter")
    hits = [_hit("a", 40, 0), _hit("s000", 25, 1), _hit("b", 30, 2)]

    chosen = fit_budget(hits, 100, pinned=front)

    assert _ids(chosen) == ["s000", "a", "b"] and chosen[0].role == "front_matter"  # once, pinned, not ranked
    assert sum(h.n_tokens for h in chosen) <= 100
    assert _ids(fit_budget(hits, 100, k=2, pinned=front)) == ["s000", "a"]  # k counts the pinned section


def test_front_matter_over_a_quarter_of_the_budget_is_not_pinned() -> None:
    front = _hit("s000", 26, -1, role="front_matter")
    hits = [_hit("a", 40, 0), _hit("s000", 26, 1), _hit("b", 30, 2)]

    chosen = fit_budget(hits, 100, pinned=front)

    # Not pinned: the ranked copy takes its turn by rank, like any other section.
    assert _ids(chosen) == ["a", "s000", "b"] and chosen[1].role == "match"
    assert _ids(fit_budget(hits, 104, pinned=replace(front, n_tokens=26))) == ["s000", "a", "b"]  # 26 * 4 <= 104
