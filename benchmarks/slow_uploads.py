"""`docpipe serve` while crafted slow PDFs are uploaded: the latency of normal questions, before and after the
issue 10 limits (one extraction limiter with a bounded wait and 503 + Retry-After, a lower-priority worker).

Two servers run the same load one after the other in one run: "before" is the code at BEFORE_COMMIT (a git
worktree, imported through PYTHONPATH), "after" a copy of the working tree's `docpipe/` taken at the start of
the run (so an edit made during the run cannot change it half-way). Each is started as users start it
(`python -m docpipe serve --preset test --engine echo --no-ui`, uvicorn on 127.0.0.1, a fresh home), and the file
its `docpipe` package was imported from is checked in its log.

Who calls: "before" knows no API keys, so it runs without auth and every request is anonymous (one party). In
"after"'s home three keys are created before it starts (`python -m docpipe keys create`), so it requires them on
every /v1 route: "mallory" (deal-m:write) uploads the crafted PDFs; "alice" (deal-a:write) uploads the sample and
the normal contract; a read-only "alice" key (deal-a:read) is the askers'. The after server gives each key's user
at most all but one extraction slot, so the question is whether alice's contract gets in while mallory's four
crafted uploads run. The mode each server ran in (what its log says, and the status of an unauthenticated
GET /v1/documents) is recorded.

On each server: upload samples/master_services_agreement.pdf, then
- baseline: 4 threads (--askers) ask questions about it in a loop (answer cache off: each reaches the engine),
  and one normal contract (the sample with a unique trailing comment) is uploaded a third of the way in, for
  how long a normal upload takes without slow ones;
- slow uploads: the same askers, while 4 other threads (--uploaders) each upload crafted slow PDFs in turn
  (every one different, so the store never answers from its cache), and one normal contract is uploaded a
  third of the way in, as a colleague would.
Every ask's latency and status and every upload's status, duration and refusal message are kept.

The crafted PDF (`crafted_pdf`): 12.6 KB, 60 pages that share one Flate content stream holding a short line of text
and then 100,000 times the operator `1 0 0 1 0 0 Tm` (set the text matrix). pypdf parses and interprets every
operator in Python (~20-30 us each) and parses the shared stream again for every page, so one takes about two
minutes alone (119 s through 03bff89's extract_pages, load 3-5 on 2 cores; by that rate --pages 90 would reach
the 180 s bound) while yielding one short line of text per page: a cap on extracted text does not stop it.

Run: .venv/bin/python benchmarks/slow_uploads.py [--duration 90] [--baseline 30] [--pages 60] [--skip-alone]
Writes benchmarks/results/slow_uploads.json: {"servers": [{"label", "code", "auth", "phases": {"baseline":
{...}, "slow_uploads": {...}}}], "ratios", "alone": {...}, "setup": {...}}, and every ask's (start, latency, status)
to benchmarks/results/slow_uploads_asks.json; prints a markdown table.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import io
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
OUT = ROOT / "benchmarks" / "results" / "slow_uploads.json"
# Every ask (start, latency, status) of every phase: thousands of rows, kept apart from the summary.
OUT_ASKS = ROOT / "benchmarks" / "results" / "slow_uploads_asks.json"
BEFORE_COMMIT = "03bff89"
QUESTIONS = [
    "What is the notice period for termination for convenience?",
    "Which law governs the agreement?",
    "What insurance must the Provider carry?",
    "What is the initial term?",
]
STARTUP_S = 120
# The after server's keys: role -> (user, grant). The askers ask about the sample, which alice uploads into deal-a.
KEYS = {
    "crafted": ("mallory", "deal-m:write"),
    "normal": ("alice", "deal-a:write"),
    "asker": ("alice", "deal-a:read"),
}
ASK_TIMEOUT_S = 120
# The server is started through this instead of `-m docpipe` so that its log says which code it runs; the rest
# is what `python -m docpipe` does.
BOOT = (
    "import runpy, sys, docpipe; print('docpipe imported from', docpipe.__file__, file=sys.stderr, flush=True); "
    "sys.argv[0] = 'docpipe'; runpy.run_module('docpipe', run_name='__main__', alter_sys=True)"
)


# -- the crafted PDF ------------------------------------------------------------------------------------------
def crafted_pdf(nonce: str, *, pages: int, ops: int) -> bytes:
    """Returns a small PDF that is slow to extract with pypdf: `pages` pages share one content stream that shows
    `nonce` and then sets the text matrix `ops` times. Different nonces give different bytes (and document ids)."""
    text = nonce.encode("ascii").replace(b"\\", b"").replace(b"(", b"").replace(b")", b"")
    body = b"BT /F1 12 Tf 72 720 Td (Crafted " + text + b") Tj\n" + b"1 0 0 1 0 0 Tm\n" * ops + b"ET\n"
    stream = zlib.compress(body, 9)
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 4 0 R >>"
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (5 + i) for i in range(pages)) + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        *[page] * pages,
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


# Run with PYTHONPATH at the code under test: one page with pypdf directly (the cost per page, unbounded), then
# the whole PDF through that code's extract_pages (its worker, its time bound).
ALONE = """\
import io, json, pathlib, sys, time
import pypdf, docpipe
from docpipe.ingest.extract import extract_pages
data = pathlib.Path(sys.argv[1]).read_bytes()
reader = pypdf.PdfReader(io.BytesIO(data))
started = time.perf_counter()
reader.pages[0].extract_text()
per_page = time.perf_counter() - started
started = time.perf_counter()
try:
    pages = extract_pages(data, name="crafted.pdf")
    outcome = f"{len(pages)} pages, {sum(len(p.text) for p in pages)} characters"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps({"seconds": round(time.perf_counter() - started, 1), "outcome": outcome, "pages": len(reader.pages),
                  "pypdf_s_per_page": round(per_page, 2), "docpipe": docpipe.__file__}))
