"""What the workbench's tabs share about their inputs: the limits on questions and documents, the picker values
(documents, collections, citations, a review cell's quotes) and the checks on what comes back from them."""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gradio as gr

from docpipe import Citation, DocpipeError, Document
from docpipe.answer.core import check_question
from docpipe.ui.render import doc_label

if TYPE_CHECKING:
    from docpipe import DocPipe

__all__ = [
    "BUSY",
    "COLLECTION_PREFIX",
    "open_quote",
    "MAX_BATCH_QUESTIONS",
    "MAX_CITATIONS_SHOWN",
    "MAX_QUESTION_CHARS",
    "MAX_SESSION_DOCS",
    "MODES",
    "SPACE_PREFIX",
    "checked_question",
    "choice_index",
    "citation_choices",
    "document_choices",
    "engine_thinks",
    "offer_thinking",
    "pickers",
    "quote_choices",
]

logger = logging.getLogger(__name__)

MODES = ["auto", "think", "no_think"]
MAX_QUESTION_CHARS = 2000
MAX_BATCH_QUESTIONS = 200
# Citations of one answer offered in the page view's picker.
MAX_CITATIONS_SHOWN = 50
# The session's own documents, by id; a Document holds its pages, so keep the picker to a sane size.
MAX_SESSION_DOCS = 32
BUSY = "The answer engine is busy or unreachable: please try again in a moment."
# A picker value naming a collection rather than a document (a document's value is its hex id).
COLLECTION_PREFIX = "collection:"
# Without API keys, a session's collections live in a matter of its own, named so (plus a random part).
SPACE_PREFIX = "session-"


def document_choices(docs: dict[str, Document]) -> list[tuple[str, str]]:
    """Returns the document pickers' entries for the session's documents: (label, id)."""
    return [(doc_label(doc), doc_id) for doc_id, doc in docs.items()]


def pickers(choices: list[tuple[str, str]], value: str | None, collections: list[str] | None = None) -> list[Any]:
    """Returns the Ask, Batch and Analysis pickers: documents, and in Ask and Batch the collections too (the
    checklist runs over one document)."""
    both = choices + [(f"Collection: {name}", COLLECTION_PREFIX + name) for name in collections or []]
    single = value if value is None or not value.startswith(COLLECTION_PREFIX) else None
    return [gr.Dropdown(choices=both, value=value), gr.Dropdown(choices=both, value=value)] + [
        gr.Dropdown(choices=choices, value=single)
    ]


def citation_choices(citations: list[Citation]) -> list[tuple[str, str]]:
    """Returns the page view's picker entries for `citations`: (label, index as text)."""
    choices = []
    for number, c in enumerate(citations):
        quote = " ".join(c.quote.split())
        quote = quote[:70] + ("..." if len(quote) > 70 else "")
        where = f"{c.document_name}, " if c.document_name else ""
        pages = c.pages if c.page_start else "?"
        choices.append((f"{number + 1}. {where}{pages}: {quote}", str(number)))
    return choices


def choice_index(choice: Any, count: int) -> int:
    """Returns the index a picker's value names, checked to be one of `count`; a `DocpipeError` otherwise."""
    try:
        index = int(str(choice))
    except ValueError:
        raise DocpipeError("choose an entry from the list first") from None
    if not 0 <= index < count:
        raise DocpipeError("choose an entry from the list first")
    return index


def checked_question(question: str) -> str:
    """Returns the question stripped and checked: not empty, at most `MAX_QUESTION_CHARS`."""
    question = check_question((question or "").strip())
    if len(question) > MAX_QUESTION_CHARS:
        raise DocpipeError(f"the question is {len(question)} characters long; keep it under {MAX_QUESTION_CHARS}")
    return question


def quote_choices(quotes: list[Citation]) -> list[tuple[str, str]]:
    """Returns a review cell's quote picker entries: (label, index as text)."""
    choices = []
    for number, q in enumerate(quotes):
        text = " ".join(q.quote.split())
        label = f"{number + 1}. {q.pages if q.page_start else '?'}: {text[:70]}{'...' if len(text) > 70 else ''}"
        choices.append((label, str(number)))
    return choices


def open_quote(
    at: Any, reading: str, quotes: list[Citation], q: Any, show: Callable[[Citation], tuple[Any, str]], what: str
) -> tuple[Any, str, Any, Any, str]:
    """Returns what opening a grid cell shows (the Key terms and Playbook views alike): `at` (the cell), its
    `reading`, the quote picker, the chosen quote's page (the first verified one unless `q` picks one) and its
    caption, from `show(quote)`. A page that cannot be shown leaves the reading and says why; an unexpected
    failure is logged as showing `what`'s page."""
    if not quotes:
        return at, reading, gr.Dropdown(choices=[], value=None), None, "No quote to show on a page."
    try:
        index = (
            choice_index(q, len(quotes))
            if q is not None
            else next((i for i, quote in enumerate(quotes) if quote.verified), 0)
        )
        picker = gr.Dropdown(choices=quote_choices(quotes), value=str(index))
        image, caption = show(quotes[index])
    except DocpipeError as exc:
        picker = gr.Dropdown(choices=quote_choices(quotes), value=None)
        return at, reading, picker, None, f"**Page not shown:** {html.escape(str(exc))}"
    except Exception:  # noqa: BLE001 - the user gets a message, the log gets the traceback
        logger.exception("showing %s's page failed", what)
        picker = gr.Dropdown(choices=quote_choices(quotes), value=None)
        return at, reading, picker, None, "**Page not shown:** unexpected error (see the server log)"
    return at, reading, picker, image, caption


def engine_thinks(dp: DocPipe) -> bool:
    """Returns True when a language model answers (it may think first: the thinking mode means something);
    False offline, where answers are quoted from the contract. The engine is loaded on first use, as for a
    first question; one that is configured but fails to load counts as there."""
    try:
        return dp.engine is not None
    except DocpipeError as exc:
        logger.warning("the answer engine did not load (%s); the thinking mode is offered anyway", exc)
        return True


def offer_thinking(wb: Any, mode: Any) -> None:
    """Shows the thinking-mode choice `mode` (a `gr.Radio` laid out hidden) once the page has loaded, when a
    language model answers (`engine_thinks`); offline it stays hidden. `wb` is the app's `Workbench`.

    Outside Gradio's queue: a page load must not take the place of a user's question in a full queue."""
    if wb.demo is not None:
        wb.demo.load(lambda: gr.Radio(visible=engine_thinks(wb.dp)), None, [mode], api_name=False, queue=False)
