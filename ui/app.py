"""The Gradio contract workbench: upload PDFs, ask questions with checked page citations (streamed where the
engine streams) and see a cited page with its quote marked, batch questions, run the clause checklist and
download its report, and review a data room: a grid of documents x questions over a collection.

Uses docpipe's public API (the names in ``docpipe.__all__``), plus the upload-name rule and the document
summary it shares with the REST API (`docpipe.names`, `docpipe.summary`) and the login parsing it shares with
``docpipe serve`` (`docpipe.access.login`). The repository keeps this folder at the top level as ``ui/``; it
installs as the package ``docpipe.ui``. Run it with ``python -m docpipe.ui.app``
(``--help`` for options) or build it in Python::

    from docpipe import DocPipe, Settings
    from docpipe.ui.app import build_app, launch_kwargs

    dp = DocPipe(Settings.preset("cpu-demo"))
    demo = build_app(dp)
    demo.launch(server_name="127.0.0.1", **launch_kwargs(max_upload_mb=50, store_root=dp.store.root))

Mounted in a FastAPI app instead (as ``docpipe serve`` does), pass the same arguments to
``gr.mount_gradio_app`` and then set ``demo.has_launched = True``: Gradio (6.31) checks that a file named by
an API call was uploaded only for an app marked launched, and mounting never marks it.

Modules: `app` (the layout and how it launches), `handlers` (the event handlers), `render` (results as escaped
HTML and table rows), `uploads` (reading only what Gradio's upload route stored), `access` (who sees what),
`review_tab` (the Data room tab), `pageview` (a page rendered with a quote marked, in a bounded child process),
`progress` (an upload's progress bar: each file's ingestion stage).

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
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe import CHECKLIST, ConfigError, DocPipe, DocpipeError, Settings
from docpipe.access.login import UI_AUTH_ENV, is_loopback, parse_login
from docpipe.ui.access import WorkbenchAccess
from docpipe.ui.render import CSS, REPORT_FORMATS
from docpipe.ui.uploads import UploadRefused, UploadTooLarge, read_upload, remove_folder, remove_upload

if TYPE_CHECKING:
    import gradio as gr

__all__ = [
    "DELETE_CACHE",
    "UploadRefused",
    "UploadTooLarge",
    "build_app",
    "default_docpipe",
    "launch_kwargs",
    "main",
    "read_upload",
    "remove_upload",
]

logger = logging.getLogger(__name__)

# Gradio's cache sweep, (every, older than) in seconds: uploads that were never ingested and Gradio's copies of
# report downloads are contract text at rest; they go after an hour, and all of them when the server stops.
DELETE_CACHE = (3600, 3600)
# Never served, nor copied into Gradio's cache, whatever a handler or an API call names (plus the store).
BLOCKED_PATHS = ("/dev", "/proc", "/sys", "/etc")


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
    """Returns the workbench as a queued `gr.Blocks` (Upload, Ask, Batch, Contract analysis, Data room tabs);
    launch it yourself. Files uploaded into a named collection are asked across from the Ask and Batch tabs and
    reviewed as a grid in the Data room tab.

    Launch it with `launch_kwargs` (`main` does): its ``max_file_size`` makes Gradio refuse big uploads
    before they are stored; the handler checks the size as well. `concurrency` events run at
    once, so concurrent questions reach the engine together and docpipe batches them; at most `max_queue`
    more wait, beyond that users get Gradio's "busy, please try again". `delete_cache` is Gradio's sweep of
    its cache, (every, older than) in seconds. `access` decides who may see what (launch with its
    ``auth()``): with API keys, each user works in their matters; without, each session sees its own uploads.
    """
    import gradio as gr

    from docpipe.ui.handlers import MODES, Workbench
    from docpipe.ui.review_tab import ReviewTab

    dp = dp if dp is not None else default_docpipe(max_pages=max_pages)
    access = access if access is not None else WorkbenchAccess(dp)
    wb = Workbench(dp, access, max_bytes=int(max_upload_mb * 1024 * 1024), max_pages=max_pages)

    with gr.Blocks(title="docpipe contract workbench", analytics_enabled=False, delete_cache=delete_cache) as demo:
        wb.demo = demo
        docs_state = gr.State({})
        # Without API keys: the browser session's own space for its collections, removed when it ends.
        space = gr.State(None, delete_callback=wb.forget_space)
        report_folder = gr.State(None, delete_callback=remove_folder)
        gr.Markdown(
            "## docpipe contract workbench\nUpload contracts, ask questions, get answers with checked page citations."
        )
        # Shown when the server has API keys: the user's matters; documents are listed per matter.
        matter_pick = gr.Dropdown(label="Matter", choices=[], visible=False, elem_id="matter")
        with gr.Tab("Upload", id="upload"):
            files = gr.File(
                label=f"PDF or Word (.docx) files (up to {max_upload_mb:g} MB and {max_pages} pages each)",
                file_count="multiple",
                file_types=[".pdf", ".docx"],
                type="filepath",
                elem_id="upload-files",
            )
            password = gr.Textbox(label="Password (encrypted PDFs only)", type="password", elem_id="upload-password")
            ingest_btn = gr.Button("Ingest", variant="primary", elem_id="ingest-btn")
            with gr.Row():
                collection = gr.Textbox(
                    label="Collection: add the files to it (created if new) to ask across them",
                    placeholder="e.g. deal-x",
                    max_length=63,
                    elem_id="upload-collection",
                    scale=3,
                )
                collection_btn = gr.Button("Add to collection", elem_id="collection-btn", scale=1)
            upload_result = gr.HTML(elem_id="upload-result")
        with gr.Tab("Ask", id="ask"):
            ask_doc = gr.Dropdown(label="Document", choices=[], elem_id="ask-doc")
            question = gr.Textbox(
                label="Question",
                lines=2,
                elem_id="question",
                placeholder="What is the notice period for termination for convenience?",
            )
            mode = gr.Radio(MODES, value="auto", label="Thinking mode", elem_id="mode")
            ask_btn = gr.Button("Ask", variant="primary", elem_id="ask-btn")
            answer_out = gr.HTML(elem_id="answer-text")
            with gr.Accordion("Thinking", open=False, visible=False, elem_id="thinking") as thinking_box:
                thinking_out = gr.Textbox(show_label=False, lines=8, interactive=False, elem_id="thinking-text")
            citations_out = gr.Dataframe(
                headers=["document", "heading", "pages", "quote", "verified"],
                datatype="str",
                interactive=False,
                wrap=True,
                label="Citations",
                elem_id="citations",
                column_widths=["16%", "18%", "8%", "50%", "8%"],
            )
            source_out = gr.HTML(label="Source", elem_id="source-panel")
            # The last answer's citations, with their documents' ids: kept on the server, never sent to the page.
            ask_cites = gr.State([])
            with gr.Accordion("Cited page", open=True, elem_id="ask-page-box"):
                cite_pick = gr.Dropdown(
                    label="Show a citation on its page (or click a row of Citations)", choices=[], elem_id="ask-cite"
                )
                ask_page = gr.Image(show_label=False, type="pil", format="png", interactive=False, elem_id="ask-page")
                ask_page_caption = gr.Markdown(elem_id="ask-page-caption")
        with gr.Tab("Batch", id="batch"):
            batch_doc = gr.Dropdown(label="Document", choices=[], elem_id="batch-doc")
            batch_questions = gr.Textbox(label="Questions, one per line", lines=8, elem_id="batch-questions")
            batch_mode = gr.Radio(MODES, value="auto", label="Thinking mode")
            batch_btn = gr.Button("Ask all", variant="primary", elem_id="batch-btn")
            batch_status = gr.Markdown(elem_id="batch-status")
            batch_out = gr.Dataframe(
                headers=["question", "answer", "pages"],
                datatype="str",
                interactive=False,
                wrap=True,
                label="Answers",
                elem_id="batch-answers",
                column_widths=["30%", "60%", "10%"],
            )
        with gr.Tab("Contract analysis", id="analysis"):
            analysis_doc = gr.Dropdown(label="Document", choices=[], elem_id="analysis-doc")
            analysis_categories = gr.Dropdown(
                [c.name for c in CHECKLIST],
                value=[],
                multiselect=True,
                elem_id="analysis-categories",
                label=f"Categories (none chosen: all {len(CHECKLIST)} of the checklist)",
            )
            analysis_mode = gr.Radio(MODES, value="think", label="Thinking mode", elem_id="analysis-mode")
            analysis_btn = gr.Button("Run checklist", variant="primary", elem_id="analysis-btn")
            analysis_status = gr.Markdown(elem_id="analysis-status")
            analysis_out = gr.Dataframe(
                headers=["category", "found", "clause", "pages", "note"],
                datatype="str",
                interactive=False,
                wrap=True,
                label="Checklist",
                elem_id="analysis-table",
                column_widths=["16%", "10%", "44%", "8%", "22%"],
            )
            with gr.Row():
                downloads = [
                    gr.DownloadButton(f"Download {label}", visible=False, elem_id=f"analysis-{suffix}")
                    for suffix, label in REPORT_FORMATS
                ]
        ReviewTab(wb).build(
            docs_state=docs_state,
            matter_pick=matter_pick,
            space=space,
            pickers=[ask_doc, batch_doc, analysis_doc],
            concurrency=concurrency,
        )

        # Extraction runs a worker process per document: fewer at once than questions.
        pickers = [ask_doc, batch_doc, analysis_doc]
        demo.load(wb.on_load, None, [matter_pick, *pickers, space], api_name=False)
        matter_pick.change(wb.on_matter, [matter_pick, docs_state, space], pickers, api_name=False)
        ingest_btn.click(
            wb.ingest,
            [files, password, docs_state, matter_pick, space],
            [upload_result, docs_state, ask_doc, batch_doc, analysis_doc, files],
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="ingest",
            api_name="ingest",
            show_progress_on=upload_result,  # the file and its stage (docpipe.ui.progress), over the result
        )
        collection_btn.click(
            wb.ingest_collection,
            [files, password, docs_state, matter_pick, collection, space],
            [upload_result, docs_state, ask_doc, batch_doc, analysis_doc, files],
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="ingest",
            api_name="ingest_collection",
            show_progress_on=upload_result,  # the file and its stage (docpipe.ui.progress), over the result
        )
        ask_event = dict(
            fn=wb.ask,
            inputs=[docs_state, ask_doc, question, mode, matter_pick, space],
            outputs=[answer_out, citations_out, thinking_box, thinking_out, source_out, ask_cites, cite_pick],
        )
        ask_btn.click(**ask_event, api_name="ask")
        question.submit(**ask_event, api_name=False)
        # The page view: the password is the Upload tab's (an encrypted PDF's pages need it).
        cite_pick.input(
            wb.ask_page,
            [docs_state, ask_doc, ask_cites, cite_pick, password, matter_pick, space],
            [ask_page, ask_page_caption],
            api_name=False,
        )
        citations_out.select(
            wb.ask_page_select,
            [docs_state, ask_doc, ask_cites, password, matter_pick, space],
            [cite_pick, ask_page, ask_page_caption],
            api_name=False,
        )
        batch_btn.click(
            wb.ask_batch,
            [docs_state, batch_doc, batch_questions, batch_mode, matter_pick, space],
            [batch_status, batch_out],
            api_name="batch",
        )
        # A checklist is one engine batch of dozens of requests: a few at once leave room for questions.
        analysis_btn.click(
            wb.analyze,
            [docs_state, analysis_doc, analysis_categories, analysis_mode, report_folder, matter_pick],
            [analysis_status, analysis_out, report_folder, *downloads],
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="analysis",
            api_name="analyze",
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


def serve_workbench(
    dp: DocPipe,
    auth: tuple[str, str] | None,
    *,
    host: str,
    port: int | None,
    max_upload_mb: float,
    max_pages: int,
    concurrency: int,
    max_queue: int,
) -> None:
    """Serves the workbench over `dp` with Gradio on `host`/`port` until interrupted, behind the login `auth`
    (None: none, with a warning when the address is reachable from other machines). `docpipe ui` and
    ``python -m docpipe.ui.app`` both come here."""
    if not is_loopback(host) and auth is None:
        logger.warning("serving on %s without --auth: anyone who can reach this address can upload and ask", host)
    access = WorkbenchAccess(dp, auth)
    demo = build_app(
        dp,
        max_upload_mb=max_upload_mb,
        max_pages=max_pages,
        concurrency=concurrency,
        max_queue=max_queue,
        access=access,
    )
    demo.launch(
        server_name=host,
        server_port=port,
        auth=access.auth(),
        max_threads=max(40, concurrency + 8),
        **launch_kwargs(max_upload_mb=max_upload_mb, store_root=dp.store.root),
    )


def main(argv: list[str] | None = None) -> int:
    """Serves the workbench (``docpipe ui``) until interrupted; returns the exit code."""
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

    try:
        auth = parse_login(args.auth or os.environ.get(UI_AUTH_ENV), option="--auth")
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    try:
        dp = default_docpipe(args.preset, max_pages=args.max_pages)
    except DocpipeError as exc:
        print(f"docpipe ui: {exc}", file=sys.stderr)
        return 1
    serve_workbench(
        dp,
        auth,
        host=args.host,
        port=args.port,
        max_upload_mb=args.max_upload_mb,
        max_pages=args.max_pages,
        concurrency=args.concurrency,
        max_queue=args.max_queue,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
