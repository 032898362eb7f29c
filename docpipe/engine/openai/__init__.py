"""The remote engine: any OpenAI-compatible chat-completions server, such as ``vllm serve Qwen/Qwen3-14B
--reasoning-parser qwen3`` (how users scale past one machine) or Ollama's ``/v1`` endpoint.

One `OpenAIEngine` serves both protocols. The sync `generate` and the async `complete`/`stream` all run on
one private event loop in a background thread (`docpipe.engine.loop.BackgroundLoop`), so the batch call works
from plain scripts and from inside a running loop (Jupyter, Gradio) alike, and `max_concurrency` bounds every
caller's requests together, its slots handed out most urgent first. Modules: `engine` (the engine and its loop),
`transport` (the official ``openai`` SDK's ``AsyncOpenAI`` with its own retries off, docpipe's retries that honour
``Retry-After``, the failure rules below), `slots` (request slots by priority), `completion` (the call's
parameters, vLLM's extensions in ``extra_body``; parsing), `streaming` (streamed chunks, think splitting).

Thinking: switched per request through ``chat_template_kwargs={"enable_thinking": ...}``. The thinking
comes back in ``message.reasoning`` (vLLM >= 0.3x with a reasoning parser) or ``reasoning_content`` (older
servers); a server that does not split it leaves ``<think>`` in the content, which is split here, so the
answer text never holds a ``<think>`` block.

Thinking budget: a remote server cannot stop at ``</think>`` for us, so a request with
``max_thinking_tokens`` asks for ``max_thinking_tokens + max_tokens`` tokens. When the length limit cut the
thought (thinking, no answer), a second request continues the assistant turn from the cut thought, closed
with Qwen's "Considering the limited time..." line (``continue_final_message``, a vLLM extension), and
`GenerationResult.thinking_truncated` is set.

Failures:

- Server unreachable (refused, DNS, timeouts) or failing (5xx, 408, 429): retried with exponential
  backoff and full jitter, then `EngineUnavailableError` is raised - for a batch, the whole batch fails,
  because every other request would fail the same way.
- HTTP 401/403/404 (API key, model name, URL): `ConfigError`, no retry - the engine's settings are wrong,
  not one request.
- Any other 4xx (prompt too long, bad sampling value): no retry; that request's result gets ``error`` (the
  server's message) and ``finish_reason="error"``, and the rest of the batch goes on.
"""

from __future__ import annotations

from docpipe.engine.base import BUDGET_CLOSE
from docpipe.engine.openai.engine import OpenAIEngine

__all__ = ["BUDGET_CLOSE", "OpenAIEngine"]
