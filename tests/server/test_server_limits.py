"""`docpipe serve` at its limits (issue 23's untested paths), each on a real server on 127.0.0.1: a disk that
fills mid-upload (507, nothing half-written trusted, served again once space returns), what deletion leaves
(`docpipe rm`, the `--retention-days` sweep, an admin deleting a whole matter: every file under the store
read back for the document's id and its text), and `limit_concurrency` saturated by requests the test holds
open and then releases."""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import io
import json
import resource
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cli import run_cli
from support.contracts import contract, contract_pdf
from support.server import (
    QUESTION,
    SOCKET_S,
    Served,
    ask,
    assert_error,
    connect,
    head,
    new_key,
    read_until_closed,
    serving,
    serving_options,
    upload,
)
from support.server import Client as BaseClient

from docpipe.access.log import AccessLog

pytestmark = pytest.mark.integration


# -- a disk that fills ------------------------------------------------------------------------------------------
# While "full", no file of the server may grow past this: the sample contract's spool (48 KB), its source and its
# extracted text (54 KB) fit, its index (document.json 134 KB, dense.faiss 180 KB) does not.
FULL_AT = 96 * 1024


def _ignore_sigxfsz() -> None:
    """In the server process: a write past RLIMIT_FSIZE fails with EFBIG instead of killing the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


@contextlib.contextmanager
def _disk_full(served: Served) -> Iterator[None]:
    """While the block runs, the running server can write no file past FULL_AT bytes (RLIMIT_FSIZE lowered with
    prlimit: its writes fail with EFBIG, as on a full disk); then the limit is lifted, as when space is freed."""
    pid = served.process.pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (FULL_AT, hard))
    try:
        yield
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))


def _half_written(home: Path) -> list[str]:
    """Returns what a write cut short may leave: temp files, upload spools, index entries without a manifest."""
    left = [p for p in home.rglob("*") if p.name.endswith(".tmp") or p.parent.name == "tmp"]
    left += [p for p in home.glob("docs/*/index-*") if not (p / "manifest.json").is_file()]
    return sorted(str(p.relative_to(home)) for p in left)


def _tree(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_a_disk_full_mid_upload_is_507_leaves_nothing_half_written_and_recovers(
    tmp_path: Path, sample_pdf: Path
) -> None:
    """The kernel refuses the writes (RLIMIT_FSIZE lowered on the running server with prlimit: EFBIG, what a
    quota gives; ENOSPC takes the same path) after the upload is spooled, its source and text stored: the
    index entry is what cannot be written. Then the limit is lifted again, as when an operator frees space."""
    home = tmp_path / "home"
    with serving_options(home, preexec=_ignore_sigxfsz) as served:
        stored = upload(served, contract_pdf("1. Term. This Agreement lasts two (2) years."), name="short.pdf")
        assert stored.status_code == 200, stored.text
        short_id = stored.json()["id"]
        data = sample_pdf.read_bytes()
        doc_id = hashlib.sha256(data).hexdigest()
        with _disk_full(served):
            refused = upload(served, data, name="msa.pdf")
            message = assert_error(refused, 507, "insufficient_storage", "try again later", "free disk space")
            assert str(home) not in refused.text and "/" not in message
            # The rest of the server works on: health, the matter's listing, a question about a stored document.
            assert httpx.get(f"{served.url}/v1/health", timeout=10).status_code == 200
            listed = httpx.get(f"{served.url}/v1/documents", timeout=10).json()["documents"]
            assert [d["id"] for d in listed] == [short_id]
            assert ask(served, short_id, {"question": "How long does the agreement last?"}).status_code == 200
            assert_error(httpx.get(f"{served.url}/v1/documents/{doc_id}", timeout=10), 404, "not_found")
            assert_error(ask(served, doc_id, {"question": QUESTION}), 404, "not_found")
        assert "cannot write the index" in served.log_tail(), served.log_tail()  # it failed mid-ingest
        assert _half_written(home) == []
        # Nor is the contract kept whole where no DELETE (no matter holds it) and no sweep would find it.
        assert [p for p in _tree(home) if doc_id in p] == []

        again = upload(served, data, name="msa.pdf")
        assert again.status_code == 200 and again.json()["id"] == doc_id, again.text
        answer = ask(served, doc_id, {"question": QUESTION})
        assert answer.status_code == 200, answer.text
        assert answer.json()["answers"][0]["citations"], answer.json()
        assert _half_written(home) == []


def _add_to_collection(served: Served, files: dict[str, bytes]) -> dict:
    created = httpx.post(f"{served.url}/v1/collections", json={"name": "room"}, headers=served.headers, timeout=30)
    assert created.status_code in (200, 201), created.text
    added = httpx.post(
        f"{served.url}/v1/collections/room/documents",
        files=[("file", (name, data, "application/pdf")) for name, data in files.items()],
        headers=served.headers,
        timeout=120,
    )
    assert added.status_code == 200, added.text
    return added.json()


def test_a_file_failing_in_a_collection_add_leaves_nothing_in_the_store(tmp_path: Path, sample_pdf: Path) -> None:
    """As with an upload: a file of a collection add that fails (its password missing; the disk full under its
    index) leaves nothing of it in the store, where no matter holds it and no DELETE or sweep would reach it.
    The files that went in stay; the same file added once space is back goes in."""
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(contract_pdf("1. Price. Ten (10) dollars."))))
    writer.encrypt("pw", algorithm="AES-256")
    locked = io.BytesIO()
    writer.write(locked)
    ok = contract_pdf("1. Term. This Agreement lasts three (3) years.")
    home = tmp_path / "home"
    with serving_options(home, preexec=_ignore_sigxfsz) as served:
        report = _add_to_collection(served, {"ok.pdf": ok, "locked.pdf": locked.getvalue()})
        assert [m["name"] for m in report["added"]] == ["ok.pdf"]
        assert [f["file"] for f in report["failed"]] == ["locked.pdf"] and "encrypted" in report["failed"][0]["reason"]
        assert (home / "docs" / hashlib.sha256(ok).hexdigest()).is_dir()
        assert not (home / "docs" / hashlib.sha256(locked.getvalue()).hexdigest()).exists()

        data = sample_pdf.read_bytes()
        doc_id = hashlib.sha256(data).hexdigest()
        with _disk_full(served):
            report = _add_to_collection(served, {"msa.pdf": data})
        assert report["added"] == [] and [f["file"] for f in report["failed"]] == ["msa.pdf"], report
        assert [p for p in _tree(home) if doc_id in p] == [] and _half_written(home) == []
        report = _add_to_collection(served, {"msa.pdf": data})
        assert [m["name"] for m in report["added"]] == ["msa.pdf"], report


# -- limit_concurrency --------------------------------------------------------------------------------------------
LIMIT = 4


def test_requests_held_at_the_concurrency_limit_turn_others_away_at_once_until_released(tmp_path: Path) -> None:
    """uvicorn counts the connection asking too: with LIMIT - 1 uploads in flight (each waiting for its body,
    which the test holds back until the server asks for it with 100 Continue), the next request, /v1/health
    included, is answered 503 at once, not queued. Releasing the bodies completes every held upload, and the
    server serves again."""
    home = tmp_path / "home"
    with serving_options(home, limit_concurrency=LIMIT, body_timeout_s=300) as served:
        bodies = [
            contract_pdf(f"{n}. Fees. Customer pays invoice number {n} within thirty (30) days.")
            for n in range(LIMIT - 1)
        ]
        held = []
        try:
            for number, body in enumerate(bodies):
                sock = connect(served)
                held.append(sock)
                sock.sendall(
                    f"POST /v1/documents?name=held-{number}.pdf HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Type: application/pdf\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                # The app is reading the body: this request holds its place until the test sends it.
                assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue")
            for request in (head(extra="Connection: close\r\n"), _raw_upload(bodies[0])):
                with connect(served) as sock:
                    sock.sendall(request)
                    refused = read_until_closed(sock)
                assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
            replies = []
            for sock, body in zip(held, bodies, strict=True):
                sock.sendall(body)
                replies.append(read_until_closed(sock))
        finally:
            for sock in held:
                sock.close()
        assert all(reply.startswith(b"HTTP/1.1 200") for reply in replies), [r[:300] for r in replies]
        assert httpx.get(f"{served.url}/v1/health", timeout=SOCKET_S).status_code == 200
        listed = httpx.get(f"{served.url}/v1/documents", timeout=SOCKET_S).json()["documents"]
        assert sorted(d["name"] for d in listed) == [f"held-{n}.pdf" for n in range(LIMIT - 1)]


def _raw_upload(body: bytes) -> bytes:
    return (
        b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/pdf\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


# -- deletion and retention: nothing of a document left in any file -----------------------------------------------
LAW = "Which law governs the agreement?"


def _contract(party: str) -> bytes:
    """Returns a short contract whose party and governing law are named `party`, the phrase searched for later."""
    return contract(f"{party} Supply Agreement", party, "ninety (90)", f"the {party} Islands")


class Client(BaseClient):
    def upload(self, data: bytes, name: str) -> str:
        response = self.post(
            "/v1/documents", params={"name": name}, content=data, headers={"Content-Type": "application/pdf"}
        )
        assert response.status_code == 200, response.text
        return str(response.json()["id"])


def _client(world: dict, user: str, matter: str) -> Client:
    return Client(world["served"], world["keys"][user], matter)


def _use(c: Client, docs: dict[str, bytes], room: str) -> dict[str, dict[str, str]]:
    """Uploads `docs` (name -> PDF) and leaves every trace using them leaves: per document an answer and a
    report (stored, and cached), then a collection `room` holding them all and its review grid, run to the end
    (its cells in the cell cache). Returns, per name, the document's id and its answer's and report's ids,
    and the job's id under "job"."""
    made: dict[str, dict[str, str]] = {}
    for name, data in docs.items():
        doc_id = c.upload(data, name)
        answer = c.post(f"/v1/documents/{doc_id}/ask", json={"question": LAW})
        assert answer.status_code == 200, answer.text
        report = c.post(f"/v1/documents/{doc_id}/analyze", json={"categories": ["Governing Law"], "mode": "no_think"})
        assert report.status_code == 200, report.text
        made[name] = {"id": doc_id, "answer": answer.json()["answers"][0]["id"], "report": report.json()["id"]}
    assert c.post("/v1/collections", json={"name": room}).status_code in (200, 201)
    added = c.post(f"/v1/collections/{room}/documents", json={"ids": [d["id"] for d in made.values()]})
    assert added.status_code == 200 and not added.json()["failed"], added.text
    started = c.review(room, questions=[LAW], mode="no_think")
    assert started.status_code == 202, started.text
    job = c.wait(started.json()["id"])
    assert job["state"] == "done", job
    made["job"] = {"id": job["id"]}
    return made


