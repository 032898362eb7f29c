"""The chat-completions request and answer, for `OpenAIEngine`: the SDK call's parameters (sampling, thinking
switch, priority), those that continue a thought the thinking budget cut, and the parsing of a completion (as
plain data) into a `Round`, then of one or two rounds into a `GenerationResult`. Pure functions over plain data;
imports only the engine protocol.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from docpipe.engine.base import BUDGET_CLOSE, FinishReason, GenerationRequest, GenerationResult, split_thinking


class Rejected(Exception):
    """A 4xx, or an unusable answer, that concerns one request: it becomes that result's error."""


@dataclass(slots=True)
class Round:
    """One completion: what the server said, before the thinking budget's second round is merged."""

    answer: str = ""
    thinking: str | None = None
    finish: FinishReason = "stop"
    raw_finish: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    id: str = ""


def request_params(
    request: GenerationRequest,
    *,
    model: str,
    max_tokens: int,
    messages: list[dict[str, str]] | None = None,
    thinking: bool | None = None,
) -> dict[str, Any]:
    """Returns the keyword arguments of ``chat.completions.create`` for `request` (its messages unless `messages`):
    OpenAI's own parameters, and vLLM's extensions in ``extra_body``, which the SDK merges into the JSON body."""
    sampling = request.sampling
    # vLLM's extra sampling fields and the thinking switch: its server takes them as top-level keys; others
    # ignore them.
    extra: dict[str, Any] = {
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "chat_template_kwargs": {"enable_thinking": request.thinking if thinking is None else thinking},
    }
    # Only when not the default: vLLM orders by it with --scheduling-policy priority (and ignores it under
    # its default fcfs); servers without the extension (OpenAI itself) may refuse an unknown field.
    if request.priority:
        extra["priority"] = request.priority
    params: dict[str, Any] = {
        "model": model,
        "messages": messages if messages is not None else [dict(m) for m in request.messages],
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": max_tokens,
        "presence_penalty": sampling.presence_penalty,
        "extra_body": extra,
    }
    if sampling.seed is not None:
        params["seed"] = sampling.seed
    if request.json_schema is not None:
        params["response_format"] = response_format(request.json_schema)
    return params


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """Returns OpenAI's ``response_format`` asking for JSON valid against `schema`, named by its title. ``vllm
    serve`` decodes it under its structured outputs; with ``--reasoning-parser`` the grammar starts after the
    thinking (else a thinking request cannot think). Start it with ``--structured-outputs-config
    '{"backend": "xgrammar", "disable_any_whitespace": true}'`` so a model cannot pad the JSON with whitespace
    until max_tokens."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "reply"))[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def continuation_params(request: GenerationRequest, thinking: str, *, model: str) -> dict[str, Any]:
    """Returns the parameters that continue the assistant turn from a budget-cut thought, closed by us."""
    messages = [dict(m) for m in request.messages]
    messages.append({"role": "assistant", "content": "<think>\n" + thinking + BUDGET_CLOSE})
    # enable_thinking=False: the template adds nothing without a generation prompt, and it tells vLLM's
    # reasoning parser that the completion is answer, not more thinking (the </think> is in the prompt).
    params = request_params(
        request, model=model, max_tokens=request.sampling.max_tokens, messages=messages, thinking=False
    )
    params["extra_body"].update(continue_final_message=True, add_generation_prompt=False)  # vLLM extensions
    return params


def parse_completion(data: dict[str, Any]) -> Round:
    """Returns the `Round` of a non-streamed completion; the thinking comes from ``reasoning``,
    ``reasoning_content`` or a ``<think>`` block left in the content."""
    choices = data.get("choices") or []
    if not choices:
        raise Rejected(f"the server returned no completion: {str(data)[:200]}")
    choice = choices[0]
    message = choice.get("message") or {}
    answer, inline, _ = split_thinking(message.get("content") or "")
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    thinking = "\n\n".join(part for part in ((reasoning or "").strip(), inline or "") if part) or None
    out = Round(answer=answer, thinking=thinking, raw_finish=choice.get("finish_reason"), id=str(data.get("id", "")))
    out.finish = finish_reason(out.raw_finish)
    read_usage(data.get("usage"), out)
    return out


def merge(
    rounds: list[Round],
    answer: str,
    thinking: str | None,
    latency_s: float,
    first_token_s: float | None,
    error: str | None,
) -> GenerationResult:
    """Returns the result of one request from its rounds (two when the budget cut the thought)."""
    if not rounds:
        return GenerationResult(text="", finish_reason="error", latency_s=latency_s, error=error)
    first, last = rounds[0], rounds[-1]
    extra: dict[str, Any] = {"id": last.id, "server_finish_reason": last.raw_finish}
    if len(rounds) > 1:
        extra["continuation_prompt_tokens"] = last.prompt_tokens
    return GenerationResult(
        text=answer,
        thinking=thinking,
        finish_reason="error" if error else last.finish,
        prompt_tokens=first.prompt_tokens,
        completion_tokens=sum(r.completion_tokens for r in rounds),
        latency_s=latency_s,
        first_token_s=first_token_s,
        # The thought never closed: cut by the budget (two rounds) or by max_tokens (one round, no answer).
        thinking_truncated=len(rounds) > 1 or (first.finish == "length" and bool(first.thinking) and not first.answer),
        error=error,
        extra=extra,
    )


def finish_reason(raw: str | None) -> FinishReason:
    """Returns docpipe's finish reason for the server's (``length`` and ``abort`` kept, anything else ``stop``)."""
    return {"length": "length", "abort": "abort"}.get(raw or "stop", "stop")  # type: ignore[return-value]


def read_usage(usage: Any, out: Round) -> None:
    """Copies the token counts of a ``usage`` object into `out`, when the server sent one."""
    if isinstance(usage, dict):
        out.prompt_tokens = int(usage.get("prompt_tokens") or out.prompt_tokens)
        out.completion_tokens = int(usage.get("completion_tokens") or out.completion_tokens)