"""


def _time_alone(code: Path, data: bytes, work: Path) -> dict[str, Any]:
    """Returns how long `code`'s extract_pages takes on `data` with nothing else of ours running, and its outcome."""
    pdf = work / "crafted-alone.pdf"
    pdf.write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-c", ALONE, str(pdf)],
        env={**_clean_env(), "PYTHONPATH": str(code)},
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- servers --------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_") and k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    return env


def _create_keys(code: Path, home: Path, work: Path) -> dict[str, dict[str, Any]]:
    """Creates the KEYS in `home` with `code`'s `docpipe keys create`; returns role -> {user, grants, key_id, key}."""
    made = {}
    for role, (user, grant) in KEYS.items():
        done = subprocess.run(
            [sys.executable, "-m", "docpipe", "keys", "create", "--preset", "test", "--home", str(home), "--user", user,
             "--matter", grant, "--json"],
            env={**_clean_env(), "PYTHONPATH": str(code)}, cwd=work, capture_output=True, text=True, check=True,
        )  # fmt: skip
        key = json.loads(done.stdout)
        made[role] = {"user": key["user"], "grants": key["grants"], "key_id": key["key_id"], "key": key["key"]}
    return made


@contextlib.contextmanager
def _server(label: str, code: Path, work: Path, *, keys: bool) -> Iterator[tuple[str, int, str, dict[str, Any]]]:
    """Runs `docpipe serve` from the package in `code` until the block ends (with `keys`, the KEYS are created in
    its home first); yields its URL, its process group, the file its `docpipe` package was imported from and
    the keys by role (empty without keys)."""
    from docpipe.testing.models import wait_until_up

    port = _free_port()
    log = work / f"serve-{label}.log"
    home = work / f"home-{label}"
    made = _create_keys(code, home, work) if keys else {}
    command = [
        sys.executable, "-c", BOOT, "serve", "--preset", "test", "--home", str(home),
        "--port", str(port), "--engine", "echo", "--no-ui", "--log-level", "warning",
    ]  # fmt: skip
    # cwd is the scratch folder: `python -c` puts the cwd first on sys.path, and the checkout would shadow `code`.
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**_clean_env(), "PYTHONPATH": str(code)},
            cwd=work,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(process, f"{url}/v1/health", timeout_s=STARTUP_S, log=log, what="docpipe serve", poll_s=0.3)
        imported = log.read_text(errors="replace").split("docpipe imported from ", 1)[-1].split("\n", 1)[0]
        if not imported.startswith(str(code)):
            raise RuntimeError(f"the {label} server imported docpipe from {imported}, not from {code}")
        yield url, process.pid, imported, made
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, then SIGKILL to whatever is left (extraction workers included),
    so that no worker of one server still burns CPU while the next one is measured."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)


