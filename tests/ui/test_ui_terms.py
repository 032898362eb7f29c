"""The Data room tab's Key terms view, in real headless Chromium: the key terms of a collection holding the
sample contract and two small ones, read without a language model, fill a table of values; the table sorts by
value (a duration by its days, not its words) and filters by value; a click on a cell shows its value as
written, its quote, page and derivation, with the page marked; the XLSX, CSV, JSON and iCalendar downloads hold
the same. Then the review grid with a typed question, showing values; and the handlers called as Gradio calls
them with what a page (or a crafted API call) could send: another matter's collection, unknown key terms, a
table over the page's limit, a cell naming a document its collection does not hold.

Needs Debian's chromium (/usr/bin/chromium) and the Python packages gradio and playwright.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.contracts import DATED_SUPPLY, lines_pdf
from support.net import free_port

from docpipe import DocPipe, EchoEngine, Settings
from docpipe.terms.catalog import KEY_TERMS, key_term_columns

pytestmark = [
    pytest.mark.integration,
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium", allow_module_level=True)
pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

sync_api.expect.set_options(timeout=TIMEOUT_MS)

import docpipe.ui.terms_view  # noqa: E402
from docpipe.ui.app import build_app, launch_kwargs  # noqa: E402
from docpipe.ui.review_render import sort_key, terms_table  # noqa: E402

HEADERS = ["Contract", *(c.key for c in key_term_columns())]
COLUMN = {key: n for n, key in enumerate(HEADERS)}
# A contract whose initial term is written in months: 6 months is shorter than the sample's 3 years, though
# "6 months" sorts after "3 years" as text.
SERVICES = lines_pdf(
    "SERVICES AGREEMENT",
    "This Services Agreement is made as of January 15, 2021 between Initech Consulting Inc. and Northwind Buyer LLC.",
    "ARTICLE 1 TERM",
    "1.1 This Agreement shall continue for an initial term of six (6) months from the date of this Agreement.",
    "ARTICLE 2 GOVERNING LAW",
    "2.1 This Agreement is governed by the laws of the State of Texas.",
)


@pytest.fixture(scope="module")
def artifacts(repo_root: Path) -> Path:
    folder = repo_root / "test-artifacts" / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def contracts(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> list[Path]:
    folder = tmp_path_factory.mktemp("terms-contracts")
    (folder / "dated-supply.pdf").write_bytes(DATED_SUPPLY)
    (folder / "initech-services.pdf").write_bytes(SERVICES)
    return [sample_pdf, folder / "dated-supply.pdf", folder / "initech-services.pdf"]


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
    """The workbench over the test preset with no language model: key terms come from the offline readers."""
    home = tmp_path_factory.mktemp("ui-terms-home")
    with _serve(DocPipe(Settings.preset("test", home=home))) as url:
        yield url


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1800}, accept_downloads=True)
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
    sync_api.expect(page.locator("#dr-add-result")).to_contain_text(f"Collection {name}: {len(files)} added")


def _column_menu(page, table, column: str, item: str) -> None:
    """Picks `item` (Sort ascending, Sort descending, Clear sort, Filter ...) from a column's header menu."""
    header = table.locator(f"[data-testid=header-{COLUMN[column]}]")
    header.hover()  # the menu's button shows on hover
    header.locator("button[aria-label='Open cell menu']").click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def _shown(table, column: str) -> list[str]:
    """Returns the column's cells in the order the table shows its rows (a cell's test id keeps its row's index
    in the data, so the rows are read in the page's order)."""
    rows = table.locator("[role=row][data-index]")
    return [rows.nth(i).locator(f"[data-testid$='-{COLUMN[column]}']").inner_text() for i in range(rows.count())]


def _row_of(table, name: str, count: int) -> int:
    """Returns the data index of the contract `name`'s row."""
    names = [table.locator(f"[data-testid=cell-{r}-0]").inner_text() for r in range(count)]
    return names.index(name)


