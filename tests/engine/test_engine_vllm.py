"""The real vLLM engine (CPU build) on a tiny random Qwen3-architecture model built by the tests.

The engine contract (docpipe.testing.engine_contract: order, per-request thinking, no <think> in the answer,
max_tokens, priorities, streaming, leaving a stream early, failures, close) runs on both in-process engines,
`VLLMEngine` and `AsyncVLLMEngine`; here besides: the chat template's thinking switch, the thinking budget,
the pipeline and the checklist analysis through the real engine, AsyncLLM sharing steps among callers, and a
broken model folder. One in-process engine at a time: the async one starts after the offline one is closed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: pip install 'docpipe-contracts[cpu]'")


from docpipe import ConfigError, DocPipe, Settings  # noqa: E402
from docpipe.engine.base import GenerationRequest, SamplingParams  # noqa: E402
from docpipe.testing.engine_contract import EngineContract, EngineDriver, contract_request, engine_on_loop  # noqa: E402
from docpipe.testing.models import build_tiny_qwen3  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def offline_engine(tiny: Path, tmp_path_factory: pytest.TempPathFactory):
    from docpipe.engine.vllm import VLLMEngine

    engine = VLLMEngine(str(tiny), max_model_len=2048, cache_root=tmp_path_factory.mktemp("vllm-cache"))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def engine(offline_engine):
    return offline_engine


@pytest.fixture(scope="module")
def engine_and_portal(offline_engine, tiny: Path, tmp_path_factory: pytest.TempPathFactory):
    """Returns (AsyncVLLMEngine, the loop thread it lives on), started on first use, after the offline engine."""
    from docpipe.engine.vllm import AsyncVLLMEngine

    offline_engine.close()  # one in-process engine at a time: release the offline one first
    cache = tmp_path_factory.mktemp("vllm-async-cache")
    with engine_on_loop(lambda: AsyncVLLMEngine(str(tiny), max_model_len=2048, cache_root=cache)) as pair:
        yield pair


def test_thinking_switch_changes_the_rendered_prompt(engine) -> None:
    plain, thinking = (GenerationRequest.chat("S", "Q?", thinking=flag) for flag in (False, True))
    assert engine.render(plain).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert engine.render(thinking).endswith("<|im_start|>assistant\n")
    # That the switch reaches a mixed batch (more prompt tokens for the plain request) is in the contract below.


def test_thinking_budget_closes_a_cut_thought(engine) -> None:
    request = GenerationRequest.chat(
        "S",
        "Think about clause 12.3.",
        thinking=True,
        max_thinking_tokens=4,
        sampling=SamplingParams(max_tokens=6, seed=3),
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
    from docpipe.answer.verify import verify_quote

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


def test_broken_model_folder_fails_clearly_and_quickly(tmp_path: Path) -> None:
    from docpipe.engine.vllm import VLLMEngine

    (tmp_path / "weights.bin").write_bytes(b"not a model")
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="config.json"):
        VLLMEngine(str(tmp_path))
    assert time.perf_counter() - started < 5


class _TinyQwen3(EngineContract):
    reports_thinking = False  # random weights, no reasoning parser: a thinking request may not think at all
    overlong_words = 3000  # the 2,048-token window

    # Closing stays the last test of the class (pytest runs a subclass's own tests after the inherited ones).
    test_close_is_idempotent = EngineContract.test_close_is_idempotent


class TestVLLMEngineContract(_TinyQwen3):
    """The engine contract on `VLLMEngine` (offline batches; it does not stream)."""

    streams = False


class TestAsyncVLLMEngineContract(_TinyQwen3):
    """The engine contract on `AsyncVLLMEngine`, which lives on one event loop for its whole life."""

    exact_stream = False  # the final text is stripped; streamed deltas keep the model's whitespace
    thinking_budget = False  # AsyncVLLMEngine has no thinking budget: a random thought runs to max_tokens

    @pytest.fixture
    def engine(self, engine_and_portal):
        return engine_and_portal[0]

    @pytest.fixture
    def driver(self, engine_and_portal) -> EngineDriver:
        async_engine, portal = engine_and_portal
        return EngineDriver(async_engine, portal=portal)

    def test_concurrent_callers_share_engine_steps(self, driver: EngineDriver) -> None:
        requests = [contract_request(f"question {i}", max_tokens=16, seed=i) for i in range(8)]
        results = driver.generate(requests)
        assert all(r.error is None and 1 <= r.completion_tokens <= 16 for r in results)
        assert max(driver.engine.in_flight_samples) > 1  # concurrent callers shared engine steps

    # Closing stays the last test of the class (pytest runs a subclass's own tests after the inherited ones).
    test_close_is_idempotent = EngineContract.test_close_is_idempotent
