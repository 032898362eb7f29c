"""The Data room tab's "Playbook" view: a playbook (a TOML file of the firm's positions, `docpipe.playbook`)
held against a collection (`DocPipe.check`), shown as a table of contracts x rules coloured by verdict, worst
contracts first.

Upload the playbook: it is read (at most `MAX_PLAYBOOK_BYTES`, only a file this app's upload route stored) and
checked at once; the page shows its rules, or the refusal (the `ConfigError`'s message: the file, line and rule,
and the fix), and a refused playbook never runs. Choose the collection (the tab's picker) and Run the playbook:
its review grid fills in as it runs, as the grid's does ("n / total cells done"); Stop, or leaving the page,
cancels it between engine batches, the cells done staying in the cell cache. The finished table has one row per
contract, worst first (`PlaybookReport.order`), one column per rule (its title and severity), each cell the
verdict as a symbol and a word on its colour (`docpipe.ui.playbook_render`), its reason on hover. A click on a
cell shows the verdict (reason, value, the rule's fallback, its quotes) and the first verified quote's page with
the quote marked; the quote picker shows the others. The summary line counts the verdicts; the report downloads
as XLSX, CSV, Markdown and JSON, written (0600) to the session's own temporary folder.

The grid's rules apply: a collection the user may read now (their matter's, or the store's own), within
`MAX_GRID_CELLS`; the run is in the access log; a cell opens only for a collection the user may still read, a
report run in the matter chosen now, and a document that is in the collection.
"""

from __future__ import annotations

import functools
import html
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
from gradio import Request as GradioRequest

from docpipe import ConfigError, DocpipeError
from docpipe.names import clean_upload_name
from docpipe.playbook import Playbook, PlaybookReport, parse_playbook
from docpipe.playbook.run import playbook_columns
from docpipe.playbook.schema import MAX_PLAYBOOK_BYTES
from docpipe.storage.store import atomic_write
from docpipe.ui.choices import BUSY, MODES, choice_index, offer_thinking, open_quote
from docpipe.ui.dataroom import MAX_GRID_CELLS, DataRoom, streamed_review
from docpipe.ui.playbook_render import legend_html, playbook_html, report_table, verdict_html
from docpipe.ui.review_render import progress_table
from docpipe.ui.uploads import UploadRefused, UploadTooLarge, read_upload, remove_upload

if TYPE_CHECKING:
    from docpipe import Collection

__all__ = ["PLAYBOOK_EXPORTS", "STREAM_INTERVAL_S", "PlaybookView"]

logger = logging.getLogger(__name__)

PLAYBOOK_EXPORTS = (("xlsx", "XLSX"), ("csv", "CSV"), ("md", "Markdown"), ("json", "JSON"))
STREAM_INTERVAL_S = 0.5  # the table is redrawn at most this often while it runs


@dataclass
class _Parts:
    """The view's components, as `PlaybookView.layout` made them."""

    book: Any  # the uploaded playbook (`Playbook`), or the message that refused it; on the server
    report_state: Any
    folder: Any
    opened: Any
    file: Any
    book_out: Any
    mode: Any
    run_btn: Any
    stop_btn: Any
    status: Any
    table: Any
    downloads: list[Any]
    cell_out: Any
    cell_quote: Any
    page_img: Any
    page_caption: Any


