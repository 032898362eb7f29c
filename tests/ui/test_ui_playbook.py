"""The Data room's Playbook view, in real headless Chromium over a real workbench on a temporary store: the
sample playbook uploaded and run over a collection of two contracts (the sample agreement and a generated one
governed by Texas law), the verdicts coloured with a symbol and a word, worst contract first, the reason on
hover; a click on a deviating and on a meeting cell opens the cited page with the quote marked; the four
downloads. A bad playbook shows its error (file, line, rule, fix) and nothing runs; a playbook whose name, rule
titles and fallback hold markup is shown as text. Then the handlers themselves: the run streams and writes
private files, and a collection or report of a matter the user may not read is refused.

Needs Debian's chromium (/usr/bin/chromium) and the Python packages gradio and playwright.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.net import free_port

from docpipe import AccessLog, DocPipe, KeyStore, Settings
from docpipe.playbook import load_playbook, parse_playbook

pytestmark = [
    pytest.mark.integration,
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000
ROOM = "deal-room"
TEXAS = "texas-supply.pdf"
MSA = "master_services_agreement.pdf"
# Verdict backgrounds (docpipe.playbook.xlsx.VERDICT_FILLS), as the browser computes them.
GREEN, RED = "rgb(198, 239, 206)", "rgb(255, 199, 206)"
# The sample playbook's rules, by column of the table (the contract's name is column 0).
LAW, CONVENIENCE = 1, 12
BAD = """[playbook]
name = "Broken positions"

[[rule]]
id = "governing-law"
title = "Governed by an approved law"
severity = "high"
term = "governing_law"
at_least = "60 days"
"""
# Markup in every string of the playbook the page shows: each must be shown as text, never run.
EVIL_TITLE = "<img src=x onerror=\"window.pwned='title'\"> Law of <b>New York</b>"
_TOML_TITLE = EVIL_TITLE.replace('"', '\\"')
EVIL = f"""[playbook]
name = "<script>window.pwned = 'name'</script>Evil positions"
description = "<img src=x onerror=\\"window.pwned='description'\\">"

[[rule]]
id = "governing-law"
title = "{_TOML_TITLE}"
severity = "high"
term = "governing_law"
allowed = ["New York"]
fallback = "<script>window.pwned = 'fallback'</script>Propose New York law."
note = "<img src=x onerror=\\"window.pwned='note'\\">"
"""

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium", allow_module_level=True)
pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

sync_api.expect.set_options(timeout=TIMEOUT_MS)

import docpipe.ui.playbook_view  # noqa: E402
from docpipe.ui.app import build_app, launch_kwargs  # noqa: E402


def _texas(path: Path) -> Path:
    """A short supply agreement governed by Texas law, with no liability cap: worse than the sample's."""
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    pdf.drawString(60, 740, "SUPPLY AGREEMENT")
    pdf.drawString(60, 710, "1. Term. This agreement lasts one year from the effective date of signature.")
    pdf.drawString(60, 690, "2. Termination. Either party may terminate it on thirty (30) days' written notice.")
    pdf.drawString(60, 670, "3. Governing Law. This agreement is governed by the laws of the State of Texas.")
    pdf.save()
    return path


