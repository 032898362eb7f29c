"""`EchoEngine`: a small, deterministic, real implementation of the engine protocol for demos and tests.

It reads the prompt it is given and answers by quoting the sentence of its contract sections that shares
most words with the question, citing that section's id (for a checklist item, in the checklist's
FINDING / QUOTES / NOTE format), and (in thinking mode) writes a short thought in a ``<think>`` block that
the normal parsing path removes. No model, no randomness, no network.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Sequence

from docpipe.engine.base import GenerationRequest, GenerationResult, StreamEvent, split_thinking

__all__ = ["EchoEngine"]

_SECTION = re.compile(r'<section id="(?P<id>[^"]+)"[^>]*>\n(?P<body>.*?)\n</section>', re.DOTALL)
_SENTENCE = re.compile(r"(?s)(\S.{19,400}?[.;:])(?=\s|$)")
_WORD = re.compile(r"[a-z]{4,}")


class EchoEngine:
    """Returns answers that quote, verbatim, the sentence of the prompt's sections sharing most words with
    the question.

    >>> from docpipe.engine.base import GenerationRequest
    >>> section = "The term of this Agreement is three (3) years from the Effective Date. More."
    >>> user = f'<contract>{chr(10)}<section id="s001" pages="p. 1" heading="1. Term">{chr(10)}{section}'
    >>> user += f'{chr(10)}</section>{chr(10)}</contract>{chr(10)}Question: What is the term?'
    >>> EchoEngine().generate([GenerationRequest.chat("sys", user)])[0].text
    '"The term of this Agreement is three (3) years from the Effective Date." [s001]'
    """

    name = "echo"
    model = "echo"

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def _raw(self, request: GenerationRequest) -> str:
        user = request.messages[-1]["content"]
        asked = user.rpartition("Question:")[2].strip()
        checklist = "FINDING:" in asked
        if checklist:
            # A checklist item: only its first line is the question; the rest is the reply format.
            asked = asked.splitlines()[0]
        question = {w[:5] for w in _WORD.findall(asked.lower())}
        best: tuple[int, str, str] | None = None
        for match in _SECTION.finditer(user):
            body = " ".join(match.group("body").split())
            for sentence in _SENTENCE.findall(body):
                if '"' in sentence or len(sentence.split()) < 8:
                    continue
                overlap = len(question & {w[:5] for w in _WORD.findall(sentence.lower())})
                if best is None or overlap > best[0]:
                    best = (overlap, sentence, match.group("id"))
        if checklist:
            # Present when a sentence shares at least two word stems with the item's question.
            if best is None or best[0] < 2:
                answer = "FINDING: absent\nQUOTES: none\nNOTE: No section given mentions it."
            else:
                answer = f'FINDING: present\nQUOTES: "{best[1]}" [{best[2]}]\nNOTE: See section {best[2]}.'
        elif best is None:
            answer = "The provided sections do not answer the question."
        else:
            answer = f'"{best[1]}" [{best[2]}]'
        if request.thinking:
            return f"<think>The question is answered by the first section given.</think>\n\n{answer}"
        return answer

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns one result per request, in order."""
        self.batch_sizes.append(len(requests))
        results = []
        for request in requests:
            started = time.perf_counter()
            raw = self._raw(request)
            answer, thinking, complete = split_thinking(raw)
            words = len(raw.split())
            results.append(
                GenerationResult(
                    text=answer,
                    thinking=thinking,
                    prompt_tokens=sum(len(m["content"].split()) for m in request.messages),
                    completion_tokens=min(words, request.sampling.max_tokens),
                    latency_s=time.perf_counter() - started,
                    thinking_truncated=not complete,
                )
            )
        return results

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Yields the answer word by word, then the result."""
        result = self.generate([request])[0]
        if result.thinking:
            yield StreamEvent("thinking", result.thinking)
        for word in result.text.split(" "):
            yield StreamEvent("answer", word + " ")
        yield StreamEvent("done", result=result)

    async def complete(self, request: GenerationRequest) -> GenerationResult:
        return self.generate([request])[0]

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass
