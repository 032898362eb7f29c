"""The real vLLM engine (CPU build) on a tiny random Qwen3-architecture model built by the tests: batches
keep order, the thinking switch reaches the chat template, <think> never reaches the answer, the thinking
budget closes cut thoughts, AsyncLLM batches concurrent callers, streams and aborts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: pip install 'docpipe[cpu]'")

from docpipe import ConfigError, DocPipe, Settings  # noqa: E402
from docpipe.engine.base import GenerationRequest, SamplingParams  # noqa: E402
from docpipe.testing.models import build_tiny_qwen3  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def engine(tiny: Path, tmp_path_factory: pytest.TempPathFactory):
    from docpipe.engine.vllm import VLLMEngine

    engine = VLLMEngine(str(tiny), max_model_len=2048, cache_root=tmp_path_factory.mktemp("vllm-cache"))
    yield engine
    engine.close()


def _requests(n: int, *, thinking=lambda i: i % 2 == 0) -> list[GenerationRequest]:
    # Distinguishable: prompt i has i repeated words and may generate at most i + 1 tokens.
    return [
        GenerationRequest.chat(
            "You answer from contracts.",
            "notice " * i + "?",
            thinking=thinking(i),
            sampling=SamplingParams(max_tokens=i + 1, seed=i),
        )
        for i in range(1, n + 1)
    ]


def test_batch_results_come_back_in_request_order(engine) -> None:
    requests = _requests(8)
    results = engine.generate(requests)
    assert len(results) == 8
    for i, result in enumerate(results, 1):
        assert 1 <= result.completion_tokens <= i + 1
        assert "<think>" not in result.text
    # Prompt lengths grow with i within each thinking group: the order was kept.
    for parity in (0, 1):
        group = [r.prompt_tokens for i, r in enumerate(results, 1) if i % 2 == parity]
        assert group == sorted(group) and len(set(group)) == len(group)
    assert engine.batch_sizes[-1] == 8


def test_thinking_switch_changes_the_rendered_prompt(engine) -> None:
    plain, thinking = (GenerationRequest.chat("S", "Q?", thinking=flag) for flag in (False, True))
    assert engine.render(plain).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert engine.render(thinking).endswith("<|im_start|>assistant\n")
    results = engine.generate([plain, thinking])
    # The closed empty think block costs prompt tokens only in non-thinking mode.
    assert results[0].prompt_tokens > results[1].prompt_tokens


def test_thinking_budget_closes_a_cut_thought(engine) -> None:
    request = GenerationRequest.chat(
        "S", "Think about clause 12.3.", thinking=True, max_thinking_tokens=4, sampling=SamplingParams(max_tokens=6, seed=3)
    )
    result = engine.generate([request])[0]
    assert result.thinking_truncated  # a random model does not close </think> within 4 tokens
    assert result.thinking and "<think>" not in result.text and "</think>" not in result.text
    assert result.completion_tokens <= 4 + 6


def test_pipeline_answers_through_the_real_engine(engine, tmp_path: Path, sample_pdf: Path) -> None:
    # The tiny tokenizer spends several tokens per Qwen3 token: keep the context small for its 2k window.
    settings = Settings.preset(
        "test",
        home=tmp_path,
        retrieval={"budget_tokens": 256, "k": 2},
        engine={"max_answer_tokens": 16, "max_thinking_tokens": 16},
    )
    dp = DocPipe(settings, engine=engine)
    questions = ["What is the notice period for termination for convenience?", "What are the risks of 9.1?"]
    answers = dp.ask_many(dp.ingest(sample_pdf), questions, use_cache=False)
    assert [a.question for a in answers] == questions
    assert all(a.mode == "generative" and a.engine == "vllm" and "<think>" not in a.text for a in answers)
    assert [a.thinking_enabled for a in answers] == [False, True]
    # Random weights quote nothing real: any quote must be flagged, never shown as verified.
    assert all(not c.verified for a in answers for c in a.citations if "ninety" not in c.quote)


def test_analysis_sends_every_category_as_one_thinking_batch(engine, tmp_path: Path, sample_pdf: Path) -> None:
    from docpipe.answer.compose import verify_quote

    settings = Settings.preset(
        "test",
        home=tmp_path,
        analysis={"budget_tokens": 128, "k": 2},
        engine={"max_answer_tokens": 16, "max_thinking_tokens": 16},
    )
    dp = DocPipe(settings, engine=engine)
    doc = dp.ingest(sample_pdf)
    before = len(engine.batch_sizes)
    report = dp.analyze(doc, use_cache=False)
    assert engine.batch_sizes[before] == 41  # all categories in the first batch (a second may finish cut thoughts)
    assert report.mode == "generative" and report.manifest.engine == "vllm" and report.manifest.thinking
    assert report.manifest.model_revision.startswith("local-sha256:")
    assert len(report.findings) == 41 and {f.status for f in report.findings} <= {"present", "absent", "uncertain"}
    assert all(f.thinking for f in report.findings), "thinking mode: every category's reply starts with a thought"
    for finding in report.findings:
        assert "<think>" not in finding.note
        for quote in finding.quotes:
            assert quote.verified == verify_quote(quote.quote, doc)[0]
        if finding.status == "present":  # only a verified quote makes a finding present
            assert any(q.verified for q in finding.quotes)


def test_async_engine_batches_streams_and_aborts(engine, tiny: Path, tmp_path: Path) -> None:
    from docpipe.engine.vllm import AsyncVLLMEngine

    engine.close()  # one in-process engine at a time: release the offline one first

    async def scenario() -> None:
        async_engine = AsyncVLLMEngine(str(tiny), max_model_len=2048, cache_root=tmp_path)
        try:
            requests = [GenerationRequest.chat("S", f"question {i}", sampling=SamplingParams(max_tokens=16, seed=i)) for i in range(8)]
            results = await async_engine.generate(requests)
            assert [r.completion_tokens for r in results] == [16] * 8 or all(r.completion_tokens <= 16 for r in results)
            assert max(async_engine.in_flight_samples) > 1  # concurrent callers shared engine steps

            events = [e async for e in async_engine.stream(GenerationRequest.chat("S", "stream", sampling=SamplingParams(max_tokens=12, seed=1)))]
            assert events[-1].kind == "done"
            streamed = "".join(e.text for e in events if e.kind == "answer")
            assert " ".join(streamed.split()) == " ".join(events[-1].result.text.split())

            started = time.perf_counter()
            stream = async_engine.stream(GenerationRequest.chat("S", "long", sampling=SamplingParams(max_tokens=1500, seed=2)))
            seen = 0
            async for _event in stream:
                seen += 1
                if seen == 3:
                    break
            await stream.aclose()  # aborts the request in the engine
            assert time.perf_counter() - started < 30
            after = await async_engine.complete(GenerationRequest.chat("S", "after abort", sampling=SamplingParams(max_tokens=4)))
            assert after.completion_tokens >= 1
        finally:
            await async_engine.aclose()

    asyncio.run(scenario())


def test_broken_model_folder_fails_clearly_and_quickly(tmp_path: Path) -> None:
    from docpipe.engine.vllm import VLLMEngine

    (tmp_path / "weights.bin").write_bytes(b"not a model")
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="config.json"):
        VLLMEngine(str(tmp_path))
    assert time.perf_counter() - started < 5
