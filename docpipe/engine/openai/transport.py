"""HTTP to an OpenAI-compatible server, for `OpenAIEngine`: one ``httpx.AsyncClient``, ``max_concurrency``
request slots shared by every caller and handed out by priority (`PrioritySlots`), retries with exponential
backoff and full jitter, and the rules that turn an HTTP failure into the right error (see the package
docstring: unreachable or 5xx/408/429 are retried then `EngineUnavailableError`; 401/403/404 are `ConfigError`;
any other 4xx is `Rejected`, which concerns one request only). Runs on the engine's event loop; imports httpx,
docpipe.errors and the engine protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from docpipe.engine.base import PRIORITY_INTERACTIVE, GenerationRequest
from docpipe.engine.openai.completion import Rejected
from docpipe.engine.openai.slots import PrioritySlots
from docpipe.errors import ConfigError, EngineUnavailableError

try:
    import httpx
except ImportError:  # pragma: no cover - httpx comes with the server-side extras
    httpx = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

HOW_TO_FIX = "start it (e.g. `vllm serve Qwen/Qwen3-14B --reasoning-parser qwen3`) or fix DOCPIPE_ENGINE__URL"
_RETRY_STATUS = frozenset({408, 429})
_MAX_BACKOFF_S = 30.0

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
    """The HTTP side of one `OpenAIEngine`: `call` sends a JSON request with retries and returns the JSON answer;
    `open_stream` holds a request slot for a streamed response. Create and use it on one event loop."""

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
        self._client: httpx.AsyncClient | None = None

    async def open(self) -> None:
        """Creates the HTTP client (on the loop that will use it)."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s),
            # A few connections beyond the request slots, for /models and for streams being closed.
            # No pool cap: the request slots bound the load, and httpcore 1.0.9 leaks a pool entry when a
            # request is cancelled while connecting (encode/httpcore#1093): a cap would fill up and block.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=self.max_concurrency),
        )

    async def aclose(self) -> None:
        """Closes the connections (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the transport is not open")
        return self._client

    async def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, request: GenerationRequest | None = None
    ) -> dict[str, Any]:
        """Returns the server's JSON answer to one request, retried as the failure rules say."""
        return await self.retrying(lambda: self.send(method, path, body, request))

    async def send(
        self, method: str, path: str, body: dict[str, Any] | None = None, request: GenerationRequest | None = None
    ) -> dict[str, Any]:
        """Returns the server's JSON answer to one attempt (no retry), holding a request slot (at the request's
        priority) while it waits."""
        async with self.slots.hold(priority(request)):
            response = await self.client.request(method, path, json=body, headers=headers(request))
        self.check(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise ConfigError(
                f"the server at {self.base_url} did not answer as an OpenAI-compatible server "
                f"(not JSON: {response.text[:200]!r}): fix DOCPIPE_ENGINE__URL",
                url=self.base_url,
            ) from exc
        return data if isinstance(data, dict) else {}

    @contextlib.asynccontextmanager
    async def open_stream(self, body: dict[str, Any], request: GenerationRequest) -> AsyncIterator[httpx.Response]:
        """Yields the streamed response of a POST to chat/completions (retried until it starts), holding a
        request slot until the response is closed."""

        async def attempt() -> httpx.Response:
            await self.slots.acquire(priority(request))
            response: httpx.Response | None = None
            try:
                built = self.client.build_request("POST", "chat/completions", json=body, headers=headers(request))
                response = await self.client.send(built, stream=True)
                if response.status_code >= 400:
                    await response.aread()
                    self.check(response)  # raises
                return response  # the slot goes with it
            except BaseException:
                try:
                    if response is not None:
                        await response.aclose()
                finally:
                    self.slots.release()
                raise

        response = await self.retrying(attempt)
        try:
            yield response
        finally:
            # Release first: a close interrupted by a second cancellation must not keep the slot forever.
            self.slots.release()
            await response.aclose()

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Returns the first successful `attempt()`, retrying transport failures and `ServerFailure`."""
        attempts = self.retries + 1
        reachable = False
        for number in range(1, attempts + 1):
            asked: float | None = None
            try:
                return await attempt()
            except httpx.TransportError as exc:
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

    def check(self, response: httpx.Response) -> None:
        """Raises the error an HTTP error status stands for; does nothing below 400."""
        status = response.status_code
        if status < 400:
            return
        message = error_message(_json_or_text(response))
        if status >= 500 or status in _RETRY_STATUS:
            raise ServerFailure(f"HTTP {status}: {message}", retry_after_s(response.headers.get("retry-after")))
        if status in (401, 403):
            raise ConfigError(
                f"the language model server at {self.base_url} refused the credentials (HTTP {status}: "
                f"{message}): check the API key",
                url=self.base_url,
                status=status,
            )
        if status == 404:
            raise ConfigError(
                f"the language model server at {self.base_url} answered HTTP 404 ({message}): check the model "
                "name (DOCPIPE_ENGINE__MODEL) and the URL (DOCPIPE_ENGINE__URL)",
                url=self.base_url,
                status=status,
            )
        raise Rejected(f"the language model server rejected the request (HTTP {status}): {message}")

    def describe(self, exc: Exception) -> str:
        """Returns a short reason for a transport failure: 'connection refused', 'host not found', ..."""
        if isinstance(exc, httpx.ConnectTimeout):
            return f"no connection within {self.connect_timeout_s:g} s"
        if isinstance(exc, httpx.TimeoutException):
            return f"no response within {self.timeout_s:g} s"
        causes = list(_causes(exc))
        if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
            return "connection refused"
        if any(isinstance(cause, socket.gaierror) for cause in causes):
            return "host not found"
        if isinstance(exc, httpx.RemoteProtocolError):
            return "the server closed the connection"
        root = causes[-1]
        return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def priority(request: GenerationRequest | None) -> int:
    """Returns the slot priority of a request; a call for no request (the model list) is interactive."""
    return request.priority if request is not None else PRIORITY_INTERACTIVE


def headers(request: GenerationRequest | None) -> dict[str, str]:
    """Returns the per-request headers: the request id, when the request has one."""
    return {"X-Request-Id": request.request_id} if request is not None and request.request_id else {}


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


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """Yields `exc` and what caused it (httpx wraps the OSError; anyio groups one per address tried)."""
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
