"""Cuts sections into embedder-sized passages (small-to-big): the embedder reads passages, the model
reads their parent sections. A passage never holds more tokens than the embedder reads.
"""

from __future__ import annotations

import logging

from docpipe.embed.base import Embedder
from docpipe.types import Passage, Section

__all__ = ["embedding_text", "make_passages"]

logger = logging.getLogger(__name__)

_MAX_PREFIX_TOKENS = 24


def _prefix(section: Section) -> str:
    return " > ".join(section.heading_path) + ": "


def _prefix_budget(section: Section, embedder: Embedder) -> tuple[str, int]:
    prefix = _prefix(section)
    spans = embedder.token_spans(prefix)
    if len(spans) > _MAX_PREFIX_TOKENS:
        prefix = prefix[: spans[_MAX_PREFIX_TOKENS - 2][1]] + ": "
        spans = embedder.token_spans(prefix)
    return prefix, len(spans)


def embedding_text(passage: Passage, section: Section, embedder: Embedder) -> str:
    """Returns what the embedder reads for `passage`: its heading path, then its text."""
    prefix, _ = _prefix_budget(section, embedder)
    return prefix + passage.text


def _snap_end(text: str, start: int, end: int) -> int:
    """Returns `end` moved back to a word boundary when that keeps most of the window (fewer tokens only)."""
    if end >= len(text) or not text[end].isalnum() or not text[end - 1].isalnum():
        return end
    cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
    return cut if cut > start + (end - start) // 2 else end


def _inside_word(text: str, offset: int) -> bool:
    return 0 < offset < len(text) and text[offset - 1].isalnum() and text[offset].isalnum()


def make_passages(sections: list[Section], doc_text: str, embedder: Embedder, *, overlap: int) -> list[Passage]:
    """Returns overlapping passages covering every section, each within the embedder's input limit
    together with its heading prefix (see `embedding_text`)."""
    passages: list[Passage] = []
    for section in sections:
        _, prefix_tokens = _prefix_budget(section, embedder)
        window = embedder.max_tokens - prefix_tokens
        step = max(1, window - min(overlap, window // 2))
        spans = embedder.token_spans(section.text)
        if not spans:
            continue
        first = 0
        while True:
            # A window that opens inside a word would be re-tokenised differently: start at a word.
            while first > 0 and first < len(spans) - 1 and _inside_word(section.text, spans[first][0]):
                first += 1
            last = min(first + window, len(spans)) - 1
            start = section.start + spans[first][0]
            end = section.start + spans[last][1]
            if last + 1 < len(spans):
                end = _snap_end(doc_text, start, end)
            passages.append(Passage(len(passages), section.id, start, end, doc_text[start:end]))
            if last + 1 >= len(spans):
                break
            first += step
    return passages
