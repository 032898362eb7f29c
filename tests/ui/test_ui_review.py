"""The workbench's Data room tab and the Ask tab's page view, in real headless Chromium: a collection built from
two PDFs, a grid of two questions and a checklist category run with the echo engine and filled in, a cell
opened on its page with the quote marked, the XLSX downloaded and read back; then the handlers themselves with
what a browser (or a crafted API call) could send them: too many or too long questions, a file that is not a
PDF, a page the document does not have, a document or collection of another matter.

Needs Debian's chromium (/usr/bin/chromium) and the Python packages gradio and playwright.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.net import free_port

from docpipe import Citation, DocPipe, EchoEngine, MatterStore, Settings

pytestmark = [
    pytest.mark.integration,
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000
QUESTIONS = ["What is the notice period for termination for convenience?", "Which law governs the agreement?"]
CATEGORY = "Governing Law"
NINETY = "ninety (90) days' prior written notice"

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium", allow_module_level=True)
pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

sync_api.expect.set_options(timeout=TIMEOUT_MS)

import docpipe.ui.review_tab  # noqa: E402
from docpipe.ui.app import build_app, launch_kwargs  # noqa: E402
from docpipe.ui.choices import MAX_QUESTION_CHARS  # noqa: E402
from docpipe.ui.review_tab import MAX_GRID_QUESTIONS  # noqa: E402


def _supply_pdf(path: Path) -> Path:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    pdf.drawString(60, 740, "SUPPLY AGREEMENT")
    pdf.drawString(60, 710, "1. Term. This agreement lasts one year from the effective date of signature.")
    pdf.drawString(60, 690, "2. Termination. Either party may terminate it on thirty (30) days' written notice.")
    pdf.drawString(60, 670, "3. Governing Law. This agreement is governed by the laws of the State of New York.")
    pdf.save()
    return path


@pytest.fixture(scope="module")
def artifacts(repo_root: Path) -> Path:
    folder = repo_root / "test-artifacts" / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def supply_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _supply_pdf(tmp_path_factory.mktemp("supply") / "supply_agreement.pdf")


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
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The workbench over the test preset with the echo engine (quotes the best-matching sentence, cited)."""
    home = tmp_path_factory.mktemp("ui-review-home")
    with _serve(DocPipe(Settings.preset("test", home=home, engine={"backend": "echo"}))) as url:
        yield url


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1800}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.get_by_role("tab", name="Upload").wait_for()
    return context, page


def _add_to_collection(page, files: list[Path], name: str) -> None:
    page.get_by_role("tab", name="Data room").click()
    page.locator("#dr-files input[type=file]").set_input_files([str(p) for p in files])
    for path in files:
        sync_api.expect(page.locator("#dr-files")).to_contain_text(path.stem)
    page.locator("#dr-new-collection textarea, #dr-new-collection input").first.fill(name)
    page.locator("#dr-add-btn").click()


def _image_box(page, elem_id: str) -> dict:
    """Returns the natural size of the image a gr.Image shows, once it has loaded."""
    image = page.locator(f"#{elem_id} img").first
    sync_api.expect(image).to_be_visible()
    page.wait_for_function(
        "id => { const i = document.querySelector(`#${id} img`); return i && i.complete && i.naturalWidth > 0; }",
        arg=elem_id,
    )
    return image.evaluate("i => ({width: i.naturalWidth, height: i.naturalHeight})")


