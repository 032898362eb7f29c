"""Runs the security probes (tests/support/probes.py: issue 10's "Measure and report", then issue 23's red-team
findings) against a real `docpipe serve` and writes what each request got, with the time it took, as the
results table. The same probes run as tests: `pytest -m security` (tests/security/test_probes.py, part of
`make test`); the probes and their set-up are described in tests/support/probes.py.

Each record: probe, threat, request, outcome (HTTP status or what happened), seconds, observation, expected,
as_expected. A record whose as_expected is false is a protection that did not hold: the script says so loudly.

Run: .venv/bin/python benchmarks/security_probes.py
Writes benchmarks/results/security_probes.json and docs/benchmarks/security_probes.json; prints a markdown table.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the probes live with the test helpers they share

from support.probes import Probe, run_all  # noqa: E402

OUTS = [ROOT / "benchmarks" / "results" / "security_probes.json", ROOT / "docs" / "benchmarks" / "security_probes.json"]


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.rstrip()


def markdown(records: list[Probe]) -> str:
    rows = ["| # | threat | request | outcome | s | observation |", "|---|---|---|---|---|---|"]
    for r in records:
        mark = "" if r.as_expected else " **(NOT AS EXPECTED)**"
        cells = [
            r.probe,
            r.threat,
            r.request,
            r.outcome + mark,
            f"{r.seconds:.2f}" if r.seconds is not None else "",
            r.observation,
        ]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(rows)


def _portable(text: str) -> str:
    """Returns the report text with this machine's folders named generically: the repository as <repo>,
    scratch folders under the temp dir as <scratch>, so the tracked copy holds no absolute local path."""
    text = text.replace(str(ROOT), "<repo>")
    return re.sub(re.escape(tempfile.gettempdir().rstrip("/")) + r"/docpipe-[\w.-]+", "<scratch>", text)


def main() -> int:
    started = time.time()
    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="docpipe-security-probes-"))
    try:
        run = run_all(tmp)
    finally:
        time.sleep(1)
        leftover = subprocess.run(["pgrep", "-f", str(tmp)], capture_output=True, text=True).stdout.split()
        shutil.rmtree(tmp, ignore_errors=True)
    failed = [r for r in run.records if not r.as_expected]
    report = {
        "what": "issues 10 and 23: probes against a running docpipe serve (127.0.0.1, echo engine, workbench "
        "on), issue 23's five red-team findings and encryption at rest among them",
        "command": "python benchmarks/security_probes.py",
        "server": "python -m docpipe serve --preset test --home HOME --port N --engine echo --log-level info "
        "(GRADIO_TEMP_DIR in the temp dir); keys: alice deal-x:write, bob deal-y:write, carol deal-x:read, "
        "dana deal-x:admin. Header/body timeouts and limit_concurrency are not CLI flags: defaults "
        "(10 s, 30 s grace then 16 KB/s, 256).",
        "records": [asdict(r) for r in run.records],
        "not_as_expected": [f"[{r.probe}] {r.request}: {r.outcome}" for r in failed],
        "server_alive_at_end": run.server_alive_at_end,
        "processes_left_after_stop": leftover,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1_5_15": {
                "start": [round(x, 2) for x in load_start],
                "end": [round(x, 2) for x in os.getloadavg()],
            },
        },
        "git": {
            "commit": _git("rev-parse", "HEAD"),
            "uncommitted_in_docpipe_or_ui": _git("status", "--porcelain", "--", "docpipe", "ui").splitlines(),
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
    }
    for out in OUTS:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(_portable(json.dumps(report, indent=2)) + "\n")
    print(markdown(run.records))
    if failed:
        print(f"\n{len(failed)} PROBE(S) NOT AS EXPECTED:", *report["not_as_expected"], sep="\n  ")
    print(f"\nwrote {', '.join(str(o.relative_to(ROOT)) for o in OUTS)} ({report['seconds']} s)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
