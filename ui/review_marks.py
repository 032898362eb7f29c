"""Reviewer marks in the Data room's grid: the open cell marked accepted, corrected (with the corrected value)
or flagged, with a comment; or its mark cleared. Marks are kept per matter by `docpipe.review.marks.MarkStore`
(who and when with each), keyed by document and column, so a rerun of the grid shows them again (`DocPipe.review`
attaches them to the grid, and every export shows them); each one set or cleared is an access-log line. The matter is the grid's collection's, found again through the same check
a run passes (`DataRoom.checked_grid`): a user marks only a grid of a collection they may read now.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import gradio as gr
from gradio import Request as GradioRequest

from docpipe import DocpipeError
from docpipe.review.marks import (
    DEFAULT_MATTER,
    MARK_LABELS,
    MARK_STATUSES,
    MAX_COMMENT_CHARS,
    MAX_VALUE_CHARS,
    Mark,
    MarkStore,
)
from docpipe.ui.choices import choice_index
from docpipe.ui.review_render import cell_html, grid_table

if TYPE_CHECKING:
    from docpipe import Collection, ReviewGrid
    from docpipe.ui.dataroom import DataRoom

__all__ = ["MarksPanel", "marks_matter"]


def marks_matter(coll: Collection) -> str:
    """Returns the matter a collection's marks are kept in: its own, or the store's (``default``)."""
    return coll.matter or DEFAULT_MATTER


class MarksPanel:
    """The mark controls under the open cell, and the marks a grid shows, over the Data room's checks."""

    def __init__(self, room: DataRoom) -> None:
        self.room = room
        self.access = room.access
        self.store = MarkStore.of(room.dp.store)

    @staticmethod
    def layout() -> dict[str, Any]:
        """Lays the controls out (under the open cell): the mark, the corrected value, the comment, Save, Clear."""
        with gr.Group(elem_id="dr-mark-box"):
            with gr.Row():
                status = gr.Radio(
                    [(MARK_LABELS[s], s) for s in MARK_STATUSES],
                    value=None,
                    label="Mark the open cell",
                    elem_id="dr-mark",
                    scale=2,
                )
                value = gr.Textbox(
                    label="Corrected value (with Corrected)",
                    max_length=MAX_VALUE_CHARS,
                    elem_id="dr-mark-value",
                    scale=2,
                )
            comment = gr.Textbox(label="Comment", lines=2, max_length=MAX_COMMENT_CHARS, elem_id="dr-mark-comment")
            with gr.Row():
                save = gr.Button("Save mark", elem_id="dr-mark-save", size="sm")
                clear = gr.Button("Clear mark", elem_id="dr-mark-clear", size="sm")
            result = gr.Markdown(elem_id="dr-mark-result")
        return {
            "mark_status": status,
            "mark_value": value,
            "mark_comment": comment,
            "mark_save": save,
            "mark_clear": clear,
            "mark_result": result,
        }

    def of_rows(self, coll: Collection, document_ids: Iterable[str]) -> dict[tuple[str, str], Mark]:
        """Returns the marks of the collection's matter for these documents, by (document id, column key)."""
        return self.store.marks(marks_matter(coll), [d for d in document_ids if d])

    def of_cell(self, grid: ReviewGrid, coll: Collection, r: int, c: int) -> Mark | None:
        """Returns the mark of the grid's cell (row `r`, column `c`), or None."""
        row = grid.rows[r]
        if not row.document_id:
            return None
        return self.of_rows(coll, [row.document_id]).get((row.document_id, grid.columns[c].key))

    def save(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        status: str | None,
        value: str | None,
        comment: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ) -> tuple[Any, Any, Any]:
        """Marks the open cell; returns what it says, the table with the mark shown and the cell's reading."""
        return self._change(state, r, c, status or "", value, comment, matter, space, request)

    def clear(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        matter: str | None,
        space: str | None,
        request: GradioRequest,
    ) -> tuple[Any, Any, Any]:
        """Clears the open cell's mark; returns what it says, the table and the cell's reading."""
        return self._change(state, r, c, None, None, None, matter, space, request)

    def _change(
        self,
        state: Any,
        r: str | None,
        c: str | None,
        status: str | None,
        value: str | None,
        comment: str | None,
        matter: str | None,
        space: str | None,
        request: Any,
    ) -> tuple[Any, Any, Any]:
        try:
            grid, coll = self.room.checked_grid(state, matter, space, request)
            if r is None or c is None:
                raise DocpipeError("open a cell first: click it in the grid")
            row, column = choice_index(r, len(grid.rows)), choice_index(c, len(grid.columns))
            doc_id, key = grid.rows[row].document_id, grid.columns[column].key
            if not doc_id:
                raise DocpipeError("this row's document could not be read: there is nothing to mark")
            where = marks_matter(coll)
            if status is None:
                had = self.store.clear(where, doc_id, key)
                said = "Mark cleared." if had else "This cell had no mark."
                action = "mark_clear"
            else:
                if status not in MARK_STATUSES:
                    raise DocpipeError("choose Accepted, Corrected or Flagged first")
                mark = self.store.set(
                    where,
                    doc_id,
                    key,
                    status=status,
                    user=self.access.user(request),
                    value=((value or "").strip() or None) if status == "corrected" else None,
                    comment=(comment or "").strip(),
                )
                said = f"Marked {mark.label.lower()}" + (f": {html.escape(mark.value)}" if mark.value else "") + "."
                action = f"mark_{status}"
            self.access.record(request, where, action, doc_id, [key])
        except DocpipeError as exc:  # ConfigError (the mark's checks) is one: its message says what to change
            return f"**Not marked:** {html.escape(str(exc))}", gr.skip(), gr.skip()
        # The session's grid holds the marks as they are now: its table and its downloads show them.
        grid.attach_marks(self.of_rows(coll, [r_.document_id for r_ in grid.rows]))
        return said, grid_table(grid), cell_html(grid, row, column, grid.marks.get((doc_id, key)))
