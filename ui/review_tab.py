"""The workbench's "Data room" tab: a review grid over a collection, filled in as it runs, each cell opened on
its page with the quote marked, and the grid downloaded as XLSX, CSV or JSON; beside it, the collection's key
terms (`docpipe.ui.terms_view`).

Choose one of the session's (or, with API keys, the matter's) collections, or upload PDFs into a new or
existing one (the Upload tab's collection path: the same upload checks and limits); type questions, one per
line, and/or tick checklist categories; Run. A question may name what its cells hold after ``::``
(``Which law governs?::jurisdiction``): its cells show the value read, and the column sorts and filters by
value (`docpipe.ui.review_render`). `DocPipe.review` runs in a worker thread and the table is
redrawn from its progress events (each finished cell filled in, at most every `STREAM_INTERVAL_S`); the finished grid stays in the session's
state, on the server. A cell is opened by clicking it in the table or with the pickers below it: its answer,
note and quotes, and the quote's page rendered with the quote marked (`docpipe.ui.pageview`). Opening a
cell checks again that the collection is one the user may read now and that the document is in it.
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

from docpipe import CHECKLIST, DocpipeError, Document, ReviewGrid
from docpipe.review import columns_for
from docpipe.storage.store import atomic_write
from docpipe.ui.choices import BUSY, MAX_QUESTION_CHARS, MODES, choice_index, quote_choices
from docpipe.ui.dataroom import MAX_GRID_CELLS, DataRoom, streamed_review
from docpipe.ui.handlers import Workbench
from docpipe.ui.review_render import cell_html, grid_table, progress_table
from docpipe.ui.terms_view import TermsView
from docpipe.ui.uploads import remove_folder

if TYPE_CHECKING:
    from docpipe import Collection

__all__ = [
    "EXPORTS",
    "MAX_GRID_CELLS",
    "MAX_GRID_QUESTIONS",
    "MAX_QUESTIONS_TEXT",
    "STREAM_INTERVAL_S",
    "ReviewTab",
]

logger = logging.getLogger(__name__)

MAX_GRID_QUESTIONS = 50  # free questions per grid (checklist categories come on top: at most all 41)
MAX_QUESTIONS_TEXT = MAX_GRID_QUESTIONS * (MAX_QUESTION_CHARS + 1)  # the questions box, before it is split
STREAM_INTERVAL_S = 0.5  # the table is redrawn at most this often while the grid runs
EXPORTS = (("xlsx", "XLSX"), ("csv", "CSV"), ("json", "JSON"))


@dataclass
class _Parts:
    """The tab's components, as `ReviewTab._layout` made them."""

    folder: Any
    grid_state: Any
    tab: Any
    collection: Any
    files: Any
    new_name: Any
    add_btn: Any
    add_result: Any
    password: Any
    questions: Any
    categories: Any
    mode: Any
    run_btn: Any
    status: Any
    table: Any
    cell_doc: Any
    cell_col: Any
    cell_quote: Any
    cell_out: Any
    page_img: Any
    page_caption: Any
    downloads: list[Any]
    terms: Any  # the Key terms view's components (`docpipe.ui.terms_view`)


