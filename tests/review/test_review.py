"""Review grids: every document x every question answered, checked, cached and exported (docpipe.review).

Real parts: generated PDFs and the sample, the real extraction worker, FAISS, the answer cache (SQLite); the
engines are the deterministic echo engine and small real implementations of the engine protocol where a test
needs a reply the echo engine does not give (a fabricated quote, a failing batch). The kill -9 test runs a real
process.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from support.contracts import PARTIES, agreement_pdf

from docpipe import DocPipe, ReviewCancelled, ReviewGrid, Settings
from docpipe.cli import main
from docpipe.engine.base import PRIORITY_BULK, GenerationRequest, GenerationResult
from docpipe.engine.fake import EchoEngine
from docpipe.errors import ConfigError, EngineError
from docpipe.review.run import MAX_COLUMNS

TERMINATION = "What is the notice period for termination for convenience?"
LAW = "Which law governs the agreement?"


class RecordingEngine(EchoEngine):
    """The echo engine, keeping every request it was sent and the batches they came in."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.requests.extend(requests)
        return super().generate(requests)


class FixedReplyEngine(RecordingEngine):
    """Replies `reply` to every request (named like the echo engine so its answers key the same way)."""

    def __init__(self, reply: str) -> None:
        super().__init__()
        self.reply = reply

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.requests.extend(requests)
        self.batch_sizes.append(len(requests))
        return [GenerationResult(text=self.reply) for _ in requests]


class FailingEngine(RecordingEngine):
    """Refuses its `fail_batch`-th batch (1-based), answers the others as the echo engine does."""

    def __init__(self, fail_batch: int) -> None:
        super().__init__()
        self.fail_batch = fail_batch
        self.calls = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.calls += 1
        if self.calls == self.fail_batch:
            raise EngineError("the server refused the batch (test)")
        return super().generate(requests)


@pytest.fixture
def room(tmp_path: Path) -> Path:
    folder = tmp_path / "room"
    folder.mkdir()
    for seller, buyer, notice, law in PARTIES:
        (folder / f"{seller.split()[0].lower()}_supply.pdf").write_bytes(agreement_pdf(seller, buyer, notice, law))
    return folder


def pipe(tmp_path: Path, model=None, **settings) -> DocPipe:
    """A pipe over the store in `tmp_path` answering with the engine `model` (None: the settings choose)."""
    return DocPipe(Settings.preset("test", home=tmp_path / "home", **settings), engine=model)


def test_a_collection_grid_answers_every_cell_from_its_own_contract(tmp_path: Path, room: Path) -> None:
    engine = RecordingEngine()
    dp = pipe(tmp_path, engine)
    coll = dp.collection("deal")
    coll.add(room)
    seen: list = []
    grid = dp.review(coll, questions=[TERMINATION, LAW], categories=["Governing Law"], progress=seen.append)
    assert [c.key for c in grid.columns] == ["Governing Law", TERMINATION, LAW]
    assert len(grid.rows) == 3 and all(len(row) == 3 for row in grid.cells)
    assert seen[-1].done == seen[-1].total == 9 and [p.done for p in seen] == list(range(1, 10))
    terms = {f"{seller.split()[0].lower()}_supply.pdf": (notice, law) for seller, _, notice, law in PARTIES}
    for row in grid.rows:
        notice, law = terms[row.name]
        notice_cell = grid.cell(row.name, TERMINATION)
        assert notice_cell.status == "present" and notice_cell.pages == "p. 1"
        assert any(notice in q.quote for q in notice_cell.verified), notice_cell.quotes
        assert all(q.document_id == row.document_id for q in notice_cell.quotes)
        assert any(law in q.quote for q in grid.cell(row.name, LAW).verified)
    # One stream of bulk batches: every request at bulk priority, the grid's manifest names every document.
    assert {r.priority for r in engine.requests} == {PRIORITY_BULK}
    assert grid.manifest.collection == "deal" and set(grid.manifest.documents_sha256) == {m.id for m in coll}
    assert grid.summary()["done"] == 9 and grid.summary()["failed"] == 0


def _sections(request: GenerationRequest) -> list[str]:
    return re.findall(r'<section id="(s\d+)"', request.messages[-1]["content"])


