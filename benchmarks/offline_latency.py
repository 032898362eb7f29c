"""A new question, offline, on the 115-page cuad-dev contract whose store another process made warm: the two
placements of the sentence embeddings side by side (made at ingestion vs on the document's first offline use).

Run: .venv/bin/python benchmarks/offline_latency.py [--out FILE]   (benchmarks/results/offline_latency.json; ~3 min)

Per placement, in a new empty store:
- `docpipe ingest` of the contract, a process of its own (wall time);
- one new process asks 20 questions nobody asked before, one after another (each one's latency, the first
  included: it loads the index and the sentence table; the process's peak RSS);
- `docpipe ask` as a new process, 3 more new questions (wall time and peak RSS of each process).
The questions are CUAD's plain-language ones (`natural_questions_dev.json`), one per clause category.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"
PDF = EVAL / "cuad-dev" / "pdf" / "GOOSEHEADINSURANCE_INC_04_02_2018-EX-10.6-Franchise_Agreement.pdf"
QUESTIONS = EVAL / "natural_questions_dev.json"
IN_PROCESS = 20
CLI_ASKS = 3


def _run(cmd: list[str], env: dict[str, str]) -> str:
    """Returns the stdout of `cmd`; exits with its stderr when it fails."""
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return proc.stdout


def _measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Returns wall time (s), peak RSS (MB) and stdout of `cmd`, run under this script's `--rss` wrapper so
    the peak is that one process's (RUSAGE_CHILDREN of a parent that runs only it)."""
    out = _run([sys.executable, __file__, "--rss", "--", *cmd], env)
    first, body = out.split("\n", 1)
    wall, rss_mb = first.split()
    return float(wall), float(rss_mb), body


def worker(pdf: Path, questions: list[str]) -> None:
    """Asks `questions` in this process, one after another; prints their latencies and the peak RSS as JSON."""
    from docpipe import DocPipe

    latencies = []
    with DocPipe() as dp:
        for question in questions:
            started = time.perf_counter()
            answer = dp.ask(pdf, question)
            latencies.append(time.perf_counter() - started)
            assert answer.mode == "extractive", answer.mode
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"latencies_s": latencies, "peak_rss_mb": round(peak)}))


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main(args: argparse.Namespace) -> None:
    if not PDF.exists():
        sys.exit(f"missing {PDF}: the benchmark reads ../shared/eval in place")
    questions = list(json.loads(QUESTIONS.read_text()).values())
    asked, cli_questions = questions[:IN_PROCESS], questions[IN_PROCESS : IN_PROCESS + CLI_ASKS]
    results: dict = {"pdf": PDF.name, "questions_in_process": len(asked), "cli_asks": len(cli_questions), "runs": {}}
    for placement in ("first_use", "ingest"):
        home = Path(tempfile.mkdtemp(prefix=f"docpipe-bench-{placement}-"))
        env = {**os.environ, "DOCPIPE_HOME": str(home), "DOCPIPE_EMBEDDING__SENTENCE_VECTORS": placement}
        ingest_s, ingest_rss, _ = _measured([sys.executable, "-m", "docpipe", "ingest", str(PDF)], env)
        out = _run([sys.executable, __file__, "--worker", str(PDF), *asked], env)
        run = json.loads(out.strip().splitlines()[-1])
        latencies = run["latencies_s"]
        cli = [_measured([sys.executable, "-m", "docpipe", "ask", str(PDF), q], env) for q in cli_questions]
        results["runs"][placement] = {
            "ingest_s": round(ingest_s, 2),
            "ingest_peak_rss_mb": round(ingest_rss),
            "first_question_s": round(latencies[0], 3),
            "p50_s": round(statistics.median(latencies), 3),
            "p95_s": round(_percentile(latencies, 0.95), 3),
            "max_s": round(max(latencies), 3),
            "latencies_s": [round(x, 3) for x in latencies],
            "in_process_peak_rss_mb": run["peak_rss_mb"],
            "cli_ask_s": [round(wall, 2) for wall, _, _ in cli],
            "cli_ask_peak_rss_mb": [round(rss) for _, rss, _ in cli],
        }
    runs = results["runs"]
    results["first_question_ratio_first_use_over_ingest"] = round(
        runs["first_use"]["first_question_s"] / runs["ingest"]["first_question_s"], 1
    )
    results["ingest_ratio_ingest_over_first_use"] = round(runs["ingest"]["ingest_s"] / runs["first_use"]["ingest_s"], 2)
    out_path = args.out
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2))
    print(f"{PDF.name}: {IN_PROCESS} new questions in one process, {CLI_ASKS} as new `docpipe ask` processes")
    print(
        f"{'vectors made':<12}{'ingest':>8}{'1st q':>8}{'p50':>7}{'p95':>7}{'max':>7}{'RSS':>7}{'CLI ask':>16}{'CLI RSS':>16}"
    )
    for name, r in runs.items():
        cli_s = "/".join(f"{x:.2f}" for x in r["cli_ask_s"])
        cli_rss = "/".join(str(x) for x in r["cli_ask_peak_rss_mb"])
        print(
            f"{name:<12}{r['ingest_s']:>7.1f}s{r['first_question_s']:>7.2f}s{r['p50_s']:>6.2f}s{r['p95_s']:>6.2f}s"
            f"{r['max_s']:>6.2f}s{r['in_process_peak_rss_mb']:>5}MB{cli_s:>15}s{cli_rss:>14}MB"
        )
    print(
        f"first question, first use / ingest: {results['first_question_ratio_first_use_over_ingest']}x; "
        f"ingest, ingest / first use: {results['ingest_ratio_ingest_over_first_use']}x"
    )


def _rss_wrapper(cmd: list[str]) -> None:
    """Runs `cmd`, then prints its wall time (s) and peak RSS (MB) on the first line and its stdout after."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode:
        sys.stderr.write(proc.stderr)
        sys.exit(proc.returncode)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    sys.stdout.write(f"{wall:.3f} {peak:.0f}\n{proc.stdout}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs="+", metavar=("PDF", "QUESTION"), help=argparse.SUPPRESS)
    parser.add_argument("--rss", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("cmd", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "offline_latency.json")
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), args.worker[1:])
    elif args.rss:
        _rss_wrapper(args.cmd)
    else:
        main(args)
