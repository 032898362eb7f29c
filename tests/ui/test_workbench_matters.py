"""The workbench behind the API keys, in real headless Chromium against a real `docpipe serve`: a user logs in
with their name and key, works in their own matters only, and what they do is in the access log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.server import QUESTION, serving

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


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("workbench") / "home"
    home.mkdir()
    keys = KeyStore(home)
    alice, _ = keys.create("alice", {"deal-x": "write"})
    bob, _ = keys.create("bob", {"deal-y": "write", "deal-z": "read"})
    with serving(home, "--engine", "echo", token=None) as served:
        yield {"served": served, "home": home, "alice": alice, "bob": bob}


def _login(browser, url: str, user: str, password: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.locator("input[type=text]").first.fill(user)
    page.locator("input[type=password]").first.fill(password)
    page.get_by_role("button", name="Login").click()
    return context, page


def _choices(page, elem_id: str) -> str:
    """Returns the text of the options a dropdown offers (empty when it offers none)."""
    listbox = page.locator("ul[role=listbox]")
    sync_api.expect(listbox).to_have_count(0)  # the previous dropdown's list has closed
    page.locator(f"#{elem_id} input").click()
    try:
        listbox.first.wait_for(state="visible", timeout=5_000)
    except sync_api.TimeoutError:
        return ""  # no options: Gradio opens no list
    text = listbox.first.inner_text()
    page.keyboard.press("Escape")
    sync_api.expect(listbox).to_have_count(0)
    return text


def test_the_api_of_the_workbench_needs_a_login(keyed: dict) -> None:
    url = keyed["served"].url
    call = httpx.post(f"{url}/ui/gradio_api/call/ingest", json={"data": [None, "", "deal-x"]}, timeout=10)
    assert call.status_code in (401, 403), call.text
    wrong = httpx.post(f"{url}/ui/login", data={"username": "bob", "password": keyed["alice"]}, timeout=10)
    assert wrong.status_code in (400, 401), wrong.text  # alice's key does not log bob in


def test_each_user_sees_only_their_matters_and_actions_are_logged(keyed: dict, browser, sample_pdf: Path) -> None:
    url = keyed["served"].url + "/ui/"
    context, page = _login(browser, url, "alice", keyed["alice"])
    try:
        page.get_by_role("tab", name="Upload").wait_for()
        matter = page.locator("#matter")
        sync_api.expect(matter).to_be_visible()
        sync_api.expect(matter.locator("input")).to_have_value("deal-x")
        page.locator("#upload-files input[type=file]").set_input_files(str(sample_pdf))
        sync_api.expect(page.locator("#upload-files")).to_contain_text(sample_pdf.stem)
        page.locator("#ingest-btn").click()
        sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        page.get_by_role("tab", name="Ask").click()
        page.locator("#question textarea").fill(QUESTION)
        page.locator("#ask-btn").click()
        sync_api.expect(page.locator("#citations")).to_contain_text("✓", timeout=TIMEOUT_MS)
    finally:
        context.close()

    context, page = _login(browser, url, "bob", keyed["bob"])
    try:
        page.get_by_role("tab", name="Upload").wait_for()
        sync_api.expect(page.locator("#matter input")).to_have_value("deal-y")
        matters = _choices(page, "matter")
        assert "deal-y" in matters and "deal-z" in matters and "deal-x" not in matters, matters
        page.get_by_role("tab", name="Ask").click()
        documents = _choices(page, "ask-doc")
        assert sample_pdf.name not in documents, documents  # alice's upload is not in bob's matters
        # Bob may only read in deal-z: an upload there is refused with the reason.
        page.get_by_role("tab", name="Upload").click()
        page.locator("#matter input").click()
        page.get_by_role("option", name="deal-z").click()
        page.locator("#upload-files input[type=file]").set_input_files(str(sample_pdf))
        sync_api.expect(page.locator("#upload-files")).to_contain_text(sample_pdf.stem)
        page.locator("#ingest-btn").click()
        sync_api.expect(page.locator("#upload-result")).to_contain_text("needs write", timeout=TIMEOUT_MS)
    finally:
        context.close()

    entries = AccessLog(keyed["home"]).read(user="alice")
    assert [(e["action"], e["matter"]) for e in entries] == [("upload", "deal-x"), ("ask", "deal-x")]
    assert all(e["key_id"] == "workbench" for e in entries)
    # Bob's refused upload is in the log too, as the API's refusals are: who tried what, where, and why not.
    [denied] = AccessLog(keyed["home"]).read(user="bob")
    assert (denied["action"], denied["matter"], denied["outcome"]) == ("upload", "deal-z", "denied")
    assert "needs write" in denied["detail"]
