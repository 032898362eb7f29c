"""Answer engines behind one batch-first protocol (see `docpipe.engine.base`), and the choice among them."""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from docpipe.engine.base import (
    DIRECT_SAMPLING,
    THINKING_SAMPLING,
    AsyncEngine,
    Engine,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    StreamEvent,
    split_thinking,
)
from docpipe.errors import ConfigError

if TYPE_CHECKING:
    from docpipe.settings import EngineSettings

__all__ = [
    "DIRECT_SAMPLING",
    "THINKING_SAMPLING",
    "AsyncEngine",
    "Engine",
    "GenerationRequest",
    "GenerationResult",
    "SamplingParams",
    "StreamEvent",
    "gpu_available",
    "load_engine",
    "resolve_backend",
    "split_thinking",
]

logger = logging.getLogger(__name__)


def gpu_available() -> bool:
    """Returns True when an NVIDIA GPU is visible and vLLM is installed (checked without importing torch)."""
    has_device = Path("/dev/nvidia0").exists() or bool(os.environ.get("CUDA_VISIBLE_DEVICES", "").strip("-1 "))
    return has_device and importlib.util.find_spec("vllm") is not None


def resolve_backend(settings: EngineSettings, *, gpu: bool | None = None) -> str:
    """Returns the backend the settings select, ``auto`` resolved without loading anything: ``openai`` with a
    URL, ``vllm`` for a local model folder or where there is a GPU (`gpu`; None: this machine), else
    ``extractive``."""
    if settings.backend != "auto":
        return settings.backend
    if settings.url:
        return "openai"
    if Path(settings.model).expanduser().is_dir() or (gpu if gpu is not None else gpu_available()):
        return "vllm"
    return "extractive"


def load_engine(settings: EngineSettings, *, cache_root: Path | None = None) -> Engine | None:
    """Returns the engine the settings select, or None for the extractive answer (see EngineSettings.backend).

    An engine that runs one batch at a time (vllm.LLM; the echo engine stands in for it) comes wrapped in a
    `BatchingEngine` when `max_batch_size` > 1, so callers in threads (UI, API users) share its batches instead
    of queueing one by one, the most urgent first. An engine that takes requests as they come (a model server,
    AsyncLLM: continuous batching, priority scheduling) comes as it is: a batcher would hold a question behind
    a running batch."""
    engine = _open_engine(settings, cache_root)
    if engine is None or settings.max_batch_size <= 1 or getattr(engine, "continuous_batching", False):
        return engine
    from docpipe.engine.batcher import BatchingEngine

    return BatchingEngine(engine, max_batch_size=settings.max_batch_size, batch_timeout_ms=settings.batch_timeout_ms)


def _open_engine(settings: EngineSettings, cache_root: Path | None) -> Engine | None:
    backend = resolve_backend(settings)
    if backend == "extractive":
        return None
    if backend == "echo":
        from docpipe.engine.fake import EchoEngine

        return EchoEngine()
    if backend == "openai":
        if not settings.url:
            raise ConfigError("engine backend 'openai' needs a server URL: set DOCPIPE_ENGINE__URL or --url")
        from docpipe.engine.openai import OpenAIEngine

        model = None if settings.model == "Qwen/Qwen3-14B" else settings.model
        return OpenAIEngine(
            settings.url,
            model=model,
            api_key=settings.api_key,
            max_concurrency=settings.max_concurrency,
            timeout_s=settings.timeout_s,
        )
    from docpipe.engine.vllm import VLLMEngine, settings_args

    return VLLMEngine(settings.model, cache_root=cache_root, **settings_args(settings))
