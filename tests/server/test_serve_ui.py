"""The workbench as `docpipe serve` mounts it at /ui (a real server process on 127.0.0.1), attacked over Gradio's
HTTP API and used in headless Chromium; and the same attack on the standalone workbench (`demo.launch`).

An API call can name any path as the "uploaded" file. The workbench must open only what its upload route
stored: a PDF elsewhere on the server, a ``..`` path, /etc/passwd, /dev/zero, a symlink or a planted file in the
upload folder are all refused, nothing reaches the store, nothing is copied into Gradio's cache, and /dev/zero
returns at once. A real upload through the page is ingested and Gradio's copy of it is gone afterwards.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import probes
from support.net import free_port
from support.server import Served, serving

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

pytest.importorskip("gradio", reason="the workbench needs gradio: pip install 'docpipe-contracts[ui]'")

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000
CALL_TIMEOUT_S = probes.CALL_TIMEOUT_S  # /dev/zero must be refused at once; this only bounds a failing run
FOREIGN = ["repo-sample", "tmp-pdf", "dot-dot", "etc-passwd", "dev-zero", "symlink-in-uploads", "planted-in-uploads"]


# -- the attack ---------------------------------------------------------------------------------------------
def call_ingest(base: str, path: str) -> tuple[str, Any]:
    """Calls the workbench's ingest endpoint naming `path` as the uploaded file, as any HTTP client can
    (`support.probes.call_ingest`, no matter). Returns ("complete" | "error" | "http_<status>", data);
    ("timeout", None) after CALL_TIMEOUT_S."""
    with httpx.Client() as client:
        return probes.call_ingest(client, base, path, None)


def foreign_path(case: str, *, uploads: Path, outside: Path, sample_pdf: Path) -> str:
    """Returns the path an attacker names for `case` (planting what the case needs)."""
    outside.mkdir(parents=True, exist_ok=True)
    copy = outside / "contract.pdf"
    if not copy.exists():
        shutil.copyfile(sample_pdf, copy)
    planted = uploads / f"planted-{case}"
    if case == "repo-sample":
        return str(sample_pdf)
    if case == "tmp-pdf":
        return str(copy)
    if case == "dot-dot":
        return f"{uploads}/../{outside.name}/contract.pdf"
    if case == "etc-passwd":
        return "/etc/passwd"
    if case == "dev-zero":
        return "/dev/zero"
    planted.mkdir(parents=True, exist_ok=True)
    target = planted / "contract.pdf"
    if case == "symlink-in-uploads":
        target.symlink_to(copy)
    else:  # a PDF in Gradio's folder that its upload route never stored (like Gradio's own copies)
        shutil.copyfile(sample_pdf, target)
    return str(target)


def stored_documents(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "docs").glob("*")) if (home / "docs").is_dir() else []


def files_with_content(folder: Path) -> list[str]:
    """Returns the non-empty regular files under `folder` (Gradio leaves empty temp files behind)."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_size > 0
    )


def assert_refused(result: tuple[str, Any], started: float) -> None:
    kind, data = result
    assert kind != "timeout", f"no answer in {CALL_TIMEOUT_S} s: the server read the file"
    assert time.monotonic() - started < CALL_TIMEOUT_S
    if kind == "complete":  # refused by the handler: an error message, no document
        message = data[0]
        assert "dp-err" in message and "dp-ok" not in message, message
        assert "uploaded through this page" in message or "not in the upload folder" in message, message
    else:  # refused by Gradio before the handler (an uploaded-files-only check)
        assert kind == "error" or kind.startswith("http_4"), result


def attack(base: str, case: str, *, home: Path, uploads: Path, outside: Path, sample_pdf: Path) -> None:
    uploads.mkdir(parents=True, exist_ok=True)
    path = foreign_path(case, uploads=uploads, outside=outside, sample_pdf=sample_pdf)
    planted = set(files_with_content(uploads))
    documents = stored_documents(home)
    started = time.monotonic()
    result = call_ingest(base, path)
    assert_refused(result, started)
    assert stored_documents(home) == documents, "a foreign file was ingested"
    # Nothing was copied into Gradio's cache (/etc/passwd, the PDF the symlink points to, ...).
    assert set(files_with_content(uploads)) <= planted


# -- docpipe serve --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """Returns `docpipe serve` (echo engine, workbench at /ui) and its Gradio upload folder."""
    base = tmp_path_factory.mktemp("serve-ui")
    uploads = base / "gradio"
    with serving(
        base / "home", "--engine", "echo", "--max-upload-mb", "5", env={"GRADIO_TEMP_DIR": str(uploads)}
    ) as server:
        yield server, uploads


@pytest.mark.parametrize("case", FOREIGN)
def test_serve_workbench_refuses_foreign_paths(served: tuple[Served, Path], case: str, sample_pdf: Path) -> None:
    server, uploads = served
    attack(
        f"{server.url}/ui",
        case,
        home=server.home,
        uploads=uploads,
        outside=uploads.parent / "outside",
        sample_pdf=sample_pdf,
    )
    assert server.process.poll() is None


