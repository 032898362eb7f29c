"""The Data room tab's "Key terms" view: the key-terms table of a collection (`DocPipe.terms`), one row per
contract and one column per key term, each cell the value read from the contract (an ISO date, a duration, a
jurisdiction, the parties ...), filled in as it runs; without a language model the values come from the
offline readers.

The table sorts and filters by value from each column's menu (a date by date, a duration by its days, an
amount by its size: `docpipe.ui.review_render.terms_table`), and the search box above it keeps the rows that
match. A click on a cell shows its value as written, a computed value's derivation, its quotes with their
pages, and the first quote's page with the quote marked; the quote picker shows the others. Downloads: XLSX,
CSV, JSON and the deadlines (expirations, last days for notice) as an iCalendar file.

It shares the tab's collection picker and password and its rules: a collection the user may read now (their
matter's, or the session's own), within `MAX_GRID_CELLS`; the run is in the access log; Stop (or leaving the
page) cancels the table between engine batches, the cells done staying in the cell cache.
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

from docpipe import DocpipeError, ReviewGrid
from docpipe.storage.store import atomic_write
from docpipe.terms.calendar import deadlines_ics
from docpipe.terms.catalog import KEY_TERMS, key_term_columns
from docpipe.ui.choices import BUSY, MODES, choice_index, open_quote
from docpipe.ui.dataroom import MAX_GRID_CELLS, DataRoom, streamed_review
from docpipe.ui.review_render import cell_html, progress_table, terms_table

if TYPE_CHECKING:
    from docpipe import Collection

__all__ = ["STREAM_INTERVAL_S", "TERMS_EXPORTS", "TermsView"]

logger = logging.getLogger(__name__)

TERMS_EXPORTS = (("xlsx", "XLSX"), ("csv", "CSV"), ("json", "JSON"), ("ics", "ICS"))
STREAM_INTERVAL_S = 0.5  # the table is redrawn at most this often while it runs


@dataclass
class _Parts:
    """The view's components, as `TermsView.layout` made them."""

    grid_state: Any
    folder: Any
    opened: Any
    terms: Any
    mode: Any
    run_btn: Any
    stop_btn: Any
    status: Any
    table: Any
    cell_out: Any
    cell_quote: Any
    page_img: Any
    page_caption: Any
    downloads: list[Any]


