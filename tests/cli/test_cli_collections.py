"""`docpipe` over collections as users run it: real subprocesses (`python -m docpipe`), the store in a
temporary DOCPIPE_HOME, the fast `test` preset (hashing embedder), three small contracts built here.

ingest --collection (report, exit status, resumable rerun, progress bars on a terminal), ask and search
--collection (every hit and citation names its document), collections, ls, rm (from a collection, the
collection itself, from the store and so from every collection), and the abuse of each argument that takes
outside input (collection names, document ids).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import TIMEOUT_S, cli_env, run_cli

NAMES = ("falcon_supply.pdf", "heron_license.pdf", "osprey_services.pdf")
# Names Heron's contract by its parties and kind: routed to it alone, whose notice period is 120 days.
HERON_QUESTION = "Heron Software Ltd. and Maple Bank plc license agreement: what notice is needed to terminate?"
# Names no contract: answered from the best sections of all three.
LAW_QUESTION = "Which law governs the agreement?"

CONTRACTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "falcon_supply.pdf": (
        'SUPPLY AGREEMENT between Falcon Industries Inc. ("Falcon") and Orbit Retail LLC ("Orbit")',
        [
            ("1. Products", "Falcon shall supply Orbit with the goods listed in Exhibit A."),
            ("2. Term", "This Agreement lasts three (3) years from the Effective Date."),
            ("3. Termination", "Orbit may terminate this Agreement upon sixty (60) days' prior written notice."),
            ("4. Governing Law", "This Agreement is governed by the laws of the State of Delaware."),
        ],
    ),
    "heron_license.pdf": (
        'LICENSE AGREEMENT between Heron Software Ltd. ("Heron") and Maple Bank plc ("Maple Bank")',
        [
            ("1. Grant of License", "Heron grants Maple Bank a non-exclusive licence to use the Heron Software."),
            ("2. Fees", "Maple Bank shall pay Heron an annual licence fee of fifty thousand dollars."),
            (
                "3. Termination",
                "Maple Bank may terminate this Agreement upon one hundred twenty (120) days' prior written notice.",
            ),
            ("4. Governing Law", "This Agreement is governed by the laws of England and Wales."),
        ],
    ),
    "osprey_services.pdf": (
        'SERVICES AGREEMENT between Osprey Consulting GmbH ("Osprey") and Cedar Health Inc. ("Cedar Health")',
        [
            ("1. Services", "Osprey shall provide Cedar Health the consulting services of each Statement of Work."),
            ("2. Payment", "Invoices are payable within forty-five (45) days of receipt."),
            (
                "3. Termination",
                "Cedar Health may terminate this Agreement upon thirty (30) days' prior written notice.",
            ),
            ("4. Governing Law", "This Agreement is governed by the laws of the State of New York."),
        ],
    ),
}


def _contract_pdf(title: str, clauses: list[tuple[str, str]]) -> bytes:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=letter)
    pdf.setFont("Helvetica-Bold", 11)
    pdf.drawString(50, 740, title)
    y = 710
    for number, (heading, body) in enumerate(clauses):
        if number == 2:  # two pages each: citations carry a page
            pdf.showPage()
            y = 740
        pdf.setFont("Helvetica-Bold", 11)
        pdf.drawString(50, y, heading)
        pdf.setFont("Helvetica", 10)
        pdf.drawString(50, y - 18, body)
        y -= 48
    pdf.save()
    return buffer.getvalue()


def _run(home: Path, *args: Any) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, "--preset", "test")


def _json(home: Path, *args: Any) -> Any:
    result = _run(home, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("docpipe: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def contracts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a data-room folder: the three contracts, and in a subfolder a broken PDF and a text file (a
    file found in a subfolder goes by its path inside the folder)."""
    folder = tmp_path_factory.mktemp("dataroom") / "dataroom"
    (folder / "licences").mkdir(parents=True)
    for name, (title, clauses) in CONTRACTS.items():
        (folder / name).write_bytes(_contract_pdf(title, clauses))
    (folder / "licences" / "broken.pdf").write_text("minutes of the kick-off meeting, saved with the wrong name\n")
    (folder / "licences" / "readme.txt").write_text("not a contract: folders contribute their .pdf files only\n")
    return folder


