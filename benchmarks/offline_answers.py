"""Offline answers (no language model) on plain-language questions: `docpipe eval-answers` on cuad-dev (every
record, and the first 3 per category), and on contracts of the data room (cuad-collection-dev) that are not in
cuad-dev, where nothing was tuned; each beside the naive anchor, in the same run.

    .venv/bin/python benchmarks/offline_answers.py [--held-out N]

Writes docs/benchmarks/offline_answers.json. Reads ../shared/eval in place.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"


def main() -> None:
    from docpipe import DocPipe, Settings
    from docpipe.eval.answers import evaluate_answers, load_questions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", type=int, default=40, help="data-room contracts outside cuad-dev to ask")
    parser.add_argument("--home", type=Path, help="store to reuse (default: a new temporary one)")
    args = parser.parse_args()
    if not (EVAL / "cuad-dev" / "annotations.jsonl").exists():
        sys.exit(f"missing {EVAL}: the benchmark reads ../shared/eval in place")
    home = args.home or Path(tempfile.mkdtemp(prefix="docpipe-offline-"))
    dp = DocPipe(Settings(home=home))
    questions = load_questions(EVAL / "natural_questions_dev.json")
    dev_files = {p.name for p in (EVAL / "cuad-dev" / "pdf").glob("*.pdf")}
    started = time.perf_counter()
    results = {
        "questions": "natural_questions_dev.json (one plain-language question per CUAD category)",
        "cuad_dev_all": evaluate_answers(dp, EVAL / "cuad-dev", questions),
        "cuad_dev_first_3_per_category": evaluate_answers(dp, EVAL / "cuad-dev", questions, per_category=3),
        "held_out": evaluate_answers(dp, EVAL / "cuad-collection-dev", questions, limit=args.held_out, skip=dev_files),
    }
    results["held_out"]["note"] = (
        f"the first {args.held_out} data-room contracts (by file name) not in cuad-dev; every record there has "
        "a gold clause, so this measures `answered` only"
    )
    results["seconds"] = round(time.perf_counter() - started, 1)
    out = ROOT / "docs" / "benchmarks" / "offline_answers.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    for name in ("cuad_dev_all", "cuad_dev_first_3_per_category", "held_out"):
        o = results[name]["overall"]
        print(
            f"{name:<32} answered {o['answered']}  naive {o['naive_answered']}  honest {o['honest']}  "
            f"mean quote {o['mean_quote_chars']} chars  ({results[name]['records']} records, "
            f"{results[name]['contracts']} contracts)"
        )


if __name__ == "__main__":
    main()