def test_a_documents_cells_share_their_prompt_up_to_the_question_unless_per_cell(
    tmp_path: Path, sample_pdf: Path
) -> None:
    engine = RecordingEngine()
    dp = pipe(tmp_path, engine, review={"shared_budget_tokens": 32000})
    doc = dp.ingest(sample_pdf)
    columns = {"questions": [TERMINATION, LAW], "categories": ["Insurance", "Parties"]}
    dp.review([sample_pdf], use_cache=False, layout="shared", **columns)
    shared = [r.messages[-1]["content"].rpartition("Question:")[0] for r in engine.requests]
    assert len(shared) == 4 and len(set(shared)) == 1  # one prefix for the document's four cells
    assert _sections(engine.requests[0]) == [s.id for s in doc.sections]  # it fits: the whole contract
    engine.requests.clear()
    dp.review([sample_pdf], use_cache=False, layout="per_cell", **columns)
    own = [r.messages[-1]["content"].rpartition("Question:")[0] for r in engine.requests]
    assert len(own) == 4 and len(set(own)) == 4  # each cell its own sections
    per_cell = [_sections(r) for r in engine.requests]
    # A contract longer than the shared budget: each column's sections in turn, its best one first.
    engine.requests.clear()
    narrow = pipe(tmp_path, engine, review={"shared_budget_tokens": 1500})
    narrow.review([sample_pdf], use_cache=False, layout="shared", **columns)
    narrowed = _sections(engine.requests[0])
    assert len({tuple(_sections(r)) for r in engine.requests}) == 1
    assert set(narrowed) <= set().union(*per_cell) and len(narrowed) < len(doc.sections)
    assert narrowed == sorted(narrowed, key=lambda sid: int(sid[1:]))  # document order
    best = [next(sid for sid in cell if sid != doc.sections[0].id) for cell in per_cell]
    assert sum(sid in narrowed for sid in best) >= 3, (best, narrowed)


def test_the_layout_follows_the_thinking_mode_unless_set(tmp_path: Path, sample_pdf: Path) -> None:
    """Thinking cells are decode-bound (each token reads the cell's whole context): auto gives them their own
    sections; cells that answer directly share the document's context."""
    engine = RecordingEngine()
    dp = pipe(tmp_path, engine)
    columns = {"questions": [TERMINATION, LAW]}
    for mode, layout, prompts in (("think", "per_cell", 2), ("no_think", "shared", 1)):
        engine.requests.clear()
        grid = dp.review([sample_pdf], use_cache=False, mode=mode, **columns)
        assert grid.manifest.layout == layout and grid.manifest.mode == mode
        assert len({r.messages[-1]["content"].rpartition("Question:")[0] for r in engine.requests}) == prompts
    assert (
        pipe(tmp_path, engine, review={"layout": "shared"}).review([sample_pdf], **columns).manifest.layout == "shared"
    )


def test_the_stream_goes_in_batches_of_the_configured_size_in_document_order(tmp_path: Path, room: Path) -> None:
    engine = RecordingEngine()
    dp = pipe(tmp_path, engine, review={"batch_size": 4})
    grid = dp.review(
        sorted(room.iterdir()), checklist=False, categories=["Governing Law", "Parties", "Expiration Date"]
    )
    assert max(engine.batch_sizes) <= 4 and sum(engine.batch_sizes) == 9
    names = [r.messages[-1]["content"].split('name="', 1)[1].split('"', 1)[0] for r in engine.requests]
    assert names == sorted(names, key=[row.name for row in grid.rows].index)  # a document's cells together


def test_a_cell_is_never_present_without_a_verified_quote(tmp_path: Path, sample_pdf: Path) -> None:
    invented = (
        'ANSWER: yes\nFINDING: present\nQUOTES: "the Supplier may terminate at will without any notice" [s001]\nNOTE: x'
    )
    dp = pipe(tmp_path, FixedReplyEngine(invented))
    grid = dp.review([sample_pdf], questions=[TERMINATION])
    cell = grid.cell(0, 0)
    assert cell.status == "uncertain" and cell.quotes and not cell.verified
    assert "none of its quotes" in cell.note
    garbled = pipe(tmp_path / "b", FixedReplyEngine("I think so.")).review([sample_pdf], questions=[TERMINATION])
    assert garbled.cell(0, 0).status == "uncertain" and "format" in garbled.cell(0, 0).note