def _ids(contracts: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in contracts.rglob("*.pdf") if p.name in NAMES}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-collections") / "home"


@pytest.fixture(scope="module")
def first_ingest(home: Path, contracts: Path) -> subprocess.CompletedProcess[str]:
    """Returns the first `ingest --collection deal` of the data room (JSON): the collection the
    module's read-only tests ask."""
    return _run(home, "ingest", "--collection", "deal", contracts, "--json")


@pytest.fixture
def deal(home: Path, first_ingest: subprocess.CompletedProcess[str]) -> Path:
    assert first_ingest.returncode == 1, first_ingest.stderr  # the broken file fails; the rest is added
    return home


@pytest.fixture
def own_home(tmp_path: Path, contracts: Path) -> Path:
    """Returns a store of the test's own holding the data room as collection deal (for tests that delete)."""
    home = tmp_path / "home"
    result = _run(home, "ingest", "--collection", "deal", contracts, "--json")
    assert result.returncode == 1 and len(json.loads(result.stdout)["added"]) == 3, result.stderr
    return home


# -- ingest ------------------------------------------------------------------------------------------------


def test_ingest_folder_adds_the_contracts_and_reports_the_broken_file(
    first_ingest: subprocess.CompletedProcess[str], home: Path, contracts: Path
) -> None:
    assert first_ingest.returncode == 1, "a failed file must make the exit status non-zero"
    assert "Traceback" not in first_ingest.stderr
    report = json.loads(first_ingest.stdout)
    assert report["collection"] == "deal"
    assert sorted(m["name"] for m in report["added"]) == sorted(NAMES)
    assert {m["id"] for m in report["added"]} == set(_ids(contracts).values())
    assert all(m["pages"] == 2 for m in report["added"])
    assert report["present"] == []
    assert report["extracted_pages"] == 6
    [failed] = report["failed"]
    assert failed["file"] == "licences/broken.pdf" and "not a PDF" in failed["reason"]
    assert "readme" not in first_ingest.stdout  # a folder contributes its PDFs only
    for doc_id in _ids(contracts).values():
        assert (home / "docs" / doc_id / "source.pdf").is_file()


def test_rerun_skips_every_contract_and_extracts_nothing(deal: Path, contracts: Path) -> None:
    again = _run(deal, "ingest", "--collection", "deal", contracts, "--json")
    assert again.returncode == 1  # the broken file still fails
    report = json.loads(again.stdout)
    assert report["added"] == []
    assert sorted(m["name"] for m in report["present"]) == sorted(NAMES)
    assert report["extracted_pages"] == 0
    assert [f["file"] for f in report["failed"]] == ["licences/broken.pdf"]

    human = _run(deal, "ingest", "--collection", "deal", contracts)
    assert human.returncode == 1
    lines = human.stdout.splitlines()
    assert lines[0].startswith("collection deal: 0 added, 3 already in it, 1 failed (nothing new, ")
    assert lines[1].startswith("  failed: licences/broken.pdf: ") and "not a PDF" in lines[1]
    assert len(lines) == 2, human.stdout
    # Stored already, added to another collection: said so, not "0 pages extracted" (which reads as a failure).
    other = _run(deal, "ingest", "--collection", "other", contracts)
    assert other.stdout.startswith("collection other: 3 added, 0 already in it, 1 failed (already stored: nothing")
    assert _run(deal, "rm", "--collection", "other", "--all").returncode == 0  # the tests after see one collection


def test_ingest_of_good_files_only_exits_zero_and_names_each_file(tmp_path: Path, contracts: Path) -> None:
    home = tmp_path / "home"
    files = sorted(contracts.rglob("*.pdf"))
    result = _run(home, "ingest", "--collection", "two", *[f for f in files if f.name in NAMES[:2]], "--workers", 1)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("collection two: 2 added, 0 already in it, 0 failed")
    assert _json(home, "collections") == [{"name": "two", "documents": 2, "pages": 4}]