@pytest.fixture(scope="module")
def contracts(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> list[Path]:
    folder = tmp_path_factory.mktemp("playbook-contracts")
    shutil.copy(sample_pdf, folder / MSA)
    return [folder / MSA, _texas(folder / TEXAS)]


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
def workbench(tmp_path_factory: pytest.TempPathFactory, contracts: list[Path]) -> Iterator[tuple[str, Path]]:
    """The workbench without a language model over a store whose own matter has the collection `ROOM` (made
    by the library, as the command line would), and the store's folder."""
    home = tmp_path_factory.mktemp("playbook-workbench")
    dp = DocPipe(Settings.preset("test", home=home))
    added = dp.collection(ROOM).add(contracts)
    assert added.ok, added.failed
    with _serve(dp) as url:
        yield url, home


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
    sync_api.expect(page.locator("#dr-collection input")).to_have_value(ROOM)
    page.get_by_role("tab", name="Playbook", exact=True).click()
    return context, page


def _upload(page, path: Path) -> None:
    page.locator("#pb-file input[type=file]").set_input_files(str(path))


def _cell(page, r: int, c: int):
    return page.locator(f"#pb-table [data-testid=cell-{r}-{c}]")


def _background(cell) -> str:
    """Returns the background colour the browser paints under the cell's text (its own or its nearest box's)."""
    return cell.evaluate(
        """e => { for (let n = e.querySelector('.dp-sym') || e; n; n = n.parentElement) {
                      const c = getComputedStyle(n).backgroundColor;
                      if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c; }
                  return ''; }"""
    )


def _page_shown(page, number: int) -> None:
    sync_api.expect(page.locator("#pb-page img")).to_be_visible()
    page.wait_for_function(
        "() => { const i = document.querySelector('#pb-page img'); return i && i.complete && i.naturalWidth > 500; }"
    )
    sync_api.expect(page.locator("#pb-page-caption")).to_contain_text(f"Page {number} of ")
    sync_api.expect(page.locator("#pb-page-caption")).to_contain_text("the quote is marked")


def test_the_playbook_colours_contracts_by_verdict_worst_first_and_a_click_opens_the_page(
    browser, workbench: tuple[str, Path], repo_root: Path, artifacts: Path, tmp_path: Path
) -> None:
    import openpyxl

    url, home = workbench
    context, page = _open(browser, url)
    try:
        _upload(page, repo_root / "samples" / "playbook.toml")
        book = page.locator("#pb-playbook")
        sync_api.expect(book).to_contain_text("Commercial contracts: supplier positions")
        sync_api.expect(book).to_contain_text("18 rules (6 high, 8 medium, 4 low severity)")
        page.locator("#pb-run").click()
        status = page.locator("#pb-status")
        sync_api.expect(status).to_contain_text("Done: 2 contracts x 18 rules of Commercial contracts")
        sync_api.expect(status).to_contain_text("2 deviate")

        table = page.locator("#pb-table")
        sync_api.expect(table.locator("[role=row][data-index]")).to_have_count(2)
        # Worst first: the Texas contract deviates from and misses high-severity rules; the sample only a medium.
        sync_api.expect(_cell(page, 0, 0)).to_have_text(TEXAS)
        sync_api.expect(_cell(page, 1, 0)).to_have_text(MSA)
        sync_api.expect(table.locator("[data-testid=header-1] span.header")).to_have_text(
            "Governed by an approved law (high)"
        )
        convenience = "The customer cannot walk away for convenience (medium)"
        sync_api.expect(table.locator(f"[data-testid=header-{CONVENIENCE}] span.header")).to_have_text(convenience)
        legend = page.locator("#pb-legend")
        for meaning in ("Meets:", "Deviates:", "Missing:", "Needs review:"):
            sync_api.expect(legend).to_contain_text(meaning)

        # A symbol and a word on the verdict's colour, the reason on hover.
        texas_law = _cell(page, 0, LAW)
        sync_api.expect(texas_law).to_have_text("\u2717 Deviates (p. 1)")
        assert _background(texas_law) == RED
        assert "The governing law is Texas" in texas_law.locator(".dp-verdict").get_attribute("title")
        sync_api.expect(_cell(page, 0, 6)).to_contain_text("\u2013 Missing")  # no liability cap at all
        law = _cell(page, 1, LAW)
        sync_api.expect(law).to_have_text("\u2713 Meets (p. 11)")
        assert _background(law) == GREEN
        assert "The governing law is Delaware" in law.locator(".dp-verdict").get_attribute("title")
        page.screenshot(path=str(artifacts / "playbook-verdicts.png"), full_page=True)

        # A deviating cell opens on its cited page, with the quote marked and the rule's fallback.
        deviates = _cell(page, 1, CONVENIENCE)
        sync_api.expect(deviates).to_have_text("\u2717 Deviates (p. 9)")
        assert _background(deviates) == RED
        deviates.click()
        cell = page.locator("#pb-cell")
        sync_api.expect(cell).to_contain_text(MSA)
        sync_api.expect(cell).to_contain_text("The customer cannot walk away for convenience")
        sync_api.expect(cell).to_contain_text("Fallback: Termination for convenience only after the first year")
        _page_shown(page, 9)
        page.screenshot(path=str(artifacts / "playbook-cell-page.png"), full_page=True)
        # So does a cell that meets the rule.
        law.click()
        sync_api.expect(cell).to_contain_text("Governed by an approved law")
        _page_shown(page, 11)

        files = {}
        for suffix in ("xlsx", "csv", "md", "json"):
            with page.expect_download() as info:
                page.locator(f"#pb-{suffix}").click()
            download = info.value
            assert download.suggested_filename == f"{ROOM}-playbook.{suffix}"
            files[suffix] = tmp_path / download.suggested_filename
            download.save_as(files[suffix])
        report = json.loads(files["json"].read_text(encoding="utf-8"))
        assert [c["name"] for c in report["contracts"]] == [TEXAS, MSA]
        assert files["md"].read_text(encoding="utf-8").startswith("# Commercial contracts: supplier positions")
        assert files["csv"].read_text(encoding="utf-8").startswith("document,document_id,rule,title")
        sheet = openpyxl.load_workbook(io.BytesIO(files["xlsx"].read_bytes()))["Verdicts"]
        assert [sheet.cell(row=r, column=1).value for r in (2, 3)] == [TEXAS, MSA]
    finally:
        context.close()
    checks = [e for e in AccessLog(home).read(user="local") if e["action"] == "check"]
    assert len(checks) >= 1 and len(checks[-1]["questions_hmac"]) == 18


def test_a_bad_playbook_shows_its_error_and_nothing_runs(
    browser, workbench: tuple[str, Path], repo_root: Path, tmp_path: Path
) -> None:
    url, home = workbench
    checks_before = sum(e["action"] == "check" for e in AccessLog(home).read())
    bad = tmp_path / "bad-playbook.toml"
    bad.write_text(BAD, encoding="utf-8")
    big = tmp_path / "big-playbook.toml"
    big.write_text("# padding\n" * 30_000, encoding="utf-8")
    context, page = _open(browser, url)
    try:
        book = page.locator("#pb-playbook")
        # A good playbook first, then a bad one in its place: the bad one is what Run would run.
        _upload(page, repo_root / "samples" / "playbook.toml")
        sync_api.expect(book).to_contain_text("18 rules")
        _upload(page, bad)
        sync_api.expect(book).to_contain_text("The playbook was refused; nothing runs.")
        # The ConfigError's message: the file and line, the rule, and the fix.
        message = "bad-playbook.toml:4: rule 'governing-law': governing_law is a jurisdiction: it takes allowed"
        sync_api.expect(book).to_contain_text(message)
        page.locator("#pb-run").click()
        status = page.locator("#pb-status")
        sync_api.expect(status).to_contain_text("the playbook was refused, so nothing runs")
        sync_api.expect(status).to_contain_text("it takes allowed, not at_least")
        sync_api.expect(page.locator("#pb-table [role=row][data-index]")).to_have_count(0)
        sync_api.expect(page.locator("#pb-xlsx")).to_be_hidden()

        _upload(page, big)
        sync_api.expect(book).to_contain_text("big-playbook.toml is over 256 KB")
        page.locator("#pb-run").click()
        sync_api.expect(status).to_contain_text("over 256 KB")
    finally:
        context.close()
    assert sum(e["action"] == "check" for e in AccessLog(home).read()) == checks_before


def test_markup_in_a_playbook_is_shown_as_text(browser, workbench: tuple[str, Path], tmp_path: Path) -> None:
    evil = tmp_path / "evil.toml"
    evil.write_text(EVIL, encoding="utf-8")
    assert parse_playbook(EVIL).rules[0].title == EVIL_TITLE
    context, page = _open(browser, workbench[0])
    try:
        _upload(page, evil)
        book = page.locator("#pb-playbook")
        sync_api.expect(book).to_contain_text("<script>window.pwned = 'name'</script>Evil positions")
        sync_api.expect(book).to_contain_text(EVIL_TITLE)  # the rules, opened below
        book.locator("summary").click()
        sync_api.expect(book.locator(".dp-rule-title")).to_have_text(EVIL_TITLE)
        page.locator("#pb-run").click()
        status = page.locator("#pb-status")
        sync_api.expect(status).to_contain_text("Done: 2 contracts x 1 rule")
        sync_api.expect(status).to_contain_text("<script>window.pwned = 'name'</script>Evil positions")
        sync_api.expect(page.locator("#pb-table [data-testid=header-1] span.header")).to_have_text(
            f"{EVIL_TITLE} (high)"
        )
        _cell(page, 0, 1).click()
        cell = page.locator("#pb-cell")
        sync_api.expect(cell.locator(".dp-rule-title")).to_have_text(EVIL_TITLE)
        sync_api.expect(cell).to_contain_text("Fallback: <script>window.pwned = 'fallback'</script>Propose New York")
        sync_api.expect(cell).to_contain_text("Note: <img src=x onerror=\"window.pwned='note'\">")
        sync_api.expect(page.locator("#pb-page img")).to_be_visible()
        # Nothing of it became markup: no element from the playbook, nothing ran.
        for where in ("#pb-playbook", "#pb-status", "#pb-table", "#pb-cell"):
            sync_api.expect(page.locator(f"{where} script, {where} img[src=x]")).to_have_count(0)
        sync_api.expect(page.locator(".dp-rule-title b, #pb-table b")).to_have_count(0)
        assert page.evaluate("window.pwned") is None
    finally:
        context.close()


# -- the handlers, called as Gradio calls them ----------------------------------------------------------------
def _view(dp: DocPipe):
    demo = build_app(dp)
    return next(fn.fn for fn in demo.fns.values() if fn.api_name == "playbook_check").__self__


def test_the_run_streams_its_grid_and_writes_private_downloads(
    test_pipe: DocPipe, contracts: list[Path], repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docpipe.ui.playbook_view, "STREAM_INTERVAL_S", 0.0)  # one table per progress event
    view = _view(test_pipe)
    assert test_pipe.collection(ROOM).add(contracts).ok
    book = load_playbook(repo_root / "samples" / "playbook.toml")
    first, *running, final = list(view.run(book, ROOM, "think", "", None, None, None, None))
    assert first[0].startswith("Running: 0 / ") and running and running[-1][0].startswith("Running: ")
    assert final[0].startswith("Done: 2 contracts x 18 rules"), final[0]
    assert [row[0] for row in final[1]["data"]] == [TEXAS, MSA]
    assert final[1]["headers"][LAW] == "Governed by an approved law (high)"
    state, folder = final[2], final[8]
    assert state["order"] == state["report"].order()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    paths = [button.value["path"] for button in final[-4:]]
    assert [Path(p).name for p in paths] == [f"{ROOM}-playbook.{s}" for s in ("xlsx", "csv", "md", "json")]
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in paths)
    # A click on the sample's deviating cell: its page, through the same checks as the grid's.
    image, caption = view.show_quote(state, (1, CONVENIENCE - 1), None, "", None, None, None)
    assert image is not None and caption.startswith("Page 9 of 15: the quote is marked"), caption
    for r, k in ((2, 0), (0, 18), ("x", 0)):
        image, caption = view.show_quote(state, (r, k), None, "", None, None, None)
        assert image is None and "choose an entry" in caption, (r, k, caption)
    image, caption = view.show_quote(None, (0, 0), None, "", None, None, None)
    assert image is None and "run a playbook first" in caption, caption


