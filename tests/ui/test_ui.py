"""The Gradio workbench in real headless Chromium: upload, ask with citations (streamed), a bad PDF, two users
at once, the contract analysis tab and its downloads.

Needs Debian's chromium (/usr/bin/chromium) and the Python packages gradio and playwright
(``pip install 'docpipe-contracts[ui]' playwright``; no ``playwright install``: the system browser is used).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.net import free_port

from docpipe import DocPipe, Settings
from docpipe.engine.fake import EchoEngine

pytestmark = [
    pytest.mark.integration,
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = Path("/usr/bin/chromium")
QUESTION = "What is the notice period for termination for convenience?"
TIMEOUT_MS = 60_000

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install chromium", allow_module_level=True)
pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

sync_api.expect.set_options(timeout=TIMEOUT_MS)

import docpipe.ui.app  # noqa: E402
import docpipe.ui.handlers  # noqa: E402
from docpipe.names import clean_upload_name  # noqa: E402
from docpipe.ui.app import build_app, default_docpipe, launch_kwargs  # noqa: E402
from docpipe.ui.render import highlight  # noqa: E402


@pytest.fixture(scope="module")
def artifacts(repo_root: Path) -> Path:
    folder = repo_root / "test-artifacts" / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class GatedEchoEngine(EchoEngine):
    """The echo engine, holding each batch while `gate` is shut (open unless a test shuts it): a test fills the
    queue behind a request that is certainly running (`running` is set when a batch reaches the engine)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.running = threading.Event()

    def generate(self, requests):
        self.running.set()
        if not self.gate.wait(TIMEOUT_MS / 1000):
            raise RuntimeError("the test never opened the engine's gate")
        return super().generate(requests)


class StreamingEchoEngine(EchoEngine):
    """The echo engine, streaming one answer word every `delay_s`, as a model writes."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    async def stream(self, request):
        async for event in super().stream(request):
            if event.kind == "answer":
                await asyncio.sleep(self.delay_s)
            yield event


@contextlib.contextmanager
def _serve(dp: DocPipe, *, gradio_size_limit: bool = True, **options) -> Iterator[str]:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    upload_mb = options.setdefault("max_upload_mb", 5)
    demo = build_app(dp, **options)
    port = free_port()
    kwargs = launch_kwargs(max_upload_mb=upload_mb, store_root=dp.store.root)
    if not gradio_size_limit:
        kwargs.pop("max_file_size")
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, **kwargs)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The workbench over the test preset: hashing embedder, extractive answers."""
    with _serve(DocPipe(Settings.preset("test", home=tmp_path_factory.mktemp("ui-home"))), max_pages=200) as url:
        yield url


@pytest.fixture(scope="module")
def gated_engine() -> GatedEchoEngine:
    return GatedEchoEngine()


@pytest.fixture(scope="module")
def slow_app_url(tmp_path_factory: pytest.TempPathFactory, gated_engine: GatedEchoEngine) -> Iterator[str]:
    """A workbench whose engine writes (echo) answers with thinking, one request at a time, with room for one
    more in the queue; a test may hold the running request at the engine's gate."""
    dp = DocPipe(Settings.preset("test", home=tmp_path_factory.mktemp("ui-slow")), engine=gated_engine)
    with _serve(dp, concurrency=1, max_queue=1) as url:
        yield url


@pytest.fixture(scope="module")
def stream_app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A workbench whose engine streams its (echo) answer a word every 0.25 s: about 7 s per answer."""
    dp = DocPipe(Settings.preset("test", home=tmp_path_factory.mktemp("ui-stream")), engine=StreamingEchoEngine(0.25))
    with _serve(dp) as url:
        yield url


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.get_by_role("tab", name="Upload").wait_for()
    return context, page


def _upload(page, pdf: Path) -> None:
    page.get_by_role("tab", name="Upload").click()
    page.locator("#upload-files input[type=file]").set_input_files(str(pdf))
    # The file shows in the list once Gradio has stored the upload.
    try:
        # Gradio shows the name as stem and extension in two spans.
        sync_api.expect(page.locator("#upload-files")).to_contain_text(pdf.stem)
    except AssertionError:
        folder = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
        page.screenshot(path=str(folder / f"upload-failed-{pdf.stem}.png"), full_page=True)
        raise
    page.locator("#ingest-btn").click()


def _ask(page, question: str) -> None:
    page.get_by_role("tab", name="Ask").click()
    page.locator("#question textarea").fill(question)
    page.locator("#ask-btn").click()


def _answer_text(page) -> str:
    """Returns the answer box's text once the answer is finished (no longer marked as streaming)."""
    page.locator("#answer-text pre").first.wait_for()
    sync_api.expect(page.locator("#answer-text .dp-streaming")).to_have_count(0)
    return page.locator("#answer-text").inner_text()