class TermsView:
    """The Key terms view's handlers, over the Data room's checks (`DataRoom`: its collections, access rules
    and page view). `layout` adds the components inside the view's `gr.Tab`; `wire` connects them."""

    def __init__(self, room: DataRoom) -> None:
        self.room = room
        self.dp = room.dp
        self.access = room.access

    # -- layout ----------------------------------------------------------------------------------------------
    @staticmethod
    def layout() -> _Parts:
        """Lays the view out: its components, in page order."""
        from docpipe.ui.uploads import remove_folder

        grid_state = gr.State(None)
        folder = gr.State(None, delete_callback=remove_folder)
        opened = gr.State(None)  # the open cell (row, column), kept on the server
        terms = gr.Dropdown(
            [(t.header, t.id) for t in KEY_TERMS],
            value=[],
            multiselect=True,
            label=f"Key terms (none chosen: all {len(KEY_TERMS)})",
            elem_id="kt-terms",
        )
        mode = gr.Radio(MODES, value="think", label="Thinking mode (with a language model)", elem_id="kt-mode")
        with gr.Row():
            run_btn = gr.Button("Run key terms", variant="primary", elem_id="kt-run", scale=3)
            stop_btn = gr.Button("Stop", variant="stop", elem_id="kt-stop", scale=1)
        status = gr.Markdown(elem_id="kt-status")
        table = gr.Dataframe(
            headers=["Contract"],
            datatype="html",  # escaped by `docpipe.ui.review_render`: a long name shortened, in full on hover
            interactive=False,
            wrap=True,
            show_search="filter",
            label="Key terms (click a cell for its quotes; sort or filter by value from a column's menu)",
            elem_id="kt-table",
        )
        cell_out = gr.HTML(elem_id="kt-cell")
        cell_quote = gr.Dropdown(label="Quote", choices=[], elem_id="kt-cell-quote")
        page_img = gr.Image(
            label="Page", type="pil", format="png", interactive=False, elem_id="kt-page", buttons=["fullscreen"]
        )
        page_caption = gr.Markdown(elem_id="kt-page-caption")
        with gr.Row():
            downloads = [
                gr.DownloadButton(f"Download {label}", visible=False, elem_id=f"kt-{suffix}")
                for suffix, label in TERMS_EXPORTS
            ]
        return _Parts(
            grid_state=grid_state,
            folder=folder,
            opened=opened,
            terms=terms,
            mode=mode,
            run_btn=run_btn,
            stop_btn=stop_btn,
            status=status,
            table=table,
            cell_out=cell_out,
            cell_quote=cell_quote,
            page_img=page_img,
            page_caption=page_caption,
            downloads=downloads,
        )

    def wire(
        self, ui: _Parts, *, collection: Any, password: Any, matter_pick: Any, space: Any, concurrency: int
    ) -> None:
        cell_outputs = [ui.opened, ui.cell_out, ui.cell_quote, ui.page_img, ui.page_caption]
        run = ui.run_btn.click(
            self.run,
            [collection, ui.terms, ui.mode, password, ui.folder, matter_pick, space],
            [ui.status, ui.table, ui.grid_state, *cell_outputs, ui.folder, *ui.downloads],
            # The Data room's grids share one limit: each is many engine batches at bulk priority.
            concurrency_limit=max(1, min(2, concurrency)),
            concurrency_id="review",
            api_name="key_terms",
        )
        ui.stop_btn.click(None, None, None, cancels=[run], api_name=False)
        ui.table.select(self.select_cell, [ui.grid_state, password, matter_pick, space], cell_outputs, api_name=False)
        ui.cell_quote.input(
            self.show_quote,
            [ui.grid_state, ui.opened, ui.cell_quote, password, matter_pick, space],
            [ui.page_img, ui.page_caption],
            api_name=False,
        )

    # -- running the table -----------------------------------------------------------------------------------
    def _checked(
        self, name: str | None, terms: list[str] | None, matter: str | None, space: str | None, request: Any
    ) -> tuple[Collection, list[Any], list[str]]:
        """Returns the collection, its documents and the key terms chosen (catalog order; none: all), once the
        table is allowed (a collection the user may read, not empty, within `MAX_GRID_CELLS`) and recorded."""
        coll = self.room.open_collection(name, matter, space, request)
        known = [t.id for t in KEY_TERMS]
        unknown = [t for t in terms or [] if t not in known]
        if unknown:
            raise DocpipeError(f"unknown key term {str(unknown[0])[:40]!r}: choose key terms from the list")
        chosen = [t for t in known if t in set(terms or [])]
        members = coll.documents
        if not members:
            raise DocpipeError(f"collection {coll.name} has no documents yet: add PDFs to it first")
        width = len(chosen) or len(known)
        if len(members) * width > MAX_GRID_CELLS:
            raise DocpipeError(
                f"{len(members)} contracts x {width} key terms is {len(members) * width} cells; this page runs at "
                f"most {MAX_GRID_CELLS}: run `docpipe terms` for bigger tables"
            )
        self.access.record(request, matter, "key_terms", None, chosen or known)
        return coll, members, chosen

    def run(
        self,
        name: str | None,
        terms: list[str] | None,
        mode: str,
        password: str | None,
        folder: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Runs the key-terms table, yielding it as cells finish, then the finished table with its downloads."""
        hidden = [gr.DownloadButton(visible=False) for _ in TERMS_EXPORTS]
        closed = [None, "", gr.Dropdown(choices=[], value=None), None, ""]
        try:
            coll, members, chosen = self._checked(name, terms, matter, space, request)
        except DocpipeError as exc:
            yield f"**Error:** {html.escape(str(exc))}", gr.skip(), None, *closed, folder, *hidden
            return
        names = [m.name for m in members]
        columns = [c.key for c in key_term_columns(chosen or None)]
        total = len(names) * len(columns)
        start = progress_table(names, columns, {}, first="Contract")
        yield f"Running: 0 / {total} cells done", start, None, *closed, folder, *hidden
        review = functools.partial(
            self.dp.terms,
            coll,
            terms=chosen or None,
            mode=mode if mode in MODES else "think",
            password=password or None,
        )
        skipped = 1 + len(closed) + 1 + len(hidden)
        grid, error = yield from streamed_review(
            review, names, columns, skipped=skipped, interval=STREAM_INTERVAL_S, first="Contract"
        )
        if error is not None or grid is None:
            if not isinstance(error, DocpipeError):
                logger.error("key terms failed", exc_info=error)
                message = "unexpected error while reading the key terms (see the server log)"
            else:
                message = f"{BUSY} ({error})" if isinstance(error, ConnectionError) else str(error)
            yield f"**Error:** {html.escape(message)}", gr.skip(), None, *closed, folder, *hidden
            return
        yield self._finished(grid, coll.name, folder, matter, closed, hidden)

    def _finished(
        self, grid: ReviewGrid, name: str, folder: str | None, matter: str | None, closed: list[Any], hidden: list[Any]
    ) -> tuple[Any, ...]:
        try:
            if not folder or not os.path.isdir(folder):
                folder = tempfile.mkdtemp(prefix="docpipe-ui-")  # the session's own; never a path from the page
            paths = self._write(grid, name, Path(folder))
        except OSError as exc:
            logger.error("writing the key terms' downloads failed: %s", exc)
            paths = []
        buttons = [
            gr.DownloadButton(f"Download {label}", value=str(path), visible=True)
            for (_suffix, label), path in zip(TERMS_EXPORTS, paths)
        ] or hidden
        summary = grid.summary()
        found = sum(cell.value is not None or bool(cell.answer) for row in grid.cells for cell in row)
        line = f"Done: {summary['done']} / {summary['cells']} cells done, {found} with a value"
        if summary["failed"]:
            line += f", {summary['failed']} failed"
        if summary["from_cache"]:
            line += f", {summary['from_cache']} from the cache"
        state = {"grid": grid, "collection": name, "matter": matter}
        return line + ".", terms_table(grid), state, *closed, folder, *buttons

    @staticmethod
    def _write(grid: ReviewGrid, name: str, folder: Path) -> list[Path]:
        """Returns the table written to `folder` as XLSX, CSV, JSON and the deadlines' iCalendar file."""
        stem = f"{name}-key-terms"
        paths = [folder / f"{stem}.{suffix}" for suffix, _label in TERMS_EXPORTS]
        grid.to_xlsx(paths[0])
        atomic_write(paths[1], grid.to_csv().encode())
        atomic_write(paths[2], grid.to_json().encode())
        atomic_write(paths[3], deadlines_ics(grid))
        return paths

    # -- opening a cell --------------------------------------------------------------------------------------
    def _open(
        self, state: Any, r: Any, c: Any, q: Any, password: str | None, matter: Any, space: Any, request: Any
    ) -> tuple[Any, str, Any, Any, str]:
        """Returns the open cell (row, column), its reading, its quote picker, the chosen quote's page (the
        first verified one by default) and the page's caption."""
        try:
            grid, coll = self.room.checked_grid(state, matter, space, request)
            r, c = choice_index(r, len(grid.rows)), choice_index(c, len(grid.columns))
        except DocpipeError as exc:
            error = html.escape(str(exc))
            picker = gr.Dropdown(choices=[], value=None)
            return None, f'<div class="dp-err">{error}</div>', picker, None, f"**Page not shown:** {error}"
        quotes = grid.cells[r][c].quotes
        reading = cell_html(grid, r, c)
        return open_quote(
            (r, c),
            reading,
            quotes,
            q,
            lambda quote: self.room.quote_page(grid, coll, r, quote, password, request, matter),
            "a key term",
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
        """A click on the table: that cell (the first key term's, for a click on a contract's name)."""
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
        """Returns the page of the chosen quote of the open cell, and its caption."""
        if not isinstance(opened, tuple) or len(opened) != 2:
            return None, "Click a cell of the table first."
        _opened, _html, _picker, image, caption = self._open(state, *opened, q, password, matter, space, request)
        return image, caption
