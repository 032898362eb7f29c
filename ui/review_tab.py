"""The workbench's "Data room" tab: a review grid over a collection, filled in as it runs, each cell opened on
its page with the quote marked, and the grid downloaded as XLSX, CSV or JSON; beside it, the collection's key
terms (`docpipe.ui.terms_view`) and the playbook's verdicts (`docpipe.ui.playbook_view`).

Choose one of the session's (or, with API keys, the matter's) collections, or upload PDFs into a new or
existing one (the Upload tab's collection path: the same upload checks and limits); type questions, one per
line, and/or tick checklist categories (or all of them with one switch); Run. A Run pressed while an add is
still in flight waits for it (`docpipe.ui.progress.AddsInFlight`). A question may name what its cells hold after ``::``
(``Which law governs?::jurisdiction``): its cells show the value read, and the column sorts and filters by
value (`docpipe.ui.review_render`). `DocPipe.review` runs in a worker thread and the table is
redrawn from its progress events (each finished cell filled in, at most every `STREAM_INTERVAL_S`); the finished grid stays in the session's
state, on the server. Rows are in document-name order; cells are coloured by status with a legend, show the
decisive sentence and the reviewer's mark (`docpipe.ui.review_marks`); the downloads sit above the page view;
the thinking-mode choice is shown only when a language model answers. A cell is opened by clicking it in the table or with the pickers below it: its answer,
note and quotes, and the quote's page rendered with the quote marked (`docpipe.ui.pageview`). Opening a
cell checks again that the collection is one the user may read now and that the document is in it.
"""

from __future__ import annotations

import html
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
from gradio import Request as GradioRequest

from docpipe import CHECKLIST, DocpipeError, Document, ReviewGrid
from docpipe.review import columns_for
from docpipe.storage.store import atomic_write
from docpipe.ui.choices import BUSY, MAX_QUESTION_CHARS, MODES, choice_index, offer_thinking, quote_choices
from docpipe.ui.dataroom import MAX_GRID_CELLS, DataRoom, streamed_review
from docpipe.ui.handlers import Workbench
from docpipe.ui.playbook_view import PlaybookView
from docpipe.ui.progress import NEW_ADD_JS, AddsInFlight
from docpipe.ui.review_layout import EXPORTS, MAX_GRID_QUESTIONS, MAX_QUESTIONS_TEXT, layout
from docpipe.ui.review_marks import MarksPanel
from docpipe.ui.review_render import by_name, cell_html, grid_table, name_order, progress_table
from docpipe.ui.terms_view import TermsView

if TYPE_CHECKING:
    from docpipe import Collection

__all__ = [
    "EXPORTS",
    "MAX_GRID_CELLS",
    "MAX_GRID_QUESTIONS",
    "MAX_ADD_WAIT_S",
    "MAX_QUESTIONS_TEXT",
    "STREAM_INTERVAL_S",
    "ReviewTab",
]

logger = logging.getLogger(__name__)

STREAM_INTERVAL_S = 0.5  # the table is redrawn at most this often while the grid runs
MAX_ADD_WAIT_S = 1800.0  # a Run waits this long at most for an add in flight (a big data room takes minutes)


