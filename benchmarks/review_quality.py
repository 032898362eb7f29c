"""Review-grid quality offline: the checklist grid over ../shared/eval/cuad-dev against CUAD's expert labels, beside
the per-document `docpipe eval-analysis` figures for the same contracts.

    .venv/bin/python benchmarks/review_quality.py --out docs/benchmarks/review_quality.json    # ~2 min on 2 cores

No language model (engine backend ``extractive``), the default embedder, the 20 contracts of cuad-dev read in
place and ingested once into a temporary store. The grid is `dp.review(contracts, checklist=True,
use_cache=False)`: 20 x 41 cells, each ``candidate`` (with the best-matching clauses quoted) or ``not_found``.
Per column (category) and overall, over the (contract, category) pairs where CUAD marks a clause:

- recall: the share where one of the cell's quotes overlaps a gold clause;
- false not_found rate: the share whose cell says ``not_found``;

and, over the pairs CUAD leaves empty, the share the grid still calls ``candidate``. Gold clauses are read and
matched as `docpipe eval-analysis` reads and matches them (`docpipe.eval.analysis`: spans shorter than
MIN_SPAN_CHARS normalised characters are dropped; a quote overlaps a clause when one contains the other or their
word F1 (`span_f1`) is at least 0.5). Beside them, `evaluate_analysis` (what `docpipe eval-analysis
../shared/eval/cuad-dev --engine extractive --json` runs: `DocPipe.analyze` per document) on the same store, with
the same two figures computed from its rows, and the pairs on which the grid and the per-document analysis
disagree (status or quote hit), which should be none: the grid's offline cells use the same retrieval and the
same candidate picker.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CUAD = ROOT.parent / "shared" / "eval" / "cuad-dev"
CUAD_SHOWN = "../shared/eval/cuad-dev"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=None, help="first N contracts only (default: all 20)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "review_quality.json")
    return p.parse_args(argv)


def gold_clauses(folder: Path) -> dict[str, dict[str, list[str]]]:
    """Returns file -> category (case-folded) -> the gold spans `eval-analysis` scores against (empty: no clause)."""
    from docpipe.eval.analysis import MIN_SPAN_CHARS
    from docpipe.eval.retrieval import normalise_span

    gold: dict[str, dict[str, list[str]]] = {}
    with (folder / "annotations.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            spans = [
                a["text"] for a in record.get("answer_spans", []) if len(normalise_span(a["text"])) >= MIN_SPAN_CHARS
            ]
            labelled = bool(record.get("has_answer")) and bool(spans)
            gold.setdefault(record["file"], {})[record["clause_category"].casefold()] = spans if labelled else []
    return gold


def quote_hit(quotes: list[str], spans: list[str]) -> bool:
    from docpipe.eval.analysis import span_f1

    return any(span_f1(q, g) >= 0.5 for q in quotes for g in spans)


def figures(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    labelled = [p for p in pairs if p["labelled"]]
    empty = [p for p in pairs if not p["labelled"]]

    def ratio(n: int, d: int) -> float | None:
        return round(n / d, 4) if d else None

    return {
        "pairs": len(pairs),
        "with_clause": len(labelled),
        "recall": ratio(sum(p["quote_hit"] for p in labelled), len(labelled)),
        "false_not_found_rate": ratio(sum(p["status"] == "not_found" for p in labelled), len(labelled)),
        "candidate_rate_without_clause": ratio(sum(p["status"] == "candidate" for p in empty), len(empty)),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from docpipe import DocPipe, Settings
    from docpipe.eval.analysis import evaluate_analysis
    from docpipe.version import __version__

    started_all = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    gold = gold_clauses(CUAD)
    files = sorted(gold)[: args.limit or None]
    work = Path(tempfile.mkdtemp(prefix="docpipe-review-quality-"))
    settings = Settings(home=work / "home", engine={"backend": "extractive"})
    dp = DocPipe(settings)
    assert dp.engine is None
    started = time.perf_counter()
    docs = [dp.ingest(CUAD / f) for f in files]
    ingest_s = time.perf_counter() - started

    # The grid, twice: the first run also embeds and stores each contract's sentences for the offline clause
    # picker, which every later grid or analysis of the contract reuses; the second is timed beside the analysis.
    started = time.perf_counter()
    dp.review(docs, checklist=True, use_cache=False)
    first_grid_s = time.perf_counter() - started
    started = time.perf_counter()
    grid = dp.review(docs, checklist=True, use_cache=False)
    grid_s = time.perf_counter() - started
    grid_pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for file, row in zip(files, grid.cells):
        for column, cell in zip(grid.columns, row):
            spans = gold[file].get(column.key.casefold())
            if spans is None:  # a category CUAD has no record of for this contract
                continue
            quotes = [q.quote for q in cell.quotes]
            grid_pairs[(file, column.key)] = {
                "labelled": bool(spans),
                "status": cell.status,
                "quote_hit": bool(spans) and quote_hit(quotes, spans),
            }

    # The per-document analysis on the same store (what `docpipe eval-analysis --engine extractive` runs).
    started = time.perf_counter()
    report = evaluate_analysis(dp, CUAD, limit=args.limit, keep_rows=True)
    analysis_s = time.perf_counter() - started
    file_of = {}  # eval-analysis names a contract by its CUAD id
    with (CUAD / "annotations.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                file_of[record["contract_id"]] = record["file"]
    analysis_pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for row in report["rows"]:
        file = file_of.get(row["contract"], row["contract"])
        analysis_pairs[(file, row["category"].casefold())] = {
            "labelled": row["labelled"],
            "status": row["status"],
            "quote_hit": row["labelled"] and row["quote_hit"],
        }

    categories = [c.key for c in grid.columns]
    per_column = {}
    for category in categories:
        in_grid = [v for (_, c), v in grid_pairs.items() if c == category]
        in_analysis = [v for (_, c), v in analysis_pairs.items() if c == category.casefold()]
        per_column[category] = {"grid": figures(in_grid), "eval_analysis": figures(in_analysis)}

    disagreements = []
    for (file, category), pair in grid_pairs.items():
        other = analysis_pairs.get((file, category.casefold()))
        if other is None or other["status"] != pair["status"] or other["quote_hit"] != pair["quote_hit"]:
            disagreements.append({"contract": file, "category": category, "grid": pair, "eval_analysis": other})

    overall_grid = figures(list(grid_pairs.values()))
    overall_analysis = figures(list(analysis_pairs.values()))
    notes = [
        "recall counts a pair as found when any of the cell's quotes overlaps a gold clause, whatever the cell's "
        "status; eval-analysis's own quote_hit_rate counts only pairs it reports candidate, so it is higher "
        "than the recall here (both are given).",
        "false_not_found_rate = 1 - eval-analysis's presence_recall when every cell is candidate or not_found.",
    ]
    if not disagreements:
        notes.append(
            "The grid and the per-document analysis agree on every (contract, category) pair: same status, same "
            "quote hit. The grid's offline cells run the same retrieval (select_context with analysis.k, "
            "analysis.budget_tokens and expand_references) and the same candidate picker (candidate_finding)."
        )
    else:
        notes.append(
            f"The grid and the per-document analysis disagree on {len(disagreements)} pairs: see 'disagreements'."
        )
    result = {
        "benchmark": "review_quality",
        "command": "python benchmarks/review_quality.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "docpipe": __version__,
            "load_average_at_start": load_at_start,
        },
        "data": {
            "source": CUAD_SHOWN,
            "contracts": len(files),
            "pages": sum(len(d.pages) for d in docs),
            "categories": len(categories),
            "pairs_scored": len(grid_pairs),
            "labels": "CUAD v1 expert annotations (annotations.jsonl): a pair has a clause when has_answer and a "
            "gold span of at least MIN_SPAN_CHARS normalised characters",
        },
        "settings": {
            "engine": "extractive (no language model)",
            "embedder": settings.embedding.model,
            "analysis.budget_tokens": settings.analysis.budget_tokens,
            "analysis.k": settings.analysis.k,
            "analysis.expand_references": settings.analysis.expand_references,
            "analysis.min_candidate_score": settings.analysis.min_candidate_score,
            "analysis.candidate_clauses": settings.analysis.candidate_clauses,
            "use_cache": False,
        },
        "eval_analysis_command": "docpipe eval-analysis ../shared/eval/cuad-dev --engine extractive --json "
        "(here: docpipe.eval.analysis.evaluate_analysis on the same store)",
        "seconds": {
            "ingest": round(ingest_s, 1),
            "grid_first_run (sentence embeddings computed and stored)": round(first_grid_s, 1),
            "grid": round(grid_s, 1),
            "eval_analysis": round(analysis_s, 1),
        },
        "overall": {
            "grid": overall_grid,
            "eval_analysis": overall_analysis,
            "eval_analysis_report": report["overall"],
        },
        "per_column": per_column,
        "disagreements": disagreements,
        "notes": notes,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "runtime_s": round(time.perf_counter() - started_all, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"overall": result["overall"], "disagreements": len(disagreements)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
