"""Matters on a real `docpipe serve` (127.0.0.1, echo engine): per-user keys made with `docpipe keys`, what
each key can see and do, encrypted PDFs, deletion that leaves nothing behind, and the access log read with
`docpipe audit`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import httpx
import pytest
from support.cli import run_cli
from support.server import ENCRYPTED, ENCRYPTED_PASSWORD, QUESTION, Client, Served, assert_error, new_key, serving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("matters") / "home"
    home.mkdir()
    keys = {
        "alice": new_key(home, "alice", "deal-x:write"),
        "carol": new_key(home, "carol", "deal-x:read"),
        "bob": new_key(home, "bob", "deal-y:admin"),
        "dave": new_key(home, "dave", "deal-x:read", "deal-y:read"),
    }
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:
        yield {"served": served, "home": home, "keys": keys}


def client(world: dict, user: str, matter: str | None = None) -> Client:
    return Client(world["served"], world["keys"][user], matter)


def test_every_route_needs_a_key_and_a_revoked_key_stops_at_once(world: dict, sample_pdf: Path) -> None:
    served: Served = world["served"]
    assert_error(httpx.get(f"{served.url}/v1/documents", timeout=10), 401, "unauthorized", "docpipe keys create")
    bad = Client(served, "dpk_000000000000_" + "x" * 43)
    assert_error(bad.get("/v1/documents"), 401, "unauthorized", "unknown or revoked")
    assert httpx.get(f"{served.url}/v1/health", timeout=10).status_code == 200
    temp = new_key(world["home"], "temp", "deal-x:read")
    assert Client(served, temp).get("/v1/documents").status_code == 200
    key_id = temp.split("_")[1]
    assert run_cli(world["home"], "keys", "revoke", key_id).returncode == 0
    assert_error(Client(served, temp).get("/v1/documents"), 401, "unauthorized", "revoked")


def test_matters_are_walled_off_from_each_other(world: dict, sample_pdf: Path) -> None:
    alice, bob, carol = client(world, "alice"), client(world, "bob"), client(world, "carol")
    data = sample_pdf.read_bytes()
    up = alice.upload(data, "Falcon MSA (privileged).pdf")
    assert up.status_code == 200, up.text
    doc_id = up.json()["id"]
    answer = alice.ask(doc_id, {"question": QUESTION})
    assert answer.status_code == 200, answer.text
    answer_id = answer.json()["answers"][0]["id"]

    # Bob's matter does not hold it: the id, the answer id and the listing reveal nothing.
    assert_error(bob.ask(doc_id, {"question": QUESTION}), 404, "not_found", "deal-y")
    assert_error(bob.get(f"/v1/answers/{answer_id}"), 404, "not_found")
    assert bob.get("/v1/documents").json()["documents"] == []
    # Nor can Bob name Alice's matter.
    assert_error(client(world, "bob", "deal-x").get("/v1/documents"), 404, "not_found")

    # The same bytes uploaded by Bob are Bob's document: his name, his time, his own answers.
    mine = bob.upload(data, "contract.pdf").json()
    assert mine["id"] == doc_id and mine["name"] == "contract.pdf"
    listed = bob.get("/v1/documents").json()["documents"]
    assert [(d["name"], d["added_by"]) for d in listed] == [("contract.pdf", "bob")]
    theirs = bob.ask(doc_id, {"question": QUESTION}).json()["answers"][0]
    first = alice.get(f"/v1/answers/{answer_id}").json()
    assert theirs["created"] != first["created"]  # not Alice's cached answer
    assert "Falcon" not in json.dumps(theirs)

    # Carol reads in deal-x but may not upload or delete; Dave must say which of his matters.
    assert carol.ask(doc_id, {"question": QUESTION}).status_code == 200
    assert_error(carol.upload(data, "x.pdf"), 403, "forbidden", "needs write")
    assert_error(carol.delete(f"/v1/documents/{doc_id}"), 403, "forbidden")
    assert_error(client(world, "dave").get("/v1/documents"), 400, "bad_request", "X-Matter")
    assert client(world, "dave", "deal-y").get("/v1/documents").status_code == 200
    matters = client(world, "dave").get("/v1/matters").json()
    assert [(m["name"], m["role"]) for m in matters["matters"]] == [("deal-x", "read"), ("deal-y", "read")]


def test_an_encrypted_pdfs_answers_need_its_password_or_a_grant(world: dict, eval_dir: Path) -> None:
    alice, carol = client(world, "alice"), client(world, "carol")
    data = (eval_dir / "bad-pdfs" / ENCRYPTED).read_bytes()
    up = alice.upload(data, "secret.pdf", password=ENCRYPTED_PASSWORD)
    assert up.status_code == 200 and up.json()["encrypted"], up.text
    doc_id = up.json()["id"]
    # Alice proved the password with her key: she is granted the text.
    own = alice.ask(doc_id, {"question": "Who are the parties?"})
    assert own.status_code == 200, own.text
    answer_id = own.json()["answers"][0]["id"]
    # Carol, in the same matter, is not: the answer and the document need the password.
    assert_error(carol.ask(doc_id, {"question": "Who are the parties?"}), 422, "password_required")
    assert_error(carol.get(f"/v1/answers/{answer_id}"), 422, "password_required")
    assert_error(carol.get(f"/v1/answers/{answer_id}", headers={"X-Document-Password": "guess"}), 403, "wrong_password")
    assert carol.get(f"/v1/answers/{answer_id}", headers={"X-Document-Password": ENCRYPTED_PASSWORD}).status_code == 200


def _tree(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_deleting_leaves_nothing_and_the_access_log_says_who_did_what(world: dict, sample_pdf: Path) -> None:
    import io

    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    pdf.drawString(60, 740, "1. Term. This Agreement lasts five (5) years from the Effective Date of signature.")
    pdf.drawString(
        60, 700, "2. Governing Law. This Agreement is governed by the laws of Zanzibar, as Quillfeather Ltd. chose."
    )
    pdf.save()
    data = buffer.getvalue()
    bob = client(world, "bob")
    home: Path = world["home"]
    doc_id = bob.upload(data, "short.pdf").json()["id"]
    answer = bob.ask(doc_id, {"question": "What law governs?"}).json()["answers"][0]
    report = httpx.post(
        f"{bob.url}/v1/documents/{doc_id}/analyze",
        headers=bob.headers,
        timeout=120,
        json={"categories": ["Governing Law"], "mode": "no_think"},
    )
    assert report.status_code == 200, report.text
    assert any(doc_id in p for p in _tree(home))
    assert bob.get(f"/v1/answers/{answer['id']}").json()["id"] == answer["id"]

    gone = bob.delete(f"/v1/documents/{doc_id}")
    assert gone.status_code == 200, gone.text
    assert gone.json()["purged"] == 1 and gone.json()["answers_and_reports"] == 2
    left = [p for p in _tree(home) if doc_id in p]
    assert left == []
    for path in home.rglob("*"):
        if path.is_file() and "audit" not in path.parts:
            content = path.read_bytes()  # not in the cache, the matters, the stored answers and reports
            assert doc_id.encode() not in content and b"Quillfeather" not in content, path
    assert_error(bob.get(f"/v1/answers/{answer['id']}"), 404, "not_found")

    log = run_cli(home, "audit", "--user", "bob", "--json")
    entries = [json.loads(line) for line in log.stdout.splitlines()]
    actions = [(e["action"], e["matter"], e["outcome"]) for e in entries if e["document"] == doc_id]
    assert actions == [
        ("upload", "deal-y", "ok"),
        ("ask", "deal-y", "ok"),
        ("analyze", "deal-y", "ok"),
        ("read_answer", "deal-y", "ok"),
        ("delete_document", "deal-y", "ok"),
    ]
    assert "What law governs?" not in (home / "audit" / "access.log").read_text()
    verified = run_cli(home, "audit", "--verify")
    assert verified.returncode == 0 and "intact" in verified.stdout


def test_deleting_a_matter_keeps_a_file_another_matter_holds(world: dict, sample_pdf: Path) -> None:
    admin = new_key(world["home"], "erin", "deal-z:admin", "deal-w:write")
    erin_z, erin_w = Client(world["served"], admin, "deal-z"), Client(world["served"], admin, "deal-w")
    data = sample_pdf.read_bytes()
    doc_id = erin_z.upload(data, "z.pdf").json()["id"]
    erin_w.upload(data, "w.pdf")
    assert erin_z.ask(doc_id, {"question": QUESTION}).status_code == 200
    assert_error(erin_w.delete("/v1/matters/deal-w"), 403, "forbidden", "admin")
    gone = erin_z.delete("/v1/matters/deal-z")
    assert gone.status_code == 200 and gone.json()["documents"] == 1 and gone.json()["purged"] == 0, gone.text
    assert erin_z.get("/v1/documents").json()["documents"] == []
    assert erin_w.ask(doc_id, {"question": QUESTION}).status_code == 200  # deal-w still holds the file


def _wait_for_an_extraction_worker(served: Served, upload: Future) -> None:
    """Returns once the server runs an extraction worker (``python -I -c ...``, started only by a slot's holder),
    i.e. once the slow `upload` holds its slot. Probing before that raced it: a probe that took the slot first
    made the slow upload wait past QUEUE_WAIT_S and give up as busy, and then every probe got in (seen under
    load). Fails if the upload ends first or no worker starts within a minute."""
    deadline = time.monotonic() + 60
    while True:
        for entry in Path("/proc").iterdir():
            try:
                stat = (entry / "stat").read_text()
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError):
                continue  # not a process, or one that ended meanwhile
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == served.process.pid and argv[1:3] == [b"-I", b"-c"]:
                return
        assert not upload.done(), f"the slow upload ended before it was seen extracting: {upload.result().text}"
        assert time.monotonic() < deadline, "no extraction worker started within a minute"
        time.sleep(0.02)


def test_a_busy_extractor_answers_503_with_retry_after_but_stored_documents_pass(
    tmp_path: Path, sample_pdf: Path, eval_dir: Path
) -> None:
    """One extraction slot, held by a real slow contract (pypdf needs minutes for it; the bound cuts it at
    20 s): a new upload waits 1 s and is refused as busy; a document already in the store does not wait."""
    from concurrent.futures import ThreadPoolExecutor

    slow = (eval_dir / "bad-pdfs" / "cuad-CERES-slow-extraction.pdf").read_bytes()
    env = {
        "DOCPIPE_EXTRACTION__MAX_CONCURRENT": "1",
        "DOCPIPE_EXTRACTION__QUEUE_WAIT_S": "1",
        "DOCPIPE_EXTRACTION__TIMEOUT_S": "20",
        "DOCPIPE_EXTRACTION__EXTRACTOR": "pypdf",
    }
    with serving(tmp_path / "home", "--engine", "echo", "--no-ui", token=None, env=env) as served:
        local = Client(served, "none")
        local.headers = {}
        assert local.upload(sample_pdf.read_bytes(), "msa.pdf").status_code == 200
        with ThreadPoolExecutor(1) as pool:
            holder = pool.submit(local.upload, slow, "ceres.pdf")
            _wait_for_an_extraction_worker(served, holder)  # the slow upload holds the slot
            probe = local.upload(sample_pdf.read_bytes() + b"\n% probe\n", "new.pdf")
            assert_error(probe, 503, "busy", "try again")
            assert int(probe.headers["Retry-After"]) >= 1
            again = local.upload(sample_pdf.read_bytes(), "msa.pdf")
            assert again.status_code == 200, again.text
            assert holder.result(timeout=120).status_code in (200, 422)


def test_one_users_slow_uploads_leave_a_slot_for_everyone_else(
    tmp_path: Path, sample_pdf: Path, eval_dir: Path
) -> None:
    """Two slots: Mallory's slow real contract holds one; her next new upload is refused as busy, while
    Alice's upload, at the same moment, takes the other slot and is ingested."""
    from concurrent.futures import ThreadPoolExecutor

    home = tmp_path / "home"
    home.mkdir()
    mallory, alice = new_key(home, "mallory", "deal-m:write"), new_key(home, "alice", "deal-a:write")
    slow = (eval_dir / "bad-pdfs" / "cuad-CERES-slow-extraction.pdf").read_bytes()
    env = {
        "DOCPIPE_EXTRACTION__MAX_CONCURRENT": "2",
        "DOCPIPE_EXTRACTION__QUEUE_WAIT_S": "1",
        "DOCPIPE_EXTRACTION__TIMEOUT_S": "20",
        "DOCPIPE_EXTRACTION__EXTRACTOR": "pypdf",
    }
    with serving(home, "--engine", "echo", "--no-ui", token=None, env=env) as served:
        m, a = Client(served, mallory), Client(served, alice)
        with ThreadPoolExecutor(1) as pool:
            holder = pool.submit(m.upload, slow, "ceres.pdf")
            _wait_for_an_extraction_worker(served, holder)  # the slow upload holds its slot
            probe = m.upload(sample_pdf.read_bytes() + b"\n% probe\n", "more.pdf")
            assert_error(probe, 503, "busy", "your other upload")
            mine = a.upload(sample_pdf.read_bytes() + b"\n% alice\n", "alice.pdf")
            assert mine.status_code == 200, mine.text
            assert holder.result(timeout=120).status_code in (200, 422)