def _files_holding(home: Path, *needles: str) -> list[str]:
    """Returns every file under the store, but the access log's, that holds one of `needles` in its name or
    its bytes (SQLite's WAL is first copied into the database, as a later connection would)."""
    with contextlib.closing(sqlite3.connect(home / "answers.sqlite")) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    found = []
    for path in sorted(home.rglob("*")):
        where = str(path.relative_to(home))
        if where.startswith("audit"):
            continue
        content = path.read_bytes() if path.is_file() else b""
        if any(n in where or n.encode() in content for n in needles):
            found.append(where)
    return found


def _places(files: list[str]) -> set[str]:
    """Returns the kinds of place files are in: the store's top folder and, under serve/, the record kind."""
    return {"/".join(f.split("/")[:2]) if f.startswith("serve/") else f.split("/")[0] for f in files}


def _access_log(home: Path) -> str:
    return (home / "audit" / "access.log").read_text()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Returns a served store with per-user keys: frank writes in deal-r1 and deal-r2; in deal-m carol reads,
    dan writes and erin is the admin; dan and erin also write in deal-keep, erin in deal-cli."""
    home = tmp_path_factory.mktemp("limits") / "home"
    home.mkdir()
    keys = {
        "frank": new_key(home, "frank", "deal-r1:write", "deal-r2:write"),
        "carol": new_key(home, "carol", "deal-m:read"),
        "dan": new_key(home, "dan", "deal-m:write", "deal-keep:write"),
        "erin": new_key(home, "erin", "deal-m:admin", "deal-keep:write", "deal-cli:write"),
    }
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:
        yield {"served": served, "home": home, "keys": keys}


def test_docpipe_rm_of_a_file_leaves_nothing_of_it_in_any_matter_or_file(world: dict, tmp_path: Path) -> None:
    home: Path = world["home"]
    r1, r2 = _client(world, "frank", "deal-r1"), _client(world, "frank", "deal-r2")
    gone_pdf = tmp_path / "quillfeather.pdf"
    gone_pdf.write_bytes(_contract("Quillfeather"))
    first = _use(r1, {"quillfeather.pdf": gone_pdf.read_bytes(), "tamarind.pdf": _contract("Tamarind")}, "room-1")
    second = _use(r2, {"copy.pdf": gone_pdf.read_bytes()}, "room-2")
    gone, kept = first["quillfeather.pdf"], first["tamarind.pdf"]
    before = _files_holding(home, gone["id"], "Quillfeather")
    assert {"docs", "matters", "serve/answers", "serve/reports", "jobs", "answers.sqlite"} <= _places(before), before

    # As from an operator's shell: docpipe rm runs with its default settings, not the server's test preset,
    # so the server's collection indexes are built with an embedder the command does not use.
    removed = run_cli(home, "rm", str(gone_pdf), "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["purged"] == 1, removed.stdout
    assert _files_holding(home, gone["id"], "Quillfeather") == []
    # Nothing of it is served in either matter; the access log keeps its entries, not its text.
    for c, ids in ((r1, gone), (r2, second["copy.pdf"])):
        assert_error(c.get(f"/v1/documents/{gone['id']}"), 404, "not_found")
        assert_error(c.get(f"/v1/answers/{ids['answer']}"), 404, "not_found")
        assert_error(c.get(f"/v1/reports/{ids['report']}"), 404, "not_found")
    for job in (first["job"], second["job"]):
        assert_error(r1.get(f"/v1/jobs/{job['id']}"), 404, "not_found")
    assert gone["id"] in _access_log(home) and "Quillfeather" not in _access_log(home)
    # The other document, in the same matter and collection, stays whole.
    assert [d["id"] for d in r1.get("/v1/documents").json()["documents"]] == [kept["id"]]
    assert r1.get(f"/v1/answers/{kept['answer']}").status_code == 200
    assert [d["id"] for d in r1.get("/v1/collections/room-1").json()["documents"]] == [kept["id"]]
    assert r1.post(f"/v1/documents/{kept['id']}/ask", json={"question": LAW}).status_code == 200
    assert "docs" in _places(_files_holding(home, kept["id"], "Tamarind"))


def _records_of(home: Path, matter: str) -> list[str]:
    """Returns the stored answers, reports and review jobs (plain JSON) that name `matter` as theirs."""
    found = []
    for path in [*home.glob("serve/*/*.json"), *home.glob("jobs/*/job.json")]:
        if json.loads(path.read_bytes()).get("matter") == matter:
            found.append(str(path.relative_to(home)))
    return found


def _cached_in(home: Path, matter: str) -> int:
    """Returns how many answer-cache entries (answers, checklist findings, review cells) `matter` has."""
    with contextlib.closing(sqlite3.connect(home / "answers.sqlite")) as conn:
        return int(conn.execute("SELECT count(*) FROM answers WHERE matter = ?", (matter,)).fetchone()[0])


def test_only_an_admin_deletes_a_matter_and_nothing_of_it_is_left(world: dict) -> None:
    """A reader and a writer of the matter are refused; the admin deletes it: its documents, answers, reports,
    collections, review jobs and cache entries go, a file another matter holds stays there, and the access log
    names the admin."""
    home: Path = world["home"]
    dan, erin = _client(world, "dan", "deal-m"), _client(world, "erin", "deal-m")
    carol, keep = _client(world, "carol", "deal-m"), _client(world, "dan", "deal-keep")
    shared = _contract("Sorrelwood")
    mine = _use(dan, {"brackenridge.pdf": _contract("Brackenridge"), "sorrelwood.pdf": shared}, "room-m")
    theirs = _use(keep, {"sorrelwood-copy.pdf": shared}, "room-keep")
    only = mine["brackenridge.pdf"]
    assert _records_of(home, "deal-m") and _cached_in(home, "deal-m")

    assert_error(carol.delete("/v1/matters/deal-m"), 403, "forbidden", "admin")
    assert_error(dan.delete("/v1/matters/deal-m"), 403, "forbidden", "admin")
    assert dan.get("/v1/documents").json()["documents"], "a refused deletion deleted something"
    gone = erin.delete("/v1/matters/deal-m")
    assert gone.status_code == 200, gone.text
    assert (gone.json()["documents"], gone.json()["purged"], gone.json()["review_jobs"]) == (2, 1, 1), gone.json()

    assert _files_holding(home, only["id"], "Brackenridge") == []
    assert not (home / "matters" / "deal-m").exists() and _records_of(home, "deal-m") == []
    assert _cached_in(home, "deal-m") == 0
    assert erin.get("/v1/documents").json()["documents"] == []
    assert erin.get("/v1/collections").json()["collections"] == []
    assert erin.get("/v1/jobs").json()["jobs"] == []
    for ids in (only, mine["sorrelwood.pdf"]):
        assert_error(erin.get(f"/v1/answers/{ids['answer']}"), 404, "not_found")
        assert_error(erin.get(f"/v1/reports/{ids['report']}"), 404, "not_found")
    # deal-keep still holds the shared file: its record, answer, report, collection and grid.
    copy = theirs["sorrelwood-copy.pdf"]
    assert [d["id"] for d in keep.get("/v1/documents").json()["documents"]] == [copy["id"]]
    assert keep.get(f"/v1/answers/{copy['answer']}").status_code == 200
    assert keep.get(f"/v1/reports/{copy['report']}").status_code == 200
    assert keep.get(f"/v1/jobs/{theirs['job']['id']}").json()["state"] == "done"
    assert [d["id"] for d in keep.get("/v1/collections/room-keep").json()["documents"]] == [copy["id"]]
    assert keep.post(f"/v1/documents/{copy['id']}/ask", json={"question": LAW}).status_code == 200

    log = run_cli(home, "audit", "--matter", "deal-m", "--json")
    entries = [json.loads(line) for line in log.stdout.splitlines()]
    deleted = [(e["user"], e["outcome"]) for e in entries if e["action"] == "delete_matter"]
    # The reader's and the writer's refused attempts are there too, before the admin's delete.
    assert deleted == [("carol", "denied"), ("dan", "denied"), ("erin", "ok")], entries[-5:]
    assert "Brackenridge" not in _access_log(home)


def test_docpipe_rm_delete_matter_leaves_nothing_of_it(world: dict) -> None:
    home: Path = world["home"]
    erin = _client(world, "erin", "deal-cli")
    made = _use(erin, {"larkspur.pdf": _contract("Larkspur")}, "room-cli")
    doc = made["larkspur.pdf"]
    assert _records_of(home, "deal-cli")

    removed = run_cli(home, "rm", "--matter", "deal-cli", "--delete-matter", "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["purged"] == 1, removed.stdout
    assert _files_holding(home, doc["id"], "Larkspur") == []
    assert not (home / "matters" / "deal-cli").exists() and _records_of(home, "deal-cli") == []
    assert _cached_in(home, "deal-cli") == 0
    assert erin.get("/v1/documents").json()["documents"] == []
    assert_error(erin.get(f"/v1/answers/{doc['answer']}"), 404, "not_found")
    assert_error(erin.get(f"/v1/jobs/{made['job']['id']}"), 404, "not_found")
    # The access log says who deleted the matter: the login name of whoever ran the command.
    log = run_cli(home, "audit", "--matter", "deal-cli", "--json")
    entries = [json.loads(line) for line in log.stdout.splitlines()]
    deleted = [(e["user"], e["key_id"], e["outcome"]) for e in entries if e["action"] == "delete_matter"]
    assert deleted == [(getpass.getuser(), "cli", "ok")], entries[-3:]
    assert run_cli(home, "audit", "--verify").returncode == 0


def test_docpipe_rm_of_a_document_is_in_the_access_log_of_each_matter_that_held_it(world: dict) -> None:
    home: Path = world["home"]
    one, two = _client(world, "frank", "deal-r1"), _client(world, "frank", "deal-r2")
    data = _contract("Foxglove")
    doc_id = one.upload(data, "foxglove.pdf")
    assert two.upload(data, "copy.pdf") == doc_id
    removed = run_cli(home, "rm", doc_id[:12])
    assert removed.returncode == 0, removed.stderr
    log = run_cli(home, "audit", "--document", doc_id, "--json")
    entries = [json.loads(line) for line in log.stdout.splitlines()]
    deleted = sorted((e["matter"], e["user"], e["key_id"]) for e in entries if e["action"] == "delete_document")
    assert deleted == [("deal-r1", getpass.getuser(), "cli"), ("deal-r2", getpass.getuser(), "cli")], entries


def _age(home: Path, matter: str, doc_ids: set[str], *, days: float) -> None:
    """Makes what `matter` holds of `doc_ids` `days` old where the sweep reads an age: the matter's records
    (added), its stored answers and reports and its cache entries (created), its review jobs (finished)."""
    then = time.time() - days * 86400

    def rewrite(path: Path, **changes: float) -> None:
        path.write_bytes(json.dumps({**json.loads(path.read_bytes()), **changes}).encode())

    for doc_id in doc_ids:
        rewrite(home / "matters" / matter / "documents" / f"{doc_id}.json", added=then)
    for path in home.glob("serve/*/*.json"):
        record = json.loads(path.read_bytes())
        if record["matter"] == matter and record["document_id"] in doc_ids:
            rewrite(path, created=then)
    for path in home.glob("jobs/*/job.json"):
        if json.loads(path.read_bytes())["matter"] == matter:
            rewrite(path, finished=then)
    marks = ",".join("?" * len(doc_ids))
    with contextlib.closing(sqlite3.connect(home / "answers.sqlite")) as conn, conn:
        conn.execute(
            f"UPDATE answers SET created = ? WHERE matter = ? AND document_id IN ({marks})",  # noqa: S608
            (then, matter, *doc_ids),
        )


def _logged(served: Served, line: str, *, timeout_s: float = 120) -> str:
    """Returns the first line of the server's log holding `line`, once the server has written it."""
    deadline = time.monotonic() + timeout_s
    while True:
        for entry in served.log.read_text(errors="replace").splitlines():
            if line in entry:
                return entry
        assert time.monotonic() < deadline and served.process.poll() is None, served.log_tail()
        time.sleep(0.05)


