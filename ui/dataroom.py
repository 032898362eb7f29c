"""What the Data room tab's views (the review grid, `docpipe.ui.review_tab`; the key terms,
`docpipe.ui.terms_view`; the playbook, `docpipe.ui.playbook_view`) share: the collection a user may read now,
the session's finished grid checked again before a cell of it is opened, a quote's page with the quote marked,
and a grid run in a worker thread whose table is redrawn as its cells finish."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

import gradio as gr

from docpipe import Citation, DocpipeError, ReviewGrid, ReviewProgress
from docpipe.ui.pageview import show_citation
from docpipe.ui.review_render import progress_table

if TYPE_CHECKING:
    from docpipe import Collection
    from docpipe.ui.handlers import Workbench

__all__ = ["MAX_GRID_CELLS", "DataRoom", "streamed_review"]

# Documents x columns of one grid run from the page; a bigger data room is a job for `docpipe review`.
MAX_GRID_CELLS = 10_000

T = TypeVar("T")  # what a run gives: a review grid, or a playbook report read from one


def streamed_review(
    review: Callable[..., T],
    names: list[str],
    columns: list[str],
    *,
    skipped: int,
    interval: float,
    first: str = "Document",
) -> Generator[tuple[Any, ...], None, tuple[T | None, BaseException | None]]:
    """Runs `review` in a worker thread, yielding the status line and the table as cells finish (at most every
    `interval` seconds; the `skipped` other outputs left as they are); returns what `review` returned (the
    grid, or a playbook's report), or None and the error it raised. Closing the generator (the page went away,
    or Stop) cancels the grid between batches; cells done stay cached."""
    events: queue.Queue[ReviewProgress | None] = queue.Queue()
    cancel = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["grid"] = review(progress=events.put, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the generator, which reports it
            outcome["error"] = exc
        finally:
            events.put(None)

    worker = threading.Thread(target=work, name="docpipe-ui-review", daemon=True)
    done: dict[tuple[int, int], str] = {}
    last = time.monotonic()
    try:
        worker.start()
        while True:
            event = events.get()
            if event is None:
                break
            if event.cell is not None:
                done[(event.row, event.column)] = event.cell.text
            if time.monotonic() - last >= interval:
                last = time.monotonic()
                line = f"Running: {event.done} / {event.total} cells done"
                if event.cached:
                    line += f" ({event.cached} from the cache)"
                yield line, progress_table(names, columns, done, first=first), *[gr.skip()] * skipped
        worker.join()
    finally:
        cancel.set()  # the page went away mid-grid: stop between batches (cells done stay cached)
    return outcome.get("grid"), outcome.get("error")


class DataRoom:
    """The Data room's checks over the app's `Workbench`: which collection a session may read now, and which
    finished grid's cells it may open."""

    def __init__(self, wb: Workbench) -> None:
        self.wb = wb
        self.dp = wb.dp
        self.access = wb.access

    def open_collection(self, name: str | None, matter: str | None, space: str | None, request: Any) -> Collection:
        """Returns the collection `name` the user may read now (their matter's, or the session's own)."""
        if not name:
            raise DocpipeError("choose a collection first, or add PDFs to a new one")
        coll = self.wb.collection(name, matter, space, request, "read")
        if not coll.exists:
            raise DocpipeError(f"there is no collection {name!r} here: choose one from the list")
        return coll

    def checked_grid(
        self, state: Any, matter: str | None, space: str | None, request: Any
    ) -> tuple[ReviewGrid, Collection]:
        """Returns the session's finished grid and its collection, checked to be one the user may read now."""
        if not isinstance(state, dict) or not isinstance(state.get("grid"), ReviewGrid):
            raise DocpipeError("run a grid first")
        if self.access.keyed and state.get("matter") != matter:
            raise DocpipeError("this grid was run in another matter: run it again here")
        return state["grid"], self.open_collection(state.get("collection"), matter, space, request)

    def quote_page(
        self,
        grid: ReviewGrid,
        coll: Collection,
        r: int,
        quote: Citation,
        password: str | None,
        request: Any,
        matter: Any,
    ) -> tuple[Any, str]:
        """Returns the quote's page image and caption; the row's document must be in the collection."""
        return self.document_page(coll, grid.rows[r].document_id, quote, password, request, matter)

    def document_page(
        self, coll: Collection, document_id: str, quote: Citation, password: str | None, request: Any, matter: Any
    ) -> tuple[Any, str]:
        """Returns the page image and caption of `quote` in the document `document_id`, which must be in the
        collection; the page view is written to the access log."""
        doc = coll.document(document_id, password=password or None)
        view = show_citation(self.dp, doc, quote, password=password or None)
        self.access.record(request, matter, "page", doc.id)
        return view.image(), view.caption