def test_key_terms_fill_a_table_that_sorts_and_filters_by_value_and_opens_a_cell(
    browser, app_url: str, contracts: list[Path], artifacts: Path, tmp_path: Path
) -> None:
    import openpyxl
    from icalendar import Calendar

    sample = contracts[0].name
    context, page = _open(browser, app_url)
    try:
        _add_to_collection(page, contracts, "terms-room")
        page.get_by_role("tab", name="Key terms").click()
        page.locator("#kt-run").click()
        total = len(contracts) * len(KEY_TERMS)
        sync_api.expect(page.locator("#kt-status")).to_contain_text(f"Done: {total} / {total} cells done")
        table = page.locator("#kt-table")
        sync_api.expect(table.locator("[role=row][data-index]")).to_have_count(3)
        header = [table.locator(f"[data-testid=header-{n}]").inner_text().strip() for n in range(len(HEADERS))]
        assert header == HEADERS
        # One row per contract, each key term's value as read (not a status).
        msa = _row_of(table, sample, 3)
        sync_api.expect(table.locator(f"[data-testid=cell-{msa}-{COLUMN['Governing law']}]")).to_have_text("Delaware")
        sync_api.expect(table.locator(f"[data-testid=cell-{msa}-{COLUMN['Agreement date']}]")).to_have_text(
            "2025-03-03"
        )
        sync_api.expect(table.locator(f"[data-testid=cell-{msa}-{COLUMN['Initial term']}]")).to_have_text("3 years")
        page.screenshot(path=str(artifacts / "key-terms-table.png"), full_page=True)

        # Sorted by value: 6 months is shorter than 3 years; a cell without a value comes after every value.
        _column_menu(page, table, "Initial term", "Sort ascending")
        sync_api.expect(table.locator("[role=row][data-index]").first).to_contain_text("initech-services.pdf")
        assert _shown(table, "Initial term") == ["6 months", "3 years", "Not found"]
        _column_menu(page, table, "Initial term", "Sort descending")
        sync_api.expect(table.locator("[role=row][data-index]").first).to_contain_text("dated-supply.pdf")
        assert _shown(table, "Initial term") == ["Not found", "3 years", "6 months"]
        # Dates sort as dates.
        _column_menu(page, table, "Initial term", "Clear sort")
        _column_menu(page, table, "Expiration date", "Sort ascending")
        sync_api.expect(table.locator("[role=row][data-index]").first).to_contain_text("dated-supply.pdf")
        expirations = _shown(table, "Expiration date")
        assert expirations == sorted(expirations) and expirations[0] == "2019-05-07", expirations

        # A click on a cell of the sorted table opens that cell: its value as written, its quote and page.
        msa_law = table.locator(f"[data-testid=cell-{msa}-{COLUMN['Governing law']}]")
        msa_law.click()
        cell = page.locator("#kt-cell")
        sync_api.expect(cell).to_contain_text(f"{sample} — Governing law")
        sync_api.expect(cell).to_contain_text("Value (jurisdiction): Delaware")
        sync_api.expect(cell).to_contain_text("p. 11")
        sync_api.expect(cell.locator("pre").first).to_contain_text("Delaware")
        sync_api.expect(page.locator("#kt-page-caption")).to_contain_text("Page 11 of 15: the quote is marked")
        sync_api.expect(page.locator("#kt-page img")).to_be_visible()
        page.screenshot(path=str(artifacts / "key-terms-cell.png"), full_page=True)
        # A computed value shows its working.
        dated = _row_of(table, "dated-supply.pdf", 3)
        table.locator(f"[data-testid=cell-{dated}-{COLUMN['Last day for notice']}]").click()
        sync_api.expect(cell).to_contain_text("dated-supply.pdf — Last day for notice")
        sync_api.expect(cell).to_contain_text("Computed: 2019-05-07 - 90 days = 2019-02-06")
        sync_api.expect(page.locator("#kt-page-caption")).to_contain_text("Page 1 of 1: the quote is marked")

        # Filtered by value: the search box, then a column's own filter.
        search = page.locator("#kt-table input[placeholder^='Filter']")
        search.fill("Texas")
        sync_api.expect(table.locator("[role=row][data-index]")).to_have_count(1)
        sync_api.expect(table.locator("[role=row][data-index]")).to_contain_text("initech-services.pdf")
        search.fill("")
        sync_api.expect(table.locator("[role=row][data-index]")).to_have_count(3)
        _column_menu(page, table, "Governing law", "Filter")
        page.get_by_placeholder("Type a value").fill("Delaware")
        page.locator(".filter-menu .check-button").click()
        sync_api.expect(table.locator("[role=row][data-index]")).to_have_count(1)
        sync_api.expect(table.locator("[role=row][data-index]")).to_contain_text(sample)

        files = {}
        for suffix in ("xlsx", "csv", "json", "ics"):
            with page.expect_download() as info:
                page.locator(f"#kt-{suffix}").click()
            download = info.value
            assert download.suggested_filename == f"terms-room-key-terms.{suffix}"
            files[suffix] = tmp_path / download.suggested_filename
            download.save_as(files[suffix])
    finally:
        context.close()

    sheet = openpyxl.load_workbook(io.BytesIO(files["xlsx"].read_bytes()))["Review"]
    rows = list(sheet.iter_rows(values_only=True))
    assert list(rows[0][1:-1]) == HEADERS[1:] and len(rows) == 4, rows[0]
    by_name = {r[0]: r for r in rows[1:]}
    assert by_name[sample][COLUMN["Governing law"]] == "Delaware"
    assert by_name[sample][COLUMN["Agreement date"]].date().isoformat() == "2025-03-03"  # an Excel date
    table_csv = {r["document"]: r for r in csv.DictReader(io.StringIO(files["csv"].read_text(encoding="utf-8")))}
    assert table_csv["initech-services.pdf"]["Governing law"] == "Texas (p. 1)"
    grid = json.loads(files["json"].read_text(encoding="utf-8"))
    assert [c["term"] for c in grid["columns"]] == [t.id for t in KEY_TERMS]
    events = {str(e["summary"]): e for e in Calendar.from_ical(files["ics"].read_bytes()).walk("VEVENT")}
    assert events["Expires: dated-supply.pdf"].decoded("dtstart").isoformat() == "2019-05-07"
    assert events["Last day to give notice of non-renewal: dated-supply.pdf"].decoded("dtstart").isoformat() == (
        "2019-02-06"
    )


