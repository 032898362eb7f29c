"""The workbench's event handlers: ingest uploads, fill the pickers, answer (streamed), answer a batch, run the
checklist. One `Workbench` per app, over one `DocPipe`; everything a browser session owns (its documents, its
report folder) arrives as Gradio state, so sessions never share documents.
"""

from __future__ import annotations

import contextlib
import html
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import Request as GradioRequest

from docpipe import (
    CHECKLIST,
    Answer,
    Citation,
    DocPipe,
    DocpipeError,
    Document,
    MatterStore,
    PasswordRequiredError,
    WrongPasswordError,
)
from docpipe.names import clean_upload_name
from docpipe.types import OWN_MATTER
from docpipe.ui.access import WorkbenchAccess
from docpipe.ui.choices import (
    BUSY,
    COLLECTION_PREFIX,
    MAX_BATCH_QUESTIONS,
    MAX_CITATIONS_SHOWN,
    MAX_SESSION_DOCS,
    MODES,
    SPACE_PREFIX,
    checked_question,
    choice_index,
    citation_choices,
    document_choices,
    pickers,
)
from docpipe.ui.pageview import show_citation
from docpipe.ui.progress import UploadProgress, batches
from docpipe.ui.render import (
    REPORT_FORMATS,
    answer_html,
    citation_rows,
    describe_collection,
    describe_doc,
    describe_error,
    error_html,
    report_rows,
    report_summary,
    source_html,
    streaming_html,
    write_report_files,
)
from docpipe.ui.uploads import UploadRefused, UploadTooLarge, read_upload, remove_upload

__all__ = ["STREAM_INTERVAL_S", "Workbench"]

logger = logging.getLogger(__name__)

# A streamed answer updates the page at most this often: enough to read along, little work per token.
STREAM_INTERVAL_S = 0.1


