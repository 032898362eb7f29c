"""The Gradio contract workbench: upload PDFs, ask questions with checked page citations (streamed where the
engine streams), batch questions, run the clause checklist and download its report.

Uses only docpipe's public API (the names in ``docpipe.__all__``). Run it with ``python -m ui.app``
(``--help`` for options) or build it in Python::

    from docpipe import DocPipe, Settings
    from ui.app import build_app, launch_kwargs

    dp = DocPipe(Settings.preset("cpu-demo"))
    demo = build_app(dp)
    demo.launch(server_name="127.0.0.1", **launch_kwargs(max_upload_mb=50, store_root=dp.store.root))

Mounted in a FastAPI app instead (as ``docpipe serve`` does), pass the same arguments to
``gr.mount_gradio_app`` and then set ``demo.has_launched = True``: Gradio (6.31) checks that a file named by
an API call was uploaded only for an app marked launched, and mounting never marks it.

Safety defaults: binds 127.0.0.1, optional basic auth (``--auth user:password`` or ``DOCPIPE_UI_AUTH``),
uploads capped in size and pages, no ``allowed_paths`` (Gradio serves only its own upload cache) and
``blocked_paths`` over the docpipe store, /dev, /proc, /sys and /etc, each browser session sees only the
documents it uploaded, and report downloads are written to a temporary folder the server creates for the
session (never a path from the browser). The ingest handler opens only regular files that this app's upload
route stored in Gradio's upload folder, size-checked before reading, and deletes Gradio's copy once the
document is in docpipe's store; Gradio's cache sweep (`DELETE_CACHE`) removes what is left (uploads never
ingested, copies of report downloads) after an hour, and everything when the server stops.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import ipaddress
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe import (
    CHECKLIST,
    Answer,
    ContractReport,
    DocPipe,
    DocpipeError,
    Document,
    PasswordRequiredError,
    Settings,
    WrongPasswordError,
)

from ui.access import WorkbenchAccess

try:  # handlers annotated with it get the request (the logged-in user) from Gradio
    from gradio import Request as GradioRequest
except ImportError:  # pragma: no cover - build_app says how to install gradio
    GradioRequest = Any  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    import gradio as gr

__all__ = [
    "DELETE_CACHE", "UploadRefused", "UploadTooLarge", "build_app", "default_docpipe", "launch_kwargs", "main",
    "read_upload", "remove_upload",
]

logger = logging.getLogger(__name__)

MODES = ["auto", "think", "no_think"]
MAX_QUESTION_CHARS = 2000
MAX_BATCH_QUESTIONS = 200
# The session's own documents, by id; a Document holds its pages, so keep the picker to a sane size.
MAX_SESSION_DOCS = 32
BUSY = "The answer engine is busy or unreachable: please try again in a moment."
# A streamed answer updates the page at most this often: enough to read along, little work per token.
STREAM_INTERVAL_S = 0.1
# How the checklist's statuses read in the table (docpipe.ContractReport: present, absent, ...).
FOUND_LABELS = {
    "present": "yes",
    "absent": "no",
    "uncertain": "uncertain",
    "candidate": "candidate (review)",
    "not_found": "no candidate found",
}
REPORT_FORMATS = (("csv", "CSV"), ("json", "JSON"), ("md", "Markdown"))
# Gradio's cache sweep, (every, older than) in seconds: uploads that were never ingested and Gradio's copies of
# report downloads are contract text at rest; they go after an hour, and all of them when the server stops.
DELETE_CACHE = (3600, 3600)
# Never served, nor copied into Gradio's cache, whatever a handler or an API call names (plus the store).
BLOCKED_PATHS = ("/dev", "/proc", "/sys", "/etc")

CSS = """
#source-panel pre, #answer-text pre { white-space: pre-wrap; font-family: inherit; margin: 0; }
#source-panel mark { background: #ffe066; color: inherit; padding: 0 1px; }
.dp-ok { color: #1a7f37; } .dp-err { color: #c62828; } .dp-warn { color: #9a6700; }
"""


# -- formatting (pure functions: HTML-escaped, testable without a browser) -------------------------------
def safe_name(raw: str) -> str:
    """Returns a display name for an upload: its base name only, without control characters, at most 120 chars."""
    name = Path(str(raw).replace("\\", "/")).name
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    return (name or "document.pdf")[:120]


def _doc_label(doc: Document) -> str:
    return f"{doc.name} ({len(doc.pages)} pages, {doc.id[:8]})"


def _describe_doc(doc: Document) -> str:
    pages = len(doc.pages)
    ok = sum(1 for status in doc.page_statuses.values() if status == "ok")
    parts = [
        f'<div class="dp-ok"><b>&#10003; {html.escape(doc.name)}</b>: {pages} page{"s" if pages != 1 else ""}, '
        f"{len(doc.sections)} sections, {ok} of {pages} pages with text</div>"
    ]
    warnings = doc.warnings
    if warnings:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in warnings[:50])
        more = f"<li>... and {len(warnings) - 50} more</li>" if len(warnings) > 50 else ""
        parts.append(f'<ul class="dp-warn">{items}{more}</ul>')
    return "".join(parts)


def _describe_error(name: str, message: str) -> str:
    return f'<div class="dp-err"><b>&#10007; {html.escape(name)}</b>: {html.escape(message)}</div>'


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def highlight(text: str, quote: str) -> str:
    """Returns `text` HTML-escaped with the first whitespace-insensitive occurrence of `quote` in <mark>."""
    words = quote.split()
    match = None
    if words:
        pattern = r"\s+".join(re.escape(word) for word in words)
        match = re.search(pattern, text)
    if match is None:
        return html.escape(text)
    return (
        html.escape(text[: match.start()])
        + "<mark>"
        + html.escape(match.group(0))
        + "</mark>"
        + html.escape(text[match.end():])
    )


def citation_rows(answer: Answer) -> list[list[str]]:
    """Returns one row per citation: heading, pages, quote, verified (✓/✗)."""
    return [
        [c.heading or c.section_id or "(unknown section)", c.pages if c.page_start else "?", c.quote,
         "✓" if c.verified else "✗"]
        for c in answer.citations
    ]


def source_html(doc: Document, answer: Answer) -> str:
    """Returns the first cited section's text, HTML-escaped, with the quoted span marked."""
    for citation in answer.citations:
        if not citation.section_id:
            continue
        try:
            section = doc.section(citation.section_id)
        except KeyError:
            continue
        header = f"<p><b>{html.escape(section.heading or section.id)}</b> ({html.escape(section.pages)})</p>"
        return header + f"<pre>{highlight(section.text, citation.quote)}</pre>"
    return "<p><i>No cited section to show.</i></p>"


def answer_html(answer: Answer) -> str:
    """Returns the answer text (escaped, so model output cannot inject markup or load images) and its notice."""
    label = "extractive (quoted from the contract)" if answer.mode == "extractive" else (
        f"{answer.mode}, {answer.model or answer.engine}" + (", thinking" if answer.thinking_enabled else "")
    )
    out = f"<p><small>Answer mode: {html.escape(label)}</small></p>" + _pre(answer.text or "(no answer text)")
    if answer.notice:
        out += f'<p class="dp-warn"><small>{html.escape(answer.notice)}</small></p>'
    return out


def streaming_html(text: str, *, thinking: bool = False) -> str:
    """Returns the answer written so far (escaped), marked as still being written (class ``dp-streaming``)."""
    if text:
        status = "Writing the answer..."
    elif thinking:
        status = "The model is thinking (open Thinking below to follow along)..."
    else:
        status = "Finding the relevant sections..."
    return f'<div class="dp-streaming"><p><small>{html.escape(status)}</small></p>{_pre(text)}</div>'


def _error_html(message: str) -> str:
    return f'<div class="dp-err"><b>Error:</b> {html.escape(message)}</div>'


def report_rows(report: ContractReport) -> list[list[str]]:
    """Returns one table row per checklist category: category, found, clause (verified quotes), pages, note."""
    return [
        [row["category"], FOUND_LABELS.get(row["status"], row["status"]), row["clause"], row["pages"] or "-",
         row["note"]]
        for row in report.rows()
    ]


def report_summary(report: ContractReport) -> str:
    """Returns a one-paragraph Markdown summary of a report: counts per status and what they mean."""
    counts: dict[str, int] = {}
    for finding in report.findings:
        counts[finding.status] = counts.get(finding.status, 0) + 1
    parts = ", ".join(f"{n} {FOUND_LABELS.get(status, status)}" for status, n in counts.items())
    out = f"**{len(report.findings)} categories** checked in {html.escape(report.document_name)}: {parts}."
    if report.mode == "extractive":
        out += (" No language model is configured: each row shows the sentences that best match the category, "
                "for a reviewer to judge. They are candidates, not findings.")
    return out


def write_report_files(report: ContractReport, folder: Path) -> list[Path]:
    """Returns the report written to `folder` as CSV, JSON and Markdown, named after the document."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(safe_name(report.document_name)).stem).strip("._") or "contract"
    texts = {"csv": report.to_csv(), "json": report.to_json(), "md": report.to_markdown()}
    paths = []
    for suffix, _label in REPORT_FORMATS:
        path = folder / f"{stem[:80]}-checklist.{suffix}"
        path.write_text(texts[suffix], encoding="utf-8")
        paths.append(path)
    return paths


class UploadRefused(DocpipeError):
    """A file path given to the workbench that is not a file this app's upload route stored."""


class UploadTooLarge(UploadRefused):
    """An upload over the size limit: refused before it is read."""


def read_upload(path: str, *, uploaded: set[str] | frozenset[str], upload_root: str | Path, max_bytes: int) -> bytes:
    """Returns the bytes of an upload, at most `max_bytes`; raises `UploadRefused` for anything but a regular
    file that Gradio's upload route stored (`uploaded`, the paths it returned) inside `upload_root`.

    A path from an API call is never trusted: with Gradio's own check off (``mount_gradio_app`` never marks the
    app launched), it names any file on the server. Checked before opening: listed as uploaded, inside the
    upload folder once symlinks are resolved, not a symlink, a regular file within the size limit; then opened
    without following links or blocking (a FIFO or device put in its place is refused, never read).
    """
    path = os.fspath(path)
    if path not in uploaded:
        raise UploadRefused("this file was not uploaded through this page: choose it with the file picker")
    root = os.path.realpath(upload_root)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root or real == root:
        raise UploadRefused("this file is not in the upload folder: choose it with the file picker")
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        raise UploadRefused(
            "the upload is no longer on the server (uploads are removed once ingested, and after an hour): "
            "choose the file again and click Ingest"
        ) from None
    if not stat.S_ISREG(before.st_mode):
        raise UploadRefused("this is not a regular file: choose a PDF file with the file picker")
    if before.st_size > max_bytes:
        raise UploadTooLarge(
            f"the file is {before.st_size / 1048576:.1f} MB, over the upload limit of {max_bytes / 1048576:.3g} MB: "
            "split it or ask the administrator to raise --max-upload-mb"
        )
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        # The same file that was checked, not one swapped in since.
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise UploadRefused("the upload changed while it was being read: upload it again")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UploadTooLarge(f"the file is over the upload limit of {max_bytes / 1048576:.3g} MB")
    return data


def remove_upload(path: str, *, upload_root: str | Path) -> None:
    """Deletes an upload Gradio stored (after `read_upload` accepted it), and its folder when that is empty."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    parent = os.path.dirname(os.path.abspath(path))
    root = os.path.realpath(upload_root)
    if os.path.realpath(parent) != root and os.path.commonpath([root, os.path.realpath(parent)]) == root:
        with contextlib.suppress(OSError):  # not empty: another upload with the same content is in it
            os.rmdir(parent)


def _remove_folder(folder: str | None) -> None:
    # Called by Gradio when a session ends: its report files go with it.
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


# -- the app -------------------------------------------------------------------------------------------
def default_docpipe(preset: str | None = None, *, max_pages: int = 2000) -> DocPipe:
    """Returns a `DocPipe` from the environment (or `preset`), with extraction refusing over `max_pages` pages."""
    settings = Settings.preset(preset or "default")
    if settings.extraction.max_pages > max_pages:
        # The extractor itself refuses the document before reading its pages.
        settings = Settings.preset(preset or "default", extraction={"max_pages": max_pages})
    return DocPipe(settings)


def build_app(
    dp: DocPipe | None = None,
    *,
    max_upload_mb: float = 50,
    max_pages: int = 2000,
    concurrency: int = 16,
    max_queue: int = 64,
    delete_cache: tuple[int, int] | None = DELETE_CACHE,
    access: WorkbenchAccess | None = None,
) -> gr.Blocks:
    """Returns the workbench as a queued `gr.Blocks` (Upload, Ask, Batch, Contract analysis tabs); launch it
    yourself.

    Launch it with `launch_kwargs` (`main` does): its ``max_file_size`` makes Gradio refuse big uploads
    before they are stored; the handler checks the size as well. `concurrency` events run at
    once, so concurrent questions reach the engine together and docpipe batches them; at most `max_queue`
    more wait, beyond that users get Gradio's "busy, please try again". `delete_cache` is Gradio's sweep of
    its cache, (every, older than) in seconds. `access` decides who may see what (launch with its
    ``auth()``): with API keys, each user works in their matters; without, each session sees its own uploads.
    """
    import gradio as gr

    dp = dp if dp is not None else default_docpipe(max_pages=max_pages)
    access = access if access is not None else WorkbenchAccess(dp)
    max_bytes = int(max_upload_mb * 1024 * 1024)

    def _choices(docs: dict[str, Document]) -> list[tuple[str, str]]:
        return [(_doc_label(doc), doc_id) for doc_id, doc in docs.items()]

    def _pickers(choices: list[tuple[str, str]], value: str | None) -> list[Any]:
        return [gr.Dropdown(choices=choices, value=value) for _ in range(3)]

    def ingest(files: list[str] | str | None, password: str, docs: dict[str, Document] | None,
               matter: str | None, request: GradioRequest):
        docs = dict(docs or {})
        paths = [files] if isinstance(files, str) else list(files or [])
        results: list[str] = []
        last: str | None = None
        # Uploads a password could still open stay in the picker (and on disk) for another try.
        pending: list[str] = []
        try:
            principal = access.principal(request)
            if principal is not None:
                access.check(principal, matter, "write")
        except DocpipeError as exc:
            return _describe_error("upload", str(exc)), docs, *[gr.Dropdown() for _ in range(3)], files
        if not paths:
            results.append(_describe_error("no file", "choose one or more PDF files first"))
        upload_root = demo.GRADIO_CACHE
        for path in paths:
            # Gradio's own upload cache path; the user's name is kept for display only.
            name = safe_name(getattr(path, "name", path))
            try:
                # Only what this app's upload route stored: a path from an API call is never opened.
                data = read_upload(path, uploaded=demo.upload_file_set, upload_root=upload_root,
                                   max_bytes=max_bytes)
            except UploadRefused as exc:
                if isinstance(exc, UploadTooLarge):  # a real upload, of no use: it goes
                    remove_upload(path, upload_root=upload_root)
                results.append(_describe_error(name, str(exc)))
                continue
            except OSError as exc:
                logger.warning("reading an upload failed: %s", exc.strerror)
                results.append(_describe_error(name, "the upload could not be read: upload it again"))
                continue
            keep = False
            try:
                doc = dp.ingest(data, password=password or None, name=name,
                                owner=principal.user if principal is not None else None)
                if len(doc.pages) > max_pages:
                    results.append(_describe_error(
                        name, f"the document has {len(doc.pages)} pages, over the limit of {max_pages}: "
                        "split it or ask the administrator to raise --max-pages"))
                    continue
            except (PasswordRequiredError, WrongPasswordError) as exc:
                keep = True
                pending.append(path)
                results.append(_describe_error(
                    name, f"{exc} - here: type the password in the Password field and click Ingest again"))
                continue
            except DocpipeError as exc:
                access.record(request, matter, "upload", outcome=type(exc).__name__)
                results.append(_describe_error(name, str(exc)))
                continue
            except Exception:  # noqa: BLE001 - one bad file must not cost the others their result
                logger.exception("ingesting %s failed", name)
                results.append(_describe_error(name, "unexpected error while reading this file (see the server log)"))
                continue
            finally:
                # The bytes are in docpipe's store (by content hash) or refused for good: Gradio's copy of
                # the contract must not linger in its cache.
                if not keep:
                    remove_upload(path, upload_root=upload_root)
            if principal is not None:
                access.added(principal, matter, doc, name)  # type: ignore[arg-type]  # checked above
            else:
                docs.pop(doc.id, None)
                docs[doc.id] = doc
                while len(docs) > MAX_SESSION_DOCS:
                    docs.pop(next(iter(docs)))
            access.record(request, matter, "upload", doc.id)
            last = doc.id
            results.append(_describe_doc(doc))
        choices = access.documents(principal, matter) if principal is not None else _choices(docs)
        value = last or (choices[-1][1] if choices else None)
        return ("".join(results), docs, *_pickers(choices, value), pending or None)

    def on_load(request: GradioRequest):
        # With API keys: the user's matters, the first one chosen, its documents in the pickers.
        if not access.keyed:
            return gr.Dropdown(visible=False), *[gr.Dropdown() for _ in range(3)]
        try:
            principal = access.principal(request)
        except DocpipeError:
            return gr.Dropdown(choices=[], value=None, visible=True), *_pickers([], None)
        assert principal is not None
        matters = access.matter_choices(principal)
        value = matters[0] if matters else None
        return gr.Dropdown(choices=matters, value=value, visible=True), *_pickers(
            access.documents(principal, value), None)

    def on_matter(matter: str | None, docs: dict[str, Document] | None, request: GradioRequest):
        try:
            principal = access.principal(request)
        except DocpipeError:
            return _pickers([], None)
        choices = access.documents(principal, matter) if principal is not None else _choices(dict(docs or {}))
        return _pickers(choices, None)

    def _doc(docs: dict[str, Document] | None, doc_id: str | None, matter: str | None, request: Any) -> Document:
        principal = access.principal(request)
        if principal is not None:
            return access.open(principal, matter, doc_id)
        if not docs:
            raise DocpipeError("no document yet: upload a PDF in the Upload tab first")
        if not doc_id or doc_id not in docs:
            raise DocpipeError("choose a document from the list first")
        return docs[doc_id]

    def _check_question(question: str) -> str:
        question = (question or "").strip()
        if not question:
            raise DocpipeError("the question is empty: ask something about the document")
        if len(question) > MAX_QUESTION_CHARS:
            raise DocpipeError(f"the question is {len(question)} characters long; keep it under {MAX_QUESTION_CHARS}")
        return question

    def ask(docs: dict[str, Document] | None, doc_id: str | None, question: str, mode: str, matter: str | None,
            request: GradioRequest):
        # A generator: the answer box fills as the engine streams (thinking into the Thinking accordion),
        # then the citations and the source panel arrive with the finished answer.
        answer: Answer | None = None
        thinking = text = ""
        try:
            doc = _doc(docs, doc_id, matter, request)
            question = _check_question(question)
            access.record(request, matter, "ask", doc.id, [question])
            # Each question starts with the thinking collapsed; later updates leave it as the user set it.
            yield streaming_html(""), [], gr.Accordion(visible=False, open=False), "", ""
            last = time.monotonic()
            with contextlib.closing(dp.ask_stream(doc, question, mode=mode if mode in MODES else "auto")) as events:
                for event in events:
                    if event.kind == "done":
                        answer = event.answer
                        continue
                    if event.kind == "thinking":
                        thinking += event.text
                    else:
                        text += event.text
                    if time.monotonic() - last >= STREAM_INTERVAL_S:
                        last = time.monotonic()
                        yield (streaming_html(text, thinking=bool(thinking)), [],
                               gr.Accordion(visible=bool(thinking)), thinking, "")
            if answer is None:
                raise DocpipeError("the engine finished without an answer: ask again")
        except DocpipeError as exc:
            message = f"{BUSY} ({exc})" if isinstance(exc, ConnectionError) else str(exc)
            yield _error_html(message), [], gr.Accordion(visible=False), "", ""
            return
        except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
            logger.exception("answering failed")
            yield _error_html("unexpected error while answering (see the server log)"), [], \
                gr.Accordion(visible=False), "", ""
            return
        thinking = answer.thinking or ""
        yield (
            answer_html(answer),
            citation_rows(answer),
            gr.Accordion(visible=bool(thinking)),
            thinking,
            source_html(doc, answer),
        )

    def ask_batch(docs: dict[str, Document] | None, doc_id: str | None, text: str, mode: str, matter: str | None,
                  request: GradioRequest):
        try:
            doc = _doc(docs, doc_id, matter, request)
            questions = [line.strip() for line in (text or "").splitlines() if line.strip()]
            if not questions:
                raise DocpipeError("no questions: paste one question per line")
            if len(questions) > MAX_BATCH_QUESTIONS:
                raise DocpipeError(f"{len(questions)} questions; at most {MAX_BATCH_QUESTIONS} per batch")
            for question in questions:
                _check_question(question)
            access.record(request, matter, "ask", doc.id, questions)
            answers = dp.ask_many(doc, questions, mode=mode if mode in MODES else "auto")
        except DocpipeError as exc:
            return (f"{BUSY} ({exc})" if isinstance(exc, ConnectionError) else str(exc)), []
        except Exception:  # noqa: BLE001
            logger.exception("batch answering failed")
            return "unexpected error while answering (see the server log)", []
        rows = [
            [a.question, a.text, ", ".join(dict.fromkeys(c.pages for c in a.citations if c.page_start)) or "-"]
            for a in answers
        ]
        return f"{len(rows)} answers.", rows

    def analyze(docs: dict[str, Document] | None, doc_id: str | None, categories: list[str] | None, mode: str,
                folder: str | None, matter: str | None, request: GradioRequest):
        hidden = [gr.DownloadButton(visible=False) for _ in REPORT_FORMATS]
        try:
            doc = _doc(docs, doc_id, matter, request)
            access.record(request, matter, "analyze", doc.id, list(categories or []))
            known = {c.name for c in CHECKLIST}
            chosen = [name for name in categories or [] if name in known] or None
            report = dp.analyze(doc, chosen, mode=mode if mode in MODES else "think")
            # The session's own folder (never a path from the request); Gradio serves copies from its cache.
            if not folder or not os.path.isdir(folder):
                folder = tempfile.mkdtemp(prefix="docpipe-ui-")
            paths = write_report_files(report, Path(folder))
        except DocpipeError as exc:
            message = f"{BUSY} ({exc})" if isinstance(exc, ConnectionError) else str(exc)
            return f"**Error:** {html.escape(message)}", [], folder, *hidden
        except Exception:  # noqa: BLE001
            logger.exception("contract analysis failed")
            return "**Error:** unexpected error during the analysis (see the server log)", [], folder, *hidden
        buttons = [
            gr.DownloadButton(f"Download {label}", value=str(path), visible=True)
            for (_suffix, label), path in zip(REPORT_FORMATS, paths)
        ]
        return report_summary(report), report_rows(report), folder, *buttons

    with gr.Blocks(title="docpipe contract workbench", analytics_enabled=False, delete_cache=delete_cache) as demo:
        docs_state = gr.State({})
        report_folder = gr.State(None, delete_callback=_remove_folder)
        gr.Markdown(
            "## docpipe contract workbench\nUpload contracts, ask questions, get answers with checked page citations."
        )
        # Shown when the server has API keys: the user's matters; documents are listed per matter.
        matter_pick = gr.Dropdown(label="Matter", choices=[], visible=False, elem_id="matter")
        with gr.Tab("Upload", id="upload"):
            files = gr.File(
                label=f"PDF files (up to {max_upload_mb:g} MB and {max_pages} pages each)",
                file_count="multiple", file_types=[".pdf"], type="filepath", elem_id="upload-files",
            )
            password = gr.Textbox(label="Password (encrypted PDFs only)", type="password", elem_id="upload-password")
            ingest_btn = gr.Button("Ingest", variant="primary", elem_id="ingest-btn")
            upload_result = gr.HTML(elem_id="upload-result")
        with gr.Tab("Ask", id="ask"):
            ask_doc = gr.Dropdown(label="Document", choices=[], elem_id="ask-doc")
            question = gr.Textbox(label="Question", lines=2, elem_id="question",
                                  placeholder="What is the notice period for termination for convenience?")
            mode = gr.Radio(MODES, value="auto", label="Thinking mode", elem_id="mode")
            ask_btn = gr.Button("Ask", variant="primary", elem_id="ask-btn")
            answer_out = gr.HTML(elem_id="answer-text")
            with gr.Accordion("Thinking", open=False, visible=False, elem_id="thinking") as thinking_box:
                thinking_out = gr.Textbox(show_label=False, lines=8, interactive=False, elem_id="thinking-text")
            citations_out = gr.Dataframe(
                headers=["heading", "pages", "quote", "verified"], datatype="str", interactive=False,
                wrap=True, label="Citations", elem_id="citations", column_widths=["22%", "9%", "60%", "9%"],
            )
            source_out = gr.HTML(label="Source", elem_id="source-panel")
        with gr.Tab("Batch", id="batch"):
            batch_doc = gr.Dropdown(label="Document", choices=[], elem_id="batch-doc")
            batch_questions = gr.Textbox(label="Questions, one per line", lines=8, elem_id="batch-questions")
            batch_mode = gr.Radio(MODES, value="auto", label="Thinking mode")
            batch_btn = gr.Button("Ask all", variant="primary", elem_id="batch-btn")
            batch_status = gr.Markdown(elem_id="batch-status")
            batch_out = gr.Dataframe(
                headers=["question", "answer", "pages"], datatype="str", interactive=False, wrap=True,
                label="Answers", elem_id="batch-answers", column_widths=["30%", "60%", "10%"],
            )
        with gr.Tab("Contract analysis", id="analysis"):
            analysis_doc = gr.Dropdown(label="Document", choices=[], elem_id="analysis-doc")
            analysis_categories = gr.Dropdown(
                [c.name for c in CHECKLIST], value=[], multiselect=True, elem_id="analysis-categories",
                label=f"Categories (none chosen: all {len(CHECKLIST)} of the checklist)",
            )
            analysis_mode = gr.Radio(MODES, value="think", label="Thinking mode", elem_id="analysis-mode")
            analysis_btn = gr.Button("Run checklist", variant="primary", elem_id="analysis-btn")
            analysis_status = gr.Markdown(elem_id="analysis-status")
            analysis_out = gr.Dataframe(
                headers=["category", "found", "clause", "pages", "note"], datatype="str", interactive=False,
                wrap=True, label="Checklist", elem_id="analysis-table",
                column_widths=["16%", "10%", "44%", "8%", "22%"],
            )
            with gr.Row():
                downloads = [
                    gr.DownloadButton(f"Download {label}", visible=False, elem_id=f"analysis-{suffix}")
                    for suffix, label in REPORT_FORMATS
                ]

        # Extraction runs a worker process per document: fewer at once than questions.
        pickers = [ask_doc, batch_doc, analysis_doc]
        demo.load(on_load, None, [matter_pick, *pickers], api_name=False)
        matter_pick.change(on_matter, [matter_pick, docs_state], pickers, api_name=False)
        ingest_btn.click(
            ingest, [files, password, docs_state, matter_pick],
            [upload_result, docs_state, ask_doc, batch_doc, analysis_doc, files],
            concurrency_limit=max(1, min(4, concurrency)), concurrency_id="ingest", api_name="ingest",
        )
        ask_event = dict(
            fn=ask, inputs=[docs_state, ask_doc, question, mode, matter_pick],
            outputs=[answer_out, citations_out, thinking_box, thinking_out, source_out],
        )
        ask_btn.click(**ask_event, api_name="ask")
        question.submit(**ask_event, api_name=False)
        batch_btn.click(
            ask_batch, [docs_state, batch_doc, batch_questions, batch_mode, matter_pick], [batch_status, batch_out],
            api_name="batch",
        )
        # A checklist is one engine batch of dozens of requests: a few at once leave room for questions.
        analysis_btn.click(
            analyze, [docs_state, analysis_doc, analysis_categories, analysis_mode, report_folder, matter_pick],
            [analysis_status, analysis_out, report_folder, *downloads],
            concurrency_limit=max(1, min(4, concurrency)), concurrency_id="analysis", api_name="analyze",
        )

    # Concurrent users reach the engine together (docpipe batches them); the queue behind them is bounded.
    demo.queue(default_concurrency_limit=concurrency, max_size=max_queue)
    return demo


def launch_kwargs(*, max_upload_mb: float = 50, store_root: str | Path | None = None) -> dict[str, Any]:
    """Returns the `launch` (and `gr.mount_gradio_app`) arguments the workbench wants besides host, port and
    auth; `store_root` (the docpipe store) joins the blocked paths."""
    blocked = [*BLOCKED_PATHS, *([os.path.realpath(store_root)] if store_root is not None else [])]
    return {
        "max_file_size": int(max_upload_mb * 1024 * 1024),  # bytes: Gradio's "Nmb" strings take integers only
        "blocked_paths": blocked,
        "show_error": False,  # messages from our handlers are shown; tracebacks stay in the server log
        "ssr_mode": False,
        # Gradio's run history keeps inputs and outputs (contract text) in the browser and can upload them
        # to a Hugging Face bucket: not for confidential contracts.
        "run_history": False,
        "footer_links": ["api", "settings"],
        "css": CSS,
    }


def _parse_auth(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise SystemExit("--auth / DOCPIPE_UI_AUTH must look like user:password")
    return user, password


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    """Returns the exit code after serving the workbench until interrupted."""
    parser = argparse.ArgumentParser(prog="docpipe ui", description="The docpipe contract workbench (Gradio).")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=None, help="port (default: Gradio's 7860 or the next free one)")
    parser.add_argument("--auth", default=None, help="user:password for basic login (or env DOCPIPE_UI_AUTH)")
    parser.add_argument("--preset", default=None, help="settings preset: default, cpu-demo, fast, test")
    parser.add_argument("--max-upload-mb", type=float, default=50, help="largest upload, in MB (default 50)")
    parser.add_argument("--max-pages", type=int, default=2000, help="most pages per document (default 2000)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests handled at once (default 16)")
    parser.add_argument("--max-queue", type=int, default=64, help="requests waiting at most (default 64)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    auth = _parse_auth(args.auth or os.environ.get("DOCPIPE_UI_AUTH"))
    if not _is_loopback(args.host) and auth is None:
        logger.warning("serving on %s without --auth: anyone who can reach this address can upload and ask",
                       args.host)
    try:
        dp = default_docpipe(args.preset, max_pages=args.max_pages)
    except DocpipeError as exc:
        print(f"docpipe ui: {exc}", file=sys.stderr)
        return 1
    access = WorkbenchAccess(dp, auth)
    demo = build_app(
        dp, max_upload_mb=args.max_upload_mb, max_pages=args.max_pages,
        concurrency=args.concurrency, max_queue=args.max_queue, access=access,
    )
    demo.launch(
        server_name=args.host, server_port=args.port, auth=access.auth(),
        max_threads=max(40, args.concurrency + 8),
        **launch_kwargs(max_upload_mb=args.max_upload_mb, store_root=dp.store.root),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
