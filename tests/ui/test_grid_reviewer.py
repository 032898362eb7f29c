"""The Data room's review grid as a reviewer uses it, in real headless Chromium: cells coloured by status with a
legend (a symbol and a word too, never colour alone), the decisive sentence in each offline cell, long document
names shortened with the full name on hover, rows by name on every run, the "all checklist categories" switch,
the thinking mode offered only when a model answers, a Run pressed while an add is in flight waiting for it, and
reviewer marks set in the browser that survive a rerun and go to the access log.

Needs Debian's chromium (/usr/bin/chromium) and the Python packages gradio and playwright.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.net import free_port

from docpipe import CHECKLIST, AccessLog, DocPipe, Settings
from docpipe.events import add_listener, remove_listener

pytestmark = [
    pytest.mark.integration,
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000
LAW = "Which law governs the agreement?::jurisdiction"
PONY = "Is there a pony clause?"
LONG_NAME = "ZETA_PHARMACEUTICALS_INC_2019-05-07-EX-10.3-EXCLUSIVE DISTRIBUTION AND SUPPLY AGREEMENT.pdf"
# Each tab with a thinking-mode choice: its name, the choice, and a button of the tab that is always there.
THINKING = (
    ("Ask", "#mode", "#ask-btn"),
    ("Batch", "#batch-mode", "#batch-btn"),
    ("Contract analysis", "#analysis-mode", "#analysis-btn"),
    ("Data room", "#dr-mode", "#dr-run"),
)
# Background colours by status (docpipe.ui.review_render.STATUS_STYLES), as the browser computes them.
GREEN, AMBER, GREY = "rgb(211, 242, 220)", "rgb(253, 240, 196)", "rgb(232, 235, 239)"

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium", allow_module_level=True)
pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

sync_api.expect.set_options(timeout=TIMEOUT_MS)

from docpipe.ui.app import build_app, launch_kwargs  # noqa: E402


def _contract(path: Path, law: str) -> Path:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    pdf.drawString(60, 740, "SUPPLY AGREEMENT")
    pdf.drawString(60, 710, "1. Term. This agreement lasts one year from the effective date of signature.")
    pdf.drawString(60, 690, "2. Termination. Either party may terminate it on thirty (30) days' written notice.")
    pdf.drawString(60, 670, f"3. Governing Law. This agreement is governed by the laws of the State of {law}.")
    pdf.save()
    return path


@pytest.fixture(scope="module")
def contracts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three contracts, in the order they are added: not the order of their names."""
    folder = tmp_path_factory.mktemp("reviewer")
    return [
        _contract(folder / LONG_NAME, "Texas"),
        _contract(folder / "beta-supply.pdf", "Delaware"),
        _contract(folder / "alpha-supply.pdf", "New York"),
    ]


@contextlib.contextmanager
def _serve(dp: DocPipe) -> Iterator[str]:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    demo = build_app(dp, max_upload_mb=5, max_pages=200)
    port = free_port()
    kwargs = launch_kwargs(max_upload_mb=5, store_root=dp.store.root)
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, **kwargs)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The workbench with no language model (extractive answers), and its store."""
    home = tmp_path_factory.mktemp("reviewer-offline")
    with _serve(DocPipe(Settings.preset("test", home=home))) as url:
        yield url, home


@pytest.fixture(scope="module")
def with_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The workbench with the echo engine: a model that answers (and thinks when asked)."""
    home = tmp_path_factory.mktemp("reviewer-echo")
    with _serve(DocPipe(Settings.preset("test", home=home, engine={"backend": "echo"}))) as url:
        yield url


@pytest.fixture(scope="module")
def artifacts(repo_root: Path) -> Path:
    folder = repo_root / "test-artifacts" / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1800}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.get_by_role("tab", name="Upload").wait_for()
    page.get_by_role("tab", name="Data room").click()
    return context, page


def _add(page, files: list[Path], name: str) -> None:
    page.locator("#dr-files input[type=file]").set_input_files([str(p) for p in files])
    for path in files:
        sync_api.expect(page.locator("#dr-files")).to_contain_text(path.stem[:20])
    page.locator("#dr-new-collection textarea, #dr-new-collection input").first.fill(name)
    page.locator("#dr-add-btn").click()