def test_the_review_grid_shows_a_typed_columns_values(browser, app_url: str, contracts: list[Path]) -> None:
    context, page = _open(browser, app_url)
    try:
        _add_to_collection(page, contracts[1:], "typed-room")
        sync_api.expect(page.locator("#dr-collection input")).to_have_value("typed-room")
        page.locator("#dr-questions textarea").fill(
            "Which law governs this agreement?::jurisdiction\nUnder the laws of which state is this agreement governed?"
        )
        page.locator("#dr-run").click()
        sync_api.expect(page.locator("#dr-status")).to_contain_text("Done: 4 / 4 cells done")
        grid = page.locator("#dr-grid")
        header = [grid.locator(f"[data-testid=header-{n}]").inner_text().strip() for n in range(3)]
        assert header == [
            "Document",
            "Which law governs this agreement?",
            "Under the laws of which state is this agreement governed?",
        ]
        for r in range(2):
            name = grid.locator(f"[data-testid=cell-{r}-0]").inner_text()
            law = {"dated-supply.pdf": "New York", "initech-services.pdf": "Texas"}[name]
            sentence = f"ARTICLE 2 GOVERNING LAW 2.1 This Agreement is governed by the laws of the State of {law}."
            # The typed column shows the value read (offline: a candidate to check), with its page, and the
            # sentence it was read from.
            typed = grid.locator(f"[data-testid=cell-{r}-1]")
            sync_api.expect(typed).to_contain_text(f"? Candidate - {law} (p. 1)")
            sync_api.expect(typed.locator(".dp-decisive")).to_have_text(f"\u201c{sentence}\u201d")
            # The free question shows the decisive sentence as its answer.
            sync_api.expect(grid.locator(f"[data-testid=cell-{r}-2]")).to_have_text(f"? Candidate - {sentence} (p. 1)")
        grid.locator("[data-testid=cell-0-1]").click()
        sync_api.expect(page.locator("#dr-cell")).to_contain_text("Value (jurisdiction): ")
        sync_api.expect(page.locator("#dr-page-caption")).to_contain_text("the quote is marked")
    finally:
        context.close()


# -- the handlers, called as Gradio calls them ----------------------------------------------------------------
@pytest.fixture
def echo_dp(tmp_path: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=EchoEngine())