class ReviewTab:
    """The Data room tab's handlers over the app's `Workbench` (its access rules, collections and uploads).
    `build` lays the tab out inside the app's Blocks and wires its events."""

    def __init__(self, wb: Workbench) -> None:
        self.wb = wb
        self.dp = wb.dp
        self.access = wb.access
        self.room = DataRoom(wb)
        self.terms = TermsView(self.room)

    # -- layout ----------------------------------------------------------------------------------------------
    def build(self, *, docs_state: Any, matter_pick: Any, space: Any, pickers: list[Any], concurrency: int) -> None:
        """Adds the tab to the Blocks being built; `pickers` are the other tabs' document pickers (an upload
        here offers its collection there too)."""
        ui = self._layout()
        self.terms.wire(
            ui.terms,
            collection=ui.collection,
            password=ui.password,
            matter_pick=matter_pick,
            space=space,
            concurrency=concurrency,
        )
        ui.tab.select(self.refresh, [matter_pick, space, ui.collection], [ui.collection], api_name=False)
        matter_pick.change(self.refresh, [matter_pick, space, ui.collection], [ui.collection], api_name=False)
        ui.add_btn.click(
            self.add,
            [ui.files, ui.password, docs_state, matter_pick, ui.new_name, ui.collection, space],
            [ui.add_result, docs_state, *pickers, ui.files, ui.collection],
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="ingest",
            api_name="review_add",
        )
        cell_outputs = [ui.cell_out, ui.cell_quote, ui.page_img, ui.page_caption]
        ui.run_btn.click(
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

    @staticmethod
    def _layout() -> _Parts:
        """Lays the tab out: its components, in page order."""
        folder = gr.State(None, delete_callback=remove_folder)
        grid_state = gr.State(None)
        with gr.Tab("Data room", id="dataroom") as tab:
            collection = gr.Dropdown(label="Collection", choices=[], elem_id="dr-collection")
            with gr.Accordion("Add PDFs to a collection", open=True):
                files = gr.File(
                    label="PDF or Word (.docx) files (the Upload tab's limits apply)",
                    file_count="multiple",
                    file_types=[".pdf", ".docx"],
                    type="filepath",
                    elem_id="dr-files",
                )
                with gr.Row():
                    new_name = gr.Textbox(
                        label="Collection to add them to (created if new; empty: the one chosen above)",
                        max_length=63,
                        elem_id="dr-new-collection",
                        scale=3,
                    )
                    add_btn = gr.Button("Add to collection", elem_id="dr-add-btn", scale=1)
                add_result = gr.HTML(elem_id="dr-add-result")
            password = gr.Textbox(
                label="Password (encrypted PDFs only: to add, review and show their pages)",
                type="password",
                elem_id="dr-password",
            )
            with gr.Tabs(elem_id="dr-views"):
                with gr.Tab("Review grid", id="dr-review-view"):
                    grid = ReviewTab._grid_layout()
                with gr.Tab("Key terms", id="dr-terms-view"):
                    terms = TermsView.layout()
        return _Parts(
            folder=folder,
            grid_state=grid_state,
            tab=tab,
            collection=collection,
            files=files,
            new_name=new_name,
            add_btn=add_btn,
            add_result=add_result,
            password=password,
            terms=terms,
            **grid,
        )

    @staticmethod
    def _grid_layout() -> dict[str, Any]:
        """Lays the review grid's view out: its components, in page order."""
        questions = gr.Textbox(
            label=f"Questions, one per line (at most {MAX_GRID_QUESTIONS}); after :: what a cell holds, e.g. "
            "Which law governs?::jurisdiction",
            lines=4,
            max_length=MAX_QUESTIONS_TEXT,
            elem_id="dr-questions",
        )
        categories = gr.CheckboxGroup(
            [c.name for c in CHECKLIST], value=[], label="Checklist categories", elem_id="dr-categories"
        )
        mode = gr.Radio(MODES, value="think", label="Thinking mode", elem_id="dr-mode")
        run_btn = gr.Button("Run", variant="primary", elem_id="dr-run")
        status = gr.Markdown(elem_id="dr-status")
        table = gr.Dataframe(
            headers=["Document"],
            datatype="str",
            interactive=False,
            wrap=True,
            label="Review grid (click a cell to open it; typed columns sort and filter by value)",
            elem_id="dr-grid",
        )
        with gr.Row():
            cell_doc = gr.Dropdown(label="Document", choices=[], elem_id="dr-cell-doc")
            cell_col = gr.Dropdown(label="Question", choices=[], elem_id="dr-cell-col")
            cell_quote = gr.Dropdown(label="Quote", choices=[], elem_id="dr-cell-quote")
        cell_out = gr.HTML(elem_id="dr-cell")
        page_img = gr.Image(
            label="Page", type="pil", format="png", interactive=False, elem_id="dr-page", buttons=["fullscreen"]
        )
        page_caption = gr.Markdown(elem_id="dr-page-caption")
        with gr.Row():
            downloads = [
                gr.DownloadButton(f"Download {label}", visible=False, elem_id=f"dr-{suffix}")
                for suffix, label in EXPORTS
            ]
        return {
            "questions": questions,
            "categories": categories,
            "mode": mode,
            "run_btn": run_btn,
            "status": status,
            "table": table,
            "cell_doc": cell_doc,
            "cell_col": cell_col,
            "cell_quote": cell_quote,
            "cell_out": cell_out,
            "page_img": page_img,
            "page_caption": page_caption,
            "downloads": downloads,
        }

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
        request: GradioRequest,
    ):
        """Adds the uploads to the named collection through the Upload tab's collection path (the same checks
        and limits), then offers the collection here and in the other tabs' pickers."""
        name = (new_name or "").strip() or (chosen or "")
        result, docs, *pickers, left = self.wb.ingest_collection(files, password, docs, matter, name, space, request)
        try:
            names = self._names(matter, space, request)
        except DocpipeError:
            names = []
        value = name if name in names else (chosen if chosen in names else None)
        return result, docs, *pickers, left, gr.Dropdown(choices=names, value=value)

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
        names = [m.name for m in members]
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
        review = functools.partial(
            self.dp.review,
            coll,
            questions=asked or None,
            categories=chosen or None,
            mode=mode if mode in MODES else "think",
            password=password or None,
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
        yield self._finished(grid, coll.name, folder, matter, empty_cell, hidden)

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
        name: str,
        folder: str | None,
        matter: str | None,
        empty_cell: list[Any],
        hidden: list[Any],
    ) -> tuple[Any, ...]:
        """Returns the outputs for the finished grid: its summary, table, state, cell pickers and downloads."""
        try:
            if not folder or not os.path.isdir(folder):
                folder = tempfile.mkdtemp(prefix="docpipe-ui-")  # the session's own; never a path from the page
            paths = self._write(grid, name, Path(folder))
        except OSError as exc:
            logger.error("writing the grid's downloads failed: %s", exc)
            paths = []
        buttons = [
            gr.DownloadButton(f"Download {label}", value=str(path), visible=True)
            for (_suffix, label), path in zip(EXPORTS, paths)
        ] or hidden
        summary = grid.summary()
        line = f"Done: {summary['done']} / {summary['cells']} cells done"
        if summary["failed"]:
            line += f", {summary['failed']} failed"
        if summary["from_cache"]:
            line += f", {summary['from_cache']} from the cache"
        state = {"grid": grid, "collection": name, "matter": matter}
        return (
            line + ".",
            grid_table(grid),
            state,
            gr.Dropdown(choices=[(row.name, str(r)) for r, row in enumerate(grid.rows)], value=None),
            gr.Dropdown(choices=[(col.key, str(c)) for c, col in enumerate(grid.columns)], value=None),
            *empty_cell,
            folder,
            *buttons,
        )

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
        quotes = cell.quotes
        picker = gr.Dropdown(choices=quote_choices(quotes), value=None)
        if not quotes:
            return cell_html(grid, r, c), picker, None, "No quote to show on a page."
        try:
            index = (
                choice_index(q, len(quotes))
                if q is not None
                else next((i for i, quote in enumerate(quotes) if quote.verified), 0)
            )
            picker = gr.Dropdown(choices=quote_choices(quotes), value=str(index))
            image, caption = self.room.quote_page(grid, coll, r, quotes[index], password, request, matter)
        except DocpipeError as exc:
            return cell_html(grid, r, c), picker, None, f"**Page not shown:** {html.escape(str(exc))}"
        except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
            logger.exception("showing a cell's page failed")
            return cell_html(grid, r, c), picker, None, "**Page not shown:** unexpected error (see the server log)"
        return cell_html(grid, r, c), picker, image, caption

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
