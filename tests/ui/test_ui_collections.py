"""Collections in the workbench, in real headless Chromium against a real `docpipe serve`: several files uploaded
into a named collection (created on the way), then one question asked across it, each citation naming its
contract; with API keys the collection is the matter's (the REST API sees it), without keys the session's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
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


def test_without_keys_a_sessions_collection_is_its_own(tmp_path: Path, browser, contracts) -> None:
    home = tmp_path / "home"
    with serving(home, "--engine", "extractive", token=None) as served:
        first = browser.new_context(viewport={"width": 1280, "height": 1600})
        page = first.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            _upload_into_collection_and_ask(page, served.url + "/ui/", contracts, "mine")
            # Another browser session does not get this session's collection to ask.
            second = browser.new_context()
            other = second.new_page()
            other.set_default_timeout(TIMEOUT_MS)
            other.goto(served.url + "/ui/")
            other.get_by_role("tab", name="Ask").click()
            other.locator("#ask-doc input").click()
            listbox = other.locator("ul[role=listbox]")
            offered = listbox.first.inner_text() if listbox.count() else ""
            assert "mine" not in offered and "globex" not in offered, offered
            second.close()
        finally:
            first.close()
        # The session's collection lives apart from the matters' (never under "default").
        assert not (home / "matters" / "default" / "collections" / "mine").exists()
        assert list((home / "matters").glob("session-*/collections/mine"))