def test_a_short_answer_and_the_finding_are_read_from_the_reply(tmp_path: Path, sample_pdf: Path) -> None:
    clause = "Either Party may terminate this Agreement, or any Statement of Work, for any reason or no reason"
    doc = pipe(tmp_path).ingest(sample_pdf)
    sid = next(s.id for s in doc.sections if clause in " ".join(s.text.split()))  # the clause's own section
    reply = f'ANSWER: 90 days\nFINDING: present\nQUOTES: "{clause}" [{sid}]\nNOTE: Ninety days of notice.'
    grid = pipe(tmp_path, FixedReplyEngine(reply)).review([sample_pdf], questions=[TERMINATION], layout="per_cell")
    cell = grid.cell(0, 0)
    assert sid in cell.searched, cell.searched  # retrieval gave the model the termination clause
    assert cell.status == "present" and cell.answer == "90 days" and cell.note == "Ninety days of notice."
    assert [q.section_id for q in cell.verified] == [sid] and cell.text == "Yes - 90 days (p. 9)"


def test_offline_cells_are_candidates_or_not_found_never_present(tmp_path: Path, sample_pdf: Path) -> None:
    dp = pipe(tmp_path, engine={"backend": "extractive"})
    grid = dp.review([sample_pdf], checklist=True)
    statuses = {cell.status for cell in grid.cells[0]}
    assert len(grid.columns) == 41 and statuses <= {"candidate", "not_found"} and "candidate" in statuses
    assert grid.manifest.engine == "extractive" and grid.manifest.mode == "extractive"
    candidate = next(c for c in grid.cells[0] if c.status == "candidate")
    assert candidate.verified and candidate.pages


def test_unreadable_documents_fail_their_row_with_the_reason_and_the_rest_goes_on(
    tmp_path: Path, room: Path, sample_pdf: Path
) -> None:
    (room / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    dp = pipe(tmp_path, RecordingEngine())
    grid = dp.review([room, tmp_path / "missing.pdf", sample_pdf], questions=[TERMINATION, LAW])
    names = [r.name for r in grid.rows]
    assert len(grid.rows) == 6 and "broken.pdf" in names and any("missing.pdf" in n for n in names)
    broken = grid.rows[names.index("broken.pdf")]
    assert broken.error and all(c.status == "failed" and c.note for c in grid.cells[names.index("broken.pdf")])
    summary = grid.summary()
    assert summary["failed"] == 4 and summary["done"] == 8
    assert any("no such file" in f for f in summary["failures"]) and any("broken.pdf" in f for f in summary["failures"])
    assert grid.cell("master_services_agreement.pdf", TERMINATION).status == "present"


def test_an_engine_failure_fails_its_cells_only_and_they_are_computed_again(tmp_path: Path, room: Path) -> None:
    files = sorted(room.iterdir())
    dp = pipe(tmp_path, FailingEngine(fail_batch=2), review={"batch_size": 2})
    grid = dp.review(files, questions=[TERMINATION, LAW])
    failed = [(r, c) for r, row in enumerate(grid.cells) for c, cell in enumerate(row) if cell.status == "failed"]
    assert len(failed) == 2 and all("refused the batch" in grid.cells[r][c].note for r, c in failed)
    again = pipe(tmp_path, RecordingEngine()).review(files, questions=[TERMINATION, LAW])
    assert again.summary()["failed"] == 0 and again.summary()["from_cache"] == 4  # failures were not cached


def test_cells_are_cached_by_content_and_the_manifest_says_which(tmp_path: Path, room: Path) -> None:
    files = sorted(room.iterdir())
    first = pipe(tmp_path, RecordingEngine()).review(files, questions=[TERMINATION, LAW])
    engine = RecordingEngine()
    second = pipe(tmp_path, engine).review(files, questions=[TERMINATION, LAW])
    assert engine.requests == [] and second.summary()["from_cache"] == 6
    assert sorted(second.manifest.cached_cells) == [(r, c) for r in range(3) for c in range(2)]
    assert [[c.status for c in row] for row in second.cells] == [[c.status for c in row] for row in first.cells]
    # Another thinking mode is another answer: nothing is served from the first grid's cells.
    other = RecordingEngine()
    pipe(tmp_path, other).review(files, questions=[TERMINATION, LAW], mode="no_think")
    assert len(other.requests) == 6


def test_a_matters_cells_are_never_served_to_another_matter(tmp_path: Path, room: Path) -> None:
    dp = pipe(tmp_path, RecordingEngine())
    for matter in ("alpha", "beta"):
        dp.collection("deal", matter=matter).add(room)
    first = dp.review(dp.collection("deal", matter="alpha"), questions=[TERMINATION])
    second = dp.review(dp.collection("deal", matter="beta"), questions=[TERMINATION])
    assert first.summary()["from_cache"] == 0 and second.summary()["from_cache"] == 0
    assert second.manifest.matter == "beta"


def test_a_cancelled_grid_stops_and_keeps_the_cells_it_finished(tmp_path: Path, room: Path) -> None:
    cancel = threading.Event()
    files = sorted(room.iterdir())

    def progress(event) -> None:
        if event.done >= 2:
            cancel.set()

    engine = RecordingEngine()
    dp = pipe(tmp_path, engine, review={"batch_size": 2})
    with pytest.raises(ReviewCancelled, match="run it again to resume"):
        dp.review(files, questions=[TERMINATION, LAW], progress=progress, cancel=cancel)
    computed = len(engine.requests)
    again = RecordingEngine()
    resumed = pipe(tmp_path, again).review(files, questions=[TERMINATION, LAW])
    # Every cell the engine computed before the grid stopped was kept: none is computed twice.
    assert 2 <= resumed.summary()["from_cache"] == computed < 6
    assert len(again.requests) == 6 - computed


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({}, "needs columns"),
        ({"questions": [TERMINATION, " What is the notice period for  termination for convenience? "]}, "twice"),
        ({"questions": [LAW, LAW.lower()]}, "twice"),
        ({"categories": ["Governing Lawyer"]}, "unknown checklist category"),
        ({"questions": [f"Question {n}?" for n in range(MAX_COLUMNS + 1)]}, "at most"),
        ({"questions": ["x" * 5000]}, "under 2000"),
        ({"questions": [""]}, "question"),
    ],
    ids=["none", "duplicate", "duplicate-case", "unknown-category", "too-many", "too-long", "empty"],
)
def test_bad_columns_are_refused_before_any_work(tmp_path: Path, sample_pdf: Path, columns: dict, message: str) -> None:
    engine = RecordingEngine()
    with pytest.raises(ConfigError, match=message):
        pipe(tmp_path, engine).review([sample_pdf], **columns)
    assert engine.requests == []