def test_serve_workbench_still_serves_only_its_own_files(served: tuple[Served, Path]) -> None:
    # A file Gradio stored is served (so the refusals below come from the check, not from routing).
    server, uploads = served
    mine = uploads / "served-check" / "note.txt"
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("ok")
    base = f"{server.url}/ui/gradio_api/file="
    assert httpx.get(base + str(mine), timeout=10).status_code == 200
    outside = uploads.parent / "outside-note.txt"
    outside.write_text("secret")
    in_store = server.home / "probe.txt"
    in_store.write_text("secret")
    for path in (str(outside), f"{uploads}/../{outside.name}", "/etc/passwd", str(in_store)):
        response = httpx.get(base + path, timeout=10)
        assert response.status_code in (403, 404) and "secret" not in response.text, path


# -- standalone (demo.launch) ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """Returns the standalone workbench's URL, its store and its upload folder."""
    from docpipe import DocPipe, Settings
    from docpipe.ui.app import build_app, launch_kwargs

    base = tmp_path_factory.mktemp("launch-ui")
    uploads = base / "gradio"
    previous = os.environ.get("GRADIO_TEMP_DIR")
    os.environ["GRADIO_TEMP_DIR"] = str(uploads)  # read by Gradio when the app is built and on each check
    dp = DocPipe(Settings.preset("test", home=base / "home"))
    demo = build_app(dp, max_upload_mb=5)
    port = free_port()
    demo.launch(
        prevent_thread_lock=True,
        server_name="127.0.0.1",
        server_port=port,
        quiet=True,
        **launch_kwargs(max_upload_mb=5, store_root=dp.store.root),
    )
    try:
        yield f"http://127.0.0.1:{port}", dp.store.root, uploads
    finally:
        demo.close()
        if previous is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = previous


@pytest.mark.parametrize("case", FOREIGN)
def test_standalone_workbench_refuses_foreign_paths(
    launched: tuple[str, Path, Path], case: str, sample_pdf: Path
) -> None:
    url, home, uploads = launched
    attack(url, case, home=home, uploads=uploads, outside=uploads.parent / "outside", sample_pdf=sample_pdf)


def test_standalone_upload_through_the_api_is_ingested_and_removed(
    launched: tuple[str, Path, Path], sample_pdf: Path
) -> None:
    # The real flow over HTTP: Gradio's upload route stores the file, the ingest call names what it returned.
    url, home, uploads = launched
    with sample_pdf.open("rb") as handle:
        response = httpx.post(f"{url}/gradio_api/upload", files={"files": (sample_pdf.name, handle)}, timeout=30)
    assert response.status_code == 200, response.text
    (path,) = response.json()
    assert Path(path).is_file()
    kind, data = call_ingest(url, path)
    assert kind == "complete" and "15 pages" in data[0], data
    assert len(stored_documents(home)) == 1
    assert not Path(path).exists() and not Path(path).parent.exists()
    assert data[5] is None  # the picker is cleared: its file is gone
    # A second call naming the same upload says what to do.
    kind, data = call_ingest(url, path)
    assert kind == "complete" and "choose the file again" in data[0], data


# -- a real upload through the page at /ui (headless Chromium) -------------------------------------------------
def _wait_for(condition: Callable[[], bool], timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_serve_workbench_ingests_a_real_upload_and_drops_gradios_copy(
    browser: Any, served: tuple[Served, Path], sample_pdf: Path, repo_root: Path
) -> None:
    from playwright.sync_api import expect

    server, uploads = served
    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{server.url}/ui/")
        page.get_by_role("tab", name="Upload").click()
        page.locator("#upload-files input[type=file]").set_input_files(str(sample_pdf))
        expect(page.locator("#upload-files")).to_contain_text(sample_pdf.stem, timeout=TIMEOUT_MS)

        # Gradio's copy of the upload (the picker may show the name before the upload has finished).
        def copies() -> list[Path]:
            return [p for p in uploads.rglob(sample_pdf.name) if "planted" not in str(p)]

        assert _wait_for(lambda: bool(copies())), sorted(str(p) for p in uploads.rglob("*"))
        stored = copies()
        page.locator("#ingest-btn").click()
        expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        artifacts = repo_root / "test-artifacts" / "ui"
        artifacts.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(artifacts / "serve-upload.png"), full_page=True)
        assert len(stored_documents(server.home)) == 1
        assert _wait_for(lambda: not any(p.exists() for p in stored)), [str(p) for p in stored]
        # The page still works: the document is in the session's list.
        page.get_by_role("tab", name="Ask").click()
        assert sample_pdf.stem in page.locator("#ask-doc input").input_value()
    finally:
        context.close()


def test_serve_workbench_report_downloads_still_work(
    served: tuple[Served, Path], sample_pdf: Path, tmp_path: Path
) -> None:
    # With Gradio's path check on in serve mode, the session's report files must still reach the browser.
    from gradio_client import Client, handle_file

    server, _uploads = served
    client = Client(f"{server.url}/ui/", verbose=False, download_files=str(tmp_path))
    try:
        ingested = client.predict([handle_file(str(sample_pdf))], "", None, api_name="/ingest")
        assert "15 pages" in ingested[0], ingested[0]
        analysed = client.predict(ingested[-2]["value"], ["Governing Law"], "auto", None, api_name="/analyze")
        assert "1 categories" in analysed[0], analysed[0]
        csv_file = Path(analysed[2]["value"])
        assert csv_file.name.endswith("-checklist.csv") and "Governing Law" in csv_file.read_text(encoding="utf-8")
    finally:
        client.close()
