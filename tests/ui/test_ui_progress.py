"""The workbench's upload progress: the library's stage callback and a collection's steps turned into Gradio
progress (a real `DocPipe` ingesting, the bar recorded), then in real headless Chromium, the workbench as
`docpipe ui` launches it and as `docpipe serve` mounts it at /ui: while an upload is embedding, the bar over the
upload result names the file and its stage; once done, the answer flow works.

The browser tests hold the embedder at a gate (a hashing embedder that waits for the test to open it), so the
bar is on the page for as long as the test looks at it, however fast this machine ingests.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.contracts import contract_pdf
from support.net import free_port

from docpipe import DocPipe, Settings
from docpipe.embed.hashing import HashingEmbedder
from docpipe.ui.progress import (
    UploadProgress,
    batches,
    stage_fraction,
)  # imports no gradio: the unit tests run without it

pytestmark = [
    # Gradio's own pandas 3 deprecations (gradio/queueing.py), not ours.
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]
QUESTION = "What is the notice period for termination for convenience?"
TIMEOUT_MS = 60_000


class Recorder:
    """Stands in for ``gr.Progress()``: the same call, ``(fraction, desc=...)``, kept in a list."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str]] = []

    def __call__(self, fraction: float, desc: str | None = None) -> None:
        self.calls.append((fraction, desc or ""))

    @property
    def fractions(self) -> list[float]:
        return [fraction for fraction, _ in self.calls]

    @property
    def texts(self) -> list[str]:
        return [desc for _, desc in self.calls]


def _index_of(texts: list[str], fragment: str) -> int:
    return next(i for i, text in enumerate(texts) if fragment in text)


# -- the progress steps, over a real ingestion ---------------------------------------------------------------
def test_each_stage_of_a_real_ingest_moves_the_bar_for_its_file(test_pipe: DocPipe, sample_pdf: Path) -> None:
    bar = Recorder()
    steps = UploadProgress(bar, total=2)

    doc = test_pipe.ingest(sample_pdf.read_bytes(), name="msa.pdf", progress=steps.file(1, "msa.pdf"))

    assert len(doc.pages) == 15
    texts = bar.texts
    assert all(text.startswith("msa.pdf (file 2 of 2): ") for text in texts), texts
    # The library's own stage texts, in order (extra calls between them, e.g. per embedding batch, are fine).
    order = [_index_of(texts, stage) for stage in ("reading the upload", "extracting", "splitting", "embedding")]
    assert order == sorted(order), texts
    assert bar.fractions == sorted(bar.fractions), bar.calls  # never backwards
    assert 0.5 <= bar.fractions[0] < bar.fractions[-1] < 1.0  # the second of two files: its half of the bar


def test_unknown_or_repeated_stages_keep_the_bar_and_a_broken_bar_never_fails_the_upload(test_pipe: DocPipe) -> None:
    bar = Recorder()
    stage = UploadProgress(bar, total=1).file(0, "a.pdf")
    for text in ("embedding 300 passages", "embedding passages 150/300", "ocr page 3 of 9", "extracting", "\n" * 3):
        stage(text)
    assert bar.fractions == sorted(bar.fractions), bar.calls
    assert bar.fractions[2] == pytest.approx(0.55 + (0.98 - 0.55) / 2)  # halfway through embedding
    assert bar.fractions[-1] == bar.fractions[2]
    assert stage_fraction("embedding passages 900 of 300") <= 0.98 and stage_fraction("") == 0.0
    stage("x" * 10_000)
    assert len(bar.texts[-1]) <= 160

    def broken(_fraction: float, desc: str | None = None) -> None:
        raise RuntimeError("the browser went away")

    pdf = contract_pdf("SERVICES AGREEMENT", "1. Term. This agreement lasts one year.")
    doc = test_pipe.ingest(pdf, name="b.pdf", progress=UploadProgress(broken, total=1).file(0, "b.pdf"))
    assert doc.pages and doc.sections


