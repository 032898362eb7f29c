"""The wire to an OpenAI-compatible server, for `OpenAIEngine`, on the official ``openai`` SDK: one
``AsyncOpenAI`` client with the SDK's own retries off, ``max_concurrency`` request slots shared by every caller and
handed out by priority (`PrioritySlots`), docpipe's retries (exponential backoff, full jitter, no sooner than a
``Retry-After`` asks), and the rules that turn an SDK failure into the right error (see the package docstring:
unreachable or 5xx/408/429 are retried then `EngineUnavailableError`; 401/403/404 are `ConfigError`; any other
4xx is `Rejected`, which concerns one request only). Answers come back as plain data (``to_dict``), which
`completion` and `streaming` read. Runs on the engine's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx2  # the SDK's HTTP client (a dependency of openai): only its exception types are read here
import openai
from openai import AsyncStream
from openai.types.chat import ChatCompletionChunk

from docpipe.engine.base import PRIORITY_INTERACTIVE, GenerationRequest
from docpipe.engine.openai.completion import Rejected
from docpipe.engine.openai.slots import PrioritySlots
from docpipe.errors import ConfigError, EngineUnavailableError

logger = logging.getLogger(__name__)

HOW_TO_FIX = "start it (e.g. `vllm serve Qwen/Qwen3-14B --reasoning-parser qwen3`) or fix DOCPIPE_ENGINE__URL"
_RETRY_STATUS = frozenset({408, 429})
_MAX_BACKOFF_S = 30.0
# Sent when no API key is configured (servers without --api-key ignore it): the SDK would otherwise send
# OPENAI_API_KEY from the environment, a credential for OpenAI, to whatever server the URL names.
_NO_KEY = "EMPTY"

T = TypeVar("T")


class ServerFailure(Exception):
    """A retryable answer from the server (5xx, 408, 429), with the wait its ``Retry-After`` asks for, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_s(value: str | None) -> float | None:
    """Returns the seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), or None.

    >>> retry_after_s("3"), retry_after_s(None), retry_after_s("soon")
    (3.0, None, None)
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        from email.utils import parsedate_to_datetime

        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


class Transport:
    """The wire side of one `OpenAIEngine`: `complete` returns one completion, `models` the served models and
    `open_stream` a streamed completion that holds its request slot until closed, each retried as the failure
    rules say. Create and use it on one event loop."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        max_concurrency: int,
        timeout_s: float,
        connect_timeout_s: float,
        retries: int,
        backoff_s: float,
    ) -> None:
        self.base_url = base_url
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._api_key = api_key
        # Not a semaphore: a review grid's bulk requests would hold every slot and a question would queue
        # behind all of them. A freed slot goes to the most urgent waiter; bulk leaves one to questions.
        self.slots = PrioritySlots(max_concurrency)
        self._client: openai.AsyncOpenAI | None = None

    async def open(self) -> None:
        """Creates the SDK client (on the loop that will use it)."""
        key = self._api_key or _NO_KEY
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=key,
            # The retries are docpipe's (`retrying`): its backoff, its cap, its reading of Retry-After.
            max_retries=0,
            timeout=openai.Timeout(self.timeout_s, connect=self.connect_timeout_s),
            # Given here, the key also wins over an Authorization in OPENAI_CUSTOM_HEADERS (the SDK's setting).
            default_headers={"Authorization": f"Bearer {key}"},
        )

    async def aclose(self) -> None:
        """Closes the connections (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            raise RuntimeError("the transport is not open")
        return self._client

    async def complete(self, params: dict[str, Any], request: GenerationRequest) -> dict[str, Any]:
        """Returns a non-streamed chat completion for `params` (`completion.request_params`) as plain data."""

        async def attempt() -> dict[str, Any]:
            async with self.slots.hold(priority(request)):
                answer = await self.sdk(self.client.chat.completions.create(**params, extra_headers=headers(request)))
            return self.plain(answer)

        return await self.retrying(attempt)

    async def models(self) -> list[dict[str, Any]]:
        """Returns the entries of the server's model list as plain data (vLLM adds ``max_model_len``)."""

        async def attempt() -> list[dict[str, Any]]:
            async with self.slots.hold(PRIORITY_INTERACTIVE):
                try:
                    page = await self.sdk(self.client.models.list(extra_headers=headers(None)))
                except AttributeError as exc:  # the SDK cannot page an answer that is no JSON (a web page, say)
                    raise self.not_openai("", "its model list is not JSON") from exc
            entries = getattr(page, "data", None)
            if not isinstance(entries, list):
                raise self.not_openai(page, "no model list")
            return [self.plain(entry) for entry in entries]

        return await self.retrying(attempt)

    @contextlib.asynccontextmanager
    async def open_stream(
        self, params: dict[str, Any], request: GenerationRequest
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """Yields the chunks of a streamed chat completion as plain data (retried until it starts), holding a
        request slot until the block ends; failures while reading are mapped as `chunks` says."""

        async def attempt() -> AsyncStream[ChatCompletionChunk]:
            await self.slots.acquire(priority(request))
            try:
                return await self.sdk(
                    self.client.chat.completions.create(
                        **params,
                        stream=True,
                        stream_options={"include_usage": True},
                        extra_headers=headers(request),
                    )
                )
            except BaseException:
                self.slots.release()
                raise

        stream = await self.retrying(attempt)
        chunks = self.chunks(stream)
        try:
            yield chunks
        finally:
            # Release first: a close interrupted by a second cancellation must not keep the slot forever.
            self.slots.release()
            try:
                await stream.close()  # early: the connection is closed, which cancels the request on the server
            finally:
                await chunks.aclose()

    async def chunks(self, stream: AsyncStream[ChatCompletionChunk]) -> AsyncGenerator[dict[str, Any]]:
        """Yields each chunk of `stream` as plain data: a lost connection is `EngineUnavailableError`, an error
        event or a chunk that is not JSON `Rejected`."""
        try:
            async for chunk in stream:
                if not isinstance(chunk, openai.BaseModel):  # JSON, but not an object
                    raise Rejected(f"the server sent a malformed stream chunk: {str(chunk)[:200]!r}")
                yield chunk.to_dict(warnings=False)
        except openai.APIConnectionError as exc:
            raise self.unavailable(f"{self.describe(exc)} while streaming", 1) from exc
        except openai.APIError as exc:  # vLLM's ``data: {"error": ...}`` event
            raise Rejected(f"the server stopped the stream: {error_message(exc.body)}") from exc
        except ValueError as exc:
            raise Rejected(f"the server sent a malformed stream chunk: {_detail(exc)[:200]!r}") from exc

    async def sdk(self, call: Awaitable[T]) -> T:
        """Returns what the SDK `call` returns; an HTTP error status becomes the error it stands for."""
        try:
            return await call
        except openai.APIStatusError as exc:
            raise self.status_error(exc) from exc
        except ValueError as exc:  # a body that says it is JSON and is not
            raise self.not_openai(_detail(exc)) from exc

    def plain(self, answer: object) -> dict[str, Any]:
        """Returns an SDK object as the JSON the server sent; a body that was no JSON object is a `ConfigError`."""
        if isinstance(answer, openai.BaseModel):
            return answer.to_dict(warnings=False)
        raise self.not_openai(answer)

    def not_openai(self, answer: object, what: str = "not JSON") -> ConfigError:
        """Returns the error for a server that does not speak the OpenAI protocol (a web page, say)."""
        shown = f"{what}: {str(answer)[:200]!r}" if answer else what
        return ConfigError(
            f"the server at {self.base_url} did not answer as an OpenAI-compatible server ({shown}): "
            "fix DOCPIPE_ENGINE__URL",
            url=self.base_url,
        )

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Returns the first successful `attempt()`, retrying connection failures and `ServerFailure`."""
        attempts = self.retries + 1
        reachable = False
        for number in range(1, attempts + 1):
            asked: float | None = None
            try:
                return await attempt()
            except openai.APIConnectionError as exc:  # timeouts included
                reason, reachable = self.describe(exc), False
            except ServerFailure as exc:
                reason, reachable, asked = str(exc), True, exc.retry_after
            if number < attempts:
                delay = random.uniform(0, min(_MAX_BACKOFF_S, self.backoff_s * 2 ** (number - 1)))
                if asked is not None:
                    # The server said when to come back (docpipe's own server does with its 503s): not sooner,
                    # and never longer than the backoff's cap.
                    delay = min(max(delay, asked), _MAX_BACKOFF_S)
                logger.warning(
                    "language model server at %s: %s; retry %d of %d in %.2f s",
                    self.base_url,
                    reason,
                    number,
                    self.retries,
                    delay,
                )
                await asyncio.sleep(delay)
        if reachable:
            raise EngineUnavailableError(
                f"the language model server at {self.base_url} keeps failing ({reason}, {attempts} attempts): "
                "check the server's log",
                url=self.base_url,
                reason=reason,
                attempts=attempts,
            )
        raise self.unavailable(reason, attempts)

    def unavailable(self, reason: str, attempts: int) -> EngineUnavailableError:
        """Returns the error for a server that cannot be reached."""
        return EngineUnavailableError(
            f"cannot reach the language model server at {self.base_url} ({reason}): {HOW_TO_FIX}",
            url=self.base_url,
            reason=reason,
            attempts=attempts,
        )

    def status_error(self, exc: openai.APIStatusError) -> Exception:
        """Returns the error an HTTP error status stands for: `ServerFailure` (retried), `ConfigError` or
        `Rejected`."""
        status, response = exc.status_code, exc.response
        message = error_message(_json_or_text(response))
        if status >= 500 or status in _RETRY_STATUS:
            return ServerFailure(f"HTTP {status}: {message}", retry_after_s(response.headers.get("retry-after")))
        if status in (401, 403):
            return ConfigError(
                f"the language model server at {self.base_url} refused the credentials (HTTP {status}: "
                f"{message}): check the API key",
                url=self.base_url,
                status=status,
            )
        if status == 404:
            return ConfigError(
                f"the language model server at {self.base_url} answered HTTP 404 ({message}): check the model "
                "name (DOCPIPE_ENGINE__MODEL) and the URL (DOCPIPE_ENGINE__URL)",
                url=self.base_url,
                status=status,
            )
        return Rejected(f"the language model server rejected the request (HTTP {status}): {message}")

    def describe(self, exc: openai.APIConnectionError) -> str:
        """Returns a short reason for a connection failure: 'connection refused', 'host not found', ..."""
        causes = list(_causes(exc))
        if any(isinstance(cause, httpx2.ConnectTimeout) for cause in causes):
            return f"no connection within {self.connect_timeout_s:g} s"
        if isinstance(exc, openai.APITimeoutError):
            return f"no response within {self.timeout_s:g} s"
        if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
            return "connection refused"
        if any(isinstance(cause, socket.gaierror) for cause in causes):
            return "host not found"
        if any(isinstance(cause, httpx2.RemoteProtocolError) for cause in causes):
            return "the server closed the connection"
        root = causes[-1]
        return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def priority(request: GenerationRequest | None) -> int:
    """Returns the slot priority of a request; a call for no request (the model list) is interactive."""
    return request.priority if request is not None else PRIORITY_INTERACTIVE


def headers(request: GenerationRequest | None) -> dict[str, str | openai.Omit]:
    """Returns the per-request headers: the request id, when the request has one; never the OpenAI account's
    organization or project, which the SDK would take from OPENAI_ORG_ID / OPENAI_PROJECT_ID and which belong to
    OpenAI's service, not to this server."""
    out: dict[str, str | openai.Omit] = {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}
    if request is not None and request.request_id:
        out["X-Request-Id"] = request.request_id
    return out


def error_message(payload: Any) -> str:
    """Returns the server's own error message from vLLM's, OpenAI's or Ollama's error shapes."""
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or error)
        if payload.get("message"):
            return str(payload["message"])
        return str(error)
    return str(payload).strip() or "no message"


def _detail(exc: ValueError) -> str:
    """Returns the text that failed to parse as JSON, or the error's own message."""
    return exc.doc if isinstance(exc, json.JSONDecodeError) else str(exc)


def _json_or_text(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """Yields `exc` and what caused it (the SDK wraps the HTTP client's error, which wraps the OSError; anyio
    groups one per address tried)."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        if current.__cause__ is not None or current.__context__ is not None:
            stack.append(current.__cause__ or current.__context__)  # type: ignore[arg-type]
