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

Modules: `app` (the layout and how it launches), `handlers` (the event handlers), `choices` (the limits and the
picker values the tabs share), `render` (results as escaped HTML and table rows), `uploads` (reading only what
Gradio's upload route stored), `access` (who sees what), `tabs` (the Upload, Ask, Batch and Contract analysis tabs),
`review_tab` (the Data room tab; `review_layout` its components, `review_marks` the reviewer's marks on its cells),
`terms_view` (its Key terms view), `playbook_view` (its Playbook view; `playbook_render` its table and verdicts),
`dataroom` (what the views share) and `review_render` (their tables and cells), `pageview` (a page rendered with a
quote marked, in a bounded child process), `progress` (an upload's progress bar: each file's ingestion stage).

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

from docpipe import ConfigError, DocPipe, DocpipeError, Settings
from docpipe.access.login import UI_AUTH_ENV, is_loopback, parse_login
from docpipe.ui.access import WorkbenchAccess
from docpipe.ui.render import CSS
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
    reviewed as a grid, or read as a key-terms table, in the Data room tab.

    Launch it with `launch_kwargs` (`main` does): its ``max_file_size`` makes Gradio refuse big uploads
    before they are stored; the handler checks the size as well. `concurrency` events run at
    once, so concurrent questions reach the engine together and docpipe batches them; at most `max_queue`
    more wait, beyond that users get Gradio's "busy, please try again". `delete_cache` is Gradio's sweep of
    its cache, (every, older than) in seconds. `access` decides who may see what (launch with its
    ``auth()``): with API keys, each user works in their matters; without, each session sees its own uploads.
    """
    import gradio as gr

    from docpipe.ui.handlers import Workbench
    from docpipe.ui.review_tab import ReviewTab
    from docpipe.ui.tabs import AnalysisTab, AskTab, BatchTab, Session, UploadTab

    dp = dp if dp is not None else default_docpipe(max_pages=max_pages)
    access = access if access is not None else WorkbenchAccess(dp)
    wb = Workbench(dp, access, max_bytes=int(max_upload_mb * 1024 * 1024), max_pages=max_pages)

    with gr.Blocks(title="docpipe contract workbench", analytics_enabled=False, delete_cache=delete_cache) as demo:
        wb.demo = demo
        docs = gr.State({})
        # Without API keys: the browser session's own space for its collections, removed when it ends.
        space = gr.State(None, delete_callback=wb.forget_space)
        report_folder = gr.State(None, delete_callback=remove_folder)
        gr.Markdown(
            "## docpipe contract workbench\nUpload contracts, ask questions, get answers with checked page citations."
        )
        # Shown when the server has API keys: the user's matters; documents are listed per matter.
        matter = gr.Dropdown(label="Matter", choices=[], visible=False, elem_id="matter")
        session = Session(docs=docs, space=space, report_folder=report_folder, matter=matter)
        upload = UploadTab.build(max_upload_mb=max_upload_mb, max_pages=max_pages)
        ask = AskTab.build()
        batch = BatchTab.build()
        analysis = AnalysisTab.build()
        pickers = [ask.doc, batch.doc, analysis.doc]
        ReviewTab(wb).build(
            docs_state=session.docs,
            matter_pick=session.matter,
            space=session.space,
            pickers=pickers,
            concurrency=concurrency,
        )

        demo.load(wb.on_load, None, [session.matter, *pickers, session.space], api_name=False)
        session.matter.change(wb.on_matter, [session.matter, session.docs, session.space], pickers, api_name=False)
        upload.wire(wb, session, pickers, concurrency=concurrency)
        ask.wire(wb, session, password=upload.password)
        batch.wire(wb, session)
        analysis.wire(wb, session, concurrency=concurrency)

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
    # quiet: Gradio's own lines include a hint to set share=True, a public tunnel no contract should go through;
    # the workbench says where it runs itself.
    demo.launch(
        server_name=host,
        server_port=port,
        auth=access.auth(),
        max_threads=max(40, concurrency + 8),
        quiet=True,
        prevent_thread_lock=True,
        **launch_kwargs(max_upload_mb=max_upload_mb, store_root=dp.store.root),
    )
    where = "this machine only" if is_loopback(host) else f"every address {host} reaches"
    print(f"docpipe workbench: {demo.local_url} (bound to {where}; Ctrl+C stops it)", flush=True)
    demo.block_thread()


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