def test_progress_bars_go_to_a_terminal_and_stdout_holds_only_the_result(tmp_path: Path, contracts: Path) -> None:
    home = tmp_path / "home"
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal has a size
    process = subprocess.Popen(
        [sys.executable, "-m", "docpipe", "ingest", "--collection", "deal", str(contracts), "--preset", "test"],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=terminal,
        text=True,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    stdout, _ = process.communicate(timeout=TIMEOUT_S)
    assert process.returncode == 1
    assert stdout.startswith("collection deal: 3 added, 0 already in it, 1 failed")
    bars = shown.decode(errors="replace")
    assert "files" in bars and "embedded" in bars, bars
    assert "4/4" in bars, bars  # the file bar reached every file, the broken one included
    assert "3 added" not in bars


def test_ingest_of_nothing_to_add_says_why(tmp_path: Path, contracts: Path) -> None:
    home = tmp_path / "home"
    empty = tmp_path / "empty"
    empty.mkdir()
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "notes.txt").write_text("no contracts here\n")
    for folder in (empty, texts):
        result = _run(home, "ingest", "--collection", "x", folder, "--json")
        assert result.returncode == 1
        [failed] = json.loads(result.stdout)["failed"]
        assert failed["file"] == str(folder) and "holds no .pdf or .docx file" in failed["reason"]
    missing = _run(home, "ingest", "--collection", "x", tmp_path / "nowhere")
    assert missing.returncode == 1 and "no such file or folder" in missing.stdout
    _assert_one_line_error(
        _run(home, "ingest", "--collection", "x", contracts, "--workers", 0), "--workers must be at least 1"
    )


def test_ingest_without_collection_is_unchanged(tmp_path: Path, contracts: Path) -> None:
    home = tmp_path / "home"
    heron = next(contracts.rglob("heron_license.pdf"))
    result = _run(home, "ingest", heron, contracts / "falcon_supply.pdf", "--json")
    assert result.returncode == 0, result.stderr
    assert [d["name"] for d in json.loads(result.stdout)] == ["heron_license.pdf", "falcon_supply.pdf"]
    assert _json(home, "collections") == []
    folder = _run(home, "ingest", contracts)
    assert folder.returncode == 1 and folder.stdout.startswith(f"FAILED  {contracts}: ")
    _assert_one_line_error(_run(home, "ingest", heron, "--workers", 2), "add --collection NAME")


# -- ask and search ---------------------------------------------------------------------------------------


def test_ask_naming_one_contract_answers_from_it(deal: Path, contracts: Path) -> None:
    heron = _ids(contracts)["heron_license.pdf"]
    [answer] = _json(deal, "ask", "--collection", "deal", HERON_QUESTION)
    assert answer["collection"] == "deal"
    assert answer["document_id"] == heron and answer["document_name"] == "heron_license.pdf"
    assert answer["citations"], answer
    assert {(c["document_id"], c["document_name"]) for c in answer["citations"]} == {(heron, "heron_license.pdf")}
    assert any("one hundred twenty (120) days" in c["quote"] for c in answer["citations"])

    human = _run(deal, "ask", "--collection", "deal", HERON_QUESTION)
    assert human.returncode == 0, human.stderr
    assert f"answered from heron_license.pdf ({heron[:12]})" in human.stdout
    sources = human.stdout.split("Sources:")[1].split("\n\n")[0].strip().splitlines()
    assert sources and all(f"heron_license.pdf ({heron[:12]}), section " in line for line in sources), sources


def test_ask_naming_none_cites_each_quote_with_its_contract(deal: Path, contracts: Path) -> None:
    ids = _ids(contracts)
    [answer] = _json(deal, "ask", "--collection", "deal", LAW_QUESTION)
    assert answer["collection"] == "deal"
    assert set(answer["document_ids"]) == set(ids.values())
    cited = {c["document_name"]: c for c in answer["citations"]}
    assert set(cited) == set(NAMES)
    assert "England and Wales" in cited["heron_license.pdf"]["quote"]
    assert "Delaware" in cited["falcon_supply.pdf"]["quote"]
    for citation in answer["citations"]:
        assert citation["document_id"] == ids[citation["document_name"]]

    human = _run(deal, "ask", "--collection", "deal", LAW_QUESTION).stdout
    assert "answered from 3 contracts" in human
    for name in NAMES:
        assert f"{name} ({ids[name][:12]}), section " in human