def test_data_room_grid_fills_in_opens_a_cell_on_its_page_and_downloads(
    browser, app_url: str, sample_pdf: Path, supply_pdf: Path, artifacts: Path, tmp_path: Path
) -> None:
    import openpyxl

    context, page = _open(browser, app_url)
    try:
        _add_to_collection(page, [sample_pdf, supply_pdf], "deal-room")
        result = page.locator("#dr-add-result")
        sync_api.expect(result).to_contain_text("Collection deal-room: 2 added")
        sync_api.expect(page.locator("#dr-collection input")).to_have_value("deal-room")

        page.locator("#dr-questions textarea").fill("\n".join(QUESTIONS))
        page.locator("#dr-categories").get_by_label(CATEGORY, exact=True).check()
        page.locator("#dr-mode").get_by_text("no_think", exact=True).click()
        page.locator("#dr-run").click()
        status = page.locator("#dr-status")
        sync_api.expect(status).to_contain_text("Done: 6 / 6 cells done")
        table = page.locator("#dr-grid")
        for text in (CATEGORY, *QUESTIONS, sample_pdf.name, supply_pdf.name):
            sync_api.expect(table).to_contain_text(text)
        # Every cell of the 2 x 3 grid is shown with its status (the echo engine finds each clause).
        sync_api.expect(table.locator("[role=row][data-index]")).to_have_count(2)
        texts = [[table.locator(f"[data-testid=cell-{r}-{c}]").inner_text() for c in range(4)] for r in range(2)]
        assert sorted(row[0] for row in texts) == sorted([sample_pdf.name, supply_pdf.name]), texts
        for row in texts:  # a status's symbol, then its word
            assert all(
                cell.split(" ")[:2] in (["\u2713", "Yes"], ["\u2013", "No"], ["?", "Uncertain"]) for cell in row[1:]
            ), texts
        page.screenshot(path=str(artifacts / "review-grid.png"), full_page=True)

        # A click on the master agreement's termination cell opens it: the quote, and its page with the quote marked.
        row = next(r for r in range(2) if texts[r][0] == sample_pdf.name)
        table.locator(f"[data-testid=cell-{row}-2]").click()
        cell = page.locator("#dr-cell")
        sync_api.expect(cell).to_contain_text(QUESTIONS[0])
        sync_api.expect(cell).to_contain_text(sample_pdf.name)
        size = _image_box(page, "dr-page")
        assert size["width"] > 500 and size["height"] > 500, size
        caption = page.locator("#dr-page-caption")
        sync_api.expect(caption).to_contain_text("the quote is marked")
        assert "could not be located" not in caption.inner_text()
        page.screenshot(path=str(artifacts / "review-cell-page.png"), full_page=True)

        files = {}
        for suffix in ("xlsx", "csv", "json"):
            with page.expect_download() as info:
                page.locator(f"#dr-{suffix}").click()
            download = info.value
            assert download.suggested_filename == f"deal-room-review.{suffix}"
            files[suffix] = tmp_path / download.suggested_filename
            download.save_as(files[suffix])
        book = openpyxl.load_workbook(io.BytesIO(files["xlsx"].read_bytes()))
        assert {"Review", "Citations"} <= set(book.sheetnames), book.sheetnames
        sheet = book["Review"]
        values = [[c.value for c in r] for r in sheet.iter_rows()]
        flat = " ".join(str(v) for r in values for v in r if v is not None)
        assert CATEGORY in flat and QUESTIONS[1] in flat and sample_pdf.name in flat and supply_pdf.name in flat
        assert book["Citations"].max_row > 1
        assert QUESTIONS[0] in files["csv"].read_text(encoding="utf-8")
        assert '"cells"' in files["json"].read_text(encoding="utf-8")
    finally:
        context.close()


def test_ask_tab_shows_a_cited_page_with_the_quote_marked(
    browser, app_url: str, sample_pdf: Path, artifacts: Path
) -> None:
    context, page = _open(browser, app_url)
    try:
        page.locator("#upload-files input[type=file]").set_input_files(str(sample_pdf))
        sync_api.expect(page.locator("#upload-files")).to_contain_text(sample_pdf.stem)
        page.locator("#ingest-btn").click()
        sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages")
        page.get_by_role("tab", name="Ask").click()
        page.locator("#question textarea").fill(QUESTIONS[0])
        page.locator("#ask-btn").click()
        citations = page.locator("#citations")
        sync_api.expect(citations).to_contain_text("p. 9")
        # A click on the citation's row shows its page.
        citations.locator("[data-testid=cell-0-3]").click()
        size = _image_box(page, "ask-page")
        assert size["width"] > 500, size
        sync_api.expect(page.locator("#ask-page-caption")).to_contain_text("Page 9 of 15: the quote is marked")
        sync_api.expect(page.locator("#ask-cite input")).to_have_value(re.compile(r"^1\. .*p\. 9: "))
    except AssertionError:
        page.screenshot(path=str(artifacts / "ask-page-failed.png"), full_page=True)
        raise
    finally:
        context.close()


def test_a_file_that_is_not_a_pdf_is_refused_in_the_data_room(browser, app_url: str, eval_dir: Path) -> None:
    context, page = _open(browser, app_url)
    try:
        bad = eval_dir / "bad-pdfs" / "qpdf-bad1-not-a-pdf.pdf"
        _add_to_collection(page, [bad], "bad-room")
        result = page.locator("#dr-add-result")
        sync_api.expect(result).to_contain_text("not a PDF")
        sync_api.expect(result).to_contain_text(bad.name)
        sync_api.expect(result).to_contain_text("0 added")
    finally:
        context.close()


