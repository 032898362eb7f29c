"""Collections in the workbench, in real headless Chromium against a real `docpipe serve`: several files uploaded
into a named collection (created on the way), then one question asked across it, each citation naming its
contract; with API keys the collection is the matter's (the REST API sees it), without keys the store's own (the
command line's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cli import run_cli
from support.contracts import CONTRACTS, NAMED_QUESTION
from support.server import serving

from docpipe import AccessLog, KeyStore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium", allow_module_level=True)
pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

TWO = ("acme-supply.pdf", "globex-license.pdf")


@pytest.fixture(scope="module")
def contracts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("contracts")
    paths = []
    for name in TWO:
        (folder / name).write_bytes(CONTRACTS[name])
        paths.append(folder / name)
    return paths


def _upload_into_collection_and_ask(page, url: str, contracts: list[Path], collection: str) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Upload").wait_for()
    page.locator("#upload-files input[type=file]").set_input_files([str(p) for p in contracts])
    for path in contracts:
        sync_api.expect(page.locator("#upload-files")).to_contain_text(path.stem)
    page.locator("#upload-collection textarea, #upload-collection input").first.fill(collection)
    page.locator("#collection-btn").click()
    result = page.locator("#upload-result")
    sync_api.expect(result).to_contain_text(f"Collection {collection}: 2 added", timeout=TIMEOUT_MS)
    for name in TWO:
        sync_api.expect(result).to_contain_text(name)
    page.get_by_role("tab", name="Ask").click()
    # The collection the files went into is chosen for the question.
    sync_api.expect(page.locator("#ask-doc input")).to_have_value(f"Collection: {collection}")
    page.locator("#question textarea").fill(NAMED_QUESTION)
    page.locator("#ask-btn").click()
    citations = page.locator("#citations")
    sync_api.expect(citations).to_contain_text("globex-license.pdf", timeout=TIMEOUT_MS)
    sync_api.expect(citations).to_contain_text("p. 1")
    # The contract the question names is cited first (rows in order), quoting its own term.
    table = citations.inner_text()
    acme = table.find("acme-supply.pdf")
    assert acme == -1 or table.find("globex-license.pdf") < acme, table
    assert "thirty (30)" in table, table
    sync_api.expect(page.locator("#source-panel")).to_contain_text("globex-license.pdf")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("workbench-collections") / "home"
    home.mkdir()
    alice, _ = KeyStore(home).create("alice", {"deal-x": "write"})
    with serving(home, "--engine", "extractive", token=None) as served:
        yield {"served": served, "home": home, "alice": alice}


def test_files_uploaded_into_a_collection_are_asked_across_in_the_matter(keyed: dict, browser, contracts) -> None:
    served = keyed["served"]
    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(served.url + "/ui/")
        page.locator("input[type=text]").first.fill("alice")
        page.locator("input[type=password]").first.fill(keyed["alice"])
        page.get_by_role("button", name="Login").click()
        sync_api.expect(page.locator("#matter input")).to_have_value("deal-x")
        _upload_into_collection_and_ask(page, served.url + "/ui/", contracts, "deal-room")
    finally:
        context.close()
    # The matter's collection, seen over the API with the same key; its files are documents of the matter.
    headers = {"Authorization": f"Bearer {keyed['alice']}"}
    listed = httpx.get(f"{served.url}/v1/collections/deal-room", headers=headers, timeout=30).json()
    assert sorted(m["name"] for m in listed["documents"]) == sorted(TWO)
    documents = httpx.get(f"{served.url}/v1/documents", headers=headers, timeout=30).json()["documents"]
    assert sorted(d["name"] for d in documents) == sorted(TWO)
    actions = [e["action"] for e in AccessLog(keyed["home"]).read(user="alice")]
    assert actions.count("collection_add") == 2 and "ask" in actions


def test_without_keys_the_workbench_is_the_stores_own_matter(tmp_path: Path, browser, contracts) -> None:
    """The same store from the command line, the browser and REST: a collection the CLI made is in the
    workbench's pickers (a matter's is not), a collection made in the browser is the CLI's and the server's."""
    home = tmp_path / "home"
    room = tmp_path / "room"
    room.mkdir()
    (room / "initech-services.pdf").write_bytes(CONTRACTS["initech-services.pdf"])
    private = tmp_path / "private"
    private.mkdir()
    (private / "umbrella.pdf").write_bytes(CONTRACTS["acme-supply.pdf"])
    for args in (("--collection", "room", room), ("--matter", "deal-x", "--collection", "secret-room", private)):
        done = run_cli(home, "--preset", "test", "ingest", *args)
        assert done.returncode == 0, done.stderr
    with serving(home, "--engine", "extractive", token=None) as served:
        context = browser.new_context(viewport={"width": 1280, "height": 1600})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            page.goto(served.url + "/ui/")
            page.get_by_role("tab", name="Ask").click()
            page.locator("#ask-doc input").click()
            listbox = page.locator("ul[role=listbox]").first
            sync_api.expect(listbox).to_contain_text("Collection: room")
            sync_api.expect(listbox).to_contain_text("initech-services.pdf")
            offered = listbox.inner_text()
            assert "secret-room" not in offered and "umbrella" not in offered, offered
            page.keyboard.press("Escape")
            _upload_into_collection_and_ask(page, served.url + "/ui/", contracts, "mine")
        finally:
            context.close()
        # The browser's collection is the store's own: listed over REST and on the command line.
        names = [c["name"] for c in httpx.get(f"{served.url}/v1/collections", timeout=30).json()["collections"]]
        assert names == ["mine", "room"]
    listed = run_cli(home, "--preset", "test", "collections")
    assert "mine  2 documents" in listed.stdout and "room  1 document" in listed.stdout, listed.stdout
    assert not list(home.glob("matters/session-*")), "no per-tab world is left in the store"
    uploads = [e for e in AccessLog(home).read(matter="default") if e["action"] == "collection_add"]
    assert {e["user"] for e in uploads} == {"owner", "local"}
