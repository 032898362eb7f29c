"""The Data room tab's layout (`docpipe.ui.review_tab` wires its events): the collection and the add, the
password, and three views: the review grid (questions, the all-categories switch, the thinking mode, Run, the
legend and the table, the downloads, the open cell with its mark and its page), the key terms
(`docpipe.ui.terms_view`) and the playbook (`docpipe.ui.playbook_view`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from docpipe import CHECKLIST
from docpipe.ui.choices import MAX_QUESTION_CHARS, MODES
from docpipe.ui.playbook_view import PlaybookView
from docpipe.ui.review_marks import MarksPanel
from docpipe.ui.review_render import legend_html
from docpipe.ui.terms_view import TermsView
from docpipe.ui.uploads import remove_folder

__all__ = ["EXPORTS", "MAX_GRID_QUESTIONS", "MAX_QUESTIONS_TEXT", "Parts", "grid_layout", "layout"]

MAX_GRID_QUESTIONS = 50  # free questions per grid (checklist categories come on top: at most all 41)
MAX_QUESTIONS_TEXT = MAX_GRID_QUESTIONS * (MAX_QUESTION_CHARS + 1)  # the questions box, before it is split
EXPORTS = (("xlsx", "XLSX"), ("csv", "CSV"), ("json", "JSON"))


@dataclass
class Parts:
    """The Data room tab's components, as `layout` made them."""

    folder: Any
    grid_state: Any
    tab: Any
    collection: Any
    files: Any
    new_name: Any
    add_btn: Any
    add_result: Any
    adding: Any  # the page's token for its latest add (`docpipe.ui.progress.NEW_ADD_JS`)
    password: Any
    questions: Any
    categories: Any
    all_categories: Any
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
    mark_status: Any
    mark_value: Any
    mark_comment: Any
    mark_save: Any
    mark_clear: Any
    mark_result: Any
    terms: Any  # the Key terms view's components (`docpipe.ui.terms_view`)
    playbook: Any  # the Playbook view's components (`docpipe.ui.playbook_view`)


def layout() -> Parts:
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
            adding = gr.Textbox(visible=False, elem_id="dr-adding")
        password = gr.Textbox(
            label="Password (encrypted PDFs only: to add, review and show their pages)",
            type="password",
            elem_id="dr-password",
        )
        with gr.Tabs(elem_id="dr-views"):
            with gr.Tab("Review grid", id="dr-review-view"):
                grid = grid_layout()
            with gr.Tab("Key terms", id="dr-terms-view"):
                terms = TermsView.layout()
            with gr.Tab("Playbook", id="dr-playbook-view"):
                playbook = PlaybookView.layout()
    return Parts(
        folder=folder,
        grid_state=grid_state,
        tab=tab,
        collection=collection,
        files=files,
        new_name=new_name,
        add_btn=add_btn,
        add_result=add_result,
        adding=adding,
        password=password,
        terms=terms,
        playbook=playbook,
        **grid,
    )


def grid_layout() -> dict[str, Any]:
    """Lays the review grid's view out: its components, in page order."""
    questions = gr.Textbox(
        label=f"Questions, one per line (at most {MAX_GRID_QUESTIONS}); after :: what a cell holds, e.g. "
        "Which law governs?::jurisdiction",
        lines=4,
        max_length=MAX_QUESTIONS_TEXT,
        elem_id="dr-questions",
    )
    all_categories = gr.Checkbox(
        value=False, label=f"All {len(CHECKLIST)} checklist categories", elem_id="dr-all-categories"
    )
    categories = gr.CheckboxGroup(
        [c.name for c in CHECKLIST], value=[], label="Checklist categories", elem_id="dr-categories"
    )
    # Shown once the page knows a language model answers (`docpipe.ui.choices.offer_thinking`): offline it changes nothing.
    mode = gr.Radio(MODES, value="think", label="Thinking mode", visible=False, elem_id="dr-mode")
    run_btn = gr.Button("Run", variant="primary", elem_id="dr-run")
    status = gr.Markdown(elem_id="dr-status")
    gr.HTML(legend_html(), elem_id="dr-legend")
    table = gr.Dataframe(
        headers=["Document"],
        datatype="html",  # escaped by `docpipe.ui.review_render`: a status symbol, a name with its full title
        interactive=False,
        wrap=True,
        label="Review grid (click a cell to open it; typed columns sort and filter by value)",
        elem_id="dr-grid",
    )
    # Above the page view: a rendered page is ~1,000 px tall and would push them out of sight.
    with gr.Row():
        downloads = [
            gr.DownloadButton(f"Download {label}", visible=False, elem_id=f"dr-{suffix}") for suffix, label in EXPORTS
        ]
    with gr.Row():
        cell_doc = gr.Dropdown(label="Document", choices=[], elem_id="dr-cell-doc")
        cell_col = gr.Dropdown(label="Question", choices=[], elem_id="dr-cell-col")
        cell_quote = gr.Dropdown(label="Quote", choices=[], elem_id="dr-cell-quote")
    cell_out = gr.HTML(elem_id="dr-cell")
    marks = MarksPanel.layout()
    page_img = gr.Image(
        label="Page", type="pil", format="png", interactive=False, elem_id="dr-page", buttons=["fullscreen"]
    )
    page_caption = gr.Markdown(elem_id="dr-page-caption")
    return {
        **marks,
        "questions": questions,
        "categories": categories,
        "all_categories": all_categories,
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