def _group_members(pgid: int) -> list[dict[str, Any]]:
    """Returns the live processes of process group `pgid`: pid, command name, nice value."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        # After the name: state, ppid, pgrp, ... nice is field 19 of stat, index 16 here.
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append({"pid": int(entry.name), "comm": comm, "nice": int(fields[16])})
    return members


# -- load -----------------------------------------------------------------------------------------------------
def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 4)


def _error_type(response: httpx.Response) -> str | None:
    with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
        return str(response.json()["error"]["type"])
    return None


def _error_message(response: httpx.Response) -> str | None:
    with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
        return str(response.json()["error"]["message"])[:300]
    return None


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _outcome(upload: dict[str, Any]) -> str:
    return " ".join(str(part) for part in (upload["status"], upload.get("error")) if part)


def _ask_loop(
    url: str, key: str | None, doc_id: str, number: int, end: float, t0: float, out: list[dict[str, Any]]
) -> None:
    # One client, one connection, like separate users.
    with httpx.Client(base_url=url, timeout=ASK_TIMEOUT_S, headers=_headers(key)) as client:
        turn = 0
        while time.perf_counter() < end:
            question = f"{QUESTIONS[(number + turn) % len(QUESTIONS)]} (client {number}, turn {turn})"
            started = time.perf_counter()
            try:
                response = client.post(
                    f"/v1/documents/{doc_id}/ask", json={"question": question, "mode": "no_think", "use_cache": False}
                )
                status: int | str = response.status_code
            except httpx.HTTPError as exc:  # a lost or timed-out request is a measured outcome
                status = type(exc).__name__
            out.append({"at_s": round(started - t0, 3), "latency_s": time.perf_counter() - started, "status": status})
            turn += 1


def _upload(client: httpx.Client, data: bytes, name: str, end: float, t0: float) -> dict[str, Any]:
    """Uploads `data` and returns its record; a request still unanswered when the phase ends is cut then."""
    started = time.perf_counter()
    record: dict[str, Any] = {"name": name, "bytes": len(data), "at_s": round(started - t0, 3)}
    try:
        response = client.post(
            "/v1/documents",
            content=data,
            params={"name": name},
            headers={"Content-Type": "application/pdf"},
            timeout=httpx.Timeout(connect=10, read=max(1.0, end - started), write=30, pool=10),
        )
        record["status"] = response.status_code
        if response.status_code != 200:
            record["error"] = _error_type(response)
            record["retry_after"] = response.headers.get("retry-after")
            record["message"] = _error_message(response)
    except httpx.ReadTimeout:
        record["status"] = "unfinished"  # still waiting or extracting when the phase ended
    except httpx.HTTPError as exc:
        record["status"] = type(exc).__name__
    record["duration_s"] = round(time.perf_counter() - started, 3)
    return record


def _slow_upload_loop(
    url: str, key: str | None, number: int, end: float, t0: float, pages: int, ops: int, out: list[dict[str, Any]]
) -> None:
    with httpx.Client(base_url=url, headers=_headers(key)) as client:
        seq = 0
        while time.perf_counter() < end:
            nonce = f"{number}-{seq}-{secrets.token_hex(4)}"
            record = _upload(client, crafted_pdf(nonce, pages=pages, ops=ops), f"crafted-{nonce}.pdf", end, t0)
            out.append({"uploader": number, **record})
            seq += 1
            if record["duration_s"] < 1:  # refused at once: do not turn the client itself into a busy loop
                time.sleep(1)


def _normal_upload(url: str, key: str | None, at: float, end: float, t0: float, out: list[dict[str, Any]]) -> None:
    time.sleep(max(0.0, at - time.perf_counter()))
    # A trailing comment after %%EOF makes new bytes (a new document id) that read exactly like the sample.
    data = SAMPLE.read_bytes() + f"%probe {secrets.token_hex(8)}\n".encode()
    with httpx.Client(base_url=url, headers=_headers(key)) as client:
        out.append(_upload(client, data, "normal-contract.pdf", end, t0))


def _phase(url: str, pgid: int, doc_id: str, keys: dict[str, str | None], *, duration_s: float, askers: int,
           uploaders: int, pages: int, ops: int) -> dict[str, Any]:  # fmt: skip
    asks: list[dict[str, Any]] = []
    uploads: list[dict[str, Any]] = []
    probe: list[dict[str, Any]] = []
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    end = t0 + duration_s
    threads = [
        threading.Thread(target=_ask_loop, args=(url, keys["asker"], doc_id, n, end, t0, asks)) for n in range(askers)
    ]
    threads += [
        threading.Thread(target=_slow_upload_loop, args=(url, keys["crafted"], n, end, t0, pages, ops, uploads))
        for n in range(uploaders)
    ]
    # In both phases: without slow uploads it says how long a normal upload takes; with them, whether it gets in.
    threads.append(
        threading.Thread(target=_normal_upload, args=(url, keys["normal"], t0 + duration_s / 3, end, t0, probe))
    )
    for thread in threads:
        thread.start()
    # Halfway through, which processes the server runs and at what priority (the extraction workers' nice).
    time.sleep(duration_s / 2)
    workers = [m for m in _group_members(pgid) if m["pid"] != pgid]
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    ok = [a["latency_s"] for a in asks if a["status"] == 200]
    return {
        "duration_s": duration_s,
        "wall_s": round(wall, 2),
        "askers": askers,
        "uploaders": uploaders,
        "asks": len(asks),
        "ask_errors": len(asks) - len(ok),
        "ask_statuses": dict(collections.Counter(str(a["status"]) for a in asks)),
        "p50_s": _quantile(ok, 0.50),
        "p95_s": _quantile(ok, 0.95),
        "p99_s": _quantile(ok, 0.99),
        "max_s": round(max(ok), 4) if ok else None,
        "throughput_rps": round(len(ok) / wall, 2),
        "uploads": len(uploads),
        "upload_statuses": dict(collections.Counter(_outcome(u) for u in uploads)),
        "normal_upload": probe[0] if probe else None,
        "normal_upload_outcome": _outcome(probe[0]) if probe else None,
        "normal_upload_s": probe[0]["duration_s"] if probe else None,
        "workers_at_half_time": workers,
        "load_average_1min": {"start": round(load_start[0], 2), "end": round(os.getloadavg()[0], 2)},
        "upload_records": uploads,
        "ask_records": [{**a, "latency_s": round(a["latency_s"], 4)} for a in asks],
    }


def _summary(phase: dict[str, Any]) -> str:
    probe = phase["normal_upload"]
    normal = f"{_outcome(probe)} after {probe['duration_s']} s" if probe else "-"
    workers = ", ".join(f"pid {w['pid']} nice {w['nice']}" for w in phase["workers_at_half_time"]) or "none"
    return (
        f"{phase['asks']} asks, {phase['ask_errors']} errors, p50 {phase['p50_s']} s, p95 {phase['p95_s']} s, "
        f"p99 {phase['p99_s']} s, {phase['throughput_rps']} asks/s; crafted uploads {phase['upload_statuses']}; "
        f"normal upload {normal}; server children {workers}; load {phase['load_average_1min']}"
    )


def run_server(label: str, code: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    # "before" (03bff89) knows no API keys: it runs as before, without auth.
    with _server(label, code, work, keys=label != "before") as (url, pgid, imported, made):
        keys = {role: made[role]["key"] if made else None for role in KEYS}
        # Which mode it runs in, as it says and as it behaves: an anonymous look-up of an unknown document is 404
        # without auth (both versions have this route), 401 with keys.
        said = (work / f"serve-{label}.log").read_text(errors="replace").split("authentication: ", 1)
        anonymous = httpx.get(f"{url}/v1/documents/{'0' * 64}", timeout=30).status_code
        auth = {
            "mode": "per-user API keys" if made else "none (no keys, loopback, every request anonymous)",
            "server_log_says": said[1].split("\n", 1)[0] if len(said) > 1 else None,
            "anonymous_get_unknown_document_status": anonymous,
            "keys": {role: {k: v for k, v in key.items() if k != "key"} for role, key in made.items()},
        }
        if anonymous != (401 if made else 404):
            raise RuntimeError(f"the {label} server ({auth['mode']}) answered an anonymous request {anonymous}")
        print(f"{label:<6} auth: {auth['mode']}; anonymous GET of an unknown document: {anonymous}", flush=True)
        data = SAMPLE.read_bytes()
        started = time.perf_counter()
        response = httpx.post(f"{url}/v1/documents", content=data, params={"name": SAMPLE.name},
                              headers={"Content-Type": "application/pdf", **_headers(keys["normal"])},
                              timeout=STARTUP_S)  # fmt: skip
        response.raise_for_status()
        upload_s = time.perf_counter() - started
        doc = response.json()
        assert doc["id"] == hashlib.sha256(data).hexdigest(), doc
        warm = httpx.post(f"{url}/v1/documents/{doc['id']}/ask", json={"question": QUESTIONS[0], "use_cache": False},
                          headers=_headers(keys["asker"]), timeout=STARTUP_S)  # fmt: skip # engine, index loaded
        warm.raise_for_status()
        phases = {}
        # The baseline first: after the slow phase, extractions it started are still running.
        plan = {"baseline": (args.baseline, 0), "slow_uploads": (args.duration, args.uploaders)}
        for phase, (duration, uploaders) in plan.items():
            phases[phase] = _phase(url, pgid, doc["id"], keys, duration_s=duration, askers=args.askers,
                                   uploaders=uploaders, pages=args.pages, ops=args.ops)  # fmt: skip
            print(f"{label:<6} {phase:<12}: {_summary(phases[phase])}", flush=True)
    return {
        "label": label,
        "docpipe_imported_from": imported,
        "auth": auth,
        "sample_upload_s": round(upload_s, 3),
        "phases": phases,
    }


# -- report ---------------------------------------------------------------------------------------------------
def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.rstrip()


def _docpipe_digest(tree: Path) -> str:
    """Returns the first 16 hex digits of the SHA-256 over the names and bytes of `tree`/docpipe/**/*.py."""
    digest = hashlib.sha256()
    for path in sorted((tree / "docpipe").rglob("*.py")):
        digest.update(path.relative_to(tree).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _commit_with_docpipe(digest: str, *, last: int = 10) -> str | None:
    """Returns the newest of the last `last` commits whose docpipe/ is exactly the snapshot (`digest`), or None:
    the working tree can hold edits that another session commits while the benchmark runs."""
    for commit in _git("log", "--format=%H", f"-{last}").split():
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(["git", "archive", commit, "docpipe"], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            if _docpipe_digest(Path(tmp)) == digest:
                return commit
    return None


def _snapshot_working_tree(work: Path) -> tuple[Path, dict[str, Any]]:
    """Copies the working tree's docpipe/ to `work` and returns where, with what it holds beyond HEAD."""
    target = work / "after"
    shutil.copytree(ROOT / "docpipe", target / "docpipe", ignore=shutil.ignore_patterns("__pycache__"))
    dirty = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    return target, {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(dirty),
        "uncommitted": dirty,
        "head": _git("rev-parse", "--short", "HEAD"),
        "commits_since_before": _git("log", "--format=%h %s", f"{BEFORE_COMMIT}..HEAD").splitlines(),
        "uncommitted_in_docpipe": _git("status", "--porcelain", "--", "docpipe").splitlines(),
        "docpipe_sha256": _docpipe_digest(target),
    }