def test_with_keys_a_user_checks_only_collections_of_matters_they_may_read(
    test_pipe: DocPipe, contracts: list[Path], repo_root: Path
) -> None:
    alice_key, _ = KeyStore(test_pipe.store.root).create("alice", {"deal-x": "read"})
    assert alice_key
    assert test_pipe.collection(ROOM, matter="deal-x").add(contracts[:1]).ok
    assert test_pipe.collection("secret-room", matter="deal-y").add(contracts[1:]).ok
    view = _view(test_pipe)
    alice = SimpleNamespace(username="alice", session_hash="s1")
    book = load_playbook(repo_root / "samples" / "playbook.toml")

    def run(name: str, matter: str) -> list:
        return list(view.run(book, name, "think", "", None, matter, None, alice))

    refused = run("secret-room", "deal-y")
    assert len(refused) == 1 and "no matter &#x27;deal-y&#x27; for your keys" in refused[0][0], refused[0][0]
    refused = run("secret-room", "deal-x")  # the matter alice reads has no such collection
    assert len(refused) == 1 and "no collection &#x27;secret-room&#x27; here" in refused[0][0], refused[0][0]
    final = run(ROOM, "deal-x")[-1]
    assert final[0].startswith("Done: 1 contract") and " x 18 rules of " in final[0], final[0]
    # Her report opens in the matter it was run in, not from a page that now names another.
    state = final[2]
    image, caption = view.show_quote(state, (0, 0), None, "", "deal-y", None, alice)
    assert image is None and "run in another matter" in caption, caption
    denied = [e for e in AccessLog(test_pipe.store.root).read(user="alice") if e["outcome"] == "denied"]
    assert denied and denied[0]["matter"] == "deal-y"