@pytest.fixture
def offline_dp(tmp_path: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"))


def _terms_view(dp: DocPipe) -> Any:
    demo = build_app(dp)
    fns = {fn.api_name: fn.fn for fn in demo.fns.values()}
    return fns["key_terms"].__self__


def _run(view, *, matter: str | None = None, terms=(), name: str = "deal") -> list[tuple[Any, ...]]:
    """Runs the table as the page does, without keys: in the store's own matter, or the `matter` the page sends."""
    return list(view.run(name, list(terms), "no_think", "", None, matter, None, None))


def _collection(dp: DocPipe, files: list[Path], matter: str | None = None) -> None:
    report = dp.collection("deal", matter=matter).add(files)
    assert report.ok, report.failed


def test_key_terms_stream_as_cells_finish(
    offline_dp: DocPipe, contracts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docpipe.ui.terms_view, "STREAM_INTERVAL_S", 0.0)  # one table per progress event
    view = _terms_view(offline_dp)
    _collection(offline_dp, contracts[:2])
    first, *running, final = _run(view, terms=["governing_law", "agreement_date"])
    assert first[0] == "Running: 0 / 4 cells done" and first[1]["headers"] == [
        "Contract",
        "Agreement date",
        "Governing law",
    ]
    assert [sum(c != "..." for row in u[1]["data"] for c in row[1:]) for u in running] == [1, 2, 3, 4]
    assert final[0] == "Done: 4 / 4 cells done, 4 with a value."
    shown = final[1]["metadata"]["display_value"]
    assert sorted(row[1:] for row in shown) == [["2014-05-08", "New York"], ["2025-03-03", "Delaware"]]
    assert [button.value["orig_name"] for button in final[-4:]] == [
        f"deal-key-terms.{suffix}" for suffix in ("xlsx", "csv", "json", "ics")
    ]


@pytest.mark.parametrize(
    ("matter", "terms", "fragment"),
    [
        ("deal-y", [], "no matter &#x27;deal-y&#x27;"),
        (None, ["governing_law", "cap"], "unknown key term &#x27;cap&#x27;"),
        (None, ["x" * 5000], "unknown key term"),
    ],
)
def test_key_terms_of_another_matter_or_unknown_terms_are_refused_before_the_engine(
    echo_dp: DocPipe, sample_pdf: Path, matter: str | None, terms: list[str], fragment: str
) -> None:
    view = _terms_view(echo_dp)
    _collection(echo_dp, [sample_pdf])
    _collection(echo_dp, [sample_pdf], matter="deal-y")  # the page may not send another matter
    updates = _run(view, matter=matter, terms=terms)
    assert len(updates) == 1 and updates[0][0].startswith("**Error:**") and fragment in updates[0][0], updates[0][0]
    assert echo_dp.engine.batch_sizes == []  # nothing reached the engine


def test_a_table_over_the_pages_limit_is_refused(
    echo_dp: DocPipe, sample_pdf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docpipe.ui.terms_view, "MAX_GRID_CELLS", len(KEY_TERMS) - 1)
    view = _terms_view(echo_dp)
    _collection(echo_dp, [sample_pdf])
    [update] = _run(view)
    assert "1 contracts x 14 key terms is 14 cells" in update[0] and "docpipe terms" in update[0], update[0]
    assert echo_dp.engine.batch_sizes == []
    assert len(_run(view, terms=["governing_law"])) > 1  # one term fits


def test_a_cell_opens_only_in_the_matter_whose_collection_it_quotes(
    offline_dp: DocPipe, sample_pdf: Path, contracts: list[Path]
) -> None:
    import dataclasses

    view = _terms_view(offline_dp)
    _collection(offline_dp, [sample_pdf])
    state = _run(view, terms=["governing_law"])[-1][2]
    image, caption = view.show_quote(state, (0, 0), "0", "", None, None, None)
    assert image is not None and caption.startswith("Page 11 of 15: the quote is marked"), caption
    # A page that sends another matter is refused; a grid whose row names a document the collection does not
    # hold (another matter's) does not show it.
    image, caption = view.show_quote(state, (0, 0), "0", "", "deal-z", None, None)
    assert image is None and "no matter" in caption, caption
    _collection(offline_dp, contracts[1:2], matter="deal-y")
    theirs = offline_dp.collection("deal", matter="deal-y").documents[0].id
    grid = state["grid"]
    forged = {**state, "grid": dataclasses.replace(grid, rows=[dataclasses.replace(grid.rows[0], document_id=theirs)])}
    image, caption = view.show_quote(forged, (0, 0), "0", "", None, None, None)
    assert image is None and "not in collection deal" in caption, caption
    # No open cell, a cell or quote the grid does not have, no grid.
    assert view.show_quote(state, None, "0", "", None, None, None) == (
        None,
        "Click a cell of the table first.",
    )
    for opened, quote in (((0, 5), "0"), ((1, 0), "0"), ((0, 0), "7"), ((0, 0), "x")):
        image, caption = view.show_quote(state, opened, quote, "", None, None, None)
        assert image is None and "choose an entry" in caption, (opened, quote, caption)
    assert view.show_quote(None, (0, 0), "0", "", None, None, None)[0] is None


def test_the_table_sorts_each_kind_by_value_and_shows_the_value() -> None:
    from docpipe.review.grid import Cell, Column, ReviewGrid, ReviewManifest, Row
    from docpipe.values.kinds import Value

    def duration(days: int, shown: str) -> Cell:
        return Cell("present", value=Value("duration", {"days": days, "count": 1, "unit": "day"}, shown))

    def money(amount: float, shown: str) -> Cell:
        return Cell("present", value=Value("money", {"amount": amount, "currency": "USD"}, shown))

    durations = [duration(1095, "3 years"), duration(540, "18 months"), duration(90, "90 days"), Cell("not_found")]
    assert sorted(durations, key=sort_key) == [durations[2], durations[1], durations[0], durations[3]]
    amounts = [money(1_000_000, "$1,000,000"), money(250_000.5, "$250,000.50"), money(9.99, "$9.99")]
    assert [c.value.display for c in sorted(amounts, key=sort_key)] == ["$9.99", "$250,000.50", "$1,000,000"]
    dates = [Cell("present", value=Value("date", d, d)) for d in ("2028-03-03", "2019-05-07", "2019-05")]
    assert [sort_key(c) for c in sorted(dates, key=sort_key)] == ["2019-05", "2019-05-07", "2028-03-03"]

    columns = [Column("Initial term", "?", "?", kind="duration"), Column("Title", "?", "?")]
    cells = [
        [durations[0], Cell("present", answer="=HYPERLINK(1) AGREEMENT")],
        [Cell("uncertain", value=Value("duration", {"days": 30}, "30 days")), Cell("not_found")],
    ]
    rows = [Row("a" * 64, "a.pdf"), Row("b" * 64, "b.pdf")]
    table = terms_table(ReviewGrid(rows, columns, cells, ReviewManifest("x", None, None, "x", "x", "1", "f", "f")))
    assert table["headers"] == ["Contract", "Initial term", "Title"]
    assert table["metadata"]["display_value"] == [
        ['<span class="dp-name">a.pdf</span>', "3 years", "=HYPERLINK(1) AGREEMENT"],
        ['<span class="dp-name">b.pdf</span>', "Uncertain - 30 days", "Not found"],
    ]
    assert table["data"] == [
        ["a.pdf", "000001095.00 days", "=HYPERLINK(1) AGREEMENT"],
        ["b.pdf", "Uncertain - 30 days", "Not found"],
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Which law governs?::country", "unknown kind &#x27;country&#x27;; use one of text, yes_no"),
        ("Who pays?::choice[Buyer]", "at least two options"),
        ("Law?::jurisdiction\nLaw?", "asked twice"),
    ],
)
def test_a_typed_question_the_grid_cannot_take_is_refused_before_the_engine(
    echo_dp: DocPipe, sample_pdf: Path, text: str, fragment: str
) -> None:
    demo = build_app(echo_dp)
    review = {fn.api_name: fn.fn for fn in demo.fns.values()}["review"].__self__
    _collection(echo_dp, [sample_pdf])
    updates = list(review.run("deal", text, [], "no_think", "", None, None, None, None))
    assert len(updates) == 1 and fragment in updates[0][0], updates[0][0]
    assert echo_dp.engine.batch_sizes == []