def test_upload_ask_and_bad_pdf(browser, app_url: str, sample_pdf: Path, eval_dir: Path, artifacts: Path) -> None:
    context, page = _open(browser, app_url)
    try:
        _upload(page, sample_pdf)
        result = page.locator("#upload-result")
        sync_api.expect(result).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "upload.png"), full_page=True)

        _ask(page, QUESTION)
        answer = _answer_text(page)
        citations = page.locator("#citations").inner_text()
        assert "p. 9" in answer + citations or "ninety" in answer.lower(), answer
        sync_api.expect(page.locator("#citations")).to_contain_text("✓")
        # The source panel shows the cited section with the quote marked.
        sync_api.expect(page.locator("#source-panel mark").first).to_be_visible()
        page.screenshot(path=str(artifacts / "ask.png"), full_page=True)

        bad = eval_dir / "bad-pdfs" / "qpdf-bad1-not-a-pdf.pdf"
        _upload(page, bad)
        sync_api.expect(result).to_contain_text("not a PDF", timeout=TIMEOUT_MS)
        sync_api.expect(result).to_contain_text(bad.name)
        page.screenshot(path=str(artifacts / "bad-pdf.png"), full_page=True)
    finally:
        context.close()


def test_two_users_ask_at_once(browser, app_url: str, sample_pdf: Path, artifacts: Path) -> None:
    sessions = [_open(browser, app_url) for _ in range(2)]
    try:
        for _context, page in sessions:
            _upload(page, sample_pdf)
        for _context, page in sessions:
            sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        for _context, page in sessions:
            _ask(page, QUESTION)  # both click before either waits
        for number, (_context, page) in enumerate(sessions, 1):
            answer = _answer_text(page)
            assert "ninety" in answer.lower() or "p. 9" in answer, answer
            page.screenshot(path=str(artifacts / f"concurrent-{number}.png"), full_page=True)
    finally:
        for context, _page in sessions:
            context.close()


def _one_page_pdf(path: Path, title: str) -> Path:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    pdf.drawString(60, 740, title)
    pdf.drawString(60, 710, "1. Term. This agreement lasts one year from the effective date.")
    pdf.drawString(60, 690, "2. Termination. Either party may terminate it on thirty (30) days' written notice.")
    pdf.save()
    return path


def _picker_options(page) -> list[str]:
    """Returns the labels the Ask tab's document picker offers."""
    page.get_by_role("tab", name="Ask").click()
    page.locator("#ask-doc input").click()
    options = page.get_by_role("option")
    options.first.wait_for()
    labels = options.all_inner_texts()
    page.keyboard.press("Escape")
    return labels