def _added(page, name: str, count: int) -> None:
    sync_api.expect(page.locator("#dr-add-result")).to_contain_text(f"Collection {name}: {count} added")
    sync_api.expect(page.locator("#dr-collection input")).to_have_value(name)


def _run(page, cells: int, runs: int = 1) -> None:
    page.locator("#dr-run").click()
    sync_api.expect(page.locator("#dr-status")).to_contain_text(f"Done: {cells} / {cells} cells done")


def _cell(page, r: int, c: int):
    return page.locator(f"#dr-grid [data-testid=cell-{r}-{c}]")


def _background(cell) -> str:
    """Returns the background colour the browser paints under the cell's text (its own or its nearest box's)."""
    return cell.evaluate(
        """e => { for (let n = e.querySelector('.dp-sym') || e; n; n = n.parentElement) {
                      const c = getComputedStyle(n).backgroundColor;
                      if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c; }
                  return ''; }"""
    )


def _thinking_offered(page, offered: bool) -> None:
    """Checks each tab's thinking-mode choice is shown (`offered`) or not; ends on the Data room tab."""
    for tab, mode, button in THINKING:
        page.get_by_role("tab", name=tab, exact=True).click()
        sync_api.expect(page.locator(button)).to_be_visible()
        if offered:
            sync_api.expect(page.locator(mode)).to_be_visible()
        else:
            sync_api.expect(page.locator(mode)).to_be_hidden()


def _names(page, rows: int) -> list[str]:
    return [_cell(page, r, 0).inner_text().strip() for r in range(rows)]


def test_cells_are_coloured_by_status_with_the_decisive_sentence_and_rows_by_name(
    browser, offline: tuple[str, Path], contracts: list[Path], artifacts: Path
) -> None:
    url, _home = offline
    context, page = _open(browser, url)
    try:
        # No model here: the thinking mode would change nothing, so no tab offers it.
        _thinking_offered(page, False)
        _add(page, contracts, "colour-room")
        _added(page, "colour-room", 3)
        page.locator("#dr-questions textarea").fill(f"{LAW}\n{PONY}")
        _run(page, 6)

        legend = page.locator("#dr-legend")
        for meaning in ("Found: a verified quote decides it", "Candidate: to check", "Not found", "Failed"):
            sync_api.expect(legend).to_contain_text(meaning)
        # Rows by name (added: the long name first, alpha last); the long name is shortened, in full on hover.
        names = _names(page, 3)
        assert names[:2] == ["alpha-supply.pdf", "beta-supply.pdf"], names
        assert len(names[2]) <= 36 and names[2].startswith("ZETA_PHARMA") and "\u2026" in names[2], names
        assert _cell(page, 2, 0).locator(".dp-name").get_attribute("title") == LONG_NAME

        # A typed cell: a candidate to check (symbol, word, amber), its value and the sentence it was read from.
        law = _cell(page, 0, 1)
        sync_api.expect(law).to_contain_text("? Candidate - New York (p. 1)")
        sync_api.expect(law).to_contain_text("This agreement is governed by the laws of the State of New York.")
        assert _background(law) == AMBER
        # Nothing found: a dash and the words, grey.
        pony = _cell(page, 0, 2)
        sync_api.expect(pony).to_have_text("\u2013 Not found")
        assert _background(pony) == GREY
        page.screenshot(path=str(artifacts / "grid-reviewer-colours.png"), full_page=True)

        # The downloads sit above the page view (a rendered page is ~1,000 px tall).
        law.click()
        sync_api.expect(page.locator("#dr-page img")).to_be_visible()
        assert page.locator("#dr-xlsx").bounding_box()["y"] < page.locator("#dr-page").bounding_box()["y"]
        sync_api.expect(page.locator("#dr-cell")).to_contain_text("Decided by:")

        # The same order on the next run.
        _run(page, 6)
        assert _names(page, 3) == names
    finally:
        context.close()


