"""Streaming from an OpenAI-compatible server, for `OpenAIEngine.stream`: reads the chat-completion chunks the
SDK decodes from the server-sent events, splits the content into ``thinking`` and ``answer`` pieces (`ThinkSplitter`, for servers
that leave ``<think>`` in the content), trims them as `StreamTrim` does, runs the thinking budget's second round
when the first was cut, and ends with one ``done`` event whose result holds exactly what was streamed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from docpipe.engine.base import GenerationRequest, StreamEvent, StreamTrim
from docpipe.engine.openai.completion import (
    Rejected,
    Round,
    continuation_params,
    finish_reason,
    merge,
    read_usage,
    request_params,
)
from docpipe.engine.openai.transport import Transport

logger = logging.getLogger(__name__)

_TAGS = ("<think>", "</think>")


async def stream_events(transport: Transport, request: GenerationRequest, *, model: str) -> AsyncIterator[StreamEvent]:
    """Yields ``thinking``/``answer`` pieces of one request as the server writes them, then a ``done`` event
    with the result (a rejected request ends with the result's ``error`` set)."""
    start = time.perf_counter()
    budget = request.max_thinking_tokens if request.thinking else None
    trims = {"thinking": StreamTrim(), "answer": StreamTrim()}
    pieces: dict[str, list[str]] = {"thinking": [], "answer": []}
    first_token_s: float | None = None
    rounds: list[Round] = []
    error: str | None = None
    calls = [request_params(request, model=model, max_tokens=request.sampling.max_tokens + (budget or 0))]
    try:
        while calls:
            current = Round()
            rounds.append(current)
            splitter = ThinkSplitter(hold=request.thinking and len(rounds) == 1)
            async for kind, raw in read_round(transport, calls.pop(), request, splitter, current):
                piece = trims[kind].push(raw)
                if piece:
                    first_token_s = first_token_s if first_token_s is not None else time.perf_counter() - start
                    pieces[kind].append(piece)
                    yield StreamEvent(kind, piece)  # type: ignore[arg-type]
            current.answer, current.thinking = "".join(pieces["answer"]), "".join(pieces["thinking"]) or None
            if len(rounds) == 1 and budget is not None and current.finish == "length":
                if current.thinking and not current.answer:
                    logger.debug("thinking budget of %d tokens cut the thought: asking for the answer", budget)
                    calls.append(continuation_params(request, current.thinking, model=model))
    except Rejected as exc:
        error = str(exc)
    # The result holds exactly what was streamed, piece for piece.
    answer, thinking = "".join(pieces["answer"]), "".join(pieces["thinking"]) or None
    result = merge(rounds, answer, thinking, time.perf_counter() - start, first_token_s, error)
    yield StreamEvent("done", result=result)


async def read_round(
    transport: Transport, params: dict[str, Any], request: GenerationRequest, splitter: ThinkSplitter, out: Round
) -> AsyncIterator[tuple[str, str]]:
    """Yields (kind, text) pieces of one streamed completion, filling `out` with its id, finish and usage."""
    async with transport.open_stream(params, request) as chunks:
        async for chunk in chunks:
            out.id = out.id or str(chunk.get("id") or "")
            read_usage(chunk.get("usage"), out)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning") or delta.get("reasoning_content")
                if reasoning:
                    for item in splitter.reasoning(reasoning):
                        yield item
                if delta.get("content"):
                    for item in splitter.feed(delta["content"]):
                        yield item
                if choice.get("finish_reason"):
                    out.raw_finish = choice["finish_reason"]
                    out.finish = finish_reason(out.raw_finish)
    for item in splitter.flush():
        yield item


@dataclass(slots=True)
class ThinkSplitter:
    """Splits streamed content into ``thinking`` and ``answer`` pieces the way `split_thinking` splits a whole
    text, for servers that leave ``<think>`` in the content. A tag cut between two chunks is held back.

    `hold`: a thinking request whose template may have opened ``<think>`` in the prompt: content before any
    tag is held until a tag (or the end) says whether it was thinking or answer.
    """

    hold: bool = False
    thinking: bool = False
    held: str = ""
    tail: str = ""
    out: list[tuple[str, str]] = field(default_factory=list)

    def reasoning(self, text: str) -> list[tuple[str, str]]:
        """The server splits the thinking itself: nothing needs holding."""
        out = self._release("answer")
        out.append(("thinking", text))
        return out

    def feed(self, text: str) -> list[tuple[str, str]]:
        text, self.tail = self.tail + text, ""
        while text:
            found = [(text.find(tag), tag) for tag in (("</think>",) if self.thinking else _TAGS)]
            hits = [(index, tag) for index, tag in found if index >= 0]
            if not hits:
                keep = _partial_tag(text)
                self._emit(text[: len(text) - keep])
                self.tail = text[len(text) - keep :]
                break
            index, tag = min(hits)
            self._emit(text[:index])
            text = text[index + len(tag) :]
            if tag == "<think>":
                self.out.extend(self._release("answer"))  # text before <think> is answer, as split_thinking has it
                self.thinking = True
            elif self.thinking:
                self.thinking = False
            else:
                self.out.extend(self._release("thinking"))  # a stray </think>: the template opened the block
        out, self.out = self.out, []
        return out

    def flush(self) -> list[tuple[str, str]]:
        self._emit(self.tail)
        self.tail = ""
        out, self.out = self.out + self._release("answer"), []
        return out

    def _emit(self, text: str) -> None:
        if not text:
            return
        if self.thinking:
            self.out.append(("thinking", text))
        elif self.hold:
            self.held += text
        else:
            self.out.append(("answer", text))

    def _release(self, kind: str) -> list[tuple[str, str]]:
        held, self.held, self.hold = self.held, "", False
        return [(kind, held)] if held else []


def _partial_tag(text: str) -> int:
    """Returns how many trailing characters of `text` could start a think tag."""
    for size in range(min(len(text), len("</think>") - 1), 0, -1):
        if any(tag.startswith(text[-size:]) for tag in _TAGS):
            return size
    return 0
