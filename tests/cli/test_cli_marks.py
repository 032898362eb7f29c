"""`docpipe mark` and `docpipe review/terms -o FILE.xlsx --with-pdfs` as users run them (issue 27): a mark set
from the command line is in the access log and in the next grid's exports; every wrong input is refused with
the fix in the message and changes nothing; the workbook's citations link to the PDFs copied beside it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from openpyxl import load_workbook
from support.cli import run_cli
from support.contracts import PARTIES, agreement_pdf

from docpipe.access.log import AccessLog
from docpipe.review.marks import MarkStore

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli-json.md"
FAST = {"DOCPIPE_EMBEDDING__MODEL": "hashing", "DOCPIPE_ENGINE__BACKEND": "extractive"}
LAW = "Governing Law"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("marks")
    home, room = base / "home", base / "room"
    room.mkdir()
    for seller, buyer, notice, law in PARTIES[:2]:
        (room / f"{seller.split()[0].lower()}_supply.pdf").write_bytes(agreement_pdf(seller, buyer, notice, law))
    done = run_cli(home, "ingest", "--collection", "deal", room, env=FAST)
    assert done.returncode == 0, done.stderr
    return {"home": home, "room": room}


def _documented() -> dict:
    """Returns the example of docs/cli-json.md's ``docpipe mark --json`` section."""
    section = DOCS.read_text(encoding="utf-8").split("## `docpipe mark --json`")[1].split("\n## ")[0]
    return json.loads(section.split("```json\n")[1].split("```")[0])


def _marks(home: Path) -> dict:
    return {(k[0][:8], k[1]): m for k, m in MarkStore(home).marks("default").items()}


def test_a_mark_from_the_command_line_is_logged_and_in_the_next_grid(world: dict[str, Path]) -> None:
    home, room = world["home"], world["room"]
    out = run_cli(
        home, "mark", "--collection", "deal", "northwind_supply.pdf", LAW, "--correct", "Delaware",
        "--comment", "=cmd|' /C calc'!A0", "--json", env=FAST,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["matter"] == "default" and printed["document"] == "northwind_supply.pdf"
    assert printed["mark"]["status"] == "corrected" and printed["mark"]["value"] == "Delaware"
    assert printed["cleared"] is False and printed["mark"]["when"].endswith("Z")
    example = _documented()  # the shape docs/cli-json.md shows
    assert set(printed) == set(example) and set(printed["mark"]) == set(example["mark"])
    doc_id = printed["document_id"]

    # By file too (the store's own matter holds it), and by an id prefix.
    flagged = run_cli(home, "mark", room / "fabrikam_supply.pdf", LAW, "--flag", env=FAST)
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout.startswith("marked fabrikam_supply.pdf / Governing Law: Flagged")
    accept = run_cli(home, "mark", "--collection", "deal", doc_id[:10], "Parties", "--accept", env=FAST)
    assert accept.returncode == 0, accept.stderr

    lines = [e for e in AccessLog(home).read(matter="default") if e["action"] == "mark"]
    assert len(lines) == 3 and {e["user"] for e in lines} == {"owner"}
    assert lines[0]["document"] == doc_id and lines[0]["detail"].startswith(f"corrected: {LAW}")
    assert "calc" not in json.dumps(lines)  # the comment stays out of the log

    grid = run_cli(home, "review", "--collection", "deal", "--categories", LAW, "--format", "json", env=FAST)
    assert grid.returncode == 0, grid.stderr
    data = json.loads(grid.stdout)
    marks = {(r["name"], c["mark"]["status"]) for r, row in zip(data["rows"], data["cells"]) for c in row if c["mark"]}
    assert marks == {("northwind_supply.pdf", "corrected"), ("fabrikam_supply.pdf", "flagged")}

    cleared = run_cli(home, "mark", "--collection", "deal", "fabrikam_supply.pdf", LAW, "--clear", env=FAST)
    assert cleared.returncode == 0 and cleared.stdout.startswith("cleared the mark on fabrikam_supply.pdf")
    gone = run_cli(home, "mark", "--collection", "deal", "northwind_supply.pdf", LAW, "--clear", "--json", env=FAST)
    assert gone.returncode == 0 and set(json.loads(gone.stdout)) == set(_documented())
    assert json.loads(gone.stdout)["mark"] is None and json.loads(gone.stdout)["cleared"] is True
    again = run_cli(home, "mark", "--collection", "deal", "fabrikam_supply.pdf", LAW, "--clear", env=FAST)
    assert again.returncode == 0 and again.stdout.startswith("there was no mark on")
    assert [e["action"] for e in AccessLog(home).read(matter="default")][-3:] == ["unmark", "unmark", "unmark"]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--collection", "deal", "northwind_supply.pdf", LAW], 2, "one of the arguments"),
        (["--collection", "deal", "northwind_supply.pdf", LAW, "--accept", "--flag"], 2, "not allowed with"),
        (["--collection", "deal", "northwind_supply.pdf", LAW, "--correct", ""], 1, "needs the corrected value"),
        (["--collection", "deal", "northwind_supply.pdf", "", "--flag"], 1, "no column given"),
        (["--collection", "deal", "northwind_supply.pdf", "x" * 2001, "--flag"], 1, "keep it under 2000"),
        (["--collection", "deal", "northwind_supply.pdf", LAW, "--flag", "--comment", "x" * 4001], 1, "under 4000"),
        (["--collection", "deal", "northwind_supply.pdf", LAW, "--flag", "--comment", "a\x01b"], 1, "control"),
        (["--collection", "deal", "northwind_supply.pdf", LAW, "--clear", "--comment", "x"], 1, "--comment goes"),
        (["--collection", "deal", "nosuch.pdf", LAW, "--flag"], 1, "northwind_supply.pdf"),
        (["--collection", "deal", "_supply", LAW, "--flag"], 1, "no document '_supply'"),
        (["--collection", "nosuch", "x.pdf", LAW, "--flag"], 1, "no collection named 'nosuch'"),
        (["--collection", "../deal", "x.pdf", LAW, "--flag"], 1, "is not a collection name"),
        (["../../etc/passwd", LAW, "--flag"], 1, "neither a file nor a document id"),
        (["ab" * 32, LAW, "--flag"], 1, "is not in matter 'default'"),
        (["--matter", "../x", "--collection", "deal", "x.pdf", LAW, "--flag"], 1, "is not a matter name"),
        (["--matter", "deal-y", "--collection", "deal", "northwind_supply.pdf", LAW, "--flag"], 1, "deal-y"),
    ],
)
def test_wrong_marks_are_refused_with_the_fix(world: dict[str, Path], args: list[str], code: int, says: str) -> None:
    home = world["home"]
    before = _marks(home)
    out = run_cli(home, "mark", *args, env=FAST)
    assert out.returncode == code, out.stdout + out.stderr
    assert says in out.stderr
    assert "Traceback" not in out.stderr
    assert _marks(home) == before