def test_names_reasons_values_and_quotes_from_documents_are_escaped() -> None:
    from docpipe import Citation
    from docpipe.cells import ReviewManifest, Row
    from docpipe.playbook import PlaybookReport, Verdict
    from docpipe.ui.playbook_render import VERDICT_STYLES, legend_html, report_table, verdict_html

    attack = '"><img src=x onerror=alert(1)>'
    book = parse_playbook(EVIL)
    quote = Citation("s1", f"<h1>{attack}</h1>", 3, 3, f"Governed by {attack}", True, document_id="a" * 64)
    verdict = Verdict("deviates", f"The governing law is {attack}", [quote])
    report = PlaybookReport(
        book,
        [Row("a" * 64, f"<b>{attack}</b>.pdf")],
        [[verdict]],
        ReviewManifest("x", None, None, "x", "x", "1", "f", "f"),
    )
    table, order = report_table(report)
    shown = " ".join(table["metadata"]["display_value"][0]) + verdict_html(report, 0, 0)
    assert order == [0] and "<img" not in shown and "<script" not in shown, shown
    assert 'title="The governing law is &quot;&gt;&lt;img src=x onerror=alert(1)&gt;"' in shown
    assert "&lt;b&gt;&quot;&gt;&lt;img" in shown and "Governed by &quot;&gt;&lt;img" in shown
    # Every verdict has its symbol, word and colour in the legend; the table's style gives the colour.
    for symbol, meaning, colour in VERDICT_STYLES.values():
        assert symbol in legend_html() and meaning.split(":")[0] in legend_html() and colour in legend_html()
    assert table["metadata"]["styling"][0] == [
        "",
        f"background-color: {VERDICT_STYLES['deviates'][2]}; color: #1f2328;",
    ]


def test_a_path_not_uploaded_through_the_page_is_refused_and_left_alone(
    test_pipe: DocPipe, repo_root: Path, tmp_path: Path
) -> None:
    """A crafted call may name any file as the uploaded playbook (or as a contract to add beside it): it is
    neither read nor deleted."""
    demo = build_app(test_pipe)
    fns = {fn.api_name: fn.fn for fn in demo.fns.values()}
    view, tab = fns["playbook_check"].__self__, fns["review_add"].__self__
    victim = tmp_path / "playbook.toml"
    shutil.copy(repo_root / "samples" / "playbook.toml", victim)
    book, shown, _picker = view.load(str(victim))
    assert isinstance(book, str) and "not uploaded through this page" in shown, shown
    added = tab.add([str(victim)], "", {}, None, "room", None, None, None, None)
    assert "not uploaded through this page" in added[0], added[0]
    assert victim.read_bytes() == (repo_root / "samples" / "playbook.toml").read_bytes()