def test_the_all_categories_switch_ticks_every_category(browser, offline: tuple[str, Path]) -> None:
    context, page = _open(browser, offline[0])
    try:
        boxes = page.locator("#dr-categories input[type=checkbox]")
        sync_api.expect(boxes).to_have_count(len(CHECKLIST))
        switch = page.locator("#dr-all-categories input[type=checkbox]")
        switch.check()
        sync_api.expect(page.locator("#dr-categories input[type=checkbox]:checked")).to_have_count(len(CHECKLIST))
        switch.uncheck()
        sync_api.expect(page.locator("#dr-categories input[type=checkbox]:checked")).to_have_count(0)
    finally:
        context.close()


def test_the_thinking_mode_and_found_cells_with_a_model(browser, with_model: str, contracts: list[Path]) -> None:
    context, page = _open(browser, with_model)
    try:
        _thinking_offered(page, True)
        _add(page, contracts[2:], "model-room")
        _added(page, "model-room", 1)
        page.locator("#dr-questions textarea").fill("Which law governs the agreement?")
        page.locator("#dr-mode").get_by_text("no_think", exact=True).click()
        _run(page, 1)
        found = _cell(page, 0, 1)
        sync_api.expect(found).to_contain_text("\u2713 Yes")
        assert _background(found) == GREEN
    finally:
        context.close()


def test_run_pressed_while_an_add_is_in_flight_waits_for_it(browser, offline: tuple[str, Path], tmp_path) -> None:
    held, release = threading.Event(), threading.Event()

    def hold_ingest(event: str, _values: dict) -> None:
        # The add is held inside the server, mid-ingest, until the page shows the Run waiting for it.
        if event == "pages_ingested":
            held.set()
            release.wait(TIMEOUT_MS / 1000)

    context, page = _open(browser, offline[0])
    add_listener(hold_ingest)
    try:
        page.locator("#dr-questions textarea").fill(PONY)
        _add(page, [_contract(tmp_path / "gamma-supply.pdf", "Ohio")], "late-room")
        assert held.wait(TIMEOUT_MS / 1000), "the add never reached the store"
        page.locator("#dr-run").click()
        sync_api.expect(page.locator("#dr-status")).to_contain_text("Waiting for the add")
        release.set()
        sync_api.expect(page.locator("#dr-status")).to_contain_text("Done: 1 / 1 cells done")
        sync_api.expect(page.locator("#dr-collection input")).to_have_value("late-room")
        sync_api.expect(_cell(page, 0, 0)).to_have_text("gamma-supply.pdf")
    finally:
        release.set()
        remove_listener(hold_ingest)
        context.close()