def test_sessions_without_keys_share_the_stores_own_documents(
    browser, app_url: str, sample_pdf: Path, tmp_path: Path
) -> None:
    """Without keys the workbench has one user: the store's own matter, not a world per browser tab."""
    other = _one_page_pdf(tmp_path / "session_two_supply_agreement.pdf", "SUPPLY AGREEMENT")
    (first_context, first) = _open(browser, app_url)
    try:
        _upload(first, sample_pdf)
        sync_api.expect(first.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        # A tab opened later lists what the first uploaded, and adds its own for both.
        (second_context, second) = _open(browser, app_url)
        assert any(sample_pdf.name in label for label in _picker_options(second))
        _upload(second, other)
        sync_api.expect(second.locator("#upload-result")).to_contain_text("1 page,", timeout=TIMEOUT_MS)
        second_options = _picker_options(second)
        assert any(other.name in label for label in second_options), second_options
        assert any(sample_pdf.name in label for label in second_options), second_options
        # Each question is answered from the document picked (the upload picks its own), not from the other.
        _ask(second, QUESTION)
        second_answer = " ".join(_answer_text(second).lower().split())
        assert "terminate it on thirty" in second_answer and "ninety" not in second_answer
        second_context.close()
    finally:
        first_context.close()


def test_highlight_escapes_and_marks() -> None:
    text = "Either party may <b>terminate</b> on ninety (90)\n days' notice & more."
    out = highlight(text, "ninety (90) days' notice")
    assert "<mark>ninety (90)\n days&#x27; notice</mark>" in out
    assert "&lt;b&gt;terminate&lt;/b&gt;" in out and "&amp; more" in out


def test_safe_name_keeps_only_the_base_name() -> None:
    assert clean_upload_name("../../etc/passwd") == "passwd"
    assert clean_upload_name("C:\\Users\\x\\contract.pdf") == "contract.pdf"
    assert clean_upload_name("a\x00b\nc.pdf") == "abc.pdf"


def test_thinking_is_kept_apart_from_the_answer(browser, slow_app_url: str, sample_pdf: Path, artifacts: Path) -> None:
    context, page = _open(browser, slow_app_url)
    try:
        _upload(page, sample_pdf)
        sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        page.get_by_role("tab", name="Ask").click()
        page.locator("#mode").get_by_text("think", exact=True).click()
        _ask(page, QUESTION)
        answer = _answer_text(page)
        assert "ninety (90) days" in answer and "<think>" not in answer and "first section given" not in answer
        thinking = page.locator("#thinking")
        sync_api.expect(thinking).to_be_visible()
        sync_api.expect(page.locator("#thinking-text textarea")).to_be_hidden()  # collapsed until opened
        thinking.get_by_text("Thinking").first.click()
        sync_api.expect(page.locator("#thinking-text textarea")).to_have_value(
            "The question is answered by the first section given."
        )
        sync_api.expect(page.locator("#citations")).to_contain_text("p. 9")
        page.screenshot(path=str(artifacts / "thinking.png"), full_page=True)
    finally:
        context.close()


def test_full_queue_tells_the_user_to_try_again(
    browser, slow_app_url: str, gated_engine: GatedEchoEngine, sample_pdf: Path, artifacts: Path
) -> None:
    sessions = [_open(browser, slow_app_url) for _ in range(3)]
    try:
        for _context, page in sessions:
            _upload(page, sample_pdf)
            sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        # The first request holds the engine (its gate shut); of the next two, one waits in the queue and the
        # other, whichever Gradio sees second, finds it full.
        gated_engine.gate.clear()
        gated_engine.running.clear()
        first = sessions[0][1]
        _ask(first, QUESTION)
        assert gated_engine.running.wait(TIMEOUT_MS / 1000), "the first question never reached the engine"
        for _context, page in sessions[1:]:
            _ask(page, QUESTION)
        busy = _first_to_show(sessions[1:], "busy")
        busy.screenshot(path=str(artifacts / "queue-full.png"), full_page=True)
        gated_engine.gate.set()
        for page in [first, *(page for _context, page in sessions[1:] if page is not busy)]:
            assert "ninety" in _answer_text(page)
    finally:
        gated_engine.gate.set()
        for context, _page in sessions:
            context.close()


def _first_to_show(sessions, text: str):
    """Returns the page of `sessions` that shows `text`, waiting up to TIMEOUT_MS for one to."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        for _context, page in sessions:
            if page.get_by_text(text, exact=False).count():
                return page
        sessions[0][1].wait_for_timeout(100)
    raise AssertionError(f"no page showed {text!r} within {TIMEOUT_MS} ms")


def test_batch_tab_answers_every_question(browser, app_url: str, sample_pdf: Path, artifacts: Path) -> None:
    context, page = _open(browser, app_url)
    try:
        _upload(page, sample_pdf)
        sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        page.get_by_role("tab", name="Batch").click()
        page.locator("#batch-questions textarea").fill(f"{QUESTION}\nWhich law governs the agreement?\n")
        page.locator("#batch-btn").click()
        sync_api.expect(page.locator("#batch-status")).to_contain_text("2 answers", timeout=TIMEOUT_MS)
        table = page.locator("#batch-answers")
        sync_api.expect(table).to_contain_text("Which law governs the agreement?")
        sync_api.expect(table).to_contain_text("p. 11")
        page.screenshot(path=str(artifacts / "batch.png"), full_page=True)
    finally:
        context.close()


def test_page_limit_is_a_clear_message(browser, tmp_path: Path, sample_pdf: Path) -> None:
    with _serve(DocPipe(Settings.preset("test", home=tmp_path)), max_pages=10) as url:
        context, page = _open(browser, url)
        try:
            _upload(page, sample_pdf)
            sync_api.expect(page.locator("#upload-result")).to_contain_text(
                "15 pages, over the limit of 10", timeout=TIMEOUT_MS
            )
        finally:
            context.close()


def test_default_docpipe_caps_pages_in_the_extractor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCPIPE_HOME", str(tmp_path))
    assert default_docpipe("test", max_pages=10).settings.extraction.max_pages == 10


@pytest.mark.parametrize("gradio_size_limit", [True, False], ids=["gradio-refuses", "handler-refuses"])
def test_upload_size_limit_is_a_clear_message(
    browser, tmp_path: Path, sample_pdf: Path, gradio_size_limit: bool, artifacts: Path
) -> None:
    # The sample is 48 KB; the limit here is about 10 KB.
    dp = DocPipe(Settings.preset("test", home=tmp_path))
    with _serve(dp, max_upload_mb=0.01, gradio_size_limit=gradio_size_limit) as url:
        context, page = _open(browser, url)
        try:
            page.locator("#upload-files input[type=file]").set_input_files(str(sample_pdf))
            if gradio_size_limit:
                # Gradio refuses the upload itself, before the file is stored.
                sync_api.expect(page.get_by_text("exceed", exact=False).first).to_be_visible()
            else:
                sync_api.expect(page.locator("#upload-files")).to_contain_text(sample_pdf.stem)
                page.locator("#ingest-btn").click()
                sync_api.expect(page.locator("#upload-result")).to_contain_text("over the upload limit of 0.01 MB")
            page.screenshot(path=str(artifacts / f"too-big-{gradio_size_limit}.png"), full_page=True)
        finally:
            context.close()


def test_main_binds_loopback_and_asks_for_login(repo_root: Path, tmp_path: Path) -> None:
    import httpx

    port = free_port()
    uploads = tmp_path / "gradio"
    env = {
        **os.environ,
        "DOCPIPE_HOME": str(tmp_path / "home"),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "DOCPIPE_UI_AUTH": "alice:s3cret",
        "GRADIO_TEMP_DIR": str(uploads),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "docpipe.ui.app", "--preset", "test", "--port", str(port)],
        cwd=repo_root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = proc.stdout.read().decode() if proc.stdout else "docpipe.ui.app did not start"
                    raise AssertionError(output) from None
                time.sleep(0.3)
        assert httpx.get(base + "/config").status_code == 401
        with httpx.Client(base_url=base) as client:
            assert client.post("/login", data={"username": "alice", "password": "wrong"}).status_code == 400
            assert client.post("/login", data={"username": "alice", "password": "s3cret"}).status_code == 200
            assert client.get("/config").status_code == 200
            # A file in Gradio's upload folder is served: the refusals below come from Gradio's path check
            # (no allowed_paths; blocked_paths over the store and /etc), not from the router.
            mine = uploads / "0123abcd" / "note.txt"
            mine.parent.mkdir(parents=True, exist_ok=True)
            mine.write_text("served")
            assert client.get(f"/gradio_api/file={mine}").text == "served"
            outside = tmp_path / "outside.txt"
            (tmp_path / "home").mkdir(exist_ok=True)
            in_store = tmp_path / "home" / "probe.txt"
            for secret in (outside, in_store):
                secret.write_text("secret")
            for path in (outside, f"{uploads}/../{outside.name}", in_store, "/etc/passwd"):
                response = client.get(f"/gradio_api/file={path}")
                assert response.status_code == 403 and "secret" not in response.text, (path, response.status_code)
        with socket.socket() as sock:  # bound to loopback only
            addresses = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)} - {"127.0.0.1"}
            for address in addresses:
                if ":" not in address:
                    assert sock.connect_ex((address, port)) != 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_password_and_page_warnings(browser, app_url: str, eval_dir: Path, tmp_path: Path) -> None:
    from reportlab.pdfgen import canvas

    mixed = tmp_path / "mixed.pdf"
    pdf = canvas.Canvas(str(mixed))
    for number in (1, 2, 3):
        if number != 2:  # page 2 has no text layer
            pdf.drawString(72, 720, f"Section {number}. The Supplier shall deliver the goods on page {number}.")
        pdf.showPage()
    pdf.save()
    locked = eval_dir / "bad-pdfs" / "pypdf-r2-user-password.pdf"
    context, page = _open(browser, app_url)
    try:
        result = page.locator("#upload-result")
        _upload(page, mixed)
        sync_api.expect(result).to_contain_text("3 pages")
        sync_api.expect(result).to_contain_text("page 2: no text layer")

        _upload(page, locked)
        sync_api.expect(result).to_contain_text("type the password in the Password field")
        page.locator("#upload-password input").fill("asdfzxcv")
        page.locator("#ingest-btn").click()
        sync_api.expect(result).to_contain_text("1 page,")
    finally:
        context.close()


def test_answer_streams_into_the_page(browser, stream_app_url: str, sample_pdf: Path, artifacts: Path) -> None:
    context, page = _open(browser, stream_app_url)
    try:
        _upload(page, sample_pdf)
        sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        page.get_by_role("tab", name="Ask").click()
        page.locator("#mode").get_by_text("think", exact=True).click()
        _ask(page, QUESTION)
        # Mid-answer: the first words are there, marked as still being written; the thought is in the
        # (collapsed) Thinking accordion, not in the answer; no citations yet.
        partial = page.locator("#answer-text .dp-streaming pre")
        sync_api.expect(partial).to_contain_text("Either Party")
        partial_text = partial.inner_text()
        sync_api.expect(page.locator("#thinking")).to_be_visible()
        assert "first section given" not in partial_text
        assert "✓" not in page.locator("#citations").inner_text()
        page.screenshot(path=str(artifacts / "streaming.png"), full_page=True)

        answer = _answer_text(page)
        assert "ninety (90) days" in answer and "first section given" not in answer
        assert partial_text.strip() in answer and len(partial_text.strip()) < len(answer)
        sync_api.expect(page.locator("#citations")).to_contain_text("✓")
        sync_api.expect(page.locator("#citations")).to_contain_text("p. 9")
        sync_api.expect(page.locator("#source-panel mark").first).to_be_visible()
        sync_api.expect(page.locator("#thinking-text textarea")).to_be_hidden()  # still collapsed
        page.screenshot(path=str(artifacts / "streamed.png"), full_page=True)
    finally:
        context.close()


def _pre_text(fragment: str) -> str:
    import html
    import re

    match = re.search(r"<pre>(.*?)</pre>", fragment, re.DOTALL)
    assert match, fragment
    return html.unescape(match.group(1))


@pytest.mark.parametrize("backend", ["echo", "extractive"])
def test_ask_handler_yields_updates_as_the_answer_streams(
    tmp_path: Path, sample_pdf: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setattr(docpipe.ui.handlers, "STREAM_INTERVAL_S", 0.0)  # one page update per piece
    dp = DocPipe(Settings.preset("test", home=tmp_path, engine={"backend": backend}))
    doc = dp.ingest(sample_pdf)
    ask = next(fn.fn for fn in build_app(dp).fns.values() if fn.api_name == "ask")
    updates = list(ask({doc.id: doc}, doc.id, QUESTION, "think", None, None))
    *streaming, final = updates
    assert all("dp-streaming" in update[0] for update in streaming) and "dp-streaming" not in final[0]
    assert all(update[1] == [] and update[4] == "" for update in streaming)  # citations, source: at the end
    assert final[1] and "<mark>" in final[4]
    assert streaming[0][2].visible is False and streaming[0][2].open is False  # each question starts collapsed
    final_text = _pre_text(final[0])
    if backend == "extractive":  # nothing streams: a "searching" update, then the answer
        assert len(updates) == 2 and _pre_text(streaming[0][0]) == ""
        return
    texts = [_pre_text(update[0]) for update in streaming]
    assert len(updates) > 10
    assert all(a == "" or b.startswith(a) for a, b in zip(texts, texts[1:])), texts
    assert texts[-1] == final_text and "ninety (90) days" in final_text
    thought = "The question is answered by the first section given."
    assert all(update[3] in ("", thought) for update in streaming) and final[3] == thought
    assert all(update[2].visible for update in streaming if update[3]) and final[2].visible
    assert "first section given" not in final_text


def test_contract_analysis_tab_shows_the_checklist_and_downloads_it(
    browser, app_url: str, sample_pdf: Path, artifacts: Path, tmp_path: Path
) -> None:
    context, page = _open(browser, app_url)
    try:
        _upload(page, sample_pdf)
        sync_api.expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        page.get_by_role("tab", name="Contract analysis").click()
        page.locator("#analysis-btn").click()
        sync_api.expect(page.locator("#analysis-status")).to_contain_text("41 categories", timeout=TIMEOUT_MS)
        sync_api.expect(page.locator("#analysis-status")).to_contain_text("candidates, not findings")
        table = page.locator("#analysis-table")
        sync_api.expect(table).to_contain_text("Governing Law")
        sync_api.expect(table).to_contain_text("candidate (review)")
        page.screenshot(path=str(artifacts / "analysis.png"), full_page=True)

        files = {}
        for suffix in ("csv", "json", "md"):
            with page.expect_download() as info:
                page.locator(f"#analysis-{suffix}").click()
            download = info.value
            assert download.suggested_filename == f"master_services_agreement-checklist.{suffix}"
            files[suffix] = tmp_path / download.suggested_filename
            download.save_as(files[suffix])
        reader = csv.DictReader(io.StringIO(files["csv"].read_text(encoding="utf-8")))
        rows = list(reader)
        assert reader.fieldnames == ["category", "status", "clause", "pages", "note"]
        assert len(rows) == 41 and rows[0]["category"]
        law = next(row for row in rows if row["category"] == "Governing Law")
        assert law["status"] == "candidate" and "Delaware" in law["clause"] and "p. 11" in law["pages"]
        assert '"findings"' in files["json"].read_text(encoding="utf-8")
        assert "| Governing Law |" in files["md"].read_text(encoding="utf-8")
    finally:
        context.close()


FOREIGN_CASES = ["outside", "dot-dot", "etc-passwd", "dev-zero", "symlink", "fifo", "planted"]


@pytest.mark.parametrize("case", FOREIGN_CASES)
def test_ingest_opens_only_what_its_upload_route_stored(
    tmp_path: Path, sample_pdf: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    # The handler itself, called as Gradio calls it with a path from an API request: whatever Gradio's own
    # checks did before (in `docpipe serve` they did nothing), the handler refuses without reading.
    import shutil
    import threading

    uploads = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))
    home = tmp_path / "home"
    demo = build_app(DocPipe(Settings.preset("test", home=home)))
    ingest = next(fn.fn for fn in demo.fns.values() if fn.api_name == "ingest")
    outside = tmp_path / "outside" / "contract.pdf"
    outside.parent.mkdir()
    shutil.copyfile(sample_pdf, outside)
    planted = uploads / "0123abcd" / "contract.pdf"
    planted.parent.mkdir(parents=True)
    path = {
        "outside": str(outside),
        "dot-dot": f"{uploads}/../outside/contract.pdf",
        "etc-passwd": "/etc/passwd",
        "dev-zero": "/dev/zero",
    }.get(case, str(planted))
    if case == "symlink":
        planted.symlink_to(outside)
    elif case == "fifo":
        os.mkfifo(planted)
    elif case == "planted":  # in Gradio's folder, as Gradio's own copies are, but never uploaded
        shutil.copyfile(sample_pdf, planted)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(ingest(path, "", {}, None, None)), daemon=True)
    worker.start()
    worker.join(10)
    try:
        assert result, "the handler is still reading the file"
        message, docs = result[0][0], result[0][1]
        assert "dp-err" in message and "uploaded through this page" in message, message
        assert docs == {} and not list(home.glob("docs/*"))
        assert os.path.lexists(planted) or case not in ("symlink", "fifo", "planted")  # never deleted
        assert outside.is_file()
    finally:
        if worker.is_alive() and case == "fifo":  # let a blocked open() of the FIFO return
            os.close(os.open(planted, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)


def test_gradio_sweeps_report_copies_from_its_cache(
    tmp_path: Path, sample_pdf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Report downloads are copied into Gradio's cache; its sweep (delete_cache) is what removes those copies.
    from gradio_client import Client, handle_file

    uploads = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))
    assert build_app(DocPipe(Settings.preset("test", home=tmp_path / "h0"))).delete_cache == docpipe.ui.app.DELETE_CACHE
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    demo = build_app(dp, delete_cache=(1, 1))
    port = free_port()
    demo.launch(
        prevent_thread_lock=True,
        server_name="127.0.0.1",
        server_port=port,
        quiet=True,
        **launch_kwargs(max_upload_mb=5, store_root=dp.store.root),
    )
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False, download_files=str(tmp_path / "client"))
        ingested = client.predict([handle_file(str(sample_pdf))], "", None, api_name="/ingest")
        assert "15 pages" in ingested[0], ingested
        assert not list(uploads.rglob(sample_pdf.name))  # the upload went once ingested
        analysed = client.predict(ingested[-2]["value"], ["Governing Law"], "auto", None, api_name="/analyze")
        assert "1 categories" in analysed[0], (analysed[0], ingested)
        copies = list(uploads.rglob("*-checklist.*"))
        assert len(copies) == 3, sorted(uploads.rglob("*"))
        deadline = time.monotonic() + 15
        while any(p.exists() for p in copies) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(p.exists() for p in copies)
        client.close()
    finally:
        demo.close()
