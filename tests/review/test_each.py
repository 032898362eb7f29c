"""Questions about every contract of a collection ("Which contracts ...?"), asked of each contract as a review-grid
column and answered as lists (docpipe.review.each; DocPipe.ask with `each`).

Real parts: generated PDFs, the real extraction worker, the packaged embedder, FAISS, bm25s, the offline grid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.contracts import contract_pdf

from docpipe import DocPipe, Settings
from docpipe.review.each import EACH_NOTICE, each_question


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("Which contracts can be terminated for convenience?", "Can the contract be terminated for convenience?"),
        ("Which contracts are governed by California law?", "Is the contract governed by California law?"),
        (
            "Do any of the agreements have a most favored nation clause?",
            "Does the contract have a most favored nation clause?",
        ),
        ("List all contracts with an exclusivity clause", "Does the contract have an exclusivity clause?"),
        ("How many contracts include a non-compete?", "Does the contract include a non-compete?"),
        ("Which of the contracts in the data room contain audit rights?", "Does the contract contain audit rights?"),
        (
            "Is there any contract that allows assignment without consent?",
            "Does the contract allow assignment without consent?",
        ),
    ],
)
def test_a_question_about_every_contract_is_put_to_each(question: str, asked: str) -> None:
    assert each_question(question) == asked


@pytest.mark.parametrize(
    "question",
    [
        "What is the governing law?",
        "Who are the parties to the Acme agreement?",
        "Which law governs the Acme contract?",
        "Which contracts",
        "Which documents must the Supplier deliver at closing?",
        "What agreements does the Master Agreement incorporate?",
    ],
)
def test_other_questions_are_not(question: str) -> None:
    assert each_question(question) is None


def _contract(seller: str, buyer: str, convenience: bool) -> bytes:
    clauses = [
        f"SUPPLY AGREEMENT between {seller} (Seller) and {buyer} (Buyer).",
        "1. Supply. Seller shall supply the goods listed in Schedule A at the prices stated there.",
        "2. Payment. Buyer shall pay each invoice within thirty days of receipt.",
        "3. Governing Law. This Agreement is governed by the laws of the State of New York.",
    ]
    if convenience:
        clauses.append(
            "4. Termination for Convenience. Either party may terminate this Agreement for convenience at any time "
            "upon ninety days written notice to the other party, without cause."
        )
    else:
        clauses.append("4. Termination. A party may terminate this Agreement only for a material breach not cured.")
    return contract_pdf(*clauses)


@pytest.fixture
def room(tmp_path: Path) -> tuple[DocPipe, object]:
    folder = tmp_path / "room"
    folder.mkdir()
    for seller, buyer, convenience in [
        ("Alder Foods Inc.", "Birch Retail LLC", True),
        ("Cedar Metals Corp.", "Dogwood Tools Inc.", False),
        ("Elm Paper Co.", "Fir Print Ltd.", True),
    ]:
        (folder / f"{seller.split()[0].lower()}.pdf").write_bytes(_contract(seller, buyer, convenience))
    dp = DocPipe(Settings(home=tmp_path / "home"))
    coll = dp.collection("deal-x")
    coll.add(folder)
    yield dp, coll
    dp.close()


def test_which_contracts_is_answered_contract_by_contract(room) -> None:
    dp, coll = room
    answer = dp.ask(coll, "Which contracts can be terminated for convenience?")
    assert answer.notice == EACH_NOTICE
    assert answer.each is not None and answer.collection == "deal-x"
    listed = answer.each["found"] + answer.each["to_check"]
    assert {"alder.pdf", "elm.pdf"} <= set(listed)
    assert sorted(listed + answer.each["not_found"]) == ["alder.pdf", "cedar.pdf", "elm.pdf"]
    assert answer.text.startswith("Asked of each of the 3 contracts of deal-x, one by one.")
    cited = {c.document_name for c in answer.citations}
    assert cited == set(listed)
    assert all(
        c.verified and "convenience" in c.quote.lower() for c in answer.citations if c.document_name != "cedar.pdf"
    )
    assert len(answer.document_ids) == 3


def test_each_can_be_forced_or_refused(room) -> None:
    dp, coll = room
    pooled = dp.ask(coll, "Which contracts can be terminated for convenience?", each=False)
    assert pooled.each is None and pooled.notice != EACH_NOTICE
    forced = dp.ask(coll, "May a party terminate for convenience?", each=True)
    assert forced.each is not None
    assert sorted(sum(forced.each.values(), [])) == ["alder.pdf", "cedar.pdf", "elm.pdf"]


def test_eval_collection_each_scores_both_lists_and_the_pooled_answer(tmp_path: Path) -> None:
    """`docpipe eval-collection DIR --each` on a room built here: terms.jsonl labels two of three contracts Yes for
    termination for convenience; the question asked of each contract lists both, the pooled answer beside it."""
    import csv
    import json
    import subprocess
    import sys

    room = tmp_path / "room"
    (room / "pdf").mkdir(parents=True)
    with (room / "manifest.csv").open("w", newline="") as handle, (room / "terms.jsonl").open("w") as terms:
        writer = csv.writer(handle)
        writer.writerow(["contract_id", "file", "title", "pdf_pages", "records", "pdf_sha256"])
        for seller, buyer, convenience in [
            ("Alder Foods Inc.", "Birch Retail LLC", True),
            ("Cedar Metals Corp.", "Dogwood Tools Inc.", False),
            ("Elm Paper Co.", "Fir Print Ltd.", True),
        ]:
            file = f"pdf/{seller.split()[0].lower()}.pdf"
            (room / file).write_bytes(_contract(seller, buyer, convenience))
            writer.writerow([seller, file, f"Supply Agreement of {seller}", 1, 1, ""])
            terms.write(json.dumps({"file": file, "yes_no": {"Termination For Convenience": convenience}}) + "\n")
    command = [sys.executable, "-m", "docpipe", "eval-collection", str(room), "--each", "--json"]
    done = subprocess.run(command + ["--home", str(tmp_path / "home")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    row = report["each"]["categories"]["Termination For Convenience"]
    assert report["contracts"] == 3 and row["labelled"] == 2
    assert row["recall"] == 1.0 and row["question"] == "Which contracts have a termination for convenience clause?"
    assert report["pooled"]["categories"]["Termination For Convenience"]["labelled"] == 2
    assert report["each"]["overall"]["listed_share"] is not None and report["by_score"][0]["recall"] == 1.0
    (room / "terms.jsonl").unlink()
    bad = subprocess.run(command + ["--home", str(tmp_path / "home")], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "terms.jsonl" in bad.stderr


def test_a_cell_asked_of_each_contract_is_cached_apart_from_a_plain_grid_cell(room) -> None:
    """Asked of each contract, a cell is a candidate at a lower clause score: the cell cache keeps the two apart."""
    dp, coll = room
    dp.ask(coll, "Which contracts can be terminated for convenience?")
    again = dp.ask(coll, "Which contracts can be terminated for convenience?")
    assert again.each is not None
    from dataclasses import replace

    from docpipe.review.each import each_columns

    (column,) = each_columns(["Can the contract be terminated for convenience?"], dp.answering.embedder, dp.settings)
    assert column.min_score == dp.settings.review.each_check_score
    plain = dp.review(coll, columns=[replace(column, min_score=None)])
    assert plain.manifest.cached_cells == []
    assert dp.review(coll, columns=[column]).manifest.cached_cells == [(0, 0), (1, 0), (2, 0)]


def test_the_cli_asks_each_contract_and_refuses_each_without_a_collection(room, tmp_path: Path) -> None:
    import subprocess
    import sys

    dp, coll = room
    home = str(dp.settings.home)
    run = [sys.executable, "-m", "docpipe", "ask", "--home", home]
    done = subprocess.run(
        [*run, "--collection", "deal-x", "Which contracts can be terminated for convenience?"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Asked of each of the 3 contracts of deal-x, one by one." in done.stdout
    assert "alder.pdf (p. 1)" in done.stdout and "Nothing found:" in done.stdout
    pooled = subprocess.run(
        [*run, "--collection", "deal-x", "--no-each", "--json", "Which contracts can be terminated for convenience?"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pooled.returncode == 0, pooled.stderr
    import json

    assert json.loads(pooled.stdout)[0]["each"] is None
    pdf = tmp_path / "one.pdf"
    pdf.write_bytes(_contract("Alder Foods Inc.", "Birch Retail LLC", True))
    bad = subprocess.run([*run, "--each", str(pdf), "Governing law?"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "--each is for a collection's contracts: ask with --collection NAME" in bad.stderr