# -- the handlers, called as Gradio calls them ----------------------------------------------------------------
def _handlers(dp: DocPipe):
    demo = build_app(dp)
    fns = {fn.api_name: fn.fn for fn in demo.fns.values()}
    return demo, fns["review"].__self__, fns["ask"].__self__


@pytest.fixture
def echo_dp(tmp_path: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=EchoEngine())


def _collection(dp: DocPipe, files: list[Path], matter: str | None = None):
    """Returns collection "deal" of `files`: the store's own (what a workbench without keys works in), or
    `matter`'s."""
    coll = dp.collection("deal", matter=matter)
    report = coll.add(files)
    assert report.ok, report.failed
    return coll


def _run(tab, *, text: str, categories=(), name: str = "deal", matter: str | None = None):
    """Runs the grid as the page does, without keys: in the store's own matter, or the `matter` the page sends."""
    return list(tab.run(name, text, list(categories), "no_think", "", None, matter, None, None))


def test_the_grid_streams_as_cells_finish(
    echo_dp: DocPipe, sample_pdf: Path, supply_pdf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docpipe.ui.review_tab, "STREAM_INTERVAL_S", 0.0)  # one table per progress event
    _demo, tab, _wb = _handlers(echo_dp)
    _collection(echo_dp, [sample_pdf, supply_pdf])
    updates = _run(tab, text="\n".join(QUESTIONS), categories=[CATEGORY])
    first, *running, final = updates
    assert first[0] == "Running: 0 / 6 cells done"
    assert len(running) == 6 and [u[0].split(":")[1].split("/")[0].strip() for u in running] == list("123456")
    assert all(row[1:] == ["..."] * 3 for row in first[1]["data"])
    # Each cell shows its answer as soon as it is done: one more filled cell per update.
    filled = [sum(cell != "..." for row in u[1]["data"] for cell in row[1:]) for u in running]
    assert filled == [1, 2, 3, 4, 5, 6]
    assert running[-1][1]["data"] == final[1]["data"]  # as the finished grid shows them
    assert final[0].startswith("Done: 6 / 6") and final[1]["headers"] == ["Document", CATEGORY, *QUESTIONS]
    assert len(final[1]["data"]) == 2 and all(len(row) == 4 for row in final[1]["data"])
    downloads = [button.value for button in final[-3:]]
    assert [d["orig_name"] for d in downloads] == ["deal-review.xlsx", "deal-review.csv", "deal-review.json"]
    assert all(os.path.isfile(d["path"]) for d in downloads)


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(f"Question number {n}?" for n in range(MAX_GRID_QUESTIONS + 1)),
        "What is " + "very " * (MAX_QUESTION_CHARS // 5) + "long?",
        "?\n" * 200_000,
        "",
    ],
    ids=["too-many", "too-long", "huge-text", "none"],
)
def test_questions_over_the_limits_are_refused_before_the_engine(echo_dp: DocPipe, sample_pdf: Path, text: str) -> None:
    _demo, tab, _wb = _handlers(echo_dp)
    _collection(echo_dp, [sample_pdf])
    updates = _run(tab, text=text)
    assert len(updates) == 1 and updates[0][0].startswith("**Error:**"), updates[0][0]
    assert echo_dp.engine.batch_sizes == []  # nothing reached the engine


def test_a_collection_of_another_matter_is_not_run(echo_dp: DocPipe, sample_pdf: Path) -> None:
    # Without keys the page works in the store's own matter; a page that sends another matter is refused.
    _demo, tab, _wb = _handlers(echo_dp)
    _collection(echo_dp, [sample_pdf], matter="deal-y")
    updates = _run(tab, text=QUESTIONS[0], matter="deal-y")
    assert len(updates) == 1 and "no matter &#x27;deal-y&#x27;" in updates[0][0], updates[0][0]
    updates = _run(tab, text=QUESTIONS[0])  # nor is it the own matter's
    assert len(updates) == 1 and "no collection &#x27;deal&#x27; here" in updates[0][0], updates[0][0]
    assert echo_dp.engine.batch_sizes == []