def test_a_mark_set_in_the_browser_survives_a_rerun(
    browser, offline: tuple[str, Path], contracts: list[Path], artifacts: Path, tmp_path: Path
) -> None:

    url, home = offline
    context, page = _open(browser, url)
    try:
        _add(page, contracts[1:], "mark-room")
        _added(page, "mark-room", 2)
        page.locator("#dr-questions textarea").fill(f"{LAW}\n{PONY}")
        _run(page, 4)
        result = page.locator("#dr-mark-result")
        page.locator("#dr-mark").get_by_text("Accepted", exact=True).click()
        page.locator("#dr-mark-save").click()
        sync_api.expect(result).to_contain_text("Not marked: open a cell first")
        # alpha's governing law: corrected (a correction needs its value); beta's pony clause: flagged.
        _cell(page, 0, 1).click()
        sync_api.expect(page.locator("#dr-cell")).to_contain_text("alpha-supply.pdf")
        page.locator("#dr-mark").get_by_text("Corrected", exact=True).click()
        page.locator("#dr-mark-save").click()
        sync_api.expect(result).to_contain_text("Not marked: a correction needs the corrected value")
        page.locator("#dr-mark-value textarea, #dr-mark-value input").first.fill("State of New York")
        page.locator("#dr-mark-save").click()
        sync_api.expect(page.locator("#dr-mark-result")).to_contain_text("Marked corrected: State of New York.")
        sync_api.expect(_cell(page, 0, 1).locator(".dp-mark")).to_have_text("\u270e Corrected: State of New York")
        _cell(page, 1, 2).click()
        sync_api.expect(page.locator("#dr-cell")).to_contain_text("beta-supply.pdf")
        page.locator("#dr-mark").get_by_text("Flagged", exact=True).click()
        page.locator("#dr-mark-comment textarea").fill("check the side letter")
        page.locator("#dr-mark-save").click()
        sync_api.expect(page.locator("#dr-mark-result")).to_contain_text("Marked flagged.")
        sync_api.expect(page.locator("#dr-cell")).to_contain_text("check the side letter")
        # The downloads were written again with the marks.
        with page.expect_download() as info:
            page.locator("#dr-json").click()
        info.value.save_as(tmp_path / "grid.json")
        exported = json.loads((tmp_path / "grid.json").read_text(encoding="utf-8"))
        marks = [cell["mark"] for row in exported["cells"] for cell in row if cell.get("mark")]
        assert sorted((m["status"], m["value"], m["comment"]) for m in marks) == [
            ("corrected", "State of New York", ""),
            ("flagged", None, "check the side letter"),
        ], marks

        _run(page, 4)
        sync_api.expect(_cell(page, 0, 1).locator(".dp-mark")).to_have_text("\u270e Corrected: State of New York")
        flagged = _cell(page, 1, 2).locator(".dp-mark")
        sync_api.expect(flagged).to_have_text("\u2691 Flagged")
        assert "check the side letter" in flagged.get_attribute("title")
        sync_api.expect(page.locator("#dr-grid [data-testid^=cell-] .dp-mark")).to_have_count(2)
        page.screenshot(path=str(artifacts / "grid-reviewer-marks.png"), full_page=True)

        # Cleared, it is gone; every change is an access-log line.
        _cell(page, 1, 2).click()
        sync_api.expect(page.locator("#dr-cell")).to_contain_text("check the side letter")
        page.locator("#dr-mark-clear").click()
        sync_api.expect(page.locator("#dr-mark-result")).to_contain_text("Mark cleared.")
        sync_api.expect(page.locator("#dr-grid [data-testid^=cell-] .dp-mark")).to_have_count(1)
        actions = [e["action"] for e in AccessLog(home).read(user="local")]
        assert [a for a in actions if a.startswith("mark")] == ["mark_corrected", "mark_flagged", "mark_clear"]
    finally:
        context.close()


def test_every_status_has_its_symbol_word_and_colour() -> None:
    from docpipe import ReviewGrid
    from docpipe.review.grid import Cell, Column, ReviewManifest, Row
    from docpipe.ui.review_render import STATUS_STYLES, grid_table, legend_html

    statuses = ["present", "candidate", "uncertain", "absent", "not_found", "failed"]
    grid = ReviewGrid(
        [Row("a" * 64, "<b>a.pdf</b>")],
        [Column(s, "?", "?") for s in statuses],
        [[Cell(s, answer="x") for s in statuses]],  # type: ignore[arg-type]
        ReviewManifest("x", None, None, "x", "x", "1", "f", "f"),
    )
    table = grid_table(grid)
    shown, styles = table["metadata"]["display_value"][0], table["metadata"]["styling"][0]
    assert shown[0] == '<span class="dp-name">&lt;b&gt;a.pdf&lt;/b&gt;</span>' and styles[0] == ""
    words = ["Yes", "Candidate", "Uncertain", "No", "Not found", "Failed"]
    for status, word, cell, style in zip(statuses, words, shown[1:], styles[1:]):
        symbol, meaning, colour = STATUS_STYLES[status]
        assert cell.startswith(f'<span class="dp-sym" title="{meaning}">{symbol}</span> {word}'), cell
        assert style == f"background-color: {colour}; color: #1f2328;"
        assert colour in legend_html() and meaning.split(":")[0] in legend_html()
    # Found, to check, not found and failed read apart by colour as well as by word.
    assert len({STATUS_STYLES[s][2] for s in ("present", "candidate", "not_found", "failed")}) == 4
