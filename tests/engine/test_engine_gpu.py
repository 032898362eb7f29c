"""The engine contract (docpipe.testing.engine_contract) on CUDA: the same tests as the CPU runs in
test_engine_vllm.py, on a real Qwen3 model. Skipped without an NVIDIA GPU and vLLM.

Run on a GPU machine: ``pytest -m gpu`` (DOCPIPE_GPU_TEST_MODEL picks the model, default Qwen/Qwen3-0.6B).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docpipe.engine import gpu_available
from docpipe.testing.engine_contract import EngineContract, EngineDriver, engine_on_loop

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.integration,
    pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and vLLM (pip install 'docpipe-contracts[gpu]')"),
]

MODEL = os.environ.get("DOCPIPE_GPU_TEST_MODEL", "Qwen/Qwen3-0.6B")
WINDOW = 4096


class _Qwen3OnGPU(EngineContract):
    # A real Qwen3 thinks when asked, but a thought cut by a small max_tokens before it even opens is possible:
    # the contract's thinking checks that hold for any output apply, as on the CPU.
    reports_thinking = False
    overlong_words = 2 * WINDOW


@pytest.fixture(scope="module")
def offline_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from docpipe.engine.vllm import VLLMEngine

    engine = VLLMEngine(MODEL, max_model_len=WINDOW, cache_root=tmp_path_factory.mktemp("vllm-cache"))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def engine_and_portal(offline_engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    from docpipe.engine.vllm import AsyncVLLMEngine

    offline_engine.close()  # one in-process engine at a time, as on the CPU
    cache: Path = tmp_path_factory.mktemp("vllm-async-cache")
    with engine_on_loop(lambda: AsyncVLLMEngine(MODEL, max_model_len=WINDOW, cache_root=cache)) as pair:
        yield pair


class TestVLLMEngineContractOnGPU(_Qwen3OnGPU):
    streams = False

    @pytest.fixture
    def engine(self, offline_engine: Any) -> Any:
        return offline_engine


class TestAsyncVLLMEngineContractOnGPU(_Qwen3OnGPU):
    exact_stream = False

    @pytest.fixture
    def engine(self, engine_and_portal: tuple[Any, Any]) -> Any:
        return engine_and_portal[0]

    @pytest.fixture
    def driver(self, engine_and_portal: tuple[Any, Any]) -> EngineDriver:
        async_engine, portal = engine_and_portal
        return EngineDriver(async_engine, portal=portal)