class PlaybookView:
    """The Playbook view's handlers, over the Data room's checks (`DataRoom`: its collections, access rules and
    page view). `layout` adds the components inside the view's `gr.Tab`; `wire` connects them."""

    def __init__(self, room: DataRoom) -> None:
        self.room = room
        self.wb = room.wb
        self.dp = room.dp
        self.access = room.access

    # -- layout ----------------------------------------------------------------------------------------------
    @staticmethod
    def layout() -> _Parts:
        """Lays the view out: its components, in page order."""
        from docpipe.ui.uploads import remove_folder

        book = gr.State(None)
        report_state = gr.State(None)
        folder = gr.State(None, delete_callback=remove_folder)
        opened = gr.State(None)  # the open verdict (table row, rule), kept on the server
        file = gr.File(
            label=f"Playbook (.toml, at most {MAX_PLAYBOOK_BYTES // 1024} KB; the schema is in docs/playbook.md)",
            file_count="single",
            file_types=[".toml"],
            type="filepath",
            elem_id="pb-file",
        )
        book_out = gr.HTML(elem_id="pb-playbook")
        # Shown once the page knows a language model answers (`offer_thinking`): offline it changes nothing.
        mode = gr.Radio(MODES, value="think", label="Thinking mode", visible=False, elem_id="pb-mode")
        with gr.Row():
            run_btn = gr.Button("Run playbook", variant="primary", elem_id="pb-run", scale=3)
            stop_btn = gr.Button("Stop", variant="stop", elem_id="pb-stop", scale=1)
        status = gr.Markdown(elem_id="pb-status")
        gr.HTML(legend_html(), elem_id="pb-legend")
        table = gr.Dataframe(
            headers=["Contract"],
            datatype="html",  # escaped by `docpipe.ui.playbook_render`: a verdict's symbol, word and reason
            interactive=False,
            wrap=True,
            label="Verdicts: contracts x rules, worst contracts first (while it runs: the cells the rules read)",
            elem_id="pb-table",
        )
        with gr.Row():
            downloads = [
                gr.DownloadButton(f"Download {label}", visible=False, elem_id=f"pb-{suffix}")
                for suffix, label in PLAYBOOK_EXPORTS
            ]
        cell_out = gr.HTML(elem_id="pb-cell")
        cell_quote = gr.Dropdown(label="Quote", choices=[], elem_id="pb-cell-quote")
        page_img = gr.Image(
            label="Page", type="pil", format="png", interactive=False, elem_id="pb-page", buttons=["fullscreen"]
        )
        page_caption = gr.Markdown(elem_id="pb-page-caption")
        return _Parts(
            book=book,
            report_state=report_state,
            folder=folder,
            opened=opened,
            file=file,
            book_out=book_out,
            mode=mode,
            run_btn=run_btn,
            stop_btn=stop_btn,
            status=status,
            table=table,
            downloads=downloads,
            cell_out=cell_out,
            cell_quote=cell_quote,
            page_img=page_img,
            page_caption=page_caption,
        )

    def wire(
        self, ui: _Parts, *, collection: Any, password: Any, matter_pick: Any, space: Any, concurrency: int
    ) -> None:
        """Connects the view's events; `collection` and `password` are the tab's, shared with the other views."""
        # The picker is emptied once the file is read (its copy is gone): the next upload replaces the playbook.
        ui.file.upload(self.load, [ui.file], [ui.book, ui.book_out, ui.file], api_name="playbook_load")
        offer_thinking(self.wb, ui.mode)
        cell_outputs = [ui.opened, ui.cell_out, ui.cell_quote, ui.page_img, ui.page_caption]
        run = ui.run_btn.click(
            self.run,
            [ui.book, collection, ui.mode, password, ui.folder, matter_pick, space],
            [ui.status, ui.table, ui.report_state, *cell_outputs, ui.folder, *ui.downloads],
            # The Data room's grids share one limit: each is many engine batches at bulk priority.
            concurrency_limit=max(1, min(2, concurrency)),
            concurrency_id="review",
            api_name="playbook_check",
        )
        ui.stop_btn.click(None, None, None, cancels=[run], api_name=False)
        ui.table.select(self.select_cell, [ui.report_state, password, matter_pick, space], cell_outputs, api_name=False)
        ui.cell_quote.input(
            self.show_quote,
            [ui.report_state, ui.opened, ui.cell_quote, password, matter_pick, space],
            [ui.page_img, ui.page_caption],
            api_name=False,
        )

    # -- the playbook ----------------------------------------------------------------------------------------
    def load(self, path: str | None) -> tuple[Any, str, Any]:
        """Reads and checks the uploaded playbook; returns it (or the message that refused it), what the page
        shows (its rules, or the refusal with its fix) and the emptied file picker. Gradio's copy of the file is
        deleted once read."""
        book, shown = self._read(path)
        return book, shown, gr.File(value=None)

    def _read(self, path: str | None) -> tuple[Any, str]:
        if not path:
            return None, ""
        name = clean_upload_name(getattr(path, "name", path))
        upload_root = self.wb.demo.GRADIO_CACHE
        try:
            data = read_upload(
                path, uploaded=self.wb.demo.upload_file_set, upload_root=upload_root, max_bytes=MAX_PLAYBOOK_BYTES
            )
        except UploadTooLarge:
            remove_upload(path, upload_root=upload_root)  # a real upload, of no use: it goes
            message = f"{name} is over {MAX_PLAYBOOK_BYTES // 1024} KB: a playbook states positions; split it"
            return message, _refused(message)
        except UploadRefused as exc:  # any other path may be anyone's file: never touched
            return str(exc), _refused(str(exc))
        except OSError as exc:
            logger.warning("reading an uploaded playbook failed: %s", exc.strerror)
            message = "the playbook could not be read: upload it again"
            return message, _refused(message)
        remove_upload(path, upload_root=upload_root)
        try:
            text = data.decode("utf-8")
            book = parse_playbook(text, source=name, default_name=Path(name).stem or "playbook")
        except UnicodeDecodeError:
            message = f"{name} is not UTF-8 text: save the playbook as UTF-8"
            return message, _refused(message)
        except ConfigError as exc:
            return str(exc), _refused(str(exc))
        return book, playbook_html(book)

    # -- running it ------------------------------------------------------------------------------------------
    def _checked(
        self, book: Any, name: str | None, matter: str | None, space: str | None, request: Any
    ) -> tuple[Playbook, Collection, list[Any], list[str]]:
        """Returns the playbook, the collection, its documents and its grid's column keys, once the run is
        allowed (a playbook that was accepted, a collection the user may read, not empty, within
        `MAX_GRID_CELLS`) and recorded."""
        if isinstance(book, str):
            raise DocpipeError(f"the playbook was refused, so nothing runs: {book}")
        if not isinstance(book, Playbook):
            raise DocpipeError("upload a playbook (.toml) first")
        coll = self.room.open_collection(name, matter, space, request)
        members = coll.documents
        if not members:
            raise DocpipeError(f"collection {coll.name} has no documents yet: add PDFs to it first")
        columns = playbook_columns(book, self.dp.settings).columns
        if len(members) * len(columns) > MAX_GRID_CELLS:
            raise DocpipeError(
                f"{len(members)} contracts x {len(columns)} cells per contract is {len(members) * len(columns)} "
                f"cells; this page runs at most {MAX_GRID_CELLS}: run `docpipe check` for bigger data rooms"
            )
        self.access.record(request, matter, "check", None, [rule.test for rule in book.rules])
        return book, coll, members, [c.key for c in columns]

    def run(
        self,
        book: Any,
        name: str | None,
        mode: str,
        password: str | None,
        folder: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Runs the playbook, yielding its grid as cells finish, then the verdicts with their downloads."""
        hidden = [gr.DownloadButton(visible=False) for _ in PLAYBOOK_EXPORTS]
        closed = [None, "", gr.Dropdown(choices=[], value=None), None, ""]
        try:
            book, coll, members, columns = self._checked(book, name, matter, space, request)
        except DocpipeError as exc:
            yield f"**Error:** {html.escape(str(exc))}", gr.skip(), None, *closed, folder, *hidden
            return
        names = [m.name for m in members]
        total = len(names) * len(columns)
        start = progress_table(names, columns, {}, first="Contract")
        yield f"Running: 0 / {total} cells done", start, None, *closed, folder, *hidden
        check = functools.partial(
            self.dp.check, book, coll, mode=mode if mode in MODES else "think", password=password or None
        )
        skipped = 1 + len(closed) + 1 + len(hidden)
        report, error = yield from streamed_review(
            check, names, columns, skipped=skipped, interval=STREAM_INTERVAL_S, first="Contract"
        )
        if error is not None or report is None:
            if not isinstance(error, DocpipeError):
                logger.error("playbook check failed", exc_info=error)
                message = "unexpected error while checking the playbook (see the server log)"
            else:
                message = f"{BUSY} ({error})" if isinstance(error, ConnectionError) else str(error)
            yield f"**Error:** {html.escape(message)}", gr.skip(), None, *closed, folder, *hidden
            return
        yield self._finished(report, coll.name, folder, matter, closed, hidden)

    def _finished(
        self,
        report: PlaybookReport,
        name: str,
        folder: str | None,
        matter: str | None,
        closed: list[Any],
        hidden: list[Any],
    ) -> tuple[Any, ...]:
        try:
            if not folder or not os.path.isdir(folder):
                folder = tempfile.mkdtemp(prefix="docpipe-ui-")  # the session's own; never a path from the page
            paths = self._write(report, name, Path(folder))
        except OSError as exc:
            logger.error("writing the playbook report's downloads failed: %s", exc)
            paths = []
        buttons = [
            gr.DownloadButton(f"Download {label}", value=str(path), visible=True)
            for (_suffix, label), path in zip(PLAYBOOK_EXPORTS, paths)
        ] or hidden
        table, order = report_table(report)
        line = f"Done: {report.summary_text()}"
        failed = sum(1 for row in report.rows if row.error)
        if failed:
            line += f" {failed} contract{'s' if failed != 1 else ''} could not be read: their verdicts need review."
        state = {"report": report, "order": order, "collection": name, "matter": matter}
        return html.escape(line), table, state, *closed, folder, *buttons

    @staticmethod
    def _write(report: PlaybookReport, name: str, folder: Path) -> list[Path]:
        """Returns the report written to `folder` (0600) as XLSX, CSV, Markdown and JSON."""
        stem = f"{name}-playbook"
        paths = [folder / f"{stem}.{suffix}" for suffix, _label in PLAYBOOK_EXPORTS]
        report.to_xlsx(paths[0])
        atomic_write(paths[1], report.to_csv().encode())
        atomic_write(paths[2], report.to_markdown().encode())
        atomic_write(paths[3], report.to_json().encode())
        return paths

    # -- opening a verdict -----------------------------------------------------------------------------------
    def _report(
        self, state: Any, matter: str | None, space: str | None, request: Any
    ) -> tuple[PlaybookReport, list[int], Collection]:
        """Returns the session's finished report, its table order and its collection, checked to be one the user
        may read now."""
        if not isinstance(state, dict) or not isinstance(state.get("report"), PlaybookReport):
            raise DocpipeError("run a playbook first")
        if self.access.keyed and state.get("matter") != matter:
            raise DocpipeError("this playbook was run in another matter: run it again here")
        coll = self.room.open_collection(state.get("collection"), matter, space, request)
        return state["report"], list(state.get("order") or []), coll

    def _open(
        self, state: Any, r: Any, k: Any, q: Any, password: str | None, matter: Any, space: Any, request: Any
    ) -> tuple[Any, str, Any, Any, str]:
        """Returns the open verdict (table row, rule), its reading, its quote picker, the chosen quote's page (the
        first verified one by default) and the page's caption."""
        try:
            report, order, coll = self._report(state, matter, space, request)
            r, k = choice_index(r, len(order)), choice_index(k, len(report.playbook.rules))
        except DocpipeError as exc:
            error = html.escape(str(exc))
            picker = gr.Dropdown(choices=[], value=None)
            return None, f'<div class="dp-err">{error}</div>', picker, None, f"**Page not shown:** {error}"
        row = order[r]
        quotes = report.verdicts[row][k].quotes
        reading = verdict_html(report, row, k)
        document = report.rows[row].document_id
        return open_quote(
            (r, k),
            reading,
            quotes,
            q,
            lambda quote: self.room.document_page(coll, document, quote, password, request, matter),
            "a verdict",
        )

    def select_cell(
        self,
        state: Any,
        password: str | None,
        matter: str | None,
        space: str | None,
        evt: gr.SelectData,
        request: GradioRequest,
    ):
        """A click on the table: that verdict (the first rule's, for a click on a contract's name)."""
        index = evt.index if isinstance(evt.index, (list, tuple)) and len(evt.index) == 2 else [None, None]
        r, c = index
        if not isinstance(r, int) or not isinstance(c, int):
            return gr.skip(), "", gr.Dropdown(choices=[], value=None), None, ""
        return self._open(state, r, max(c - 1, 0), None, password, matter, space, request)

    def show_quote(
        self,
        state: Any,
        opened: Any,
        q: str | None,
        password: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Returns the page of the chosen quote of the open verdict, and its caption."""
        if not isinstance(opened, tuple) or len(opened) != 2:
            return None, "Click a cell of the table first."
        _opened, _html, _picker, image, caption = self._open(state, *opened, q, password, matter, space, request)
        return image, caption


def _refused(message: str) -> str:
    return f'<div class="dp-err"><b>&#10007; The playbook was refused; nothing runs.</b> {html.escape(message)}</div>'