def _before_tree() -> Path:
    """Returns the path of a git worktree at BEFORE_COMMIT, adding it when it is missing."""
    tree = Path(tempfile.gettempdir()) / "docpipe-before"
    if not (tree / "docpipe" / "__init__.py").exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), BEFORE_COMMIT], cwd=ROOT, check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    if not BEFORE_COMMIT.startswith(head[: len(BEFORE_COMMIT)]) and not head.startswith(BEFORE_COMMIT):
        raise RuntimeError(f"{tree} is at {head}, not {BEFORE_COMMIT}: remove it (git worktree remove {tree})")
    return tree


def _table(servers: list[dict[str, Any]]) -> str:
    lines = [
        "| server (auth) | phase | asks | errors | p50 s | p95 s | p99 s | max s | asks/s | crafted uploads | "
        "normal upload | load 1 min |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for server in servers:
        for name, phase in server["phases"].items():
            statuses = ", ".join(f"{k}: {v}" for k, v in sorted(phase["upload_statuses"].items())) or "-"
            probe = phase["normal_upload"]
            probe_text = f"{_outcome(probe)} after {probe['duration_s']:.1f} s" if probe else "-"
            label = "baseline (no slow uploads)" if name == "baseline" else f"{phase['uploaders']} slow uploaders"
            auth = "keys" if server["auth"]["keys"] else "no auth"
            load = phase["load_average_1min"]
            lines.append(
                f"| {server['label']} ({auth}) | {label} | {phase['asks']} | {phase['ask_errors']} | "
                f"{phase['p50_s']} | {phase['p95_s']} | {phase['p99_s']} | {phase['max_s']} | "
                f"{phase['throughput_rps']} | {statuses} | {probe_text} | {load['start']} -> {load['end']} |"
            )
    return "\n".join(lines)


def _portable(text: str) -> str:
    """Returns the report text with this machine's folders named generically: the repository as <repo>,
    scratch folders under the temp dir as <scratch>, so the tracked copy holds no absolute local path."""
    text = text.replace(str(ROOT), "<repo>")
    return re.sub(re.escape(tempfile.gettempdir().rstrip("/")) + r"/docpipe-[\w.-]+", "<scratch>", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="before,after", help="comma-separated: before, after (default both)")
    parser.add_argument("--duration", type=float, default=90, help="seconds of asks under slow uploads (default 90)")
    parser.add_argument("--baseline", type=float, default=30, help="seconds of asks without uploads (default 30)")
    parser.add_argument("--askers", type=int, default=4, help="threads asking questions (default 4)")
    parser.add_argument("--uploaders", type=int, default=4, help="threads uploading crafted PDFs (default 4)")
    parser.add_argument("--pages", type=int, default=60, help="pages of the crafted PDF (default 60)")
    parser.add_argument("--ops", type=int, default=100_000, help="Tm operators in its content stream (default 1e5)")
    parser.add_argument("--skip-alone", action="store_true", help="do not time one crafted PDF alone (saves ~3 min)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    sample = crafted_pdf("sample", pages=args.pages, ops=args.ops)
    with tempfile.TemporaryDirectory(prefix="docpipe-slow-uploads-") as tmp:
        work = Path(tmp)
        before = _before_tree()
        after, after_code = _snapshot_working_tree(work)
        alone = None
        if not args.skip_alone:
            alone = {"code": BEFORE_COMMIT, **_time_alone(before, sample, work)}
            print(f"one crafted PDF alone, {BEFORE_COMMIT}: {alone['seconds']} s ({alone['outcome']})", flush=True)
        code = {"before": before, "after": after}
        servers = [run_server(label, code[label], work, args) for label in args.servers.split(",")]
    # Checked at the end: a commit made during the run may hold exactly the docpipe/ that was measured.
    after_code["docpipe_same_as_commit"] = _commit_with_docpipe(after_code["docpipe_sha256"])
    for server in servers:
        server["code"] = {"commit": BEFORE_COMMIT} if server["label"] == "before" else after_code
    ratios = {}
    by_label = {s["label"]: s["phases"] for s in servers}
    for label, phases in by_label.items():
        base, slow = phases["baseline"]["p95_s"], phases["slow_uploads"]["p95_s"]
        ratios[f"{label}: p95 with slow uploads / baseline"] = round(slow / base, 2) if base and slow else None
    if {"before", "after"} <= by_label.keys():
        b, a = by_label["before"]["slow_uploads"]["p95_s"], by_label["after"]["slow_uploads"]["p95_s"]
        ratios["with slow uploads: p95 after / before"] = round(a / b, 3) if a and b else None
    report = {
        "servers": servers,
        "ratios": ratios,
        "alone": alone,
        "setup": {
            "server": "python -m docpipe serve --preset test --engine echo --no-ui (uvicorn, 127.0.0.1), fresh home, "
            "answer cache off (use_cache false), default extraction settings (pypdf, 180 s bound)",
            "auth": "before: no keys, no auth (03bff89 knows none). after: keys created in its home before it starts, "
            + "; ".join(f"{role}: {user} {grant}" for role, (user, grant) in KEYS.items())
            + "; every after request sends its role's Authorization: Bearer key (the matter is the key's only one)",
            "before": f"git worktree at {BEFORE_COMMIT}, PYTHONPATH; after: copy of the working tree's docpipe/",
            "clients": f"{args.askers} ask threads (one httpx.Client each) asking in a loop; {args.uploaders} upload "
            "threads each uploading crafted PDFs one after another, a different nonce each; one normal upload "
            "(the sample plus a unique trailing comment) a third of the way into each phase; a request still "
            "unanswered when the phase ends is cut and counted 'unfinished'",
            "crafted_pdf": {
                "bytes": len(sample),
                "pages": args.pages,
                "ops_per_page": args.ops,
                "content": "every page shares one Flate stream: a short text line, then `1 0 0 1 0 0 Tm` repeated",
            },
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "measured": time.strftime("%Y-%m-%d %H:%M"),
            # Other jobs share the machine: say how busy it was (each phase has its own figures too).
            "load_average": {
                "before": [round(x, 2) for x in load_before],
                "after": [round(x, 2) for x in os.getloadavg()],
            },  # fmt: skip
        },
    }
    asks = {s["label"]: {name: phase.pop("ask_records") for name, phase in s["phases"].items()} for s in servers}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(_portable(json.dumps(report, indent=2)) + "\n")
    OUT_ASKS.write_text(json.dumps(asks) + "\n")
    print()
    print(_table(servers))
    print()
    for name, value in ratios.items():
        print(f"- {name}: {value}")
    print(f"wrote {OUT.relative_to(ROOT)} and {OUT_ASKS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