def test_search_lists_hits_with_their_documents(deal: Path, contracts: Path) -> None:
    ids = _ids(contracts)
    hits = _json(deal, "search", "--collection", "deal", LAW_QUESTION)
    assert 1 <= len(hits) <= 4
    assert {h["document_name"] for h in hits} == set(NAMES)
    for hit in hits:
        assert hit["document_id"] == ids[hit["document_name"]]
        assert 1 <= hit["page_start"] <= hit["page_end"] <= 2

    human = _run(deal, "search", "--collection", "deal", LAW_QUESTION)
    assert human.returncode == 0, human.stderr
    heads = [line for line in human.stdout.splitlines() if not line.startswith(" ")]
    assert len(heads) == len(hits)
    for line, hit in zip(heads, hits):
        assert line.startswith(f"{hit['document_name']} ({hit['document_id'][:12]}) [{hit['section_id']}] ")


def test_a_pdf_or_a_collection_exactly(deal: Path, contracts: Path) -> None:
    pdf = contracts / "falcon_supply.pdf"
    for command in ("ask", "search"):
        _assert_one_line_error(
            _run(deal, command, pdf, LAW_QUESTION, "--collection", "deal"), "give a PDF or --collection, not both"
        )
        _assert_one_line_error(_run(deal, command, "--collection", "deal", pdf), "not both")
        _assert_one_line_error(_run(deal, command), "give a PDF or a collection", "--collection NAME")
        _assert_one_line_error(_run(deal, command, LAW_QUESTION), "no such file", "--collection NAME")
    # The single-document form still works beside it.
    one = _json(deal, "search", pdf, LAW_QUESTION)
    assert one and any("Delaware" in h["text"] for h in one)
    assert not any("England" in h["text"] or "New York" in h["text"] for h in one)


# -- collections and ls -------------------------------------------------------------------------------------


def test_collections_and_ls(deal: Path, contracts: Path) -> None:
    ids = _ids(contracts)
    assert _json(deal, "collections") == [{"name": "deal", "documents": 3, "pages": 6}]
    assert _run(deal, "collections").stdout == "deal  3 documents, 6 pages\n"

    members = _json(deal, "ls", "--collection", "deal")
    assert {m["name"]: m["id"] for m in members} == ids
    assert all(m["pages"] == 2 and m["added"] > 0 for m in members)
    stored = _json(deal, "ls")
    assert {d["id"]: (d["name"], d["pages"], d["collections"]) for d in stored} == {
        doc_id: (name, 2, ["deal"]) for name, doc_id in ids.items()
    }
    # Each contract's title and parties, read by the offline readers and kept at ingest.
    falcon = next(d for d in stored if d["name"] == "falcon_supply.pdf")
    assert falcon["parties"] == ["Falcon Industries Inc.", "Orbit Retail LLC"], falcon
    assert falcon["title"] == ""  # a line that runs on into the parties is no title
    lines = _run(deal, "ls", "--collection", "deal").stdout.splitlines()
    human = [line for line in lines if not line.startswith(" ")]
    described = [line.strip() for line in lines if line.startswith(" ")]
    assert len(human) == 3 and len(described) == 3
    assert "(no title): Falcon Industries Inc.; Orbit Retail LLC" in described, described
    names = []
    for line in human:
        doc_id, pages, _, _, _, zone, name = line.split(maxsplit=6)
        assert ids[name].startswith(doc_id) and len(doc_id) == 12 and pages == "2"
        assert zone == time.strftime("%Z")  # local time, and which zone it is in
        names.append(name)
    assert names == sorted(names, key=str.casefold)  # by name, not by hash
    assert [d["name"] for d in _json(deal, "ls")] == sorted((d["name"] for d in stored), key=str.casefold)