def test_exports_hold_every_cell_and_round_trip(tmp_path: Path, room: Path) -> None:
    import openpyxl

    (room / "=HYPERLINK(evil).pdf").write_bytes(agreement_pdf("Evil Corp", "Victim Inc", "ten (10)", "Texas"))
    grid = pipe(tmp_path, RecordingEngine()).review(room, questions=[TERMINATION, LAW])
    assert ReviewGrid.from_dict(json.loads(grid.to_json())).to_dict() == grid.to_dict()
    csv_lines = grid.to_csv().splitlines()
    assert len(csv_lines) == 1 + 4 and csv_lines[0].startswith("document,document_id,")
    assert any(line.startswith("'=HYPERLINK") for line in csv_lines)  # no formula from a file name
    markdown = grid.to_markdown()
    assert markdown.count("\n| ") == 4 and "= 8 cells: 8 done (" in markdown
    book = openpyxl.load_workbook(io.BytesIO(grid.to_xlsx(tmp_path / "grid.xlsx")))
    assert book.sheetnames == ["Review", "Citations", "Manifest"]
    review, citations = book["Review"], book["Citations"]
    assert review.max_row == 5 and review.max_column == 4
    evil = next(row for row in review.iter_rows(min_row=2) if str(row[0].value).startswith("=HYPERLINK"))
    assert evil[0].data_type == "s"  # text, not a formula
    for row in review.iter_rows(min_row=2):
        for cell in row[1:-1]:  # the name first, the SHA-256 last
            target = int(cell.hyperlink.location.rpartition("!A")[2])
            linked = citations.cell(row=target, column=1).value, citations.cell(row=target, column=2).value
            assert linked == (row[0].value, review.cell(row=1, column=cell.column).value)
    assert (tmp_path / "grid.xlsx").read_bytes()[:2] == b"PK"


