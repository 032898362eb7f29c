"""The OpenAI-compatible endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions``, so Open WebUI or any
OpenAI client can ask a contract (base URL ``http://HOST:8000/v1``, API key: a docpipe key).

A model is ``docpipe:<document id>`` (or its first 12+ hex digits) or ``docpipe:<collection name>`` of the
caller's matter. The question is the last user message; earlier turns and system messages are ignored, because
docpipe answers each question from the contract alone (a prior answer in the prompt would be quoted as if it
were the contract, and would defeat the answer cache). The answer is the one ``/ask`` gives: same auth (the
matter from X-Matter or the key's only matter), same question limits, same access log, stored by its id.

The content is the answer text followed by a "Sources:" list (quote, pages, verified); the citations are also
a structured field, ``choices[0].message.citations`` (streamed: ``choices[0].delta.citations`` of the last
chunk), which OpenAI clients keep as an extra field and ignore otherwise. Streaming sends thinking as
``delta.reasoning_content`` (what vLLM and DeepSeek clients read) and the answer as ``delta.content``.
Sampling parameters (``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``seed``, ...) are accepted and
ignored: the answer is generated with the server's settings, so it is the same audited, cached answer as
``/ask`` gives.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from docpipe.errors import ConfigError, DocpipeError
from docpipe.server.access import Caller
from docpipe.server.deps import (
    AuditDep,
    DocPipeDep,
    MattersDep,
    OptionsDep,
    Reader,
    ResultsDep,
    check_questions,
    logged,
    open_document,
)
from docpipe.server.errors import error_status
from docpipe.server.models import ERROR_RESPONSES
from docpipe.storage.collections import check_collection_name

if TYPE_CHECKING:
    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterStore
    from docpipe.collection.handle import Collection
    from docpipe.pipeline import DocPipe
    from docpipe.server.storage import ResultStore
    from docpipe.types import Answer, Document

__all__ = ["MODEL_PREFIX", "ChatRequest", "router", "sources_text"]

#: Every model id starts with it: ``docpipe:<document id>`` or ``docpipe:<collection name>``.
MODEL_PREFIX = "docpipe:"
_HEX_PREFIX = re.compile(r"[0-9a-f]{12,64}")
# A quote in the "Sources:" list is cut here (the structured citations keep it whole).
_QUOTE_CHARS = 300


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str = Field(description="system, user, assistant, tool ...; only the last user message is read.")
    content: str | list[dict[str, Any]] | None = Field(
        None, description="Text, or OpenAI content parts (the text parts are read)."
    )

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    """An OpenAI chat completion request; fields docpipe does not use (temperature, max_tokens ...) are ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(description="docpipe:<document id or 12+ hex prefix> or docpipe:<collection name>.")
    messages: list[ChatMessage] = Field(description="The question is the last user message.")
    stream: bool = False


def sources_text(answer: Answer) -> str:
    """Returns the "Sources:" list appended to the content: one line per citation (document, pages, quote,
    verified), or "" for an answer without citations."""
    if not answer.citations:
        return ""
    several = len({c.document_id for c in answer.citations}) > 1 or bool(answer.collection)
    lines = ["Sources:"]
    for number, c in enumerate(answer.citations, 1):
        quote = " ".join(c.quote.split())
        if len(quote) > _QUOTE_CHARS:
            quote = quote[: _QUOTE_CHARS - 1].rstrip() + "…"
        where = f"{c.document_name}, {c.pages}" if several and c.document_name else c.pages
        check = "verified" if c.verified else "not verified"
        lines.append(f'{number}. {where}: "{quote}" ({check})')
    return "\n".join(lines)


def _content(answer: Answer) -> str:
    parts = [answer.text.strip()]
    if answer.notice:
        parts.append(f"Note: {answer.notice}")
    sources = sources_text(answer)
    if sources:
        parts.append(sources)
    return "\n\n".join(p for p in parts if p)


def _question(body: ChatRequest) -> str:
    for message in reversed(body.messages):
        if message.role == "user":
            return message.text()
    raise ConfigError('no user message: send the question as the last message with "role": "user"')


router = APIRouter(prefix="/v1", tags=["openai"], responses=ERROR_RESPONSES)


def _resolve(dp: DocPipe, matters: MatterStore, who: Caller, model: str) -> Document | Collection:
    """Returns the document or collection of the matter the model names; 404 for anything else."""
    name = model.removeprefix(MODEL_PREFIX)
    if _HEX_PREFIX.fullmatch(name):
        found = [d for d in matters.documents(who.matter) if d.id.startswith(name)]
        if len(found) == 1:
            return open_document(dp, matters, who, found[0].id, None)
        if len(found) > 1:
            raise HTTPException(404, detail=f"model {model[:80]!r} matches {len(found)} documents: give more of the id")
    try:
        coll = dp.collection(check_collection_name(name), matter=who.matter)
    except ConfigError:
        coll = None
    if coll is None or not coll.exists:
        raise HTTPException(
            404,
            detail=f"no model {model[:80]!r} in matter {who.matter!r}: GET /v1/models lists them "
            f"({MODEL_PREFIX}<document id> or {MODEL_PREFIX}<collection name>)",
        )
    return coll