def test_empty_store_says_how_to_fill_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert _run(home, "collections").stdout.startswith("No collections yet: docpipe ingest --collection NAME")
    assert _run(home, "ls").stdout.startswith("No documents in the store")
    assert _json(home, "ls") == [] and _json(home, "collections") == []


def test_unknown_collection_lists_the_existing_ones(deal: Path) -> None:
    for args in (
        ["ask", "--collection", "nope", LAW_QUESTION],
        ["search", "--collection", "nope", LAW_QUESTION],
        ["ls", "--collection", "nope"],
        ["rm", "--collection", "nope", "--all"],
        ["rm", "--collection", "nope", "0" * 64],
    ):
        _assert_one_line_error(_run(deal, *args), "no collection named 'nope'", "the collections are deal")
    assert not (deal / "collections" / "nope").exists()


# -- rm -----------------------------------------------------------------------------------------------------


def test_rm_from_a_collection_keeps_the_document_in_the_store(own_home: Path, contracts: Path) -> None:
    ids = _ids(contracts)
    removed = _json(own_home, "rm", "--collection", "deal", ids["falcon_supply.pdf"][:8])
    assert removed["removed"] == [{"id": ids["falcon_supply.pdf"], "name": "falcon_supply.pdf"}]
    assert removed["collection"] == "deal" and not removed["collection_deleted"] and removed["deleted"] == []
    by_name = _run(own_home, "rm", "--collection", "deal", "osprey_services.pdf")
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == (
        f"removed {ids['osprey_services.pdf'][:12]} osprey_services.pdf from collection deal (it stays in the store)\n"
    )
    assert [m["name"] for m in _json(own_home, "ls", "--collection", "deal")] == ["heron_license.pdf"]
    assert {d["id"] for d in _json(own_home, "ls")} == set(ids.values())
    # The rest of the collection still answers, from what is left.
    [answer] = _json(own_home, "ask", "--collection", "deal", LAW_QUESTION)
    assert {c["document_name"] for c in answer["citations"]} == {"heron_license.pdf"}
    _assert_one_line_error(
        _run(own_home, "rm", "--collection", "deal", ids["falcon_supply.pdf"]),
        "is not in collection deal",
        "docpipe ls --collection deal",
    )


def test_rm_by_a_name_two_members_share_is_refused(tmp_path: Path, contracts: Path) -> None:
    home = tmp_path / "home"
    for folder, name in (("a", "falcon_supply.pdf"), ("b", "osprey_services.pdf")):
        (tmp_path / "dup" / folder).mkdir(parents=True)
        (tmp_path / "dup" / folder / "contract.pdf").write_bytes((contracts / name).read_bytes())
    # Given as files (a folder would name them a/contract.pdf and b/contract.pdf), both go by contract.pdf.
    files = [tmp_path / "dup" / "a" / "contract.pdf", tmp_path / "dup" / "b" / "contract.pdf"]
    assert _run(home, "ingest", "--collection", "dup", *files).returncode == 0
    _assert_one_line_error(
        _run(home, "rm", "--collection", "dup", "contract.pdf"),
        "2 documents of collection dup are named",
        "give the id",
    )
    assert len(_json(home, "ls", "--collection", "dup")) == 2


def test_rm_all_deletes_the_collection_not_its_documents(own_home: Path, contracts: Path) -> None:
    result = _run(own_home, "rm", "--collection", "deal", "--all")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "deleted collection deal; its 3 documents stay in the store (docpipe ls)\n"
    assert _json(own_home, "collections") == []
    assert not (own_home / "collections" / "deal").exists()
    assert {d["id"] for d in _json(own_home, "ls")} == set(_ids(contracts).values())
    _assert_one_line_error(_run(own_home, "ask", "--collection", "deal", LAW_QUESTION), "no collection named 'deal'")


