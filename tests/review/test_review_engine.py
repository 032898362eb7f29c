"""Review grids through the real vLLM engine (CPU build) on the tests' tiny random Qwen3-architecture model:
every cell filled, and the engine's prefix cache reported per request (`extra["cached_tokens"]`, by both
in-process engines) and summed in the grid's manifest, with the shared layout (one context per document, the
cell's question last) served from it far more than per_cell. One in-process engine at a time: the async one
starts, in the last test, after the offline one is closed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: pip install 'docpipe-contracts[cpu]'")

from docpipe import DocPipe, Settings  # noqa: E402
from docpipe.engine.base import GenerationRequest, SamplingParams  # noqa: E402
from docpipe.testing.models import build_tiny_qwen3  # noqa: E402

pytestmark = pytest.mark.integration

CATEGORIES = ["Parties", "Governing Law", "Termination for Convenience", "Cap on Liability", "Insurance"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def engine(tiny: Path, tmp_path_factory: pytest.TempPathFactory):
    from docpipe.engine.vllm import VLLMEngine

    # 4k of the model's 8k positions: the tiny tokenizer spends several tokens per Qwen3 token, and a review
    # cell's instructions alone are ~1.4k of them.
    engine = VLLMEngine(str(tiny), max_model_len=4096, cache_root=tmp_path_factory.mktemp("vllm-cache"))
    yield engine
    engine.close()


def test_engine_reports_prefix_cache_hits(engine) -> None:
    assert engine.args["enable_prefix_caching"] is True
    shared = "Clause 12.3: either party may terminate for convenience on ninety days' notice. " * 40
    requests = [
        GenerationRequest.chat(shared, f"Question {i}?", sampling=SamplingParams(max_tokens=2, seed=1))
        for i in range(2)
    ]
    engine.reset_prefix_cache()
    cold = engine.generate(requests[:1])[0]
    warm = engine.generate(requests[1:])[0]
    assert cold.extra["cached_tokens"] == 0
    # The long system prompt is a common prefix: whole KV blocks of it come from the cache, never all the prompt.
    assert warm.prompt_tokens // 2 < warm.extra["cached_tokens"] < warm.prompt_tokens


def test_budgeted_thinking_reports_the_first_pass_and_the_continuation_apart(engine) -> None:
    request = GenerationRequest.chat(
        "S", "Think about clause 12.3.", thinking=True, max_thinking_tokens=4, sampling=SamplingParams(max_tokens=4)
    )
    result = engine.generate([request])[0]
    assert result.thinking_truncated  # two passes: the budget cut the thought
    extra = result.extra
    assert 0 <= extra["cached_tokens"] < result.prompt_tokens
    assert extra["continuation_prompt_tokens"] > result.prompt_tokens
    assert 0 <= extra["continuation_cached_tokens"] < extra["continuation_prompt_tokens"]


def test_shared_layout_is_served_from_the_prefix_cache(engine, tmp_path: Path, sample_pdf: Path) -> None:
    settings = Settings.preset(
        "test",
        home=tmp_path,
        analysis={"budget_tokens": 128, "k": 2},
        review={"shared_budget_tokens": 512, "batch_size": 2},
        engine={"max_answer_tokens": 8, "max_thinking_tokens": 8},
    )
    dp = DocPipe(settings, engine=engine)  # batches of 2: the grid keeps two in flight from two threads
    docs = [dp.ingest(sample_pdf)]
    share: dict[str, float] = {}
    for layout in ("shared", "per_cell"):
        engine.reset_prefix_cache()  # each layout from a cold cache: neither is served by the other's prompts
        grid = dp.review(docs, categories=CATEGORIES, layout=layout, use_cache=False)
        assert grid.manifest.layout == layout and grid.manifest.cells == len(CATEGORIES)
        statuses = [cell.status for row in grid.cells for cell in row]
        assert len(statuses) == len(CATEGORIES) and set(statuses) <= {"present", "absent", "uncertain"}
        assert not grid.manifest.cached_cells
        cached, prompt = grid.manifest.prefix_cached_tokens, grid.manifest.prompt_tokens
        assert cached is not None and prompt > 0
        share[layout] = cached / prompt
    assert share["shared"] > 0
    # Per cell, only the instructions (and the pinned front matter) are common to a document's cells.
    assert share["shared"] > share["per_cell"] + 0.2, share


def test_async_engine_reports_prefix_cache_hits(engine, tiny: Path, tmp_path: Path) -> None:
    from docpipe.engine.vllm import AsyncVLLMEngine
    from docpipe.testing.engine_contract import engine_on_loop

    engine.close()  # one in-process engine at a time (this test runs last): release the offline one first
    shared = "Clause 9.1: liability is capped at the fees paid in the twelve months before the claim. " * 40
    requests = [
        GenerationRequest.chat(shared, f"Question {i}?", sampling=SamplingParams(max_tokens=2, seed=1))
        for i in range(2)
    ]
    with engine_on_loop(lambda: AsyncVLLMEngine(str(tiny), max_model_len=4096, cache_root=tmp_path)) as pair:
        async_engine, portal = pair
        cold = portal.run(async_engine.complete(requests[0]))
        warm = portal.run(async_engine.complete(requests[1]))
    assert cold.extra["cached_tokens"] == 0
    assert warm.prompt_tokens // 2 < warm.extra["cached_tokens"] < warm.prompt_tokens
