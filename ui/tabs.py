"""The workbench's Upload, Ask, Batch and Contract analysis tabs: each laid out by ``build`` (inside the
`gr.Blocks` of `docpipe.ui.app.build_app`) and its events wired by ``wire``, once every tab exists (an upload
refreshes the other tabs' document pickers; the Ask tab's page view reads the Upload tab's password).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from docpipe import CHECKLIST
from docpipe.ui.choices import MODES, offer_thinking
from docpipe.ui.handlers import Workbench
from docpipe.ui.render import REPORT_FORMATS

__all__ = ["AnalysisTab", "AskTab", "BatchTab", "Session", "UploadTab"]


@dataclass
class Session:
    """The state every tab's events read: the session's documents, its collection space, its report folder
    and the matter picked (with API keys)."""

    docs: Any
    space: Any
    report_folder: Any
    matter: Any


@dataclass
class UploadTab:
    """The Upload tab: files, the password for encrypted PDFs, and an optional collection to add them to."""

    files: Any
    password: Any
    ingest_btn: Any
    collection: Any
    collection_btn: Any
    result: Any

    @classmethod
    def build(cls, *, max_upload_mb: float, max_pages: int) -> UploadTab:
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
            result = gr.HTML(elem_id="upload-result")
        return cls(files, password, ingest_btn, collection, collection_btn, result)

    def wire(self, wb: Workbench, session: Session, pickers: list[Any], *, concurrency: int) -> None:
        # Extraction runs a worker process per document: fewer at once than questions.
        outputs = [self.result, session.docs, *pickers, self.files]
        self.ingest_btn.click(
            wb.ingest,
            [self.files, self.password, session.docs, session.matter, session.space],
            outputs,
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="ingest",
            api_name="ingest",
            show_progress_on=self.result,  # the file and its stage (docpipe.ui.progress), over the result
        )
        self.collection_btn.click(
            wb.ingest_collection,
            [self.files, self.password, session.docs, session.matter, self.collection, session.space],
            outputs,
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="ingest",
            api_name="ingest_collection",
            show_progress_on=self.result,  # the file and its stage (docpipe.ui.progress), over the result
        )


@dataclass
class AskTab:
    """The Ask tab: one question, its answer with citations, and a cited page with its quote marked."""

    doc: Any
    question: Any
    mode: Any
    ask_btn: Any
    answer: Any
    thinking_box: Any
    thinking: Any
    citations: Any
    source: Any
    cites: Any
    cite_pick: Any
    page: Any
    page_caption: Any

    @classmethod
    def build(cls) -> AskTab:
        with gr.Tab("Ask", id="ask"):
            doc = gr.Dropdown(label="Document", choices=[], elem_id="ask-doc")
            question = gr.Textbox(
                label="Question",
                lines=2,
                elem_id="question",
                placeholder="What is the notice period for termination for convenience?",
            )
            # Shown once the page knows a language model answers (`offer_thinking`).
            mode = gr.Radio(MODES, value="auto", label="Thinking mode", visible=False, elem_id="mode")
            ask_btn = gr.Button("Ask", variant="primary", elem_id="ask-btn")
            answer = gr.HTML(elem_id="answer-text")
            with gr.Accordion("Thinking", open=False, visible=False, elem_id="thinking") as thinking_box:
                thinking = gr.Textbox(show_label=False, lines=8, interactive=False, elem_id="thinking-text")
            citations = gr.Dataframe(
                headers=["document", "heading", "pages", "quote", "verified"],
                datatype="str",
                interactive=False,
                wrap=True,
                label="Citations",
                elem_id="citations",
                column_widths=["16%", "18%", "8%", "50%", "8%"],
            )
            source = gr.HTML(label="Source", elem_id="source-panel")
            # The last answer's citations, with their documents' ids: kept on the server, never sent to the page.
            cites = gr.State([])
            with gr.Accordion("Cited page", open=True, elem_id="ask-page-box"):
                cite_pick = gr.Dropdown(
                    label="Show a citation on its page (or click a row of Citations)", choices=[], elem_id="ask-cite"
                )
                page = gr.Image(show_label=False, type="pil", format="png", interactive=False, elem_id="ask-page")
                page_caption = gr.Markdown(elem_id="ask-page-caption")
        return cls(
            doc,
            question,
            mode,
            ask_btn,
            answer,
            thinking_box,
            thinking,
            citations,
            source,
            cites,
            cite_pick,
            page,
            page_caption,
        )

    def wire(self, wb: Workbench, session: Session, *, password: Any) -> None:
        ask_event = dict(
            fn=wb.ask,
            inputs=[session.docs, self.doc, self.question, self.mode, session.matter, session.space],
            outputs=[
                self.answer,
                self.citations,
                self.thinking_box,
                self.thinking,
                self.source,
                self.cites,
                self.cite_pick,
            ],
        )
        offer_thinking(wb, self.mode)
        self.ask_btn.click(**ask_event, api_name="ask")
        self.question.submit(**ask_event, api_name=False)
        # The page view: the password is the Upload tab's (an encrypted PDF's pages need it).
        self.cite_pick.input(
            wb.ask_page,
            [session.docs, self.doc, self.cites, self.cite_pick, password, session.matter, session.space],
            [self.page, self.page_caption],
            api_name=False,
        )
        self.citations.select(
            wb.ask_page_select,
            [session.docs, self.doc, self.cites, password, session.matter, session.space],
            [self.cite_pick, self.page, self.page_caption],
            api_name=False,
        )


@dataclass
class BatchTab:
    """The Batch tab: many questions of one document, one engine batch."""

    doc: Any
    questions: Any
    mode: Any
    button: Any
    status: Any
    answers: Any

    @classmethod
    def build(cls) -> BatchTab:
        with gr.Tab("Batch", id="batch"):
            doc = gr.Dropdown(label="Document", choices=[], elem_id="batch-doc")
            questions = gr.Textbox(label="Questions, one per line", lines=8, elem_id="batch-questions")
            mode = gr.Radio(MODES, value="auto", label="Thinking mode", visible=False, elem_id="batch-mode")
            button = gr.Button("Ask all", variant="primary", elem_id="batch-btn")
            status = gr.Markdown(elem_id="batch-status")
            answers = gr.Dataframe(
                headers=["question", "answer", "pages"],
                datatype="str",
                interactive=False,
                wrap=True,
                label="Answers",
                elem_id="batch-answers",
                column_widths=["30%", "60%", "10%"],
            )
        return cls(doc, questions, mode, button, status, answers)

    def wire(self, wb: Workbench, session: Session) -> None:
        offer_thinking(wb, self.mode)
        self.button.click(
            wb.ask_batch,
            [session.docs, self.doc, self.questions, self.mode, session.matter, session.space],
            [self.status, self.answers],
            api_name="batch",
        )


@dataclass
class AnalysisTab:
    """The Contract analysis tab: the clause checklist over a document, and its report to download."""

    doc: Any
    categories: Any
    mode: Any
    button: Any
    status: Any
    table: Any
    downloads: list[Any]

    @classmethod
    def build(cls) -> AnalysisTab:
        with gr.Tab("Contract analysis", id="analysis"):
            doc = gr.Dropdown(label="Document", choices=[], elem_id="analysis-doc")
            categories = gr.Dropdown(
                [c.name for c in CHECKLIST],
                value=[],
                multiselect=True,
                elem_id="analysis-categories",
                label=f"Categories (none chosen: all {len(CHECKLIST)} of the checklist)",
            )
            mode = gr.Radio(MODES, value="think", label="Thinking mode", visible=False, elem_id="analysis-mode")
            button = gr.Button("Run checklist", variant="primary", elem_id="analysis-btn")
            status = gr.Markdown(elem_id="analysis-status")
            table = gr.Dataframe(
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
        return cls(doc, categories, mode, button, status, table, downloads)

    def wire(self, wb: Workbench, session: Session, *, concurrency: int) -> None:
        offer_thinking(wb, self.mode)
        # A checklist is one engine batch of dozens of requests: a few at once leave room for questions.
        self.button.click(
            wb.analyze,
            [session.docs, self.doc, self.categories, self.mode, session.report_folder, session.matter],
            [self.status, self.table, session.report_folder, *self.downloads],
            concurrency_limit=max(1, min(4, concurrency)),
            concurrency_id="analysis",
            api_name="analyze",
        )
