"""End to end on the bundled sample and real CUAD contracts: real extraction, real MiniLM, real FAISS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docpipe import DocPipe, EmptyFileError, FileMissingError, NotAPDFError, Settings
from docpipe.answer.verify import verify_quote
from docpipe.ingest.passages import embedding_text

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
FACTS = json.loads((ROOT / "samples" / "expected.json").read_text())
EVAL = ROOT.parent / "shared" / "eval"
KEY_QUESTION = "What is the notice period for termination for convenience?"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dp(tmp_path_factory: pytest.TempPathFactory) -> DocPipe:
    return DocPipe(Settings(home=tmp_path_factory.mktemp("store")))


@pytest.fixture(scope="module")
def sample(dp: DocPipe):
    return dp.ingest(SAMPLE)


def test_sample_is_extracted_page_by_page_and_sectioned_by_its_clauses(sample) -> None:
    assert len(sample.pages) == 15
    assert [p.number for p in sample.pages] == list(range(1, 16))
    assert set(sample.page_statuses.values()) == {"ok"}
    assert sample.warnings == []
    headings = [" > ".join(s.heading_path) for s in sample.sections]
    assert any(h.endswith("12.3 Termination for Convenience") and "ARTICLE 12" in h for h in headings)
    assert any(h.startswith("EXHIBIT A") for h in headings)
    assert any(h.startswith("SCHEDULE 1") for h in headings)
    section = next(s for s in sample.sections if s.heading == "12.3 Termination for Convenience")
    assert (section.page_start, section.page_end) == (9, 9)
    assert "ninety (90) days' prior written notice" in " ".join(section.text.split())


def test_every_embedded_passage_fits_the_embedder(dp: DocPipe, sample) -> None:
    index = dp.index(sample)
    model = dp.embedder._load_torch_model()  # the sentence-transformers model is the judge of its own limit
    tokenizer = model.tokenizer
    limit = model.max_seq_length
    sections = {s.id: s for s in sample.sections}
    lengths = [
        len(tokenizer(embedding_text(p, sections[p.section_id], dp.embedder))["input_ids"]) for p in index.passages
    ]
    assert max(lengths) <= limit
    # Passages are sized to the limit, not far below it: long sections produce near-full windows.
    assert max(lengths) >= limit - 40
    assert {p.section_id for p in index.passages} == set(sections)


def test_search_finds_the_clause_for_each_sample_fact(dp: DocPipe, sample) -> None:
    found = 0
    for fact in FACTS:
        hits = dp.search(sample, fact["question"], k=4)
        assert len(hits) <= 4
        if any(fact["expected"] in " ".join(h.text.split()) for h in hits):
            found += 1
    assert found >= len(FACTS) - 2, f"only {found}/{len(FACTS)} facts retrieved in the top 4"
    top = dp.search(sample, KEY_QUESTION, k=1)[0]
    assert top.heading == "12.3 Termination for Convenience"
    assert top.page_start == 9


def test_exact_contract_terms_are_found_by_the_lexical_side(dp: DocPipe, sample) -> None:
    hits = dp.search(sample, "Most Favored Customer", k=3)
    assert hits[0].heading.endswith("Most Favored Customer")
    assert hits[0].bm25_rank == 0


def test_ask_quotes_the_clause_verbatim_with_its_page(dp: DocPipe, sample) -> None:
    answer = dp.ask(sample, KEY_QUESTION)
    assert answer.mode == "extractive" and answer.engine == "extractive"
    assert answer.thinking is None
    assert "Qwen3-14B" in answer.notice
    best = answer.citations[0]
    assert "ninety (90) days" in " ".join(best.quote.split())
    assert best.verified and best.page_start == 9 and best.section_id in answer.section_ids
    assert all(c.verified for c in answer.citations)
    assert answer.document_id == sample.id and answer.fingerprint == dp.fingerprint
    assert "ninety (90) days" in answer.text and "p. 9" in answer.text
    # A path works as well as a Document, and comes from the store.
    assert dp.ask(SAMPLE, KEY_QUESTION).citations[0].quote == best.quote


def test_context_holds_front_matter_and_keeps_document_order_within_budget(dp: DocPipe, sample) -> None:
    context = dp.context(sample, KEY_QUESTION, budget_tokens=2048, k=50)
    assert context[0].section_id == sample.sections[0].id  # title, parties, date
    positions = [next(i for i, s in enumerate(sample.sections) if s.id == h.section_id) for h in context]
    assert positions == sorted(positions)
    assert sum(h.n_tokens for h in context) <= 2048
    assert any(h.heading == "12.3 Termination for Convenience" for h in context)


def test_quotes_are_verified_against_page_text(sample) -> None:
    assert verify_quote("Either Party may terminate   this Agreement,\n or any Statement of Work", sample)[0]
    ok, first, last = verify_quote("ninety (90) days' prior written notice", sample)
    assert (ok, first, last) == (True, 9, 9)
    assert verify_quote("either party may terminate on thirty (30) days' notice", sample) == (False, 0, 0)


def test_bad_input_gives_specific_errors(dp: DocPipe, tmp_path: Path) -> None:
    with pytest.raises(FileMissingError, match="no such file"):
        dp.ingest(tmp_path / "missing.pdf")
    (tmp_path / "empty.pdf").write_bytes(b"")
    with pytest.raises(EmptyFileError, match="empty"):
        dp.ingest(tmp_path / "empty.pdf")
    (tmp_path / "notes.pdf").write_text("These are meeting notes, not a PDF.")
    with pytest.raises(NotAPDFError, match="not a PDF"):
        dp.ingest(tmp_path / "notes.pdf")


def test_real_cuad_contract_answers_with_verified_citations(dp: DocPipe) -> None:
    pdf = EVAL / "cuad-dev" / "pdf" / "MEDALISTDIVERSIFIEDREIT_INC_05_18_2020-EX-10.1-CONSULTING_AGREEMENT.pdf"
    if not pdf.exists():
        pytest.skip(f"CUAD contract not found at {pdf}")
    doc = dp.ingest(pdf)
    hits = dp.search(doc, "Which state's law governs this agreement?", k=4)
    assert any("Governing Law" in h.heading for h in hits)
    answer = dp.ask(doc, "Which state's law governs this agreement?")
    assert answer.citations and all(c.verified for c in answer.citations)
    assert "laws of the Commonwealth of Virginia" in " ".join(answer.citations[0].quote.split())
    assert answer.citations[0].heading.startswith("9.6 Governing Law")