def test_a_grid_killed_halfway_recomputes_only_the_missing_cells(tmp_path: Path, room: Path) -> None:
    """A real process is killed with SIGKILL after half the cells; the rerun computes only the rest."""
    files = sorted(room.iterdir())
    questions = [TERMINATION, LAW, "Who are the parties?", "How long is the term?"]
    marks = tmp_path / "progress.txt"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from docpipe import DocPipe, Settings
        from docpipe.engine.fake import EchoEngine

        class Slow(EchoEngine):
            def generate(self, requests):
                time.sleep(0.4)
                return super().generate(requests)

        def progress(event):
            with open({str(marks)!r}, "a") as out:
                out.write(f"{{event.done}}\\n")

        dp = DocPipe(Settings.preset("test", home={str(tmp_path / "home")!r}, review={{"batch_size": 1}}), engine=Slow())
        dp.review({[str(f) for f in files]!r}, questions={questions!r}, progress=progress)
        print("finished")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    total = len(files) * len(questions)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and child.poll() is None:
            done = marks.read_text().split() if marks.exists() else []
            if len(done) >= total // 2:
                break
            time.sleep(0.05)
        assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    finished = len(marks.read_text().split())
    assert total // 2 <= finished < total
    engine = RecordingEngine()
    grid = pipe(tmp_path, engine).review(files, questions=questions)
    assert grid.summary()["failed"] == 0
    assert grid.summary()["from_cache"] >= finished - 1  # the batch running when killed may be lost
    assert len(engine.requests) == total - grid.summary()["from_cache"] <= total - finished + 1
    assert len(grid.manifest.cached_cells) == grid.summary()["from_cache"]


def test_the_cli_writes_the_grid_and_exits_1_when_cells_failed(
    tmp_path: Path, room: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import openpyxl

    home = ["--preset", "test", "--home", str(tmp_path / "home"), "--engine", "echo"]
    out = tmp_path / "grid.xlsx"
    assert main(["review", *home, str(room), "-q", TERMINATION, "--categories", "Governing Law", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "3 documents x 2 questions = 6 cells: 6 done" in err
    assert openpyxl.load_workbook(out)["Review"].max_row == 4
    code = main(["review", *home, str(room), str(tmp_path / "nope.pdf"), "-q", TERMINATION, "--format", "csv"])
    captured = capsys.readouterr()
    assert code == 1 and "failed: " in captured.err and "nope.pdf" in captured.err
    assert captured.out.startswith("document,document_id,")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-q", TERMINATION, "-o", "grid.exe"], "cannot tell the format"),
        (["-q", TERMINATION, "--format", "xlsx"], "not printed"),
        (["-q", TERMINATION, "--collection", "deal"], "either a collection or files"),
        ([], "needs columns"),
    ],
    ids=["suffix", "xlsx-to-terminal", "both", "no-columns"],
)
def test_the_cli_refuses_bad_arguments_with_a_fix(
    tmp_path: Path, sample_pdf: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    home = ["--preset", "test", "--home", str(tmp_path / "home"), "--engine", "echo"]
    assert main(["review", *home, str(sample_pdf), *argv]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "home" / "documents").exists() or argv == []  # refused before extracting anything


def test_a_question_asked_while_a_grid_runs_goes_ahead_of_the_grids_waiting_batch(tmp_path: Path, room: Path) -> None:
    """The in-process engine runs one batch at a time behind the batcher: a question asked while a grid batch
    runs and the next one waits runs next, ahead of the waiting grid batch."""
    from docpipe.engine.base import PRIORITY_INTERACTIVE
    from docpipe.engine.batcher import BatchingEngine

    class Slow(RecordingEngine):
        def __init__(self) -> None:
            super().__init__()
            self.started = 0
            self.batches: list[list[int]] = []

        def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
            self.started += 1
            time.sleep(0.2)
            self.batches.append([r.priority for r in requests])
            return super().generate(requests)

    slow = Slow()
    engine = BatchingEngine(slow, max_batch_size=2, batch_timeout_ms=1)
    dp = pipe(tmp_path, engine, review={"batch_size": 2})
    files = sorted(room.iterdir())
    dp.context(files[0], LAW)  # the question's document is ready: only the engine decides when it is answered
    questions = [TERMINATION, LAW, "Who are the parties?", "How long is the term?"]
    seen: dict = {}

    def ask() -> None:
        deadline = time.monotonic() + 30
        while engine.queue_depth < 2 and time.monotonic() < deadline:  # a grid batch waits behind a running one
            time.sleep(0.005)
        seen["next"] = slow.started  # the index the next batch to start will have
        seen["answer"] = dp.ask(files[0], LAW, use_cache=False)

    asker = threading.Thread(target=ask)
    try:
        asker.start()
        grid = dp.review(files, questions=questions, use_cache=False)
        asker.join(30)
    finally:
        engine.close()
    assert grid.summary()["done"] == 12 and seen["answer"].citations
    assert slow.batches[seen["next"]] == [PRIORITY_INTERACTIVE], (seen["next"], slow.batches)