class ReviewTab:
    """The Data room tab's handlers over the app's `Workbench` (its access rules, collections and uploads).
    `build` lays the tab out inside the app's Blocks and wires its events."""

    def __init__(self, wb: Workbench) -> None:
        self.wb = wb
        self.dp = wb.dp
        self.access = wb.access
        self.room = DataRoom(wb)
        self.terms = TermsView(self.room)
        self.playbook = PlaybookView(self.room)
        self.marks = MarksPanel(self.room)
        self.adds = AddsInFlight()

    # -- layout ----------------------------------------------------------------------------------------------
    def build(self, *, docs_state: Any, matter_pick: Any, space: Any, pickers: list[Any], concurrency: int) -> None:
        """Adds the tab to the Blocks being built; `pickers` are the other tabs' document pickers (an upload
        here offers its collection there too)."""
        ui = layout()
        self.terms.wire(
            ui.terms,
            collection=ui.collection,
            password=ui.password,
            matter_pick=matter_pick,
            space=space,
            concurrency=concurrency,
        )
        self.playbook.wire(
            ui.playbook,
            collection=ui.collection,
            password=ui.password,
            matter_pick=matter_pick,
            space=space,
            concurrency=concurrency,
        )
        ui.tab.select(self.refresh, [matter_pick, space, ui.collection], [ui.collection], api_name=False)
        matter_pick.change(self.refresh, [matter_pick, space, ui.collection], [ui.collection], api_name=False)
        # The add's token is set in the page the moment Add is pressed, so a Run pressed next waits for it.
        ui.add_btn.click(None, None, [ui.adding], js=NEW_ADD_JS, api_name=False).then(
            self.add,
            [ui.files, ui.password, docs_state, matter_pick, ui.new_name, ui.collection, space, ui.adding],
            [ui.add_result, docs_state, *pickers, ui.files, ui.collection],
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="ingest",
            api_name="review_add",
        )
        ui.all_categories.input(self.all_categories, [ui.all_categories], [ui.categories], api_name=False)
        ui.categories.input(
            lambda chosen: len(chosen or []) == len(CHECKLIST), [ui.categories], [ui.all_categories], api_name=False
        )
        offer_thinking(self.wb, ui.mode)  # once the page knows whether a model answers
        cell_outputs = [ui.cell_out, ui.cell_quote, ui.page_img, ui.page_caption]
        ui.run_btn.click(
            self.wait_for_add,
            [ui.adding, ui.collection, matter_pick, space],
            [ui.status, ui.collection],
            api_name=False,
        ).then(
            self.run,
            [ui.collection, ui.questions, ui.categories, ui.mode, ui.password, ui.folder, matter_pick, space],
            [ui.status, ui.table, ui.grid_state, ui.cell_doc, ui.cell_col, *cell_outputs, ui.folder, *ui.downloads],
            # A grid is many engine batches at bulk priority: a few at once leave room for questions.
            concurrency_limit=max(1, min(2, concurrency)),
            concurrency_id="review",
            api_name="review",
        )
        ui.table.select(
            self.select_cell,
            [ui.grid_state, ui.password, matter_pick, space],
            [ui.cell_doc, ui.cell_col, *cell_outputs],
            api_name=False,
        )
        for picker in (ui.cell_doc, ui.cell_col):
            picker.input(
                self.show_cell,
                [ui.grid_state, ui.cell_doc, ui.cell_col, ui.password, matter_pick, space],
                cell_outputs,
                api_name=False,
            )
        ui.cell_quote.input(
            self.show_quote,
            [ui.grid_state, ui.cell_doc, ui.cell_col, ui.cell_quote, ui.password, matter_pick, space],
            [ui.page_img, ui.page_caption],
            api_name=False,
        )
        mark_outputs = [ui.mark_result, ui.table, ui.cell_out, ui.folder, *ui.downloads]
        ui.mark_save.click(
            self.mark,
            [
                ui.grid_state,
                ui.cell_doc,
                ui.cell_col,
                ui.mark_status,
                ui.mark_value,
                ui.mark_comment,
                ui.folder,
                matter_pick,
                space,
            ],
            mark_outputs,
            api_name="review_mark",
        )
        ui.mark_clear.click(
            self.clear_mark,
            [ui.grid_state, ui.cell_doc, ui.cell_col, ui.folder, matter_pick, space],
            mark_outputs,
            api_name="review_mark_clear",
        )

    # -- collections -----------------------------------------------------------------------------------------
    def _names(self, matter: str | None, space: str | None, request: Any) -> list[str]:
        principal = self.access.principal(request)
        return self.wb.collection_names(principal, matter, space)

    def refresh(self, matter: str | None, space: str | None, current: str | None, request: GradioRequest):
        """Returns the collection picker with the collections the session may read now."""
        try:
            names = self._names(matter, space, request)
        except DocpipeError:
            names = []
        return gr.Dropdown(choices=names, value=current if current in names else (names[0] if names else None))

    def add(
        self,
        files: list[str] | str | None,
        password: str,
        docs: dict[str, Document] | None,
        matter: str | None,
        new_name: str | None,
        chosen: str | None,
        space: str | None,
        token: str | None,
        request: GradioRequest,
    ):
        """Adds the uploads to the named collection through the Upload tab's collection path (the same checks
        and limits), then offers the collection here and in the other tabs' pickers. `token` is the page's
        for this add: a Run waiting for it (`wait_for_add`) goes on when it is over, whatever its outcome."""
        value = None
        try:
            name = (new_name or "").strip() or (chosen or "")
            result, docs, *pickers, left = self.wb.ingest_collection(
                files, password, docs, matter, name, space, request
            )
            try:
                names = self._names(matter, space, request)
            except DocpipeError:
                names = []
            value = name if name in names else (chosen if chosen in names else None)
            return result, docs, *pickers, left, gr.Dropdown(choices=names, value=value)
        finally:
            if token:
                self.adds.finished(self._add_key(token, request), value)

    @staticmethod
    def _add_key(token: str, request: Any) -> str:
        # The session's own: a token copied from another page names no add of this one.
        return f"{getattr(request, 'session_hash', None) or ''}:{str(token)[:64]}"

    def wait_for_add(
        self, token: str | None, chosen: str | None, matter: str | None, space: str | None, request: GradioRequest
    ):
        """Before a Run: waits for the page's latest add when it is still in flight (or still queued), then
        chooses the collection it added to, so the grid runs over it instead of "choose a collection first"."""
        if not token:
            yield gr.skip(), gr.skip()
            return
        key = self._add_key(token, request)
        if self.adds.done(key):
            _done, added = self.adds.wait(key, timeout=0)
            # The add may be over while the page has not drawn its outcome yet: then its collection, if none.
            yield gr.skip(), gr.skip() if chosen or not added else self._picked(added, matter, space, request)
            return
        yield "Waiting for the add to the collection to finish; the grid runs then.", gr.skip()
        done, added = self.adds.wait(key, timeout=MAX_ADD_WAIT_S)
        if not done:
            yield "**Error:** the add is still running: press Run again once it has finished.", gr.skip()
            return
        if added is None:
            yield "The add finished without a collection to run.", gr.skip()
            return
        yield (
            f"The add finished: running the grid over {html.escape(added)}.",
            self._picked(added, matter, space, request),
        )

    def _picked(self, name: str, matter: str | None, space: str | None, request: Any) -> Any:
        try:
            names = self._names(matter, space, request)
        except DocpipeError:
            return gr.skip()
        return gr.Dropdown(choices=names, value=name) if name in names else gr.skip()

    def all_categories(self, everything: bool) -> Any:
        """The "all checklist categories" switch: every category ticked, or none."""
        return gr.CheckboxGroup(value=[c.name for c in CHECKLIST] if everything else [])

    # -- running a grid --------------------------------------------------------------------------------------
    def _columns(self, text: str | None, categories: list[str] | None) -> tuple[list[str], list[str]]:
        """Returns the free questions and the known checklist categories asked; refuses too many or too long."""
        text = text or ""
        if len(text) > MAX_QUESTIONS_TEXT:
            raise DocpipeError(f"the questions are {len(text)} characters long; keep them under {MAX_QUESTIONS_TEXT}")
        asked = [line.strip() for line in text.splitlines() if line.strip()]
        if len(asked) > MAX_GRID_QUESTIONS:
            raise DocpipeError(f"{len(asked)} questions; a grid takes at most {MAX_GRID_QUESTIONS} from this page")
        for question in asked:
            if len(question) > MAX_QUESTION_CHARS:
                raise DocpipeError(
                    f"a question is {len(question)} characters long; keep each under {MAX_QUESTION_CHARS}"
                )
        known = [c.name for c in CHECKLIST]
        chosen = [name for name in known if name in set(categories or [])]
        if not asked and not chosen:
            raise DocpipeError("type questions (one per line) or tick checklist categories first")
        columns_for(asked, categories=chosen)  # an unknown kind after "::", a question asked twice
        return asked, chosen

    def run(
        self,
        name: str | None,
        text: str | None,
        categories: list[str] | None,
        mode: str,
        password: str | None,
        folder: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Runs the grid, yielding the table as cells finish, then the finished grid with its downloads."""
        hidden = [gr.DownloadButton(visible=False) for _ in EXPORTS]
        cleared = [gr.Dropdown(choices=[], value=None), gr.Dropdown(choices=[], value=None)]
        empty_cell = ["", gr.Dropdown(choices=[], value=None), None, ""]
        try:
            coll, members, asked, chosen = self._checked_run(name, text, categories, matter, space, request)
        except DocpipeError as exc:
            yield f"**Error:** {html.escape(str(exc))}", gr.skip(), None, *cleared, *empty_cell, folder, *hidden
            return
        # Rows by document name, as the finished grid has them (`by_name`), while the grid fills in too.
        order = name_order([m.name for m in members], [m.id for m in members])
        names = [members[i].name for i in order]
        row_of = {old: new for new, old in enumerate(order)}
        columns = [c.key for c in columns_for(asked, categories=chosen)]  # the grid's: categories, then questions
        total = len(names) * len(columns)
        yield (
            f"Running: 0 / {total} cells done",
            progress_table(names, columns, {}),
            None,
            *cleared,
            *empty_cell,
            folder,
            *hidden,
        )

        def review(*, progress: Any, cancel: Any) -> ReviewGrid:
            return self.dp.review(
                coll,
                questions=asked or None,
                categories=chosen or None,
                mode=mode if mode in MODES else "think",
                password=password or None,
                progress=lambda event: progress(replace(event, row=row_of.get(event.row, event.row))),
                cancel=cancel,
            )

        grid, error = yield from streamed_review(
            review, names, columns, skipped=len(hidden) + 8, interval=STREAM_INTERVAL_S
        )
        if error is not None or grid is None:
            if not isinstance(error, DocpipeError):
                logger.error("review grid failed", exc_info=error)
                message = "unexpected error while running the grid (see the server log)"
            else:
                message = f"{BUSY} ({error})" if isinstance(error, ConnectionError) else str(error)
            yield f"**Error:** {html.escape(message)}", gr.skip(), None, *cleared, *empty_cell, folder, *hidden
            return
        yield self._finished(by_name(grid), coll, folder, matter, empty_cell, hidden)

    def _checked_run(
        self,
        name: str | None,
        text: str | None,
        categories: list[str] | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ) -> tuple[Collection, list[Any], list[str], list[str]]:
        """Returns the collection, its documents and the grid's questions and categories, once the grid is
        allowed (a collection the user may read, not empty, within `MAX_GRID_CELLS`) and recorded."""
        coll = self.room.open_collection(name, matter, space, request)
        asked, chosen = self._columns(text, categories)
        members = coll.documents
        if not members:
            raise DocpipeError(f"collection {coll.name} has no documents yet: add PDFs to it first")
        width = len(asked) + len(chosen)
        if len(members) * width > MAX_GRID_CELLS:
            raise DocpipeError(
                f"{len(members)} documents x {width} questions is {len(members) * width} cells; this page runs "
                f"at most {MAX_GRID_CELLS}: run `docpipe review` for bigger grids"
            )
        self.access.record(request, matter, "review", None, asked + chosen)
        return coll, members, asked, chosen

    def _finished(
        self,
        grid: ReviewGrid,
        coll: Collection,
        folder: str | None,
        matter: str | None,
        empty_cell: list[Any],
        hidden: list[Any],
    ) -> tuple[Any, ...]:
        """Returns the outputs for the finished grid: its summary, table (with the reviewers' marks, kept from
        earlier runs), state, cell pickers and downloads."""
        name = coll.name
        folder, buttons = self._downloads(grid, name, folder)
        buttons = buttons or hidden
        summary = grid.summary()
        line = f"Done: {summary['done']} / {summary['cells']} cells done"
        if summary["failed"]:
            line += f", {summary['failed']} failed"
        if summary["from_cache"]:
            line += f", {summary['from_cache']} from the cache"
        state = {"grid": grid, "collection": name, "matter": matter}
        return (
            line + ".",
            grid_table(grid),  # with the marks `DocPipe.review` attached
            state,
            gr.Dropdown(choices=[(row.name, str(r)) for r, row in enumerate(grid.rows)], value=None),
            gr.Dropdown(choices=[(col.key, str(c)) for c, col in enumerate(grid.columns)], value=None),
            *empty_cell,
            folder,
            *buttons,
        )

    def _downloads(self, grid: ReviewGrid, name: str, folder: str | None) -> tuple[str | None, list[Any]]:
        """Returns the session's download folder and the download buttons of the grid written there (none when
        writing failed)."""
        try:
            if not folder or not os.path.isdir(folder):
                folder = tempfile.mkdtemp(prefix="docpipe-ui-")  # the session's own; never a path from the page
            paths = self._write(grid, name, Path(folder))
        except OSError as exc:
            logger.error("writing the grid's downloads failed: %s", exc)
            paths = []
        return folder, [
            gr.DownloadButton(f"Download {label}", value=str(path), visible=True)
            for (_suffix, label), path in zip(EXPORTS, paths)
        ]

    # -- reviewer marks --------------------------------------------------------------------------------------
    def mark(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        status: str | None,
        value: str | None,
        comment: str | None,
        folder: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Marks the open cell (`MarksPanel.save`); the table, the cell and the downloads show the mark."""
        said, table, reading = self.marks.save(state, r, c, status, value, comment, matter, space, request)
        return said, table, reading, *self._marked_downloads(state, folder, table)

    def clear_mark(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        folder: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Clears the open cell's mark (`MarksPanel.clear`); the table, the cell and the downloads follow."""
        said, table, reading = self.marks.clear(state, r, c, matter, space, request)
        return said, table, reading, *self._marked_downloads(state, folder, table)

    def _marked_downloads(self, state: Any, folder: str | None, table: Any) -> list[Any]:
        # The session's grid written again after a mark, so its downloads hold the marks as they are now.
        if not isinstance(table, dict) or not isinstance(state, dict) or not isinstance(state.get("grid"), ReviewGrid):
            return [gr.skip()] * (1 + len(EXPORTS))  # nothing was marked
        folder, buttons = self._downloads(state["grid"], str(state.get("collection") or "grid"), folder)
        return [folder, *(buttons or [gr.skip()] * len(EXPORTS))]

    @staticmethod
    def _write(grid: ReviewGrid, name: str, folder: Path) -> list[Path]:
        """Returns the grid written to `folder` as XLSX, CSV and JSON, named after the collection."""
        stem = f"{name}-review"
        paths = [folder / f"{stem}.{suffix}" for suffix, _label in EXPORTS]
        grid.to_xlsx(paths[0])
        atomic_write(paths[1], grid.to_csv().encode())
        atomic_write(paths[2], grid.to_json().encode())
        return paths

    # -- opening a cell --------------------------------------------------------------------------------------
    def _cell(
        self,
        state: Any,
        r: Any,
        c: Any,
        q: Any,
        password: str | None,
        matter: str | None,
        space: str | None,
        request: Any,
    ) -> tuple[str, Any, Any, str]:
        try:
            grid, coll = self.room.checked_grid(state, matter, space, request)
            r, c = choice_index(r, len(grid.rows)), choice_index(c, len(grid.columns))
        except DocpipeError as exc:
            return f'<div class="dp-err">{html.escape(str(exc))}</div>', gr.Dropdown(choices=[], value=None), None, ""
        cell = grid.cells[r][c]
        reading = cell_html(grid, r, c, self.marks.of_cell(grid, coll, r, c))
        quotes = cell.quotes
        picker = gr.Dropdown(choices=quote_choices(quotes), value=None)
        if not quotes:
            return reading, picker, None, "No quote to show on a page."
        try:
            index = (
                choice_index(q, len(quotes))
                if q is not None
                else next((i for i, quote in enumerate(quotes) if quote.verified), 0)
            )
            picker = gr.Dropdown(choices=quote_choices(quotes), value=str(index))
            image, caption = self.room.quote_page(grid, coll, r, quotes[index], password, request, matter)
        except DocpipeError as exc:
            return reading, picker, None, f"**Page not shown:** {html.escape(str(exc))}"
        except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
            logger.exception("showing a cell's page failed")
            return reading, picker, None, "**Page not shown:** unexpected error (see the server log)"
        return reading, picker, image, caption

    def show_cell(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        password: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Returns the cell the pickers name: its reading, its quote picker, its first quote's page, caption."""
        if r is None or c is None:
            return "", gr.Dropdown(choices=[], value=None), None, ""
        return self._cell(state, r, c, None, password, matter, space, request)

    def select_cell(
        self,
        state: Any,
        password: str | None,
        matter: str | None,
        space: str | None,
        evt: gr.SelectData,
        request: GradioRequest,
    ):
        """A click on the table: that cell (the first question's, for a click on a document's name)."""
        index = evt.index if isinstance(evt.index, (list, tuple)) and len(evt.index) == 2 else [None, None]
        r, c = index
        if not isinstance(r, int) or not isinstance(c, int):
            return gr.skip(), gr.skip(), "", gr.Dropdown(choices=[], value=None), None, ""
        column = str(max(c - 1, 0))
        return str(r), column, *self._cell(state, str(r), column, None, password, matter, space, request)

    def show_quote(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        q: str | None,
        password: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ):
        """Returns the page of the chosen quote of the open cell, and its caption."""
        _html, _picker, image, caption = self._cell(state, r, c, q, password, matter, space, request)
        return image, caption
