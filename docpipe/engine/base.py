"""The engine protocol, batch-first like vLLM's ``LLM.generate``: a list of requests in, a list of results
out, in the same order. The async side streams. Sampling parameters are named as vLLM names them.

A request carries its own thinking flag (Qwen3 thinking mode) and thinking budget; a result carries the
answer with the ``<think>`` block removed, the thinking separately, the finish reason, token counts and
timings.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "BUDGET_CLOSE",
    "DIRECT_SAMPLING",
    "PRIORITY_ANALYSIS",
    "PRIORITY_BULK",
    "PRIORITY_INTERACTIVE",
    "THINKING_SAMPLING",
    "AsyncEngine",
    "Engine",
    "GenerationRequest",
    "GenerationResult",
    "SamplingParams",
    "StreamEvent",
    "StreamTrim",
    "split_thinking",
]

FinishReason = Literal["stop", "length", "abort", "error"]

# Scheduling priorities, vLLM's convention (lower runs first; ties go by arrival): a person waiting on a
# question goes ahead of one contract's analysis, and that goes ahead of a review grid (every contract of a
# data room x a set of questions: thousands of prompts nobody watches one by one). The batcher, the remote
# engine's request slots, the in-process vLLM engine (scheduling_policy "priority") and a
# `vllm serve --scheduling-policy priority` server all honour `GenerationRequest.priority`.
PRIORITY_INTERACTIVE = 0
PRIORITY_ANALYSIS = 10
PRIORITY_BULK = 20

# What closes a thought the thinking budget cut, before the answer is asked for (Qwen's own wording): the
# in-process vLLM engine appends it to the prompt, the OpenAI-compatible engine to the assistant turn it continues.
BUDGET_CLOSE = "\n\nConsidering the limited time, I have to give the answer now.\n</think>\n\n"


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Sampling settings under vLLM's names."""

    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20
    min_p: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    presence_penalty: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "presence_penalty": self.presence_penalty,
        }


# Qwen3's recommended sampling for each mode (model card): greedy decoding makes thinking mode loop.
THINKING_SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, max_tokens=4096)
DIRECT_SAMPLING = SamplingParams(temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, max_tokens=1024)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One chat to complete: messages, whether the model thinks first, sampling, a thinking budget, priority,
    and optionally the JSON schema the answer must follow.

    `json_schema`: the answer (what comes after any thinking) is one JSON value valid against this schema. Engines
    constrain decoding to it: the in-process vLLM engine with vLLM's structured outputs, the OpenAI-compatible
    engine with ``response_format`` (``vllm serve`` turns it into the same), the echo engine by building an
    instance. Thinking stays free text: the grammar starts after ``</think>``. A reply cut by ``max_tokens`` is
    still cut JSON: callers parse it and treat a reply that does not parse as a failure, never as a value.

    >>> r = GenerationRequest.chat("You answer from contracts.", "What is the notice period?", thinking=True)
    >>> r.sampling.temperature, r.messages[-1]["role"]
    (0.6, 'user')
    """

    messages: tuple[dict[str, str], ...]
    thinking: bool = False
    sampling: SamplingParams = DIRECT_SAMPLING
    max_thinking_tokens: int | None = None
    priority: int = PRIORITY_INTERACTIVE  # lower runs first (vLLM's convention)
    request_id: str = ""
    json_schema: dict[str, Any] | None = None  # the answer is JSON valid against it (see above)

    @classmethod
    def chat(
        cls,
        system: str,
        user: str,
        *,
        thinking: bool = False,
        sampling: SamplingParams | None = None,
        **kwargs: Any,
    ) -> GenerationRequest:
        """Returns a request from a system prompt and one user message, with the mode's recommended sampling."""
        sampling = sampling or (THINKING_SAMPLING if thinking else DIRECT_SAMPLING)
        messages = ({"role": "system", "content": system}, {"role": "user", "content": user})
        return cls(messages=messages, thinking=thinking, sampling=sampling, **kwargs)

    def with_sampling(self, **changes: Any) -> GenerationRequest:
        return replace(self, sampling=replace(self.sampling, **changes))


@dataclass(slots=True)
class GenerationResult:
    """One completion: answer text (no ``<think>``), thinking, finish reason, counts."""

    text: str
    thinking: str | None = None
    finish_reason: FinishReason = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    first_token_s: float | None = None
    thinking_truncated: bool = False
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """A piece of a streamed completion: ``kind`` is ``thinking`` or ``answer``; the last event has ``result``."""

    kind: Literal["thinking", "answer", "done"]
    text: str = ""
    result: GenerationResult | None = None


@runtime_checkable
class Engine(Protocol):
    """A batch engine: `generate` returns one result per request, in request order."""

    name: str
    model: str

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncEngine(Protocol):
    """An engine for concurrent callers: each request streams; the engine batches them itself."""

    name: str
    model: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]: ...

    async def complete(self, request: GenerationRequest) -> GenerationResult: ...

    async def aclose(self) -> None: ...


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TAG = re.compile(r"</?think>")


def split_thinking(raw: str, *, opened: bool = False) -> tuple[str, str | None, bool]:
    """Returns (answer, thinking, complete) from a raw completion.

    `opened` says the prompt already ended with ``<think>`` (some chat templates open the block), so the
    completion starts inside it. `complete` is False when the thinking never closed (cut by a budget or
    max_tokens): then everything is thinking and the answer is empty, never half a thought shown as answer.

    >>> split_thinking("<think>Clause 12.3 says 90 days.</think>\\n\\nNinety days.")
    ('Ninety days.', 'Clause 12.3 says 90 days.', True)
    >>> split_thinking("Ninety days.")
    ('Ninety days.', None, True)
    >>> split_thinking("<think>still going", opened=False)
    ('', 'still going', False)
    >>> split_thinking("<think>a</think>Ninety</think> days.")
    ('Ninety days.', 'a', True)
    """
    text = ("<think>" + raw) if opened and "<think>" not in raw[:20] else raw
    match = _THINK.search(text)
    if match:
        thinking = match.group(1).strip()
        answer = (text[: match.start()] + text[match.end() :]).strip()
        return _untag(answer), thinking or None, True
    start = text.find("<think>")
    if start >= 0:
        return _untag(text[:start]), text[start + len("<think>") :].strip() or None, False
    # A stray closing tag (template opened the block, model closed it) still separates the two.
    if "</think>" in text:
        thinking, _, answer = text.partition("</think>")
        return _untag(answer), thinking.strip() or None, True
    return text.strip(), None, True


def _untag(answer: str) -> str:
    # A model may emit further think tags after the block: they are never answer text.
    return _TAG.sub("", answer).strip()


@dataclass(slots=True)
class StreamTrim:
    """Returns streamed text pieces with leading whitespace dropped and trailing whitespace held back, so the
    pieces join to the stripped text the engines give as the final answer or thinking.

    >>> trim = StreamTrim()
    >>> [trim.push(p) for p in ["  ", "Ninety", " ", "days. "]]
    ['', 'Ninety', '', ' days.']
    """

    started: bool = False
    pending: str = ""

    def push(self, piece: str) -> str:
        if not self.started:
            piece = piece.lstrip()
            if not piece:
                return ""
            self.started = True
        body = piece.rstrip()
        if not body:
            self.pending += piece
            return ""
        out, self.pending = self.pending + body, piece[len(body) :]
        return out
