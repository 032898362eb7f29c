"""`EchoEngine`: a small, deterministic, real implementation of the engine protocol for demos and tests.

It reads the prompt it is given and answers by quoting the sentence of its contract sections that shares
most words with the question, citing that section's id (for a checklist item, in the checklist's
FINDING / QUOTES / NOTE format), and (in thinking mode) writes a short thought in a ``<think>`` block that
the normal parsing path removes. No model, no randomness, no network.

A request with a JSON schema (`GenerationRequest.json_schema`) gets JSON valid against it, read from that same
sentence (`schema_instance`): free strings are the sentence, an enum its first member the sentence names, a
number the first figure in it, a patterned string the first stretch of the sentence that fits the pattern.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from docpipe.engine.base import GenerationRequest, GenerationResult, StreamEvent, split_thinking

__all__ = ["EchoEngine", "schema_instance"]

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
        if checklist or request.json_schema is not None:
            # A checklist item or a typed cell: only its first line is the question; the rest is the reply format.
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
        if request.json_schema is not None:
            answer = json.dumps(schema_instance(request.json_schema, best[1] if best else ""))
        elif checklist:
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


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def schema_instance(schema: dict[str, Any], text: str) -> Any:
    """Returns a simple instance of the JSON `schema` read from `text`: an object with every property, an array
    of one item (or ``minItems``), the first enum member `text` names as a word (else the first member), the first
    of the ``anyOf`` / ``oneOf`` choices that is not null, the first number in `text` within the bounds (else the
    minimum or 0), a string with a ``pattern`` the first stretch of `text` matching it (else the first of the
    schema's ``examples`` that does), any other string `text` cut to ``maxLength``, a boolean whether `text` says
    anything.

    >>> schema = {"type": "object", "properties": {"unit": {"enum": ["year", "day"]}, "count": {"type": "integer"}}}
    >>> schema_instance(schema, "upon ninety (90) days' notice")
    {'unit': 'day', 'count': 90}
    """
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return _named(list(schema["enum"]), text)
    for choice in ("anyOf", "oneOf"):
        if choice in schema:
            options = [o for o in schema[choice] if o.get("type") != "null"] or schema[choice]
            return schema_instance(options[0], text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {name: schema_instance(sub, text) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 0)), 1 if schema.get("maxItems", 1) else 0)
        return [schema_instance(schema.get("items", {}), text) for _ in range(count)]
    if kind in ("number", "integer"):
        return _number(schema, text, integer=kind == "integer")
    if kind == "boolean":
        return bool(text.strip())
    if kind == "null":
        return None
    if kind == "string":
        found = _patterned(schema, text) if "pattern" in schema else text
        limit = schema.get("maxLength")
        return found[:limit] if isinstance(limit, int) else found
    return text


def _named(members: list[Any], text: str) -> Any:
    """Returns the first of `members` that `text` names as a word (a plural, or spaces for ``_``, allowed)."""
    for member in members:
        if isinstance(member, str) and member.strip():
            words = r"[\s_]+".join(re.escape(w) for w in re.split(r"[\s_]+", member.strip()))
            if re.search(rf"(?<!\w){words}s?(?!\w)", text, flags=re.IGNORECASE):
                return member
    return members[0]


def _number(schema: dict[str, Any], text: str, *, integer: bool) -> int | float:
    low, high = schema.get("minimum"), schema.get("maximum")
    for match in _NUMBER.finditer(text):
        value = float(match.group(0).replace(",", ""))
        if integer and not value.is_integer():
            continue
        if (low is None or value >= low) and (high is None or value <= high):
            return int(value) if integer else value
    fallback = low if low is not None else 0
    return int(fallback) if integer else float(fallback)


def _patterned(schema: dict[str, Any], text: str) -> str:
    pattern = re.compile(schema["pattern"])
    inner = schema["pattern"].removeprefix("^").removesuffix("$")
    for match in re.finditer(rf"(?<!\w)(?:{inner})(?!\w)", text):
        if match.group(0) and pattern.search(match.group(0)):
            return match.group(0)
    return next((e for e in schema.get("examples", ()) if isinstance(e, str) and pattern.search(e)), "")
