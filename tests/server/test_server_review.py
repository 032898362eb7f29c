"""Review jobs over a real `docpipe serve` (127.0.0.1, per-user keys): a grid of a collection started with one
request, polled to the end and downloaded (xlsx, csv, md, json); cancelled while running and while queued; a
server killed mid-job that resumes it from the cell cache on its next start (an encrypted PDF's password never
stored); and each new input abused (job ids, other matters' jobs, columns, the queue)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.contracts import CONTRACTS, contract, lines_pdf
from support.server import Client, assert_error, new_key, serving

from docpipe import AccessLog
from docpipe.server.jobs import JOB_ID, MAX_UNFINISHED_PER_USER

pytestmark = pytest.mark.integration

QUESTIONS = [
    "What is the notice period for termination for convenience?",
    "Which law governs the agreement?",
    "Who are the parties?",
]
# Many distinct columns over many documents: a grid that runs for seconds with the echo engine.
MANY = [f"What does the agreement provide about matter number {n} and its notice?" for n in range(200)]
PASSWORD = "s3cret-pdf-pw-7731"
# Long contracts in the big room: its grid of MANY columns runs for about 15 s with the echo engine on a laptop
# core, so a job started there is still running while a test cancels it or queues others behind it.
BIG_ROOM = 48
COLUMNS = 60  # of the killed-server grid: 37 contracts x 60 offline cells, several seconds to run


TOPICS = ["payment", "invoices", "warranty", "liability", "indemnity", "insurance", "audit", "confidentiality"]
TOPICS += ["assignment", "subcontracting", "notices", "force majeure", "termination", "renewal", "disputes"]


def long_contract(n: int) -> bytes:
    """Returns contract `n` of 40 articles (about 4 pages): enough sections that a cell takes its time."""
    lines = [f"MASTER AGREEMENT NUMBER {n}", f"This Agreement is made between Supplier {n} Inc. and Buyer {n} LLC."]
    for a in range(1, 41):
        topic = TOPICS[(a + n) % len(TOPICS)]
        lines.append(f"ARTICLE {a} {topic.upper()}")
        lines.append(
            f"{a}.1 The {topic} obligations of Supplier {n} under this Article last {a + n} days after notice."
        )
        lines.append(f"{a}.2 Each party shall perform its {topic} duties in good faith and at its own cost and risk.")
    return lines_pdf(*lines)


def many_contracts(count: int) -> dict[str, bytes]:
    return {f"contract-{n:02d}.pdf": long_contract(n) for n in range(count)}


def encrypted(data: bytes, password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(data)).pages:
        writer.add_page(page)
    writer.encrypt(user_password=password, owner_password=None, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def files_under(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if "audit" not in p.parts}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("review") / "home"
    home.mkdir()
    keys = {
        "alice": new_key(home, "alice", "deal-x:write"),
        "carol": new_key(home, "carol", "deal-x:read"),
        "bob": new_key(home, "bob", "deal-y:write"),
    }
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:
        alice = Client(served, keys["alice"])
        alice.collection("deal-room", {"msa.pdf": sample_pdf.read_bytes(), **CONTRACTS})
        big = list(many_contracts(BIG_ROOM).items())
        for part in range(0, BIG_ROOM, 16):  # 16 files per request: the server's --max-upload-files
            alice.collection("big-room", dict(big[part : part + 16]))
        yield {"served": served, "home": home, "keys": keys}


def client(world: dict, user: str, matter: str | None = None) -> Client:
    return Client(world["served"], world["keys"][user], matter)


def cancel_all(who: Client) -> None:
    for job in who.get("/v1/jobs").json()["jobs"]:
        if job["state"] in ("queued", "running"):
            who.delete(f"/v1/jobs/{job['id']}")
    for job in who.get("/v1/jobs").json()["jobs"]:
        who.wait(job["id"])


def test_a_review_job_runs_to_a_full_grid_and_downloads(world: dict) -> None:
    import openpyxl

    alice, carol = client(world, "alice"), client(world, "carol")
    started = alice.review("deal-room", questions=QUESTIONS, categories=["Governing Law"], mode="no_think")
    assert started.status_code == 202, started.text
    job = started.json()
    assert job["state"] in ("queued", "running") and job["url"] == f"/v1/jobs/{job['id']}"
    assert started.headers["location"] == job["url"] and job["user"] == "alice" and job["collection"] == "deal-room"
    assert job["request"]["questions"] == QUESTIONS and job["request"]["password_given"] is False

    done = alice.wait(job["id"])
    assert done["state"] == "done", done
    assert done["progress"] == {"done": 16, "total": 16, "cached": 0, "failed": 0}, done["progress"]
    assert done["failures"] == [] and done["error"] is None and done["finished"] >= done["started"] >= done["created"]
    grid = done["grid"]
    assert sorted(r["name"] for r in grid["rows"]) == sorted(["msa.pdf", *CONTRACTS])
    assert [c["key"] for c in grid["columns"]] == ["Governing Law", *QUESTIONS]
    assert all(len(row) == 4 and all(cell["status"] != "failed" for cell in row) for row in grid["cells"])
    assert grid["manifest"]["collection"] == "deal-room" and grid["manifest"]["matter"] == "deal-x"
    # The echo engine quotes each contract's own governing-law sentence: cells are real answers.
    law = next(i for i, c in enumerate(grid["columns"]) if c["key"] == "Which law governs the agreement?")
    acme = grid["cells"][[r["name"] for r in grid["rows"]].index("acme-supply.pdf")][law]
    assert acme["status"] == "present" and "Delaware" in json.dumps(acme["quotes"]), acme

    # A reader of the matter sees and downloads it.
    assert carol.get(done["url"]).json()["grid"] == grid
    xlsx = carol.get(f"{done['url']}/grid", params={"format": "xlsx"})
    assert xlsx.status_code == 200
    assert xlsx.headers["content-type"] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert xlsx.headers["content-disposition"] == f'attachment; filename="review-deal-room-{job["id"][:8]}.xlsx"'
    book = openpyxl.load_workbook(io.BytesIO(xlsx.content))
    assert {"Review", "Citations"} <= set(book.sheetnames)
    review = book["Review"]
    assert review.max_row >= 5 and "Delaware" in json.dumps([[c.value for c in r] for r in book["Citations"].rows])
    csv = carol.get(f"{done['url']}/grid", params={"format": "csv"})
    assert csv.headers["content-type"].startswith("text/csv") and csv.text.splitlines()[0].startswith("document,")
    assert len(csv.text.splitlines()) == 5 and 'filename="review-deal-room-' in csv.headers["content-disposition"]
    md = carol.get(f"{done['url']}/grid", params={"format": "md"})
    assert md.headers["content-type"].startswith("text/markdown") and md.text.startswith("| Document |")
    assert "= 16 cells: 16 done (" in md.text and "), 0 failed" in md.text
    as_json = carol.get(f"{done['url']}/grid", params={"format": "json"})
    assert as_json.headers["content-type"] == "application/json" and as_json.json()["cells"] == grid["cells"]
    assert_error(carol.get(f"{done['url']}/grid", params={"format": "exe"}), 422, "invalid_request", "format")

    listed = carol.get("/v1/jobs").json()
    assert listed["matter"] == "deal-x" and job["id"] in [j["id"] for j in listed["jobs"]]
    assert all(j["grid"] is None for j in listed["jobs"])

    # The same review again is answered from the cell cache.
    again = alice.wait(
        alice.review("deal-room", questions=QUESTIONS, categories=["Governing Law"], mode="no_think").json()["id"]
    )
    assert again["progress"]["cached"] == 16 and again["grid"]["summary"]["from_cache"] == 16

    # The record is private; the access log has the start with the questions' hashes, never their text.
    record = world["home"] / "jobs" / job["id"] / "job.json"
    assert oct(record.stat().st_mode & 0o777) == "0o600" and oct(record.parent.stat().st_mode & 0o777) == "0o700"
    audit = AccessLog(world["home"])
    starts = [e for e in audit.read(user="alice") if e["action"] == "review_start"]
    assert any(e["questions_hmac"] == [audit.question_hash(q) for q in QUESTIONS] for e in starts)
    log = world["served"].log.read_text(errors="replace")
    assert QUESTIONS[0] not in log and "deal-room" not in log


def test_cancel_a_running_job_and_a_queued_one(world: dict) -> None:
    alice = client(world, "alice")
    running = alice.review("big-room", questions=MANY, mode="no_think").json()
    queued = alice.review("big-room", questions=MANY[:5], mode="no_think").json()
    assert queued["state"] == "queued" and queued["position"] == 0

    # The queued one is cancelled at once; it never runs.
    gone = alice.delete(queued["url"])
    assert gone.status_code == 200, gone.text
    assert gone.json()["state"] == "cancelled" and gone.json()["message"].startswith("cancelled")
    assert_error(alice.delete(queued["url"]), 409, "not_running", "cancelled already")

    # The running one stops between engine batches, partway through.
    deadline = time.monotonic() + 60
    while (job := alice.get(running["url"]).json())["progress"]["done"] == 0:
        assert job["state"] in ("queued", "running") and time.monotonic() < deadline, job
        time.sleep(0.02)
    assert job["state"] == "running", job
    stopped = alice.delete(running["url"])
    assert stopped.status_code == 200, stopped.text
    final = alice.wait(running["id"])
    assert final["state"] == "cancelled" and final["cancel_requested"] is True
    assert 0 < final["progress"]["done"] < final["progress"]["total"] == BIG_ROOM * 200, final["progress"]
    assert final["grid"] is None
    assert_error(alice.get(f"{running['url']}/grid"), 409, "not_done", "cancelled")
    assert alice.get(queued["url"]).json()["progress"]["done"] == 0


def test_more_unfinished_jobs_than_the_limit_is_429(world: dict) -> None:
    alice, carol = client(world, "alice"), client(world, "carol")
    try:
        ids = []
        for n in range(MAX_UNFINISHED_PER_USER):
            started = alice.review("big-room", questions=MANY[n:], mode="no_think")
            assert started.status_code == 202, started.text
            ids.append(started.json()["id"])
        over = alice.review("big-room", questions=QUESTIONS)
        message = assert_error(over, 429, "too_many_jobs", f"at most {MAX_UNFINISHED_PER_USER}", "DELETE /v1/jobs")
        assert over.headers["retry-after"] and str(MAX_UNFINISHED_PER_USER) in message
        assert len([j for j in alice.get("/v1/jobs").json()["jobs"] if j["state"] in ("queued", "running")]) == 4
        # Cancelling one makes room.
        assert alice.delete(f"/v1/jobs/{ids[-1]}").json()["state"] == "cancelled"
        assert alice.review("big-room", questions=QUESTIONS).status_code == 202
        # A reader may neither start nor cancel one.
        assert_error(carol.review("big-room", questions=QUESTIONS), 403, "forbidden", "needs write")
        assert_error(carol.delete(f"/v1/jobs/{ids[0]}"), 403, "forbidden", "needs write")
    finally:
        cancel_all(alice)


BAD_IDS = ["..", "..%2F..%2Fjobs", "%2e%2e", "x" * 32, "A" * 32, "0" * 31, "0" * 33, "0" * 32 + "%00", "%20" + "0" * 32]


def test_a_malformed_or_unknown_job_id_is_404_and_touches_nothing(world: dict) -> None:
    alice = client(world, "alice")
    home = world["home"]
    # Job records planted where a dot-segment id would lead (the server decodes %2e to "."): no id reaches them.
    done = alice.wait(alice.review("deal-room", questions=QUESTIONS[:1]).json()["id"])
    record = json.loads((home / "jobs" / done["id"] / "job.json").read_bytes())
    grid = (home / "jobs" / done["id"] / "grid.json").read_bytes()
    for folder, fake_id in ((home, ".."), (home / "jobs", "."), (home / "planted", "..%2Fplanted")):
        folder.mkdir(exist_ok=True)
        (folder / "job.json").write_text(json.dumps({**record, "id": fake_id.replace("%2F", "/")}))
        (folder / "grid.json").write_bytes(grid)
    before = files_under(home.parent)
    for bad in [*BAD_IDS, "%2e", "%2E%2E", "..%2Fplanted", "%2e%2e%2Fplanted"]:
        for response in (
            alice.get(f"/v1/jobs/{bad}"),
            alice.get(f"/v1/jobs/{bad}/grid"),
            alice.delete(f"/v1/jobs/{bad}"),
        ):
            assert response.status_code in (404, 422), (bad, response.text)
            assert response.json()["error"]["type"] in ("not_found", "invalid_request"), response.text
    unknown = assert_error(alice.get(f"/v1/jobs/{'0' * 32}"), 404, "not_found", "no review job", "GET /v1/jobs")
    assert assert_error(alice.get(f"/v1/jobs/{'z' * 32}"), 404, "not_found") == unknown.replace("0" * 32, "z" * 32)
    assert files_under(home.parent) == before


def test_another_matters_key_cannot_see_download_or_cancel_a_job(world: dict) -> None:
    alice, bob = client(world, "alice"), client(world, "bob")
    done = alice.wait(alice.review("deal-room", questions=QUESTIONS[:2]).json()["id"])
    running = alice.review("big-room", questions=MANY, mode="no_think").json()
    try:
        for job in (running, done):
            url = f"/v1/jobs/{job['id']}"
            for who in (bob, client(world, "bob", "deal-y")):
                # Exactly what an id no job has gets: nothing tells that the job exists in another matter.
                missing = assert_error(who.get(url), 404, "not_found")
                assert missing == assert_error(who.get(f"/v1/jobs/{'0' * 32}"), 404, "not_found").replace(
                    "0" * 32, job["id"]
                )
                assert_error(who.get(f"{url}/grid"), 404, "not_found")
                assert_error(who.delete(url), 404, "not_found")
                assert job["id"] not in json.dumps(who.get("/v1/jobs").json())
            into = client(world, "bob", "deal-x")  # naming alice's matter does not help
            for response in (into.get(url), into.get(f"{url}/grid"), into.delete(url), into.get("/v1/jobs")):
                assert_error(response, 404, "not_found", "no matter")
            # Nor does reviewing alice's collection from bob's matter.
            assert_error(bob.review("deal-room", questions=QUESTIONS), 404, "not_found", "no collection")
        assert alice.get(f"/v1/jobs/{running['id']}").json()["state"] in ("queued", "running")
    finally:
        cancel_all(alice)


@pytest.mark.parametrize(
    ("body", "status", "fragments"),
    [
        ({}, 422, ['"questions"', '"checklist"', '"categories"']),
        ({"questions": []}, 422, ["a review needs columns"]),
        ({"questions": MANY + ["one too many?"]}, 422, ["201 questions", "at most 200"]),
        ({"questions": ["x" * 2001]}, 422, ["2001 characters", "under 2000"]),
        ({"questions": ["  "]}, 422, ["is empty"]),
        ({"questions": ["Same?", "Same?"]}, 422, ["asked twice"]),
        ({"categories": ["Nonsense Clause"]}, 422, ["unknown checklist category"]),
        ({"questions": MANY[:170], "checklist": True}, 422, ["211 columns", "at most 200"]),
        ({"questions": ["Law?"], "mode": "fast"}, 422, ["mode"]),
        ({"questions": ["Law?"], "layout": "grid"}, 422, ["layout"]),
        ({"questions": ["Law?"], "engine": "vllm"}, 422, ["engine"]),
        ({"questions": "Law?"}, 422, ["questions"]),
        ({"questions": ["Law\ud800?"]}, 400, ["not valid Unicode"]),
    ],
)
def test_bad_columns_are_refused_with_a_clear_message(world: dict, body: dict, status: int, fragments: list) -> None:
    alice = client(world, "alice")
    before = {j["id"] for j in alice.get("/v1/jobs").json()["jobs"]}
    response = alice.post(
        "/v1/collections/deal-room/review",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert_error(response, status, "invalid_request" if status == 422 else "bad_unicode", *fragments)
    assert {j["id"] for j in alice.get("/v1/jobs").json()["jobs"]} == before


def test_unknown_empty_and_badly_named_collections(world: dict) -> None:
    alice = client(world, "alice")
    assert_error(alice.review("no-such-room", questions=QUESTIONS), 404, "not_found", "no collection")
    assert alice.post("/v1/collections", json={"name": "empty-room"}).status_code == 201
    assert_error(alice.review("empty-room", questions=QUESTIONS), 400, "bad_input", "no documents")
    assert_error(alice.review(".hidden", questions=QUESTIONS), 400, "bad_input", "not a collection name")


def test_a_killed_server_resumes_its_job_from_the_cell_cache(tmp_path: Path, sample_pdf: Path) -> None:
    """The extractive path (no model): a job half done when the server is killed (SIGKILL) is run again by the
    next server on the same home; the cells done before come from the cache. The encrypted contract's
    password was held in memory only: its row fails after the restart, saying how to fill it."""
    home = tmp_path / "home"
    home.mkdir()
    key = new_key(home, "alice", "deal-x:write")
    secret_contract = contract("Escrow Agreement", "Quetzal Holdings", "five (5)", "Vermont")
    files = {**many_contracts(36), "zz-secret.pdf": encrypted(secret_contract, PASSWORD)}
    with serving(home, "--engine", "extractive", "--no-ui", token=None, log_name="first.log") as first:
        alice = Client(first, key)
        items = list(files.items())
        for part in range(0, len(items), 16):
            alice.collection("room", dict(items[part : part + 16]), password=PASSWORD)
        job = alice.review("room", questions=MANY[:COLUMNS], password=PASSWORD).json()
        record = home / "jobs" / job["id"] / "job.json"
        deadline = time.monotonic() + 120
        while True:  # until the record on disk shows cells done: they are in the cache
            on_disk = json.loads(record.read_bytes())
            if on_disk["state"] == "running" and on_disk["progress"]["done"] > 0:
                break
            assert on_disk["state"] in ("queued", "running") and time.monotonic() < deadline, on_disk
            time.sleep(0.05)
        first.kill()
    on_disk = json.loads(record.read_bytes())
    assert on_disk["state"] == "running" and on_disk["progress"]["done"] < 37 * COLUMNS, on_disk
    done_before = on_disk["progress"]["done"]

    with serving(home, "--engine", "extractive", "--no-ui", token=None, log_name="second.log") as second:
        alice = Client(second, key)
        final = alice.wait(job["id"], timeout_s=600)
    assert final["state"] == "done" and final["resumed"] == 1, final
    assert "never stored" in final["notice"] and '"password"' in final["notice"]
    grid = final["grid"]
    assert len(grid["manifest"]["cached_cells"]) >= done_before, (len(grid["manifest"]["cached_cells"]), done_before)
    assert final["progress"]["cached"] >= done_before and final["progress"]["total"] == 37 * COLUMNS
    statuses = {cell["status"] for row in grid["cells"][:-1] for cell in row}
    assert statuses <= {"candidate", "not_found"}, statuses
    # The encrypted contract's row failed for want of its password, saying how to send it.
    assert grid["rows"][-1]["name"] == "zz-secret.pdf"
    assert all(cell["status"] == "failed" for cell in grid["cells"][-1])
    assert final["failures"] and "zz-secret.pdf" in final["failures"][0], final["failures"]
    assert '"password" in the JSON body of POST /v1/collections/room/review' in final["failures"][0]
    # The password was never written anywhere under the store, nor in the servers' logs.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


def test_deleting_a_document_or_a_matter_deletes_the_review_jobs_that_quote_it(
    tmp_path: Path, sample_pdf: Path
) -> None:
    """A grid quotes its contracts: it goes with a deleted document (the jobs whose grid has its row; not the
    others) and with a deleted matter (its running job is cancelled first), and `docpipe rm` does the same."""
    home = tmp_path / "home"
    home.mkdir()
    alice = new_key(home, "alice", "deal-x:admin")
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:
        who = Client(served, alice)
        who.collection("room-a", {"msa.pdf": sample_pdf.read_bytes()})
        who.collection("room-b", dict(list(CONTRACTS.items())[:1]))
        quoting = who.wait(who.review("room-a", questions=QUESTIONS[:1]).json()["id"])
        other = who.wait(who.review("room-b", questions=QUESTIONS[:1]).json()["id"])
        assert quoting["state"] == other["state"] == "done"
        doc_id = quoting["grid"]["rows"][0]["document_id"]
        gone = who.delete(f"/v1/documents/{doc_id}")
        assert gone.status_code == 200 and gone.json()["review_jobs"] == 1, gone.text
        assert who.get(f"/v1/jobs/{quoting['id']}").status_code == 404
        assert not (home / "jobs" / quoting["id"]).exists()
        assert who.get(f"/v1/jobs/{other['id']}").json()["state"] == "done"  # it never quoted that contract
        # `docpipe rm` (no server runner: it deletes the records) takes the other job with its document.
        other_doc = other["grid"]["rows"][0]["document_id"]
        rm = run_cli(home, "rm", other_doc)
        assert rm.returncode == 0 and "1 review jobs" in rm.stdout, rm.stdout + rm.stderr
        assert who.get(f"/v1/jobs/{other['id']}").status_code == 404

        big = dict(list(many_contracts(16).items()))
        who.collection("room-c", big)
        running = who.review("room-c", questions=MANY[:100]).json()
        who.wait(running["id"], "running")
        ended = who.delete("/v1/matters/deal-x")
        assert ended.status_code == 200 and ended.json()["review_jobs"] == 1, ended.text
        time.sleep(1.5)  # past the runner's progress writes: a cancelled job must not be written back
        assert [p.name for p in (home / "jobs").iterdir() if JOB_ID.fullmatch(p.name)] == []
