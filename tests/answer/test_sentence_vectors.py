"""The document's sentence embeddings: made once, in one batched pass (at ingestion by default), stored beside
the index, read by every later process; refused and made again when another embedder made them; the answers
and grid cells they give are those of sentences embedded on the spot."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.cli import run_cli
from support.contracts import CONTRACTS
from support.embedders import Counting

from docpipe.embed.table import VectorTable, digest, maker
from docpipe.ingest.sentences import SENTENCE_VECTORS, document_texts

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
QUESTIONS = [
    "How much notice does a party need to give to end the agreement for no reason?",
    "Which insurance must the Provider carry, and with what limits?",
    "Which law governs the agreement?",
]


def _hashing(home: Path, **embedding):
    """Returns a DocPipe on the hashing embedder whose settings name it as wrappers of it do (hashing-384)."""
    from docpipe import DocPipe, HashingEmbedder, Settings

    return DocPipe(Settings.preset("test", home=home, embedding=embedding), embedder=HashingEmbedder())


def _table_file(dp, doc) -> Path:
    return dp.store.index_dir(doc.id, dp.fingerprint) / SENTENCE_VECTORS


def test_a_table_keeps_vectors_by_text_and_round_trips() -> None:
    table = VectorTable("fp:e:x:3", dim=3)
    table.add(["a.", "b.", "a."], np.eye(3, dtype=np.float32))
    assert len(table) == 2 and table.missing(["a.", "c.", "c."]) == ["c."]
    assert table.rows(["b.", "a."]).tolist() == [[0, 1, 0], [1, 0, 0]]  # a text keeps its first vector
    with pytest.raises(KeyError, match="c."):
        table.rows(["c."])
    table.complete = True
    again = VectorTable.load(table.dump(), made_by="fp:e:x:3", dim=3)
    assert again.complete and again.rows(["a.", "b."]).tolist() == table.rows(["a.", "b."]).tolist()
    other = VectorTable("", dim=3)
    other.add(["c."], np.ones((1, 3), dtype=np.float32))
    again.merge(other)
    assert again.missing(["a.", "b.", "c."]) == []


def test_a_table_of_another_embedder_or_damaged_is_refused() -> None:
    table = VectorTable("fp1:all-MiniLM-L6-v2:openvino:3", dim=3)
    table.add(["a."], np.ones((1, 3), dtype=np.float32))
    data = table.dump()
    with pytest.raises(ValueError, match="made by"):
        VectorTable.load(data, made_by="fp2:all-MiniLM-L6-v2:openvino:3", dim=3)
    with pytest.raises(ValueError, match="not a table"):
        VectorTable.load(data[:100], made_by=table.made_by, dim=3)
    # Digests and vectors that do not pair up are refused, not read out of step.
    buffer = io.BytesIO()
    meta = json.dumps({"made_by": table.made_by, "dim": 3, "complete": True})
    np.savez(buffer, meta=np.array(meta), digests=np.zeros((2, 16), np.uint8), vectors=np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match="shape"):
        VectorTable.load(buffer.getvalue(), made_by=table.made_by, dim=3)
    assert len(digest("x")) == 16 and digest("x") != digest("x ")


def test_ingestion_stores_every_sentence_and_the_first_question_embeds_only_itself(tmp_path: Path) -> None:
    dp = _hashing(tmp_path / "home")
    doc = dp.ingest(SAMPLE)
    stored = _table_file(dp, doc)
    assert stored.is_file() and stored.stat().st_mode & 0o077 == 0
    table = VectorTable.load(stored.read_bytes(), made_by=maker(dp.fingerprint, dp.embedder), dim=dp.embedder.dim)
    assert table.complete and table.missing(document_texts(doc.sections)) == []
    # A new DocPipe (a new process's view of the store): its first question embeds the question, nothing else.
    from docpipe import DocPipe

    for question in QUESTIONS:
        counting = Counting(dp.embedder)
        answer = DocPipe(dp.settings, embedder=counting).ask(doc, question, use_cache=False)
        assert answer.citations and counting.texts == 1, (question, counting.texts)


def test_sentences_made_on_first_use_are_one_batched_pass_and_stored(tmp_path: Path) -> None:
    from docpipe import DocPipe

    dp = _hashing(tmp_path / "home", sentence_vectors="first_use")
    doc = dp.ingest(SAMPLE)
    stored = _table_file(dp, doc)
    assert not stored.exists()
    counting = Counting(dp.embedder)
    first = DocPipe(dp.settings, embedder=counting).ask(doc, QUESTIONS[0], use_cache=False)
    # The question, then every sentence and heading of the document in one call.
    assert counting.calls == 2 and counting.texts == 1 + len(document_texts(doc.sections))
    assert stored.is_file()
    counting = Counting(dp.embedder)
    again = DocPipe(dp.settings, embedder=counting).ask(doc, QUESTIONS[0], use_cache=False)
    assert counting.texts == 1 and [c.quote for c in again.citations] == [c.quote for c in first.citations]


@pytest.mark.integration
def test_a_store_made_by_another_process_is_read_not_embedded_again(tmp_path: Path) -> None:
    from docpipe import DocPipe, Settings

    home = tmp_path / "home"
    done = run_cli(home, "ingest", SAMPLE)
    assert done.returncode == 0, done.stderr
    counting = Counting(DocPipe(Settings(home=tmp_path / "other")).embedder)
    dp = DocPipe(Settings(home=home), embedder=counting)
    answers = dp.ask_many(SAMPLE, QUESTIONS, use_cache=False)
    assert all(a.citations for a in answers) and counting.texts == len(QUESTIONS)


@pytest.mark.integration
def test_a_table_another_embedder_made_is_made_again(tmp_path: Path) -> None:
    from docpipe import DocPipe, Settings

    hashing = _hashing(tmp_path / "home")
    doc = hashing.ingest(SAMPLE)
    minilm = DocPipe(Settings(home=tmp_path / "home"))
    assert minilm.fingerprint != hashing.fingerprint
    expected = [[c.quote for c in a.citations] for a in minilm.ask_many(SAMPLE, QUESTIONS, use_cache=False)]
    own = _table_file(minilm, doc)
    # The hashing embedder's table (same width, 384) put where MiniLM's belongs: a store copied by hand, or a
    # table written before the embedder changed. Its vectors must not be scored against MiniLM's questions.
    shutil.copyfile(_table_file(hashing, doc), own)
    fresh = DocPipe(Settings(home=tmp_path / "home"))
    got = [[c.quote for c in a.citations] for a in fresh.ask_many(SAMPLE, QUESTIONS, use_cache=False)]
    assert got == expected
    made_by = maker(fresh.fingerprint, fresh.embedder)
    assert VectorTable.load(own.read_bytes(), made_by=made_by, dim=fresh.embedder.dim).complete


@pytest.mark.integration
def test_stored_sentences_give_the_answers_and_cells_of_sentences_embedded_on_the_spot(
    eval_dir: Path, tmp_path: Path
) -> None:
    from docpipe import DocPipe, Settings
    from docpipe.answer.extractive import extractive_answer

    pdfs = sorted((eval_dir / "cuad-dev" / "pdf").glob("*.pdf"))[:2]
    questions = list(json.loads((eval_dir / "natural_questions_dev.json").read_text()).values())[:12]
    stored = DocPipe(Settings(home=tmp_path / "stored"))
    on_the_spot = DocPipe(Settings(home=tmp_path / "spot", embedding={"sentence_vectors": "first_use"}))
    for pdf in pdfs:
        answers = stored.ask_many(pdf, questions, use_cache=False)
        for answer in answers:
            # The same picker over the same sections, every sentence embedded now, nothing read from the store.
            hits = stored.context(pdf, answer.question, k=stored.settings.engine.extractive_k)
            spot = extractive_answer(
                answer.question,
                hits,
                stored.index(pdf).doc,
                stored.embedder,
                clauses=stored.settings.engine.extractive_clauses,
                min_score=stored.settings.extractive_floor(),
            )
            assert [c.quote for c in answer.citations] == [c.quote for c in spot.citations], answer.question
    grids = [dp.review(pdfs, checklist=True, use_cache=False) for dp in (stored, on_the_spot)]
    cells = [[[(c.status, [q.quote for q in c.quotes]) for c in row] for row in grid.cells] for grid in grids]
    assert cells[0] == cells[1]
    assert sum(c.status == "candidate" for row in grids[0].cells for c in row) > 20


def test_an_offline_grid_embeds_its_column_questions_and_nothing_else(tmp_path: Path) -> None:
    from docpipe import DocPipe

    dp = _hashing(tmp_path / "home")
    docs = [dp.ingest(SAMPLE), dp.ingest(CONTRACTS["globex-license.pdf"], name="globex-license.pdf")]
    counting = Counting(dp.embedder)
    grid = DocPipe(dp.settings, embedder=counting).review(docs, checklist=True, use_cache=False)
    assert grid.summary()["done"] == 2 * 41 and not grid.summary()["failures"]
    # One call for the 41 columns' queries: every sentence a cell scores comes from the stored tables.
    assert counting.calls == 1 and counting.texts == 41


def test_sentences_are_embedded_at_ingestion_unless_a_model_answers() -> None:
    from docpipe import Settings
    from docpipe.ingest.sentences import at_ingestion

    assert at_ingestion(Settings()) and at_ingestion(Settings(engine={"backend": "extractive"}))
    assert not at_ingestion(Settings(engine={"url": "http://127.0.0.1:8000/v1"}))
    assert not at_ingestion(Settings(engine={"backend": "vllm"}))
    assert at_ingestion(Settings(engine={"backend": "vllm"}, embedding={"sentence_vectors": "ingest"}))
    assert not at_ingestion(Settings(embedding={"sentence_vectors": "first_use"}))