def test_a_collections_steps_report_its_files_and_embedding(test_pipe: DocPipe, tmp_path: Path) -> None:
    files = []
    for number, party in enumerate(("Acme", "Globex")):
        path = tmp_path / f"{party.lower()}.pdf"
        path.write_bytes(contract_pdf(f"SUPPLY AGREEMENT {number}", f"1. Parties. {party} supplies widgets."))
        files.append(path)
    bar = Recorder()
    steps = UploadProgress(bar, total=len(files))
    steps.begin("deal-x: extracting 2 file(s)")

    report = test_pipe.collection("deal-x").add(files, progress=steps.collection_step)

    assert len(report.added) == 2
    texts = bar.texts
    assert texts[0] == "deal-x: extracting 2 file(s)" and bar.fractions[0] == 0.0
    assert any("embedding passages and sentences:" in text for text in texts), texts
    assert texts[-1].startswith("2 of 2 files: ") and texts[-1].endswith(" done"), texts
    assert bar.fractions == sorted(bar.fractions) and bar.fractions[-1] == 1.0


# -- in the browser --------------------------------------------------------------------------------------------
class GatedEmbedder(HashingEmbedder):
    """The hashing embedder, waiting (up to a minute) for `gate` before it embeds anything."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()

    def embed(self, texts: list[str]) -> Any:
        self.gate.wait(60)
        return super().embed(texts)


@contextlib.contextmanager
def held(embedder: GatedEmbedder) -> Iterator[None]:
    """Embedding waits inside the block; the gate opens at its end, whatever happens."""
    embedder.gate.clear()
    try:
        yield
    finally:
        embedder.gate.set()


@pytest.fixture(scope="module", params=["docpipe ui", "docpipe serve"])
def gated_app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, GatedEmbedder]]:
    """The workbench over the test preset with a gated embedder, launched on its own (as `docpipe ui` does) or
    mounted at /ui of the FastAPI app (as `docpipe serve` does); returns its URL and the embedder."""
    pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
    from docpipe.ui.app import build_app, launch_kwargs

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    embedder = GatedEmbedder()
    dp = DocPipe(Settings.preset("test", home=tmp_path_factory.mktemp("ui-progress")), embedder=embedder)
    port = free_port()
    try:
        if request.param == "docpipe ui":
            demo = build_app(dp, max_upload_mb=5)
            kwargs = launch_kwargs(max_upload_mb=5, store_root=dp.store.root)
            demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, **kwargs)
            try:
                yield f"http://127.0.0.1:{port}/", embedder
            finally:
                demo.close()
        else:
            with _mounted(dp, port) as url:
                yield url, embedder
    finally:
        embedder.gate.set()
        dp.close()


@contextlib.contextmanager
def _mounted(dp: DocPipe, port: int) -> Iterator[str]:
    """Runs the FastAPI app with the workbench at /ui (uvicorn in a thread, 127.0.0.1) until the block ends."""
    uvicorn = pytest.importorskip("uvicorn", reason="docpipe serve needs: pip install 'docpipe-contracts[serve]'")
    from docpipe.server import ServeOptions, create_app

    app = create_app(dp, ServeOptions(port=port, max_upload_mb=5))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/ui/"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _page(browser: Any, url: str) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.get_by_role("tab", name="Upload").click()
    return page


def _choose(page: Any, files: Any, shown: str) -> None:
    """Puts `files` in the upload box and waits until Gradio has stored them (the name `shown` is listed)."""
    expect = pytest.importorskip("playwright.sync_api").expect
    page.locator("#upload-files input[type=file]").set_input_files(files)
    expect(page.locator("#upload-files")).to_contain_text(shown, timeout=TIMEOUT_MS)


def _bar_text(page: Any) -> Any:
    """The progress text over the upload result (Gradio's status tracker)."""
    return page.locator("#upload-result [data-testid=status-tracker] .progress-level-inner")


def _answer(page: Any, expect: Any) -> str:
    page.get_by_role("tab", name="Ask").click()
    page.locator("#question textarea").fill(QUESTION)
    page.locator("#ask-btn").click()
    page.locator("#answer-text pre").first.wait_for()
    expect(page.locator("#answer-text .dp-streaming")).to_have_count(0, timeout=TIMEOUT_MS)
    return page.locator("#answer-text").inner_text()


@pytest.mark.integration
def test_the_upload_shows_its_file_and_stage_while_it_ingests_then_answers(
    browser: Any, gated_app: tuple[str, GatedEmbedder], sample_pdf: Path, repo_root: Path
) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    url, embedder = gated_app
    page = _page(browser, url)
    try:
        _choose(page, str(sample_pdf), sample_pdf.stem)
        with held(embedder):
            page.locator("#ingest-btn").click()
            bar = _bar_text(page)
            expect(bar).to_contain_text(f"{sample_pdf.name}: embedding", timeout=TIMEOUT_MS)
            expect(bar).to_contain_text("passages")
            expect(page.locator("#upload-result [role=progressbar]")).to_have_attribute("aria-valuenow", "55")
            page.screenshot(path=str(_artifacts(repo_root) / "upload-progress.png"), full_page=True)
        expect(page.locator("#upload-result")).to_contain_text("15 pages", timeout=TIMEOUT_MS)
        expect(_bar_text(page)).to_have_count(0)  # the bar is gone with the result
        answer = _answer(page, expect)
        assert "ninety" in answer.lower() or "p. 9" in answer, answer
    finally:
        page.context.close()


@pytest.mark.integration
def test_adding_to_a_collection_shows_progress_then_the_collection_answers(
    browser: Any, gated_app: tuple[str, GatedEmbedder], tmp_path: Path
) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    url, embedder = gated_app
    files = []
    for party in ("Initech", "Umbrella"):
        path = tmp_path / f"{party.lower()}_services.pdf"
        clause = "Either party may terminate for convenience on sixty (60) days' written notice."
        path.write_bytes(contract_pdf(f"SERVICES AGREEMENT WITH {party.upper()}", f"12. Termination. {clause}"))
        files.append(str(path))
    page = _page(browser, url)
    try:
        _choose(page, files, "umbrella_services")
        page.locator("#upload-collection textarea, #upload-collection input").first.fill("deal-progress")
        with held(embedder):
            page.locator("#collection-btn").click()
            expect(_bar_text(page)).to_contain_text("deal-progress: extracting 2 file(s)", timeout=TIMEOUT_MS)
        expect(page.locator("#upload-result")).to_contain_text("umbrella_services.pdf", timeout=TIMEOUT_MS)
        expect(_bar_text(page)).to_have_count(0)
        assert "sixty (60) days" in " ".join(_answer(page, expect).split())
    finally:
        page.context.close()


@pytest.mark.integration
def test_a_file_name_with_markup_is_shown_as_plain_text_in_the_bar(
    browser: Any, gated_app: tuple[str, GatedEmbedder]
) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    url, embedder = gated_app
    name = 'deal"><img src=x onerror="window.__pwned=1">.pdf'
    pdf = contract_pdf("LICENSE AGREEMENT", "3. Fees. Licensee pays the fees within thirty (30) days.")
    page = _page(browser, url)
    try:
        _choose(page, {"name": name, "mimeType": "application/pdf", "buffer": pdf}, "deal")
        with held(embedder):
            page.locator("#ingest-btn").click()
            bar = _bar_text(page)
            expect(bar).to_contain_text("embedding", timeout=TIMEOUT_MS)
            text = bar.inner_text()
            # The display name: markup characters removed (docpipe.names), so nothing of it can form a tag.
            assert "deal" in text and "onerror" in text and not any(c in text for c in '<>"'), text
            assert page.locator("#upload-result img").count() == 0
        expect(page.locator("#upload-result")).to_contain_text("1 page", timeout=TIMEOUT_MS)
        assert page.evaluate("window.__pwned") is None
    finally:
        page.context.close()


def _artifacts(repo_root: Path) -> Path:
    folder = repo_root / "test-artifacts" / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_embedding_batches_move_one_files_bar_through_the_embedding_stage(test_pipe: DocPipe, sample_pdf: Path) -> None:
    bar = Recorder()
    stage = UploadProgress(bar, total=1).file(0, "msa.pdf")
    test_pipe.ingest(sample_pdf.read_bytes(), name="msa.pdf", progress=stage, embed_progress=batches(stage))
    embedding = [f for f, t in zip(bar.fractions, bar.texts) if "embedding passages" in t]
    assert len(embedding) >= 2, bar.texts  # (0, n) then one step per batch
    assert embedding[0] == pytest.approx(0.55) and embedding[-1] == pytest.approx(0.98)
    assert bar.fractions == sorted(bar.fractions)