def test_a_file_of_another_matter_is_refused(world: dict[str, Path], tmp_path: Path) -> None:
    pdf = tmp_path / "other.pdf"
    pdf.write_bytes(agreement_pdf(*PARTIES[2]))
    out = run_cli(world["home"], "mark", "--matter", "deal-x", pdf, LAW, "--flag", env=FAST)
    assert out.returncode == 1 and "is not in matter 'deal-x'" in out.stderr


def test_with_pdfs_links_the_workbook_to_copies_beside_it(world: dict[str, Path], tmp_path: Path) -> None:
    home = world["home"]
    out_dir = tmp_path / "export"
    out_dir.mkdir()
    xlsx = out_dir / "deal.xlsx"
    done = run_cli(home, "review", "--collection", "deal", "--categories", LAW, "-o", xlsx, "--with-pdfs", env=FAST)
    assert done.returncode == 0, done.stderr
    folder = out_dir / "deal-pdfs"
    assert sorted(p.name for p in folder.iterdir()) == ["fabrikam_supply.pdf", "northwind_supply.pdf"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.iterdir())
    assert stat.S_IMODE(xlsx.stat().st_mode) == 0o600
    book = load_workbook(xlsx)
    targets = {c.hyperlink.target for row in book["Citations"].iter_rows() for c in row if c.hyperlink}
    assert targets and all(t.startswith("deal-pdfs/") and "#page=" in t for t in targets)

    terms = run_cli(
        home, "terms", "--collection", "deal", "--terms", "governing_law", "-o", xlsx, "--with-pdfs", env=FAST
    )
    assert terms.returncode == 0, terms.stderr
    assert {
        c.hyperlink.target.split("#")[0] for r in load_workbook(xlsx)["Citations"].iter_rows() for c in r if c.hyperlink
    }


@pytest.mark.parametrize("command", ["review", "terms"])
def test_with_pdfs_needs_a_workbook(world: dict[str, Path], tmp_path: Path, command: str) -> None:
    extra = ["--categories", LAW] if command == "review" else []
    out = run_cli(world["home"], command, "--collection", "deal", *extra, "-o", tmp_path / "g.csv", "--with-pdfs")
    assert out.returncode == 1 and "--with-pdfs" in out.stderr and "xlsx" in out.stderr
    assert not (tmp_path / "g.csv").exists() and not (tmp_path / "g-pdfs").exists()