class Workbench:
    """The event handlers of one workbench app. Each takes the session's state and, last, Gradio's request
    (who is logged in), and returns the components' new values; errors become messages on the page.
    `demo` is set once the app's Blocks exist (uploads are checked against its upload folder)."""

    def __init__(self, dp: DocPipe, access: WorkbenchAccess, *, max_bytes: int, max_pages: int) -> None:
        self.dp = dp
        self.access = access
        self.max_bytes = max_bytes
        self.max_pages = max_pages
        self.demo: Any = None

    def ingest(
        self,
        files: list[str] | str | None,
        password: str,
        docs: dict[str, Document] | None,
        matter: str | None,
        request: GradioRequest,
        space: str | None = None,
        progress: Any = gr.Progress(),  # noqa: B008 - Gradio finds the progress parameter by this default
    ):
        docs = dict(docs or {})
        paths = [files] if isinstance(files, str) else list(files or [])
        steps = UploadProgress(progress, total=len(paths))
        results: list[str] = []
        last: str | None = None
        # Uploads a password could still open stay in the picker (and on disk) for another try.
        pending: list[str] = []
        try:
            principal = self.access.principal(request)
            if principal is not None:
                self.access.check(principal, matter, "write", action="upload")
        except DocpipeError as exc:
            return describe_error("upload", str(exc)), docs, *[gr.Dropdown() for _ in range(3)], files
        if not paths:
            results.append(describe_error("no file", "choose one or more PDF files first"))
        for number, path in enumerate(paths):
            # Gradio's own upload cache path; the user's name is kept for display only.
            name = clean_upload_name(getattr(path, "name", path))
            doc, line, retry = self._ingest_upload(
                path,
                name,
                password=password,
                principal=principal,
                matter=matter,
                request=request,
                stage=steps.file(number, name),
            )
            results.append(line)
            if retry:
                pending.append(path)
            if doc is None:
                continue
            if principal is not None:
                self.access.added(principal, matter, doc, name)  # type: ignore[arg-type]  # checked above
            else:
                docs.pop(doc.id, None)
                docs[doc.id] = doc
                while len(docs) > MAX_SESSION_DOCS:
                    docs.pop(next(iter(docs)))
            self.access.record(request, matter, "upload", doc.id)
            last = doc.id
        choices = self.access.documents(principal, matter) if principal is not None else document_choices(docs)
        value = last or (choices[-1][1] if choices else None)
        return (
            "".join(results),
            docs,
            *pickers(choices, value, self.collection_names(principal, matter, space)),
            pending or None,
        )

    def _ingest_upload(
        self,
        path: str,
        name: str,
        *,
        password: str,
        principal: Any,
        matter: str | None,
        request: GradioRequest,
        stage: Any,
    ) -> tuple[Document | None, str, bool]:
        """Returns the document ingested from one upload (None when refused), the line that reports it, and
        whether the upload stays for another try with a password; any other upload leaves Gradio's cache."""
        upload_root = self.demo.GRADIO_CACHE
        try:
            # Only what this app's upload route stored: a path from an API call is never opened.
            data = read_upload(
                path, uploaded=self.demo.upload_file_set, upload_root=upload_root, max_bytes=self.max_bytes
            )
        except UploadRefused as exc:
            if isinstance(exc, UploadTooLarge):  # a real upload, of no use: it goes
                remove_upload(path, upload_root=upload_root)
            return None, describe_error(name, str(exc)), False
        except OSError as exc:
            logger.warning("reading an upload failed: %s", exc.strerror)
            return None, describe_error(name, "the upload could not be read: upload it again"), False
        keep = False
        try:
            owner = principal.user if principal is not None else None
            secret = password or None
            doc = self.dp.ingest(
                data, password=secret, name=name, owner=owner, progress=stage, embed_progress=batches(stage)
            )
            if len(doc.pages) > self.max_pages:
                return (
                    None,
                    describe_error(
                        name,
                        f"the document has {len(doc.pages)} pages, over the limit of {self.max_pages}: "
                        "split it or ask the administrator to raise --max-pages",
                    ),
                    False,
                )
        except (PasswordRequiredError, WrongPasswordError) as exc:
            keep = True
            return (
                None,
                describe_error(name, f"{exc} - here: type the password in the Password field and click Ingest again"),
                True,
            )
        except DocpipeError as exc:
            self.access.record(request, matter, "upload", outcome=type(exc).__name__)
            return None, describe_error(name, str(exc)), False
        except Exception:  # noqa: BLE001 - one bad file must not cost the others their result
            logger.exception("ingesting %s failed", name)
            return None, describe_error(name, "unexpected error while reading this file (see the server log)"), False
        finally:
            # The bytes are in docpipe's store (by content hash) or refused for good: Gradio's copy of
            # the contract must not linger in its cache.
            if not keep:
                remove_upload(path, upload_root=upload_root)
        return doc, describe_doc(doc), False

    def collection_names(self, principal: Any, matter: str | None, space: str | None) -> list[str]:
        """Returns the names of the collections the session may ask: its matter's (keys) or its own."""
        if principal is not None:
            return self.access.collections(principal, matter)
        return [c.name for c in self.dp.collections(matter=space)] if space else []

    def collection(self, name: str, matter: str | None, space: str | None, request: Any, role: str) -> Any:
        """Returns the collection `name` of the user's matter (with `role` there) or of the session's space."""
        principal = self.access.principal(request)
        if principal is not None:
            where = self.access.check(principal, matter, role, action="collection")
        elif space:
            where = space
        else:
            raise DocpipeError("this page has no session yet: reload it")
        return self.dp.collection(name, matter=where)

    def ingest_collection(
        self,
        files: list[str] | str | None,
        password: str,
        docs: dict[str, Document] | None,
        matter: str | None,
        name: str | None,
        space: str | None,
        request: GradioRequest,
        progress: Any = gr.Progress(),  # noqa: B008 - Gradio finds the progress parameter by this default
    ):
        """Adds the uploads to the collection `name` (created if new): one report line per file, then the
        pickers with the collection chosen. With API keys the documents join the matter too."""
        docs = dict(docs or {})
        paths = [files] if isinstance(files, str) else list(files or [])
        name = (name or "").strip()
        keep = [gr.Dropdown() for _ in range(3)]
        upload_root = self.demo.GRADIO_CACHE
        try:
            principal = self.access.principal(request)
            if not name:
                raise DocpipeError("name the collection first (e.g. deal-x): it is created if new")
            coll = self.collection(name, matter, space, request, "write")
            if not paths:
                raise DocpipeError("choose one or more PDF files first")
        except DocpipeError as exc:
            return describe_error(name or "collection", str(exc)), docs, *keep, None
        lines: list[str] = []
        folder = Path(tempfile.mkdtemp(prefix="docpipe-collection-"))  # 0700; the files carry their names
        try:
            spooled: list[Path] = []
            for number, path in enumerate(paths):
                label = clean_upload_name(getattr(path, "name", path))
                try:
                    data = read_upload(
                        path, uploaded=self.demo.upload_file_set, upload_root=upload_root, max_bytes=self.max_bytes
                    )
                except UploadRefused as exc:
                    if isinstance(exc, UploadTooLarge):  # a real upload, of no use: it goes
                        remove_upload(path, upload_root=upload_root)
                    lines.append(describe_error(label, str(exc)))  # any other path may be anyone's file
                    continue
                remove_upload(path, upload_root=upload_root)
                target = folder / str(number) / label.encode()[:200].decode(errors="ignore")
                target.parent.mkdir(mode=0o700)
                target.write_bytes(data)
                spooled.append(target)
            owner = principal.user if principal is not None else None
            steps = UploadProgress(progress, total=len(spooled))
            steps.begin(f"{coll.name}: extracting {len(spooled)} file(s), then embedding their passages")
            report = coll.add(spooled, password=password or None, owner=owner, progress=steps.collection_step)
        except DocpipeError as exc:
            lines.append(describe_error(name, str(exc)))
            return "".join(lines), docs, *keep, None
        except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
            logger.exception("adding to a collection failed")
            return (
                describe_error(name, "unexpected error while adding the files (see the server log)"),
                docs,
                *keep,
                None,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        for member in report.added:
            if member.pages > self.max_pages:
                coll.remove(member.id)
                report.failed.append((member.name, f"{member.pages} pages, over the limit of {self.max_pages}"))
                continue
            if principal is not None:
                self.access.added(principal, matter, self.dp.document(member.id, authorized=True), member.name)  # type: ignore[arg-type]
            self.access.record(request, matter, "collection_add", member.id)
        kept = [m for m in report.added if m.pages <= self.max_pages]
        lines.insert(0, describe_collection(coll.name, len(kept), len(report.present), len(report.failed) + len(lines)))
        lines += [f'<div class="dp-ok">&#10003; {html.escape(m.name)}: {m.pages} pages</div>' for m in kept]
        lines += [describe_error(file, reason) for file, reason in report.failed]
        choices = self.access.documents(principal, matter) if principal is not None else document_choices(docs)
        # Nothing added to a new collection leaves none to choose.
        value = COLLECTION_PREFIX + coll.name if coll.exists else None
        return "".join(lines), docs, *pickers(choices, value, self.collection_names(principal, matter, space)), None

    def forget_space(self, space: str | None) -> None:
        """Deletes a browser session's own collections (no API keys); Gradio calls it when the session ends."""
        if not space or not space.startswith(SPACE_PREFIX):
            return
        for coll in self.dp.collections(matter=space):
            coll.delete()
        MatterStore(self.dp.store.root).delete_matter(space)

    def on_load(self, request: GradioRequest):
        # With API keys: the user's matters, the first one chosen, its documents in the pickers.
        if not self.access.keyed:  # one user: the store's own matter, its documents and collections
            principal = self.access.principal(request)
            return (
                gr.Dropdown(choices=[OWN_MATTER], value=OWN_MATTER, visible=False),
                *pickers(
                    self.access.documents(principal, OWN_MATTER), None, self.access.collections(principal, OWN_MATTER)
                ),
                None,
            )
        try:
            principal = self.access.principal(request)
        except DocpipeError:
            return gr.Dropdown(choices=[], value=None, visible=True), *pickers([], None), None
        assert principal is not None
        matters = self.access.matter_choices(principal)
        value = matters[0] if matters else None
        return (
            gr.Dropdown(choices=matters, value=value, visible=True),
            *pickers(self.access.documents(principal, value), None, self.access.collections(principal, value)),
            None,
        )

    def on_matter(
        self, matter: str | None, docs: dict[str, Document] | None, space: str | None, request: GradioRequest
    ):
        try:
            principal = self.access.principal(request)
        except DocpipeError:
            return pickers([], None)
        choices = (
            self.access.documents(principal, matter) if principal is not None else document_choices(dict(docs or {}))
        )
        return pickers(choices, None, self.collection_names(principal, matter, space))

    def _target(
        self, docs: dict[str, Document] | None, doc_id: str | None, matter: str | None, request: Any, space: str | None
    ) -> Any:
        """Returns the document, or the collection, the picker names."""
        if doc_id and doc_id.startswith(COLLECTION_PREFIX):
            coll = self.collection(doc_id.removeprefix(COLLECTION_PREFIX), matter, space, request, "read")
            if not coll.exists:
                raise DocpipeError("choose a collection of this matter from the list first")
            return coll
        return self._doc(docs, doc_id, matter, request)

    def _doc(self, docs: dict[str, Document] | None, doc_id: str | None, matter: str | None, request: Any) -> Document:
        principal = self.access.principal(request)
        if principal is not None:
            return self.access.open(principal, matter, doc_id)
        if not docs:
            raise DocpipeError("no document yet: upload a PDF in the Upload tab first")
        if not doc_id or doc_id not in docs:
            raise DocpipeError("choose a document from the list first")
        return docs[doc_id]

    def ask(
        self,
        docs: dict[str, Document] | None,
        doc_id: str | None,
        question: str,
        mode: str,
        matter: str | None,
        request: GradioRequest,
        space: str | None = None,
    ):
        # A generator: the answer box fills as the engine streams (thinking into the Thinking accordion),
        # then the citations, the source panel and the citation picker of the page view arrive with the
        # finished answer. The citations (with their documents' ids) stay on the server, in session state.
        answer: Answer | None = None
        thinking = text = ""
        no_cites: tuple[list[dict[str, Any]], Any] = ([], gr.Dropdown(choices=[], value=None))
        try:
            doc = self._target(docs, doc_id, matter, request, space)
            question = checked_question(question)
            self.access.record(request, matter, "ask", getattr(doc, "id", None), [question])
            # Each question starts with the thinking collapsed; later updates leave it as the user set it.
            yield streaming_html(""), [], gr.Accordion(visible=False, open=False), "", "", *no_cites
            last = time.monotonic()
            with contextlib.closing(
                self.dp.ask_stream(doc, question, mode=mode if mode in MODES else "auto")
            ) as events:
                for event in events:
                    if event.kind == "done":
                        answer = event.answer
                        continue
                    if event.kind == "thinking":
                        thinking += event.text
                    else:
                        text += event.text
                    if time.monotonic() - last >= STREAM_INTERVAL_S:
                        last = time.monotonic()
                        yield (
                            streaming_html(text, thinking=bool(thinking)),
                            [],
                            gr.Accordion(visible=bool(thinking)),
                            thinking,
                            "",
                            gr.skip(),
                            gr.skip(),
                        )
            if answer is None:
                raise DocpipeError("the engine finished without an answer: ask again")
        except DocpipeError as exc:
            message = f"{BUSY} ({exc})" if isinstance(exc, ConnectionError) else str(exc)
            yield error_html(message), [], gr.Accordion(visible=False), "", "", *no_cites
            return
        except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
            logger.exception("answering failed")
            yield (
                error_html("unexpected error while answering (see the server log)"),
                [],
                gr.Accordion(visible=False),
                "",
                "",
                *no_cites,
            )
            return
        thinking = answer.thinking or ""
        cites = [c.to_dict() for c in answer.citations[:MAX_CITATIONS_SHOWN]]
        yield (
            answer_html(answer),
            citation_rows(answer),
            gr.Accordion(visible=bool(thinking)),
            thinking,
            self._source(doc, answer),
            cites,
            gr.Dropdown(choices=citation_choices(answer.citations[:MAX_CITATIONS_SHOWN]), value=None),
        )

    def ask_page(
        self,
        docs: dict[str, Document] | None,
        doc_id: str | None,
        cites: list[dict[str, Any]] | None,
        choice: str | None,
        password: str | None,
        matter: str | None,
        request: GradioRequest,
        space: str | None = None,
    ):
        """Returns the page of the chosen citation of the last answer, its quote marked, and the caption. The
        citation comes from the session's state; its document must be the one asked (or a member of the
        collection asked) and one the user may read now."""
        try:
            index = choice_index(choice, len(cites or []))
            citation = Citation.from_dict((cites or [])[index])
            target = self._target(docs, doc_id, matter, request, space)
            if isinstance(target, Document):
                if citation.document_id and citation.document_id != target.id:
                    raise DocpipeError("this citation is of another document: ask the question again")
                doc = target
            else:
                if not citation.document_id:
                    raise DocpipeError("this citation does not say which document it quotes")
                doc = target.document(citation.document_id, password=password or None)
            view = show_citation(self.dp, doc, citation, password=password or None)
            self.access.record(request, matter, "page", doc.id)
        except DocpipeError as exc:
            return None, f"**Page not shown:** {html.escape(str(exc))}"
        except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
            logger.exception("showing a cited page failed")
            return None, "**Page not shown:** unexpected error (see the server log)"
        return view.image(), view.caption

    def ask_page_select(
        self,
        docs: dict[str, Document] | None,
        doc_id: str | None,
        cites: list[dict[str, Any]] | None,
        password: str | None,
        matter: str | None,
        space: str | None,
        evt: gr.SelectData,
        request: GradioRequest,
    ):
        """A click on a row of the citations table: that citation's page (and the picker set to it)."""
        row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        choice = str(row) if isinstance(row, int) else None
        image, caption = self.ask_page(docs, doc_id, cites, choice, password, matter, request, space)
        return gr.Dropdown(value=choice) if image is not None else gr.skip(), image, caption

    @staticmethod
    def _source(target: Any, answer: Answer) -> str:
        """Returns the source panel: over a collection, the first cited document's section."""
        if isinstance(target, Document):
            return source_html(target, answer)
        cited = next((c.document_id for c in answer.citations if c.document_id), None)
        try:
            if cited:
                return source_html(target.document(cited), answer)
        except DocpipeError:
            pass
        return "<p><i>No cited section to show.</i></p>"

    def ask_batch(
        self,
        docs: dict[str, Document] | None,
        doc_id: str | None,
        text: str,
        mode: str,
        matter: str | None,
        request: GradioRequest,
        space: str | None = None,
    ):
        try:
            doc = self._target(docs, doc_id, matter, request, space)
            questions = [line.strip() for line in (text or "").splitlines() if line.strip()]
            if not questions:
                raise DocpipeError("no questions: paste one question per line")
            if len(questions) > MAX_BATCH_QUESTIONS:
                raise DocpipeError(f"{len(questions)} questions; at most {MAX_BATCH_QUESTIONS} per batch")
            for question in questions:
                checked_question(question)
            self.access.record(request, matter, "ask", getattr(doc, "id", None), questions)
            answers = self.dp.ask_many(doc, questions, mode=mode if mode in MODES else "auto")
        except DocpipeError as exc:
            return (f"{BUSY} ({exc})" if isinstance(exc, ConnectionError) else str(exc)), []
        except Exception:  # noqa: BLE001
            logger.exception("batch answering failed")
            return "unexpected error while answering (see the server log)", []
        rows = [
            [a.question, a.text, ", ".join(dict.fromkeys(c.pages for c in a.citations if c.page_start)) or "-"]
            for a in answers
        ]
        return f"{len(rows)} answers.", rows

    def analyze(
        self,
        docs: dict[str, Document] | None,
        doc_id: str | None,
        categories: list[str] | None,
        mode: str,
        folder: str | None,
        matter: str | None,
        request: GradioRequest,
    ):
        hidden = [gr.DownloadButton(visible=False) for _ in REPORT_FORMATS]
        try:
            doc = self._doc(docs, doc_id, matter, request)
            self.access.record(request, matter, "analyze", doc.id, list(categories or []))
            known = {c.name for c in CHECKLIST}
            chosen = [name for name in categories or [] if name in known] or None
            report = self.dp.analyze(doc, chosen, mode=mode if mode in MODES else "think")
            # The session's own folder (never a path from the request); Gradio serves copies from its cache.
            if not folder or not os.path.isdir(folder):
                folder = tempfile.mkdtemp(prefix="docpipe-ui-")
            paths = write_report_files(report, Path(folder))
        except DocpipeError as exc:
            message = f"{BUSY} ({exc})" if isinstance(exc, ConnectionError) else str(exc)
            return f"**Error:** {html.escape(message)}", [], folder, *hidden
        except Exception:  # noqa: BLE001
            logger.exception("contract analysis failed")
            return "**Error:** unexpected error during the analysis (see the server log)", [], folder, *hidden
        buttons = [
            gr.DownloadButton(f"Download {label}", value=str(path), visible=True)
            for (_suffix, label), path in zip(REPORT_FORMATS, paths)
        ]
        return report_summary(report), report_rows(report), folder, *buttons