def test_the_retention_sweep_leaves_nothing_of_old_uploads_and_keeps_the_rest(tmp_path: Path) -> None:
    """A matter's upload 40 days old goes with everything of it; one 40 days old in deal-a that deal-b
    uploaded recently leaves deal-a only; a recent one stays. Ages are set where the sweep reads them."""
    home = tmp_path / "home"
    home.mkdir()
    key = new_key(home, "gail", "deal-a:write", "deal-b:write")
    docs = {"old.pdf": _contract("Wrenfield"), "shared.pdf": _contract("Ashgrove"), "new.pdf": _contract("Pemberly")}
    with serving(home, "--engine", "echo", "--no-ui", token=None) as first:
        in_a = _use(Client(first, key, "deal-a"), docs, "room-a")
        in_b = _use(Client(first, key, "deal-b"), {"shared-b.pdf": docs["shared.pdf"]}, "room-b")
    old, shared, new, copy = in_a["old.pdf"], in_a["shared.pdf"], in_a["new.pdf"], in_b["shared-b.pdf"]
    _age(home, "deal-a", {old["id"], shared["id"]}, days=40)

    args = ("--engine", "echo", "--no-ui", "--retention-days", "30", "--verbose")
    with serving(home, *args, token=None, log_name="second.log") as second:
        swept = _logged(second, "retention (30 days): removed")
        # (deal-a's finished review job may already have gone: the job runner drops old ones as it starts)
        assert "documents=2," in swept and "purged=1," in swept, swept
        a, b = Client(second, key, "deal-a"), Client(second, key, "deal-b")

        assert _files_holding(home, old["id"], "Wrenfield") == []
        assert old["id"] in _access_log(home) and "Wrenfield" not in _access_log(home)
        for ids in (old, shared):
            assert_error(a.get(f"/v1/documents/{ids['id']}"), 404, "not_found")
            assert_error(a.get(f"/v1/answers/{ids['answer']}"), 404, "not_found")
            assert_error(a.get(f"/v1/reports/{ids['report']}"), 404, "not_found")
        assert_error(a.get(f"/v1/jobs/{in_a['job']['id']}"), 404, "not_found")
        # The recent upload stays whole in deal-a, and deal-b's copy of the shared file in deal-b.
        for c, ids, room in ((a, new, "room-a"), (b, copy, "room-b")):
            assert [d["id"] for d in c.get("/v1/documents").json()["documents"]] == [ids["id"]]
            assert c.get(f"/v1/answers/{ids['answer']}").status_code == 200
            assert c.get(f"/v1/reports/{ids['report']}").status_code == 200
            assert [d["id"] for d in c.get(f"/v1/collections/{room}").json()["documents"]] == [ids["id"]]
            assert c.post(f"/v1/documents/{ids['id']}/ask", json={"question": LAW}).status_code == 200
        assert b.get(f"/v1/jobs/{in_b['job']['id']}").json()["state"] == "done"
        assert {"docs", "matters", "serve/answers", "jobs"} <= _places(_files_holding(home, shared["id"], "Ashgrove"))
    # The sweep says what it purged, where no user route would: one line per document and matter, verified.
    purges = [e for e in AccessLog(home).read() if e["action"] == "retention_purge"]
    assert sorted((e["matter"], e["document"]) for e in purges) == sorted(
        [("deal-a", old["id"]), ("deal-a", shared["id"])]
    )
    assert all(e["user"] == "retention" and "30 days" in e["detail"] for e in purges)
    assert AccessLog(home).verify().intact