def _finished_state(tab) -> dict:
    final = _run(tab, text=QUESTIONS[0])[-1]
    assert final[0].startswith("Done"), final[0]
    return final[2]


def test_a_cell_shows_its_page_and_a_bad_page_or_document_is_refused(
    echo_dp: DocPipe, sample_pdf: Path, supply_pdf: Path
) -> None:
    import dataclasses

    _demo, tab, _wb = _handlers(echo_dp)
    _collection(echo_dp, [sample_pdf])
    other = echo_dp.collection("deal", matter="deal-y")
    other.add([supply_pdf])
    state = _finished_state(tab)
    html_out, _picker, image, caption = tab.show_cell(state, "0", "0", "", None, None, None)
    assert image is not None and "the quote is marked" in caption, caption
    assert "Yes" in html_out and "&#10003;" in html_out

    # A page that sends another matter cannot open this grid ...
    _html, _picker, image, caption = tab.show_cell(state, "0", "0", "", "deal-y", None, None)
    assert image is None and "no matter &#x27;deal-y&#x27;" in _html + caption, (_html, caption)
    # ... nor can a grid whose row names a document of another matter's collection show that document.
    bob_doc = other.documents[0].id
    grid = state["grid"]
    forged = {**state, "grid": dataclasses.replace(grid, rows=[dataclasses.replace(grid.rows[0], document_id=bob_doc)])}
    forged["grid"].cells[0][0].quotes[:] = [
        dataclasses.replace(q, document_id=bob_doc) for q in grid.cells[0][0].quotes
    ]
    _html, _picker, image, caption = tab.show_cell(forged, "0", "0", "", None, None, None)
    assert image is None and "not in collection deal" in caption, caption

    # A quote naming a page the document does not have, and pickers naming no cell.
    state = _finished_state(tab)
    quotes = state["grid"].cells[0][0].quotes
    quotes[:] = [dataclasses.replace(q, page_start=99, page_end=99) for q in quotes]
    _html, _picker, image, caption = tab.show_cell(state, "0", "0", "", None, None, None)
    assert image is None and "pages 1 to 15" in caption, caption
    for r, c in (("1", "0"), ("0", "5"), ("-1", "0"), ("x", "0")):
        out, _picker, image, _caption = tab.show_cell(state, r, c, "", None, None, None)
        assert image is None and "choose an entry" in out, (r, c, out)
    out, _picker, image, _caption = tab.show_cell(None, "0", "0", "", None, None, None)
    assert image is None and "run a grid first" in out


def test_the_ask_page_view_shows_only_the_asked_documents_pages(
    echo_dp: DocPipe, sample_pdf: Path, supply_pdf: Path
) -> None:
    _demo, _tab, wb = _handlers(echo_dp)
    mine = echo_dp.ingest(sample_pdf)
    # Uploaded here (the store's own matter), and another matter's upload: in the store, not in this matter.
    MatterStore(echo_dp.store.root).add(
        "default", mine.id, name=sample_pdf.name, user="local", key_id="w", encrypted=False
    )
    theirs = echo_dp.ingest(supply_pdf)
    MatterStore(echo_dp.store.root).add(
        "deal-y", theirs.id, name=supply_pdf.name, user="bob", key_id="k", encrypted=False
    )
    docs = {mine.id: mine}
    *_rest, cites, picker = list(wb.ask(docs, mine.id, QUESTIONS[0], "no_think", None, None))[-1]
    assert cites and picker.choices
    image, caption = wb.ask_page(docs, mine.id, cites, "0", "", None, None)
    assert image is not None and "Page 9 of 15: the quote is marked" in caption, caption
    # A citation naming another document (as a tampered state would) is refused, as is a page out of range.
    forged = [{**cites[0], "document_id": theirs.id}]
    image, caption = wb.ask_page(docs, mine.id, forged, "0", "", None, None)
    assert image is None and "another document" in caption
    image, caption = wb.ask_page(docs, theirs.id, forged, "0", "", None, None)
    assert image is None and "choose a document" in caption
    image, caption = wb.ask_page(docs, mine.id, [{**cites[0], "page_start": 16}], "0", "", None, None)
    assert image is None and "pages 1 to 15" in caption
    for choice in ("1", "-1", None, "abc"):
        image, caption = wb.ask_page(docs, mine.id, cites, choice, "", None, None)
        assert image is None and "choose an entry" in caption, choice
    assert Citation.from_dict(cites[0]).document_id == mine.id
