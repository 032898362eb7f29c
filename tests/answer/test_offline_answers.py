"""Offline answers: clauses cut as a lawyer quotes them, the clause picker on the real embedder, "nothing
found" when nothing answers, and `docpipe eval-answers` with its overlap rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.embedders import Counting

from docpipe.answer.extractive import NOTHING_FOUND, extractive_answer
from docpipe.errors import InputError
from docpipe.eval.answers import load_questions, overlaps
from docpipe.ingest.clauses import clause_spans, sentence_spans

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
EVAL = ROOT.parent / "shared" / "eval"

SECTION = (
    "12. TERM AND TERMINATION\n"
    "12.1 Term. This Agreement commences on the Effective Date and continues for an initial term of three (3)\n"
    "years, unless terminated earlier as provided herein.\n"
    "12.2 Termination for Cause. Either Party may terminate this Agreement if the other Party materially\n"
    "breaches it and fails to cure the breach within thirty (30) days after written notice. The cure period\n"
    "applies to each breach separately.\n"
    "12.3 Termination for Convenience. Customer may terminate this Agreement for any reason upon\n"
    "ninety (90) days' prior written notice to the Provider.\n"
    "(a) Upon such termination, Customer shall pay for the Services performed up to the date of termination.\n"
    "(b) Provider shall return all Customer Data within thirty (30) days.\n"
)


def test_clauses_follow_the_numbering_and_keep_their_titles() -> None:
    clauses = [SECTION[c.start : c.end] for c in clause_spans(SECTION)]
    # The bare article title joins the paragraph it opens; each numbered paragraph and item is one clause.
    assert clauses[0].startswith("12. TERM AND TERMINATION\n12.1 Term.")
    assert clauses[1].startswith("12.2 Termination for Cause.") and clauses[1].endswith("each breach separately.")
    assert clauses[2].startswith("12.3 Termination for Convenience.") and "ninety (90) days'" in clauses[2]
    assert clauses[3].startswith("(a) Upon such termination") and clauses[4].startswith("(b) Provider")
    assert len(clauses) == 5


def test_a_long_paragraph_is_quoted_as_runs_of_whole_sentences() -> None:
    sentence = "The Provider shall maintain records of all Services performed under this Agreement for audit. "
    text = "7.1 Records. " + sentence * 20
    clauses = clause_spans(text, max_chars=300)
    assert len(clauses) > 4
    assert all(c.end - c.start <= 300 for c in clauses)
    assert all(text[c.start : c.end].rstrip().endswith(".") for c in clauses)
    # Together the runs cover every sentence, in order, without overlap.
    assert [s for c in clauses for s in c.sentences] == sentence_spans(text)


def test_overlap_rule_of_eval_answers() -> None:
    gold = "This Agreement shall be governed by the laws of the State of New York, without regard to conflicts."
    assert overlaps("12.1 Governing Law. " + gold + " Venue lies in New York County.", gold)  # gold inside
    assert overlaps("governed by the laws of the State of New York, without regard", gold)  # >= 40 chars inside
    assert not overlaps("the State of New York", gold)  # inside, but too short to answer
    # A shared run of min(60, 60% of the gold) characters counts; a shorter one does not.
    assert overlaps("Clause 9: shall be governed by the laws of the State of New York, without regard to choice", gold)
    assert not overlaps("The laws of the State of Texas govern the purchase orders.", gold)


def test_questions_file_must_map_categories_to_questions(tmp_path: Path) -> None:
    good = tmp_path / "q.json"
    good.write_text(json.dumps({"Governing Law": "Which law governs?"}), encoding="utf-8")
    assert load_questions(good) == {"governing law": "Which law governs?"}
    for content in ("[1, 2]", "{}", '{"Governing Law": ""}', "not json"):
        bad = tmp_path / "bad.json"
        bad.write_text(content, encoding="utf-8")
        with pytest.raises(InputError, match="category"):
            load_questions(bad)
    with pytest.raises(InputError, match="does not exist"):
        load_questions(tmp_path / "missing.json")


@pytest.fixture(scope="module")
def sample_pipe(tmp_path_factory: pytest.TempPathFactory):
    from docpipe import DocPipe, Settings

    dp = DocPipe(Settings(home=tmp_path_factory.mktemp("offline")))
    return dp, dp.ingest(SAMPLE)


@pytest.mark.integration
def test_offline_answer_quotes_the_clause_with_its_decisive_sentence_marked(sample_pipe) -> None:
    dp, doc = sample_pipe
    answer = dp.ask(doc, "How much notice does a party need to give to end the agreement for no reason?")
    assert answer.mode == "extractive" and answer.citations
    first = answer.citations[0]
    # The whole numbered clause, verbatim on its page, its answering sentence marked, in bounds.
    assert "ninety (90) days" in first.quote and first.verified and first.page_start == 9
    assert first.quote.lstrip().startswith("12.3") and len(first.quote) <= 700
    assert first.highlight and first.highlight in first.quote and "ninety (90) days" in first.highlight
    assert "**" in answer.text and " ".join(first.highlight.split()) in answer.text
    assert all(c.verified for c in answer.citations)
    assert sum(len(c.quote) for c in answer.citations) <= 3 * 700


@pytest.mark.integration
def test_offline_answer_says_nothing_found_instead_of_quoting_noise(sample_pipe) -> None:
    dp, doc = sample_pipe
    answer = dp.ask(doc, "Is there a source code escrow arrangement with a third-party escrow agent?")
    assert answer.citations == [] and answer.text.startswith(NOTHING_FOUND)
    assert "searched" in answer.text and answer.section_ids
    # The same picker without a floor quotes its best guesses (the floor is what says "nothing found").
    index = dp.index(doc)
    hits = dp.context(doc, answer.question, k=8)
    guessed = extractive_answer(answer.question, hits, index.doc, dp.embedder, min_score=None)
    assert guessed.citations


@pytest.mark.integration
def test_offline_checklist_candidates_are_clauses(sample_pipe) -> None:
    dp, doc = sample_pipe
    report = dp.analyze(doc, categories=["Governing Law", "Source Code Escrow"], use_cache=False)
    found = {f.category: f for f in report.findings}
    law = found["Governing Law"]
    assert law.status == "candidate" and any("State of Delaware" in q.quote for q in law.quotes)
    assert all(q.verified and q.highlight in q.quote for q in law.quotes)
    assert found["Source Code Escrow"].status == "not_found" and not found["Source Code Escrow"].quotes


@pytest.mark.integration
def test_eval_answers_reports_answered_honesty_and_the_naive_anchor(tmp_path: Path) -> None:
    folder = EVAL / "cuad-dev"
    if not (folder / "annotations.jsonl").exists():
        pytest.skip(f"CUAD evaluation data not found at {folder}")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "docpipe",
            "eval-answers",
            str(folder),
            "--questions",
            str(EVAL / "natural_questions_dev.json"),
            "--limit",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "DOCPIPE_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    overall = report["overall"]
    assert report["contracts"] == 2 and report["records"] == 2 * 41
    assert overall["answerable"] + overall["unanswerable"] == 82
    for key in ("answered", "naive_answered", "honest"):
        assert 0.0 <= overall[key] <= 1.0
    assert overall["mean_quote_chars"] > 0 and report["per_category"]
    # The clause picker beats three sentences picked by cosine alone, on the same records.
    assert overall["answered"] > overall["naive_answered"]


def test_eval_answers_refuses_a_bad_per_category(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "docpipe",
            "eval-answers",
            str(tmp_path),
            "--questions",
            "q.json",
            "--per-category",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DOCPIPE_HOME": str(tmp_path)},
    )
    assert result.returncode != 0 and "--per-category must be at least 1" in result.stderr


@pytest.mark.integration
def test_a_new_process_reuses_the_stored_sentence_embeddings(sample_pipe) -> None:
    from docpipe import DocPipe
    from docpipe.answer.stored_vectors import SENTENCE_VECTORS

    dp, doc = sample_pipe
    question = "Which insurance must the Provider carry, and with what limits?"
    first = dp.ask(doc, question, use_cache=False)
    stored = dp.store.index_dir(doc.id, dp.fingerprint) / SENTENCE_VECTORS
    assert stored.is_file() and stored.stat().st_mode & 0o077 == 0
    # A fresh DocPipe (as a new `docpipe ask` would be) embeds the question only, and answers the same.
    counting = Counting(dp.embedder)
    again = DocPipe(dp.settings, embedder=counting).ask(doc, question, use_cache=False)
    assert counting.texts == 1
    assert [c.quote for c in again.citations] == [c.quote for c in first.citations]
    # A damaged file (here cut short) is ignored and written again; the answer does not change.
    stored.write_bytes(stored.read_bytes()[:200])
    counting = Counting(dp.embedder)
    third = DocPipe(dp.settings, embedder=counting).ask(doc, question, use_cache=False)
    assert counting.texts > 1 and [c.quote for c in third.citations] == [c.quote for c in first.citations]
    assert len(stored.read_bytes()) > 200


def test_workbench_shows_the_decisive_sentence_bold_and_escapes_the_rest() -> None:
    from docpipe.types import Answer, Citation
    from docpipe.ui.render import answer_html

    quote = "12.3 Termination. <script>x</script> Either Party may terminate upon ninety (90) days' notice."
    answer = Answer(
        question="q",
        text='1. "12.3 Termination. <script>x</script> **Either Party may terminate upon ninety (90) days\' notice.**"',
        mode="extractive",
        citations=[Citation("s1", "12.3", 9, 9, quote, True, 5.0, highlight=quote[37:])],
        engine="extractive",
        document_id="d",
        fingerprint="f",
        section_ids=["s1"],
    )
    shown = answer_html(answer)
    assert "<b>Either Party may terminate upon ninety (90) days&#x27; notice.</b>" in shown
    assert "<script>" not in shown and "&lt;script&gt;" in shown


def test_a_section_with_no_quotable_sentence_is_skipped_not_a_crash() -> None:
    from docpipe.answer.extractive import rank_clauses
    from docpipe.embed.base import load_embedder
    from docpipe.retrieve.fusion import SentenceCache
    from docpipe.settings import EmbeddingSettings
    from docpipe.types import Hit

    embedder = load_embedder(EmbeddingSettings(model="hashing"))
    bare = Hit("s005", "5. Notices", ("5. Notices",), 3, 3, "Section 5.1.", 0.1, 10, 2, 5597, 5609, role="reference")
    cache = SentenceCache()
    # Only the bare cross-referenced heading in context: nothing to quote, no KeyError (found on cuad-dev).
    assert rank_clauses("Where do notices go?", [bare], embedder, cache) == []
    clause = Hit("s004", "4. Term", ("4. Term",), 2, 2, SECTION, 0.9, 200, 0)
    ranked = rank_clauses("How long is the initial term?", [bare, clause], embedder, cache)
    assert ranked and all(c.hit.section_id == "s004" for c in ranked)


class _Planted:
    """Unpickled, it creates a file: what a planted store file could run if pickles were loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


@pytest.mark.integration
def test_a_planted_pickle_in_the_stored_embeddings_is_never_run(sample_pipe, tmp_path: Path) -> None:
    import io

    import numpy as np

    from docpipe import DocPipe
    from docpipe.answer.stored_vectors import SENTENCE_VECTORS

    dp, doc = sample_pipe
    question = "Who owns the intellectual property in the deliverables?"
    expected = [c.quote for c in dp.ask(doc, question, use_cache=False).citations]
    stored = dp.store.index_dir(doc.id, dp.fingerprint) / SENTENCE_VECTORS
    marker = tmp_path / "ran"
    buffer = io.BytesIO()
    planted = np.empty(1, dtype=object)
    planted[0] = _Planted(marker)
    np.savez(buffer, keys=np.array(json.dumps(["s001"])), a0=planted)
    stored.write_bytes(buffer.getvalue())
    answer = DocPipe(dp.settings, embedder=dp.embedder).ask(doc, question, use_cache=False)
    assert not marker.exists()
    assert [c.quote for c in answer.citations] == expected
