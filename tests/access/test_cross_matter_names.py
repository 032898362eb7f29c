"""The name a user gave is the only name that user sees (issue 23, items 1 and 2).

The store keeps one copy of a file's bytes, under the name of whoever uploaded them first, perhaps in another
matter. Nothing shown to a later uploader of the same bytes may carry that name: not the error about an
encrypted PDF (with no password or a wrong one), not a collection add's failure reason, not the workbench's
upload result. Each leak would tell user B what matter A calls the file, and that A holds it.

Library level here with the fast test preset; the REST API and the workbench (in real headless Chromium) against
a real `docpipe serve` on 127.0.0.1 below, as the red team probed them.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from docpipe import DocPipe, Settings
from docpipe.errors import PasswordRequiredError, WrongPasswordError

SECRET_NAME = "Project-Falcon-merger-Acme-target.pdf"
PASSWORD = "falcon-2026"


def _encrypted(data: bytes, password: str) -> bytes:
    """Returns `data` (a PDF) encrypted with AES-256 under `password` as user and owner password."""
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(password, algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def locked(sample_pdf: Path) -> bytes:
    return _encrypted(sample_pdf.read_bytes(), PASSWORD)


def _refusals(dp: DocPipe, locked: bytes, name: str) -> list[str]:
    """Returns the messages of the two refusals a caller without the password gets for `locked` as `name`."""
    messages = []
    for password, error in ((None, PasswordRequiredError), ("a guess", WrongPasswordError)):
        with pytest.raises(error) as caught:
            dp.ingest(locked, name=name, password=password)
        messages.append(str(caught.value))
        assert caught.value.context["path"] == name
    return messages


def test_an_encrypted_pdf_stored_by_another_is_named_as_this_caller_named_it(tmp_path: Path, locked: bytes) -> None:
    home = tmp_path / "home"
    first = DocPipe(Settings.preset("test", home=home))
    assert first.ingest(locked, name=SECRET_NAME, password=PASSWORD).encrypted
    # The same process (index in memory) and a new one (index read from the store) refuse alike.
    for dp in (first, DocPipe(Settings.preset("test", home=home))):
        for message in _refusals(dp, locked, "mine.pdf"):
            assert "Falcon" not in message, message
            assert "mine.pdf" in message, message
        # By id, with the caller's name or with none: never the stored one.
        doc_id = first.ingest(locked, name=SECRET_NAME, password=PASSWORD).id
        with pytest.raises(PasswordRequiredError, match="theirs.pdf") as caught:
            dp.document(doc_id, name="theirs.pdf")
        assert "Falcon" not in str(caught.value)
        with pytest.raises(WrongPasswordError, match=f"document {doc_id[:12]}") as caught:
            dp.document(doc_id, password="a guess")
        assert "Falcon" not in str(caught.value)
        # A Document that did not come from opening the PDF, seen under this caller's name, is refused so.
        stored = first.document(doc_id, password=PASSWORD)
        assert stored is not None
        with pytest.raises(PasswordRequiredError, match="seen.pdf") as caught:
            dp.index(replace(stored, name="seen.pdf", password_check=None))
        assert "Falcon" not in str(caught.value)


def test_a_stored_document_is_returned_under_the_name_this_caller_gave(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    first = DocPipe(Settings.preset("test", home=home))
    data = sample_pdf.read_bytes()
    assert first.ingest(data, name="a-formula.pdf").name == "a-formula.pdf"
    for dp in (first, DocPipe(Settings.preset("test", home=home))):
        doc = dp.ingest(data, name="b-copy.pdf")
        assert doc.name == "b-copy.pdf"
        assert dp.index(data).doc.name == "document.pdf"  # bytes given no name: never a.pdf
        answer = dp.ask(doc, "What is the notice period for termination for convenience?")
        assert answer.document_name == "b-copy.pdf"
        assert {c.document_name for c in answer.citations} == {"b-copy.pdf"}
    assert first.ingest(data, name="a-formula.pdf").name == "a-formula.pdf"  # the first caller's own name stays


# -- the REST API and the workbench on a real server ---------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    from support.server import serving

    from docpipe import KeyStore

    home = tmp_path_factory.mktemp("names") / "home"
    home.mkdir()
    keys = KeyStore(home)
    alice, _ = keys.create("alice", {"ma": "write"})
    bob, _ = keys.create("bob", {"mb": "write"})
    with serving(home, "--engine", "echo", token=None) as served:
        yield {"url": served.url, "alice": alice, "bob": bob}


def _upload(world: dict, user: str, data: bytes, name: str, password: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {world[user]}", "Content-Type": "application/pdf"}
    if password:
        headers["X-Document-Password"] = password
    return httpx.post(f"{world['url']}/v1/documents", params={"name": name}, content=data, headers=headers, timeout=120)


@pytest.mark.integration
def test_the_api_names_another_matters_encrypted_upload_by_the_callers_name(world: dict, locked: bytes) -> None:
    assert _upload(world, "alice", locked, SECRET_NAME, PASSWORD).status_code == 200
    for password, status, kind in ((None, 422, "password_required"), ("a guess", 403, "wrong_password")):
        reply = _upload(world, "bob", locked, "bobs-copy.pdf", password)
        assert reply.status_code == status, reply.text
        assert reply.json()["error"]["type"] == kind
        assert "Falcon" not in reply.text and "bobs-copy.pdf" in reply.json()["error"]["message"], reply.text
    # Adding the same bytes to a collection: the file fails with a reason in the caller's words.
    auth = {"Authorization": f"Bearer {world['bob']}"}
    created = httpx.post(f"{world['url']}/v1/collections", json={"name": "room"}, headers=auth, timeout=30)
    assert created.status_code in (200, 201), created.text
    added = httpx.post(
        f"{world['url']}/v1/collections/room/documents",
        files=[("file", ("bobs-room-copy.pdf", locked, "application/pdf"))],
        headers=auth,
        timeout=120,
    )
    assert added.status_code == 200, added.text
    [failed] = added.json()["failed"]
    assert failed["file"] == "bobs-room-copy.pdf"
    assert "Falcon" not in added.text and "bobs-room-copy.pdf" in failed["reason"], added.text


@pytest.mark.integration
def test_the_workbench_shows_each_user_the_name_they_gave(
    world: dict, browser, locked: bytes, sample_pdf: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    assert _upload(world, "alice", sample_pdf.read_bytes(), "a-formula.pdf").status_code == 200
    assert _upload(world, "alice", locked, SECRET_NAME, PASSWORD).status_code == 200
    plain, secret = tmp_path / "b-plain-copy.pdf", tmp_path / "b-locked-copy.pdf"
    plain.write_bytes(sample_pdf.read_bytes())
    secret.write_bytes(locked)

    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(world["url"] + "/ui/")
        page.locator("input[type=text]").first.fill("bob")
        page.locator("input[type=password]").first.fill(world["bob"])
        page.get_by_role("button", name="Login").click()
        page.get_by_role("tab", name="Upload").wait_for()
        expect(page.locator("#matter input")).to_have_value("mb")
        result = page.locator("#upload-result")
        page.locator("#upload-files input[type=file]").set_input_files([str(plain), str(secret)])
        expect(page.locator("#upload-files")).to_contain_text(secret.stem)
        page.locator("#ingest-btn").click()
        expect(result).to_contain_text("b-plain-copy.pdf", timeout=60_000)
        expect(result).to_contain_text("b-locked-copy.pdf is encrypted")
        shown = result.inner_text()
        assert "✓ b-plain-copy.pdf" in shown, shown
        assert "a-formula" not in shown and "Falcon" not in shown, shown
        # The same two files into a collection: added under bob's name, refused in bob's words.
        page.locator("#upload-files input[type=file]").set_input_files([str(plain), str(secret)])
        expect(page.locator("#upload-files")).to_contain_text(secret.stem)
        page.locator("#upload-collection textarea, #upload-collection input").first.fill("room-b")
        page.locator("#collection-btn").click()
        expect(result).to_contain_text("Collection room-b", timeout=60_000)
        expect(result).to_contain_text("b-locked-copy.pdf")
        shown = result.inner_text()
        assert "b-plain-copy.pdf" in shown and "a-formula" not in shown and "Falcon" not in shown, shown
        # The pickers name it as bob does.
        page.get_by_role("tab", name="Ask").click()
        page.locator("#ask-doc input").click()
        options = page.locator("ul[role=listbox]").first
        options.wait_for(state="visible")
        listed = options.inner_text()
        assert "b-plain-copy.pdf" in listed and "a-formula" not in listed and "Falcon" not in listed, listed
    finally:
        context.close()
