"""Contract-analysis speed, side by side in one run: the 41-category checklist on the 115-page CUAD contract
as one engine batch (`DocPipe.analyze`) vs one category at a time (41 calls), on the same engine.

Run: .venv/bin/python benchmarks/analysis_speed.py                 (tiny random Qwen3 on this CPU)
     .venv/bin/python benchmarks/analysis_speed.py --model Qwen/Qwen3-14B --budget 4096   (a GPU)
Writes benchmarks/results/analysis_speed.json (or --out) and prints a table.

The tiny model's tokenizer spends several tokens per Qwen3 token, so on the CPU the per-category context
budget defaults to 1024 Qwen3 tokens (about 4-5k tiny-model tokens) inside an 8192-token window; thinking
and answers are capped at 64 tokens each. Both runs skip the answer cache. The extractive (no model)
analysis of the same contract is timed too.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = (
    ROOT.parent
    / "shared"
    / "eval"
    / "cuad-dev"
    / "pdf"
    / "GOOSEHEADINSURANCE_INC_04_02_2018-EX-10.6-Franchise_Agreement.pdf"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pdf", type=Path, default=CONTRACT, help="contract to analyse (default: the 115-page CUAD one)")
    p.add_argument("--model", help="HF id or local folder; default: a tiny random Qwen3 built here")
    p.add_argument("--budget", type=int, default=1024, help="context budget per category, Qwen3 tokens")
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--max-tokens", type=int, default=64, help="answer and thinking budget, each")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "analysis_speed.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.pdf.is_file():
        print(f"contract not found: {args.pdf} (../shared/eval beside the repository)", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT))
    from docpipe import CHECKLIST, DocPipe, Settings
    from docpipe.engine.vllm import VLLMEngine
    from docpipe.testing.models import build_tiny_qwen3

    work = Path(tempfile.mkdtemp(prefix="docpipe-analysis-bench-"))
    model = args.model or str(build_tiny_qwen3(work / "tiny-qwen3"))
    settings = Settings(
        home=work / "home",
        extraction={"extractor": "pypdfium2"},
        analysis={"budget_tokens": args.budget},
        engine={"max_answer_tokens": args.max_tokens, "max_thinking_tokens": args.max_tokens, "model": model},
    )
    offline = DocPipe(
        settings.model_copy(update={"engine": settings.engine.model_copy(update={"backend": "extractive"})})
    )
    started = time.perf_counter()
    doc = offline.ingest(args.pdf)
    ingest_s = time.perf_counter() - started
    started = time.perf_counter()
    offline.analyze(doc, use_cache=False)
    extractive_s = time.perf_counter() - started

    engine = VLLMEngine(model, max_model_len=args.max_model_len, cache_root=work / "vllm-cache")
    try:
        dp = DocPipe(settings, engine=engine, embedder=offline.embedder)
        dp.analyze(doc, ["Parties"], use_cache=False)  # warm-up: compile paths, first prefill
        started = time.perf_counter()
        batched = dp.analyze(doc, use_cache=False)
        batched_s = time.perf_counter() - started
        batches = list(engine.batch_sizes)
        started = time.perf_counter()
        for category in CHECKLIST:
            dp.analyze(doc, [category.name], use_cache=False)
        sequential_s = time.perf_counter() - started
    finally:
        engine.close()

    result = {
        "contract": args.pdf.name,
        "pages": len(doc.pages),
        "sections": len(doc.sections),
        "model": "tiny random Qwen3 (CPU)" if args.model is None else args.model,
        "budget_tokens": args.budget,
        "max_tokens": args.max_tokens,
        "ingest_s": round(ingest_s, 2),
        "extractive_analysis_s": round(extractive_s, 2),
        "batched_s": round(batched_s, 2),
        "one_category_at_a_time_s": round(sequential_s, 2),
        "speedup": round(sequential_s / batched_s, 2),
        "engine_batches": batches,
        "statuses": {s: sum(f.status == s for f in batched.findings) for s in ("present", "absent", "uncertain")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.pdf.name}: {len(doc.pages)} pages, {len(doc.sections)} sections (ingest {ingest_s:.1f} s)")
    print(f"extractive analysis, 41 categories:           {extractive_s:7.1f} s")
    print(f"engine, 41 categories in one batch:           {batched_s:7.1f} s")
    print(f"engine, one category at a time (41 calls):    {sequential_s:7.1f} s   ({sequential_s / batched_s:.1f}x)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