def _target_of(source: Document | Collection) -> tuple[str | None, str]:
    """Returns the access log's document id and detail for the target."""
    if hasattr(source, "exists"):
        return None, f"openai chat, collection {source.name}"
    return str(source.id), "openai chat"


def _save(results: ResultStore, who: Caller, answer: Answer) -> str:
    record = {**answer.to_dict(), "id": uuid.uuid4().hex}
    quoted = [*answer.document_ids, *(c.document_id for c in answer.citations)]
    results.save(
        "answers",
        record["id"],
        record,
        matter=who.matter,
        document_id=answer.document_id or None,
        document_ids=[d for d in quoted if d] or None,
    )
    return str(record["id"])


@router.get("/models", summary="The matter's documents and collections as OpenAI models")
def list_models(who: Reader, dp: DocPipeDep, matters: MattersDep, audit: AuditDep) -> dict[str, Any]:
    """Returns an OpenAI model list: ``docpipe:<id>`` per document (``name``: its name) and
    ``docpipe:<name>`` per collection of the matter."""
    with logged(audit, who, "list_models"):
        docs = matters.documents(who.matter)
        colls = dp.collections(matter=who.matter)
    owner = f"docpipe:{who.matter}"
    data = [
        {
            "id": f"{MODEL_PREFIX}{d.id}",
            "object": "model",
            "created": int(d.added),
            "owned_by": owner,
            "name": d.name,
            "kind": "document",
        }
        for d in docs
    ]
    data += [
        {
            "id": f"{MODEL_PREFIX}{c.name}",
            "object": "model",
            "created": 0,
            "owned_by": owner,
            "name": f"{c.name} (collection, {len(c)} documents)",
            "kind": "collection",
        }
        for c in colls
    ]
    return {"object": "list", "data": data}


def _completion(model: str, answer: Answer, answer_id: str) -> dict[str, Any]:
    """Returns the chat completion of a whole answer."""
    return {
        "id": f"chatcmpl-{answer_id}",
        "object": "chat.completion",
        "created": int(answer.created),
        "model": model,
        "answer_id": answer_id,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": _content(answer),
                    "reasoning_content": answer.thinking or None,
                    "citations": [c.to_dict() for c in answer.citations],
                },
                "finish_reason": "stop",
            }
        ],
        # What the model read and wrote to make this answer (the engine's counts; none for a quoted answer).
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        },
    }


def _chunks(
    dp: DocPipe, audit: AccessLog, results: ResultStore, who: Caller, model: str, question: str, source: Any
) -> Iterator[str]:
    """Yields the streamed answer as OpenAI chunks, then ``[DONE]``; a failure on the way is an error chunk."""
    chunk_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        payload = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(payload)}\n\n"

    doc_id, detail = _target_of(source)
    yield chunk({"role": "assistant", "content": ""})
    try:
        with logged(audit, who, "ask", doc_id, [question], detail=detail):
            streamed = ""
            for event in dp.ask_stream(source, question):
                if event.kind == "thinking":
                    yield chunk({"reasoning_content": event.text})
                elif event.kind == "answer":
                    streamed += event.text
                    yield chunk({"content": event.text})
                elif event.answer is not None:
                    answer = event.answer
                    answer_id = _save(results, who, answer)
                    # A cached answer comes whole; a final text that differs from the stream stays in /answers.
                    rest = _content(answer)
                    rest = rest[len(streamed) :] if rest.startswith(streamed) else "\n\n" + sources_text(answer)
                    if rest.strip():
                        yield chunk({"content": rest})
                    citations = [c.to_dict() for c in answer.citations]
                    yield chunk({"citations": citations}, "stop", answer_id=answer_id)
    except Exception as exc:  # the response has started: the error goes in the stream, as OpenAI sends it
        kind = error_status(exc)[1] if isinstance(exc, DocpipeError) else "internal_error"
        message = str(exc) if isinstance(exc, DocpipeError) else "unexpected server error: see the server log"
        yield f"data: {json.dumps({'error': {'type': kind, 'message': message}})}\n\n"
    yield "data: [DONE]\n\n"


@router.post("/chat/completions", summary="Ask a document or collection, OpenAI style")
async def chat_completions(
    body: ChatRequest,
    who: Reader,
    dp: DocPipeDep,
    matters: MattersDep,
    audit: AuditDep,
    results: ResultsDep,
    options: OptionsDep,
) -> Any:
    """Answers the last user message from the model's document or collection (see the module docstring)."""

    def complete_sync() -> dict[str, Any]:
        [question] = check_questions(options, [_question(body)])
        source = _resolve(dp, matters, who, body.model)
        doc_id, detail = _target_of(source)
        with logged(audit, who, "ask", doc_id, [question], detail=detail):
            answer = dp.ask(source, question)
            answer_id = _save(results, who, answer)
        return _completion(body.model, answer, answer_id)

    if not body.stream:
        return await run_in_threadpool(complete_sync)
    # Checked before the response starts, so a bad request is an HTTP error, not a broken stream.
    [question] = check_questions(options, [_question(body)])
    source = await run_in_threadpool(_resolve, dp, matters, who, body.model)
    return StreamingResponse(
        _chunks(dp, audit, results, who, body.model, question, source),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