def test_rm_from_the_store_also_leaves_every_collection(own_home: Path, contracts: Path) -> None:
    ids = _ids(contracts)
    heron = ids["heron_license.pdf"]
    second = _run(own_home, "ingest", "--collection", "other", next(contracts.rglob("heron_license.pdf")))
    assert second.returncode == 0 and "1 added" in second.stdout, second.stderr

    result = _run(own_home, "rm", heron[:10])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"deleted {heron[:12]} heron_license.pdf (2 pages), removed from collection deal, other"
    )
    assert not (own_home / "docs" / heron).exists()
    assert heron not in {d["id"] for d in _json(own_home, "ls")}
    assert heron not in {m["id"] for m in _json(own_home, "ls", "--collection", "deal")}
    assert _json(own_home, "ls", "--collection", "other") == []
    # What is left of the collection answers without the deleted contract.
    [answer] = _json(own_home, "ask", "--collection", "deal", LAW_QUESTION)
    assert {c["document_name"] for c in answer["citations"]} == {"falcon_supply.pdf", "osprey_services.pdf"}

    osprey = _json(own_home, "rm", contracts / "osprey_services.pdf")
    assert osprey["purged"] == 1
    assert osprey["deleted"] == [
        {"id": ids["osprey_services.pdf"], "name": "osprey_services.pdf", "pages": 2, "collections": ["deal"]}
    ]


# -- abuse ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["../../etc", "a/b", "ABSOLUTE", "", ".", "..", ".hidden", "-rf", "x" * 200, "deal\n", "dé"],
    ids=["traversal", "slash", "absolute", "empty", "dot", "dotdot", "hidden", "option", "long", "newline", "unicode"],
)
def test_collection_names_that_could_leave_the_store_are_refused(tmp_path: Path, contracts: Path, name: str) -> None:
    (tmp_path / "room").mkdir()
    home = tmp_path / "room" / "home"
    if name == "ABSOLUTE":
        name = str(tmp_path / "outside")
    _run(home, "ls")  # the store exists before, so only what the refused commands make would show
    before = _tree(tmp_path)
    option = f"--collection={name}"  # one argument, so that "-rf" and "" reach docpipe as names
    for args in (
        ["ingest", option, contracts],
        ["ask", option, LAW_QUESTION],
        ["search", option, LAW_QUESTION],
        ["ls", option],
        ["rm", option, "--all"],
        ["rm", option, "0" * 64],
    ):
        _assert_one_line_error(_run(home, *args), "is not a collection name", "letters, digits")
    assert _tree(tmp_path) == before, "a refused name must create nothing, inside the store or out"
    assert not (tmp_path / "outside").exists() and not (tmp_path / "etc").exists()


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("0123", "no stored document matches '0123'"),
        ("0123456789abcdef", "no stored document matches"),
        ("../../etc/passwd", "no stored document matches"),
        ("/etc/hostname", "no stored document matches"),
        ("zzzzzzzzzzzz", "no stored document matches"),
        ("ab" * 40, "no stored document matches"),
    ],
    ids=["short", "unknown-prefix", "traversal", "a-file-not-stored", "not-hex", "too-long"],
)
def test_rm_refuses_ids_of_another_shape_and_deletes_nothing(
    deal: Path, contracts: Path, target: str, fragment: str
) -> None:
    if target.startswith("/") and not Path(target).is_file():
        pytest.skip(f"{target} is not on this machine")
    before = _tree(deal)
    line = _assert_one_line_error(_run(deal, "rm", target), fragment)
    assert "docpipe ls" in line
    _assert_one_line_error(_run(deal, "rm", "--collection", "deal", target), "is not in collection deal")
    assert _tree(deal) == before
    assert len(_json(deal, "ls", "--collection", "deal")) == 3


def test_rm_option_mistakes_are_one_line_errors(deal: Path) -> None:
    _assert_one_line_error(_run(deal, "rm", "--all"), "docpipe rm --collection NAME --all")
    _assert_one_line_error(_run(deal, "rm", "--collection", "deal", "--all", "0" * 64), "either documents or --all")
    _assert_one_line_error(_run(deal, "rm", "--collection", "deal"), "name the documents to remove", "--all")
    _assert_one_line_error(_run(deal, "rm", "--collection", "deal", "--matter", "m", "--all"), "not a matter's")
    assert len(_json(deal, "ls", "--collection", "deal")) == 3
